"""Where the recorded-run fixtures are.

They are not shipped in the wheel: 4,600 files and 82 MB (8.7 MB zipped) of recorded runs whose
`logs/latest` symlinks a wheel cannot carry (a zip member is a file, so each link would become a
second copy of its attempt and the layout would change). A checkout has them; an installed package
finds them, in this order, at `--fixtures DIR`, `$RLAGENT_FIXTURES`, next to this module (an
editable install, or a checkout on sys.path), or in the rlagent checkout holding the current
directory. When none has them, FixturesNotFound says where it looked and how to get them.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "RLAGENT_FIXTURES"
PACKAGED = Path(__file__).resolve().parent / "fixtures"


class FixturesNotFound(Exception):
    """No fixture set where rlagent looked; the message says where it looked and what to do."""


def has_fixtures(root: Path) -> bool:
    try:
        return root.is_dir() and any((p / "case.toml").is_file() for p in root.iterdir() if p.is_dir())
    except OSError:
        return False


def checkout_fixtures(start: Path) -> Path | None:
    """`evals/fixtures` of the rlagent checkout holding `start` (its pyproject names rlagent)."""
    for folder in (start, *start.parents):
        candidate = folder / "evals" / "fixtures"
        pyproject = folder / "pyproject.toml"
        try:
            if candidate.is_dir() and pyproject.is_file() and 'name = "rlagent"' in pyproject.read_text(encoding="utf-8"):
                return candidate
        except (OSError, UnicodeDecodeError):
            continue
    return None


def find_fixtures(given: Path | None = None, cwd: Path | None = None) -> Path:
    """The fixture set to use (see the module's docstring for the order)."""
    if given is not None:
        if not has_fixtures(given):
            raise FixturesNotFound(f"--fixtures {given}: no fixtures there (folders each holding a case.toml)")
        return given
    env = os.environ.get(ENV)
    if env:
        if not has_fixtures(Path(env)):
            raise FixturesNotFound(f"{ENV}={env}: no fixtures there (folders each holding a case.toml)")
        return Path(env)
    if has_fixtures(PACKAGED):
        return PACKAGED
    here = Path.cwd() if cwd is None else cwd
    found = checkout_fixtures(here.resolve())
    if found is not None and has_fixtures(found):
        return found
    raise FixturesNotFound(
        "no fixtures found: the recorded runs (82 MB) are not installed with the package. "
        "Run this inside a clone of rlagent's repository (they are its evals/fixtures), pass --fixtures DIR, "
        f"or set {ENV}=DIR. Looked in {PACKAGED} and in {here} and the folders above it"
    )
