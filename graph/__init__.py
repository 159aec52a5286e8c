"""The check-in graph: state models, wiring, and the runner.

LangGraph reads LANGGRAPH_STRICT_MSGPACK at import: with it, the checkpointer allow-lists the
state's own model types instead of warning on every load (reference/library-notes.md).
"""

import os

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
