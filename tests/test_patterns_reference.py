"""Every WARNING/ERROR template of prime-rl-formats.md section 7, classified.

One row per template of section 7 (launcher, sbatch, crash, orchestrator with its hang-diagnosis
INFO lines and the layout-L ones, trainer, inference, env server, pathing), rendered with example
values where the reference has placeholders (its `…` kept as written): the event kind the rules
judge, or None for "not an event". A few real layout-L texts that section 7 does not list (read
from prime-rl 7f7ce8a) follow. The normal things that look alarming (findings.md) must not raise
a warning once the rules judge them in a healthy run.

The simulator half: every WARNING/ERROR line the prime-rl simulator writes is one of these
templates, so the rules cannot learn a message prime-rl never prints.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from test_rules import ev, healthy

from rlagent.evals.simulator import SCENARIOS, write_run
from rlagent.models.run import Severity
from rlagent.tools.loglines import clean
from rlagent.tools.patterns import classify

URL = "http://localhost:8000/v1"

# (section, level, line, expected kind or None)
SECTION_7: list[tuple[str, str, str, str | None]] = [
    # Launcher (entrypoints/rl.py)
    ("launcher", "ERROR", "Error: Trainer failed with exit code 1", "crash"),
    ("launcher", "ERROR", "Error: Orchestrator failed with exit code 1", "crash"),
    ("launcher", "ERROR", "Error: Inference failed with exit code 1", "crash"),
    ("launcher", "ERROR", "Error: Train env server reverse-text failed with exit code 1", "crash"),
    ("launcher", "ERROR", "Error: Trainer failed with exit code -9", "host_oom"),  # a signal: the OOM killer
    ("launcher", "ERROR", "Terminating all processes...", "signal"),
    ("launcher", "ERROR", "Orchestrator failed with exit code 1", "crash"),
    ("launcher", "ERROR", "Trainer failed with exit code 1", "crash"),
    ("launcher", "WARNING", "Received SIGTERM, terminating all processes...", "signal"),
    ("launcher", "WARNING", "Received interrupt signal, terminating all processes...", "signal"),
    ("launcher", "ERROR", "Error occurred: boom", None),
    ("launcher", "ERROR", "sbatch failed: sbatch: error: Batch job submission failed", None),
    ("launcher", "SUCCESS", "Training finished!", "finished"),
    ("launcher", "SUCCESS", "RL training finished!", "finished"),  # L
    # sbatch (multi-node)
    (
        "sbatch",
        "INFO",
        "[gpu-node-03] trainer exited with code 1 - waiting up to 3600s for in-flight checkpoints to flush before teardown",
        None,
    ),
    ("sbatch", "INFO", "[gpu-node-03] tearing down (exit code 1) - terminating remaining processes", "crash"),
    # Any crash (utils/utils.py:clean_exit; torchrun)
    ("crash", "ERROR", "Fatal error in train", "crash"),
    ("crash", "ERROR", "Fatal error in run_orchestrator", "crash"),
    ("crash", "ERROR", "Fatal error in run_server", "crash"),
    ("crash", "INFO", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "crash"),
    # Orchestrator
    (
        "orchestrator",
        "WARNING",
        "Step 12: empty train batch after 260 finalized episodes (consecutive empty batches: 2/10)",
        "empty_batch",
    ),
    (
        "orchestrator",
        "WARNING",
        "Only 3/64 effective traces are trainable (4.7%) — consider reviewing task difficulty",
        "few_trainable",
    ),
    (
        "orchestrator",
        "WARNING",
        "No admitted train payload after 512 finalized units (consecutive zero-output batch equivalents: 2/10)",
        "empty_batch",
    ),
    (
        "orchestrator",
        "WARNING",
        "Trace failed in group 5c1e9f0a (reverse-text) — TimeoutError: episode exceeded 600.0s",
        "env_error",
    ),
    (
        "orchestrator",
        "WARNING",
        "Episode task failed in group 5c1e9f0a (reverse-text): RuntimeError('TimeoutError: episode exceeded 600.0s')",
        "env_error",
    ),
    ("orchestrator", "WARNING", "Empty trajectory in group 5c1e9f0a (reverse-text)", "env_error"),
    ("orchestrator", "WARNING", "No trainable samples (error=True, stop=None, num_turns=0).", None),
    (
        "orchestrator",
        "WARNING",
        "Cancelled 12 train episodes past max_off_policy_steps=8. Consider increasing it to avoid this.",
        "off_policy_drop",
    ),
    (
        "orchestrator",
        "WARNING",
        "Dropped 4 queued traces past max_off_policy_steps=8. Consider increasing it to avoid this.",
        "off_policy_drop",
    ),
    ("orchestrator", "WARNING", "Eval @ step=50 env=reverse-text: no episodes returned, skipping log", None),
    ("orchestrator", "WARNING", "Trainer did not broadcast v199 within 1200s — shutting down anyway", "broadcast_timeout"),
    (
        "orchestrator",
        "WARNING",
        "Orchestrator shutdown did not complete within 300s; forcing process exit. Training artifacts are already persisted.",
        None,
    ),
    (
        "orchestrator",
        "WARNING",
        f"Inference server was not reached after 30 seconds (Error: ConnectError: All connection attempts failed) on {URL}",
        "inference_unreachable",
    ),
    ("orchestrator", "ERROR", "Inference server is not ready after 1800 seconds. Aborting...", "inference_abort"),
    # Orchestrator hang-diagnosis INFO lines
    (
        "orchestrator-info",
        "INFO",
        "Orchestrator paused: waiting for trainer to broadcast checkpoint 12. Training is progressing normally.",
        "paused_normal",
    ),
    ("orchestrator-info", "INFO", "Holding batch 14 until the trainer publishes policy v12 (currently v11)", None),
    ("orchestrator-info", "INFO", "Pausing dispatcher to prevent orchestrator from racing from trainer. …", None),
    ("orchestrator-info", "INFO", "Resuming dispatcher", None),
    ("orchestrator-info", "INFO", "Saving checkpoint at step 50", None),
    ("orchestrator-info", "INFO", "Resuming orchestrator from checkpoint step 50", "resumed"),
    ("orchestrator-info", "INFO", "… — draining pipeline (…)", None),
    ("orchestrator-info", "SUCCESS", "Orchestrator finished.", "finished"),
    # Orchestrator, L only (scheduler.py, orchestrator.py at 7f7ce8a)
    (
        "orchestrator-L",
        "INFO",
        "Orchestrator paused: waiting for trainer process to complete checkpoint 12 (>1 step(s) ahead). "
        "Training is progressing normally.",
        "paused_normal",
    ),
    ("orchestrator-L", "INFO", "Orchestrator resumed: checkpoint 12 ready (after 3.20s)", None),
    (
        "orchestrator-L",
        "WARNING",
        "Rollout error in group 17 (reverse-text), re-scheduling (3/8 complete): TimeoutError('episode exceeded 600.0s')",
        "env_error",
    ),
    (
        "orchestrator-L",
        "WARNING",
        "Dropping group 17 (reverse-text) after 3 failed dispatch rounds (3/8 complete). Last failure: "
        "RuntimeError('sandbox exited unexpectedly (exit code 137)'). Set orchestrator.max_error_reschedule_attempts "
        "higher (or to None) to retry more aggressively.",
        "env_error",
    ),
    ("orchestrator-L", "WARNING", "Detected busy event loop. …", None),
    (
        "orchestrator-L",
        "WARNING",
        "Attempt 1/3 at step 14 filtered out all 64 rollouts - retrying batch generation",
        "empty_batch",
    ),
    ("orchestrator-L", "ERROR", "Attempt 3/3 at step 14 filtered out all 64 rollouts - crashing orchestrator", "empty_batch"),
    # Trainer
    ("trainer", "INFO", "Resuming training from checkpoint step 50", "resumed"),
    ("trainer", "INFO", "Starting from step 51 (total_tokens=1234567, total_samples=12800)", None),
    ("trainer", "SUCCESS", "RL trainer finished!", "finished"),
    (
        "trainer",
        "WARNING",
        "Did not find local dataloader checkpoint at path outputs/r/checkpoints/step_50/trainer/dataloader/rank_1.pt. "
        "This might be because you tried restarting the trainer with a different world size. Falling back to using "
        "the master rank's dataloader checkpoint. Note, that this may cause training inconsistencies.",
        None,
    ),
    (
        "trainer",
        "WARNING",
        "No NVLink detected, disabling NCCL P2P and SHM transports. Set NCCL_P2P_DISABLE=0 and NCCL_SHM_DISABLE=0 to override.",
        "no_nvlink",
    ),
    (
        "trainer",
        "WARNING",
        "Failed to remove outputs/r/checkpoints/step_10: [Errno 39] Directory not empty, skipping cleanup",
        None,
    ),
    # Inference
    ("inference", "ERROR", "Router exited with code 1 - shutting down", None),
    # Env server (verifiers v1)
    ("env-server", "INFO", "EnvServerPool up: address=tcp://127.0.0.1:5600 workers=4/4 multiplex=1 elastic=False", None),
    ("env-server", "INFO", "EnvServer up: taskset=reverse-text address=tcp://127.0.0.1:5600", None),
    ("env-server", "WARNING", "request failed: sandbox exited unexpectedly (exit code 137)", "env_error"),
    # Pathing (utils/pathing.py)
    ("pathing", "WARNING", "No checkpoints found in outputs/r/checkpoints. Starting from scratch.", None),
    ("pathing", "INFO", "Found latest checkpoint in outputs/r/checkpoints: 50", None),
    ("pathing", "WARNING", "Cleaning existing directory: outputs/r/rollouts", None),
    (
        "pathing",
        "ERROR",
        "FileExistsError: Run directory 'outputs/r' already contains artifacts from a previous run. …",
        None,
    ),
    # Section 2: metrics.jsonl drops non-finite values with a WARNING
    (
        "metrics",
        "WARNING",
        "Dropping 2 non-finite value(s) from metrics.jsonl: loss/mean, optim/grad_norm",
        "nonfinite_dropped",
    ),
]

# Real layout-L texts section 7 does not list (prime-rl 7f7ce8a; verifiers 58b119f for the worker).
L_EXTRAS: list[tuple[str, str, str, str | None]] = [
    ("scheduler.py:524", "WARNING", "Rollout failed: ZMQ request timed out", "env_error"),
    (
        "scheduler.py:470",
        "WARNING",
        "Empty trajectory in group 17 (reverse-text), re-scheduling (3/8 complete)",
        "env_error",
    ),
    (
        "scheduler.py:395",
        "WARNING",
        "Cancelled 6 old rollout requests (will refill naturally). Consider increasing max_off_policy_steps to avoid this.",
        "off_policy_drop",
    ),
    (
        "orchestrator.py:452",
        "WARNING",
        "Only 3/64 rollouts in the batch are trainable (4.7%) - this can mean the tasks are too easy or too hard for "
        "the model, consider reviewing the task difficulty of your environment(s)",
        "few_trainable",
    ),
    (
        "trainer/multi_ckpt.py:161",
        "ERROR",
        "Error checkpointing run 0: OSError: [Errno 28] No space left on device",
        "ckpt_error",
    ),
]


@pytest.mark.parametrize(("section", "level", "line", "kind"), SECTION_7 + L_EXTRAS, ids=lambda v: str(v)[:60])
def test_every_reference_template_is_classified(section, level, line, kind):
    assert classify(line, level)[0] == kind


def test_the_table_covers_every_part_of_section_7():
    assert {row[0] for row in SECTION_7} >= {
        "launcher",
        "sbatch",
        "crash",
        "orchestrator",
        "orchestrator-info",
        "orchestrator-L",
        "trainer",
        "inference",
        "env-server",
        "pathing",
    }


# --- the normal things that look alarming (findings.md) -----------------------------------------


def test_normal_but_alarming_lines_raise_no_warning():
    run = healthy(3)
    normal = [
        ("Orchestrator paused: waiting for trainer to broadcast checkpoint 120. Training is progressing normally.", "INFO"),
        (
            "Orchestrator paused: waiting for trainer process to complete checkpoint 150 (>1 step(s) ahead). "
            "Training is progressing normally.",
            "INFO",
        ),
        (
            "No NVLink detected, disabling NCCL P2P and SHM transports. "
            "Set NCCL_P2P_DISABLE=0 and NCCL_SHM_DISABLE=0 to override.",
            "WARNING",
        ),
        ("Failed to remove outputs/r/checkpoints/step_10: [Errno 39] Directory not empty, skipping cleanup", "WARNING"),
        ("Cancelled 4 train episodes past max_off_policy_steps=8. Consider increasing it to avoid this.", "WARNING"),
    ]
    for i, (message, level) in enumerate(normal):
        kind, numbers = classify(message, level)
        step = 120 + 10 * i
        run.events.append(ev(kind, message, line=200 + i, step=step, time=run.time_of(step), numbers=tuple(numbers), level=level))
    # start-up: vLLM still loading before the first step
    for i in range(5):
        message = f"Inference server was not reached after {10 * (i + 1)} seconds (Error: ConnectError) on {URL}"
        kind, numbers = classify(message, "WARNING")
        run.events.append(ev(kind, message, line=30 + i, time=run.time_of(0) - timedelta(minutes=5 - i), numbers=tuple(numbers)))
    # a few failed episodes (< 5 %): 256 rollouts a step, 2 failures on a handful of steps
    for step in (150, 163, 177, 190):
        for j in range(2):
            message = f"Rollout error in group {step * 10 + j} (reverse-text), re-scheduling (3/8 complete): TimeoutError('x')"
            kind, numbers = classify(message, "WARNING")
            run.events.append(ev(kind, message, line=step * 10 + j, step=step, time=run.time_of(step), numbers=tuple(numbers)))
    findings = run.findings()
    assert [f.id for f in findings.values() if f.severity != Severity.INFO] == []


# --- the simulator prints only real templates ----------------------------------------------------

# Every WARNING/ERROR head the prime-rl simulator may write (masked numbers/ids), as regexes of
# the templates above; anything else is a message prime-rl never prints.
_ID = r"[0-9a-f]{8}|\d+"
REAL_TEMPLATES = [
    r"Error: (Trainer|Orchestrator|Inference|Train env server \S+) failed with exit code -?\d+",
    r"Terminating all processes\.\.\.",
    r"Received (SIGTERM|interrupt signal), terminating all processes\.\.\.",
    r"Fatal error in (train|run_orchestrator|run_server)",
    rf"Trace failed in group ({_ID}) \(\S+\) — \w+: .+",
    rf"Episode task failed in group ({_ID}) \(\S+\): \w+\(.+\)",
    rf"Empty trajectory in group ({_ID}) \(\S+\)(, re-scheduling \(\d+/\d+ complete\))?",
    rf"Rollout error in group ({_ID}) \(\S+\), re-scheduling \(\d+/\d+ complete\): \w+\(.+\)",
    rf"Dropping group ({_ID}) \(\S+\) after \d+ failed dispatch rounds \(\d+/\d+ complete\)\. Last failure: .+\. "
    r"Set orchestrator\.max_error_reschedule_attempts higher \(or to None\) to retry more aggressively\.",
    r"Step \d+: empty train batch after \d+ finalized episodes \(consecutive empty batches: \d+/10\)",
    r"No admitted train payload after \d+ finalized units \(consecutive zero-output batch equivalents: \d+/10\)",
    r"Attempt \d+/3 at step \d+ filtered out all \d+ rollouts - retrying batch generation",
    r"Only \d+/\d+ effective traces are trainable \(\d+\.\d%\) — consider reviewing task difficulty",
    r"Cancelled \d+ train episodes past max_off_policy_steps=\d+\. Consider increasing it to avoid this\.",
    r"Dropped \d+ queued traces past max_off_policy_steps=\d+\. Consider increasing it to avoid this\.",
    r"Cancelled \d+ old rollout requests \(will refill naturally\)\. Consider increasing max_off_policy_steps to avoid this\.",
    r"Inference server was not reached after \d+ seconds \(Error: .+\) on \S+",
    r"Inference server is not ready after \d+ seconds\. Aborting\.\.\.",
    r"No NVLink detected, disabling NCCL P2P and SHM transports\. .+",
    r"Dropping \d+ non-finite value\(s\) from metrics\.jsonl: .+",
    r"request failed: .+",
    r"Aborted rollout due to \w+\(.+\)",  # verifiers v0 (L) env worker, environment.py
]
_HEAD = re.compile(r"^\d\d:\d\d:\d\d +(WARNING|ERROR) (.*)$")
"""A loguru record of prime-rl or verifiers (vLLM's and torch's own lines have other shapes)."""


def _heads(run: Path) -> set[str]:
    out = set()
    for path in run.rglob("*.log"):
        for raw in path.read_bytes().splitlines():
            match = _HEAD.match(clean(raw))
            if match:
                out.add(match.group(2))
    return out


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("alarming-normal-h", "H"),
        ("alarming-normal-l", "L"),
        ("env-errors-l", "H"),
        ("env-errors-l", "L"),
        ("empty-batches-h", "H"),
        ("empty-batches-h", "L"),
        ("off-policy-drops-h", "H"),
        ("off-policy-drops-h", "L"),
        ("checkpoint-failure-h", "H"),
        ("checkpoint-failure-h", "L"),
        ("inference-unreachable-h", "H"),
        ("crash-python-l", "L"),
        ("nan-h", "H"),
    ],
)
def test_the_simulator_writes_only_real_templates(tmp_path, name, layout):
    sc = SCENARIOS[name].variant(layout=layout, batch_size=64, group_size=8, eval_examples=8)
    heads = _heads(write_run(sc, tmp_path / "run"))
    invented = sorted(h for h in heads if not any(re.fullmatch(t, h) for t in REAL_TEMPLATES))
    assert invented == []
