"""Tiny H/L run directories written line by line, for tests that control every byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import loguru_line, set_mtime

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


class HRun:
    def __init__(self, root: Path, name: str = "reverse-text-run", max_steps: int = 100) -> None:
        self.dir = root / name
        (self.dir / "configs").mkdir(parents=True)
        (self.dir / "configs" / "trainer.json").write_text(
            json.dumps({"max_steps": max_steps, "model": {"name": "Qwen/Qwen3-0.6B", "seq_len": 2048}, "ckpt": {"interval": 10}})
        )
        (self.dir / "configs" / "orchestrator.json").write_text(
            json.dumps(
                {
                    "max_steps": max_steps,
                    "batch_size": 64,
                    "group_size": 8,
                    "seq_len": 2048,
                    "train": {"sampling": {"max_completion_tokens": 512, "temperature": 1.0}},
                }
            )
        )
        self.attempt = 0
        self.step = 0
        self.clock = START
        self.new_attempt()

    @property
    def logs(self) -> Path:
        return self.dir / "logs" / f"attempt_{self.attempt}"

    def new_attempt(self) -> None:
        self.attempt += 1
        self.logs.mkdir(parents=True)
        latest = self.dir / "logs" / "latest"
        if latest.is_symlink():
            latest.unlink()
        latest.symlink_to(f"attempt_{self.attempt}")

    def _append(self, name: str, text: str) -> None:
        path = self.logs / name
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
        set_mtime(path, self.clock)

    def log(self, name: str, level: str, message: str) -> None:
        prefix = "[trainer0]:" if name == "trainer.log" else ""
        self._append(name, loguru_line(self.clock.strftime("%H:%M:%S"), level, message, prefix))

    def steps(
        self, count: int, *, reward=lambda s: 0.3 + 0.002 * s, entropy=lambda s: 0.5, loss="0.0012", step_seconds: int = 40
    ) -> None:
        for _ in range(count):
            self.step += 1
            s = self.step
            self.clock += timedelta(seconds=step_seconds)
            self.log(
                "trainer.log",
                "SUCCESS",
                f"Step {s} |   38.9s | Loss {loss} | Entropy {entropy(s):.4f} | Mismatch KL 0.0008 | "
                f"Grad. Norm 0.2143 | LR 3.00e-06 | Throughput 10432 tokens/s | MFU 12.1% | Peak Mem. 31.7 GiB",
            )
            self.log(
                "orchestrator.log",
                "SUCCESS",
                f"Step {s} |   41.2s | Reward {reward(s):.4f} | Trainable 112/128 (87.5%) | Turns 1.0 | Branches 1.0 | "
                f"Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | Truncation 3.1%",
            )

    def status(self) -> str:
        path = self.dir / "STATUS.md"
        return path.read_text() if path.exists() else ""
