"""verl: the driver's console log (Ray prefixes, both repr styles), the `file` logger JSONL, rollout
dumps, `global_step_N` checkpoints and the Hydra-resolved config (frameworks.md section 1)."""

from __future__ import annotations

import json
from pathlib import Path

from rlagent.models.observation import FileCursor
from rlagent.models.run import Framework, RunConfig, RunInfo
from rlagent.tools import safefs
from rlagent.tools.adapters.base import FileRead, ResumePlan, Samples
from rlagent.tools.adapters.common import (
    ConsoleAdapter,
    as_float,
    as_int,
    dotted,
    load_yaml,
    rollouts_from,
    telling,
    walk_files,
)
from rlagent.tools.adapters.console import ConsoleState, HeldRows, add_row, backlog_blocks, backlog_notes
from rlagent.tools.bounds import clamp_time, plausible_step
from rlagent.tools.frameworks import verl
from rlagent.tools.frameworks.lines import LogLine
from rlagent.tools.frameworks.records import MetricRow, numeric_values
from rlagent.tools.safefs import open_regular
from rlagent.tools.tail import plan_read

_CONFIG_KEYS = {
    "max_steps": ("trainer.total_training_steps",),
    "model": ("actor_rollout_ref.model.path",),
    "batch_size": ("data.train_batch_size",),
    "group_size": ("actor_rollout_ref.rollout.n",),
    "max_completion_tokens": ("data.max_response_length",),
    "ckpt_interval": ("trainer.save_freq",),
    "temperature": ("actor_rollout_ref.rollout.temperature",),
}


class VerlAdapter(ConsoleAdapter):
    framework = Framework.VERL
    launch_markers = ("verl.trainer.main_ppo", "verl.trainer.main_")

    def parse_rows(self, line: LogLine, state: ConsoleState | None = None) -> list[MetricRow]:
        if "step:" not in line.text:
            return []
        row = verl.parse_step_line(line.text, line.lineno)
        return [row] if row is not None else []

    # --- config ----------------------------------------------------------------------------
    def _config_doc(self, run_dir: Path, problems: list[str]) -> tuple[dict, str | None]:
        found = sorted(run_dir.glob("outputs/*/*/.hydra/config.yaml"), key=_mtime)
        found += [p for p in [run_dir / ".hydra" / "config.yaml"] if safefs.is_file(p, problems, run_dir)]
        if not found:
            return {}, None
        path = found[-1]
        rel = str(path.relative_to(run_dir))
        return load_yaml(path, problems, rel), rel

    def read_config(self, run_dir: Path) -> RunConfig:
        config = RunConfig()
        doc, rel = self._config_doc(run_dir, config.problems)
        if rel:
            config.files.append(rel)
        for name, paths in _CONFIG_KEYS.items():
            for path in paths:
                value = dotted(doc, path)
                if value is not None:
                    number = as_float(value) if name == "temperature" else as_int(value)
                    setattr(config, name, str(value) if name == "model" else number)
                    break
        return config

    def _trainer(self, run_dir: Path) -> dict:
        doc, _ = self._config_doc(run_dir, [])
        trainer = doc.get("trainer") if isinstance(doc.get("trainer"), dict) else {}
        return trainer

    def ckpt_dir(self, run_dir: Path) -> Path:
        trainer = self._trainer(run_dir)
        project, experiment = trainer.get("project_name"), trainer.get("experiment_name")
        local = str(trainer.get("default_local_dir") or "")
        if "${" in local or not local:
            if project and experiment:
                return run_dir / "checkpoints" / str(project) / str(experiment)
            tracked = list(run_dir.glob("checkpoints/*/*/" + verl.TRACKER_FILE)) + list(
                run_dir.glob("checkpoints/*/*/global_step_*")
            )
            return tracked[0].parent if tracked else run_dir / "checkpoints"
        return Path(local) if Path(local).is_absolute() else run_dir / local

    # --- sources ---------------------------------------------------------------------------
    def extra_sources(
        self, run_dir: Path, config: RunConfig, cursors: dict[str, FileCursor], keep_per_kind: int
    ) -> list[FileRead]:
        """The `file` logger JSONL(s): `{project}/{experiment}.jsonl`, read from their cursors."""
        out = []
        for path in walk_files(run_dir, (".jsonl",), depth=2):
            if path.parent.name == "rollouts" or path.parent == run_dir:
                continue
            rel = str(path.relative_to(run_dir))
            out.append(read_file_logger(path, rel, cursors.get(rel)))
        return out

    def samples(self, run_dir: Path, known_key: str | None) -> Samples | None:
        folder = self._trainer(run_dir).get("rollout_data_dir") or "rollouts"
        newest = verl.newest_rollout_file(run_dir / str(folder))
        if newest is None:
            return Samples(key=None, notes=[])
        step, path = newest
        try:
            st = safefs.regular_stat(path, run_dir)
        except OSError as exc:  # gone since listed, a FIFO, a link out of the run
            return Samples(key=None, notes=[f"{path.name}: unreadable ({safefs.reason(exc)})"])
        key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
        if key == known_key:
            return None
        read = verl.read_rollouts(path)
        raw = [(s.step if s.step is not None else step, s.output, s.score, s.extra) for s in read.rows]
        rollouts = rollouts_from(raw, step)
        return Samples(key=key, step=step, count=len(rollouts), rollouts=telling(rollouts), notes=read.notes, all=rollouts)

    def checkpoints(self, run_dir: Path, notes: list[str] | None = None) -> dict[int, list[str]]:
        found = verl.checkpoints(self.ckpt_dir(run_dir))
        if notes is not None:
            notes.extend(n for n in found.notes if "unreadable" in n and n not in notes)
        parts: dict[int, list[str]] = {}
        for step in found.steps[-3:]:
            folder = self.ckpt_dir(run_dir) / f"global_step_{step}"
            present = [p for p in ("actor", "critic") if safefs.is_dir(folder / p, notes, run_dir)]
            if safefs.is_file(folder / "data.pt", notes, run_dir):
                present.append("data")
            if "actor" not in present or "data" not in present:
                present.append("incomplete")
            parts[step] = present
        return parts

    def resume_flags(self, run_dir: Path, step: int, words: list[str]) -> ResumePlan:
        folder = self.ckpt_dir(run_dir) / f"global_step_{step}"
        tracker = verl.checkpoints(self.ckpt_dir(run_dir)).latest
        if tracker == step:
            return ResumePlan(
                True, step, add=["trainer.resume_mode=auto"], drop=["trainer.resume_mode", "trainer.resume_from_path"]
            )
        return ResumePlan(
            True,
            step,
            add=["trainer.resume_mode=resume_path", f"trainer.resume_from_path={folder}"],
            drop=["trainer.resume_mode", "trainer.resume_from_path"],
        )

    def process_markers(self, run: RunInfo) -> list[str]:
        trainer = self._trainer(Path(run.run_dir))
        markers = [run.run_dir]
        if trainer.get("experiment_name"):
            markers.append(f"trainer.experiment_name={trainer['experiment_name']}")
        return markers


