"""The framework adapters: detection, configs, incremental reading by byte offset, checkpoints, resume
commands built from the run's own launch script, and live processes tied to the run."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from rlagent.models.run import Framework
from rlagent.tools.adapters import ADAPTERS, NoFramework, adapter_for, discover
from rlagent.tools.framework_command import resume_argv
from rlagent.tools.framework_processes import find_framework_processes
from rlagent.tools.launch_command import CommandError

FIXTURES = Path(__file__).resolve().parents[1] / "evals" / "fixtures"
UTC = ZoneInfo("UTC")


def test_one_adapter_per_framework():
    assert [a.framework for a in ADAPTERS] == [Framework.PRIME_RL, Framework.VERL, Framework.TRL, Framework.OPENRLHF]


@pytest.mark.parametrize(
    ("fixture", "framework"),
    [
        ("84_verl-healthy", "verl"),
        ("100_trl-healthy", "trl"),
        ("116_openrlhf-healthy", "openrlhf"),
        ("117_openrlhf-healthy-v080", "openrlhf"),
        ("96_verl-hydra-error", "verl"),
        ("01_healthy-h", "prime-rl"),
    ],
)
def test_a_run_directory_is_recognised(fixture, framework):
    matches = sorted(FIXTURES.glob(fixture.split("_")[0] + "_*"))
    run = discover(matches[0] / "run")
    assert run.framework.value == framework
    assert (run.layout is None) == (framework != "prime-rl")


def test_a_directory_of_nothing_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(NoFramework):
        discover(tmp_path)


def test_configs_give_the_settings_rules_need():
    verl = adapter_for("verl").read_config(FIXTURES / "84_verl-healthy" / "run")
    assert (verl.max_steps, verl.group_size, verl.max_completion_tokens) == (100, 4, 1024)
    trl = adapter_for("trl").read_config(FIXTURES / "100_trl-healthy" / "run")
    assert (trl.max_steps, trl.group_size, trl.max_completion_tokens) == (100, 4, 1024)
    orl = adapter_for("openrlhf").read_config(FIXTURES / "117_openrlhf-healthy-v080" / "run")
    assert (orl.group_size, orl.max_completion_tokens) == (4, 1024)  # old flag names


def _grow(src: Path, dst: Path, upto: int) -> None:
    data = src.read_bytes()[:upto]
    dst.write_bytes(data)


@pytest.mark.parametrize("fixture", ["84_verl-healthy", "100_trl-healthy", "116_openrlhf-healthy"])
def test_console_is_read_from_the_byte_it_stopped_at(tmp_path, fixture):
    """A log grown between two reads: the second read starts at the first one's offset, only complete
    lines are taken (a half-written line waits), and the steps of both reads add up to a whole read's."""
    src_run = FIXTURES / fixture / "run"
    run_dir = tmp_path / "run"
    shutil.copytree(src_run, run_dir)
    adapter = adapter_for(discover(run_dir).framework)
    info = discover(run_dir)
    whole = {(r.process, r.step) for f in adapter.read(info, {}, UTC).files if f.rel.endswith(".log") for r in f.rows}
    log = next(p for p in adapter.console_logs(run_dir) if p.stat().st_size > 10_000)
    full = log.read_bytes()
    cut = len(full) // 2 + 17  # mid-line, on purpose
    log.write_bytes(full[:cut])
    first = adapter.read(info, {}, UTC)
    cursors = {f.rel: f.cursor for f in first.files if f.cursor is not None}
    rel = str(log.relative_to(run_dir))
    offset = cursors[rel].offset
    assert offset <= cut and full[offset - 1 : offset] == b"\n"
    with open(log, "ab") as handle:
        handle.write(full[cut:])
    second = adapter.read(info, cursors, UTC)
    again = next(f for f in second.files if f.rel == rel)
    complete = full.rfind(b"\n") + 1  # a last line still without its newline (a tqdm bar) waits too
    assert again.bytes_read == complete - offset and not again.fresh
    assert again.cursor is not None and again.cursor.offset == complete
    seen = {(r.process, r.step) for f in (*first.files, *second.files) if f.rel == rel for r in f.rows}
    assert seen == {x for x in whole}


