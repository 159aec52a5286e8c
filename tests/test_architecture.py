"""The layering of the code, checked on its source (ast), so it stays true.

Imports run one way: the vocabulary (rlagent.models) <- rlagent.tools <- rlagent.agents <-
rlagent.graph <- rlagent.evals <- the top (rlagent.cli, rlagent.commands, rlagent.config);
rlagent.prompts (templates) imports nothing of rlagent. Module-level and function-level imports
both count (an import inside a function is still a dependency). `rlagent.cli` registers the
commands; the commands never import it back. No two subpackages import each other, directly or
round a longer cycle. Every folder with an `__init__.py` is a package in pyproject.toml.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOTS = {  # package -> folder (pyproject's package-dir)
    "rlagent": ROOT / "rlagent",
    "rlagent.agents": ROOT / "agents",
    "rlagent.graph": ROOT / "graph",
    "rlagent.tools": ROOT / "tools",
    "rlagent.prompts": ROOT / "prompts",
    "rlagent.evals": ROOT / "evals",
}
SKIP = (ROOT / "evals" / "fixtures", ROOT / "evals" / "real")
"""Recorded data, not code."""
LAYERS = {
    "rlagent.models": 0,
    "rlagent.tools": 1,
    "rlagent.agents": 2,
    "rlagent.graph": 3,
    "rlagent.evals": 4,
    "rlagent": 5,  # cli.py, commands/, config.py
}
TOP = "rlagent (cli, commands, config)"


@dataclass(frozen=True)
class Import:
    module: str
    """The importing module."""
    target: str
    """The imported module (or the package a name was imported from)."""
    line: int
    local: bool
    """Inside a function or method (imported when it runs)."""

    def __str__(self) -> str:
        where = "in a function" if self.local else "at module level"
        return f"{self.module} imports {self.target} (line {self.line}, {where})"


def module_name(path: Path, package: str, folder: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


@cache
def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            if any(path.is_relative_to(skip) for skip in SKIP):
                continue
            found[module_name(path, package, folder)] = path
    return found


def _is_package(name: str) -> bool:
    path = modules().get(name)
    return path is not None and path.name == "__init__.py"


def _imports_of(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Import(name, alias.name, child.lineno, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    source = ".".join([*base, child.module] if child.module else base)
                else:
                    source = child.module or ""
                for alias in child.names:  # `from rlagent.tools import journal` imports a module
                    sub = f"{source}.{alias.name}"
                    found.append(Import(name, sub if sub in modules() else source, child.lineno, inner))
            visit(child, inner)

    visit(tree, False)
    return [i for i in found if i.target == "rlagent" or i.target.startswith("rlagent.")]


@cache
def all_imports() -> list[Import]:
    return [i for name, path in modules().items() for i in _imports_of(name, path)]


def layer_of(module: str) -> str | None:
    """The layer a module belongs to (the longest matching layer package), None for prompts."""
    if module == "rlagent.prompts" or module.startswith("rlagent.prompts."):
        return None
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return best


def unit_of(module: str) -> str:
    """The subpackage a module belongs to; a module directly in a layer's folder is its own unit
    (so `rlagent.cli` and `rlagent.commands` are two units, as are `agents.collector` and `agents.review`)."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    return module if package in ROOTS else package


def test_the_scan_sees_the_code():
    names = modules()
    assert {"rlagent.cli", "rlagent.models.state", "rlagent.agents.writer", "rlagent.graph.build"} <= set(names)
    assert not [n for n, path in names.items() if any(path.is_relative_to(skip) for skip in SKIP)]
    # The scanner finds both kinds of import (it would otherwise pass vacuously).
    kinds = {(i.module, i.target, i.local) for i in all_imports()}
    assert ("rlagent.graph.runner", "rlagent.graph.build", False) in kinds
    assert any(local for *_, local in kinds)


def test_imports_run_one_way():
    wrong = []
    for imp in all_imports():
        source, target = layer_of(imp.module), layer_of(imp.target)
        if source is None:  # templates' package: nothing of rlagent
            wrong.append(f"{imp}: rlagent.prompts holds templates and imports nothing of rlagent")
        elif target is not None and LAYERS[target] > LAYERS[source]:
            name = TOP if target == "rlagent" else target
            wrong.append(f"{imp}: {source} may not import {name} (it sits above)")
    assert not wrong, "imports against the direction models <- tools <- agents <- graph <- evals <- cli:\n" + "\n".join(wrong)


def test_cli_and_commands_do_not_import_each_other():
    back = [i for i in all_imports() if i.module.startswith("rlagent.commands") and i.target == "rlagent.cli"]
    assert not back, "commands import rlagent.cli (shared helpers belong in rlagent.commands.common):\n" + "\n".join(
        map(str, back)
    )


def test_the_scanner_resolves_every_form_of_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from rlagent import cli\nimport rlagent.graph.runner\n"
        "def f():\n    from rlagent.tools import journal\n    from ..models import state\n",
        encoding="utf-8",
    )
    found = {(i.target, i.local) for i in _imports_of("rlagent.agents.probe", probe)}
    assert found == {
        ("rlagent.cli", False),
        ("rlagent.graph.runner", False),
        ("rlagent.tools.journal", True),
        ("rlagent.models.state", True),
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            strong(node)
    return found


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_cycle_between_subpackages():
    edges: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], Import] = {}
    for imp in all_imports():
        if imp.target not in modules():
            continue
        a, b = unit_of(imp.module), unit_of(imp.target)
        if a != b:
            edges.setdefault(a, set()).add(b)
            witness.setdefault((a, b), imp)
    found = cycles(edges)
    lines = []
    for component in found:
        members = set(component)
        lines.append(" <-> ".join(component))
        lines += [f"  {w}" for (a, b), w in sorted(witness.items()) if a in members and b in members]
    assert not found, "import cycles between subpackages:\n" + "\n".join(lines)


def test_every_package_folder_is_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    dirs = config["tool"]["setuptools"]["package-dir"]
    assert {name: ROOT / folder for name, folder in dirs.items()} == ROOTS
    folders = {
        module_name(init, package, folder)
        for package, folder in ROOTS.items()
        for init in folder.rglob("__init__.py")
        if not any(init.is_relative_to(skip) for skip in SKIP)
    }
    missing = sorted(folders - listed)
    assert not missing, f"packages missing from [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not sorted(listed - folders), "pyproject.toml lists packages that do not exist"


@pytest.mark.parametrize("layer", sorted(LAYERS, key=LAYERS.get))
def test_each_layer_has_code(layer):
    assert any(layer_of(name) == layer for name in modules()), f"no module found in {layer}"
