"""rlagent.tools.slurm without a cluster: the parsers on real SLURM 22.05 output, newer JSON shapes,
garbage, empty and error output; a missing binary, a failing and a hanging fake `squeue`; the
sbatch script reader, the run matcher and the time-limit ETA."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rlagent.models.slurm import SlurmJob
from rlagent.tools import slurm, slurm_jobs, slurm_parse

# ---- real output captured from SLURM 22.05.8 (trimmed to the fields read, plus a few others) ----

JSON_2205_FAILED = {
    "account": "", "array_job_id": 0, "array_task_id": None, "array_task_string": "", "batch_flag": True,
    "batch_host": "localhost", "comment": "", "current_working_directory": "/runs/r1", "dependency": "",
    "end_time": 1795458492, "exit_code": 768, "job_id": 7, "job_state": "FAILED", "name": "wrap", "nodes": "localhost",
    "node_count": 1, "partition": "debug", "requeue": True, "restart_cnt": 0, "standard_error": "", "standard_output": "",
    "start_time": 1795458492, "state_reason": "NonZeroExitCode", "submit_time": 1795458492, "time_limit": 10,
    "user_name": "root",
}  # fmt: skip
JSON_2205_ARRAY_TASK = {
    **JSON_2205_FAILED, "job_id": 13, "array_job_id": 11, "array_task_id": 1, "job_state": "RUNNING", "exit_code": 0,
    "state_reason": "None", "standard_output": "/runs/r1/job_%A_%a-%j.log", "start_time": 1795458480, "end_time": 1795459080,
    "comment": "rlagent run=/x",
}  # fmt: skip
JSON_2205_PENDING_ARRAY = {
    **JSON_2205_FAILED, "job_id": 2, "array_job_id": 2, "array_task_string": "1-3%1", "job_state": "PENDING",
    "exit_code": 0, "state_reason": "JobArrayTaskLimit", "nodes": "", "start_time": 0, "end_time": 0,
    "standard_output": "/runs/r1/slurm-%A_%a.out",
}  # fmt: skip
JSON_NEWER = {  # the v0.0.39+ data parser: numbers as {set, infinite, number}, states as lists
    "job_id": 42, "array_job_id": {"set": True, "infinite": False, "number": 0},
    "array_task_id": {"set": False, "infinite": False, "number": 0}, "name": "rl", "job_state": ["TIMEOUT"],
    "state_reason": "TimeLimit", "time_limit": {"set": True, "infinite": False, "number": 120},
    "start_time": {"set": True, "infinite": False, "number": 1795458000},
    "end_time": {"set": True, "infinite": False, "number": 1795465230},
    "submit_time": {"set": True, "infinite": False, "number": 1795457990},
    "exit_code": {"status": ["SIGNALED"], "return_code": {"set": True, "infinite": False, "number": 0},
                  "signal": {"id": {"set": True, "infinite": False, "number": 15}, "name": "SIGTERM"}},
    "current_working_directory": "/home/a/prime-rl", "standard_output": "/out/run/job_%j.log", "standard_error": "",
    "nodes": "gpu[01-02]", "node_count": {"set": True, "infinite": False, "number": 2}, "batch_flag": True,
    "requeue": False, "restart_cnt": 1, "partition": "gpu", "user_name": "alice", "comment": "", "dependency": "",
}  # fmt: skip
NOW = 1795458500.0

SCONTROL_FAILED = (
    "JobId=7 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901753 Nice=0 Account=(null) QOS=(null) "
    "JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 "
    "RunTime=00:00:00 TimeLimit=00:10:00 TimeMin=N/A SubmitTime=2026-11-23T18:28:12 EligibleTime=2026-11-23T18:28:12 "
    "AccrueTime=2026-11-23T18:28:12 StartTime=2026-11-23T18:28:12 EndTime=2026-11-23T18:28:12 Deadline=N/A "
    "SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-23T18:28:12 Scheduler=Main Partition=debug "
    "AllocNode:Sid=localhost:3605 ReqNodeList=(null) ExcNodeList=(null) NodeList=localhost BatchHost=localhost NumNodes=1 "
    "NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=64M,node=1,billing=1 Socks/Node=* "
    "NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=64M MinTmpDiskNode=0 Features=(null) "
    "DelayBoot=00:00:00 OverSubscribe=YES Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp/rlslurm-91WE/run1 StdErr=/tmp/rlslurm-91WE/run1/slurm-7.out StdIn=/dev/null "
    "StdOut=/tmp/rlslurm-91WE/run1/slurm-7.out Power= "
)
SCONTROL_ARRAY_TASK = (
    "JobId=13 ArrayJobId=11 ArrayTaskId=1 JobName=rltest-run UserId=root(0) GroupId=root(0) JobState=RUNNING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=0 ExitCode=0:0 RunTime=00:00:02 TimeLimit=00:10:00 "
    "SubmitTime=2026-11-23T18:28:12 StartTime=2026-11-23T18:28:12 EndTime=2026-11-23T18:38:12 Partition=debug "
    "NodeList=localhost NumNodes=1 Command=/tmp/run1/job.sh WorkDir=/tmp/run1 Comment=rlagent run=/x  "
    "StdErr=/tmp/run1/job_13.log StdIn=/dev/null StdOut=/tmp/run1/job_13.log Power= "
)
SCONTROL_MULTILINE = """JobId=99 JobName=my long name
   UserId=bob(1000) GroupId=bob(1000)
   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)
   ExitCode=0:15 RunTime=1-02:03:04 TimeLimit=1-02:00:00
   WorkDir=/w StdOut=/w/out.log
