"""A small write-ahead record of what rlagent is about to send and has sent, per check-in.

The launcher node re-runs from its first line when a check-in is resumed (LangGraph), and the
monitor may die between typing a command and saving its checkpoint. The record, written before
the keys go out, makes the send happen at most once: a re-run finds it and only verifies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def path_for(directory: Path, checkin: int) -> Path:
    return directory / "dispatch" / f"checkin-{checkin}.json"


def recall(directory: Path, checkin: int) -> dict[str, Any] | None:
    try:
        data = json.loads(path_for(directory, checkin).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record(directory: Path, checkin: int, data: dict[str, Any]) -> None:
    """Atomically replace the record (write, fsync, rename)."""
    path = path_for(directory, checkin)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
