"""`manifest.json`: the times of a recorded run that git cannot keep.

Git stores no mtimes, yet the monitor dates `HH:MM:SS` log lines from a file's mtime, and a
replay must know when each checkpoint or rollouts file appeared. So when a fixture is made, every
file of `run/` is listed here with its kind and its recorded mtime (the time of its last line),
with the history of symlinks (`logs/latest` moving to `attempt_2` at a restart) and renames (a
rotated log that lived under its old name until it was rotated).

Kinds: `log` is cut line by line on the time each line carries, `jsonl` (metrics.jsonl) row by
row on its `time` field, `file` appears whole at its mtime.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlagent.tools import safefs

MANIFEST = "manifest.json"
Kind = Literal["log", "jsonl", "file"]


class ManifestError(Exception):
    """A manifest that is missing, malformed or disagrees with the files of `run/`."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Strict):
    kind: Kind
    mtime: AwareDatetime
    """When the file was last written (its last line or row, or its whole content)."""
    renamed_from: str | None = None
    """A rotated log: the path it was written under before the rotation..."""
    renamed_at: AwareDatetime | None = None
    """... and when it was renamed to its recorded path."""

    @model_validator(mode="after")
    def _rename_pair(self) -> Self:
        if (self.renamed_from is None) != (self.renamed_at is None):
            raise ValueError("renamed_from and renamed_at go together")
        if self.renamed_at is not None and self.renamed_at < self.mtime:
            raise ValueError("a file cannot be written after it was renamed")
        return self


class LinkState(_Strict):
    at: AwareDatetime
    target: str


class Manifest(_Strict):
    version: Literal[1] = 1
    files: dict[str, FileEntry]
    symlinks: dict[str, list[LinkState]] = Field(default_factory=dict)
    """Symlink path -> its targets over time, oldest first."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        for path, states in self.symlinks.items():
            if not states:
                raise ValueError(f"symlinks.{path}: no target")
            if any(b.at < a.at for a, b in itertools.pairwise(states)):
                raise ValueError(f"symlinks.{path}: targets not in time order")
        return self

    def dumps(self) -> str:
        """Stable text (sorted paths): a re-made fixture gives the same bytes."""
        data = self.model_dump(mode="json", exclude_none=True)
        data["files"] = dict(sorted(data["files"].items()))
        data["symlinks"] = dict(sorted(data["symlinks"].items()))
        return json.dumps(data, indent=1) + "\n"


def kind_of(rel: str) -> Kind:
    name = rel.rsplit("/", 1)[-1]
    if name == "metrics.jsonl":
        return "jsonl"
    if name.endswith(".log") or ".log." in name:
        return "log"
    return "file"


def utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def build_manifest(
    run_dir: Path,
    *,
    symlinks: dict[str, list[LinkState]] | None = None,
    renames: dict[str, tuple[str, datetime]] | None = None,
) -> Manifest:
    """The manifest of `run_dir` as it is now (mtimes as the simulator or an edit set them).
    Symlinks without a given history point at their current target from the run's first moment."""
    files: dict[str, FileEntry] = {}
    links: dict[str, list[LinkState]] = dict(symlinks or {})
    found_links: list[tuple[str, str]] = []
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_symlink():
            found_links.append((rel, os.readlink(path)))
        elif path.is_file():
            renamed = (renames or {}).get(rel)
            files[rel] = FileEntry(
                kind=kind_of(rel),
                mtime=utc(path.stat().st_mtime),
                renamed_from=renamed[0] if renamed else None,
                renamed_at=renamed[1] if renamed else None,
            )
    first = min((f.mtime for f in files.values()), default=utc(0))
    for rel, target in found_links:
        links.setdefault(rel, [LinkState(at=first, target=target)])
    return Manifest(files=files, symlinks=links)


def load_manifest(path: Path) -> Manifest:
    try:
        data = json.loads(safefs.read_regular(path).decode("utf-8"))  # a FIFO or /dev/zero: refused, not waited on
    except FileNotFoundError as exc:
        raise ManifestError(f"{path.name}: missing (re-make the fixture, or write it with build_manifest)") from exc
    except OSError as exc:
        raise ManifestError(f"{path.name}: unreadable ({safefs.reason(exc)})") from exc
    except ValueError as exc:  # UnicodeDecodeError is one
        raise ManifestError(f"{path.name}: unreadable or malformed JSON ({exc})") from exc
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"{path.name}: {where}: {first['msg']}") from exc


def check_files(run_dir: Path, manifest: Manifest) -> list[str]:
    """Disagreements between `run/` and the manifest, one clear line each. Symlinks are made from
    the manifest's history when replaying, so a copy that lost them (a wheel, an archive) is fine."""
    problems: list[str] = []
    on_disk = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()}
    links = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_symlink()}
    for rel in sorted(set(manifest.files) - on_disk):
        problems.append(f"run/{rel} is in the manifest but {_not_a_file(run_dir / rel)}")
    for rel in sorted(on_disk - set(manifest.files)):
        problems.append(f"run/{rel} is not in the manifest (its time is unknown)")
    for rel in sorted(links - set(manifest.symlinks)):
        problems.append(f"run/{rel} is a symlink the manifest does not know (its targets over time are unknown)")
    return problems


def _not_a_file(path: Path) -> str:
    """Why a file of the manifest is not among run/'s files: missing, or there as something else."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "is a symlink, not a file"
    return f"is {safefs.kind_of(mode)}, not a regular file"