"""
SEP = slurm_parse.SEP
SACCT_C_ROWS = [
    ["7", "7", "wrap", "FAILED", "3:0", "0", "10", "2026-11-23T18:28:12", "2026-11-23T18:28:12", "2026-11-23T18:28:12",
     "localhost", "1", "debug", "root(0)", "/tmp/run1", "", ""],
    ["6", "6", "rltest-run", "TIMEOUT", "0:0", "84", "1", "2026-11-23T18:28:02", "2026-11-23T18:28:02",
     "2026-11-23T18:29:26", "localhost", "1", "debug", "root(0)", "/tmp/run1", "", f"a comment{SEP}with the separator"],
    ["6.batch", "6.batch", "batch", "CANCELLED", "0:15", "84", "", "", "", "", "localhost", "1", "", "", "", "", ""],
    ["9", "9", "x", "CANCELLED by 0", "0:0", "5", "UNLIMITED", "", "", "", "", "", "", "", "", "", ""],
]  # fmt: skip
SACCT_C_LINES = "\n".join(SEP.join(row) for row in SACCT_C_ROWS)


def test_squeue_json_2205_failed_job():
    jobs, notes = slurm_parse.parse_squeue_json(json.dumps({"meta": {}, "errors": [], "jobs": [JSON_2205_FAILED]}), NOW)
    assert notes == []
    (job,) = jobs
    assert (job.job_id, job.raw_job_id, job.array_job_id, job.state, job.reason) == ("7", "7", None, "FAILED", "NonZeroExitCode")
    assert (job.exit_code, job.exit_signal) == (3, 0)  # 768 is a wait status
    assert (job.time_limit_s, job.elapsed_s, job.node_count, job.nodes) == (600, 0, 1, "localhost")
    assert job.std_out == "/runs/r1/slurm-7.out"  # empty: sbatch's default in the work dir
    assert job.std_err is None
    assert job.start_time == datetime.fromtimestamp(1795458492, UTC) and job.source == "squeue --json"
    assert job.requeue is True and job.restarts == 0 and not job.active


def test_squeue_json_array_tasks_running_and_pending():
    jobs, _ = slurm_parse.parse_squeue_json(json.dumps({"jobs": [JSON_2205_ARRAY_TASK, JSON_2205_PENDING_ARRAY]}), NOW)
    task, pending = jobs
    assert (task.job_id, task.raw_job_id, task.array_job_id, task.array_task_id) == ("11_1", "13", "11", "1")
    assert task.std_out == "/runs/r1/job_11_1-13.log"
    assert task.elapsed_s == NOW - 1795458480  # running: now - start
    assert task.reason is None and task.comment == "rlagent run=/x" and task.active
    assert task.ids() == {"11_1", "13"}
    assert (pending.job_id, pending.array_task_id, pending.state, pending.nodes) == ("2_[1-3%1]", "1-3%1", "PENDING", None)
    assert pending.start_time is None and pending.elapsed_s == 0
    assert pending.std_out == "/runs/r1/slurm-%A_%a.out"  # tasks not split off yet: left as the pattern


def test_squeue_json_newer_shape():
    jobs, notes = slurm_parse.parse_squeue_json(json.dumps({"jobs": [JSON_NEWER]}), NOW)
    assert notes == []
    (job,) = jobs
    assert (job.job_id, job.array_job_id, job.array_task_id, job.state) == ("42", None, None, "TIMEOUT")
    assert (job.exit_code, job.exit_signal, job.time_limit_s, job.elapsed_s) == (0, 15, 7200, 7230)
    assert (job.nodes, job.node_count, job.user, job.restarts, job.requeue) == ("gpu[01-02]", 2, "alice", 1, False)
    assert job.std_out == "/out/run/job_42.log"


def test_squeue_json_unlimited_and_sentinel_values():
    raw = {**JSON_2205_FAILED, "time_limit": 4294967295, "start_time": 0, "node_count": 4294967294}
    raw_newer = {**JSON_NEWER, "time_limit": {"set": True, "infinite": True, "number": 0}}
    (job, newer), _ = slurm_parse.parse_squeue_json(json.dumps({"jobs": [raw, raw_newer]}), NOW)
    assert (job.time_limit_s, job.start_time, job.node_count, job.elapsed_s) == (None, None, None, None)
    assert newer.time_limit_s is None


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("", "squeue --json: output is not JSON (empty)"),
        ("slurm_load_jobs error: Unable to contact slurm controller", "squeue --json: output is not JSON ('slurm_load_jobs"),
        ('{"jobs": ', "squeue --json: output is not JSON"),
        ("[1, 2]", "squeue --json: no job list in the output"),
        ('{"meta": {}}', "squeue --json: no job list in the output"),
        ("[" * 100000, "squeue --json: output is not JSON"),
    ],
)
def test_squeue_json_garbage_is_a_note(text, note):
    jobs, notes = slurm_parse.parse_squeue_json(text, NOW)
    assert jobs == [] and len(notes) == 1 and notes[0].startswith(note)


def test_squeue_json_bad_records_are_skipped_and_counted():
    text = json.dumps(
        {"errors": [{"error": "boom", "error_number": 1}], "jobs": [1, "x", {}, {"job_id": "abc"}, JSON_2205_FAILED, None]}
    )
    jobs, notes = slurm_parse.parse_squeue_json(text, NOW)
    assert [j.job_id for j in jobs] == ["7"]
    assert notes[0].startswith("squeue --json error: ") and "boom" in notes[0]
    assert notes[1] == "squeue --json: skipped 5 malformed job record(s)"


def test_squeue_text_lines():
    good = [
        "11_2", "11", "11", "2", "rl run", "RUNNING", "None", "debug", "root", "1", "localhost", "2:22", "10:00",
        "2026-11-23T18:28:12", "2026-11-23T18:28:12", "2026-11-23T18:38:12", "/w", f"comment{SEP}with sep",
    ]  # fmt: skip
    plain = [
        "3", "3", "3", "N/A", "wrap", "FAILED", "NonZeroExitCode", "debug", "root", "1", "localhost", "0:00",
        "UNLIMITED", "2026-11-23T18:32:58", "N/A", "N/A", "/w", "(null)",
    ]  # fmt: skip
    lines = [SEP.join(good), "", "garbage line", f"a{SEP}b{SEP}c", SEP * 3, SEP.join(plain)]
    jobs, notes = slurm_parse.parse_squeue_text("\n".join(lines))
    assert notes == ["squeue: skipped 2 unreadable line(s)"]
    task, job = jobs
    assert (task.job_id, task.array_job_id, task.array_task_id, task.name) == ("11_2", "11", "2", "rl run")
    assert (task.elapsed_s, task.time_limit_s, task.comment, task.source) == (142, 600, f"comment{SEP}with sep", "squeue")
    assert task.end_time == datetime(2026, 11, 23, 18, 38, 12, tzinfo=UTC)
    assert (job.array_job_id, job.array_task_id, job.time_limit_s, job.start_time, job.comment) == (None, None, None, None, None)
    assert slurm_parse.parse_squeue_text("") == ([], [])


def test_scontrol_one_line_records():
    jobs, notes = slurm_parse.parse_scontrol_jobs(SCONTROL_FAILED + "\n" + SCONTROL_ARRAY_TASK + "\n")
    assert notes == []
    failed, task = jobs
    assert (failed.job_id, failed.state, failed.reason, failed.exit_code, failed.exit_signal) == (
        "7",
        "FAILED",
        "NonZeroExitCode",
        3,
        0,
    )
    assert (failed.user, failed.dependency, failed.requeue, failed.restarts, failed.comment) == ("root", None, True, 0, None)
    assert failed.std_out == "/tmp/rlslurm-91WE/run1/slurm-7.out" and failed.time_limit_s == 600
    assert failed.submit_time == datetime(2026, 11, 23, 18, 28, 12, tzinfo=UTC)
    assert (task.job_id, task.raw_job_id, task.array_job_id, task.array_task_id) == ("11_1", "13", "11", "1")
    assert task.comment == "rlagent run=/x"  # a value with a space and a lower-case `key=`
    assert task.std_out == "/tmp/run1/job_13.log" and task.reason is None and task.elapsed_s == 2


def test_scontrol_multiline_record_and_long_durations():
    (job,), notes = slurm_parse.parse_scontrol_jobs(SCONTROL_MULTILINE)
    assert notes == []
    assert (job.name, job.user, job.state, job.exit_signal) == ("my long name", "bob", "TIMEOUT", 15)
    assert (job.elapsed_s, job.time_limit_s) == (93784, 93600)


@pytest.mark.parametrize(
    ("text", "notes"),
    [
        ("", []),
        ("slurm_load_jobs error: Invalid job id specified\n", ["scontrol: no job record in the output ('slurm_load_jobs"]),
        ("JobId=abc JobName=x\n", ["scontrol: skipped 1 record(s) without a numeric JobId"]),
        ("\x00\xff\ufffd JobState=RUNNING", ["scontrol: no job record in the output"]),
    ],
)
def test_scontrol_garbage(text, notes):
    jobs, got = slurm_parse.parse_scontrol_jobs(text)
    assert jobs == []
    assert len(got) == len(notes) and all(g.startswith(n) for g, n in zip(got, notes, strict=True))


def test_sacct_completion_lines():
    jobs, notes = slurm_parse.parse_sacct(SACCT_C_LINES + "\nnot a line\n", source="sacct -c")
    assert notes == ["sacct -c: skipped 1 unreadable line(s)"]
    assert [j.job_id for j in jobs] == ["7", "6", "9"]  # the 6.batch step is not a job
    failed, timeout, cancelled = jobs
    assert (failed.state, failed.exit_code, failed.time_limit_s, failed.user, failed.source) == (
        "FAILED",
        3,
        600,
        "root",
        "sacct -c",
    )
    assert (timeout.state, timeout.elapsed_s, timeout.time_limit_s, timeout.comment) == (
        "TIMEOUT",
        84,
        60,
        f"a comment{SEP}with the separator",
    )
    assert (cancelled.state, cancelled.time_limit_s, cancelled.start_time) == ("CANCELLED", None, None)


def test_sacct_basic_fields_and_array_ids():
    fields = slurm_parse.SACCT_BASIC_FIELDS
    line = SEP.join(["11_2", "13", "rl", "COMPLETED", "0:0", "30", "10", "2026-11-23T18:28:12", "2026-11-23T18:28:42", "n1"])
    (job,), notes = slurm_parse.parse_sacct(line, fields)
    assert notes == []
    assert (job.job_id, job.raw_job_id, job.array_job_id, job.array_task_id, job.elapsed_s) == ("11_2", "13", "11", "2", 30)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:12", 12), ("10:00", 600), ("1:02:03", 3723), ("00:01:24", 84), ("1-02:03:04", 93784), ("2-00", 172800),
        ("00:00:01.500", 1.5), ("UNLIMITED", None), ("INVALID", None), ("Partition_Limit", None), ("N/A", None),
        ("", None), (None, None), ("12", None), ("a:b", None),
    ],
)  # fmt: skip
def test_parse_duration(text, seconds):
    assert slurm_parse.parse_duration(text) == seconds


def test_parse_time_and_exit_code():
    assert slurm_parse.parse_slurm_time("2026-11-23T18:28:12") == datetime(2026, 11, 23, 18, 28, 12, tzinfo=UTC)
    for text in ("Unknown", "None", "N/A", "", "18:28", "2026-13-45T99:00:00", None):
        assert slurm_parse.parse_slurm_time(text) is None
    assert slurm_parse.parse_exit_code("3:0") == (3, 0) and slurm_parse.parse_exit_code("0:15") == (0, 15)
    assert slurm_parse.parse_exit_code("garbage") == (None, None) and slurm_parse.parse_exit_code(None) == (None, None)


def test_expand_output_pattern():
    expand = slurm_parse.expand_output_pattern
    assert expand("/r/job_%j.log", job_id="12") == "/r/job_12.log"
    assert expand(
        "%x-%A_%a-%4j-%u-%N.%%", job_id="13", array_job_id="11", task_id="2", name="rl", user="al", node="gpu[1-2]"
    ) == ("rl-11_2-0013-al-gpu.%")


# ---- commands: missing, failing, hanging, garbage ----


def fake_bin(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    """An env whose PATH holds only a fake `name` (a /bin/sh script)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return {"PATH": str(bindir), "HOME": str(tmp_path)}


