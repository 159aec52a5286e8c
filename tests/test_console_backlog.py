"""A console (or verl logger) backlog longer than one read (tools/adapters/console.py, HeadAndTail): a console whose rows
name their step (verl, OpenRLHF) is read as its head and its newest bytes, the middle only counted;
TRL, whose rows are numbered by counting them, is read oldest first and says it is behind.

The lines are verl's and TRL's console templates (reference/frameworks.md 1.1 and 2.1)."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.tools.adapters import console, lineblocks
from rlagent.tools.adapters.trl import TrlAdapter
from rlagent.tools.adapters.verl import VerlAdapter, read_file_logger
from rlagent.tools.steprows import EARLY_VALUES, KEEP_STEPS


def _verl_line(step: int) -> str:
    return (
        f"(TaskRunner pid=221183) step:{step} - actor/entropy:0.4213 - actor/pg_loss:np.float64(-0.0021) - "
        f"critic/score/mean:{0.4 + step % 7 / 100} - response_length/mean:612.3 - response_length/clip_ratio:0.031 - "
        f"timing_s/step:80.2"
    )


def _verl_log(steps: int, warn_every: int = 37) -> list[str]:
    lines = ["Started a local Ray instance. View the dashboard at 127.0.0.1:8265"]
    for step in range(1, steps + 1):
        lines.append(_verl_line(step))
        if step % warn_every == 0:
            lines.append(f"(TaskRunner pid=221183) WARNING 03-11 17:47:54 rollout.py:88] slow batch {step}")
    return lines


@pytest.fixture
def small_reads(monkeypatch):
    monkeypatch.setattr(lineblocks, "CHUNK", 2048)
    monkeypatch.setattr(lineblocks, "HEAD_READ", 4096)
    monkeypatch.setattr(lineblocks, "MAX_READ", 32768)
    monkeypatch.setattr(lineblocks, "COUNT_BLOCK", 1000)  # a count block ends mid-line


def _read(path, cursor, adapter, state=None):
    return console.read_console(
        path,
        path.name,
        cursor,
        adapter.framework.value,
        adapter.parse_rows,
        state or adapter.console_state(None, None),
        steps_in_lines=adapter.steps_in_lines,
    )


def _whole(path, adapter):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lineblocks, "MAX_READ", 1 << 30)
        return _read(path, None, adapter)


def test_a_verl_backlog_is_read_as_its_head_and_its_newest_lines_with_exact_line_numbers(tmp_path, small_reads):
    lines = _verl_log(1000)
    path = tmp_path / "verl_demo.log"
    text = "\n".join(lines) + "\n"
    path.write_text(text + "step:1001 - half-writ")
    adapter = VerlAdapter()
    whole = _whole(path, adapter)
    read = _read(path, None, adapter)
    assert read.cursor.offset == whole.cursor.offset == len(text.encode())
    assert read.cursor.lines == whole.cursor.lines == len(lines)
    assert read.cursor.step == whole.cursor.step == 1000

    steps = sorted({row.step for row in read.rows})
    head = [s for s in steps if s < 500]
    tail = [s for s in steps if s >= 500]
    assert head[0] == 1 and tail[-1] == 1000
    assert len(head) + len(tail) < 1000  # the middle's steps are not there
    assert tail == list(range(tail[0], 1001))  # the newest bytes, every step of them
    whole_rows = {(r.process, r.step): r.values for r in whole.rows}
    assert all(whole_rows[(r.process, r.step)] == r.values for r in read.rows)

    # every warning read is cited at its own line, and the tail's are all there
    numbered = {i + 1: line for i, line in enumerate(lines)}
    group = next(iter(read.groups.values()))
    assert numbered[group.last.line].endswith(f"slow batch {group.last.step}")
    assert numbered[group.first.line].endswith(f"slow batch {group.first.step}")
    (note,) = [n for n in read.notes if "not read" in n]
    first, last = (int(x) for x in note.split("(lines ")[1].split(")")[0].split("-"))
    assert numbered[first - 1] in text[:4096] and numbered[last + 1] in text[-(32768 - 4096) - 200 :]
    skipped = {int(numbered[n].split("step:")[1].split()[0]) for n in range(first, last + 1) if " step:" in numbered[n]}
    assert skipped and not skipped & set(steps) and set(steps) | skipped == set(range(1, 1001))
    assert group.count < whole.groups[group.template].count

    # the next check-in goes on from the end, its lines numbered on
    with open(path, "r+") as f:
        f.seek(len(text.encode()))
        f.write(_verl_line(1001) + "\n" + "(TaskRunner pid=221183) WARNING 03-11 17:47:54 rollout.py:88] slow batch 1001\n")
    after = _read(path, read.cursor, adapter)
    assert {r.step for r in after.rows} == {1001} and not after.notes
    assert next(iter(after.groups.values())).first.line == len(lines) + 2


def test_a_middle_without_a_newline_is_taken_from_where_the_head_stopped(tmp_path, small_reads):
    path = tmp_path / "verl_demo.log"
    head = "\n".join(_verl_line(s) for s in range(1, 4)) + "\n"
    path.write_bytes(head.encode() + b"x" * 100_000 + b"\n" + (_verl_line(9) + "\n").encode())
    read = _read(path, None, VerlAdapter())
    assert read.cursor.offset == len(head) + lineblocks.MAX_READ  # the long line taken in part, as any read does
    assert "an over-long line was read only in part" in " ".join(read.notes)
    assert sorted(r.step for r in read.rows if r.process == "trainer") == [1, 2, 3]


def _trl_log(rows: int) -> list[str]:
    return [f"{{'loss': {0.001 * i:.4f}, 'grad_norm': 0.2841, 'learning_rate': 1e-06, 'epoch': 0.01}}" for i in range(rows)]


def test_a_trl_backlog_longer_than_max_read_is_read_whole_in_one_check_in(tmp_path, small_reads):
    """TRL numbers its rows by counting them, so no row can be skipped: a backlog is read oldest first,
    all of it when that takes less than READ_BUDGET_S (a block at a time: its rows are held bounded)."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(_trl_log(1200)) + "\n")
    assert path.stat().st_size > 2 * lineblocks.MAX_READ
    read = _read(path, None, TrlAdapter())
    assert read.cursor.offset == path.stat().st_size and read.cursor.lines == 1200
    assert not [n for n in read.notes if "behind the run" in n] and not read.behind
    assert sorted({r.step for r in read.rows if r.process == "trainer"})[-3:] == [1198, 1199, 1200]


