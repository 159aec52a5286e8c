"""The auditor's reads of a log (tools/evidence.py) continue from where the last one stopped while
the file is the same, and give what reading the whole file now gives (the newest step, a metric at
a step, a cited line): through appends, a line half written, a resume that repeats steps, a
truncation, a rewrite in place and a replaced file."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlagent.models.run import Layout
from rlagent.tools import evidence
from rlagent.tools.evidence import line_at, metric_on_disk, newest_step, step_lines
from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.steplines import parse_step_line

from conftest import loguru_line


def step_line(step: int, entropy: float) -> str:
    return loguru_line(
        "09:00:00",
        "SUCCESS",
        f"Step {step} |   38.9s | Loss 0.0012 | Entropy {entropy:.4f} | Mismatch KL 0.0008 | Grad. Norm 0.2143 | "
        "LR 3.00e-06 | Throughput 10432 tokens/s | MFU 12.1% | Peak Mem. 31.7 GiB",
        "[trainer0]:",
    )


def whole_file_newest(path) -> int | None:
    steps = [line.step for line in step_lines(path, "trainer")]
    return max(steps) if steps else None


def whole_file_texts(path, step: int) -> list[tuple[int, str]]:
    """The Claude auditor's step line citations as it read them before the index: every line."""
    found = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            text = clean(raw)
            head = parse_head(text)
            line = parse_step_line(head.message, "trainer") if head else None
            if line is not None and line.step == step and line.process == "trainer":
                found.append((number, text))
    return found


def whole_file_metric(path, step: int) -> float | None:
    found = None
    for line in step_lines(path, "trainer"):
        if line.step == step and "entropy" in line.values:
            found = line.values["entropy"]
    return found


actions = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40), st.integers(1, 6)),  # steps from n, k of them
    st.tuples(st.just("half"), st.integers(1, 40), st.integers(5, 60)),  # the first bytes of a step line
    st.tuples(st.just("finish"), st.just(0), st.just(0)),  # the half-written line completed
    st.tuples(st.just("truncate"), st.integers(0, 3000), st.just(0)),
    st.tuples(st.just("rewrite"), st.integers(1, 40), st.just(0)),  # same inode, new first bytes
    st.tuples(st.just("replace"), st.integers(1, 40), st.just(0)),  # a new file at the same path
    st.tuples(st.just("noise"), st.just(0), st.just(0)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(actions, min_size=1, max_size=25), st.integers(2, 6))
def test_incremental_reads_give_what_a_whole_read_gives(tmp_path_factory, script, kept):
    run = tmp_path_factory.mktemp("run")
    logs = run / "logs" / "attempt_1"
    logs.mkdir(parents=True)
    (run / "logs" / "latest").symlink_to("attempt_1")
    path = logs / "trainer.log"
    path.write_bytes(b"")
    pending: tuple = ()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence, "KEPT_STEPS", kept)  # small, so older steps are let go and read again
        evidence._INDEXES.clear()
        for n, (action, a, b) in enumerate(script):
            if action == "append":
                with open(path, "ab") as f:
                    f.write(b"".join(step_line(s, 0.5 + 0.01 * n).encode() for s in range(a, a + b)))
            elif action == "half":
                pending = (step_line(a, 0.25).encode(), b)
                with open(path, "ab") as f:
                    f.write(pending[0][:b])
            elif action == "finish" and pending:
                line, written = pending
                if path.read_bytes().endswith(line[:written]):  # still there: the writer finishes it
                    with open(path, "ab") as f:
                        f.write(line[written:])
                pending = ()
            elif action == "truncate":
                with open(path, "r+b") as f:
                    f.truncate(min(a, os.path.getsize(path)))
            elif action == "rewrite":
                first = step_line(a, 0.9).encode()
                with open(path, "r+b") as f:
                    f.write(first + path.read_bytes()[len(first) :])
            elif action == "replace":
                tmp = logs / "new.log"
                tmp.write_bytes(step_line(a, 0.1).encode())
                os.replace(tmp, path)
            else:
                with open(path, "ab") as f:  # a progress bar's carriage returns are inside their line
                    f.write(b"not a step line\n\x00\xff junk\n 12%|#2  | 12/100\r 13%|#3  | 13/100\n")
            assert newest_step(path, "trainer") == whole_file_newest(path)
            for step in range(0, 48, 3):
                assert metric_on_disk(run, Layout.H, "trainer", "entropy", step) == whole_file_metric(path, step)
                assert evidence.step_line_texts(path, "trainer", step) == whole_file_texts(path, step)


def test_a_log_read_once_is_read_on_from_where_it_stopped(tmp_path, monkeypatch):
    path = tmp_path / "trainer.log"
    path.write_text("".join(step_line(s, 0.5) for s in range(1, 2001)))
    assert newest_step(path, "trainer") == 2000
    read: list[int] = []
    real = evidence.iter_complete_lines
    monkeypatch.setattr(evidence, "iter_complete_lines", lambda p, start, end: read.append(end - start) or real(p, start, end))
    with open(path, "a") as f:
        f.write(step_line(2001, 0.5))
    assert newest_step(path, "trainer") == 2001
    assert read == [len(step_line(2001, 0.5).encode())]  # the new line only, not the 2000 before it
    monkeypatch.setattr(evidence, "_whole_file_texts", lambda *a: pytest.fail("the whole file was read"))
    assert evidence.step_line_texts(path, "trainer", 1990) == [(1990, clean(step_line(1990, 0.5).encode()))]
    assert read == [len(step_line(2001, 0.5).encode()), 0]  # nothing new: no line read again


def whole_file_line(path, number: int) -> str | None:
    with open(path, "rb") as f:
        for index, raw in enumerate(f, 1):
            if index == number:
                return clean(raw)
    return None


growth = st.one_of(
    st.tuples(st.just("append"), st.binary(max_size=40)),
    st.tuples(
        st.just("lines"),
        st.lists(st.sampled_from([b"a\n", b"\n", b"step 3\n", b"\x1b[1mred\x1b[0m\n"]), max_size=12).map(b"".join),
    ),
    st.tuples(st.just("truncate"), st.integers(0, 200).map(lambda n: bytes([n % 256]))),
    st.tuples(st.just("replace"), st.binary(max_size=40)),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(growth, min_size=1, max_size=20), st.integers(1, 16))
def test_a_cited_line_is_the_line_a_whole_read_finds(tmp_path_factory, script, every):
    path = tmp_path_factory.mktemp("lines") / "orchestrator.log"
    path.write_bytes(b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence, "_MARK_EVERY", every)  # tiny, so lines are found from many marks
        evidence._MARKS.clear()
        for action, data in script:
            if action in ("append", "lines"):
                with open(path, "ab") as f:
                    f.write(data)
            elif action == "truncate":
                with open(path, "r+b") as f:
                    f.truncate(min(data[0], os.path.getsize(path)))
            else:
                tmp = path.with_name("new.log")
                tmp.write_bytes(data)
                os.replace(tmp, path)
            for number in range(0, 30):
                assert line_at(path, number) == whole_file_line(path, number)
