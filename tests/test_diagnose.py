"""`rlagent diagnose`: excerpts, whole logs, metrics exports, gzip and stdin of every framework, and
bad input as one clear line (never a traceback, never a hang)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from rlagent.agents.excerpt import DiagnoseError, diagnose
from rlagent.tools import inputtail

from wandbkit import frame, history_record

FIXTURES = Path(__file__).resolve().parents[1] / "evals" / "fixtures"
REAL = Path(__file__).resolve().parents[1] / "evals" / "real"
RLAGENT = [sys.executable, "-m", "rlagent"]


def cli(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*RLAGENT, "diagnose", *args], input=stdin, capture_output=True, timeout=timeout)


def test_a_verl_console_log_is_read_with_its_framework_and_steps():
    d = diagnose(FIXTURES / "87_verl-entropy-collapse" / "run" / "verl_demo.log")
    assert d.framework == "verl" and d.source_kind in ("log", "excerpt")
    assert d.step is not None and d.step >= 30
    assert "entropy_collapse" in {f.id for f in d.findings}
    assert d.health.value == "Degraded"


def test_json_report_carries_framework_and_source_kind():
    done = cli(str(REAL / "trl-grpo-nccl-watchdog-openr1-620" / "input.log"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["framework"] is None or report["framework"] in ("trl", "verl", "openrlhf", "prime-rl")
    assert report["source_kind"] == "excerpt"
    assert report["health"] == "Down"
    assert "nccl_error" in {f["id"] for f in report["findings"]}
    assert {"run_dir", "checked_at", "step", "max_steps", "findings", "proposal", "slurm", "written", "status_entry"} <= set(
        report
    )


def test_stdin_and_gzip_give_the_same_verdict_as_the_file(tmp_path):
    source = REAL / "verl-reward-fn-notimplemented-datasource-5558" / "input.log"
    data = source.read_bytes()
    packed = tmp_path / "log.gz"
    packed.write_bytes(gzip.compress(data))
    expected = diagnose(source, "verl")
    for result in (diagnose(packed, "verl"), diagnose(None, "verl", data=data)):
        assert result.health == expected.health
        assert {f.id for f in result.findings} == {f.id for f in expected.findings}
    assert "gzipped input, decompressed" in diagnose(packed, "verl").notes


def test_metrics_exports_are_recognised(tmp_path):
    state = REAL / "trl-grpo-state-truncation-chaos-economy" / "input.json"
    d = diagnose(state)
    assert d.source_kind == "trainer_state" and d.framework == "trl" and d.steps_seen > 10
    rows = tmp_path / "exp.jsonl"
    src = FIXTURES / "89_verl-nan" / "run" / "verl_grpo_example_gsm8k" / "qwen2_5_0_5b_instruct_function_rm.jsonl"
    rows.write_bytes(src.read_bytes())
    d = diagnose(rows)
    assert d.source_kind == "metrics_jsonl" and d.framework == "verl"
    assert "nan_detected" in {f.id for f in d.findings}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty input"),
        (bytes(range(256)) * 64, "a binary file"),
        (b"\x1f\x8b\x08\x00garbage", "cannot be decompressed"),
        (b"meeting notes\nbuy milk\n12:00:01 INFO hello\n12:00:02 WARNING something odd\n", "nothing to judge"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "input.log"
    path.write_bytes(content)
    done = cli(str(path))
    assert done.returncode == 2
    assert message in done.stderr.decode() and "Traceback" not in done.stderr.decode()
    assert len(done.stderr.decode().strip().splitlines()) == 1


def test_text_of_no_training_run_is_judged_only_when_its_framework_is_given(tmp_path):
    """Text with no step line, metric or crash signature is not called Healthy (nothing was judged);
    named as a framework's, it is judged as that framework's excerpt, with what it cannot tell said."""
    text = b"12:00:01 INFO starting the orchestrator\n12:00:02 WARNING slow start\n"
    with pytest.raises(DiagnoseError, match="nothing to judge"):
        diagnose(None, data=text)
    d = diagnose(None, "prime-rl", data=text)
    assert d.framework == "prime-rl" and d.health.value == "Healthy" and not d.findings
    assert any("no step history" in c for c in d.cannot_judge)


def test_an_unreadable_file_and_a_missing_one_are_one_line(tmp_path):
    path = tmp_path / "secret.log"
    path.write_text("step:1 - actor/entropy:0.5\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: file modes do not stop reads")
        done = cli(str(path))
        assert done.returncode == 2 and "cannot read" in done.stderr.decode()
    finally:
        path.chmod(0o600)
    done = cli(str(tmp_path / "nope.log"))
    assert done.returncode == 2 and "cannot read" in done.stderr.decode()


def test_text_without_a_framework_still_has_its_crash_found():
    d = diagnose(None, data=b"starting my job\nsomething\nRuntimeError: CUDA error: out of memory\n")
    assert d.framework is None
    assert any("no training metrics recognised" in n for n in d.notes)
    assert "cuda_oom" in {f.id for f in d.findings} and d.health.value == "Down"


def test_two_frameworks_in_one_input_are_said(tmp_path):
    verl = (FIXTURES / "84_verl-healthy" / "run" / "verl_demo.log").read_bytes()[:200_000]
    trl = (FIXTURES / "100_trl-healthy" / "run" / "train.log").read_bytes()[:200_000]
    d = diagnose(None, data=verl + b"\n" + trl)
    assert any("more than one framework" in n for n in d.notes)


def test_a_100_mb_single_line_does_not_hang(tmp_path):
    path = tmp_path / "one.log"
    with open(path, "wb") as handle:
        handle.write(b"x" * (100 << 20))
    started = time.perf_counter()
    done = cli(str(path), timeout=120)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.decode() == (
        f"rlagent: error: {path}: nothing to judge: no step line, metric or crash signature of verl, TRL, "
        "OpenRLHF or prime-rl in its last 32 MB (give --framework F if it is one of theirs)\n"
    )
    assert time.perf_counter() - started < 60


def test_a_10_mb_log_is_judged_whole(tmp_path):
    """Its speed is a benchmark's (bench/bench_diagnose.py, figures in the README), not a timed test."""
    src = (FIXTURES / "95_verl-actor-died-resumed" / "run" / "verl_demo.log").read_bytes()
    path = tmp_path / "big.log"
    path.write_bytes((src * (10 * 2**20 // len(src) + 1))[: 10 * 2**20])
    d = diagnose(path)
    assert d.framework == "verl" and d.step == 40


def test_a_directory_is_pointed_at_check():
    with pytest.raises(DiagnoseError, match="rlagent check"):
        diagnose(FIXTURES / "84_verl-healthy" / "run")


def test_metrics_exports_leave_nothing_behind_and_their_notes_name_the_input(tmp_path):
    """The trainer_state.json, TensorBoard and .wandb readers take paths, so the input is spilled to a
    temp file first: it must be gone afterwards (every diagnose of an export used to leave its whole
    copy in /tmp), and a reader's note names the user's file, not the copy."""
    events_dir = tmp_path / "tb"
    writer = EventFileWriter(str(events_dir))
    for step in range(1, 31):
        value = summary_pb2.Summary.Value(tag="critic/score/mean", simple_value=step / 30)
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    (events,) = events_dir.glob("*tfevents*")
    events.write_bytes(events.read_bytes()[:-10])  # still being written: the reader says so by name
    wandb = tmp_path / "run-abc.wandb"
    trl_row = {"train/reward": "0.5", "train/learning_rate": "1e-06", "train/completions/mean_length": "200"}
    wandb.write_bytes(
        frame([history_record(s, {"_step": str(s), "train/global_step": str(s), **trl_row}, s) for s in range(1, 30)])
    )
    state = (REAL / "trl-grpo-state-truncation-chaos-economy" / "input.json").read_bytes()
    packed = tmp_path / "trainer_state.json.gz"
    packed.write_bytes(gzip.compress(state))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    runs = [
        ([str(events), "--json"], None, "tensorboard"),
        ([str(wandb), "--json"], None, "wandb"),
        ([str(packed), "--json"], None, "trainer_state"),
        (["-", "--json"], state, "trainer_state"),
    ]
    for args, stdin, kind in runs:
        done = subprocess.run([*RLAGENT, "diagnose", *args], input=stdin, capture_output=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["source_kind"] == kind and report["step"] is not None
        assert "rlagent-diagnose" not in done.stdout.decode()
        assert list(scratch.iterdir()) == [], args
    notes = json.loads(subprocess.run([*RLAGENT, "diagnose", str(events), "--json"], capture_output=True, env=env).stdout)[
        "notes"
    ]
    assert any(note.startswith(f"{events.name} ends with") for note in notes), notes


def test_a_fifo_is_read_as_a_pipe_and_one_with_no_writer_is_not_waited_for(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    done = cli(str(fifo), timeout=30)  # nobody writes: it used to wait in open() forever
    assert done.returncode == 2 and "empty input" in done.stderr.decode()
    source = (REAL / "verl-reward-fn-notimplemented-datasource-5558" / "input.log").read_bytes()

    def write() -> None:
        with open(fifo, "wb") as handle:  # blocks until rlagent opens the FIFO
            for start in range(0, len(source), 4096):
                handle.write(source[start : start + 4096])
                handle.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    done = cli(str(fifo), "--json", timeout=60)
    writer.join(timeout=10)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["health"] == diagnose(None, data=source).health.value == "Down"
    assert "a character device" in cli("/dev/zero").stderr.decode()


def test_a_long_stream_is_judged_by_its_tail_in_bounded_memory(tmp_path):
    """400 MB on stdin, a crash at its very end: judged on its last 32 MB, and never held whole
    (it was read into memory whole, and copied: 560 MB of RSS for 300 MB)."""
    healthy = (FIXTURES / "84_verl-healthy" / "run" / "verl_demo.log").read_bytes()
    crash = (REAL / "verl-reward-fn-notimplemented-datasource-5558" / "input.log").read_bytes()
    size = 400 << 20
    stream = (healthy * (size // len(healthy) + 1))[: size - len(crash)] + crash
    measure = (
        "import resource, subprocess, sys\n"
        "command = [sys.executable, '-m', 'rlagent', 'diagnose', '-', '--json']\n"
        "done = subprocess.run(command, stdin=sys.stdin, capture_output=True)\n"
        "sys.stdout.write(done.stdout.decode() + '\\n' + str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run([sys.executable, "-c", measure], input=stream, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report, peak_kb = done.stdout.decode().rsplit("\n", 1)
    report = json.loads(report)
    assert report["health"] == "Down" and "reward_fn_error" in {f["id"] for f in report["findings"]}
    assert "input is 400 MB: the last 32 MB were judged" in report["notes"]
    assert int(peak_kb) < 400 << 10, f"peak RSS {int(peak_kb) >> 10} MB for a 400 MB stream"


def test_a_gzip_that_breaks_off_is_judged_up_to_the_break(tmp_path):
    """A .gz still being written (or cut in a copy) ends without its trailer: what it holds is judged."""
    source = (FIXTURES / "95_verl-actor-died-resumed" / "run" / "verl_demo.log").read_bytes()
    whole = gzip.compress(source)
    cut = tmp_path / "log.gz"
    cut.write_bytes(whole[:-100])
    d = diagnose(cut, "verl")
    assert d.step is not None and d.step >= diagnose(None, "verl", data=source[: len(source) // 2]).step
    assert any("the gzip stream breaks off after" in note for note in d.notes), d.notes
    big = tmp_path / "big.gz"
    big.write_bytes(gzip.compress((source * (40 * 2**20 // len(source) + 1))[: 40 * 2**20]))
    notes = diagnose(big, "verl").notes
    assert "gzipped input, decompressed" in notes and "decompressed input is 40 MB: the last 32 MB were judged" in notes


def test_an_export_longer_than_the_judged_tail_is_read_whole_or_refused(tmp_path, monkeypatch):
    """A 48 MB TensorBoard file was judged on its last 32 MB, which no reader can start in the middle
    of: "Healthy, no steps". A 53 MB trainer_state.json was read as a log, and a W&B CSV's tail had
    lost its header. The judged tail is made 64 KB here so that small files are long."""
    monkeypatch.setattr(inputtail, "MAX_INPUT", 64 << 10)
    writer = EventFileWriter(str(tmp_path / "tb"))
    for step in range(1, 2001):
        for tag, value in (("critic/score/mean", step / 2000), ("actor/entropy", 1.0 - step / 4000)):
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))
    writer.close()
    (events,) = (tmp_path / "tb").glob("*tfevents*")
    assert events.stat().st_size > 2 * inputtail.MAX_INPUT
    whole = diagnose(events)
    assert (whole.source_kind, whole.steps_seen, whole.step) == ("tensorboard", 2000, 2000)
    assert not any("were judged" in note for note in whole.notes)  # nothing was left out
    packed = tmp_path / "events.tfevents.gz"
    packed.write_bytes(gzip.compress(events.read_bytes()))
    with pytest.raises(
        DiagnoseError, match=r"TensorBoard event file of .* cannot be judged from its last .* give the file itself"
    ):
        diagnose(packed)

    state = json.loads((REAL / "trl-grpo-state-truncation-chaos-economy" / "input.json").read_text())
    state["log_history"] = [{**row, "step": step} for step, row in enumerate(state["log_history"] * 10, start=1)]
    big_state = tmp_path / "trainer_state.json"
    big_state.write_text(json.dumps(state, indent=2, sort_keys=True))
    assert big_state.stat().st_size > inputtail.MAX_INPUT
    read = diagnose(big_state)
    assert (read.source_kind, read.framework, read.steps_seen) == ("trainer_state", "trl", len(state["log_history"]))

    csv = tmp_path / "export.csv"
    rows = "".join(f"{s},{s},0.5,1e-06\n" for s in range(1, 20001))
    csv.write_text("_step,train/global_step,train/reward,train/learning_rate\n" + rows)
    tail = diagnose(csv)
    assert tail.source_kind == "wandb_csv" and tail.step == 20000 and 0 < tail.steps_seen < 20000
    assert any("were judged" in note for note in tail.notes)  # a CSV is judged on its tail, and says so


def test_stdin_typed_at_a_terminal_is_asked_for(tmp_path):
    """`rlagent diagnose -` typed without a pipe used to wait in silence; it now says what it reads."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: rlagent on a terminal
        os.execv(sys.executable, [*RLAGENT, "diagnose", "-"])
    seen = b""

    def read_until(done, seconds: float) -> None:
        nonlocal seen
        end = time.monotonic() + seconds
        while not done() and time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    return

    try:
        read_until(lambda: b"paste it" in seen, 60)
        assert b"reading the log from this terminal: paste it, then Ctrl-D" in seen, seen
        os.write(fd, b"RuntimeError: CUDA error: out of memory\n")
        time.sleep(0.2)
        os.write(fd, b"\x04")  # Ctrl-D on an empty line: end of input
        read_until(lambda: b"cannot judge" in seen, 60)
    finally:
        status = None
        for _ in range(300):  # 30 s, then it is killed: a test never hangs on it
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"stdin: Down" in seen and b"cuda_oom" in seen