def test_a_trl_backlog_read_past_its_budget_goes_on_at_the_next_check_ins_saying_it_is_behind(tmp_path, small_reads, monkeypatch):
    lines = _trl_log(1200)
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    adapter = TrlAdapter()
    whole = _whole(path, adapter)
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)  # spent once the first block is read
    cursor, steps, reads = None, [], 0
    while cursor is None or cursor.offset < path.stat().st_size:
        read = _read(path, cursor, adapter)
        assert read.bytes_read <= lineblocks.CHUNK + 200  # one block, ending at a line's end
        cursor, reads = read.cursor, reads + 1
        steps += [r.step for r in read.rows if r.process == "trainer"]
        behind = [n for n in read.notes if "behind the run" in n]
        assert bool(behind) == read.behind == (cursor.offset < path.stat().st_size)
    assert reads > 2
    assert steps == sorted({r.step for r in whole.rows if r.process == "trainer"}) == list(range(1, 1201))


def _logger_line(step: int) -> str:
    return json.dumps({"step": step, "data": {"critic/score/mean": 0.4 + step % 7 / 100, "actor/entropy": 0.5}})


def test_verl_file_logger_backlog_is_read_as_its_head_and_newest_rows(tmp_path, small_reads):
    """verl's `file` logger JSONL (frameworks.md 1.2) was read whole at every check-in, holding a row per
    line: a week of steps was gigabytes of dicts. It is read as the console is."""
    path = tmp_path / "exp.jsonl"
    lines = [_logger_line(step) for step in range(1, 1201)]
    text = "\n".join(lines) + "\n"
    path.write_text(text + '{"step": 1201, "da')
    read = read_file_logger(path, "exp.jsonl", None)
    assert read.cursor.offset == len(text) and read.cursor.lines == 1200
    steps = sorted({row.step for row in read.rows})
    assert steps[0] == 1 and steps[-1] == 1200 and len(steps) < 1200
    tail = [s for s in steps if s > 600]
    assert tail == list(range(tail[0], 1201))
    (note,) = [n for n in read.notes if "not read" in n]
    first, last = (int(x) for x in note.split("(lines ")[1].split(")")[0].split("-"))
    assert set(range(first, last + 1)) == set(range(1, 1201)) - set(steps)  # line n holds step n
    with open(path, "a") as f:
        f.write('ta": {"actor/entropy": 0.1}}\n')
    after = read_file_logger(path, "exp.jsonl", read.cursor)
    assert {row.step for row in after.rows} == {1201} and not after.notes and after.cursor.lines == 1201


def test_verl_file_logger_rows_are_held_bounded_as_the_collector_keeps_them(tmp_path):
    path = tmp_path / "exp.jsonl"
    path.write_text("".join(_logger_line(step) + "\n" for step in range(1, 3001)))
    read = read_file_logger(path, "exp.jsonl", None)
    steps = sorted({row.step for row in read.rows})
    assert len(steps) < 3000 and steps[-KEEP_STEPS:] == list(range(3001 - KEEP_STEPS, 3001))
    assert steps[:EARLY_VALUES] == list(range(1, EARLY_VALUES + 1))  # the early values survive


