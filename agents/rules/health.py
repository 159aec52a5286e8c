"""Health rules: is the run alive, and is its infrastructure (GPUs, hosts, NCCL, inference,
envs, checkpoints, disk) holding up. Mostly judged from classified log events and live probes.
"""

from __future__ import annotations

import re

from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.cluster import slurm_job_active
from rlagent.agents.rules.context import RuleContext, aware, cite_events, file_process, fmt, pct, point
from rlagent.models.findings import Finding
from rlagent.models.observation import EVENTS_PER_KIND, LogEvent
from rlagent.models.run import Severity

CKPT_PARTS = ("trainer", "orchestrator")
# The last line of a traceback names the exception: the cause worth quoting next to the crash line.
_EXCEPTION_LINE = re.compile(r"^\s*(?:\[\w+\]:)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Failure|Exit)\b.*)")
_TRACEBACK_LINES = 200
# Env workers come and go with load; only their server is a required process.
_TRANSIENT_ROLE = re.compile(r"^EnvWorker\d*$")
# verl/TRL/OpenRLHF: Ray idle workers and per-rank processes come and go; the trainer loop is what counts.
_FRAMEWORK_TRANSIENT = frozenset({"ray", "IDLE", "rank", "vLLM"})


def _step_of(events: list[LogEvent]) -> tuple[int | None, int | None]:
    steps = [e.step for e in events if e.step is not None]
    return (min(steps), max(steps)) if steps else (None, None)


def _cause(event: LogEvent) -> tuple[str, str] | None:
    """(cited line, exception text) of the last exception line in a crash's traceback; the
    continuation lines follow the head line one per line, so its line number is known."""
    lines = event.detail.split("\n") if event.detail else []
    for index in range(len(lines) - 1, -1, -1):
        match = _EXCEPTION_LINE.match(lines[index])
        if match:
            return f"{event.file}:{event.line + index + 1}: {lines[index].strip()}", match[1].strip()
    return None


def _cause_nearby(ctx: RuleContext, event: LogEvent) -> tuple[str, str] | None:
    """The exception line when it became an event of its own just below the crash line (the
    collector keeps only the head of a long traceback in `detail`; a CUDA OOM line is its own
    event)."""
    below = sorted(
        (e for e in ctx.events if e.file == event.file and event.line < e.line <= event.line + _TRACEBACK_LINES),
        key=lambda e: (e.kind == "crash", e.line),  # torchrun's own ChildFailedError echo last
    )
    for other in below:
        match = _EXCEPTION_LINE.match(other.message)
        if match:
            return other.cite(), match[1].strip()
    return None


def _crash_rank(event: LogEvent) -> tuple[int, int]:
    """Which crash line tells the story best: `Fatal error in ...` (with its traceback), then
    the launcher's `... failed with exit code N`, then the rest (torchrun's echo), in line order."""
    if "Fatal error in" in event.message:
        return 0, event.line
    if "exit code" in event.message:
        return 1, event.line
    return 2, event.line


def _at(event: LogEvent) -> str:
    return f" at step {event.step}" if event.step is not None else ""


def run_crashed(ctx: RuleContext) -> Finding | None:
    crashes = sorted(ctx.crash_events, key=_crash_rank)
    slurm = ctx.slurm_failure
    if slurm and not crashes:
        return finding(
            id="run_crashed",
            severity=Severity.CRITICAL,
            summary=f"run crashed: SLURM job {slurm[0]} ended {slurm[1]} (last step {ctx.step})",
            evidence=[f"SLURM job {slurm[0]} JobState={slurm[1]} (scontrol)"],
            last_step=ctx.step,
        )
    if crashes:
        first = crashes[0]
        first_step, last_step = _step_of(crashes)
        causes = [c for e in crashes if (c := _cause(e) or _cause_nearby(ctx, e)) is not None]
        evidence = [*cite_events(crashes[:1]), *(line for line, _ in causes[:1]), *cite_events(crashes[1:], 3)]
        because = f" ({causes[0][1].split('. ')[0][:120]})" if causes else ""
        more = f"; {len(crashes)} crash lines" if len(crashes) > 1 else ""
        if slurm:
            evidence.append(f"SLURM job {slurm[0]} JobState={slurm[1]} (scontrol)")
        return finding(
            id="run_crashed",
            severity=Severity.CRITICAL,
            summary=f"run crashed{_at(first)}: {first.message.strip()[:120]}{because}{more}",
            evidence=evidence,
            first_step=first_step,
            last_step=last_step,
        )
    # A crash this check-in read that the run already came back from: worth a note, not an alarm.
    recovered = [
        e
        for e in ctx.of_kind("crash", "host_oom")
        if ("exit code" in e.message or e.kind == "crash")
        and not (e.numbers and all(n == 0 for n in e.numbers))
        and ctx.is_new(e)
    ]
    if not recovered:
        return None
    first = recovered[0]
    return finding(
        id="run_crashed",
        severity=Severity.INFO,
        summary=f"run crashed{_at(first)} and came back since (now at step {ctx.step}): {first.message[:120]}",
        evidence=cite_events(recovered) + cite_events(ctx.of_kind("resumed"), 2),
        first_step=first.step,
        last_step=ctx.step,
    )


