"""The monitor: one check-in through the graph, with the run's state in its SQLite store. It
builds the nodes from their deps and hands each the side effects it needs (`Effects`: real by
default, fakes in tests); the check-in report is rlagent.agents.report, the cadence graph.cadence.

A check-in is persisted once, at its end (durability "exit"); a check-in that crashed is
simply done again with the same number, and STATUS.md entry ids make that safe.

A check-in that reached the approval gate stops at the launcher's `interrupt()` and stays
pending in the store until a person answers (`decide`, from this process or another one) or it
expires. No new check-in starts on the run meanwhile: starting one would discard the pending
decision (LangGraph drops an interrupt when new input arrives on its thread).
"""

from __future__ import annotations

import shlex
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from langgraph.types import Command
from loguru import logger

from rlagent.agents.collector import CollectorDeps, make_collector
from rlagent.agents.command_plan import PlanDeps, make_launch_probe
from rlagent.agents.diagnostician import make_diagnostician
from rlagent.agents.launcher import LauncherDeps, make_launcher
from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.agents.review import ReviewDeps, Reviewer, default_reviewers, make_team_review
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.agents.writer import WriterDeps, make_writer
from rlagent.graph.alerts import AlertBook, Recorded
from rlagent.graph.build import Nodes, build_graph
from rlagent.graph.store import (
    LOCK_TIMEOUT_S,
    connect,
    prune_checkpoints,
    run_key,
    run_lock,
    state_dir,
    store_errors,
    store_id,
)
from rlagent.models.actions import ApprovalMode, ApprovalRequest, Decision, Gate, TmuxTarget
from rlagent.models.run import RunInfo
from rlagent.models.state import CheckinOutput, CheckinState
from rlagent.tools import journal
from rlagent.tools.clock import Clock, SystemClock
from rlagent.tools.dayclock import local_tz
from rlagent.tools.hostprobes import HostProbe, HttpGet, SystemHost, urllib_get
from rlagent.tools.processes import ProcessProbe, SystemProcesses
from rlagent.tools.slurm_probe import ClusterProbe, SystemCluster
from rlagent.tools.statusfile import StatusFile, StatusSink
from rlagent.tools.tmux import PaneOpener, TmuxError, open_launcher


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Effects:
    """Every side effect of a monitor, each behind a narrow interface (the real ones by default;
    tests pass fakes, tests/fakes.py). The monitor hands each to the nodes' deps that need it.
    The LLM client is the other one: it comes with the `LLMRuntime` (its `client_factory`)."""

    clock: Clock = field(default_factory=SystemClock)
    """Wall clock of live check-ins and decisions; monotonic time and sleeping of the verification."""
    status: StatusSink = field(default_factory=StatusFile)
    """The one writer of STATUS.md: check-in entries and follow-up entries."""
    processes: ProcessProbe = field(default_factory=SystemProcesses)
    """The run's processes, and the launch command in their relatives' environment."""
    host: HostProbe = field(default_factory=SystemHost)
    """Host RAM and the run's free disk."""
    http_get: HttpGet = urllib_get
    """vLLM `/metrics`."""
    open_pane: PaneOpener = open_launcher
    """The run's tmux Launcher pane."""
    cluster: ClusterProbe = field(default_factory=SystemCluster)
    """The run's SLURM jobs and the processes on their nodes."""


@dataclass(frozen=True)
class ActionConfig:
    """How far a monitor may go beyond writing STATUS.md (default: observe only)."""

    approve: ApprovalMode = ApprovalMode.NEVER
    target: TmuxTarget = field(default_factory=TmuxTarget)
    launch_command: str | None = None
    decision_expiry_s: float = 7200.0
    verify_timeout_s: float = 600.0
    verify_poll_s: float = 2.0
    max_restarts_per_day: int = 3
    reviewers: list[Reviewer] | None = None
    """The review team; None is the rules team. Claude personas plug in here."""
    notify: Callable[[str], None] = field(default=_quiet)
    """Progress lines of a send and its verification, for the person who approved."""


class DecisionPending(Exception):
    """A check-in waits at the approval gate; nothing else happens on the run until it is answered."""

    def __init__(self, request_id: str, request: ApprovalRequest) -> None:
        super().__init__(
            f"check-in #{request.checkin} awaits a decision on: {request.headline} "
            f"(expires {request.expires_at:%Y-%m-%d %H:%M} UTC); answer with "
            f"`rlagent approve {shlex.quote(request.run_dir)} --yes` or `--no`"
        )
        self.request_id = request_id
        self.request = request


class NothingPending(Exception):
    """An answer arrived for a decision that is no longer pending (answered elsewhere, expired)."""


