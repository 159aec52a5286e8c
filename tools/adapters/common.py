"""What the verl, TRL and OpenRLHF adapters share: finding a run's console logs and launch script,
reading them from their cursors, YAML configs, samples into `Rollout`s, launch-script resume plans."""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
from collections.abc import Iterable
from datetime import tzinfo
from pathlib import Path
from typing import Any

import orjson

from rlagent.models.observation import FileCursor, Rollout
from rlagent.models.run import Framework, RunConfig, RunInfo
from rlagent.tools import safefs
from rlagent.tools.adapters.base import FileRead, ResumePlan, RunRead, Samples
from rlagent.tools.adapters.console import ConsoleState, analyse, read_console
from rlagent.tools.adapters.trackers import read_trackers
from rlagent.tools.bounds import bounded_int
from rlagent.tools.frameworks.detect import detect_dir
from rlagent.tools.frameworks.lines import LogLine
from rlagent.tools.rollouts import pick_telling
from rlagent.tools.rotation import read_across_rotation, read_rest, renamed_away, still_awaited

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
_SKIP_DIRS = {"checkpoints", "ckpt", "wandb", "tensorboard_log", "runs", ".hydra", "completions", "rollouts", "__pycache__"}
MAX_LOGS = 20
_DEGENERATE_CHARS = 2000
MAX_CONFIG_BYTES = 16 << 20
"""A config file or launch script larger than this is junk: not read."""


def walk_files(root: Path, suffixes: tuple[str, ...], depth: int = 3, limit: int = 200) -> list[Path]:
    """Files under `root` with one of `suffixes`, at most `depth` folders down, skipping checkpoint and
    tracker folders (bounded: a huge tree must not hang a check-in)."""
    found: list[Path] = []
    base = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):  # links are not followed: a loop cannot spin
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("global_step") and not d.startswith("checkpoint-")
        )
        if len(here.parts) - base >= depth:
            dirnames[:] = []
        found.extend(here / name for name in sorted(filenames) if name.endswith(suffixes))
        if len(found) >= limit:
            break
    return found[:limit]


_YAML_CACHE: dict[tuple[str, int, int], dict[str, Any]] = {}
_YAML_CACHE_SIZE = 512