def test_resume_commands_per_framework(tmp_path):
    verl_run = FIXTURES / "95_verl-actor-died-resumed" / "run"
    plan = adapter_for("verl").resume_plan(verl_run, ["bash", "run_grpo.sh"])
    argv = resume_argv(["bash", "run_grpo.sh"], plan)
    assert argv[:2] == ["bash", "run_grpo.sh"] and plan.step == 40
    assert "trainer.resume_mode=auto" in argv or any(a.startswith("trainer.resume_from_path=") for a in argv)

    orl_new = adapter_for("openrlhf").resume_plan(
        FIXTURES / "124_openrlhf-crash-oom-resumed" / "run", ["bash", "train_ppo_ray.sh"]
    )
    assert resume_argv(["bash", "train_ppo_ray.sh"], orl_new)[-1] == "--ckpt.load_enable"
    orl_old = adapter_for("openrlhf").resume_plan(FIXTURES / "117_openrlhf-healthy-v080" / "run", ["bash", "train_ppo_ray.sh"])
    assert resume_argv(["bash", "train_ppo_ray.sh"], orl_old)[-1] == "--load_checkpoint"

    trl_run = tmp_path / "trl"
    shutil.copytree(FIXTURES / "112_trl-crash-oom-resumed" / "run", trl_run)
    plan = adapter_for("trl").resume_plan(trl_run, ["bash", "launch.sh"])
    argv = resume_argv(["bash", "launch.sh"], plan)
    assert argv[-2] == "--resume_from_checkpoint" and argv[-1].endswith("checkpoint-40")
    # a training script that does not pass resume_from_checkpoint on cannot resume: say so, build nothing
    script = trl_run / "train_grpo.py"
    script.write_text(script.read_text().replace("trainer.train(resume_from_checkpoint=checkpoint)", "trainer.train()"))
    plan = adapter_for("trl").resume_plan(trl_run, ["bash", "launch.sh"])
    assert not plan.possible and "start from scratch" in plan.why
    with pytest.raises(CommandError):
        resume_argv(["bash", "launch.sh"], plan)


def test_no_checkpoint_means_no_resume(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "96_verl-hydra-error" / "run", run)
    plan = adapter_for("verl").resume_plan(run, ["bash", "run_grpo.sh"])
    assert not plan.possible and "scratch" in plan.why


def test_live_framework_processes_are_tied_to_their_run(tmp_path):
    """A simulated live verl run (a real driver and Ray-titled actors): its processes are found and tied
    to this run directory, and not to another."""
    run = tmp_path / "verl-run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlagent", "simulate", "verl-healthy", str(run), "--live", "--speed", "60", "--steps", "40"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        found, how = [], ""
        deadline = time.time() + 60
        while time.time() < deadline:
            found, how = find_framework_processes(str(run), [str(run)], "verl")
            if {"TaskRunner", "WorkerDict"} <= {p.role for p in found}:
                break
            time.sleep(0.5)
        roles = {p.role for p in found}
        assert {"TaskRunner", "WorkerDict"} <= roles, (roles, how)
        assert how.startswith("matched by ")
        other, why = find_framework_processes(str(tmp_path / "elsewhere"), [str(tmp_path / "elsewhere")], "verl")
        assert other == [] and "none tied to this run" in why
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _trainer_state(step: int, max_steps: int) -> str:
    import json

    history = [{"loss": 0.0, "reward": 0.5, "frac_reward_zero_std": 0.5, "epoch": 0.1, "step": s} for s in (5, step)]
    return json.dumps({"global_step": step, "logging_steps": 5, "max_steps": max_steps, "log_history": history}, indent=2)