def test_missing_binaries_become_notes(tmp_path):
    env = {"PATH": str(tmp_path)}  # no SLURM here
    result = slurm.run_command(["squeue", "--json"], env=env)
    assert (result.ok, result.missing, result.note) == (False, True, "squeue: not found on PATH")
    report = slurm.job_states(["12"], env=env)
    assert report.jobs == [] and report.sources == [] and report.missing == ["12"]
    assert report.notes == [
        "squeue: not found on PATH",
        "scontrol: not found on PATH",
        "sacct: not found on PATH",
        "sacct: not found on PATH",
        "job 12: unknown to every SLURM command",
    ]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job_12.log").write_text("x\n")
    found = slurm_jobs.find_run_jobs(run_dir, env=env)
    assert found.jobs == [] and found.missing == ["12"]


def test_non_zero_exit_is_a_note(tmp_path):
    env = fake_bin(tmp_path, "squeue", 'echo "squeue: error: Invalid user: nobody" >&2\nexit 1\n')
    report = slurm.squeue(env=env)
    assert report.jobs == [] and report.sources == []
    assert report.notes == ["squeue --json exited 1: squeue: error: Invalid user: nobody"]


def test_slow_squeue_is_killed_at_the_timeout(tmp_path):
    # the child `sleep` holds stdout open too: only killing the process group ends the wait
    env = fake_bin(tmp_path, "squeue", "/bin/sleep 30 &\n/bin/sleep 30\n")
    started = time.monotonic()
    report = slurm.squeue(env=env, timeout=0.5)
    took = time.monotonic() - started
    assert took < 2.5
    assert report.notes == ["squeue --json: no answer within 0.5 s"] and report.jobs == []
    started = time.monotonic()
    report = slurm.job_states(["5"], env=env, timeout=0.5)
    assert time.monotonic() - started < 2.5  # scontrol is skipped; sacct is missing
    assert report.notes[:2] == [
        "squeue --json: no answer within 0.5 s",
        "scontrol: skipped (the controller did not answer squeue)",
    ]


