"""Finding and loading fixtures: `evals/fixtures/<NN_slug>/{case.toml, manifest.json, run/}`.

Loading checks everything a replay relies on and reports every problem at once, under the
fixture's name, so one broken fixture is a clear line in the scoreboard, not a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlagent.evals.case import Case, CaseError, load_case
from rlagent.evals.manifest import MANIFEST, Manifest, ManifestError, check_files, load_manifest
from rlagent.tools.layout import RunNotFound, discover_run

FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""The bundled fixtures (next to this module, so an editable install finds them)."""
CASE = "case.toml"
RUN = "run"


class FixtureError(Exception):
    """A fixture that cannot be replayed; `problems` says why, one line each."""

    def __init__(self, name: str, problems: list[str]) -> None:
        super().__init__(f"{name}: " + "; ".join(problems))
        self.name = name
        self.problems = problems


@dataclass(frozen=True)
class Fixture:
    name: str
    dir: Path
    case: Case
    manifest: Manifest

    @property
    def run_dir(self) -> Path:
        return self.dir / RUN


def load_fixture(path: Path) -> Fixture:
    """Load and check one fixture folder; raises FixtureError listing every problem found."""
    path = Path(path)
    name = path.name
    if not path.is_dir():
        raise FixtureError(name, [f"{path}: no such fixture directory"])
    problems: list[str] = []
    case = manifest = None
    try:
        case = load_case(path / CASE)
    except CaseError as exc:
        problems.append(str(exc))
    run_dir = path / RUN
    if not run_dir.is_dir():
        problems.append("run/: missing (the simulated run directory)")
    try:
        manifest = load_manifest(path / MANIFEST)
    except ManifestError as exc:
        problems.append(str(exc))
    if manifest is not None and run_dir.is_dir():
        problems += check_files(run_dir, manifest)
    if case is not None and run_dir.is_dir():
        try:
            found = discover_run(run_dir).layout
            if found != case.layout:
                problems.append(f"case.toml says layout {case.layout.value} but run/ is laid out as {found.value}")
        except RunNotFound as exc:
            problems.append(f"run/: {exc}")
    if problems or case is None or manifest is None:
        raise FixtureError(name, problems)
    return Fixture(name=name, dir=path, case=case, manifest=manifest)


def fixture_dirs(root: Path = FIXTURES) -> list[Path]:
    """Every fixture folder under `root`, in name order (a folder counts if it has a case.toml
    or a run/, so a half-made one is reported rather than skipped)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and ((p / CASE).exists() or (p / RUN).exists()))


def resolve(name: str, root: Path = FIXTURES) -> Path:
    """A fixture given as a path, a folder name under `root`, or its slug without the number."""
    given = Path(name)
    if given.is_dir():
        return given
    if (root / name).is_dir():
        return root / name
    matches = [p for p in fixture_dirs(root) if p.name.split("_", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    raise FixtureError(name, [f"no fixture {name!r} (neither a directory nor a name under {root})"])