def _mtime(path: Path) -> float:
    try:
        return safefs.regular_stat(path).st_mtime
    except OSError:
        return 0.0


def read_file_logger(path: Path, rel: str, cursor: FileCursor | None) -> FileRead:
    """verl's `file` logger from its cursor: `{"step": N, "data": {...}}` rows, NaN as null. Read as the
    console is (console.backlog_blocks: at most 64 MB a check-in, a longer backlog as its head and its
    newest rows, every row naming its step) and its rows held bounded as the collector keeps them: a
    week of a run's rows is not a list of a million dicts."""
    from datetime import UTC, datetime

    try:
        plan, new_cursor = plan_read(path, rel, cursor)
    except FileNotFoundError:
        note = f"{rel} was deleted since the last check-in" if cursor else f"{rel} disappeared while being read"
        return FileRead(rel, None, notes=[note])
    except OSError as exc:
        return FileRead(rel, cursor, notes=[f"{rel}: unreadable ({safefs.reason(exc)})"])
    out = FileRead(rel, new_cursor, fresh=plan.fresh, notes=[plan.note] if plan.note else [])
    when = datetime.fromtimestamp(clamp_time(plan.mtime), UTC)
    held = HeldRows(out)
    bad = 0
    try:
        with open_regular(path) as handle:  # swapped for a FIFO since planned: refused, never a hang
            blocks = backlog_blocks(handle, plan.start, plan.end, steps_in_lines=True)
            for _, block in blocks.numbered(plan.first_line):
                part = FileRead(rel, None)
                for raw in block.splitlines():
                    row = _logged_row(raw)
                    if row is None:
                        bad += 1
                    else:
                        add_row(part, "verl", row, when)
                held.take(part)
    except OSError as exc:  # deleted, truncated or swapped while being read: read again next time
        return FileRead(rel, cursor, notes=[*out.notes, f"{rel}: read failed ({safefs.reason(exc)})"])
    out.notes += backlog_notes(rel, blocks, plan.start, plan.end, plan.first_line)
    held.finish()
    new_cursor.offset, new_cursor.lines = plan.start + blocks.taken, plan.first_line - 1 + blocks.newlines
    out.bytes_read = blocks.taken
    if bad:
        out.notes.append(f"{rel}: skipped {bad} malformed row(s)")
    if blocks.newlines:
        out.newest = when
    return out


def _logged_row(raw: bytes) -> MetricRow | None:
    """One logger line as a row; None when it is not one (malformed, truncated, a step out of range)."""
    try:
        obj = json.loads(raw)
        data = obj["data"]
        if not plausible_step(obj["step"]):
            raise ValueError("step out of range")
        row = MetricRow(step=int(obj["step"]), values=numeric_values(data) if isinstance(data, dict) else {})
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested too deep
        return None
    if row.values and all(k.startswith(("val-core/", "val-aux/", "val/")) for k in row.values):
        row.kind = "val"
    return row
