"""The runner: one check-in through the graph, with the run's state in its SQLite store.

A check-in is persisted once, at its end (durability "exit"); a check-in that crashed is
simply done again with the same number, and STATUS.md entry ids make that safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from loguru import logger

from rlagent.agents.collector import CollectorDeps, make_collector
from rlagent.agents.diagnostician import make_diagnostician
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.agents.writer import WriterDeps, make_writer
from rlagent.graph.build import Nodes, build_graph
from rlagent.graph.state import CheckinState, RunInfo
from rlagent.graph.store import connect, prune_checkpoints, run_key, run_lock, state_dir
from rlagent.tools.dayclock import local_tz


def utc_now() -> datetime:
    return datetime.now(UTC)


class Monitor:
    """Check-ins of one run; holds the compiled graph and the store connection between them."""

    def __init__(
        self,
        run: RunInfo,
        *,
        home,
        offline: bool = False,
        write: bool = True,
        thresholds: Thresholds | None = None,
        log_timezone: str | None = None,
        probe_timeout_s: float = 2.0,
        clock: Callable[[], datetime] = utc_now,
        nodes: Nodes | None = None,
    ) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver  # heavy: imported only when checking in

        self.run = run
        self.key = run_key(run.run_dir)
        self.dir = state_dir(home, self.key)
        self.conn = connect(self.dir / "state.db")
        self.saver = SqliteSaver(self.conn)
        self.offline = offline
        self.clock = clock
        self._deps = CollectorDeps(
            offline=offline,
            tz=ZoneInfo(log_timezone) if log_timezone else local_tz(),
            clock=clock,
            probe_timeout_s=probe_timeout_s,
        )
        self._writer_deps = WriterDeps(run_key=self.key, write=write)
        self.nodes = nodes or Nodes(
            collector=make_collector(self._deps),
            diagnostician=make_diagnostician(thresholds or Thresholds()),
            writer=make_writer(self._writer_deps),
        )
        self.graph = build_graph(self.nodes, self.saver)
        self.saver.setup()
        self._known_head: str | None = None
        self._known_checkin = 0
        self.config = {"configurable": {"thread_id": self.key}}

    def state(self) -> CheckinState | None:
        values = self.graph.get_state(self.config).values
        return CheckinState.model_validate(values) if values else None

    def check_in(self, now: datetime | None = None) -> CheckinState:
        """Run one check-in; `now` fixes the time of an offline check-in (replays)."""
        started = time.perf_counter()
        with run_lock(self.dir):
            if self._head() != self._known_head:  # first check-in of this process, or another monitor wrote
                self._finish_interrupted()
                self._known_checkin = int((self.graph.get_state(self.config).values or {}).get("checkin", 0))
            update = {
                "run": self.run,
                "checkin": self._known_checkin + 1,
                "observation": None,
                "findings": [],
                "health": None,
                "proposal": None,
                "status_entry": "",
                "written": False,
                "now_override": now,
            }
            result = self.graph.invoke(update, self.config, durability="exit")
            prune_checkpoints(self.conn, self.key)
            state = CheckinState.model_validate(result)
            self._known_head, self._known_checkin = self._head(), state.checkin
        logger.debug("check-in #{} of {} took {:.1f} ms", state.checkin, self.key, (time.perf_counter() - started) * 1000)
        return state

    def _head(self) -> str | None:
        """Id of the thread's newest checkpoint: tells whether the state held in memory is current."""
        row = self.conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (self.key,),
        ).fetchone()
        return row[0] if row else None

    def _finish_interrupted(self) -> None:
        """A check-in that crashed mid-way is finished first, from its checkpoint (its entry,
        if already appended, is recognised by id and not appended again)."""
        snapshot = self.graph.get_state(self.config)
        if snapshot.next and not snapshot.interrupts:
            logger.warning("finishing check-in #{} that stopped before {}", snapshot.values.get("checkin"), snapshot.next)
            self.graph.invoke(None, self.config, durability="exit")

    def close(self) -> None:
        self.conn.close()


def build_report(state: CheckinState) -> dict:
    """The JSON report (DESIGN.md interfaces)."""
    obs = state.observation
    assert obs is not None
    step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
    return {
        "run_dir": state.run.run_dir,
        "layout": state.run.layout.value,
        "picked_from": state.run.picked_from,
        "checkin": state.checkin,
        "checked_at": obs.now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "step": step,
        "max_steps": state.config.max_steps,
        "health": state.health.value if state.health else None,
        "findings": [
            f.model_dump(mode="json", include={"id", "severity", "category", "summary", "evidence", "first_step", "last_step"})
            for f in state.findings
        ],
        "proposal": state.proposal,
        "status_entry": state.status_entry,
        "written": state.written,
        "notes": obs.notes,
        "samples": [r.model_dump(mode="json") for r in obs.rollouts],
    }
