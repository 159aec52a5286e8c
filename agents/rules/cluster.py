"""Cluster rules: the run's SLURM jobs (state, pending reason, requeue, how a job ended, its time
limit against the steps left) and its multi-node logs (the first failing rank, a node gone
silent while the others progress). Pure functions of the RuleContext, like every rule.

SLURM states map to findings as follows (the existing ids also fire where they fit: a FAILED,
TIMEOUT, NODE_FAIL or OUT_OF_MEMORY job is `run_crashed`, OUT_OF_MEMORY is `host_oom` too):
PENDING -> `slurm_pending` (info; a warning for reasons that never clear by waiting),
PREEMPTED/REQUEUED or a requeued job -> `slurm_preempted`, FAILED/BOOT_FAIL/DEADLINE/CANCELLED ->
`slurm_job_failed`, TIMEOUT -> `slurm_timeout`, NODE_FAIL -> `node_fail`, OUT_OF_MEMORY ->
`slurm_oom`.
"""

from __future__ import annotations

from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.context import RuleContext, aware, fmt
from rlagent.models.cluster import TreeFile
from rlagent.models.findings import Finding
from rlagent.models.observation import LogEvent
from rlagent.models.run import Severity
from rlagent.models.slurm import SlurmJob
from rlagent.tools.multinode import first_failure
from rlagent.tools.patterns import message_template
from rlagent.tools.slurm import time_limit_eta

DOWN_IDS = frozenset({"slurm_job_failed", "slurm_timeout", "node_fail", "slurm_oom"})
"""Cluster findings that mean the run is not training (when not informational)."""
# Pending reasons that waiting does not clear: the job will never start as submitted.
STUCK_REASONS = frozenset(
    {
        "PartitionTimeLimit", "PartitionConfig", "PartitionNodeLimit", "PartitionDown", "PartitionInactive",
        "DependencyNeverSatisfied", "ReqNodeNotAvail", "InvalidAccount", "InvalidQOS", "AccountNotAllowed",
        "QOSMaxWallDurationPerJobLimit", "BadConstraints", "JobHeldAdmin", "JobHeldUser", "launch_failed_requeued_held",
    }
)  # fmt: skip
TIME_LIMIT_CRITICAL_S = 3600.0
"""time_limit_risk is critical when the kill is less than this far away."""


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _cite(job: SlurmJob) -> str:
    parts = [f"SLURM job {job.job_id} ({job.name or 'unnamed'}) JobState={job.state}"]
    if job.reason:
        parts.append(f"Reason={job.reason}")
    if job.exit_code is not None:
        parts.append(f"ExitCode={job.exit_code}:{job.exit_signal or 0}")
    if job.nodes:
        parts.append(f"NodeList={job.nodes}")
    if job.elapsed_s is not None:
        parts.append(f"Elapsed={_clock(job.elapsed_s)}")
    if job.time_limit_s is not None:
        parts.append(f"TimeLimit={_clock(job.time_limit_s)}")
    how = ", ".join(job.matched_by)
    return " ".join(parts) + f" ({job.source}{'; matched by ' + how if how else ''})"


def run_jobs(ctx: RuleContext) -> list[SlurmJob]:
    report = ctx.observation.live.slurm_jobs
    return list(report.jobs) if report else []


def newest_job(ctx: RuleContext) -> SlurmJob | None:
    """The run's newest job (by id): a resubmitted job supersedes the ones before it."""
    jobs = run_jobs(ctx)
    if not jobs:
        return None

    def key(job: SlurmJob) -> tuple[int, str]:
        raw = (job.raw_job_id or job.job_id).split("_")[0]
        return (int(raw) if raw.isdigit() else -1, job.job_id)

    return max(jobs, key=key)


def slurm_job_active(ctx: RuleContext) -> bool:
    """The run's newest SLURM job holds (or waits for) its allocation: its processes, if any, run
    on the job's nodes, where the local process table does not see them."""
    job = newest_job(ctx)
    return job is not None and job.active


