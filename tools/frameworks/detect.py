"""Which framework wrote a text, a file or a run directory.

Text signatures (one per framework, after lines.py preprocessing):
  verl      `step:N - key:value`                      (aggregate_logger.concat_dict_to_str)
  trl       a line that is a Trainer log dict `{'loss': ...}` / `{'learning_rate': ...}`
  openrlhf  `Global step N: {...}`, or the `Episode [e/E]` tqdm bar of <= v0.8.0
  prime-rl  loguru step lines `Step N | ... | Loss ...` / `| Reward ...`
Directories also count their files: verl `latest_checkpointed_iteration.txt` / `global_step_N/`, TRL
`checkpoint-N/trainer_state.json` / `completions/*.parquet`, OpenRLHF `_actor/global_stepN/`, prime-rl
`metrics.jsonl` + `logs/trainer.log`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rlagent.tools import safefs
from rlagent.tools.frameworks.lines import decode, iter_lines, strip_ansi
from rlagent.tools.safefs import open_regular, read_up_to

_TEXT_SIGNATURES: dict[str, re.Pattern[str]] = {
    "verl": re.compile(r"(?:^|[^\w/])step:\d+ - [\w/@.-]+:"),
    "trl": re.compile(r"^\s*(?:\[rank\d+\]:\s*)?\{'(?:loss|learning_rate|grad_norm|eps|train_runtime|eval_\w+)': "),
    "openrlhf": re.compile(r"Global step \d+: \{'|Episode \[\d+/\d+\]:.*\d+/\d+ \[[^\]]*=[^\]]*\]"),
    "prime-rl": re.compile(r"\bStep \d+ \| .*\| (?:Loss|Reward):? [-\d.na]"),
}
_LOG_SUFFIXES = {".log", ".out", ".err", ".txt"}
HEAD_BYTES = 512 * 1024


@dataclass
class Detection:
    framework: str | None
    """The framework with the most evidence, or None when there is none."""
    counts: dict[str, int] = field(default_factory=dict)
    """Evidence per framework (matching lines, plus layout markers for directories)."""

    @property
    def mixed(self) -> bool:
        """True when more than one framework left evidence (e.g. two runs' logs in one file)."""
        return sum(1 for count in self.counts.values() if count) > 1


def _decide(counts: dict[str, int]) -> Detection:
    counts = {name: count for name, count in counts.items() if count}
    best = max(counts, key=lambda name: counts[name]) if counts else None
    return Detection(best, counts)


# Every signature's line holds one of these once cleaned (ANSI codes, which could split one, are
# stripped from the whole text first, as iter_lines strips them from each line). The other lines
# (most of a log: requests, progress bars) hold no signature and are skipped without being split
# and cleaned: 2.5 MB of prime-rl log heads in ~10 ms rather than ~70 ms, at every `rlagent check`.
_HINT = re.compile(r"step:\d|\{'|Global step|Episode \[|Step \d")


# Text every match of a signature holds: a line without it is not searched with that signature's regex
# (a prime-rl step line would otherwise be searched by all four, at every `rlagent check`).
_SIGNATURE_NEEDLES: dict[str, tuple[str, ...]] = {
    "verl": ("step:",),
    "trl": ("{'",),
    "openrlhf": ("Global step ", "Episode ["),
    "prime-rl": ("Step ",),
}
_GATED = tuple((name, pattern, _SIGNATURE_NEEDLES[name]) for name, pattern in _TEXT_SIGNATURES.items())


def count_text(text: str) -> dict[str, int]:
    counts = dict.fromkeys(_TEXT_SIGNATURES, 0)
    for physical in _hinted_lines(strip_ansi(text) if "\x1b" in text else text):
        for line in iter_lines(physical):
            body = line.text
            for name, pattern, needles in _GATED:
                for needle in needles:  # a loop, not any(): cheaper than the searches it saves
                    if needle in body:
                        if pattern.search(body):
                            counts[name] += 1
                        break
    return counts


def _hinted_lines(text: str) -> Iterator[str]:
    """The `\\n` lines of `text` holding a hint, each once."""
    end = -1
    for match in _HINT.finditer(text):
        if match.start() <= end:  # on a line already given
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        end = len(text) if end < 0 else end
        yield text[start:end]


def detect_text(text: str) -> Detection:
    return _decide(count_text(text))


def _head(path: Path) -> str:
    with open_regular(path) as handle:  # a FIFO named like a log must not block detection
        return decode(read_up_to(handle, HEAD_BYTES))


def detect_file(path: str | Path) -> Detection:
    """From the first 512 KiB of a log file (step lines start early in every framework)."""
    path = Path(path)
    try:
        return detect_text(_head(path))
    except OSError:
        return Detection(None)


# (parent folder, name) patterns of each framework's run layout.
_LAYOUT: dict[str, tuple[tuple[str, str], ...]] = {
    "verl": ((r".*", r"latest_checkpointed_iteration\.txt"), (r"global_step_\d+", r"actor")),
    "trl": ((r"checkpoint-\d+", r"trainer_state\.json"), (r"completions", r"completions_\d+\.parquet")),
    "openrlhf": ((r"_actor", r"global_step\d+"), (r"_actor", r"latest")),
    "prime-rl": ((r"checkpoints", r"step_\d+"), (r"logs|attempt_\d+|latest", r"trainer\.log")),
}


_COMPILED_LAYOUT = {
    name: [(re.compile(parent), re.compile(child)) for parent, child in markers] for name, markers in _LAYOUT.items()
}
# Any marker's name: most entries of a run's tree (rank logs, rollouts) are none, and are passed over in one match.
_ANY_MARKER_NAME = re.compile("|".join(f"(?:{child})" for markers in _LAYOUT.values() for _, child in markers))


def _layout_counts(root: Path, max_entries: int = 100_000) -> dict[str, int]:
    """One walk of the tree; each layout marker counts once."""
    seen: set[tuple[str, int]] = set()
    entries = 0
    for dirpath, dirnames, filenames in os.walk(root):
        parent = os.path.basename(dirpath)
        for child in dirnames + filenames:
            entries += 1
            if _ANY_MARKER_NAME.fullmatch(child) is None:
                continue
            for name, markers in _COMPILED_LAYOUT.items():
                for index, (parent_re, child_re) in enumerate(markers):
                    if (name, index) not in seen and child_re.fullmatch(child) and parent_re.fullmatch(parent):
                        seen.add((name, index))
        if entries > max_entries:
            break
    counts = dict.fromkeys(_TEXT_SIGNATURES, 0)
    for name, _ in seen:
        counts[name] += 1
    return counts


def detect_dir(root: str | Path, max_files: int = 50) -> Detection:
    """From the directory layout and up to `max_files` log files (*.log, *.out, *.err, *.txt) under it."""
    root = Path(root)
    if not safefs.is_dir(root):
        return Detection(None)
    counts = _layout_counts(root)
    logs: list[Path] = []
    for dirpath, _, filenames in os.walk(root):
        logs.extend(Path(dirpath, name) for name in sorted(filenames) if Path(name).suffix in _LOG_SUFFIXES)
        if len(logs) >= max_files:
            break
    logs = logs[:max_files]
    for path in logs:
        try:
            for name, count in count_text(_head(path)).items():
                counts[name] += count
        except OSError:
            continue
    return _decide(counts)


def detect(path_or_text: str | Path) -> Detection:
    """A directory, a file, or (a str that is neither) text."""
    maybe_path = isinstance(path_or_text, str) and "\n" not in path_or_text and len(path_or_text) < 4096
    if isinstance(path_or_text, Path) or maybe_path:
        path = Path(path_or_text)
        try:
            if path.is_dir():
                return detect_dir(path)
            if path.is_file():
                return detect_file(path)
        except OSError:
            pass
    return detect_text(str(path_or_text))