def process_down(ctx: RuleContext) -> Finding | None:
    """Live check-ins only: an expected PRIME-RL process is gone while the run has not finished."""
    processes = ctx.observation.live.processes
    if processes is None or ctx.finished or slurm_job_active(ctx):
        return None  # a SLURM job's processes run on its nodes, not here
    alive = {p.role for p in processes}
    required = set(ctx.thresholds.required_roles) if ctx.framework == "prime-rl" else set()
    expected = required | {r for r in ctx.processes_seen if not _TRANSIENT_ROLE.match(r) and r not in _FRAMEWORK_TRANSIENT}
    missing = sorted(expected - alive)
    if not missing:
        return None
    seen = sorted(set(ctx.processes_seen) & set(missing))
    alive_text = ", ".join(sorted(alive)) or "none"
    evidence = [f"no {role} process found" for role in missing]
    evidence += [f"process {p.title} alive (pid {p.pid})" for p in processes]
    if ctx.observation.live.process_match:
        evidence.append(f"processes matched by: {ctx.observation.live.process_match}")
    return finding(
        id="process_down",
        severity=Severity.CRITICAL,
        summary=(
            f"{', '.join(missing)} not running and the run has not finished (alive: {alive_text}"
            + (f"; seen in earlier check-ins: {', '.join(seen)}" if seen else "")
            + f"; last step {ctx.step})"
        ),
        evidence=evidence[:8],
        last_step=ctx.step,
    )


def run_stalled(ctx: RuleContext) -> Finding | None:
    """No new step for longer than max(3 x median step time, 10 min) while the run should train.

    Only steps are judged, not log silence: the H orchestrator prints its pipeline view every
    10 s even when nothing moves, so "logs untouched" would hide exactly the hangs that matter.
    """
    t = ctx.thresholds
    if ctx.stopped:
        return None
    processes = ctx.observation.live.processes
    if processes is not None and not {"Trainer", "Orchestrator"} & {p.role for p in processes} and not slurm_job_active(ctx):
        return None  # nothing alive to stall: process_down speaks
    last_seen = ctx.newest_step_time
    if last_seen is None:
        return None  # before the first step: start-up, not a stall
    trainer = ctx.last_step("trainer")
    if ctx.config.max_steps and trainer is not None and trainer >= ctx.config.max_steps:
        return None  # final save and shutdown
    # A resume restarts the clock: the new attempt loads the model before its first step.
    resumes = [aware(e.time) for e in ctx.of_kind("resumed") if e.time is not None]
    since = max([last_seen, *resumes])
    per_step = ctx.median_step_seconds
    limit = max(t.stall_min_minutes * 60, t.stall_step_multiple * per_step if per_step else 0.0)
    idle = (ctx.now - since).total_seconds()
    if idle <= limit:
        return None
    basis = f"{fmt(t.stall_step_multiple)} x median step {fmt(per_step)}s" if per_step else "no step time known"
    newest = ctx.observation.newest_line_time
    log_note = ""
    if newest is not None:
        quiet = (ctx.now - aware(newest)).total_seconds() / 60
        log_note = f"; logs silent for {quiet:.0f} min" if quiet * 60 > limit else "; logs still being written"
    steps = ", ".join(f"{p} step {s}" for p in ("trainer", "orchestrator") if (s := ctx.last_step(p)) is not None)
    evidence = [
        f"{p} newest step line at {aware(ts).isoformat(timespec='seconds')}" for p, ts in sorted(ctx.history.step_seen_at.items())
    ]
    evidence.append(f"check-in time {ctx.now.isoformat(timespec='seconds')}")
    return finding(
        id="run_stalled",
        severity=Severity.CRITICAL,
        summary=(
            f"no new step for {idle / 60:.0f} min ({steps}); limit {limit / 60:.0f} min "
            f"= max({basis}, {fmt(t.stall_min_minutes)} min){log_note}"
        ),
        evidence=evidence,
        first_step=ctx.step,
        last_step=ctx.step,
    )


