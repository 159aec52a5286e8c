"""The launcher node: shows a person the exact command and, only on their approval, types it into
the run's tmux `Launcher` pane, verifies the run came back, and appends a follow-up entry.

One job per module:

deps.py       what the node is given: the journal dir, the clock, the STATUS.md sink, the
              process probe and the pane opener (fakes in tests)
gate.py       the node: the approval request, LangGraph `interrupt()` and the person's decision
dispatch.py   the send: preconditions re-checked at send time, at most once (write-ahead journal)
verify.py     whether a restart came back or a stop stopped, polled within a bounded time
followup.py   the follow-up STATUS.md entry, through the same sink as the writer node's entries

The text a person reads to decide is rendered by rlagent.tools.approval.render_request (the CLI
imports it from there, with the yes/no prompt; not from this node).
"""

from rlagent.agents.launcher.deps import LauncherDeps
from rlagent.agents.launcher.gate import make_launcher

__all__ = ["LauncherDeps", "make_launcher"]