def test_a_trl_output_dir_is_read_where_it_is(tmp_path):
    """The Trainer writes checkpoint-N/ straight into output_dir: a folder holding only those is the output
    dir (no config, no trainer_output/ under it), and its newest trainer_state.json is read."""
    for step in (10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(_trainer_state(step, 40))
    run = discover(tmp_path)
    assert run.framework is Framework.TRL
    adapter = adapter_for("trl")
    assert adapter.output_dir(tmp_path) == tmp_path
    assert sorted(adapter.checkpoints(tmp_path)) == [10, 20]
    assert adapter.read_config(tmp_path).max_steps == 40
    read = adapter.read(run, {}, UTC)
    state = [f for f in read.files if f.rel == "trainer_state.json"]
    assert state and state[0].cursor.path == "checkpoint-20/trainer_state.json"
    assert sorted({row.step for row in state[0].rows}) == [5, 20]


def test_a_trl_run_dir_keeps_its_default_output_dir(tmp_path):
    (tmp_path / "trainer_output" / "checkpoint-10").mkdir(parents=True)
    (tmp_path / "trainer_output" / "checkpoint-10" / "trainer_state.json").write_text(_trainer_state(10, 0))
    adapter = adapter_for("trl")
    assert adapter.output_dir(tmp_path) == tmp_path / "trainer_output"
    assert adapter.read_config(tmp_path).max_steps is None  # 0 / -1 say nothing of the planned total


def _folded(rows) -> dict:
    """Rows as the collector's history takes them: (process, step) -> the values, later rows winning;
    and the newest time each step was written."""
    out: dict = {}
    for row in rows:
        values, when = out.get((row.process, row.step), ({}, None))
        newest = max((w for w in (when, row.when) if w is not None), default=None)
        out[(row.process, row.step)] = ({**values, **row.values}, newest)
    return out


def test_a_long_catch_up_read_is_analysed_a_chunk_at_a_time_with_the_same_result(tmp_path, monkeypatch):
    """A console read longer than one chunk gives the rows, evals, counts and groups of one whole read."""
    from rlagent.tools.adapters import lineblocks

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "95_verl-actor-died-resumed" / "run", run_dir)
    info = discover(run_dir)
    adapter = adapter_for(info.framework)

    def console_reads():
        return [f for f in adapter.read(info, {}, UTC).files if f.rel.endswith(".log")]

    whole = console_reads()
    monkeypatch.setattr(lineblocks, "CHUNK", 4096)  # many chunks, boundaries mid-traceback included
    parts = console_reads()
    assert [f.rel for f in whole] == [f.rel for f in parts]
    for one, many in zip(whole, parts, strict=True):
        assert _folded(one.rows) == _folded(many.rows)
        assert one.evals == many.evals and one.counts == many.counts
        assert {k: g.count for k, g in one.groups.items()} == {k: g.count for k, g in many.groups.items()}
        assert one.cursor.offset == many.cursor.offset and one.cursor.step == many.cursor.step
        assert {e.kind for e in one.events} == {e.kind for e in many.events}
    assert sum(len(f.rows) for f in parts) < sum(len(f.rows) for f in whole)  # a step's rows merged as they come