def test_squeue_without_json_falls_back_to_the_text_format(tmp_path):
    line = SEP.join(["5", "5", "5", "N/A", "rl", "RUNNING", "None", "debug", "root", "1", "n1", "1:00", "10:00",
                     "2026-11-23T18:28:12", "2026-11-23T18:28:12", "2026-11-23T18:38:12", "/w", "(null)"])  # fmt: skip
    (tmp_path / "line").write_text(line + "\n")
    body = f"""case "$1" in
--json) echo "squeue: unrecognized option '--json'" >&2; exit 1;;
*) /bin/cat {tmp_path / "line"};;
esac
"""
    report = slurm.squeue(["5"], env=fake_bin(tmp_path, "squeue", body))
    assert report.sources == ["squeue"]
    assert report.notes == ["squeue has no --json here (older SLURM): using squeue -o"]
    assert [(j.job_id, j.state, j.elapsed_s, j.source) for j in report.jobs] == [("5", "RUNNING", 60, "squeue")]


def test_squeue_json_garbage_falls_back_to_the_text_format(tmp_path):
    body = """case "$1" in
--json) echo "<html>proxy error</html>";;
*) echo "only garbage here";;
esac
"""
    report = slurm.squeue(env=fake_bin(tmp_path, "squeue", body))
    assert report.sources == ["squeue"] and report.jobs == []
    assert report.notes == [
        "squeue --json: output is not JSON ('<html>proxy error</html>'); trying squeue -o",
        "squeue: skipped 1 unreadable line(s)",
    ]


