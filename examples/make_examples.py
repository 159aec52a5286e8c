"""Re-make the bundled example runs under examples/runs/ with the simulator.

    python examples/make_examples.py            # both runs, replacing what is there
    python examples/make_examples.py reverse-text-l

reverse-text-h: a healthy layout-H run (Aug 2026 prime-rl), 58 steps, with the lines that look
    alarming but are normal (inference not reached at start-up, `No NVLink detected`, periodic
    `Orchestrator paused`, a few `Trace failed in group`, one ~3x grad-norm excursion).
reverse-text-l: a layout-L run (May 2026 prime-rl) going wrong: from step 20 completions run
    into max_completion_tokens, truncation climbs past 60 % and reward erodes; L's step line has
    no Truncation field, so it shows as Seq. Length nearing seq_len and in `is_truncated`.

Both are kept small (batch 32; H keeps the last step's rollouts, L every step's) so each stays near 1 MB.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlagent.evals.simulator import SCENARIOS, Scenario, write_run

RUNS_DIR = Path(__file__).resolve().parent / "runs"

_SMALL = {"batch_size": 32, "group_size": 8, "eval_examples": 8, "eval_k": 2, "rollout_steps_kept": 1}

EXAMPLES: dict[str, Scenario] = {
    "reverse-text-h": SCENARIOS["healthy-h"].variant(name="reverse-text-h", steps=58, eval_interval=25, **_SMALL),
    # L's truncation is only on disk in the rollouts files, so this run keeps every step's, as prime-rl does.
    "reverse-text-l": SCENARIOS["truncation-l"].variant(
        name="reverse-text-l", eval_interval=25, **{**_SMALL, "batch_size": 16, "group_size": 4, "rollout_steps_kept": 60}
    ),
}


def main(names: list[str]) -> None:
    for name in names or list(EXAMPLES):
        path = write_run(EXAMPLES[name], RUNS_DIR / name, overwrite=True)
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{name}: {path} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main(sys.argv[1:])
