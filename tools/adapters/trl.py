"""TRL (transformers Trainer): console dict lines numbered by `logging_steps`, each checkpoint's
`trainer_state.json` (re-read when a newer one is written), completions parquet, `checkpoint-N`
folders, and `--resume_from_checkpoint` where the training script passes it on (frameworks.md 2)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from rlagent.models.observation import FileCursor
from rlagent.models.run import Framework, RunConfig, RunInfo
from rlagent.tools import safefs
from rlagent.tools.adapters.base import FileRead, ResumePlan, Samples
from rlagent.tools.adapters.common import (
    MAX_CONFIG_BYTES,
    ConsoleAdapter,
    as_int,
    fast_dict,
    flag,
    load_yaml,
    rollouts_from,
    script_words,
    telling,
)
from rlagent.tools.adapters.console import ConsoleState, add_row
from rlagent.tools.bounds import STEP_DIGITS, clamp_time
from rlagent.tools.frameworks import trl
from rlagent.tools.frameworks.lines import LogLine
from rlagent.tools.frameworks.records import MetricRow

DEFAULT_LOGGING_STEPS = 10
"""TRL's GRPOConfig default (trl/trainer/base_config.py)."""
_CKPT = re.compile(rf"^checkpoint-({STEP_DIGITS})$", re.ASCII)
_PASSES_RESUME = re.compile(r"\.train\(\s*resume_from_checkpoint\s*=")