def test_commands_run_in_utc_with_standard_time_format(tmp_path):
    env = fake_bin(tmp_path, "squeue", 'echo "$TZ $SLURM_TIME_FORMAT" >&2; exit 2\n')
    env.update({"TZ": "Asia/Tokyo", "SLURM_TIME_FORMAT": "relative"})
    assert slurm.squeue(env=env).notes == ["squeue --json exited 2: UTC standard"]


def test_scontrol_stops_at_a_missing_binary_and_caps_calls(tmp_path):
    report = slurm.scontrol_jobs([str(i) for i in range(50)], env={"PATH": str(tmp_path)})
    assert report.notes == ["scontrol: not found on PATH"]
    calls = tmp_path / "calls"
    env = fake_bin(
        tmp_path, "scontrol", f'echo "$4" >> {calls}\necho "slurm_load_jobs error: Invalid job id specified" >&2\nexit 1\n'
    )
    report = slurm.scontrol_jobs([str(i) for i in range(50)], env=env)
    assert len(calls.read_text().split()) == slurm.MAX_SCONTROL_CALLS
    assert report.notes == [f"scontrol: asked about the first {slurm.MAX_SCONTROL_CALLS} of 50 jobs only"]
    assert report.sources == ["scontrol"]


def test_sacct_retries_with_basic_fields_on_an_older_sacct(tmp_path):
    line = SEP.join(["8", "8", "rl", "COMPLETED", "0:0", "30", "10", "2026-11-23T18:28:12", "2026-11-23T18:28:42", "n1"])
    (tmp_path / "line").write_text(line + "\n")
    body = f"""case "$*" in
*WorkDir*) echo 'sacct: error: Invalid field requested: "WorkDir"' >&2; exit 1;;
*) /bin/cat {tmp_path / "line"};;
esac
"""
    report = slurm.sacct_jobs(["8"], env=fake_bin(tmp_path, "sacct", body))
    assert report.notes == [] and report.sources == ["sacct"]
    assert [(j.job_id, j.state, j.elapsed_s) for j in report.jobs] == [("8", "COMPLETED", 30)]


