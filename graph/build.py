"""Wiring of the check-in graph. Nodes live in rlagent.agents; routers here are pure functions.

collector -> diagnostician -> [team_review] -> writer -> [launcher]
The review and launcher nodes arrive with their own issue; until a proposal exists the
routers send every check-in past them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from langgraph.graph import END, START, StateGraph

from rlagent.graph.state import CheckinState

Node = Callable[[CheckinState], dict]


def route_after_diagnosis(state: CheckinState) -> Literal["team_review", "writer"]:
    """A proposal goes to the review team first; everything else straight to the writer."""
    return "team_review" if state.proposal is not None else "writer"


def route_after_writer(state: CheckinState) -> Literal["launcher", "__end__"]:
    """Only a proposal the review team agreed on goes on to the (gated) launcher."""
    proposal = state.proposal or {}
    return "launcher" if proposal.get("review_agreed") is True else "__end__"


@dataclass(frozen=True)
class Nodes:
    collector: Node
    diagnostician: Node
    writer: Node
    team_review: Node | None = None
    launcher: Node | None = None


def build_graph(nodes: Nodes, checkpointer=None):
    graph = StateGraph(CheckinState)
    graph.add_node("collector", nodes.collector)
    graph.add_node("diagnostician", nodes.diagnostician)
    graph.add_node("writer", nodes.writer)
    graph.add_edge(START, "collector")
    graph.add_edge("collector", "diagnostician")
    review = "writer"
    if nodes.team_review is not None:
        graph.add_node("team_review", nodes.team_review)
        graph.add_edge("team_review", "writer")
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