def load_yaml(path: Path, problems: list[str], rel: str) -> dict[str, Any]:
    """A YAML config as a dict ({} with a problem when unreadable). A check-in asks for the same config
    several times and a fleet re-reads unchanged ones every round, so a parse is kept while the file's
    size and mtime stay the same (treat the dict as read-only)."""
    import yaml

    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key in _YAML_CACHE:
            return _YAML_CACHE[key]
        text = safefs.read_regular(path, limit=MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:  # a FIFO, a link loop, no permission, far too large: a note, never a hang
        problems.append(f"{rel}: unreadable ({safefs.reason(exc)})")
        return {}
    if _flow_depth(text) > MAX_FLOW_DEPTH:  # PyYAML takes quadratic time on `[[[[...`, then recurses
        problems.append(f"{rel}: unreadable YAML (nested too deep)")
        return {}
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: ~10x faster
        doc = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        problems.append(f"{rel}: unreadable YAML ({(str(exc).splitlines() or [''])[0][:120]})")
        return {}
    except RecursionError:
        problems.append(f"{rel}: unreadable YAML (nested too deep)")
        return {}
    doc = doc if isinstance(doc, dict) else {}
    if len(_YAML_CACHE) >= _YAML_CACHE_SIZE:
        _YAML_CACHE.clear()
    _YAML_CACHE[key] = doc
    return doc


MAX_FLOW_DEPTH = 100
"""No config nests `[` and `{` this deep; PyYAML would take minutes on such text."""
_BRACKETS = re.compile(r"[\[\]{}]")


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets (brackets inside quoted strings count too: an
    over-estimate only refuses a config no one writes)."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        depth = depth + 1 if match.group() in "[{" else max(0, depth - 1)
        if depth > deepest:
            deepest = depth
            if deepest > MAX_FLOW_DEPTH:
                break
    return deepest


def dotted(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def as_int(value: Any) -> int | None:
    """A config setting as an int; None for anything else (also what no setting can be: inf, 1e300)."""
    try:
        return bounded_int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None


def as_float(value: Any) -> float | None:
    """A config setting as a finite float; None for anything else."""
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is not None and math.isfinite(number) else None


def script_text(path: Path) -> str | None:
    """A launch script's text, None when it cannot be read (a FIFO, a link loop, no permission: never
    a hang). Read once per version of the file (inode, size and times), as load_yaml keeps its parses:
    a check-in asks for the launch script several times, a fleet every round."""
    try:
        st = safefs.regular_stat(path)
    except OSError:
        return None
    return _script_text(str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.lru_cache(maxsize=256)
def _script_text(path: str, *version: int) -> str | None:
    try:
        return safefs.read_regular(Path(path), limit=MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def script_words(path: Path) -> list[str]:
    """The words of a launch script's command (line continuations joined, comments and `| tee` dropped)."""
    text = script_text(path)
    return list(_script_words(text)) if text is not None else []


@functools.lru_cache(maxsize=256)
def _script_words(text: str) -> tuple[str, ...]:
    text = re.sub(r"\\\n", " ", text)
    words: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("set "):
            continue
        try:
            parts = shlex.split(line, comments=True)
        except ValueError:
            continue
        for index, part in enumerate(parts):
            if part in ("|", "2>&1", "&&", ";") or part.startswith(("2>", ">")):
                parts = parts[:index]
                break
        words.extend(parts)
    return tuple(words)


def flag(words: list[str], *names: str) -> str | None:
    """The value of `--name value` or `--name=value` (Hydra `key=value` too)."""
    for index, word in enumerate(words):
        for name in names:
            if word == name and index + 1 < len(words):
                return words[index + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


_ITEM = re.compile(r"'([^'\\]*)': ('[^'\\]*'|[^,{}\[\]()']+)(?=, '|\}$)")
_WHOLE = re.compile(r"\{(?:'[^'\\]*': (?:'[^'\\]*'|[^,{}\[\]()']+)(?:, (?=')|\}$))+")
_FLOATISH = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "True": 1.0, "False": 0.0}


def fast_dict(text: str) -> dict[str, float | None] | None:
    """A flat Python dict repr of numbers, `.4g` strings, nan/inf/None (Trainer and OpenRLHF log lines)
    without `ast.literal_eval`: None when the text is anything else (the caller then falls back)."""
    body = text.strip()
    if not (body.startswith("{'") and body.endswith("}")):
        return None
    if not _WHOLE.fullmatch(body):
        return None
    read = _read_as_json(body)
    if read is not None:
        return read
    out: dict[str, float | None] = {}
    for key, raw in _ITEM.findall(body):
        try:  # a plain number (nan and inf too), as most are: what _put would give it
            out[key] = float(raw)
            continue
        except ValueError:
            pass
        raw = raw.strip()
        _put(out, key, raw[1:-1] if raw.startswith("'") else raw)
    return out


def _put(out: dict[str, float | None], key: str, raw: str) -> None:
    """A value's text, its quotes taken off: None, a number, or nothing (a word that is no number)."""
    if raw == "None":
        out[key] = None
        return
    try:
        number = _FLOATISH[raw] if raw in _FLOATISH else float(raw)
    except ValueError:
        return
    out[key] = number


def _read_as_json(body: str) -> dict[str, float | None] | None:
    """The usual line read as JSON, in a fifth of the time of the items' regex and their float()s;
    None for a line with a bare nan, inf, None or True (not JSON), which the regex then reads. The
    body is of `_WHOLE`'s shape (no backslash in a key or string), so with no double quote in it, its
    single quotes are exactly the delimiters of its keys and strings, a JSON number reads as float()
    reads it, and a string is what the regex finds between its quotes. Every item holds `': ` once,
    at its key's end: more of them is a key that comes twice (the regex's reading keeps the first of
    a value it skips) or a key or string that starts with `: `, left to the regex."""
    if '"' in body:
        return None
    try:
        data = orjson.loads(body.replace("'", '"'))
    except orjson.JSONDecodeError:
        return None
    if len(data) != body.count("': "):
        return None
    out: dict[str, float | None] = {}
    for key, value in data.items():
        kind = type(value)
        if kind is float:
            out[key] = value
        elif kind is int:  # not bool: its type is bool
            out[key] = float(value)
        elif kind is str:
            _put(out, key, value)
        # true, false and null are no Python values: skipped, as the regex's reading skips them
    return out


def degenerate(text: str) -> bool:
    """A completion that is empty, or one character/token repeated (`!!!!`, `<unk><unk>`)."""
    body = text.strip()
    if not body:
        return True
    sample = body[:_DEGENERATE_CHARS]
    if len(sample) >= 8 and len(set(sample)) <= 2:
        return True
    tokens = sample.split()
    return len(tokens) >= 8 and len(set(tokens)) == 1


class ConsoleAdapter:
    """Base of the console-log frameworks: subclasses say how to find their files and parse rows."""

    framework: Framework = Framework.VERL
    launch_markers: tuple[str, ...] = ()
    """Strings in a launch script that say it launches this framework."""
    steps_in_lines: bool = True
    """Every metric row of the console names its step (verl `step:N`, OpenRLHF `Global step N`, the
    Episode bar's counts), so a long backlog's middle can be skipped (lineblocks.HeadAndTail)."""

    # --- recognising ------------------------------------------------------------------------
    def recognise(self, path: Path) -> int:
        detection = detect_dir(path)
        return detection.counts.get(self.framework.value, 0)

    def discover(self, path: Path) -> RunInfo:
        return RunInfo(run_dir=str(path), framework=self.framework, name=path.name)

    # --- hooks ----------------------------------------------------------------------------
    def parse_rows(self, line: LogLine, state: ConsoleState | None = None):  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def console_state(self, run_dir: Path | None, config: RunConfig | None) -> ConsoleState:
        return ConsoleState()

    def extra_sources(
        self, run_dir: Path, config: RunConfig, cursors: dict[str, FileCursor], keep_per_kind: int
    ) -> list[FileRead]:
        return []

    # --- reading ---------------------------------------------------------------------------
    def console_logs(self, run_dir: Path, notes: list[str] | None = None) -> list[Path]:
        """The run's console logs: regular files only; a FIFO, a device or a link loop named like a
        log is a note (when `notes` is given), never opened."""
        logs = []
        for path in walk_files(run_dir, LOG_SUFFIXES):
            try:
                safefs.regular_stat(path)
            except FileNotFoundError:
                continue  # gone since listed, or a link to nothing
            except OSError as exc:
                line = f"{path.relative_to(run_dir)}: {safefs.reason(exc)}"
                if notes is not None and line not in notes:
                    notes.append(line)
                continue
            logs.append(path)
        return logs[:MAX_LOGS]

    def launch_script(self, run_dir: Path) -> Path | None:
        for name in sorted(n for n in safefs.list_names(run_dir) if n.endswith(".sh") and n != ".sh"):  # Path.suffix
            path = run_dir / name
            text = script_text(path)  # None: a FIFO named like a script, a link loop, no permission
            if text is not None and any(marker in text for marker in self.launch_markers):
                return path
        return None

    def read(self, run: RunInfo, cursors: dict[str, FileCursor], tz: tzinfo, *, keep_per_kind: int = 50) -> RunRead:
        run_dir = Path(run.run_dir)
        config = self.read_config(run_dir)
        out = RunRead()

        def read(path: Path, rel: str, cursor: FileCursor | None) -> FileRead:
            state = self.console_state(run_dir, config)
            framework, parse, lines = self.framework.value, self.parse_rows, self.steps_in_lines
            return read_console(path, rel, cursor, framework, parse, state, keep_per_kind=keep_per_kind, steps_in_lines=lines)

        listed = [str(path.relative_to(run_dir)) for path in self.console_logs(run_dir, out.notes)]
        out.files += [FileRead(rel, awaited) for rel, awaited in still_awaited(cursors, listed).items()]
        for rel in listed:
            out.files += read_across_rotation(read, run_dir / rel, rel, cursors.get(rel))
        logs_gone = [rel for rel in renamed_away(cursors, listed, run_dir) if rel.endswith(LOG_SUFFIXES)]
        for rel in logs_gone:  # renamed, not made again yet: its rest, its sequel awaited
            rotated = read_rest(read, run_dir / rel, rel, cursors[rel])
            if rotated is not None:
                parts, awaited, note = rotated
                out.files += [*parts, FileRead(rel, awaited)]
                out.notes.append(note)
        out.files.extend(self.extra_sources(run_dir, config, cursors, keep_per_kind))
        out.files.extend(read_trackers(run_dir, self.framework.value, cursors))
        return out

    def read_text(self, text: str, rel: str, run_dir: Path | None = None, resumed_from: int | None = None) -> FileRead:
        state = self.console_state(run_dir, None)
        state.step = resumed_from  # TRL numbers its step-less rows on from here
        return analyse(text, rel, self.framework.value, self.parse_rows, state)

    def read_config(self, run_dir: Path) -> RunConfig:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def samples(self, run_dir: Path, known_key: str | None) -> Samples | None:
        return Samples(key=None, notes=[])

    def checkpoints(self, run_dir: Path, notes: list[str] | None = None) -> dict[int, list[str]]:
        return {}

    def newest_checkpoint(self, run_dir: Path) -> int | None:
        complete = [step for step, parts in self.checkpoints(run_dir).items() if "incomplete" not in parts]
        return max(complete) if complete else None

    # --- resuming --------------------------------------------------------------------------
    def resume_flags(self, run_dir: Path, step: int, words: list[str]) -> ResumePlan:  # pragma: no cover
        raise NotImplementedError

    def resume_plan(self, run_dir: Path, launch_argv: list[str]) -> ResumePlan:
        step = self.newest_checkpoint(run_dir)
        if step is None:
            return ResumePlan(
                False, why=f"no complete {self.framework.value} checkpoint under {run_dir}: a relaunch would start from scratch"
            )
        words = list(launch_argv)
        script = self.launch_script(run_dir)
        if script is not None and words and Path(words[-1]).name == script.name:
            words = script_words(script)  # flags are passed on by the script's "$@"
        return self.resume_flags(run_dir, step, words)

    def process_markers(self, run: RunInfo) -> list[str]:
        return [run.run_dir]


def rollouts_from(samples: Iterable[tuple[int | None, str, float | None, dict]], step: int | None) -> list[Rollout]:
    out = []
    for sample_step, completion, reward, extra in samples:
        out.append(
            Rollout(
                why="sample",
                step=sample_step if sample_step is not None else (step or 0),
                reward=reward,
                truncated=bool(extra.get("truncated", False)),
                completion=completion[:4000],
            )
        )
    return out


def telling(rollouts: list[Rollout]) -> list[Rollout]:
    """The telling few (best, worst, truncated, errored), plus degenerate ones marked as such."""
    chosen = pick_telling(rollouts) if rollouts else []
    bad = [r.model_copy(update={"why": "degenerate"}) for r in rollouts if degenerate(r.completion)]
    return (chosen + bad[:2])[:8]