# ---- run dirs: log names, sbatch scripts, matching ----


def test_job_ids_from_log_names(tmp_path):
    for name in ("job_12.log", "job_9.log", "job_7_3.log", "slurm-100.out", "job_x.log", "job_12.log.1", "trainer.log"):
        (tmp_path / name).write_text("")
    (tmp_path / "job_55.log").mkdir()
    assert slurm_jobs.job_ids_from_logs(tmp_path) == {
        "7_3": "job_7_3.log",
        "9": "job_9.log",
        "12": "job_12.log",
        "100": "slurm-100.out",
    }
    assert slurm_jobs.job_ids_from_logs(tmp_path / "missing") == {}


def test_sbatch_directives_stop_at_the_first_command(tmp_path):
    text = """#!/bin/bash

#SBATCH --job-name=prime rl
#SBATCH -J ignored-second-name
#SBATCH --output /runs/r1/job_%j.log --error=/runs/r1/job_%j.log
#SBATCH -D/runs/r1
# a plain comment
#SBATCH --comment="run r1" --time=1-00:00:00  # trailing comment
set -e
#SBATCH --partition=after-the-first-command-is-ignored
#SBATCH --chdir=/ignored
"""
    script = slurm_jobs.parse_sbatch_script(text, tmp_path / "rl.sbatch")
    assert (script.job_name, script.output, script.error) == ("prime", "/runs/r1/job_%j.log", "/runs/r1/job_%j.log")
    assert (script.chdir, script.comment, script.time) == ("/runs/r1", "run r1", "1-00:00:00")
    broken = slurm_jobs.parse_sbatch_script('#SBATCH --job-name="unclosed\n#SBATCH -o out.log\n')
    assert broken.job_name == '"unclosed' and broken.output == "out.log"


