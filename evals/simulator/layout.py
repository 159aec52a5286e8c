"""Where each file of a run lives, per layout (formats doc section 3).

H (Aug 2026): `logs/attempt_N/{trainer,orchestrator,inference}.log`, `logs/latest -> attempt_N`,
`envs/train/<env>.log`, `metrics.jsonl`, `checkpoints/step_N/{trainer,orchestrator}`,
`broadcasts/step_N`, `rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`.
L (May 2026): `logs/*.log`, `logs/envs/train/<env>/{env_server,env_worker_0}.log`, `checkpoints/step_N/trainer`,
`weights/step_N`, and the orchestrator's `run_default/{checkpoints,broadcasts,rollouts}`.

Log writers address *streams* (`trainer`, `orchestrator`, `inference`, `metrics`, `env:<name>`);
only this module knows the paths behind them.
"""

from __future__ import annotations

import os
from pathlib import Path


class RunPaths:
    def __init__(self, root: Path, layout: str, attempt: int = 1, job_log: str | None = None) -> None:
        self.root = Path(root)
        self.layout = layout
        self.attempt = attempt
        self.job_log = job_log
        """SLURM: the launcher's output file (`job_<id>.log`); a local launcher prints to its terminal."""

    @property
    def logs(self) -> Path:
        return self.root / "logs" / f"attempt_{self.attempt}" if self.layout == "H" else self.root / "logs"

    @property
    def orch_root(self) -> Path:
        """Where the orchestrator writes its own artifacts (L: `run_default/`)."""
        return self.root if self.layout == "H" else self.root / "run_default"

    def stream(self, name: str) -> Path | None:
        """The file a stream goes to; None for the launcher of a local run (its terminal)."""
        if name == "launcher":
            return self.root / self.job_log if self.job_log else None
        if name == "metrics":
            if self.layout != "H":
                raise ValueError("layout L writes no metrics.jsonl")
            return self.root / "metrics.jsonl"
        if name.startswith(("env:", "envw:")):
            env = name.split(":", 1)[1]
            if self.layout == "H":
                return self.logs / "envs" / "train" / f"{env}.log"
            # L: the server and its worker each have a file (verifiers v0)
            file = "env_worker_0.log" if name.startswith("envw:") else "env_server.log"
            return self.logs / "envs" / "train" / env / file
        return self.logs / f"{name}.log"

    def ckpt_trainer(self, n: int) -> Path:
        return self.root / "checkpoints" / f"step_{n}" / "trainer"

    def ckpt_orchestrator(self, n: int) -> Path:
        return self.orch_root / "checkpoints" / f"step_{n}" / "orchestrator"

    def broadcast(self, n: int) -> Path:
        return self.orch_root / "broadcasts" / f"step_{n}"

    def weights(self, n: int) -> Path:
        return self.root / "weights" / f"step_{n}"

    def rollouts(self, n: int) -> Path:
        return self.orch_root / "rollouts" / f"step_{n}"

    def prepare(self) -> None:
        """Create the log directory and, in H, the relative `logs/latest` symlink."""
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.layout == "H":
            latest = self.root / "logs" / "latest"
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            os.symlink(f"attempt_{self.attempt}", latest)
