"""`rlagent doctor RUN_DIR` (placeholder)."""

from __future__ import annotations


def doctor() -> None:
    """Check what a restart of the run would need, and say what is missing."""
