"""Multi-node runs as rlagent reads them: the per-node and per-rank log files of prime-rl's
multi-node tree, and what was seen of the processes on a SLURM job's nodes. tools/multinode.py and
tools/slurm_probe.py fill these; nothing here reads a file or runs a command."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Role = Literal["trainer", "inference", "router"]


class TreeFile(BaseModel):
    """One file of the multi-node log tree and how far it got."""

    file: str
    """Path relative to the run dir (through the attempt, resolved)."""
    role: Role
    node: int | None = None
    """`node_<k>.log`; for a torchrun rank file, the index of its torchrun dir (one per node)."""
    rank: int | None = None
    """Local rank of a torchrun per-rank file; the replica of a router log."""
    stream: str | None = None
    """`stdout` or `stderr` for a rank file."""
    step: int | None = None
    """Newest step line seen in it."""
    last_time: datetime | None = None
    """Time of its newest dated line (UTC)."""
    errors: int = 0
    """Error records read from it so far in this attempt (tracebacks, ERROR lines)."""

    def label(self) -> str:
        """`trainer node 1`, `trainer node 0 rank 3 (stderr)`, `inference router 0`."""
        if self.role == "router":
            return f"inference router {self.rank if self.rank is not None else '?'}"
        text = f"{self.role} node {self.node if self.node is not None else '?'}"
        if self.rank is not None:
            text += f" rank {self.rank}"
        if self.stream:
            text += f" ({self.stream})"
        return text


class MultiNodeView(BaseModel):
    """The multi-node tree of the current attempt (None on the observation when it has none)."""

    files: list[TreeFile] = Field(default_factory=list)
    total_files: int = 0
    """Files found, including any beyond the bound that were not read."""
    bytes_read: int = 0

    def nodes(self, role: Role) -> list[int]:
        return sorted({f.node for f in self.files if f.role == role and f.node is not None})


class NodeProcesses(BaseModel):
    """The PRIME-RL processes seen on one node of a SLURM job."""

    node: str
    via: Literal["srun", "ssh"]
    ok: bool
    titles: list[str] = Field(default_factory=list)
    """`PRIME-RL::Trainer`, ... (process titles only; never arguments)."""
    note: str = ""