def test_find_sbatch_scripts(tmp_path):
    (tmp_path / "rl.sbatch").write_text("#!/bin/bash\n#SBATCH --job-name=a\n")
    (tmp_path / "run.sh").write_text("#!/bin/bash\n#SBATCH -J b\nsrun x\n")
    (tmp_path / "plain.sh").write_text("#!/bin/bash\necho hi\n")
    (tmp_path / "notes.txt").write_text("#SBATCH --job-name=c\n")
    (tmp_path / "big.sh").write_bytes(b"#SBATCH -J d\n" + b"x" * (2 << 20))
    (tmp_path / "binary").write_bytes(b"\x00\xff#SBATCH -J \xff\xfe\n")
    found = {s.path.name: s.job_name for s in slurm_jobs.find_sbatch_scripts(tmp_path)}
    assert found == {"rl.sbatch": "a", "run.sh": "b", "binary": None}


def _job(job_id: str, **kw) -> SlurmJob:
    return SlurmJob(job_id=job_id, raw_job_id=job_id, source="test", **kw)


def test_match_run_jobs_says_how_each_job_matched(tmp_path):
    run = tmp_path / "outputs" / "run-a"
    other = tmp_path / "outputs" / "run-b"
    script = slurm_jobs.SbatchScript(path=run / "rl.sbatch", job_name="rl", output=f"{run}/job_%j.log")
    jobs = [
        _job("1", name="rl", std_out=f"{run}/job_1.log", work_dir="/home/a/prime-rl"),  # resolved by scontrol
        _job("2", name="rl", std_out=f"{run}/job_%j.log", work_dir="/home/a/prime-rl"),  # raw, as squeue --json gives it
        _job("3", name="rl", std_out=f"{other}/job_3.log", work_dir="/home/a/prime-rl"),  # another run, same name
        _job("4", name="x", work_dir=str(run)),
        _job("5", name="x", comment=f"watch {run} please", std_out="/elsewhere/o.log", work_dir="/elsewhere"),
        _job("6", name="run-a", std_out="/elsewhere/o.log", work_dir="/elsewhere"),  # named like the run, runs elsewhere
        _job("7", name="run-a"),  # named like the run, nothing contradicts (e.g. sacct -c without std_out)
        _job("8", name="x", std_out="/elsewhere/o.log", work_dir="/elsewhere"),
    ]
    matched = slurm_jobs.match_run_jobs(run, jobs, log_ids={"1": "job_1.log"}, scripts=[script])
    assert {j.job_id: j.matched_by for j in matched} == {
        "1": ["log_file:job_1.log", "sbatch:rl.sbatch", "std_out"],
        "2": ["sbatch:rl.sbatch", "std_out"],
        "4": ["work_dir"],
        "5": ["comment"],
        "7": ["name"],
    }
    assert all(j.matched_by == [] for j in jobs)  # copies: the inputs are untouched


