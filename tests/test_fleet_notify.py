"""Notifications over several watch rounds, against webhooks on 127.0.0.1: real simulated runs on
disk, real check-ins, real HTTP. The watcher is built as `rlagent watch` builds it."""

import io
import sqlite3
import time

import pytest
from loguru import logger

from rlagent.graph.fleetview import state_db_path
from rlagent.models.incidents import Silence
from rlagent.tools.fleetdb import FleetDB

from fleetkit import Receiver, free_port, make_watcher, simulate, wait_for


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def logs():
    """Everything rlagent logs, at every level, for the secrecy checks."""
    sink = io.StringIO()
    handler = logger.add(sink, level="DEBUG")
    logger.enable("rlagent")
    yield sink
    logger.remove(handler)


def rounds(watcher, n: int = 1):
    reports = [watcher.round() for _ in range(n)]
    watcher.flush(10)
    return reports


def test_one_message_per_opened_and_resolved_incident_over_several_rounds(tmp_path, receiver, logs):
    root, home = tmp_path / "runs", tmp_path / "home"
    crashed = simulate("crash-oom-h", root, run_name="crashy")
    simulate("healthy-h", root / "fine")
    url = receiver.url()
    watcher = make_watcher([root], home, urls=[url, "slack+" + receiver.url("/services/T00/B00/XXSLACKTOKEN")])
    try:
        rounds(watcher)  # round 1: the crash opens two incidents (one message per destination)
        assert wait_for(lambda: len(receiver.messages) == 2)
        generic = [m for m in receiver.messages if "items" in m]
        slack = [m for m in receiver.messages if set(m) == {"text"}]
        assert len(generic) == 1 and len(slack) == 1
        assert sorted(receiver.items("opened")) == [("crashy", "cuda_oom"), ("crashy", "run_crashed")]
        assert "NEW [critical] run_crashed" in slack[0]["text"]

        rounds(watcher, 2)  # nothing changed: nothing sent, however many rounds
        time.sleep(0.2)
        assert len(receiver.messages) == 2

        simulate("crash-oom-h", root, run_name="crashy", resume=True, steps=40)  # prime-rl resumed into attempt_2
        rounds(watcher)
        assert wait_for(lambda: len(receiver.messages) == 4)
        assert sorted(receiver.items("resolved")) == [("crashy", "cuda_oom"), ("crashy", "run_crashed")]
        rounds(watcher)
        time.sleep(0.2)
        # exactly one opening and one resolution per incident, over five rounds
        assert (
            sorted(receiver.items("opened"))
            == sorted(receiver.items("resolved"))
            == [
                ("crashy", "cuda_oom"),
                ("crashy", "run_crashed"),
            ]
        )
        assert len(receiver.messages) == 4
    finally:
        watcher.close()
    # the URL and its token are secrets: not in STATUS.md, not in the logs, not in the state store
    for secret in ("T0KEN-s3cr3t-42", "XXSLACKTOKEN", f"127.0.0.1:{receiver.port}"):
        assert secret not in (crashed / "STATUS.md").read_text()
        assert secret not in logs.getvalue()
        for db in home.glob("runs/*/state.db"):
            dump = "\n".join(sqlite3.connect(db).iterdump())
            assert secret not in dump


def test_reminders_come_at_the_interval_and_stop_when_acknowledged(tmp_path, receiver):
    root, home = tmp_path / "runs", tmp_path / "home"
    run = simulate("nan-h", root / "nanny")
    watcher = make_watcher([root], home, urls=[receiver.url()], remind="2s")
    try:
        rounds(watcher)
        assert wait_for(lambda: len(receiver.messages) == 1)
        opened = receiver.items("opened")
        assert ("nanny", "nan_detected") in opened
        rounds(watcher)  # at once: no reminder yet
        time.sleep(0.3)
        assert len(receiver.messages) == 1
        time.sleep(2.0)
        rounds(watcher)
        assert wait_for(lambda: len(receiver.messages) == 2)
        assert sorted(receiver.items("reminder")) == sorted(opened)  # every open incident, once, in one message
        db = FleetDB.open(state_db_path(home, str(run.resolve())))
        with db.conn:
            for incident in db.open_incidents().values():
                db.save_incident(incident.model_copy(update={"acked_by": "alice"}))
        db.close()
        time.sleep(2.1)
        rounds(watcher)
        time.sleep(0.3)
        assert len(receiver.messages) == 2  # acknowledged: no more reminders
        assert "acknowledged by alice" in (run / "STATUS.md").read_text()
    finally:
        watcher.close()


def test_a_silenced_incident_notifies_nobody_and_is_marked_in_status_md(tmp_path, receiver):
    from datetime import UTC, datetime, timedelta

    root, home = tmp_path / "runs", tmp_path / "home"
    run = simulate("crash-oom-h", root, run_name="quiet")
    now = datetime.now(UTC)
    db = FleetDB.open(state_db_path(home, str(run.resolve())))
    db.add_silence(Silence(finding_id="cuda_oom", until=now + timedelta(hours=6), reason="known OOM", by="bob", created_at=now))
    db.close()
    watcher = make_watcher([root], home, urls=[receiver.url()])
    try:
        rounds(watcher, 2)
        assert wait_for(lambda: len(receiver.messages) == 1)
        time.sleep(0.2)
        assert receiver.items("opened") == [("quiet", "run_crashed")] and len(receiver.messages) == 1
    finally:
        watcher.close()
    status = (run / "STATUS.md").read_text()
    assert "`cuda_oom`" in status and "[silenced until" in status and "by bob: known OOM]" in status


def test_unreachable_and_hanging_webhooks_block_no_round_and_are_retried_next_round(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    simulate("crash-oom-h", root, run_name="r1")
    port = free_port()  # nobody listens there yet
    hanging = Receiver(mode="hang")
    watcher = make_watcher([root], home, urls=[f"http://127.0.0.1:{port}/hook", hanging.url()], timeout_s=1.0)
    try:
        started = time.monotonic()
        first = watcher.round()
        assert time.monotonic() - started < 5  # the first (cold) check-in, not the webhooks
        second = watcher.round()  # the deliveries are still being tried: a round goes on regardless
        assert second.seconds < 1.0
        assert wait_for(lambda: all(f.done() for f in watcher.deliveries.values()), timeout=15)
        third = watcher.round()
        notes = " ".join(third.notes)
        assert "webhook 1 (json) failed (connection failed" in notes and "webhook 2 (json) failed (" in notes
        assert "tried again next round" in notes and third.failed_deliveries == 2 and first.failed_deliveries == 0
        # the webhooks come back: the queued message is delivered, once each
        late = Receiver(port=port)
        hanging.mode = "ok"
        hanging.release.set()
        try:
            watcher.round()
            watcher.flush(10)
            assert wait_for(lambda: len(late.messages) == 1 and len(hanging.messages) >= 1)
            assert sorted(late.items("opened")) == [("r1", "cuda_oom"), ("r1", "run_crashed")]
            watcher.round()
            watcher.flush(5)
            assert len(late.messages) == 1
        finally:
            late.close()
    finally:
        watcher.close()
        hanging.close()
