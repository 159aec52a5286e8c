"""The exact command for a proposal, built before review so the reviewers judge what would be sent.

The launch command is looked up in a fixed order (tools.launch_source) and never guessed; when
no source has it, the plan says so and asks the person to set `--launch-command`. The Launcher
pane's history is not a source: the training program prints into that pane too, and a printed
line cannot be told from a typed one. A launch line seen there is only shown, in the plan's
problem, as a guess the person may confirm by passing it as `--launch-command`; no command is
built from it, so the reviewers never see, let alone approve, a command taken from the pane.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlagent.models.actions import ActionKind, CommandPlan, LaunchCommand, LaunchSource, TmuxTarget
from rlagent.models.run import Framework
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools import launch_source
from rlagent.tools.adapters import adapter_for
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.framework_command import resume_argv
from rlagent.tools.launch_command import CommandError, build_argv, command_line, parse_launch_command
from rlagent.tools.processes import ProcessProbe, SystemProcesses
from rlagent.tools.resubmit import build_resubmit_argv, resubmit_script, scancel_argv
from rlagent.tools.tmux import PaneOpener, TmuxError, open_launcher

ASK_FOR_IT = (
    "the run's launch command was not found: set it with --launch-command '...' (or launch_command in the config); "
    "rlagent never guesses it"
)


@dataclass(frozen=True)
class PlanDeps:
    target: TmuxTarget
    launch_command: str | None = None
    """A person's `--launch-command` / config `launch_command`: the first source."""
    live: bool = True
    """May look at processes and the tmux pane (not for an offline, recorded run)."""
    processes: ProcessProbe = field(default_factory=SystemProcesses)
    """Reads WANDB_ARGS from the run's processes' relatives."""
    open_pane: PaneOpener = open_launcher
    """Reaches the Launcher pane, whose history may show a launch line: only ever a guess offered
    to the person, never a source."""


def find_launch_command(state: CheckinState, deps: PlanDeps) -> tuple[LaunchCommand | None, list[str]]:
    """(the launch command, what was tried without success)."""
    tried: list[str] = []
    if deps.launch_command:
        try:
            argv = parse_launch_command(deps.launch_command)
        except CommandError as exc:
            return None, [f"--launch-command / launch_command: {exc}"]
        return LaunchCommand(argv=argv, source=LaunchSource.CONFIG, detail="--launch-command / config launch_command"), tried
    processes = state.out.observation.live.processes if state.out.observation else None
    if processes:
        found = deps.processes.launch_command([p.pid for p in processes])
        if found:
            return found, tried
    if state.memory.launch_seen is not None:
        seen = state.memory.launch_seen
        return seen.model_copy(update={"detail": f"{seen.detail}, read while the run was alive"}), tried
    tried.append("WANDB_ARGS: no live untitled process of the run to read it from (setproctitle hides the titled ones)")
    found = launch_source.from_sbatch(Path(state.run.run_dir)) or framework_launch(state)
    if found:
        return found, tried
    tried.append(
        "rl.sbatch: none in the run dir"
        if state.run.framework is Framework.PRIME_RL
        else "no launch script (*.sh) in the run dir"
    )
    if deps.live:
        guess = pane_guess(state, deps)
        if guess:
            tried.append(guess)
    return None, tried


def pane_guess(state: CheckinState, deps: PlanDeps) -> str | None:
    """A launch line in the Launcher pane's history, offered as a guess for the person to confirm
    (never used: the pane mixes what was typed with what the training program printed)."""
    try:
        lines = deps.open_pane(deps.target).lines()
    except TmuxError:
        return None
    found = launch_source.from_pane_history(lines, state.run.name, state.run.run_dir)
    if found is None:
        return None
    shown = command_line(found.argv).replace("`", "'")
    shown = shown if len(shown) <= 300 else shown[:299] + "…"
    return (
        f"{found.detail} shows a line that may be it, {shown}, but pane text cannot be told from program output: "
        "if it is the run's launch command, confirm it by passing it as --launch-command"
    )