def test_sbatch_chdir_must_agree(tmp_path):
    script = slurm_jobs.SbatchScript(path=tmp_path / "a.sbatch", job_name="rl", chdir="sub")
    here = _job("1", name="rl", work_dir=str(tmp_path / "sub"), std_out="/x/o.log")
    there = _job("2", name="rl", work_dir="/else", std_out="/x/o.log")
    matched = slurm_jobs.match_run_jobs(tmp_path, [here, there], scripts=[script])
    assert [(j.job_id, j.matched_by) for j in matched] == [("1", ["sbatch:a.sbatch"])]


# ---- time limit ETA ----

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_eta_limit_comes_first():
    eta = slurm.time_limit_eta(step=100, max_steps=1000, seconds_per_step=30, elapsed_s=3600, time_limit_s=4 * 3600, now=T0)
    # 3 h left = 360 steps; 900 steps need 7.5 h
    assert eta.will_hit_limit is True
    assert (eta.steps_left, eta.remaining_s, eta.finish_in_s, eta.margin_s) == (900, 10800, 27000, -16200)
    assert eta.last_step_before_kill == 460
    assert eta.kill_in_s == 10800 and eta.kill_at == T0 + timedelta(hours=3)
    assert eta.note == "killed at its time limit after step 460 of 1000 (540 steps short)"


def test_eta_finishes_first_and_edge_cases():
    done = slurm.time_limit_eta(step=990, max_steps=1000, seconds_per_step=30, elapsed_s=0, time_limit_s=3600, now=T0)
    assert (done.will_hit_limit, done.margin_s, done.finish_at, done.last_step_before_kill) == (
        False,
        3300,
        T0 + timedelta(seconds=300),
        None,
    )
    exact = slurm.time_limit_eta(step=0, max_steps=10, seconds_per_step=6, elapsed_s=0, time_limit_s=60)
    assert exact.will_hit_limit is False and exact.margin_s == 0
    over = slurm.time_limit_eta(step=5, max_steps=10, seconds_per_step=1, elapsed_s=100, time_limit_s=60)
    assert (over.will_hit_limit, over.remaining_s, over.last_step_before_kill) == (True, 0, 5)
    assert slurm.time_limit_eta(step=10, max_steps=10, seconds_per_step=1, elapsed_s=0, time_limit_s=1).will_hit_limit is False
    unlimited = slurm.time_limit_eta(step=1, max_steps=10, seconds_per_step=2, elapsed_s=5, time_limit_s=None)
    assert (unlimited.will_hit_limit, unlimited.note, unlimited.finish_in_s) == (False, "no time limit", 18)
    for rate in (None, 0, -1, float("nan"), float("inf")):
        eta = slurm.time_limit_eta(step=1, max_steps=10, seconds_per_step=rate, elapsed_s=5, time_limit_s=60)
        assert eta.will_hit_limit is None and eta.remaining_s == 55, rate
    unknown = slurm.time_limit_eta(step=1, max_steps=10, seconds_per_step=1, elapsed_s=None, time_limit_s=60)
    assert (unknown.will_hit_limit, unknown.note) == (None, "elapsed time unknown")


def test_slurm_env_keeps_the_callers_environment():
    env = slurm.slurm_env({"SLURM_CONF": "/x/slurm.conf", "TZ": "Europe/Paris"})
    assert env == {"SLURM_CONF": "/x/slurm.conf", "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    assert slurm.slurm_env()["PATH"] == os.environ["PATH"]


def test_ids_that_are_not_job_ids_are_never_passed_to_a_command(tmp_path):
    calls = tmp_path / "calls"
    env = fake_bin(tmp_path, "squeue", f'echo "$*" >> {calls}\nexit 1\n')
    report = slurm.job_states(["--help", "12;rm -rf /", " ", ""], env=env)
    assert not calls.exists() and report.sources == []
    assert report.missing == ["--help", "12;rm -rf /"]
    assert report.notes == ["job '--help': not a SLURM job id", "job '12;rm -rf /': not a SLURM job id"]
