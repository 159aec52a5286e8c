"""Wiring of the check-in graph. Nodes live in rlagent.agents; routers here are pure functions.

collector -> [launch_probe] -> diagnostician -> [team_review] -> writer -> [launcher]
                                    ^----- once, when rejected ---'
- team_review runs only when a proposal exists; a rejection goes back to the diagnostician once
  (revise or withdraw); a second rejection ends it.
- launcher (the `interrupt()` gate) runs only for a proposal the review team agreed on, with a
  command built, when the check-in's gate asks a person (not `--approve never`, not offline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from langgraph.graph import END, START, StateGraph

from rlagent.models.actions import ApprovalMode
from rlagent.models.state import CheckinState

Node = Callable[[CheckinState], dict]
MAX_REVIEW_ROUNDS = 2
"""A proposal and one revision."""


def route_after_diagnosis(state: CheckinState) -> Literal["team_review", "writer"]:
    """A proposal goes to the review team first; everything else straight to the writer."""
    return "team_review" if state.out.proposal is not None else "writer"


def route_after_review(state: CheckinState) -> Literal["diagnostician", "writer"]:
    """Agreed, or rejected twice: write it down. Rejected once: the diagnostician may revise."""
    last = state.out.reviews[-1] if state.out.reviews else None
    if last is None or last.agreed or len(state.out.reviews) >= MAX_REVIEW_ROUNDS:
        return "writer"
    return "diagnostician"


def route_after_writer(state: CheckinState) -> Literal["launcher", "__end__"]:
    """Only an agreed proposal with an exact command goes to the gate, and only when it asks."""
    last = state.out.reviews[-1] if state.out.reviews else None
    agreed = (
        state.out.proposal is not None
        and last is not None
        and last.agreed
        and last.proposal == state.out.proposal
        and last.plan.send is not None
    )
    return "launcher" if agreed and state.gate.mode is ApprovalMode.ASK else "__end__"


@dataclass(frozen=True)
class Nodes:
    collector: Node
    diagnostician: Node
    writer: Node
    team_review: Node | None = None
    launcher: Node | None = None
    launch_probe: Node | None = None
    """Live check-ins: remembers the run's launch command while its processes are alive."""


def build_graph(nodes: Nodes, checkpointer=None):
    graph = StateGraph(CheckinState)
    graph.add_node("collector", nodes.collector)
    graph.add_node("diagnostician", nodes.diagnostician)
    graph.add_node("writer", nodes.writer)
    graph.add_edge(START, "collector")
    if nodes.launch_probe is not None:
        graph.add_node("launch_probe", nodes.launch_probe)
        graph.add_edge("collector", "launch_probe")
        graph.add_edge("launch_probe", "diagnostician")
    else:
        graph.add_edge("collector", "diagnostician")
    review = "writer"
    if nodes.team_review is not None:
        graph.add_node("team_review", nodes.team_review)
        graph.add_conditional_edges("team_review", route_after_review, {"diagnostician": "diagnostician", "writer": "writer"})
        review = "team_review"
    # Without a review node a proposal cannot be acted on: it is only written down.
    graph.add_conditional_edges("diagnostician", route_after_diagnosis, {"team_review": review, "writer": "writer"})
    launcher = END
    if nodes.launcher is not None:
        graph.add_node("launcher", nodes.launcher)
        graph.add_edge("launcher", END)
        launcher = "launcher"
    graph.add_conditional_edges("writer", route_after_writer, {"launcher": launcher, "__end__": END})
    return graph.compile(checkpointer=checkpointer)
