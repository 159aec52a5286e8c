"""The check-in graph, and nothing else: its wiring and routers (build.py), the monitor that runs
one check-in through it with the run's state store (runner.py, store.py), and the cadence loop
of `rlagent run` (cadence.py). The state models are the vocabulary (rlagent.models), the nodes
are agents (rlagent.agents).

LangGraph reads LANGGRAPH_STRICT_MSGPACK at import: with it, the checkpointer allow-lists the
state's own model types instead of warning on every load (reference/library-notes.md).
"""

import os

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