class TrlAdapter(ConsoleAdapter):
    framework = Framework.TRL
    launch_markers = ("accelerate launch", "trl grpo", "torchrun", "train_grpo")
    steps_in_lines = False  # rows are numbered by counting them: none can be skipped

    def parse_rows(self, line: LogLine, state: ConsoleState | None = None) -> list[MetricRow]:
        text = line.text.lstrip()
        if not (text.startswith("{'") or text.startswith("[rank")):
            return []
        data = fast_dict(text)
        if data is not None:
            kind = trl.classify(data)
            if kind is None:
                return []
            values = {k: (float("nan") if v is None else v) for k, v in data.items()}
            return [MetricRow(step=None, values=values, lineno=line.lineno, kind=kind)]
        row = trl.parse_dict_line(line.text, line.lineno)
        return [row] if row is not None and row.kind in ("train", "val", "summary") else []

    # --- config ----------------------------------------------------------------------------
    def _config(self, run_dir: Path, problems: list[str]) -> tuple[dict, str | None]:
        script = self.launch_script(run_dir)
        named = flag(script_words(script), "--config") if script else None
        candidates = [run_dir / named] if named else []
        candidates += sorted(run_dir.glob("*.yaml")) + sorted(run_dir.glob("*.yml"))
        for path in candidates:
            if not safefs.is_file(path, problems, run_dir):
                continue
            doc = load_yaml(path, problems, path.name)
            if any(k in doc for k in ("output_dir", "num_generations", "max_completion_length", "logging_steps")):
                return doc, path.name
        return {}, None

    def read_config(self, run_dir: Path) -> RunConfig:
        config = RunConfig()
        doc, rel = self._config(run_dir, config.problems)
        if rel:
            config.files.append(rel)
        config.max_steps = as_int(doc.get("max_steps")) if as_int(doc.get("max_steps")) not in (None, -1) else None
        config.model = str(doc["model_name_or_path"]) if doc.get("model_name_or_path") else None
        config.group_size = as_int(doc.get("num_generations"))
        config.max_completion_tokens = as_int(doc.get("max_completion_length"))
        config.ckpt_interval = as_int(doc.get("save_steps"))
        config.batch_size = as_int(doc.get("per_device_train_batch_size"))
        if config.max_steps is None:
            config.max_steps = self._state_max_steps(run_dir)
        return config

    def _state_max_steps(self, run_dir: Path) -> int | None:
        """`max_steps` of the newest checkpoint's trainer_state.json: the Trainer stores the run's planned
        total there (set from max_steps or epochs x steps per epoch) when no config file says it."""
        steps = self.checkpoints(run_dir)
        if not steps:
            return None
        path = self.output_dir(run_dir) / f"checkpoint-{max(steps)}" / "trainer_state.json"
        if not path.is_file():
            return None
        total = as_int(trl.read_trainer_state(path).meta.get("max_steps"))
        return total if total and total > 0 else None

    def output_dir(self, run_dir: Path) -> Path:
        """The config's `output_dir`; else `run_dir` itself when it is an output dir (the Trainer writes
        `checkpoint-N/` and `completions/` straight into `output_dir`, so a folder holding them is one:
        what a user who points rlagent at the output dir, or copies one, has); else TRL's default
        `trainer_output` under `run_dir`."""
        doc, _ = self._config(run_dir, [])
        if doc.get("output_dir"):
            out = Path(str(doc["output_dir"]))
            return out if out.is_absolute() else run_dir / out
        default = run_dir / "trainer_output"
        if not default.is_dir() and _is_output_dir(run_dir):
            return run_dir
        return default

    def read_root(self, run_dir: Path) -> Path:
        """What TRL's files are read inside of: the run dir, or the configured output_dir when that
        lies elsewhere (a symlink from either out of it is not followed)."""
        out = self.output_dir(run_dir)
        return run_dir if out.is_relative_to(run_dir) else out

    def console_state(self, run_dir: Path | None, config: RunConfig | None) -> ConsoleState:
        if run_dir is None:
            return ConsoleState(logging_steps=1)
        doc, _ = self._config(run_dir, [])
        every = as_int(doc.get("logging_steps")) or DEFAULT_LOGGING_STEPS

        def base(last: int | None) -> int:
            steps = [s for s in self.checkpoints(run_dir) if last is None or s <= last]
            return max(steps) if steps else 0

        return ConsoleState(logging_steps=every, resume_base=base)

    # --- sources ---------------------------------------------------------------------------
    def extra_sources(
        self, run_dir: Path, config: RunConfig, cursors: dict[str, FileCursor], keep_per_kind: int
    ) -> list[FileRead]:
        """The newest checkpoint's trainer_state.json, read whole when it is new or was rewritten."""
        steps = self.checkpoints(run_dir)
        if not steps:
            return []
        newest = max(steps)
        path = self.output_dir(run_dir) / f"checkpoint-{newest}" / "trainer_state.json"
        rel = "trainer_state.json"
        root = self.read_root(run_dir)
        try:
            st = safefs.regular_stat(path, root)
        except FileNotFoundError:
            return []
        except OSError as exc:  # a FIFO, a link loop, no permission: a note, never a hang
            return [FileRead(rel, cursors.get(rel), notes=[f"{path.name}: unreadable ({safefs.reason(exc)})"])]
        try:
            where = str(path.relative_to(run_dir))
        except ValueError:  # output_dir outside the run dir
            where = str(path)
        known = cursors.get(rel)
        cursor = FileCursor(path=where, dev=st.st_dev, inode=st.st_ino, size=st.st_size, offset=st.st_size)
        if known is not None and (known.path, known.inode, known.size) == (where, st.st_ino, st.st_size):
            return [FileRead(rel, known)]
        read = trl.read_trainer_state(path, root)
        when = datetime.fromtimestamp(clamp_time(st.st_mtime), UTC)
        out = FileRead(rel, cursor, notes=[f"{where}: {n}" for n in read.notes], bytes_read=st.st_size)
        for row in read.rows:
            if row.step is not None:
                add_row(out, "trl", row, None)
        out.newest = when
        return [out]

    def samples(self, run_dir: Path, known_key: str | None) -> Samples | None:
        folder = self.output_dir(run_dir) / "completions"
        notes: list[str] = []
        names = [n for n in safefs.list_names(folder, notes, run_dir) if n.startswith("completions_") and n.endswith(".parquet")]
        if not names:
            return Samples(key=None, notes=notes)
        path = folder / max(names, key=_completions_order)
        try:
            st = safefs.regular_stat(path, self.read_root(run_dir))
        except OSError as exc:  # gone since listed, a FIFO, a link loop or out of the run
            return Samples(key=None, notes=[*notes, f"{path.name}: unreadable ({safefs.reason(exc)})"])
        key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
        if key == known_key:
            return None
        read = trl.read_completions(path, self.read_root(run_dir))
        raw = []
        for s in read.rows:
            reward = sum(s.scores.values()) if s.scores else None
            raw.append((s.step, _text(s.completion), reward, {}))
        step = read.rows[0].step if read.rows else None
        rollouts = rollouts_from(raw, step)
        return Samples(
            key=key, step=step, count=len(rollouts), rollouts=telling(rollouts), notes=[*notes, *read.notes], all=rollouts
        )

    def checkpoints(self, run_dir: Path, notes: list[str] | None = None) -> dict[int, list[str]]:
        root = self.output_dir(run_dir)
        parts: dict[int, list[str]] = {}
        for path in safefs.list_dir(root, notes, run_dir):
            match = _CKPT.match(path.name)
            if match and safefs.is_dir(path, notes, run_dir):
                parts[int(match.group(1))] = (
                    ["state"] if safefs.is_file(path / "trainer_state.json", notes, run_dir) else ["incomplete"]
                )
        return dict(sorted(parts.items())[-3:])

    def resume_flags(self, run_dir: Path, step: int, words: list[str]) -> ResumePlan:
        passes = any(_PASSES_RESUME.search(_script_text(p)) for p in safefs.list_dir(run_dir) if p.suffix == ".py")
        if not passes:
            return ResumePlan(
                False,
                step,
                why="the training script calls trainer.train() without resume_from_checkpoint, so "
                "--resume_from_checkpoint would be ignored and the run would start from scratch",
            )
        folder = self.output_dir(run_dir) / f"checkpoint-{step}"
        return ResumePlan(True, step, add=["--resume_from_checkpoint", str(folder)], drop=["--resume_from_checkpoint"])

    def process_markers(self, run: RunInfo) -> list[str]:
        return [run.run_dir, str(self.output_dir(Path(run.run_dir)))]


def _is_output_dir(path: Path) -> bool:
    """`path` holds what the Trainer writes into its output_dir: a `checkpoint-N/` folder or the
    completions parquet folder."""
    try:
        entries = list(path.iterdir())
    except OSError:
        return False
    return any(e.is_dir() and (_CKPT.match(e.name) or e.name == "completions") for e in entries)


def _script_text(path: Path) -> str:
    try:
        return safefs.read_regular(path, limit=MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:  # a FIFO, a link loop, no permission: not read (never a hang)
        return ""


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # conversational: [{"role": ..., "content": ...}]
        return " ".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in value)
    return "" if value is None else str(value)


def _completions_order(name: str) -> tuple[int, str]:
    """`completions_{step:05d}.parquet` by its step (a sixth digit sorts after five by number, not by
    name), then by name; the newest found with max() over the names, no Path made for each."""
    digits = name.removeprefix("completions_").removesuffix(".parquet")
    return (int(digits) if digits.isdigit() else -1, name)