def _incident(ctx: RuleContext, finding_id: str, kind: str, label: str) -> Finding | None:
    """Critical while the run has not come back from the line; a note when it already has."""
    events = ctx.of_kind(kind)
    if not events:
        return None
    current = [e for e in events if not ctx.superseded(e)]
    if current:
        first_step, last_step = _step_of(current)
        first = current[0]
        return finding(
            id=finding_id,
            severity=Severity.CRITICAL,
            summary=f"{label}{_at(first)} in {first.file}: {first.message[:140]}"
            + (f" ({len(current)} lines)" if len(current) > 1 else ""),
            evidence=cite_events(current),
            first_step=first_step,
            last_step=last_step,
        )
    recovered = [e for e in events if ctx.is_new(e)]
    if not recovered:
        return None
    first = recovered[0]
    return finding(
        id=finding_id,
        severity=Severity.INFO,
        summary=f"{label}{_at(first)}, but the run came back since (now at step {ctx.step})",
        evidence=cite_events(recovered),
        first_step=first.step,
        last_step=first.step,
    )


def cuda_oom(ctx: RuleContext) -> Finding | None:
    return _incident(ctx, "cuda_oom", "cuda_oom", "CUDA out of memory")


def nccl_error(ctx: RuleContext) -> Finding | None:
    return _incident(ctx, "nccl_error", "nccl", "NCCL error")


def host_oom(ctx: RuleContext) -> Finding | None:
    """Kills by the kernel OOM killer (exit -9, `Killed`, Ray OOM, SLURM OUT_OF_MEMORY), or host
    RAM nearly full now."""
    found = _incident(ctx, "host_oom", "host_oom", "host out of memory")
    slurm = ctx.slurm_failure
    if slurm and slurm[1] == "OUT_OF_MEMORY" and (found is None or found.severity != Severity.CRITICAL):
        found = finding(
            id="host_oom",
            severity=Severity.CRITICAL,
            summary=f"SLURM job {slurm[0]} was killed OUT_OF_MEMORY (host RAM of the job's cgroup)",
            evidence=[f"SLURM job {slurm[0]} JobState=OUT_OF_MEMORY (scontrol)"],
            last_step=ctx.step,
        )
    ram = ctx.observation.live.host_ram_percent
    # The probe reports psutil's percent (0-100), as its name says.
    if ram is None or ram / 100 <= ctx.thresholds.host_ram_high:
        return found
    ram_line = f"host RAM {ram:.1f}% used (live probe; limit {pct(ctx.thresholds.host_ram_high)})"
    if found is not None and found.severity == Severity.CRITICAL:
        found.evidence.append(ram_line)
        return found
    return finding(
        id="host_oom",
        severity=Severity.WARNING,
        summary=f"host RAM {ram:.1f}% used, above {pct(ctx.thresholds.host_ram_high)}: the OOM killer is near",
        evidence=[ram_line, *(found.evidence if found else [])],
        last_step=ctx.step,
    )


def inference_unreachable(ctx: RuleContext) -> Finding | None:
    """`not reached` before the first step is start-up (normal); after it, or `Aborting`, it is not.
    A warning the orchestrator got past (a newer step) is a blip that resolved itself."""
    aborts = [e for e in ctx.of_kind("inference_abort") if not ctx.superseded(e)]
    if aborts:
        return finding(
            id="inference_unreachable",
            severity=Severity.CRITICAL,
            summary=f"orchestrator gave up on the inference server{_at(aborts[0])}: {aborts[0].message[:140]}",
            evidence=cite_events(aborts),
            first_step=aborts[0].step,
            last_step=aborts[-1].step,
        )
    last = ctx.last_step("orchestrator")
    open_ = [
        e
        for e in ctx.of_kind("inference_unreachable")
        if e.step is not None and (last is None or e.step >= last) and not ctx.superseded(e)
    ]
    if not open_:
        return None
    waited = max((e.numbers[0] for e in open_ if e.numbers), default=None)
    waited_text = f", waited {fmt(waited)} s" if waited is not None else ""
    return finding(
        id="inference_unreachable",
        severity=Severity.WARNING,
        summary=(
            f"inference server not reachable after step {open_[0].step} ({len(open_)} warnings, no step since{waited_text})"
        ),
        evidence=cite_events(open_),
        first_step=open_[0].step,
        last_step=open_[-1].step,
    )