def plan_command(state: CheckinState, deps: PlanDeps) -> CommandPlan:
    proposal = state.out.proposal
    assert proposal is not None, "a plan is made for a proposal"
    if proposal.action is ActionKind.STOP:
        if proposal.job_id:
            try:
                argv = scancel_argv(proposal.job_id)
            except CommandError as exc:
                return CommandPlan(target=deps.target, problem=str(exc))
            return CommandPlan(target=deps.target, send=command_line(argv), argv=argv)
        return CommandPlan(target=deps.target, send="C-c", keys=True)
    if proposal.action is ActionKind.RESUBMIT:
        return plan_resubmit(state, deps)
    launch, tried = find_launch_command(state, deps)
    if launch is None:
        return CommandPlan(
            target=deps.target, problem=f"the run's launch command was not found ({'; '.join(tried)}); {ASK_FOR_IT}"
        )
    run = state.run
    if run.framework is not Framework.PRIME_RL:
        return _framework_plan(state, deps, launch)
    resume = newest_complete(checkpoint_parts(Path(run.run_dir), run.layout, newest=10**6))
    if resume is None:
        return CommandPlan(target=deps.target, launch=launch, problem="no complete checkpoint to resume from")
    try:
        argv = build_argv(
            launch.argv,
            layout=run.layout.value,
            run_dir=run.run_dir,
            run_name=run.name,
            resume_step=resume,
            overrides=proposal.overrides,
            max_steps=state.memory.config.max_steps,
        )
    except CommandError as exc:
        return CommandPlan(target=deps.target, launch=launch, resume_step=resume, problem=str(exc))
    return CommandPlan(target=deps.target, launch=launch, send=command_line(argv), argv=argv, resume_step=resume)


def plan_resubmit(state: CheckinState, deps: PlanDeps) -> CommandPlan:
    """`sbatch <the run's script> <resume flags>` (tools.resubmit)."""
    proposal, run = state.out.proposal, state.run
    assert proposal is not None
    script, why = resubmit_script(Path(run.run_dir))
    if script is None:
        return CommandPlan(target=deps.target, problem=f"no batch script to resubmit: {why}")
    launch = LaunchCommand(
        argv=[str(script)],
        source=LaunchSource.SBATCH,
        detail=f"{script.name}, the run's batch script (it passes its arguments to rl)",
    )
    resume = newest_complete(checkpoint_parts(Path(run.run_dir), run.layout, newest=10**6))
    if resume is None:
        return CommandPlan(target=deps.target, launch=launch, problem="no complete checkpoint to resume from")
    try:
        argv = build_resubmit_argv(
            script, layout=run.layout.value, run_dir=run.run_dir, run_name=run.name, resume_step=resume,
            overrides=proposal.overrides, max_steps=state.memory.config.max_steps,
        )  # fmt: skip
    except CommandError as exc:
        return CommandPlan(target=deps.target, launch=launch, resume_step=resume, problem=str(exc))
    return CommandPlan(target=deps.target, launch=launch, send=command_line(argv), argv=argv, resume_step=resume)


def framework_launch(state: CheckinState) -> LaunchCommand | None:
    """verl/TRL/OpenRLHF: the run's launch script, run again with `bash` (the scripts pass "$@" on)."""
    if state.run.framework is Framework.PRIME_RL:
        return None
    script = adapter_for(state.run.framework).launch_script(Path(state.run.run_dir))
    if script is None:
        return None
    return LaunchCommand(argv=["bash", script.name], source=LaunchSource.LAUNCH_SCRIPT, detail=f"{script.name} in the run dir")


def framework_argv(state: CheckinState, launch: LaunchCommand) -> tuple[list[str], int | None]:
    """The resume command of a verl/TRL/OpenRLHF run (CommandError when it cannot resume)."""
    adapter = adapter_for(state.run.framework)
    plan = adapter.resume_plan(Path(state.run.run_dir), launch.argv)
    return resume_argv(launch.argv, plan), plan.step


def _framework_plan(state: CheckinState, deps: PlanDeps, launch: LaunchCommand) -> CommandPlan:
    try:
        argv, step = framework_argv(state, launch)
    except CommandError as exc:
        return CommandPlan(target=deps.target, launch=launch, problem=str(exc))
    return CommandPlan(target=deps.target, launch=launch, send=command_line(argv), argv=argv, resume_step=step)


def make_launch_probe(probe: ProcessProbe | None = None) -> Callable[[CheckinState], dict]:
    """A node that remembers the launch command while the run is alive (after a crash no process
    is left to read WANDB_ARGS from)."""
    probe = probe or SystemProcesses()

    def launch_probe(state: CheckinState) -> dict:
        processes = state.out.observation.live.processes if state.out.observation else None
        if not processes:
            return {}
        found = probe.launch_command([p.pid for p in processes])
        return {"launch_seen": found} if found is not None and found != state.memory.launch_seen else {}

    return typed_node(launch_probe)
