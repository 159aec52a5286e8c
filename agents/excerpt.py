"""`rlagent diagnose`: judge one input (a pasted excerpt, a whole log, a metrics export, a gzipped log,
stdin) the way findings.md's section on excerpts says, with the same adapters and rules as a check-in.

An excerpt has no processes, no file times and often no step history: `Down` when it ends in a crash or
fatal signature that nothing after it superseded, `Degraded` for a warning or critical finding on the
metrics it holds, `Healthy` otherwise; and the result says what could not be judged. Bad input (binary,
empty, unreadable, a huge single line, a truncated `.wandb` or event file, text with nothing of a training
run in it) is one clear note.
"""

from __future__ import annotations

import io
import json
import math
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rlagent.agents.rules import RuleContext, Thresholds, health_of, run_rules
from rlagent.models.findings import Finding
from rlagent.models.observation import MetricHistory, Observation
from rlagent.models.run import Health, RunConfig
from rlagent.tools import inputtail
from rlagent.tools.adapters import adapter_for
from rlagent.tools.adapters.base import FileRead
from rlagent.tools.adapters.console import ConsoleState, add_row, analyse
from rlagent.tools.frameworks import detect, tensorboard, trl, wandb_csv, wandb_offline
from rlagent.tools.frameworks.lines import decode
from rlagent.tools.frameworks.records import MetricRow, numeric_values
from rlagent.tools.safefs import UnsafeFile, open_regular

_WANDB_MAGIC = b":W&B"
_READ_WHOLE = frozenset({"wandb", "tensorboard", "trainer_state"})
"""Exports their readers read whole from the input file (`_export`), not from its judged tail."""
_EXCERPT_LINES = 300
_DETECT_BYTES = 512 * 1024
"""Framework detection reads the head and the tail of a long text (step lines start early, crashes end it)."""


class DiagnoseError(Exception):
    """Input that cannot be judged at all: one clear line for the person."""


@dataclass
class Diagnosis:
    name: str
    framework: str | None
    source_kind: str
    health: Health
    findings: list[Finding]
    step: int | None = None
    steps_seen: int = 0
    notes: list[str] = field(default_factory=list)
    cannot_judge: list[str] = field(default_factory=list)
    checked_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def report(self) -> dict:
        """The JSON report of DESIGN.md plus `framework` and `source_kind`."""
        return {
            "run_dir": self.name,
            "framework": self.framework,
            "layout": None,
            "source_kind": self.source_kind,
            "checked_at": self.checked_at.isoformat().replace("+00:00", "Z"),
            "step": self.step,
            "max_steps": None,
            "health": self.health.value,
            "findings": [
                f.model_dump(
                    mode="json", include={"id", "severity", "category", "summary", "evidence", "first_step", "last_step"}
                )
                for f in self.findings
            ],
            "proposal": None,
            "slurm": [],
            "written": False,
            "status_entry": "",
            "notes": self.notes,
            "cannot_judge": self.cannot_judge,
        }


def read_input(path: str | Path | None, data: bytes | None = None) -> tuple[inputtail.Input, str]:
    """(what was read, display name) of a file, of `data`, or of stdin when `path` is "-";
    DiagnoseError when it cannot be read."""
    name = "-" if path is None or str(path) == "-" else str(path)
    try:
        if data is not None:
            read = inputtail.read_input(io.BufferedReader(io.BytesIO(data)), name)
        elif name == "-":
            read = inputtail.read_input(sys.stdin.buffer, name)
        else:
            if Path(name).is_dir():
                raise DiagnoseError(f"{name} is a directory: use `rlagent check {name}` for a run directory")
            with open_regular(name, pipes=True) as handle:
                read = inputtail.read_input(handle, name, Path(name))
    except inputtail.InputError as exc:
        raise DiagnoseError(str(exc)) from None
    except UnsafeFile as exc:
        raise DiagnoseError(f"{name}: {exc.strerror}: give a file, a pipe, or - for stdin") from None
    except OSError as exc:
        raise DiagnoseError(f"{name}: cannot read ({exc.strerror or exc})") from exc
    if not read.data.strip():
        raise DiagnoseError(f"{name}: empty input, nothing to judge")
    return read, name


def _binary(data: bytes) -> bool:
    head = data[:65536]
    return head.count(b"\x00") > len(head) // 100 or (head and sum(b < 9 or 13 < b < 32 for b in head) > len(head) // 10)


