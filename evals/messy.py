"""Hand edits that make a simulated run look the way a real run's files do.

Real logs are not clean: alarming-but-normal warnings interleave with the rest, a process
restarts into `logs/attempt_2` with `Resuming training from checkpoint step N`, a log gets
rotated, the recording ends in the middle of a line, a disk hiccup leaves binary junk or a torn
JSON row, a trainer hangs while the orchestrator keeps talking. Each edit here is a function
of a `Recording` (the run directory plus what the simulator knows of its schedule); the fixture
table in make_fixtures.py names them. Edits are deterministic (seeded), keep every file's
mtime at the time of its last line, and record what the manifest must know (symlink history,
renames).
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from rlagent.evals.cut import FileIndex, index_jsonl, index_log
from rlagent.evals.manifest import FileEntry, LinkState, utc
from rlagent.evals.simulator import Scenario, write_run
from rlagent.evals.simulator.events import Event, Sim
from rlagent.evals.simulator.layout import RunPaths
from rlagent.evals.simulator.rng import stream
from rlagent.evals.simulator.steplines import pipeline


@dataclass
class Recording:
    """A simulated run being turned into a fixture."""

    root: Path
    scenario: Scenario
    links: dict[str, list[LinkState]] = field(default_factory=dict)
    renames: dict[str, tuple[str, datetime]] = field(default_factory=dict)
    edits: list[str] = field(default_factory=list)
    """What was done to the run, in words (goes into case.toml's description)."""
    marks: dict[str, float] = field(default_factory=dict)
    """Named moments (epoch seconds) an edit created, for the schedule and expectations."""

    def __post_init__(self) -> None:
        self.sim = Sim(self.scenario)
        self.tz = ZoneInfo(self.scenario.log_tz)

    def epoch(self, t: float) -> float:
        return self.sim.clock.epoch(t)

    def trainer_end(self, step: int) -> float:
        self.sim.tl.ensure(step)
        return self.epoch(self.sim.tl.end[step])

    def stream_path(self, name: str, attempt: int = 1) -> Path:
        return RunPaths(self.root, self.scenario.layout, attempt).stream(name)

    @property
    def end(self) -> float:
        """The newest mtime of the recording."""
        return max(p.stat().st_mtime for p in self.root.rglob("*") if p.is_file() and not p.is_symlink())


def _entry(path: Path, kind: str) -> FileEntry:
    return FileEntry(kind=kind, mtime=utc(path.stat().st_mtime))  # type: ignore[arg-type]


def _index(rec: Recording, path: Path) -> FileIndex:
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return index_jsonl(path.name, _entry(path, "jsonl"), data)
    return index_log(path.name, _entry(path, "log"), data, rec.tz, [])


def _offset_at(rec: Recording, path: Path, when: float) -> int:
    """Byte offset just past the last record of `path` written at or before `when`."""
    index = _index(rec, path)
    kept = bisect.bisect_right(index.reach, when)
    return index.ends[kept - 1] if kept else 0


def _time_after(rec: Recording, path: Path, when: float) -> float:
    """Time of the first record of `path` written after `when` (inf if none)."""
    index = _index(rec, path)
    kept = bisect.bisect_right(index.reach, when)
    return index.reach[kept] if kept < len(index.reach) else float("inf")


def _insert(rec: Recording, path: Path, when: float, data: bytes) -> None:
    """Insert whole lines into a file where their time puts them; the mtime moves on if needed."""
    mtime = path.stat().st_mtime
    old = path.read_bytes()
    at = _offset_at(rec, path, when)
    path.write_bytes(old[:at] + data + old[at:])
    newest = max(mtime, when)
    os.utime(path, (newest, newest))


def _append(path: Path, data: bytes, when: float) -> None:
    with open(path, "ab") as f:
        f.write(data)
    os.utime(path, (when, when))


def _text(event: Event) -> bytes:
    return event.text.encode() if isinstance(event.text, str) else event.text


# --- interleaved lines ---------------------------------------------------------------------------


def warnings(rec: Recording, stream_name: str, lines: list[tuple[int, float, str, str]]) -> None:
    """Interleave loguru lines: (step, seconds after the trainer finished it, level, message)."""
    path = rec.stream_path(stream_name)
    for step, after, level, message in lines:
        when = rec.trainer_end(step) + after
        event = rec.sim.log(when - rec.sim.clock.epoch0, stream_name, level, message)  # type: ignore[arg-type]
        _insert(rec, path, when, _text(event))
    rec.edits.append(f"{len(lines)} extra {stream_name} line(s) interleaved")


def vllm_warnings(rec: Recording, lines: list[tuple[int, float, str]]) -> None:
    """vLLM's own WARNING lines in inference.log (stdlib format, local time)."""
    path = rec.stream_path("inference")
    for step, after, message in lines:
        when = rec.trainer_end(step) + after
        stamp = rec.sim.clock.vllm(when - rec.sim.clock.epoch0)
        _insert(rec, path, when, f"WARNING {stamp} {message}\n".encode())
    rec.edits.append(f"{len(lines)} vLLM warning(s) interleaved in inference.log")


# --- damaged bytes -------------------------------------------------------------------------------


def binary_junk(rec: Recording, stream_name: str, step: int, size: int = 64) -> None:
    """A line of NUL-laden junk after the trainer's step `step` (a disk or tee hiccup)."""
    r = stream(rec.scenario.seed, "junk", stream_name, step)
    junk = bytes(r.randrange(256) for _ in range(size)).replace(b"\n", b"\x00") + b"\x00\x00\n"
    _insert(rec, rec.stream_path(stream_name), rec.trainer_end(step) + 0.5, junk)
    rec.edits.append(f"a line of binary junk in the {stream_name} log after step {step}")


def torn_metrics_row(rec: Recording, step: int) -> None:
    """A half-written metrics.jsonl row after step `step` (writer killed mid-row, then restarted)."""
    when = rec.trainer_end(step) + 0.5
    row = json.dumps({"step": step, "time": round(when, 6), "perf/throughput": 8123.4})
    _insert(rec, rec.root / "metrics.jsonl", when, row[: len(row) // 2].encode() + b"\n")
    rec.edits.append(f"a torn metrics.jsonl row after step {step}")


def truncated_last_line(rec: Recording, stream_name: str) -> None:
    """The recording stops in the middle of the log's last line (no newline)."""
    path = rec.stream_path(stream_name)
    mtime = path.stat().st_mtime
    data = path.read_bytes().rstrip(b"\n")
    last = data.rfind(b"\n") + 1
    path.write_bytes(data[: last + max(8, (len(data) - last) // 2)])
    os.utime(path, (mtime, mtime))
    rec.edits.append(f"the {stream_name} log ends in the middle of a line")


def rotate(rec: Recording, stream_name: str, step: int) -> None:
    """logrotate-style: at trainer step `step` the log is renamed to `<name>.1` and a new one
    begins (the monitor must notice the replaced file and read the new one from its start)."""
    path = rec.stream_path(stream_name)
    when = rec.trainer_end(step) + 0.5
    data = path.read_bytes()
    at = _offset_at(rec, path, when)
    mtime = path.stat().st_mtime
    old = path.with_name(path.name + ".1")
    old.write_bytes(data[:at])
    old_index = index_log(old.name, _entry(path, "log"), data[:at], rec.tz, [])
    old_mtime = old_index.reach[-1] if old_index.reach else when
    os.utime(old, (old_mtime, old_mtime))
    path.write_bytes(data[at:])
    os.utime(path, (mtime, mtime))
    rel_new = path.relative_to(rec.root).as_posix()
    rec.renames[old.relative_to(rec.root).as_posix()] = (rel_new, utc(when))
    rec.edits.append(f"{rel_new} rotated to {old.name} after step {step}")


# --- run-level events ----------------------------------------------------------------------------


def hang(rec: Recording, minutes: float) -> None:
    """The trainer hangs after the recording's last step (no output, e.g. a stuck collective)
    while the orchestrator keeps printing its pipeline view (H) and vLLM its idle stats."""
    sc, tl, sim = rec.scenario, rec.sim.tl, rec.sim
    last = sc.steps
    tl.ensure(last)
    start = tl.end[last] + 0.8
    lines = [sim.log(start + 1.0, "orchestrator", "INFO", _paused(sc.layout, last))]
    inference: list[bytes] = []
    t = start + 10.0
    while t < start + minutes * 60:
        if sc.layout == "H":
            msg = pipeline(sc.batch_size, sc.batch_size, sc.group_size // 2, 0, 0)
            lines.append(sim.log(t, "orchestrator", "INFO", msg))
        inference.append(
            f"INFO {sim.clock.vllm(t)} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
            "Prefix cache hit rate: 51.2%\n".encode()
        )
        t += 10.0
    end = rec.epoch(t - 10.0)
    _append(rec.stream_path("orchestrator"), b"".join(_text(e) for e in lines), end)
    _append(rec.stream_path("inference"), b"".join(inference), end)
    rec.edits.append(f"the trainer hangs after step {last}; the orchestrator and vLLM keep logging for {minutes:g} min")


def _paused(layout: str, step: int) -> str:
    if layout == "H":
        return f"Orchestrator paused: waiting for trainer to broadcast checkpoint {step}. Training is progressing normally."
    return (
        f"Orchestrator paused: waiting for trainer process to complete checkpoint {step} (>1 step(s) ahead). "
        "Training is progressing normally."
    )


def drop_checkpoint_part(rec: Recording, from_step: int, part: str = "orchestrator") -> None:
    """Saves of `part` stop landing from `from_step` on (a quota, a wrong ckpt dir): each
    step_N >= from_step lacks it. prime-rl has no save-error message, so nothing is logged."""
    sc = rec.scenario
    paths = RunPaths(rec.root, sc.layout)
    for n in range(from_step, sc.steps + 1, sc.ckpt_interval):
        target = paths.ckpt_orchestrator(n) if part == "orchestrator" else paths.ckpt_trainer(n)
        if target.exists():
            shutil.rmtree(target)
    rec.edits.append(f"checkpoints from step {from_step} lack their {part} part")


def disk_fill(rec: Recording, from_step: int, to_ratio: float) -> None:
    """The checkpoint disk fills: `system/ckpt_disk_free_ratio` falls linearly from `from_step`
    to `to_ratio` at the last step (metrics.jsonl rows rewritten in place, same key order)."""
    path = rec.root / "metrics.jsonl"
    mtime = path.stat().st_mtime
    last = rec.scenario.steps
    out = []
    start_ratio = None
    for raw in path.read_bytes().splitlines(keepends=True):
        row = json.loads(raw)
        key = "system/ckpt_disk_free_ratio"
        if key in row and row["step"] >= from_step:
            if start_ratio is None:
                start_ratio = row[key]
            frac = (row["step"] - from_step) / max(1, last - from_step)
            ratio = round(start_ratio + (to_ratio - start_ratio) * frac, 6)
            total = row["system/ckpt_disk_total_gib"]
            row[key] = ratio
            row["system/ckpt_disk_free_gib"] = round(total * ratio, 3)
            row["system/ckpt_disk_used_gib"] = round(total * (1 - ratio), 3)
            raw = (json.dumps(row) + "\n").encode()
        out.append(raw)
    path.write_bytes(b"".join(out))
    os.utime(path, (mtime, mtime))
    rec.edits.append(f"the checkpoint disk fills from step {from_step} to {to_ratio:.0%} free")


def restart(rec: Recording, resume_step: int, gap_s: float, steps: int, boot_s: float = 150.0) -> None:
    """The run stops (a crash, or a person stops it), and is relaunched `gap_s` later with
    `--resume` from checkpoint `resume_step`: a new `logs/attempt_2` (and `logs/latest` moving
    to it), `Resuming training from checkpoint step N`, the steps after N trained again, and
    prime-rl's `clean_future_steps` removing rollouts and broadcasts past N.

    The second attempt is the same scenario, healthy, started so that its step N ends
    `boot_s` after the relaunch: its lines after step N are exactly what the resumed run writes.
    """
    sc = rec.scenario
    if sc.layout != "H":
        raise ValueError("attempt directories are layout H")
    rec.marks["stop"] = rec.end
    relaunch = rec.end + gap_s
    healthy = sc.variant(kind="healthy", steps=steps)
    probe = Sim(healthy)
    probe.tl.ensure(resume_step + 1)
    end_n, ship_n = probe.tl.end[resume_step], probe.tl.ship[resume_step]
    second = healthy.variant(start=utc(relaunch + boot_s - end_n))
    with tempfile.TemporaryDirectory() as tmp:
        other = write_run(second, Path(tmp) / "run")
        boot = Sim(second.variant(start=utc(relaunch)))
        startup = _resume_startup(boot, resume_step)
        cut_at = {"trainer": second.start.timestamp() + end_n}
        default_cut = second.start.timestamp() + ship_n
        first_line = min(e.t for e in startup) + relaunch
        for src in sorted((other / "logs" / "attempt_1").rglob("*.log")):
            rel = src.relative_to(other / "logs" / "attempt_1")
            name = rel.stem if rel.parent == Path() else f"env:{rel.stem}"
            cut = cut_at.get(name, default_cut)
            data = src.read_bytes()
            keep = data[_offset_at(rec, src, cut) :]
            if name == "orchestrator":
                keep = b"".join(line for line in keep.splitlines(keepends=True) if f"(Step {resume_step})".encode() not in line)
            mine = sorted((e for e in startup if e.stream == name), key=lambda e: e.t)
            if mine and keep and _time_after(rec, src, cut) < mine[-1].t + relaunch:
                raise ValueError(f"{rel}: the resumed steps start before the relaunch finished booting; raise boot_s")
            head = b"".join(_text(e) for e in mine)
            dst = rec.root / "logs" / "attempt_2" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(head + keep)
            mtime = src.stat().st_mtime
            os.utime(dst, (mtime, mtime))
        _merge_metrics(rec.root / "metrics.jsonl", other / "metrics.jsonl", resume_step)
        for base in ("rollouts", "broadcasts"):
            for d in sorted((rec.root / base).glob("step_*")):
                if int(d.name.split("_")[1]) > resume_step or base == "broadcasts":
                    shutil.rmtree(d)
            for d in sorted((other / base).glob("step_*")):
                if int(d.name.split("_")[1]) > resume_step:
                    shutil.copytree(d, rec.root / base / d.name)
        for d in sorted((other / "checkpoints").glob("step_*")):
            if int(d.name.split("_")[1]) > resume_step:
                shutil.copytree(d, rec.root / "checkpoints" / d.name)
    latest = rec.root / "logs" / "latest"
    latest.unlink()
    os.symlink("attempt_2", latest)
    rec.links["logs/latest"] = [
        LinkState(at=utc(rec.epoch(0.0)), target="attempt_1"),
        LinkState(at=utc(first_line), target="attempt_2"),
    ]
    rec.marks["relaunch"] = first_line
    rec.edits.append(f"relaunched {gap_s / 60:g} min after the stop with --resume from step {resume_step} (logs/attempt_2)")


def _resume_startup(boot: Sim, step: int) -> list[Event]:
    """The start-up lines of a relaunch with --resume: prime-rl's, with its resume messages."""
    from rlagent.evals.simulator import env_log, inference_log, orchestrator_log, trainer_log

    total_tokens, rollouts, _ = boot.dyn.cumulative(step)
    out: list[Event] = []
    for event in trainer_log.startup(boot) + orchestrator_log.startup(boot) + inference_log.startup(boot) + env_log.startup(boot):
        text = event.text if isinstance(event.text, str) else event.text.decode()
        if "Starting RL trainer (" in text or "Starting orchestrator (" in text:
            # `--resume` resolves the newest step_N (utils/pathing.py), then each process resumes
            out.append(event)
            directory = f"{boot.run_dir}/checkpoints"
            who = "training" if event.stream == "trainer" else "orchestrator"
            out.append(boot.log(event.t + 0.9, event.stream, "INFO", f"Found latest checkpoint in {directory}: {step}"))
            out.append(boot.log(event.t + 1.1, event.stream, "INFO", f"Resuming {who} from checkpoint step {step}"))
        elif "Starting from step 1 (" in text:
            message = f"Starting from step {step + 1} (total_tokens={round(total_tokens)}, total_samples={rollouts})"
            out.append(boot.log(event.t, event.stream, "INFO", message))
        else:
            out.append(event)
    return out


def _merge_metrics(ours: Path, theirs: Path, resume_step: int) -> None:
    rows = [raw for raw in theirs.read_bytes().splitlines(keepends=True) if json.loads(raw)["step"] > resume_step]
    _append(ours, b"".join(rows), theirs.stat().st_mtime)