def test_a_chunked_read_of_2100_steps_leaves_the_history_a_whole_read_leaves(tmp_path, monkeypatch):
    """A catch-up read of a long console (SIMULATED OpenRLHF, 2,100 steps, read a chunk at a time)
    holds the rows bounded as it goes, and what it hands the collector is what one whole read gives
    once the collector keeps its window: the newest KEEP_STEPS steps and every series' early values."""
    from rlagent.evals.simulator.frameworks import FRAMEWORK_SCENARIOS, write_framework_run
    from rlagent.tools.adapters import lineblocks
    from rlagent.tools.steprows import EARLY_VALUES, KEEP_STEPS

    sc = FRAMEWORK_SCENARIOS["openrlhf-healthy"].variant(steps=2100, max_steps=4000, samples_kept=1)
    run_dir, _ = write_framework_run(sc, tmp_path / "run")
    info = discover(run_dir)
    adapter = adapter_for(info.framework)

    def main_log():
        (read,) = [f for f in adapter.read(info, {}, UTC).files if f.rel == "train.log"]
        return read

    monkeypatch.setattr(lineblocks, "CHUNK", 1 << 30)
    whole = main_log()
    monkeypatch.setattr(lineblocks, "CHUNK", 256 << 10)
    parts = main_log()
    assert whole.cursor.offset == parts.cursor.offset > 4 * (256 << 10)
    one, many = _folded(whole.rows), _folded(parts.rows)
    assert max(step for _, step in one) == 2100 and len(many) < len(one)
    for process in {p for p, _ in one}:
        newest = sorted(s for p, s in one if p == process)[-KEEP_STEPS:]
        assert {s: one[(process, s)] for s in newest} == {s: many[(process, s)] for s in newest}
        for name in {n for (p, _), (values, _) in one.items() if p == process for n in values}:
            assert _series(many, process, name)[:EARLY_VALUES] == _series(one, process, name)[:EARLY_VALUES], (process, name)


def _series(folded: dict, process: str, name: str) -> list[float]:
    steps = sorted(step for p, step in folded if p == process)
    return [folded[(process, s)][0][name] for s in steps if name in folded[(process, s)][0]]


def test_a_console_is_read_in_blocks_of_whole_lines_and_a_half_written_line_waits(tmp_path, monkeypatch):
    from rlagent.tools.adapters import console, lineblocks

    monkeypatch.setattr(lineblocks, "CHUNK", 64)
    lines = [f"line {i} " + "x" * (i * 7 % 50) for i in range(40)]
    lines[17] = "a line longer than a block " + "y" * 300
    path = tmp_path / "train.log"
    path.write_bytes(("\n".join(lines) + "\nhalf-writ").encode())
    with open(path, "rb") as handle:
        blocks = lineblocks.LineBlocks(handle, path.stat().st_size)
        got = list(blocks)
    assert all(block.endswith(b"\n") for block in got) and len(got) > 10
    assert b"".join(got).decode().splitlines() == lines  # every line once, whole, in order; the half line left
    assert any(lines[17].encode() in block for block in got)
    assert blocks.taken == path.stat().st_size - len("half-writ") and blocks.newlines == 40
    read = console.read_console(path, "train.log", None, "verl", lambda line, state: [], console.ConsoleState())
    assert read.cursor.offset == blocks.taken and read.cursor.lines == 40 and not read.notes


def test_a_console_line_longer_than_a_whole_read_is_taken_in_part_with_a_note(tmp_path, monkeypatch):
    from rlagent.tools.adapters import console, lineblocks

    monkeypatch.setattr(lineblocks, "CHUNK", 64)
    monkeypatch.setattr(lineblocks, "MAX_READ", 1024)
    path = tmp_path / "train.log"
    path.write_bytes(b"z" * 900)  # shorter than a read: a line still being written, it waits
    read = console.read_console(path, "train.log", None, "verl", lambda line, state: [], console.ConsoleState())
    assert read.cursor.offset == 0 and not read.notes
    path.write_bytes(b"z" * 3000 + b"\x00\n")  # no newline in a whole read: taken in part, not waited for forever
    read = console.read_console(path, "train.log", None, "verl", lambda line, state: [], console.ConsoleState())
    assert read.cursor.offset == 1024 and read.notes == ["train.log: an over-long line was read only in part"]
    read = console.read_console(path, "train.log", read.cursor, "verl", lambda line, state: [], console.ConsoleState())
    assert read.cursor.offset == 2048
    read = console.read_console(path, "train.log", read.cursor, "verl", lambda line, state: [], console.ConsoleState())
    assert read.cursor.offset == 3002 and read.notes == ["train.log: binary junk (NUL bytes) in the new bytes, not quoted"]
