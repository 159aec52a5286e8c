"""The safety officer: is it safe to send this exact command now?

- a command could be built, from the run's own launch command (never a guess);
- restarts: the checkpoint it resumes from is complete on disk (both trainer/.metadata and
  orchestrator/progress.pt) and is the newest complete one; the run did not finish; the run is
  not running; the restart budget (default 3 per 24 h per run) is not spent; it is not a loop
  (the last restart resumed from the same checkpoint and the run went down again);
- the command is exactly what rlagent builds from the launch command and the typed action;
- stops: the run is running (a Ctrl-C into an idle pane is pointless); a scancel: its job is active;
- resubmits (SLURM): `sbatch` of the run's own batch script, rebuilt here; no job of the run is
  still active (pending or running).
"""

from __future__ import annotations

import shlex
from datetime import timedelta

from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import RESTARTS, ActionKind, Check, LaunchSource, Verdict
from rlagent.models.run import Framework
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.launch_command import CommandError, build_argv, flag_value
from rlagent.tools.resubmit import build_resubmit_argv, resubmit_script

BUDGET_WINDOW = timedelta(hours=24)


class SafetyOfficer:
    name = "safety officer"
    duty = "checkpoint, finished run, restart budget and loops, the exact command"

    def __init__(self, max_restarts_per_day: int = 3) -> None:
        self.max_restarts = max_restarts_per_day

    def review(self, packet: ReviewPacket) -> Verdict:
        plan = packet.plan
        checks = [
            Check(name="command_built", ok=False, detail=plan.problem or "no command")
            if plan.send is None
            else Check(name="command_built", ok=True, detail=f"from {plan.launch.detail}" if plan.launch else plan.display()),
            self._not_finished(packet),
        ]
        if packet.proposal.action in RESTARTS:
            checks += [self._checkpoint(packet), self._down(packet), self._budget(packet), self._no_loop(packet)]
            if plan.send is not None:
                checks.append(self._matches(packet))
        else:
            checks.append(self._running(packet))
        return Verdict.from_checks(self.name, self.duty, checks)

    def _not_finished(self, packet: ReviewPacket) -> Check:
        if any(f.id == "run_finished" for f in packet.findings):
            return Check(name="not_finished", ok=False, detail="the run finished")
        step, total = packet.plan.resume_step, packet.config.max_steps
        if step is not None and total is not None and step >= total:
            return Check(name="not_finished", ok=False, detail=f"checkpoint step {step} is the run's last ({total})")
        return Check(name="not_finished", ok=True, detail="no finish line; steps remain")

    def _checkpoint(self, packet: ReviewPacket) -> Check:
        if packet.run.framework is not Framework.PRIME_RL:
            from rlagent.tools.adapters import adapter_for

            newest = adapter_for(packet.run.framework).newest_checkpoint(packet.run_dir)
        else:
            newest = newest_complete(checkpoint_parts(packet.run_dir, packet.run.layout, newest=10**6))
        step = packet.plan.resume_step
        if newest is None:
            return Check(name="checkpoint_complete", ok=False, detail="no complete checkpoint to resume from")
        if step is None:
            return Check(name="checkpoint_complete", ok=False, detail=f"no command to resume from step {newest} was built")
        if step != newest:
            return Check(
                name="checkpoint_complete", ok=False, detail=f"the command resumes from {step}, the newest complete is {newest}"
            )
        if packet.proposal.resume_step != newest:
            return Check(
                name="resume_step",
                ok=False,
                detail=f"proposed for checkpoint {packet.proposal.resume_step}, the newest complete on disk is {newest}",
            )
        if packet.run.framework is not Framework.PRIME_RL:
            return Check(name="checkpoint_complete", ok=True, detail=f"{packet.run.framework.value} checkpoint of step {newest}")
        return Check(name="checkpoint_complete", ok=True, detail=f"checkpoints/step_{newest}: trainer/.metadata and progress.pt")

    def _down(self, packet: ReviewPacket) -> Check:
        if packet.proposal.action is ActionKind.RESUBMIT:
            return self._no_active_job(packet)
        processes = packet.observation.live.processes
        if processes is None:
            return Check(name="run_down", ok=False, detail="processes not probed (offline): cannot confirm the run is down")
        if processes:
            alive = ", ".join(f"{p.role} (pid {p.pid})" for p in processes)
            return Check(name="run_down", ok=False, detail=f"the run still has live processes: {alive}")
        return Check(name="run_down", ok=True, detail="no live PRIME-RL process of this run")

    def _no_active_job(self, packet: ReviewPacket) -> Check:
        report = packet.observation.live.slurm_jobs
        if report is None:
            return Check(name="run_down", ok=False, detail="SLURM not probed: cannot confirm the run has no job left")
        active = [f"{j.job_id} ({j.state})" for j in report.jobs if j.active]
        if active:
            return Check(name="run_down", ok=False, detail=f"the run still has SLURM job(s) {', '.join(active)}")
        ended = ", ".join(f"{j.job_id} {j.state}" for j in report.jobs) or "none"
        return Check(name="run_down", ok=True, detail=f"no active SLURM job of this run (jobs: {ended})")

    def _running(self, packet: ReviewPacket) -> Check:
        job_id = packet.proposal.job_id
        if job_id:
            report = packet.observation.live.slurm_jobs
            job = report.job(job_id) if report else None
            if job is None or not job.active:
                return Check(name="run_running", ok=False, detail=f"SLURM job {job_id} is not active: nothing to cancel")
            return Check(name="run_running", ok=True, detail=f"SLURM job {job_id} is {job.state}")
        processes = packet.observation.live.processes
        if not processes:
            why = "processes not probed (offline)" if processes is None else "no live PRIME-RL process of this run"
            return Check(name="run_running", ok=False, detail=f"{why}: nothing to stop")
        return Check(name="run_running", ok=True, detail=", ".join(f"{p.role} (pid {p.pid})" for p in processes) + " alive")

    def _budget(self, packet: ReviewPacket) -> Check:
        if packet.now is None:
            return Check(name="restart_budget", ok=False, detail="no clock")
        recent = [d for d in packet.dispatches if d.action in RESTARTS and d.sent_at > packet.now - BUDGET_WINDOW]
        if len(recent) >= self.max_restarts:
            return Check(
                name="restart_budget",
                ok=False,
                detail=f"{len(recent)} restarts sent in the last 24 h (limit {self.max_restarts})",
            )
        return Check(name="restart_budget", ok=True, detail=f"{len(recent)} of {self.max_restarts} restarts used in 24 h")

    def _no_loop(self, packet: ReviewPacket) -> Check:
        restarts = [d for d in packet.dispatches if d.action in RESTARTS]
        if restarts and restarts[-1].resume_step == packet.plan.resume_step:
            last = restarts[-1]
            return Check(
                name="no_restart_loop",
                ok=False,
                detail=f"the restart sent at {last.sent_at:%Y-%m-%d %H:%M} UTC resumed from step {last.resume_step} too "
                "and the run went down again before a newer checkpoint",
            )
        return Check(name="no_restart_loop", ok=True, detail="not a repeat of the last restart")

    def _matches_framework(self, packet: ReviewPacket) -> Check:
        """verl/TRL/OpenRLHF: rebuilt from the launch script and the adapter's resume plan."""
        from rlagent.tools.adapters import adapter_for
        from rlagent.tools.framework_command import resume_argv

        plan, run = packet.plan, packet.run
        assert plan.launch is not None
        resume = adapter_for(run.framework).resume_plan(packet.run_dir, plan.launch.argv)
        try:
            expected = resume_argv(plan.launch.argv, resume)
        except CommandError as exc:
            return Check(name="matches_launch_command", ok=False, detail=str(exc))
        try:
            sent_words = shlex.split(plan.send or "")
        except ValueError:
            sent_words = []
        if expected != plan.argv or sent_words != expected or resume.step != plan.resume_step:
            return Check(name="matches_launch_command", ok=False, detail="the command differs from the one rebuilt independently")
        return Check(
            name="matches_launch_command",
            ok=True,
            detail=f"rebuilt word for word from {plan.launch.detail} and {run.framework.value}'s resume flags",
        )

    def _matches(self, packet: ReviewPacket) -> Check:
        plan, run = packet.plan, packet.run
        if plan.launch is None or plan.resume_step is None:
            return Check(name="matches_launch_command", ok=False, detail="no launch command or resume step")
        if plan.launch.source is LaunchSource.LAUNCHER_PANE:  # printed text looks typed: a guess, never approved
            return Check(name="matches_launch_command", ok=False, detail="built from the Launcher pane's history (a guess)")
        if run.framework is not Framework.PRIME_RL:
            return self._matches_framework(packet)
        try:
            expected = rebuild(packet)
        except CommandError as exc:
            return Check(name="matches_launch_command", ok=False, detail=str(exc))
        try:
            sent_words = shlex.split(plan.send or "")
        except ValueError:
            sent_words = []
        if expected != plan.argv or sent_words != expected:
            return Check(name="matches_launch_command", ok=False, detail="the command differs from the one rebuilt independently")
        identity = (
            flag_value(expected, "--run.name") == run.name if run.layout.value == "H" else flag_value(expected, "--output-dir")
        )
        if not identity:
            return Check(name="matches_launch_command", ok=False, detail="the command does not identify the run")
        return Check(
            name="matches_launch_command",
            ok=True,
            detail=f"rebuilt word for word from the launch command ({plan.launch.source.value}) and the typed action",
        )


def rebuild(packet: ReviewPacket) -> list[str]:
    """The command rebuilt independently from the reviewed plan's launch command and the typed action."""
    plan, run = packet.plan, packet.run
    assert plan.launch is not None and plan.resume_step is not None
    if packet.proposal.action is ActionKind.RESUBMIT:
        script, why = resubmit_script(packet.run_dir)
        if script is None or [str(script)] != plan.launch.argv:
            raise CommandError(f"the batch script is not the one reviewed ({why or script})")
        return build_resubmit_argv(
            script, layout=run.layout.value, run_dir=run.run_dir, run_name=run.name, resume_step=plan.resume_step,
            overrides=packet.proposal.overrides, max_steps=packet.config.max_steps,
        )  # fmt: skip
    return build_argv(
        plan.launch.argv,
        layout=run.layout.value,
        run_dir=run.run_dir,
        run_name=run.name,
        resume_step=plan.resume_step,
        overrides=packet.proposal.overrides,
        max_steps=packet.config.max_steps,
    )