def env_errors(ctx: RuleContext) -> Finding | None:
    """Env failures over the last steps: > 5 % of the rollouts, or (rollout count unknown)
    at least doubling window over window. A few failures are normal for envs that run code."""
    t = ctx.thresholds
    window = t.event_window_steps
    recent = ctx.recent_events(["env_error"], window)
    if not recent:
        return None
    last = ctx.last_step("orchestrator")
    steps = [s for s in ctx.history.orchestrator if last is not None and s > last - window]
    n_steps = len(steps) or (min(window, last) if last else 0)
    per_step = ctx.observation.rollouts_per_step or ctx.config.batch_size
    first_step, last_step = _step_of(recent)
    failures = _failed_episodes(ctx, recent, last, window)
    if per_step and n_steps:
        share = failures / (n_steps * per_step)
        if share <= t.errored_high:
            return None
        how = f"{pct(share)} of ~{n_steps * per_step} rollouts, limit {pct(t.errored_high)}"
    else:
        counts = _window_counts(ctx, recent, last, window)
        if counts is None:
            return None
        now, before = counts
        if now < max(2 * before, t.sustain_steps):
            return None
        how = f"up from {before} in the {window} steps before"
    return finding(
        id="env_errors",
        severity=Severity.WARNING,
        summary=f"{failures} failed episodes in the last {window} steps ({how}); newest: {recent[-1].message[:100]}",
        evidence=cite_events(recent),
        first_step=first_step,
        last_step=last_step or last,
    )


def _window_counts(ctx: RuleContext, recent: list[LogEvent], last: int | None, window: int) -> tuple[int, int] | None:
    """Env failures in the last `window` steps and in the `window` steps before them: by the
    orchestrator's uncapped per-step counts when it has them; else by the kept events, unless the
    bound on those (the newest EVENTS_PER_KIND) may have cut the older window short: then None,
    as a rise cannot be told from a steady rate whose older part was not kept."""
    if last is not None:
        now = ctx.history.event_count("env_error", last - window + 1, last, "orchestrator")
        if now:
            return now, ctx.history.event_count("env_error", last - 2 * window + 1, last - window, "orchestrator") or 0
    both, kept = ctx.recent_events(["env_error"], 2 * window), len(ctx.of_kind("env_error"))
    if kept >= EVENTS_PER_KIND and len(both) == kept:
        return None  # every kept one is in the two windows: older ones of them may have been dropped
    return len(recent), len(both) - len(recent)


def _failed_episodes(ctx: RuleContext, recent: list[LogEvent], last: int | None, window: int) -> int:
    """Failed episodes, each counted once. The orchestrator logs one line per failed episode
    (H `Trace failed in group` / `Episode task failed in group`, L `Rollout error in group`) and
    the env server may log the same failure again (H `request failed`, an ERROR in an L worker
    log): the orchestrator's uncapped per-step count is the measure when it has one; otherwise
    the env servers' lines are all there is."""
    if last is not None:
        counted = ctx.history.event_count("env_error", last - window + 1, last, "orchestrator")
        if counted:
            return counted
    env_side = [e for e in recent if file_process(e.file) != "orchestrator"]
    return len(env_side or recent)