def _guess_from_keys(keys) -> str | None:
    keys = [k.split("/", 1)[1] if k.startswith(("train/", "eval/")) else k for k in keys]
    joined = " ".join(keys)
    if "critic/score" in joined or "actor/pg_loss" in joined or "response_length/mean" in joined:
        return "verl"
    if "frac_reward_zero_std" in joined or "completions/" in joined or "rewards/" in joined or "learning_rate" in keys:
        return "trl"
    if "policy_loss" in joined or "actor_grad_norm" in joined or "rollout/reward_mean" in joined:
        return "openrlhf"
    if "entropy/all/mean" in joined or "optim/grad_norm" in joined:
        return "prime-rl"
    return None


def _rows_read(rows: list[MetricRow], framework: str, rel: str) -> FileRead:
    out = FileRead(rel, None)
    for row in rows:
        if row.step is not None:
            add_row(out, framework, row, None)
    return out


def _metrics_file(given: inputtail.Input, name: str, framework: str | None, notes: list[str]) -> tuple[FileRead, str, str] | None:
    """(read, framework, source_kind) for a metrics export, or None when the input is not one."""
    lower = name.lower()
    if given.head.startswith(_WANDB_MAGIC) or lower.endswith(".wandb"):
        with _export(given, name, "a .wandb file") as path:
            read = wandb_offline.read_wandb_file(path, step_key="train/global_step")
        notes += read.notes
        fw = framework or _guess_from_keys({k for r in read.rows for k in r.values}) or "verl"
        return _rows_read(read.rows, fw, name), fw, "wandb"
    if "tfevents" in lower:
        with _export(given, name, "a TensorBoard event file") as path:
            read = tensorboard.read_scalars(path)
        notes += read.notes
        fw = framework or _guess_from_keys({r.tag for r in read.rows}) or "verl"
        rows = [MetricRow(step=s, values=v) for s, v in tensorboard.by_step(read.rows).items()]
        return _rows_read(rows, fw, name), fw, "tensorboard"
    head = decode(given.head).lstrip()
    if head.startswith("{") and '"log_history"' in head:  # HF writes its keys sorted: log_history comes early
        with _export(given, name, "a trainer_state.json") as path:
            read = trl.read_trainer_state(path)
        notes += read.notes
        return _rows_read(read.rows, framework or "trl", name), framework or "trl", "trainer_state"
    first = head.split("\n", 1)[0]
    if first.startswith('{"step"') or first.startswith('{"step":'):
        rows, bad = [], 0
        for line in _whole_lines(given).splitlines():
            try:
                obj = json.loads(line)
                values = (
                    obj["data"]
                    if isinstance(obj.get("data"), dict)
                    else {k: v for k, v in obj.items() if k not in ("step", "time")}
                )
                rows.append(MetricRow(step=int(obj["step"]), values=numeric_values(values)))
            except (ValueError, KeyError, TypeError, AttributeError):
                bad += 1
        if bad:
            notes.append(f"{bad} line(s) are not metric rows (truncated or not JSON)")
        fw = framework or _guess_from_keys({k for r in rows for k in r.values}) or "verl"
        return _rows_read(rows, fw, name), fw, "metrics_jsonl"
    columns = [c.strip().strip('"') for c in first.split(",")]
    if len(columns) > 1 and any(col in columns for col in wandb_csv.STEP_COLUMNS):
        text = first + "\n" + _whole_lines(given) if given.cut else decode(given.data)  # a cut tail lost its header
        read = wandb_csv.parse_csv(text)
        notes += read.notes
        fw = framework or _guess_from_keys({k for r in read.rows for k in r.values}) or "verl"
        return _rows_read(read.rows, fw, name), fw, "wandb_csv"
    return None


def _whole_lines(given: inputtail.Input) -> str:
    """The judged bytes as text, from their first whole line (the tail of a cut input begins inside one)."""
    data = given.data[given.data.find(b"\n") + 1 :] if given.cut else given.data
    return decode(data)


@contextmanager
def _export(given: inputtail.Input, name: str, what: str) -> Iterator[Path]:
    """An export as a file its reader reads whole: the input file itself, or a private copy of a
    stream that was read whole. A record format cannot be read from the middle, so a cut stream
    is an error, never a run judged on nothing."""
    if given.file is not None:
        yield given.file
        return
    if given.cut:
        raise DiagnoseError(
            f"{name}: {what} of {given.total / 2**20:.0f} MB cannot be judged from its last {inputtail.MAX_INPUT >> 20} MB, "
            "which is all a pipe or a .gz keeps: give the file itself"
        )
    with _spilled(given.data, name) as path:
        yield path


@contextmanager
def _spilled(data: bytes, name: str) -> Iterator[Path]:
    """The framework readers take paths: the input goes to a file of its own name (so their notes
    name the user's file) in a private temp directory, removed when read."""
    with tempfile.TemporaryDirectory(prefix="rlagent-diagnose-") as tmp:
        path = Path(tmp, Path(name).name if name != "-" else "stdin")
        path.write_bytes(data)
        yield path


