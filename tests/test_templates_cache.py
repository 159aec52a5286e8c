"""Compiled templates are kept between processes (tools.templates): a new process loads them compiled
instead of compiling them, and a cache it cannot use (a damaged file, a directory that is not one, no
safe directory at all) costs only the compile."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import jinja2
import pytest

from rlagent.tools import templates

NAMES = ["status_entry.j2", "status_header.j2", "followup_entry.j2", "approval_request.j2", "llm_diagnostician.j2"]


def code_of(env: jinja2.Environment, name: str) -> bytes:
    return env.get_template(name).root_render_func.__code__.co_code


def compiled_fresh() -> dict[str, bytes]:
    env = templates.make_environment(None)
    return {name: code_of(env, name) for name in NAMES}


def never_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError("compiled, not loaded")

    monkeypatch.setattr(jinja2.Environment, "compile", refuse)


def test_a_new_process_loads_the_templates_a_first_one_compiled(tmp_path, monkeypatch):
    want = compiled_fresh()
    first = templates.make_environment(templates.kept_compiled(str(tmp_path)))
    assert {name: code_of(first, name) for name in NAMES} == want
    assert len(list(tmp_path.iterdir())) == len(NAMES)
    never_compile(monkeypatch)  # a new environment has nothing in memory: it must load every one
    second = templates.make_environment(templates.kept_compiled(str(tmp_path)))
    assert {name: code_of(second, name) for name in NAMES} == want


def test_a_damaged_cache_file_costs_the_compile_and_is_written_again(tmp_path):
    want = compiled_fresh()
    templates.make_environment(templates.kept_compiled(str(tmp_path))).get_template(NAMES[0])
    (kept,) = tmp_path.iterdir()
    for damage in (b"", b"garbage", kept.read_bytes()[:40], kept.read_bytes()[:-7]):
        kept.write_bytes(damage)
        env = templates.make_environment(templates.kept_compiled(str(tmp_path)))
        assert code_of(env, NAMES[0]) == want[NAMES[0]]
        assert kept.stat().st_size > 1000  # compiled and kept again


def test_a_cache_directory_that_is_a_file_costs_the_compile(tmp_path):
    want = compiled_fresh()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    env = templates.make_environment(templates.kept_compiled(str(not_a_dir)))
    assert {name: code_of(env, name) for name in NAMES} == want
    assert not_a_dir.read_text() == "x"


def test_no_safe_directory_means_no_cache(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"_jinja2-cache-{os.getuid()}").symlink_to(elsewhere)  # jinja2 refuses a link
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    assert templates.kept_compiled() is None
    env = templates.make_environment(None)
    assert code_of(env, NAMES[0]) == compiled_fresh()[NAMES[0]]
    assert list(elsewhere.iterdir()) == []


def test_the_cache_files_are_named_by_this_environment(tmp_path):
    """A change to the environment (its filters, its options) is a change to tools/templates.py, and
    must not load code compiled for the old one."""
    templates.make_environment(templates.kept_compiled(str(tmp_path))).get_template(NAMES[0])
    (kept,) = tmp_path.iterdir()
    source = Path(templates.__file__).read_bytes()
    assert kept.name.startswith(f"__rlagent_{hashlib.sha256(source).hexdigest()[:12]}_")