class CannotSend(Exception):
    """A Yes that cannot go out now (the tmux server, session or window is unreachable): nothing
    was sent and the decision stays pending, so the person can start it and answer again. (A
    busy pane is a refusal at send time, which closes the decision: the run is not as reviewed.)"""


class Monitor:
    """Check-ins of one run; holds the compiled graph and the store connection between them."""

    @store_errors
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
        effects: Effects | None = None,
        nodes: Nodes | None = None,
        actions: ActionConfig | None = None,
        llm: LLMRuntime | None = None,
        retire_finished: bool = False,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
        keep_history: bool = True,
        plots: bool = False,
    ) -> None:
        from rlagent.graph.checkpointer import RunSaver  # heavy (LangGraph's saver): imported only when checking in

        self.run = run
        self.key = run_key(run.run_dir)
        self.dir = state_dir(home, self.key)
        self.lock_timeout_s = lock_timeout_s
        self.entry_key = f"{self.key}.{store_id(self.dir)}"
        """Names this home's STATUS.md entries: unique across state homes (the thread id is not)."""
        self.conn = connect(self.dir / "state.db")
        if not write:  # a preview: check in on a copy, so no check-in number, offset or finding is used up
            preview = sqlite3.connect(":memory:", check_same_thread=False)
            self.conn.backup(preview)
            self.conn.close()
            self.conn = preview
        self.saver = RunSaver(self.conn, keep=keep_history)  # a watcher of many runs keeps none (graph/checkpointer.py)
        self.offline = offline
        effects = effects or Effects()
        self.clock = effects.clock
        self._open_pane = effects.open_pane
        self._deps = CollectorDeps(
            offline=offline,
            tz=ZoneInfo(log_timezone) if log_timezone else local_tz(),
            clock=effects.clock,
            probe_timeout_s=probe_timeout_s,
            processes=effects.processes,
            host=effects.host,
            http_get=effects.http_get,
            cluster=effects.cluster,
        )
        self._writer_deps = WriterDeps(run_key=self.entry_key, write=write, status=effects.status)
        self.actions = actions or ActionConfig()
        self.gate = self._gate(offline)
        thresholds = thresholds or Thresholds()
        self.llm = llm
        reviewers = self.actions.reviewers or default_reviewers(self.actions.max_restarts_per_day)
        planning = PlanDeps(
            target=self.actions.target,
            launch_command=self.actions.launch_command,
            live=not offline,
            processes=effects.processes,
            open_pane=effects.open_pane,
        )
        self.nodes = nodes or Nodes(
            collector=make_collector(self._deps),
            diagnostician=make_diagnostician(thresholds, llm),
            writer=make_writer(self._writer_deps),
            team_review=make_team_review(ReviewDeps(reviewers=reviewers, planning=planning, llm=llm)),
            # Always wired, so any monitor can resume a decision left pending; the router decides
            # from the check-in's gate whether a new one goes there.
            launcher=make_launcher(
                LauncherDeps(
                    journal_dir=self.dir,
                    run_key=self.entry_key,
                    clock=effects.clock,
                    verify_timeout_s=self.actions.verify_timeout_s,
                    verify_poll_s=self.actions.verify_poll_s,
                    required_roles=tuple(thresholds.required_roles),
                    write=write,
                    notify=self.actions.notify,
                    open_pane=effects.open_pane,
                    processes=effects.processes,
                    cluster=effects.cluster,
                    status=effects.status,
                )
            ),
            launch_probe=None if offline else make_launch_probe(effects.processes),
        )
        self.graph = build_graph(self.nodes, self.saver)
        self.saver.setup()
        self.book = AlertBook(self.conn)
        """Incidents, silences, the outbox and the fleet snapshot, in the same store."""
        self.retire_finished = retire_finished
        self.recorded: Recorded | None = None
        """What the last check-in recorded (incidents changed, the run's snapshot)."""
        self.plots = plots
        """`recorded.snapshot` carries the run's plots: for a report rendered from memory."""
        self._known_head: str | None = None
        self._maybe_pending = True
        self._known_checkin = 0
        self.config = {"configurable": {"thread_id": self.key}}

    def _gate(self, offline: bool) -> Gate:
        expiry = self.actions.decision_expiry_s
        if offline:
            return Gate(mode=ApprovalMode.NEVER, expiry_s=expiry, why_not="offline check of a recorded run")
        if self.actions.approve is ApprovalMode.NEVER:
            return Gate(mode=ApprovalMode.NEVER, expiry_s=expiry, why_not="observe only (--approve never)")
        return Gate(mode=ApprovalMode.ASK, expiry_s=expiry)

    @store_errors
    def state(self) -> CheckinState | None:
        values = self.graph.get_state(self.config).values
        return CheckinState.model_validate(values) if values else None

    @store_errors
    def pending(self) -> tuple[str, ApprovalRequest] | None:
        """(interrupt id, request) of the decision this run waits for, if any."""
        for pending in self.graph.get_state(self.config).interrupts:
            return pending.id, ApprovalRequest.model_validate(pending.value)
        return None

    @store_errors
    def decide(self, approved: bool, by: str, request_id: str, how: str = "prompt") -> CheckinState:
        """Answer the pending decision `request_id` (the one the person saw). Yes sends the command
        and verifies it (bounded), then appends the follow-up entry; No closes it."""
        with run_lock(self.dir, self.lock_timeout_s, "answering a pending decision"):
            found = self.pending()
            if found is None:
                raise NothingPending("no decision is pending for this run (answered elsewhere, or expired)")
            if found[0] != request_id:
                raise NothingPending("the pending decision is not the one shown (it changed meanwhile); look again")
            if approved and self.clock.now() <= found[1].expires_at:
                self._can_send(found[1])
            decision = Decision(approved=approved, by=by, at=self.clock.now(), how=how, request_id=request_id)
            return self._resume(decision)

    def _can_send(self, request: ApprovalRequest) -> None:
        """Before a Yes is handed to the launcher: its tmux target must be reachable, else
        CannotSend and the decision stays pending. The launcher checks everything again at send time."""
        if journal.recall(self.dir, request.checkin):
            return  # already sent once: the launcher only verifies it
        try:
            self._open_pane(request.target)
        except TmuxError as exc:
            raise CannotSend(f"{exc}; nothing sent, the decision is still pending") from exc

    @store_errors
    def expire_if_due(self) -> CheckinState | None:
        """Close a pending decision whose time is up (as No; nothing sent); the state if it did."""
        with run_lock(self.dir, self.lock_timeout_s, "closing an expired decision"):
            found = self.pending()
            if found is None or self.clock.now() < found[1].expires_at:
                return None
            return self._resume(Decision(approved=False, by="nobody", at=self.clock.now(), how="expired", request_id=found[0]))

    def _resume(self, decision: Decision) -> CheckinState:
        result = self.graph.invoke(Command(resume=decision.model_dump(mode="json")), self.config, durability="exit")
        prune_checkpoints(self.conn, self.key)
        state = CheckinState.model_validate(result)
        self._known_head, self._known_checkin = self._head(), state.checkin
        return state

    def _settle_pending(self) -> None:
        """Before a new check-in: finish a send that already went out, close an expired decision,
        or refuse (DecisionPending) while a person may still answer."""
        found = self.pending()
        if found is None:
            return
        request_id, request = found
        sent = journal.recall(self.dir, request.checkin)
        if sent and sent.get("command") == request.command:
            logger.warning("check-in #{}: the command was already sent; verifying it again", request.checkin)
            self._resume(Decision.model_validate(sent["decision"]))
        elif self.clock.now() >= request.expires_at:
            self._resume(Decision(approved=False, by="nobody", at=self.clock.now(), how="expired", request_id=request_id))
        else:
            raise DecisionPending(request_id, request)

    @store_errors
    def check_in(self, now: datetime | None = None) -> CheckinState:
        """Run one check-in; `now` fixes the time of an offline check-in (replays)."""
        started = time.perf_counter()
        with run_lock(self.dir, self.lock_timeout_s, "a check-in"):
            if self._head() != self._known_head:  # first check-in of this process, or another monitor wrote
                self._finish_interrupted()
                self._known_checkin = int((self.graph.get_state(self.config).values or {}).get("checkin", 0))
                self._maybe_pending = True
            if self._maybe_pending:  # only our own last check-in's interrupt, or another process, can leave one
                self._settle_pending()
            fresh = {
                "run": self.run,
                "checkin": self._known_checkin + 1,
                "gate": self.gate,
                "now_override": now,
                "alerts": self.book.context(retire_finished=self.retire_finished),
                "out": CheckinOutput(),  # what this check-in produces starts empty; the run's memory carries over
            }
            result = self.graph.invoke(fresh, self.config, durability="exit")
            prune_checkpoints(self.conn, self.key)
            state = CheckinState.model_validate(result)
            self._known_head, self._known_checkin = self._head(), state.checkin
            self._maybe_pending = bool(result.get("__interrupt__"))
            self.recorded = self.book.record(state, plots=self.plots)
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
            logger.info("finishing check-in #{} that stopped before {}", snapshot.values.get("checkin"), snapshot.next)
            self.graph.invoke(None, self.config, durability="exit")

    def close(self) -> None:
        # After a Ctrl-C mid check-in, LangGraph's worker thread may still be writing the checkpoint on
        # this connection: closing it under a running statement crashed SQLite (SIGSEGV). The saver's
        # lock, held by every write of the saver, waits for that write to end.
        with self.saver.lock:
            self.conn.close()