def slurm_findings(ctx: RuleContext) -> list[Finding]:
    """Every finding the state of the run's newest job supports."""
    job = newest_job(ctx)
    if job is None or job.state is None:
        return []
    state, at = job.state, ctx.step
    out: list[Finding] = []
    if state == "PENDING":
        reason = job.reason or "no reason given"
        stuck = reason in STUCK_REASONS or (reason.startswith("Dependency") and "Never" in reason)
        out.append(
            finding(
                id="slurm_pending",
                severity=Severity.WARNING if stuck else Severity.INFO,
                summary=f"SLURM job {job.job_id} is pending ({reason})"
                + (": it will not start as submitted" if stuck else ": waiting for the scheduler, not an error"),
                evidence=[_cite(job)],
            )
        )
    if state in {"PREEMPTED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"} or (job.restarts or 0) > 0:
        out.append(
            finding(
                id="slurm_preempted",
                severity=Severity.WARNING,
                summary=f"SLURM job {job.job_id} was preempted or requeued ({state}, {job.restarts or 0} restarts): "
                "it resumes from its newest checkpoint when it runs again",
                evidence=[_cite(job)],
                last_step=at,
            )
        )
    ended = {
        "FAILED": ("slurm_job_failed", Severity.CRITICAL, f"ended FAILED with exit code {job.exit_code}"),
        "BOOT_FAIL": ("slurm_job_failed", Severity.CRITICAL, "failed to boot its nodes (BOOT_FAIL)"),
        "DEADLINE": ("slurm_job_failed", Severity.CRITICAL, "was ended at its deadline"),
        "CANCELLED": ("slurm_job_failed", Severity.WARNING, "was cancelled (scancel, or a person)"),
        "TIMEOUT": (
            "slurm_timeout",
            Severity.CRITICAL,
            f"was killed at its time limit ({_clock(job.time_limit_s)}) after {_clock(job.elapsed_s)}",
        ),
        "NODE_FAIL": ("node_fail", Severity.CRITICAL, f"lost a node (NODE_FAIL on {job.nodes or 'its nodes'})"),
        "OUT_OF_MEMORY": ("slurm_oom", Severity.CRITICAL, "was killed OUT_OF_MEMORY (host RAM of its cgroup)"),
    }
    if state in ended:
        finding_id, severity, what = ended[state]
        last = f" at step {at}" if at is not None else ""
        out.append(
            finding(
                id=finding_id,
                severity=severity,
                summary=f"SLURM job {job.job_id} {what}{last}",
                evidence=[_cite(job)],
                last_step=at,
            )
        )
    return out


def time_limit_risk(ctx: RuleContext) -> Finding | None:
    """The running job will be killed at its time limit before max_steps at the current rate."""
    job = newest_job(ctx)
    total, step, per_step = ctx.config.max_steps, ctx.step, ctx.median_step_seconds
    if job is None or job.state != "RUNNING" or not total or step is None or not per_step or ctx.stopped:
        return None
    eta = time_limit_eta(
        step=step,
        max_steps=total,
        seconds_per_step=per_step,
        elapsed_s=job.elapsed_s,
        time_limit_s=job.time_limit_s,
        now=ctx.now,
    )
    if not eta.will_hit_limit or eta.kill_at is None:
        return None
    soon = (eta.kill_in_s or 0) < TIME_LIMIT_CRITICAL_S
    return finding(
        id="time_limit_risk",
        severity=Severity.CRITICAL if soon else Severity.WARNING,
        summary=f"SLURM job {job.job_id} hits its time limit {_clock(job.time_limit_s)} at {eta.kill_at:%Y-%m-%d %H:%M} UTC "
        f"(in {_clock(eta.kill_in_s)}), after step {eta.last_step_before_kill} of {total} at {fmt(per_step)}s a step: "
        f"{total - (eta.last_step_before_kill or step)} steps short; finishing needs {_clock(eta.finish_in_s)} more",
        evidence=[_cite(job), f"median step time {fmt(per_step)}s at step {step}; {eta.steps_left} steps left"],
        first_step=step,
        last_step=eta.last_step_before_kill,
    )


def _tree(ctx: RuleContext) -> dict[str, TreeFile]:
    view = ctx.observation.multinode
    return {f.file: f for f in view.files} if view else {}


def _where(event: LogEvent, files: dict[str, TreeFile]) -> str:
    tree = files.get(event.file)
    return tree.label() if tree else event.file


