"""A file read to its end and unchanged since is planned from one stat (tools/tail.py), with the
plan and cursor the full way gives; any change at all (growth, a new modification time, a
replaced file, a link out of the run dir, a half-read last line) takes the full way."""

from __future__ import annotations

import os

import pytest

from rlagent.tools import tail
from rlagent.tools.safefs import UnsafeFile
from rlagent.tools.tail import plan_read

REL = "logs/rank3.log"


def full_way(path, cursor):
    """plan_read with the shortcut off."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tail, "_read_to_end_and_unchanged", lambda *a: None)
        return plan_read(path, REL, cursor)


def consumed(path, cursor):
    """The cursor as a reader leaves it after reading the whole planned range."""
    return cursor.model_copy(update={"offset": path.stat().st_size, "lines": path.read_bytes().count(b"\n")})


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "logs" / "rank3.log"
    path.parent.mkdir()
    path.write_bytes(b"".join(b"[rank3]: line %d of a quiet rank\n" % i for i in range(40)))
    return path


def test_an_unchanged_file_read_to_its_end_costs_one_stat(log, monkeypatch):
    _, cursor = plan_read(log, REL, None)
    cursor = consumed(log, cursor)
    want = full_way(log, cursor)
    monkeypatch.setattr(tail, "regular_stat", lambda *a: pytest.fail("the link check and full stat ran"))
    monkeypatch.setattr(tail, "head_hash", lambda *a: pytest.fail("the first bytes were read"))
    got = plan_read(log, REL, cursor)
    assert got == want
    assert got[0].start == got[0].end == log.stat().st_size  # nothing to read


@pytest.mark.parametrize("change", ["append", "touch", "replace_same_size", "partial_tail", "old_cursor"])
def test_any_change_takes_the_full_way(log, change):
    _, cursor = plan_read(log, REL, None)
    cursor = consumed(log, cursor)
    if change == "append":
        with open(log, "ab") as f:
            f.write(b"[rank3]: one more\n")
    elif change == "touch":  # same bytes, new modification time: perhaps rewritten in place
        st = log.stat()
        os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    elif change == "replace_same_size":
        data = log.read_bytes()
        fresh = log.with_suffix(".new")
        fresh.write_bytes(b"X" + data[1:])
        os.replace(fresh, log)
    elif change == "partial_tail":
        with open(log, "ab") as f:
            f.write(b"[rank3]: half a li")
        cursor = cursor.model_copy(update={"size": log.stat().st_size, "mtime_ns": log.stat().st_mtime_ns})
    else:  # a cursor written before cursors had a modification time
        cursor = cursor.model_copy(update={"mtime_ns": 0})
    calls = []
    real = tail.regular_stat
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tail, "regular_stat", lambda *a: calls.append(a) or real(*a))
        got = plan_read(log, REL, cursor)
    assert calls, "the shortcut was taken"
    assert got == full_way(log, cursor)


def test_a_link_out_of_the_run_dir_is_still_refused(log, tmp_path_factory):
    _, cursor = plan_read(log, REL, None)
    cursor = consumed(log, cursor)
    outside = tmp_path_factory.mktemp("elsewhere") / "rank3.log"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    with pytest.raises(UnsafeFile):
        plan_read(log, REL, cursor)
