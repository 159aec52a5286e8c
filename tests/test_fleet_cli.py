"""`rlagent watch`, `status ROOT`, `silence`, `ack` and `report` as a user calls them: real
processes over a directory of simulated runs."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetkit import free_port, simulate
from runbuilder import HRun

RLAGENT = [sys.executable, "-m", "rlagent"]
FIXTURES = Path(__file__).resolve().parent.parent / "evals" / "fixtures"
TOKEN = "T0KEN-s3cr3t-42"


def rlagent(*args, timeout=120):
    return subprocess.run([*RLAGENT, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def fleet(tmp_path):
    root = tmp_path / "runs"
    simulate("healthy-h", root / "sweep" / "a-healthy")
    simulate("crash-oom-h", root / "sweep", run_name="b-crashed")
    simulate("finished-l", root / "c-finished")
    simulate("truncation-l", root / "d-truncating")
    (root / "notes" / "plots").mkdir(parents=True)  # not a run
    return root


def test_watch_a_directory_of_runs(fleet, tmp_path):
    report = tmp_path / "fleet.html"
    dead = f"http://127.0.0.1:{free_port()}/hook/{TOKEN}"  # nobody listens: every delivery fails
    done = rlagent(
        "watch", str(fleet), "--offline", "--cadence", "1s", "--max-rounds", "2", "--report", str(report), "--notify", dead, "-v"
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("round 1:") == 1 and out.count("round 2:") == 1 and "round 3:" not in out
    assert "round 1: 4 check-in(s) of 4 run(s)" in out
    assert "b-crashed: Down step 22/200 #1 · run_crashed, cuda_oom" in out
    assert "c-finished: Healthy step" in out and "finished: final entry written, retired" in out
    assert "round 2: 3 check-in(s) of 4 run(s)" in out  # the finished run is not checked again
    assert "notification to webhook 1 (json) failed (connection failed" in out and "tried again next round" in out
    for run in ("sweep/a-healthy", "sweep/b-crashed", "d-truncating"):
        # header and round 1; round 2 of an offline run with nothing new appends nothing
        assert (fleet / run / "STATUS.md").read_text().count("<!-- rlagent:checkin") == 2
    assert (fleet / "c-finished" / "STATUS.md").read_text().count("<!-- rlagent:checkin") == 2
    html = report.read_text()
    assert html.startswith("<!DOCTYPE html>") and "b-crashed" in html and "run_crashed" in html
    # a webhook URL is a secret: nowhere in the output, the logs or the runs' files
    for text in (done.stdout, done.stderr, html, *(p.read_text() for p in fleet.rglob("STATUS.md"))):
        assert TOKEN not in text and "/hook/" not in text

    table = rlagent("status", str(fleet))
    assert table.returncode == 0, table.stderr
    lines = table.stdout
    for name in ("a-healthy", "b-crashed", "c-finished", "d-truncating"):
        assert name in lines
    assert "Down" in lines and "22 / 200" in lines and "run_crashed, cuda_oom" in lines and "(finished)" in lines
    rows = {r["run"]: r for r in json.loads(rlagent("status", str(fleet), "--json").stdout)["runs"]}
    crashed = rows["b-crashed"]
    assert (crashed["health"], crashed["step"], crashed["max_steps"], crashed["framework"]) == ("Down", 22, 200, "prime-rl")
    assert crashed["open_incidents"] == ["run_crashed", "cuda_oom"] and crashed["undelivered_notifications"] == 1
    assert crashed["checkin"] == 2 and crashed["eta_s"] is None  # no ETA for a run that is down
    assert rows["a-healthy"]["eta_s"] > 0 and rows["a-healthy"]["steps_per_hour"] > 0
    assert rows["c-finished"]["retired"] and rows["c-finished"]["finished"]


def test_a_bad_notify_url_is_named_by_its_place_not_its_text(fleet):
    """urlsplit's `Invalid IPv6 URL` reached the user alone: which flag, which URL? A webhook URL holds
    its token, so the error names its place in the list."""
    for url, says in (
        ("file:///etc/passwd", "notify URL #2 is not an http(s) URL"),
        ("https://[T0KEN@hooks.example/x", "notify URL #2 is not an http(s) URL (Invalid IPv6 URL)"),
    ):
        bad = rlagent("watch", str(fleet), "--offline", "--max-rounds", "1", "--notify", "https://ok.example/a", "--notify", url)
        assert bad.returncode == 2 and bad.stderr == f"rlagent: error: {says}\n", bad.stderr
        assert "T0KEN" not in bad.stderr


def test_silence_and_ack_from_the_command_line(fleet):
    crashed = fleet / "sweep" / "b-crashed"
    assert rlagent("watch", str(fleet), "--offline", "--max-rounds", "1").returncode == 0
    ok = rlagent("silence", str(crashed), "cuda_oom", "--for", "2h", "--reason", "known OOM, fix queued")
    assert ok.returncode == 0 and "silenced cuda_oom on b-crashed until" in ok.stdout
    acked = rlagent("ack", str(crashed), "run_crashed", "--by", "alice")
    assert acked.returncode == 0 and "acknowledged run_crashed" in acked.stdout

    # bad input: one clear line, exit 2
    for args, says in (
        (("silence", str(crashed), "cuda-oom", "--reason", "x"), "unknown finding id 'cuda-oom' (did you mean cuda_oom"),
        (("silence", str(fleet / "nope"), "cuda_oom", "--reason", "x"), "no such directory"),
        (("silence", str(fleet / "sweep"), "cuda_oom", "--reason", "x"), "holds runs, it is not one"),
        (("silence", str(crashed), "cuda_oom"), "--reason is required"),
        (("silence", str(crashed), "cuda_oom", "--for", "soon", "--reason", "x"), "bad cadence"),
        (("ack", str(crashed), "entropy_collapse"), "no open incident 'entropy_collapse'"),
        (("silence", str(crashed), "zzz", "--reason", "x"), "(the ids are in findings.md; `*` silences them all)"),
        (("ack", str(crashed), "*"), "unknown finding id '*' (the ids are in findings.md)"),  # ack takes no `*`
    ):
        bad = rlagent(*args)
        assert bad.returncode == 2 and says in bad.stderr, (args, bad.stderr)
        assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr

    listed = rlagent("silence", str(crashed), "--list")
    assert "#1 cuda_oom until" in listed.stdout and "known OOM, fix queued" in listed.stdout
    fleet_view = rlagent("status", str(fleet))
    assert "cuda_oom (silenced)" in fleet_view.stdout and "silence #1 on b-crashed: cuda_oom until" in fleet_view.stdout
    one = rlagent("status", str(crashed))
    assert "open incident: run_crashed (critical) since check-in #1, acknowledged by alice" in one.stdout
    assert "silence #1: cuda_oom until" in one.stdout

    # nothing new in the run, but the silence and the acknowledgement are news: the re-check writes them
    assert rlagent("watch", str(fleet), "--offline", "--max-rounds", "1").returncode == 0
    entry = crashed.joinpath("STATUS.md").read_text().rsplit("## ", 1)[1]
    assert "`cuda_oom`" in entry and "[silenced until" in entry and "known OOM, fix queued]" in entry
    assert "`run_crashed`" in entry and "[acknowledged by alice]" in entry
    assert rlagent("silence", str(crashed), "--remove", "1").returncode == 0
    assert "no silence in force" in rlagent("silence", str(crashed), "--list").stdout


def test_a_verl_run_is_one_run_to_status_and_silence(tmp_path):
    """`status` and `silence` find a run of any framework the way `check` does (not a folder of runs)."""
    run, home = tmp_path / "verl-run", tmp_path / "home"
    shutil.copytree(FIXTURES / "99_verl-host-oom" / "run", run)
    assert rlagent("check", str(run), "--offline", "--home", str(home)).returncode == 0
    one = rlagent("status", str(run), "--home", str(home), "--json")
    assert one.returncode == 0, one.stderr
    shown = json.loads(one.stdout)  # the run's own status, with its incidents: not a fleet table
    assert shown["checkin"] == 1 and shown["health"] == "Down" and shown["run_dir"] == str(run.resolve())
    assert "run_crashed" in {i["finding_id"] for i in shown["incidents"]}
    ok = rlagent("silence", str(run), "run_crashed", "--for", "1h", "--reason", "host OOM known", "--home", str(home))
    assert ok.returncode == 0 and "silenced run_crashed on verl-run until" in ok.stdout, ok.stderr


def test_ctrl_c_ends_the_round_cleanly(fleet):
    proc = subprocess.Popen(
        [*RLAGENT, "watch", str(fleet), "--offline", "--cadence", "1h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    status = fleet / "d-truncating" / "STATUS.md"
    deadline = time.monotonic() + 60
    while not (status.exists() and "#1 -->" in status.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "stopped (Ctrl-C)" in out
    for path in fleet.rglob("STATUS.md"):
        text = path.read_text()
        assert text.rstrip().endswith("-->") and text.count("## 20") == text.count("<!-- rlagent:checkin") - 1


def test_report_of_a_run_with_no_steps_and_of_a_missing_root(tmp_path):
    run = HRun(tmp_path, "fresh-run")  # configs and an empty attempt: nothing logged yet
    out = tmp_path / "r.html"
    done = rlagent("report", str(run.dir), "-o", str(out), "--offline")
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert "no step yet: nothing to plot" in html and "not checked by rlagent yet" in html
    assert not (run.dir / "STATUS.md").exists()  # the report writes nothing into the run
    missing = rlagent("report", str(tmp_path / "nope"), "-o", str(out))
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_a_run_path_that_is_no_directory_is_said_for_what_it_is(tmp_path):
    """A symlink loop was "no such directory"; each command that takes a run or a folder of runs
    says which of these a path is, in one line."""
    (tmp_path / "loop-a").symlink_to("loop-b")
    (tmp_path / "loop-b").symlink_to("loop-a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "a-file").write_text("x")
    cases = {"loop-a": "a symlink loop", "dangling": "a broken symlink", "a-file": "not a directory", "nope": "no such directory"}
    out = tmp_path / "r.html"
    for name, says in cases.items():
        path = str(tmp_path / name)
        commands = (("check", "--offline"), ("status",), ("watch", "--max-rounds", "1"), ("report", "-o", str(out)))
        for command, *flags in commands:
            done = rlagent(command, path, *flags)
            assert (done.returncode, done.stderr) == (2, f"rlagent: error: {path}: {says}\n"), command


def test_watch_a_fleet_of_every_framework(tmp_path):
    """verl, TRL and OpenRLHF runs beside a prime-rl one, two verl runs in one folder: each is one run,
    checked with its framework's adapter, shown in `status` and the report."""
    root = tmp_path / "runs"
    for fixture, where in (
        ("87_verl-entropy-collapse", "verl-sweep/lr-1e-6"),
        ("95_verl-actor-died-resumed", "verl-sweep/lr-3e-6"),
        ("105_trl-nan", "trl-nan"),
        ("119_openrlhf-entropy-collapse", "openrlhf/entropy"),
    ):
        shutil.copytree(FIXTURES / fixture / "run", root / where)
    simulate("healthy-h", root / "prime" / "healthy")
    report = tmp_path / "fleet.html"
    done = rlagent("watch", str(root), "--offline", "--cadence", "1s", "--max-rounds", "1", "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert "round 1: 5 check-in(s) of 5 run(s)" in done.stdout, done.stdout
    rows = {r["run"]: r for r in json.loads(rlagent("status", str(root), "--json").stdout)["runs"]}
    assert {name: row["framework"] for name, row in rows.items()} == {
        "lr-1e-6": "verl", "lr-3e-6": "verl", "trl-nan": "trl", "entropy": "openrlhf", "healthy": "prime-rl",
    }  # fmt: skip
    assert "entropy_collapse" in rows["lr-1e-6"]["open_incidents"] and "nan_detected" in rows["trl-nan"]["open_incidents"]
    assert rows["healthy"]["health"] == "Healthy"
    for run, framework in (("verl-sweep/lr-1e-6", "verl"), ("trl-nan", "trl"), ("openrlhf/entropy", "openrlhf")):
        assert f"({framework} run)" in (root / run / "STATUS.md").read_text()
    assert not (root / "verl-sweep" / "STATUS.md").exists()  # a folder of runs is not a run
    html = report.read_text()
    assert all(name in html for name in rows)


def _not_files(tmp_path: Path) -> list[tuple[Path, str]]:
    """A FIFO, and (where this process may make one) a character device like /dev/null, where a
    report is to be written."""
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    made = [(fifo, "a FIFO")]
    device = tmp_path / "null.html"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers, in tmp_path
        made.append((device, "a character device"))
    except PermissionError:
        pass  # not root: the FIFO alone
    return made


def test_report_refuses_to_replace_a_device_or_a_fifo_at_its_output(tmp_path):
    """The report is written beside its path and renamed over it: `--output /dev/full` as root put an
    HTML file where the device node was, and said `wrote /dev/full`."""
    run = HRun(tmp_path, "fresh-run")
    for path, kind in [*_not_files(tmp_path), (tmp_path, "a directory")]:
        before = os.lstat(path).st_mode
        done = rlagent("report", str(run.dir), "-o", str(path), "--offline", timeout=30)
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.strip() == f"rlagent: error: {path}: cannot write it ({kind}, not a file: not replaced)"
        assert os.lstat(path).st_mode == before
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    done = rlagent("report", str(run.dir), "-o", str(link), "--offline", timeout=30)
    assert done.returncode == 0 and link.is_file() and not link.is_symlink()  # the link is replaced, as before
    assert not (tmp_path / "elsewhere.html").exists()


def test_a_report_path_that_cannot_be_written_is_refused_before_the_first_round(fleet, tmp_path):
    """It was a note after every round, of a watch that may run for days, exit status 0."""
    refused = [(path, f"{kind}, not a file: not replaced") for path, kind in _not_files(tmp_path)]
    for report, says in ((tmp_path, "a directory"), (tmp_path / "nope" / "fleet.html", "its folder does not exist"), *refused):
        done = rlagent("watch", str(fleet), "--offline", "--max-rounds", "1", "--report", str(report))
        assert done.returncode == 2 and f"--report {report}: {says}" in done.stderr, done.stderr
        assert done.stderr.strip().count("\n") == 0 and "round 1" not in done.stdout