def rank_failed(ctx: RuleContext) -> Finding | None:
    """Errors across the multi-node logs, grouped, with the first failing rank as the root cause."""
    files = _tree(ctx)
    if not files:
        return None
    events = [e for e in ctx.events if e.kind in ("rank_error", "root_cause") and e.file in files]
    first = first_failure(events, files)
    if first is None:
        return None
    root, how = first
    errors = [e for e in events if e.kind == "rank_error"]
    groups: dict[str, list[LogEvent]] = {}
    for event in errors:
        groups.setdefault(message_template(event.message)[:100], []).append(event)
    # A crash makes a record on every rank, more than a check-in keeps (the newest 50 of a kind and
    # the first): the files count every record they hold; the kept ones are grouped below.
    counted = [f for f in files.values() if f.errors]
    total = max(len(errors), sum(f.errors for f in counted))
    places = {f.file for f in counted} | {e.file for e in errors}
    kept = f" ({len(errors)} of them kept)" if total > len(errors) else ""
    summary_groups = "; ".join(
        f"{len(group)}x `{group[0].message[:80]}` on {', '.join(sorted({_where(e, files) for e in group})[:4])}"
        + (" ..." if len({e.file for e in group}) > 4 else "")
        for group in sorted(groups.values(), key=len, reverse=True)[:3]
    )
    tracebacks = [e for e in errors if e.detail.startswith("traceback")]
    own = [e for e in tracebacks if root.kind != "root_cause" or e.file != root.file]
    if root.kind == "root_cause":
        fields = dict(part.split(" ", 1) for part in root.message.split(": ", 1)[-1].split(", ") if " " in part)
        who = f"rank {fields.get('rank', '?')} on host {fields.get('host', '?')} at {fields.get('time', '?')}"
        if len({e.file for e in own}) == 1:
            who += f" ({_where(own[0], files)}: {own[0].message[:120]})"
    else:
        when = f" at {aware(root.time):%H:%M:%S} UTC" if root.time else ""
        who = f"{_where(root, files)}{when}: {root.message[:140]}"
    cited = [root, *own[:1]]
    return finding(
        id="rank_failed",
        severity=Severity.CRITICAL if tracebacks or root.kind == "root_cause" else Severity.WARNING,
        summary=f"first failing rank: {who}, by {how}; "
        f"{total} error records on {len(places)} node/rank logs{kept}: {summary_groups}",
        evidence=[*(e.cite() for e in cited), *(e.cite() for e in errors if e not in cited)][:6],
        last_step=ctx.step,
    )


def node_silent(ctx: RuleContext) -> Finding | None:
    """A node or rank whose log went quiet while its peers (same role) kept writing."""
    view = ctx.observation.multinode
    if view is None or ctx.stopped:
        return None  # a crash or a finish stops every node: rank_failed or run_finished speaks
    t = ctx.thresholds
    per_step = ctx.median_step_seconds
    limit = max(t.stall_min_minutes * 60, t.stall_step_multiple * per_step if per_step else 0.0)
    silent: list[tuple[TreeFile, float, TreeFile]] = []
    for role in ("trainer", "inference"):
        peers = [f for f in view.files if f.role == role and f.last_time is not None and f.stream != "stderr" and not f.errors]
        if len(peers) < 2:
            continue
        newest = max(peers, key=lambda f: aware(f.last_time))  # type: ignore[arg-type]
        if (ctx.now - aware(newest.last_time)).total_seconds() > limit:  # type: ignore[arg-type]
            continue  # every peer is quiet: run_stalled speaks for the whole run
        for peer in peers:
            quiet = (aware(newest.last_time) - aware(peer.last_time)).total_seconds()  # type: ignore[arg-type]
            if quiet > limit:
                silent.append((peer, quiet, newest))
    if not silent:
        return None
    silent.sort(key=lambda item: -item[1])
    peer, quiet, newest = silent[0]
    step = f" (last step {peer.step}, others at {newest.step})" if peer.step is not None and newest.step is not None else ""
    names = ", ".join(p.label() for p, _, _ in silent[:6]) + (" ..." if len(silent) > 6 else "")
    return finding(
        id="node_silent",
        severity=Severity.WARNING,
        summary=f"{names} silent for {_clock(quiet)} while {newest.label()} keeps writing{step}: a hang on one node? "
        f"(limit {_clock(limit)})",
        evidence=[
            f"{p.file}: last line at {aware(p.last_time):%H:%M:%S} UTC" + (f", step {p.step}" if p.step is not None else "")  # type: ignore[arg-type]
            for p, _, _ in silent[:4]
        ]
        + [f"{newest.file}: last line at {aware(newest.last_time):%H:%M:%S} UTC"],  # type: ignore[arg-type]
        last_step=peer.step,
    )


def _of(ctx: RuleContext, finding_id: str) -> Finding | None:
    return next((f for f in slurm_findings(ctx) if f.id == finding_id), None)


def slurm_job_failed(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "slurm_job_failed")


def slurm_timeout(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "slurm_timeout")


def slurm_oom(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "slurm_oom")


def node_fail(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "node_fail")


def slurm_pending(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "slurm_pending")


def slurm_preempted(ctx: RuleContext) -> Finding | None:
    return _of(ctx, "slurm_preempted")


RULES = (
    slurm_job_failed,
    slurm_timeout,
    slurm_oom,
    node_fail,
    slurm_pending,
    slurm_preempted,
    time_limit_risk,
    rank_failed,
    node_silent,
)