def test_lines_after_the_gap_and_before_its_first_step_have_no_step(tmp_path, small_reads):
    """What the tail holds before its first step line happened after steps that were not read: its step
    is unknown (None), not the head's last step."""
    lines = _verl_log(1000, warn_every=10**9)
    path = tmp_path / "verl_demo.log"
    path.write_text("\n".join(lines) + "\n")
    (note,) = [n for n in _read(path, None, VerlAdapter()).notes if "not read" in n]
    first_tail = int(note.split("(lines ")[1].split(")")[0].split("-")[1]) + 1
    # the tail's first lines, and one near the end, become traceback heads of the same length (the gap stays put)
    for index in [*range(first_tail - 1, first_tail + 3), len(lines) - 3]:
        lines[index] = "Traceback (most recent call last):".ljust(len(lines[index]))
    path.write_text("\n".join(lines) + "\n")
    read = _read(path, None, VerlAdapter())
    heads = {e.line: e.step for e in read.events if e.kind == "traceback"}
    assert [n for n in read.notes if "not read" in n] == [note]
    assert heads == {**dict.fromkeys(range(first_tail, first_tail + 4)), len(lines) - 2: 997}  # step 998 replaced


def test_check_says_when_it_left_a_backlog_part_read(tmp_path, monkeypatch):
    """`rlagent check` on a TRL run whose console is not read whole within the budget: the JSON
    report lists the file in `behind` and the summary line marks the step `(catching up)`, until
    a check-in reads the rest."""
    from typer.testing import CliRunner

    from rlagent.cli import app
    from rlagent.evals.simulator.frameworks.registry import FRAMEWORK_SCENARIOS
    from rlagent.evals.simulator.frameworks.writer import write_framework_run

    run, home = tmp_path / "trl", tmp_path / "home"
    write_framework_run(FRAMEWORK_SCENARIOS["trl-healthy"].variant(samples_kept=1), run)
    monkeypatch.setattr(lineblocks, "CHUNK", 2048)  # the simulated console is many blocks
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)  # spent once the first block is read
    cli = CliRunner()

    def check(*flags: str) -> str:
        result = cli.invoke(app, ["check", str(run), "--offline", "--home", str(home), *flags])
        assert result.exit_code == 0, result.output  # a Healthy run
        return result.output

    assert json.loads(check("--json"))["behind"] == ["train.log"]
    assert re.search(r"· step \d+/100 \(catching up\) ·", check())
    status = cli.invoke(app, ["status", str(run), "--home", str(home)])
    assert re.search(r"Healthy, step \d+ \(catching up\); no findings", status.output), status.output
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 20.0)
    assert json.loads(check("--json"))["behind"] == []
    assert re.search(r"· step 40/100 · no findings", check())
    assert "(catching up)" not in cli.invoke(app, ["status", str(run), "--home", str(home)]).output


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.integers(40, 4000), st.sampled_from([64, 97, 4096]))
def test_a_skipped_middle_says_on_which_lines_its_tracebacks_begin(tmp_path_factory, seed, n_lines, block):
    """Against the long way: every header in [start, the last line start before `until`), wherever a
    block boundary cuts it, at its own line; none of the partial last line, which the tail reads."""
    rng = random.Random(seed)
    pieces = [lineblocks.TRACEBACK.decode(), '  File "x.py", line 3', "step:12 - a:1", "Trace", "back (most", "", "é"]
    text = "\n".join(" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))) for _ in range(n_lines)).encode()
    path = tmp_path_factory.mktemp("middle") / "log"
    path.write_bytes(text)
    start = rng.randrange(0, len(text) // 2)
    until = rng.randrange(start, len(text) + 1)
    with pytest.MonkeyPatch.context() as mp, open(path, "rb") as handle:
        mp.setattr(lineblocks, "COUNT_BLOCK", block)
        line_start, lines, tracebacks = lineblocks._count_to_line_start(handle, start, until)
    part = text[start:until]
    cut = part.rfind(b"\n") + 1
    assert line_start == start + cut and lines == part.count(b"\n")
    headers = [m.start() for m in re.finditer(re.escape(lineblocks.TRACEBACK), part[:cut])]
    assert tracebacks == [part[:at].count(b"\n") for at in headers]


def test_a_verl_backlogs_note_names_the_lines_where_the_skipped_tracebacks_begin(tmp_path, small_reads):
    lines = _verl_log(1000)
    crash = ["Traceback (most recent call last):", '  File "main_ppo.py", line 42, in run', "ray.exceptions.RayTaskError"]
    lines[300:300] = crash  # in the middle: neither the first 4 KB nor the newest 28 KB
    lines[450:450] = crash
    path = tmp_path / "verl_demo.log"
    path.write_text("\n".join(lines) + "\n")
    read = _read(path, None, VerlAdapter())
    (note,) = [n for n in read.notes if "not read" in n]
    assert "2 Python traceback(s) begin there, the rules did not see them (line(s) 301, 451)" in note
    assert not [e for e in read.events if e.kind == "traceback"]  # not read: only counted


def test_a_header_on_the_middles_unfinished_last_line_is_left_to_the_tail(tmp_path):
    text = b"a\n" + lineblocks.TRACEBACK + b"\nb\nc " + lineblocks.TRACEBACK
    path = tmp_path / "log"
    path.write_bytes(text)
    with open(path, "rb") as handle:
        assert lineblocks._count_to_line_start(handle, 0, len(text)) == (text.rindex(b"\n") + 1, 3, [1])
