"""Property: over random findings, proposals, verdicts (two rounds) and a person's answer, the
graph sends something to the Launcher pane if and only if every reviewer of the final round
approved and the person approved; and what it sends is always exactly the command built from the
run's launch command and the typed action (or Ctrl-C for a stop)."""

import shlex
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from rlagent.agents.command_plan import PlanDeps
from rlagent.agents.diagnostician import revising
from rlagent.agents.launcher import LauncherDeps, make_launcher
from rlagent.agents.review import ReviewDeps, make_team_review
from rlagent.graph.build import Nodes, build_graph
from rlagent.models.actions import (
    KNOBS,
    ActionKind,
    ApprovalMode,
    Check,
    Decision,
    Gate,
    LogClaim,
    Override,
    Proposal,
    TmuxTarget,
    Verdict,
)
from rlagent.models.findings import Finding
from rlagent.models.observation import LiveProbes, Observation
from rlagent.models.run import Category, RunConfig, Severity
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools.launch_command import build_argv, command_line
from rlagent.tools.layout import discover_run

from fakes import FakeClock, FakePane, FakeProcesses, FakeTmux
from launchkit import crashed_h_run

LAUNCH = ["uv", "run", "rl", "@", "configs/my run.toml", "--wandb.name", "it's mine"]
CONFIG = RunConfig(max_steps=100, seq_len=2048, max_completion_tokens=512, temperature=1.0, batch_size=64, group_size=8)
IDS = ["run_crashed", "process_down", "cuda_oom", "truncation_high", "entropy_collapse", "nan_detected"]


class Scripted:
    def __init__(self, index, rounds):
        self.name, self.duty, self.index, self.rounds, self.calls = f"reviewer {index}", "scripted", index, rounds, 0

    def review(self, packet):
        approve = self.rounds[min(self.calls, len(self.rounds) - 1)][self.index]
        self.calls += 1
        return Verdict.from_checks(self.name, self.duty, [Check(name="scripted", ok=approve, detail="by the script")])


def overrides():
    def one(knob):
        spec = KNOBS[knob]
        values = st.integers(int(spec.low), int(spec.high)) if spec.integer else st.floats(spec.low, spec.high)
        return values.map(lambda v, knob=knob: Override(knob=knob, value=v, current=None))

    return st.lists(st.sampled_from(list(KNOBS)).flatmap(one), min_size=1, max_size=3)


@st.composite
def proposals(draw):
    # resubmit (sbatch of the run's batch script) is exercised end to end on a real SLURM (test_cluster_real)
    action = draw(st.sampled_from([kind for kind in ActionKind if kind is not ActionKind.RESUBMIT]))
    extra = draw(overrides()) if action is ActionKind.RESTART_WITH_OVERRIDES else []
    return Proposal(
        action=action,
        addresses=draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)),
        claim=LogClaim(file="logs/attempt_1/trainer.log", line=13, text=draw(st.text(max_size=40))),
        rationale=draw(st.text(max_size=80)),  # free text: must never reach the command
        resume_step=10,
        overrides=extra,
    )


findings = st.lists(
    st.builds(
        Finding,
        id=st.sampled_from(IDS),
        severity=st.sampled_from(list(Severity)),
        category=st.sampled_from(list(Category)),
        summary=st.text(max_size=60),
    ),
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    proposal=proposals(),
    found=findings,
    rounds=st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=2, max_size=2),
    withdraw=st.booleans(),
    person=st.booleans(),
)
def test_sent_iff_unanimous_review_and_a_person_and_always_the_built_command(
    tmp_path_factory, proposal, found, rounds, withdraw, person
):
    run_dir = _crashed_run(tmp_path_factory)
    run = discover_run(run_dir)
    pane = FakePane(busy="python" if proposal.action is ActionKind.STOP else None)
    reviewers = [Scripted(i, rounds) for i in range(3)]
    observation = Observation(now=_crashed_run.clock, offline=False, live=LiveProbes(processes=[]))

    def collector(state):
        return {"observation": observation, "config": CONFIG}

    def diagnostician(state):
        if revising(state):
            return {"proposal": None if withdraw else state.out.proposal.model_copy(update={"revision": 1})}
        return {"findings": found, "proposal": proposal}

    with tempfile.TemporaryDirectory() as journal_dir:
        nodes = Nodes(
            collector=typed_node(collector),
            diagnostician=typed_node(diagnostician),
            writer=lambda state: {},
            team_review=make_team_review(
                ReviewDeps(reviewers=reviewers, planning=PlanDeps(target=TmuxTarget(), launch_command=shlex.join(LAUNCH)))
            ),
            launcher=make_launcher(
                LauncherDeps(
                    journal_dir=Path(journal_dir),
                    run_key="prop",
                    clock=FakeClock(_crashed_run.clock),
                    verify_timeout_s=0,
                    write=False,
                    open_pane=FakeTmux(pane),
                    processes=FakeProcesses(),
                )
            ),
        )
        graph = build_graph(nodes, InMemorySaver())
        config = {"configurable": {"thread_id": "t"}}
        start = CheckinState(run=run, checkin=1, gate=Gate(mode=ApprovalMode.ASK))
        result = graph.invoke(start, config)
        asked = bool(result.get("__interrupt__"))
        if asked:
            decision = Decision(approved=person, by="property", at=_crashed_run.clock)
            result = graph.invoke(Command(resume=decision.model_dump(mode="json")), config)
    state = CheckinState.model_validate(result)

    final = state.out.reviews[-1]
    agreed = final.agreed and state.out.proposal is not None
    assert asked == agreed  # the gate is reached only with unanimity
    assert bool(pane.sent) == (agreed and person)
    if not pane.sent:
        return
    assert len(pane.sent) == 1
    if proposal.action is ActionKind.STOP:
        assert pane.sent == [("key", "C-c")]
        return
    expected = build_argv(
        LAUNCH,
        layout="H",
        run_dir=run.run_dir,
        run_name=run.name,
        resume_step=10,
        overrides=state.out.proposal.overrides,
        max_steps=100,
    )
    assert pane.sent == [("line", command_line(expected))]
    assert shlex.split(pane.sent[0][1]) == expected
    assert state.out.launch.sent == command_line(expected)


def _crashed_run(factory):
    """One crashed run dir with complete checkpoints 5 and 10, shared by every example."""
    if not hasattr(_crashed_run, "dir"):
        run = crashed_h_run(factory.mktemp("property"))
        _crashed_run.dir, _crashed_run.clock = run.dir, run.clock
    return _crashed_run.dir