def checkpoint_failure(ctx: RuleContext) -> Finding | None:
    """Save errors not followed by a complete newer checkpoint, and incomplete checkpoints newer
    than the newest complete one.

    Trainer and orchestrator save independently, so the newest step_N may lack a part for a
    moment; it is a failure once the trainer is `ckpt_lag_steps` past N or the run stopped
    (a resume takes the newest step_N without checking it is complete).
    """
    t = ctx.thresholds
    checkpoints = ctx.observation.checkpoints
    if ctx.framework != "prime-rl":
        # the adapters mark a checkpoint that lacks a part its framework always writes as `incomplete`
        checkpoints = {s: ([] if "incomplete" in parts else list(CKPT_PARTS)) for s, parts in checkpoints.items()}
    complete = [s for s, parts in checkpoints.items() if set(CKPT_PARTS) <= set(parts)]
    errors = [
        e
        for e in ctx.of_kind("ckpt_error")
        # Removing an old checkpoint failed: disk hygiene, not a failed save.
        if not e.message.startswith("Failed to remove") and (e.step is None or not any(s > e.step for s in complete))
    ]
    trainer = ctx.last_step("trainer")
    newest_complete = max(complete, default=-1)
    incomplete = []
    for step, parts in sorted(checkpoints.items()):
        missing = [p for p in CKPT_PARTS if p not in parts]
        # Only those a resume would pick (newer than every complete one) put the run at risk.
        if step < newest_complete or not missing:
            continue
        if (trainer is not None and trainer >= step + t.ckpt_lag_steps) or ctx.stopped:
            incomplete.append((step, missing))
    if not errors and not incomplete:
        return None
    parts = []
    if incomplete:
        step, missing = incomplete[-1]
        where = f"trainer at step {trainer}" if trainer is not None else "trainer step unknown"
        if ctx.stopped and (trainer is None or trainer < step + t.ckpt_lag_steps):
            where = f"run {'finished' if ctx.finished else 'crashed'}, {where}"
        parts.append(f"checkpoints/step_{step} lacks {' and '.join(missing)} ({where}; a resume would pick it)")
    if errors:
        parts.append(f"{len(errors)} checkpoint error line(s){_at(errors[0])}: {errors[0].message[:100]}")
    evidence = [f"checkpoints/step_{s}: missing {', '.join(m)}" for s, m in incomplete[-3:]]
    evidence += cite_events(errors)
    steps = [s for s, _ in incomplete] + [e.step for e in errors if e.step is not None]
    return finding(
        id="checkpoint_failure",
        severity=Severity.WARNING,
        summary="; ".join(parts),
        evidence=evidence,
        first_step=min(steps) if steps else None,
        last_step=max(steps) if steps else None,
    )


def disk_low(ctx: RuleContext) -> Finding | None:
    t = ctx.thresholds
    readings: list[tuple[float, str]] = []
    series = ctx.series("trainer", "ckpt_disk_free_ratio")
    if series:
        step, value = series[-1]
        readings.append((value, point("ckpt_disk_free_ratio", step, value)))
    live = ctx.observation.live
    if live.disk_free_ratio is not None:
        gib = f", {fmt(live.disk_free_gib)} GiB" if live.disk_free_gib is not None else ""
        readings.append((live.disk_free_ratio, f"run dir filesystem {pct(live.disk_free_ratio)} free{gib} (live probe)"))
    low = [(v, text) for v, text in readings if v < t.disk_free_low]
    if not low:
        return None
    value = min(v for v, _ in low)
    return finding(
        id="disk_low",
        severity=Severity.WARNING,
        summary=f"disk {pct(value)} free, below {pct(t.disk_free_low)}: checkpoint saves will fail when it fills",
        evidence=[text for _, text in low],
        last_step=series[-1][0] if series else ctx.step,
    )


def inference_crashed(ctx: RuleContext) -> Finding | None:
    """vLLM's engine died (`EngineDeadError`, also inside a Ray `RayTaskError(EngineDeadError)`)."""
    return _incident(ctx, "inference_crashed", "inference_crashed", "inference engine crashed")


def reward_fn_error(ctx: RuleContext) -> Finding | None:
    """An exception raised inside the reward function / reward manager / verifier."""
    return _incident(ctx, "reward_fn_error", "reward_fn_error", "the reward function raised")


def run_finished(ctx: RuleContext) -> Finding | None:
    event = ctx.finished_event
    if event is None:
        return None
    trainer = ctx.last_step("trainer")
    of = f" of {ctx.config.max_steps}" if ctx.config.max_steps else ""
    return finding(
        id="run_finished",
        severity=Severity.INFO,
        summary=f"run finished at step {trainer}{of}: {event.message[:100]}",
        evidence=cite_events(ctx.of_kind("finished")),
        last_step=trainer,
    )


RULES = (
    run_crashed,
    process_down,
    run_stalled,
    cuda_oom,
    host_oom,
    nccl_error,
    inference_unreachable,
    env_errors,
    checkpoint_failure,
    disk_low,
    inference_crashed,
    reward_fn_error,
    run_finished,
)