def diagnose(path: str | Path | None, framework: str | None = None, *, data: bytes | None = None) -> Diagnosis:
    given, name = read_input(path, data)
    raw, notes = given.data, list(given.notes)
    short = Path(name).name if name != "-" else "stdin"
    metrics = None
    if given.head.startswith(_WANDB_MAGIC) or "tfevents" in name.lower() or not _binary(raw):
        metrics = _metrics_file(given, name, framework, notes)
    else:
        raise DiagnoseError(
            f"{name}: a binary file, not a log or a metrics export rlagent knows (W&B CSV, verl JSONL, "
            "trainer_state.json, TensorBoard event file, .wandb)"
        )
    if given.cut_note and not (metrics is not None and metrics[2] in _READ_WHOLE and given.file is not None):
        notes.insert(len(given.notes), given.cut_note)
    if metrics is not None:
        read, fw, kind = metrics
    else:
        text = decode(raw)
        detection = detect.detect_text(
            text if len(text) <= 2 * _DETECT_BYTES else text[:_DETECT_BYTES] + "\n" + text[-_DETECT_BYTES:]
        )
        fw = framework or detection.framework
        if detection.mixed and framework is None:
            counts = ", ".join(f"{k} {v} line(s)" for k, v in sorted(detection.counts.items()) if v)
            notes.append(f"lines of more than one framework in one input ({counts}): read as {fw}")
        if fw is None:
            notes.append(
                "no training metrics recognised (no verl, TRL, OpenRLHF or prime-rl step line); "
                "crash signatures were still looked for"
            )
            read = analyse(text, short, "verl", lambda line, state: [], ConsoleState())
            if not (read.rows or read.evals or read.events):  # "Healthy" would be a verdict on nothing
                judged = f"its last {inputtail.MAX_INPUT >> 20} MB" if given.cut else "it"
                raise DiagnoseError(
                    f"{name}: nothing to judge: no step line, metric or crash signature of verl, TRL, OpenRLHF "
                    f"or prime-rl in {judged} (give --framework F if it is one of theirs)"
                )
        else:
            read = adapter_for(fw).read_text(text, short)
        lines = text.count("\n") + 1
        kind = "log" if lines > _EXCERPT_LINES and path is not None and name != "-" else "excerpt"
    return judge(read, fw, kind, short, notes)


def judge(read: FileRead, framework: str | None, source_kind: str, name: str, notes: list[str]) -> Diagnosis:
    history = MetricHistory()
    for row in read.rows:
        table = history.table(row.process)  # type: ignore[arg-type]
        table[row.step] = {**table.get(row.step, {}), **row.values}
    history.evals = sorted({(e.env, e.step): e for e in read.evals}.values(), key=lambda e: (e.step, e.env))
    now = datetime.now(UTC)
    observation = Observation(
        now=now,
        offline=True,
        trainer_step=history.last_step("trainer"),
        orchestrator_step=history.last_step("orchestrator"),
        new_events=read.events,
        notes=notes,
    )
    ctx = RuleContext(
        observation=observation,
        history=history,
        events=list(read.events),
        config=RunConfig(),
        thresholds=Thresholds(),
        framework=framework or "prime-rl",
        now=now,
    )
    findings = [f for f in run_rules(ctx) if f.id not in _NEEDS_A_LIVE_RUN]
    health = health_of(findings, ctx)
    steps = sorted(set(history.trainer) | set(history.orchestrator))
    cannot = []
    if len(steps) < 2:
        cannot.append("no step history (fewer than 2 steps): trends, plateaus and collapses cannot be judged")
    elif len(steps) < Thresholds().sustain_steps * 2:
        cannot.append(f"only {len(steps)} steps: conditions that must be sustained are barely judgeable")
    cannot.append("no samples: degenerate output and reward hacking cannot be confirmed from completions")
    cannot.append("no processes and no file times: a stall or a dead process cannot be judged")
    if not any(math.isfinite(v) for row in history.orchestrator.values() for v in row.values()) and steps:
        cannot.append("no reward or rollout metrics in the input")
    return Diagnosis(
        name=name,
        framework=framework,
        source_kind=source_kind,
        health=health,
        findings=findings,
        step=steps[-1] if steps else None,
        steps_seen=len(steps),
        notes=notes,
        cannot_judge=cannot,
        checked_at=now,
    )


_NEEDS_A_LIVE_RUN = frozenset({"run_stalled", "process_down", "checkpoint_failure", "disk_low"})
"""Nothing in one input can show these (no clock, no processes, no checkpoint folders)."""
