"""The rule-based diagnostician: each finding fires on its signature, with the right numbers,
and stays silent on a healthy noisy run and on the normal things that look alarming.

Runs are built in memory (no files): a realistic healthy GRPO run with a fixed seed, then one
condition is injected. Generalisation checks vary seed, onset and scale.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from rlagent.agents.rules import RULES, RuleContext, Thresholds, health_of, run_rules
from rlagent.agents.rules.context import noise_sd, rolling_median, streak_vs_reference, theil_sen_slope
from rlagent.models.observation import EVENTS_PER_KIND, EvalPoint, LiveProbes, LogEvent, MetricHistory, Observation, ProcessInfo
from rlagent.models.run import Category, Health, Layout, RunConfig, RunInfo, Severity
from rlagent.models.state import CheckinOutput, CheckinState, RunMemory

NOW = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
STEP_SECONDS = 40.0
ROLES = ["Launcher", "Inference", "EnvServer", "Orchestrator", "Trainer"]


def ev(
    kind: str | None,
    message: str,
    *,
    file: str = "logs/orchestrator.log",
    line: int = 100,
    step: int | None = None,
    time: datetime | None = None,
    numbers: tuple[float, ...] = (),
    level: str = "WARNING",
    detail: str = "",
) -> LogEvent:
    return LogEvent(
        file=file,
        line=line,
        time=time,
        level=level,
        message=message,
        detail=detail,
        kind=kind,
        step=step,
        numbers=list(numbers),
    )


@dataclass
class Run:
    """A run's history and observation, editable before it becomes a RuleContext."""

    n: int
    trainer: dict[int, dict[str, float]]
    orch: dict[int, dict[str, float]]
    evals: list[EvalPoint]
    events: list[LogEvent]
    config: RunConfig
    live: LiveProbes
    checkpoints: dict[int, list[str]]
    processes_seen: list[str]
    now: datetime = NOW
    new_events: list[LogEvent] = field(default_factory=list)
    step_seen_at: dict[str, datetime] = field(default_factory=dict)
    newest_line_time: datetime | None = None
    offline: bool = False
    event_counts: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)

    def time_of(self, step: int) -> datetime:
        return self.now - timedelta(seconds=(self.n - step) * STEP_SECONDS + 30)

    def set(self, process: str, metric: str, fn, steps=None) -> None:
        table = self.trainer if process == "trainer" else self.orch
        for s in steps if steps is not None else sorted(table):
            table[s][metric] = fn(s)

    def drop(self, process: str, metric: str) -> None:
        for row in (self.trainer if process == "trainer" else self.orch).values():
            row.pop(metric, None)

    def ctx(self, thresholds: Thresholds | None = None) -> RuleContext:
        early: dict[str, list[float]] = {}
        for process, table in (("trainer", self.trainer), ("orchestrator", self.orch)):
            for s in sorted(table):
                for metric, value in table[s].items():
                    values = early.setdefault(f"{process}/{metric}", [])
                    if math.isfinite(value) and len(values) < 10:
                        values.append(value)
        seen = self.step_seen_at or {
            "trainer": self.time_of(max(self.trainer)) if self.trainer else None,
            "orchestrator": self.time_of(max(self.orch)) if self.orch else None,
        }
        history = MetricHistory(
            trainer=self.trainer,
            orchestrator=self.orch,
            early=early,
            evals=self.evals,
            step_seen_at={k: v for k, v in seen.items() if v is not None},
            event_counts=self.event_counts,
        )
        observation = Observation(
            now=self.now,
            offline=self.offline,
            newest_line_time=self.newest_line_time or self.now - timedelta(seconds=5),
            trainer_step=max(self.trainer) if self.trainer else None,
            orchestrator_step=max(self.orch) if self.orch else None,
            new_events=self.new_events,
            checkpoints=self.checkpoints,
            live=self.live,
            rollouts_per_step=self.config.batch_size,
        )
        return RuleContext(
            observation=observation,
            history=history,
            events=self.events,
            config=self.config,
            thresholds=thresholds or Thresholds(),
            processes_seen=self.processes_seen,
            now=self.now,
        )

    def findings(self, thresholds: Thresholds | None = None) -> dict:
        return {f.id: f for f in run_rules(self.ctx(thresholds))}


def healthy(seed: int = 0, n: int = 200) -> Run:
    """A realistic healthy GRPO run: noisy rising reward, slowly falling entropy, single-step
    excursions, checkpoint steps that take longer, and the normal alarming-looking lines."""
    trainer, orch, evals = _healthy_series(random.Random(seed), n)
    run = Run(
        n=n,
        trainer=trainer,
        orch=orch,
        evals=evals,
        events=[],
        config=RunConfig(
            max_steps=500,
            batch_size=256,
            group_size=8,
            max_completion_tokens=2048,
            seq_len=4096,
            ckpt_interval=50,
            max_off_policy_steps=8,
        ),
        live=LiveProbes(
            processes=[ProcessInfo(pid=100 + i, title=f"PRIME-RL::{r}", role=r) for i, r in enumerate(ROLES)],
            host_ram_percent=61.0,
            disk_free_ratio=0.45,
            disk_free_gib=800.0,
            vllm={"vllm:kv_cache_usage_perc": 0.62, "vllm:num_requests_waiting": 0.0, "vllm:num_requests_running": 48},
        ),
        # Trainer and orchestrator save independently: the newest step may be half-written.
        checkpoints={150: ["trainer", "orchestrator"], n: ["trainer"]},
        processes_seen=list(ROLES),
    )
    run.events = _normal_looking_events(run)
    return run


def _healthy_series(rng: random.Random, n: int) -> tuple[dict, dict, list[EvalPoint]]:
    """Trainer and orchestrator metrics of a healthy run, step 1..n, and its evals."""
    trainer, orch = {}, {}
    for s in range(1, n + 1):
        step_time = 90.0 if s == 1 else STEP_SECONDS + rng.gauss(0, 2) + (15 if s % 50 == 0 else 0)
        trainer[s] = {
            "loss": 0.0 if s <= 2 else rng.gauss(0, 0.01),  # advantage-weighted: 0 at the first steps
            "entropy": 0.6 * (1 - 0.25 * s / n) * (1 + rng.gauss(0, 0.03)),
            "mismatch_kl": 0.0008 * rng.lognormvariate(0, 0.2),
            "grad_norm": 0.2 * rng.lognormvariate(0, 0.2) * (4.0 if s == 120 else 1.0),
            "lr": 3e-6,
            "step_time": step_time,
            "wait_for_batch": 80.0 if s == 1 else max(0.0, 4 + rng.gauss(0, 1.5)),
            "ref_kl": 0.0005 * s * rng.lognormvariate(0, 0.1),
            "ckpt_disk_free_ratio": 0.6 - 0.0005 * s,
        }
        orch[s] = {
            "reward": min(1.0, max(0.0, 0.2 + 0.45 * (1 - math.exp(-s / 100)) + rng.gauss(0, 0.05))),
            "reward_min": 0.0,
            "reward_max": 1.0,
            "trainable": min(1.0, 0.8 + rng.gauss(0, 0.05)),
            "error": rng.choice([0.0, 0.0, 0.004, 0.008, 0.02]),  # a few errored rollouts
            "cancelled": 0.0,
            "truncation": max(0.0, 0.03 + rng.gauss(0, 0.01)),  # a few truncated
            "seq_len": 900 - 0.3 * s + rng.gauss(0, 30),
            "output_tokens": 600 - 0.3 * s + rng.gauss(0, 25),
            "step_time": 60.0 if s == 1 else 38 + rng.gauss(0, 2),
            "wait_for_policy": 30.0 if s == 1 else max(0.0, 3 + rng.gauss(0, 1)),
        }
    evals = [
        EvalPoint(env="gsm8k", step=s, score=0.3 + 0.3 * (1 - math.exp(-s / 100)) + rng.gauss(0, 0.01))
        for s in range(25, n + 1, 25)
    ]
    return trainer, orch, evals


def _normal_looking_events(run: Run) -> list[LogEvent]:
    """The alarming-looking lines every healthy run has (startup `not reached`, no NVLink, a
    paused orchestrator, a few failed traces, a few cancelled episodes)."""
    t0 = run.time_of(1) - timedelta(minutes=3)
    return [
        ev(
            "inference_unreachable",
            "Inference server was not reached after 30 seconds (Error: ConnectError) on http://localhost:8000/v1",
            line=12,
            time=t0,
            numbers=(30,),
        ),
        ev(
            "no_nvlink",
            "No NVLink detected, disabling NCCL P2P and SHM transports.",
            file="logs/trainer.log",
            line=8,
            time=t0,
        ),
        ev(
            "paused_normal",
            "Orchestrator paused: waiting for trainer to broadcast checkpoint 60. Training is progressing normally.",
            line=900,
            step=61,
            time=run.time_of(61),
            level="INFO",
        ),
        *(
            ev(
                "env_error",
                "Trace failed in group 5c1e9f0a (reverse-text) — TimeoutError: sandbox timed out",
                line=1000 + s,
                step=s,
                time=run.time_of(s),
            )
            for s in (40, 90, 150, 195)
        ),
        ev(
            "off_policy_drop",
            "Cancelled 3 train episodes past max_off_policy_steps=8. Consider raising it.",
            line=1500,
            step=70,
            time=run.time_of(70),
            numbers=(3,),
        ),
    ]


def ids(run: Run, thresholds: Thresholds | None = None) -> set[str]:
    return set(run.findings(thresholds))


# --- healthy runs and the normal things that look alarming ---------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_healthy_noisy_run_raises_nothing(seed):
    run = healthy(seed)
    ctx = run.ctx()
    findings = run_rules(ctx)
    assert findings == []
    assert health_of(findings, ctx) == Health.HEALTHY


def test_healthy_run_offline_and_short_raises_nothing():
    run = healthy(3, n=60)
    run.live = LiveProbes()
    run.offline = True
    assert run.findings() == {}


def test_every_rule_is_silent_without_data():
    run = Run(
        n=0,
        trainer={},
        orch={},
        evals=[],
        events=[],
        config=RunConfig(),
        live=LiveProbes(),
        checkpoints={},
        processes_seen=[],
        offline=True,
    )
    assert run_rules(run.ctx()) == []


def test_inference_not_reached_before_first_step_is_startup():
    run = healthy(1, n=3)
    run.events = [
        ev(
            "inference_unreachable",
            "Inference server was not reached after 600 seconds (Error: ConnectError) on http://x:8000/v1",
            line=30 + i,
            time=run.time_of(0) - timedelta(minutes=10 - i),
            numbers=(600,),
        )
        for i in range(5)
    ]
    assert "inference_unreachable" not in ids(run)


def test_single_step_grad_norm_excursions_are_normal():
    run = healthy(2)
    run.set("trainer", "grad_norm", lambda s: 0.2 * 9, steps=[140])  # one step at 9x
    run.set("trainer", "grad_norm", lambda s: 0.2 * 30, steps=[170])  # one step at 30x
    run.set("trainer", "grad_norm", lambda s: 0.2 * 5, steps=[180, 181])  # two steps at 5x
    assert "grad_norm_spike" not in ids(run)


def test_a_few_errored_and_truncated_rollouts_are_normal():
    run = healthy(4)
    run.set("orchestrator", "error", lambda s: 0.045)
    run.set("orchestrator", "truncation", lambda s: 0.045)
    assert ids(run) == set()


def test_nan_reference_kl_is_normal_when_kl_is_off():
    run = healthy(5)
    run.set("trainer", "ref_kl", lambda s: math.nan)
    assert ids(run) == set()


def test_checkpoint_steps_and_evals_taking_longer_do_not_count_as_regression():
    run = healthy(0)
    run.set("trainer", "step_time", lambda s: 140.0, steps=[150, 180, 181])
    run.set("orchestrator", "step_time", lambda s: 200.0, steps=[175, 176])
    assert "step_time_regression" not in ids(run)


# --- health ---------------------------------------------------------------------------------


def crash_event(run: Run, step: int, *, minutes_after: float = 1.0) -> LogEvent:
    return ev(
        "crash",
        "Fatal error in train",
        file="logs/trainer.log",
        line=5000,
        step=step,
        time=run.time_of(step) + timedelta(minutes=minutes_after),
        level="ERROR",
        detail='Traceback (most recent call last):\n  File "train.py", line 3\nRuntimeError: boom',
    )


def test_run_crashed_is_critical_and_down_with_the_cause_line():
    run = healthy(0)
    run.events.append(crash_event(run, 200))
    run.live = LiveProbes(processes=[ProcessInfo(pid=1, title="PRIME-RL::Inference", role="Inference")])
    found = run.findings()
    crashed = found["run_crashed"]
    assert crashed.severity == Severity.CRITICAL
    assert crashed.summary == "run crashed at step 200: Fatal error in train (RuntimeError: boom)"
    assert crashed.evidence == ["logs/trainer.log:5000: Fatal error in train", "logs/trainer.log:5003: RuntimeError: boom"]
    assert found["process_down"].severity == Severity.CRITICAL
    assert health_of(run_rules(run.ctx()), run.ctx()) == Health.DOWN


def test_crash_cause_from_the_exception_line_below_it_when_the_traceback_was_cut():
    run = healthy(0)
    crash = crash_event(run, 200).model_copy(update={"detail": "Traceback (most recent call last):\n  File ..."})
    echo = ev("crash", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", file=crash.file, line=5090)
    oom = ev(
        "cuda_oom",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.92 GiB.",
        file=crash.file,
        line=5040,
        step=200,
        time=crash.time,
    )
    run.events += [echo, oom, crash]
    crashed = run.findings()["run_crashed"]
    assert crashed.summary == (
        "run crashed at step 200: Fatal error in train (torch.OutOfMemoryError: CUDA out of memory); 2 crash lines"
    )
    assert crashed.evidence[:2] == [crash.cite(), oom.cite()]


def test_orchestrator_step_seconds_after_a_trainer_crash_is_not_a_resume():
    run = healthy(0)
    crash = crash_event(run, 200, minutes_after=0.5)
    run.events.append(crash)
    # The orchestrator, a step ahead, logs one more step before the launcher tears it down.
    run.step_seen_at = {"trainer": run.time_of(200), "orchestrator": crash.time + timedelta(seconds=5)}
    assert health_of(run_rules(run.ctx()), run.ctx()) == Health.DOWN


def test_crash_then_resume_is_not_down_and_is_noted_once():
    run = healthy(0)
    crash = crash_event(run, 120)
    resumed = ev(
        "resumed",
        "Resuming training from checkpoint step 100",
        file="logs/attempt_2/trainer.log",
        line=40,
        time=crash.time + timedelta(minutes=5),
        level="INFO",
        numbers=(100,),
    )
    run.events += [crash, resumed]
    run.new_events = [crash, resumed]
    ctx = run.ctx()
    found = {f.id: f for f in run_rules(ctx)}
    assert found["run_crashed"].severity == Severity.INFO
    assert "came back" in found["run_crashed"].summary
    assert health_of(found.values(), ctx) == Health.HEALTHY
    run.new_events = []  # next check-in: the old crash is history
    assert "run_crashed" not in ids(run)


def test_crash_followed_by_new_step_lines_without_resume_line_is_not_down():
    run = healthy(0)
    run.events.append(crash_event(run, 150))  # steps 151..200 were logged after it
    ctx = run.ctx()
    assert not ctx.crashed
    assert health_of(run_rules(ctx), ctx) == Health.HEALTHY


def test_exit_code_minus_nine_is_a_crash_and_a_host_oom():
    run = healthy(0)
    run.events.append(
        ev(
            "host_oom",
            "Error: Orchestrator failed with exit code -9",
            file="job_123.log",
            line=77,
            time=run.time_of(200) + timedelta(seconds=20),
            level="ERROR",
            numbers=(-9,),
        )
    )
    found = run.findings()
    assert found["run_crashed"].severity == Severity.CRITICAL
    assert found["host_oom"].severity == Severity.CRITICAL
    assert found["host_oom"].evidence == ["job_123.log:77: Error: Orchestrator failed with exit code -9"]


@pytest.mark.parametrize(
    ("jobs", "crashed"),
    [
        ({"100": "RUNNING"}, False),
        ({"100": "FAILED", "101": "RUNNING"}, False),  # resubmitted: the newest job runs
        ({"99": "RUNNING", "100": "FAILED"}, True),
        ({"100": "CANCELLED by 0"}, False),  # a person stopped it
        ({"100": "OUT_OF_MEMORY"}, True),
    ],
)
def test_slurm_job_state(jobs, crashed):
    run = healthy(0)
    run.live.slurm = jobs
    ctx = run.ctx()
    found = {f.id: f for f in run_rules(ctx)}
    assert ("run_crashed" in found) == crashed
    assert (health_of(found.values(), ctx) == Health.DOWN) == crashed
    if crashed:
        state = jobs["100"]
        assert found["run_crashed"].summary == f"run crashed: SLURM job 100 ended {state} (last step 200)"
        assert ("host_oom" in found) == (state == "OUT_OF_MEMORY")


def test_teardown_with_exit_code_zero_is_not_a_crash():
    run = healthy(0)
    run.events.append(
        ev(
            "crash",
            "[node1] tearing down (exit code 0) - terminating remaining processes",
            file="job_1.log",
            time=run.now,
            numbers=(0,),
        )
    )
    assert "run_crashed" not in ids(run)


def test_host_ram_nearly_full_is_a_warning():
    run = healthy(0)
    run.live.host_ram_percent = 97.5
    found = run.findings()
    assert found["host_oom"].severity == Severity.WARNING
    assert "97.5%" in found["host_oom"].summary
    run.live.host_ram_percent = 90.0
    assert "host_oom" not in ids(run)


@pytest.mark.parametrize(
    ("finding_id", "kind", "message"),
    [
        ("cuda_oom", "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
        ("nccl_error", "nccl", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88)"),
    ],
)
def test_gpu_incidents_are_critical_until_the_run_comes_back(finding_id, kind, message):
    run = healthy(0)
    incident = ev(kind, message, file="logs/trainer.log", line=4242, step=200, time=run.time_of(200))
    run.events.append(incident)
    found = run.findings()[finding_id]
    assert found.severity == Severity.CRITICAL
    assert found.evidence == [f"logs/trainer.log:4242: {message}"]
    assert found.first_step == 200
    # Same line at step 100, and the run trained on to step 200: not current any more.
    run.events[-1] = incident.model_copy(update={"step": 100, "time": run.time_of(100)})
    assert finding_id not in ids(run)


def test_process_down_only_live_and_only_when_not_finished():
    run = healthy(0)
    run.live.processes = [p for p in run.live.processes if p.role != "EnvServer"]
    found = run.findings()["process_down"]
    assert found.severity == Severity.CRITICAL
    assert "EnvServer" in found.summary and "no EnvServer process found" in found.evidence
    ctx = run.ctx()
    assert health_of(run_rules(ctx), ctx) == Health.DOWN
    run.live = LiveProbes()  # offline: nothing known about processes
    assert "process_down" not in ids(run)


def test_required_processes_are_expected_on_the_first_live_checkin():
    run = healthy(0)
    run.processes_seen = []
    run.live.processes = [p for p in run.live.processes if p.role not in ("Trainer",)]
    assert "Trainer" in run.findings()["process_down"].summary


def test_finished_run_is_healthy_without_processes():
    run = healthy(0, n=120)
    run.config.max_steps = 120
    run.checkpoints = {120: ["trainer", "orchestrator"]}
    run.events.append(
        ev("finished", "RL trainer finished!", file="logs/trainer.log", line=9000, step=120, time=run.now, level="INFO")
    )
    run.live.processes = []
    run.now = run.now + timedelta(hours=2)  # long after the end: not a stall either
    run.step_seen_at = {"trainer": NOW, "orchestrator": NOW}
    ctx = run.ctx()
    findings = run_rules(ctx)
    assert [f.id for f in findings] == ["run_finished"]
    assert findings[0].severity == Severity.INFO and "step 120 of 120" in findings[0].summary
    assert health_of(findings, ctx) == Health.HEALTHY


def test_orchestrator_finished_alone_is_not_the_end_of_training():
    run = healthy(0)
    run.events.append(ev("finished", "Orchestrator finished.", step=200, time=run.now, level="INFO"))
    assert "run_finished" not in ids(run)


@pytest.mark.parametrize(("idle_minutes", "step_seconds", "stalled"), [(30, 40, True), (8, 40, False), (25, 600, False)])
def test_run_stalled_judges_against_median_step_time(idle_minutes, step_seconds, stalled):
    run = healthy(0)
    run.set("trainer", "step_time", lambda s: float(step_seconds))
    run.step_seen_at = {p: NOW - timedelta(minutes=idle_minutes) for p in ("trainer", "orchestrator")}
    found = run.findings()
    assert ("run_stalled" in found) == stalled
    if stalled:
        assert "no new step for 30 min" in found["run_stalled"].summary
        assert "limit 10 min" in found["run_stalled"].summary
        ctx = run.ctx()
        assert health_of(run_rules(ctx), ctx) == Health.DOWN


def test_stall_clock_restarts_at_a_resume():
    run = healthy(0)
    run.step_seen_at = {p: NOW - timedelta(hours=1) for p in ("trainer", "orchestrator")}
    run.events.append(ev("resumed", "Resuming training from checkpoint step 150", time=NOW - timedelta(minutes=4), level="INFO"))
    assert "run_stalled" not in ids(run)


def test_inference_unreachable_after_first_step():
    run = healthy(0)
    warning = ev(
        "inference_unreachable",
        "Inference server was not reached after 300 seconds (Error: ConnectError) on http://x:8000/v1",
        line=7000,
        step=200,
        time=run.now,
        numbers=(300,),
    )
    run.events.append(warning)
    found = run.findings()["inference_unreachable"]
    assert found.severity == Severity.WARNING
    assert "after step 200" in found.summary and "300 s" in found.summary
    # The orchestrator got past it: a blip that resolved itself.
    run.events[-1] = warning.model_copy(update={"step": 180})
    assert "inference_unreachable" not in ids(run)


def test_inference_abort_is_critical():
    run = healthy(0)
    run.events.append(
        ev(
            "inference_abort",
            "Inference server is not ready after 1800 seconds. Aborting...",
            line=20,
            time=run.now,
            level="ERROR",
        )
    )
    assert run.findings()["inference_unreachable"].severity == Severity.CRITICAL


def env_errors_at(run: Run, steps, per_step: int, *, with_step: bool = True) -> None:
    for s in steps:
        for i in range(per_step):
            run.events.append(
                ev(
                    "env_error",
                    "request failed: sandbox OOM",
                    file="logs/envs/train/code.log",
                    line=s * 100 + i,
                    step=s if with_step else None,
                    time=run.time_of(s),
                )
            )


def test_env_errors_fire_above_five_percent_of_rollouts():
    run = healthy(0)
    # 200 env-server failures of 2560 rollouts; the healthy run's one orchestrator-side line is the
    # same kind of failure seen from the other side, so it is not added to them.
    env_errors_at(run, range(191, 201), 20)
    found = run.findings()["env_errors"]
    assert found.severity == Severity.WARNING
    assert "200 failed episodes in the last 10 steps (7.8% of ~2560 rollouts" in found.summary
    assert found.last_step == 200


def test_one_failed_episode_seen_by_orchestrator_and_env_server_counts_once():
    """Each failure is logged twice: `Trace failed in group` (orchestrator) and `request failed`
    (env server). 100 failed episodes of 2560 rollouts (3.9 %) must not read as 7.8 %."""
    run = healthy(0)
    env_errors_at(run, range(191, 201), 10)  # the env server's copies
    for s in range(191, 201):
        for i in range(10):
            run.events.append(
                ev(
                    "env_error",
                    f"Trace failed in group {i:06x} (code) — TimeoutError",
                    line=s * 100 + i,
                    step=s,
                    time=run.time_of(s),
                )
            )
    run.event_counts = {"logs/orchestrator.log": {"env_error": {s: 10 for s in range(191, 201)}}}
    assert "env_errors" not in ids(run)
    run.event_counts["logs/orchestrator.log"]["env_error"] = {s: 15 for s in range(191, 201)}  # 150 = 5.9 %
    assert "150 failed episodes" in run.findings()["env_errors"].summary


def test_env_errors_by_time_when_lines_carry_no_step():
    run = healthy(0)
    env_errors_at(run, range(191, 201), 20, with_step=False)
    assert "env_errors" in ids(run)


def test_a_few_env_errors_are_normal():
    run = healthy(0)
    env_errors_at(run, range(191, 201), 4)  # 1.6 %
    assert "env_errors" not in ids(run)


def _no_batch_size(run: Run) -> None:
    """Neither a config's batch size nor a rollouts file: env failures are judged window over window."""
    run.config = run.config.model_copy(update={"batch_size": None})
    run.events = [e for e in run.events if e.kind != "env_error"]


def _orchestrator_failures(run: Run, per_step: dict[int, int]) -> None:
    """`per_step` failed episodes logged by the orchestrator at each step: every one counted per
    step, the newest EVENTS_PER_KIND kept as events (as the collector keeps them)."""
    lines = [(s, i) for s in sorted(per_step) for i in range(per_step[s])][-EVENTS_PER_KIND:]
    run.events += [
        ev("env_error", f"Trace failed in group {s:04x}{i:04x} (code)", line=s * 100 + i, step=s, time=run.time_of(s))
        for s, i in lines
    ]
    run.event_counts = {"logs/orchestrator.log": {"env_error": dict(per_step)}}


def test_a_steady_rate_of_env_failures_is_no_rise_when_the_older_window_s_events_were_not_kept():
    """8 failed episodes a step for 30 steps: the run keeps the newest 50 lines, all in the last
    10 steps, but the orchestrator counted every one: 80 against 80 is no rise."""
    run = healthy(0)
    _no_batch_size(run)
    _orchestrator_failures(run, {s: 8 for s in range(171, 201)})
    assert "env_errors" not in ids(run)


def test_env_failures_that_rise_window_over_window_are_found_by_the_orchestrator_s_counts():
    run = healthy(0)
    _no_batch_size(run)
    _orchestrator_failures(run, {**{s: 1 for s in range(171, 191)}, **{s: 8 for s in range(191, 201)}})
    assert "80 failed episodes in the last 10 steps (up from 10 in the 10 steps before)" in run.findings()["env_errors"].summary


def test_env_server_failures_without_counts_rise_only_where_the_kept_events_cover_both_windows():
    run = healthy(0)
    _no_batch_size(run)
    env_errors_at(run, range(181, 191), 1)
    env_errors_at(run, range(191, 201), 3)  # 40 lines kept of 40
    assert "(up from 10 in the 10 steps before)" in run.findings()["env_errors"].summary
    run.events = [e for e in run.events if e.kind != "env_error"]
    env_errors_at(run, range(181, 191), 8)
    env_errors_at(run, range(191, 201), 8)
    run.events = run.events[:-160] + run.events[-EVENTS_PER_KIND:]  # the run keeps the newest 50
    assert "env_errors" not in ids(run)  # 50 in the last window, the 80 before them not kept: no rise to tell


def test_checkpoint_half_written_is_normal_for_a_moment_then_a_failure():
    run = healthy(0)
    assert "checkpoint_failure" not in ids(run)  # step_200 lacks orchestrator, trainer at 200
    run.checkpoints = {150: ["trainer", "orchestrator"], 198: ["trainer"]}
    found = run.findings()["checkpoint_failure"]
    assert "step_198 lacks orchestrator" in found.summary and "trainer at step 200" in found.summary
    assert found.first_step == 198


def test_incomplete_checkpoint_of_a_crashed_run_is_a_failure():
    run = healthy(0)
    run.checkpoints = {200: ["orchestrator"]}
    run.events.append(crash_event(run, 200))
    assert "step_200 lacks trainer (run crashed, trainer at step 200;" in run.findings()["checkpoint_failure"].summary


def test_checkpoint_error_is_resolved_by_a_newer_complete_checkpoint():
    run = healthy(0)
    error = ev(
        "ckpt_error",
        # prime-rl 7f7ce8a trainer/multi_ckpt.py: the one save error it logs (multi-run trainer)
        "Error checkpointing run 0: OSError: [Errno 28] No space left on device",
        file="logs/trainer.log",
        step=100,
        time=run.time_of(100),
        level="ERROR",
    )
    run.events.append(error)
    # step_100 was left half-written, but newer complete checkpoints are what a resume picks.
    run.checkpoints = {100: ["orchestrator"], 150: ["trainer", "orchestrator"], 200: ["trainer", "orchestrator"]}
    assert "checkpoint_failure" not in ids(run)
    run.checkpoints = {50: ["trainer", "orchestrator"]}
    found = run.findings()["checkpoint_failure"]
    assert "No space left" in found.summary and found.evidence == [error.cite()]


def test_disk_low_from_metric_or_live_probe():
    run = healthy(0)
    run.set("trainer", "ckpt_disk_free_ratio", lambda s: 0.06, steps=[200])
    found = run.findings()["disk_low"]
    assert "6.0% free" in found.summary and "ckpt_disk_free_ratio @ step 200 = 0.06" in found.evidence
    run = healthy(0)
    run.live.disk_free_ratio, run.live.disk_free_gib = 0.04, 12.0
    assert "4.0% free" in run.findings()["disk_low"].summary


# --- progress -------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "peak", "drop_to"), [(0, 0.6, 0.35), (1, 0.3, 0.15), (2, 0.9, 0.55), (3, 0.6, 0.4)])
def test_reward_regression_after_a_peak(seed, peak, drop_to):
    run = healthy(seed)
    rng = random.Random(seed + 100)

    def reward(s: int) -> float:
        level = 0.1 + (peak - 0.1) * min(1.0, s / 100) if s <= 130 else drop_to
        return level + rng.gauss(0, 0.04 * peak / 0.6)

    run.set("orchestrator", "reward", reward)
    found = run.findings()["reward_regression"]
    assert found.severity == Severity.WARNING
    assert found.first_step > 130 and found.last_step == 200
    assert f"at step {found.last_step}" in found.summary and "below its peak" in found.summary


def test_noisy_low_reward_is_not_a_regression():
    for seed in range(5):
        run = healthy(seed)
        rng = random.Random(seed)
        run.set("orchestrator", "reward", lambda s, rng=rng: max(0.0, 0.05 + rng.gauss(0, 0.05)))
        assert "reward_regression" not in ids(run)


def test_reward_flat_is_info_after_warmup():
    run = healthy(0, n=300)
    rng = random.Random(7)
    run.set("orchestrator", "reward", lambda s: 0.5 + rng.gauss(0, 0.05))
    found = run.findings()
    assert found["reward_flat"].severity == Severity.INFO
    assert "has not improved for" in found["reward_flat"].summary
    assert found["reward_flat"].last_step == 300
    assert health_of(found.values(), run.ctx()) == Health.HEALTHY


def test_reward_constant_from_min_max_or_from_the_mean():
    run = healthy(0)
    run.set("orchestrator", "reward", lambda s: 0.0, steps=range(188, 201))
    run.set("orchestrator", "reward_max", lambda s: 0.0, steps=range(188, 201))
    found = run.findings()["reward_constant"]
    assert found.first_step == 188 and "13 steps" in found.summary and "reward 0 " in found.summary
    run = healthy(1)
    run.drop("orchestrator", "reward_min")
    run.drop("orchestrator", "reward_max")
    run.set("orchestrator", "reward", lambda s: 1.0, steps=range(190, 201))
    assert run.findings()["reward_constant"].first_step == 190
    run.set("orchestrator", "reward", lambda s: 1.0, steps=range(192, 201))  # 9 steps: not yet
    run.set("orchestrator", "reward", lambda s: 0.97, steps=range(190, 192))
    assert "reward_constant" not in ids(run)


def test_reward_constant_when_only_the_newest_rows_carry_min_and_max():
    """Rows from before reward/min and /max were logged (an older prime-rl, a log read before
    metrics.jsonl) end the run of equal ones; they used to raise a KeyError and fail the check-in."""
    run = healthy(2)
    for step in range(1, 186):
        run.orch[step].pop("reward_min", None)
        run.orch[step].pop("reward_max", None)
    run.set("orchestrator", "reward", lambda s: 0.0, steps=range(180, 201))
    run.set("orchestrator", "reward_min", lambda s: 0.0, steps=range(186, 201))
    run.set("orchestrator", "reward_max", lambda s: 0.0, steps=range(186, 201))
    found = run.findings()["reward_constant"]
    assert (found.first_step, found.last_step) == (186, 200)
    assert "15 steps" in found.summary and "reward min = max" in found.summary


def test_zero_advantage_from_metric_and_from_warnings():
    run = healthy(0)
    run.set("orchestrator", "trainable", lambda s: 0.12, steps=range(193, 201))
    found = run.findings()["zero_advantage"]
    assert "trainable 12% at step 200" in found.summary and "8 steps" in found.summary
    run = healthy(0)
    run.drop("orchestrator", "trainable")
    run.events += [
        ev("few_trainable", "Only 20/256 effective traces are trainable (7.8%)", step=s, line=s, numbers=(20, 256))
        for s in range(195, 201)
    ]
    assert "only 20/256" in run.findings()["zero_advantage"].summary


def test_truncation_judged_on_its_rolling_median_when_steps_straddle_the_limit():
    """Layout L: truncation is k/16 per step; 8/16, 11/16, 11/16, 8/16, 10/16... is plainly over half."""
    run = healthy(3)
    fractions = [8, 11, 11, 8, 10, 11, 8, 11, 10, 11]
    run.set("orchestrator", "truncation", lambda s: fractions[s - 191] / 16, steps=range(191, 201))
    found = run.findings()["truncation_high"]
    assert found.last_step == 200 and "5-step median above 50%" in found.summary


def test_a_few_high_truncation_steps_are_not_sustained():
    run = healthy(3)
    run.set("orchestrator", "truncation", lambda s: 0.7 if s in (195, 197, 199) else 0.03, steps=range(185, 201))
    assert "truncation_high" not in ids(run)


def test_truncation_high_sustained_or_trending():
    run = healthy(0)
    run.set("orchestrator", "truncation", lambda s: 0.62, steps=range(190, 201))
    assert "truncation 62% at step 200" in run.findings()["truncation_high"].summary
    run = healthy(1)
    run.set("orchestrator", "truncation", lambda s: 0.05 + 0.02 * (s - 180), steps=range(181, 201))
    found = run.findings()["truncation_high"]
    assert "rising" in found.summary and found.last_step == 200


@pytest.mark.parametrize(("seed", "base", "onset"), [(0, 600, 160), (1, 3000, 60), (2, 150, 120)])
def test_length_collapse_sudden_drop(seed, base, onset):
    run = healthy(seed)
    rng = random.Random(seed)
    run.set("orchestrator", "output_tokens", lambda s: (base if s < onset else 0.3 * base) * (1 + rng.gauss(0, 0.04)))
    found = run.findings()["length_collapse"]
    assert found.first_step == onset and found.last_step == 200
    assert "output_tokens" in found.summary and f"before step {onset}" in found.summary


def test_slow_length_decline_is_not_a_collapse():
    run = healthy(0)
    run.set("orchestrator", "output_tokens", lambda s: 600 - 1.8 * s)  # 600 -> 240 over 200 steps
    assert "length_collapse" not in ids(run)


def test_length_explosion_against_the_cap():
    run = healthy(0)
    run.set("orchestrator", "output_tokens", lambda s: 1900.0, steps=range(194, 201))
    found = run.findings()["length_explosion"]
    assert "93% of max_completion_tokens 2048" in found.summary
    run.set("orchestrator", "output_tokens", lambda s: 1700.0, steps=range(194, 201))
    assert "length_explosion" not in ids(run)
    run.config.max_completion_tokens = None  # no cap known: no guess
    run.set("orchestrator", "output_tokens", lambda s: 1900.0, steps=range(194, 201))
    assert "length_explosion" not in ids(run)


def test_errored_rollouts_high_sustained_only():
    run = healthy(0)
    run.set("orchestrator", "error", lambda s: 0.12, steps=range(195, 201))
    found = run.findings()["errored_rollouts_high"]
    assert "errored rollouts 12% at step 200" in found.summary and found.first_step == 195
    run.set("orchestrator", "error", lambda s: 0.0, steps=[197])
    assert "errored_rollouts_high" not in ids(run)


@pytest.mark.parametrize(("consecutive", "severity"), [(3, Severity.WARNING), (7, Severity.CRITICAL)])
def test_empty_batches(consecutive, severity):
    run = healthy(0)
    run.events.append(
        ev(
            "empty_batch",
            f"Step 201: empty train batch after 64 finalized episodes (consecutive empty batches: {consecutive}/10)",
            step=200,
            line=8000,
            numbers=(64, consecutive, 10),
        )
    )
    found = run.findings()["empty_batches"]
    assert found.severity == severity and f"{consecutive}/10 consecutive" in found.summary
    run.events[-1] = run.events[-1].model_copy(update={"step": 120})  # long ago, batches since
    assert "empty_batches" not in ids(run)


def test_eval_regression_while_train_reward_rises():
    run = healthy(0)
    for point, score in zip(run.evals[-3:], (0.5, 0.44, 0.38), strict=True):
        point.score = score
    found = run.findings()["eval_regression"]
    assert "gsm8k fell 0.5 -> 0.38" in found.summary and "steps 150, 175, 200" in found.summary
    # The same eval drop while train reward falls too is not overfitting.
    rng = random.Random(1)
    run.set("orchestrator", "reward", lambda s: 0.6 - 0.002 * s + rng.gauss(0, 0.03))
    assert "eval_regression" not in ids(run)


# --- stability ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("early", [0.3, 1.2])
@pytest.mark.parametrize("onset", [30, 150])
def test_entropy_collapse_generalises(seed, early, onset):
    run = healthy(seed)
    rng = random.Random(seed)

    def entropy(s: int) -> float:
        if s < onset:
            return early * (1 + rng.gauss(0, 0.03))
        return early * max(0.04, 1 - (s - onset) / 12) * (1 + rng.gauss(0, 0.03))

    run.set("trainer", "entropy", entropy)
    found = run.findings()["entropy_collapse"]
    assert found.severity == Severity.WARNING
    assert found.last_step == 200 and onset < found.first_step <= onset + 12
    match = re.search(r"at step 200, ([\d.]+)% of its early median ([\d.]+)", found.summary)
    assert match and float(match[1]) < 10 and abs(float(match[2]) - early) < 0.05 * early
    assert found.evidence[-1].startswith("entropy @ step 200 = ")


def test_entropy_below_absolute_floor_only_when_it_started_higher():
    run = healthy(0)
    run.set("trainer", "entropy", lambda s: 0.3 if s < 150 else 0.04)  # 13 % of early, < 0.05
    assert "entropy_collapse" in ids(run)
    run.set("trainer", "entropy", lambda s: 0.07 if s < 150 else 0.045)  # started confident
    assert "entropy_collapse" not in ids(run)


def test_entropy_explosion_needs_to_be_rising():
    run = healthy(0)
    rng = random.Random(3)
    run.set("trainer", "entropy", lambda s: (0.6 if s < 150 else 0.6 + 0.04 * (s - 150)) * (1 + rng.gauss(0, 0.02)))
    found = run.findings()["entropy_explosion"]
    assert "still rising" in found.summary and found.last_step == 200
    run.set("trainer", "entropy", lambda s: (0.6 if s < 150 else 1.6) * (1 + rng.gauss(0, 0.02)))  # plateau
    assert "entropy_explosion" not in ids(run)


@pytest.mark.parametrize(("seed", "base"), [(0, 0.0008), (1, 0.003)])
def test_mismatch_kl_growth(seed, base):
    run = healthy(seed)
    rng = random.Random(seed)
    run.set("trainer", "mismatch_kl", lambda s: base * (1 if s < 170 else 1.15 ** (s - 160)) * rng.uniform(0.9, 1.1))
    found = run.findings()["mismatch_kl_growth"]
    # 1.15 ** 16.5 = 10: the 10x line is crossed around step 177, whatever the base level.
    assert 175 <= found.first_step <= 179 and found.last_step == 200
    assert re.search(r"at step 200, \d+x its early median", found.summary)


def spiky_grad_norm(run: Run, seed: int, scale: float, at: int, factor: float = 20.0) -> None:
    rng = random.Random(seed)
    run.set("trainer", "grad_norm", lambda s: scale * rng.lognormvariate(0, 0.2) * (factor if s in (at, at + 1) else 1))


@pytest.mark.parametrize(("seed", "scale", "at"), [(0, 0.2, 160), (1, 3.0, 175), (2, 0.02, 198)])
def test_grad_norm_spike_two_steps(seed, scale, at):
    run = healthy(seed)
    spiky_grad_norm(run, seed, scale, at)
    spike = run.findings()["grad_norm_spike"]
    assert (spike.first_step, spike.last_step) == (at, at + 1)
    match = re.search(r"at step \d+, (\d+)x its rolling median ([\d.]+)", spike.summary)
    assert match and 12 < int(match[1]) < 35 and abs(float(match[2]) - scale) < 0.3 * scale


def test_grad_norm_spike_long_ago_is_history():
    run = healthy(1)
    spiky_grad_norm(run, 1, 3.0, 60)
    assert "grad_norm_spike" not in ids(run)
    assert "grad_norm_spike" in ids(run, Thresholds(recent_steps=150))


def test_nan_in_a_step_line_is_critical():
    run = healthy(0)
    run.set("trainer", "loss", lambda s: math.nan, steps=[187, 188])
    found = run.findings()["nan_detected"]
    assert found.severity == Severity.CRITICAL
    assert "loss = nan at step 187" in found.summary and found.first_step == 187
    assert health_of(run_rules(run.ctx()), run.ctx()) == Health.DEGRADED


def test_nonfinite_dropped_lines_concerning_core_metrics_only():
    run = healthy(0)
    line = ev(
        "nonfinite_dropped",
        "Dropping 2 non-finite value(s) from metrics.jsonl: loss/mean, entropy/all/mean",
        file="logs/trainer.log",
        step=190,
    )
    run.events.append(line)
    assert run.findings()["nan_detected"].evidence == [line.cite()]
    run.events[-1] = line.model_copy(
        update={"message": "Dropping 1 non-finite value(s) from metrics.jsonl: train/agg/all/agent/reward/std"}
    )
    assert "nan_detected" not in ids(run)


def test_kl_blowup_absolute_and_relative_but_not_normal_growth():
    run = healthy(0)
    run.set("trainer", "ref_kl", lambda s: 14.0, steps=range(197, 201))
    found = run.findings()["kl_blowup"]
    assert found.severity == Severity.CRITICAL and found.first_step == 197
    run = healthy(0)
    run.set("trainer", "ref_kl", lambda s: 0.001 * s)  # grows 200x from step 1 by design
    assert "kl_blowup" not in ids(run)
    run.set("trainer", "ref_kl", lambda s: 0.02 if s < 190 else 2.5)  # 125x a non-trivial early value
    assert "kl_blowup" in ids(run)


# --- performance ----------------------------------------------------------------------------


def test_orchestrator_and_trainer_bottlenecks():
    run = healthy(0)
    run.set("trainer", "wait_for_batch", lambda s: 30.0, steps=range(190, 201))
    run.set("trainer", "step_time", lambda s: 42.0, steps=range(190, 201))
    found = run.findings()["orchestrator_bottleneck"]
    assert "waited 30s of its 42s step (71%)" in found.summary and found.first_step == 190
    run = healthy(0)
    run.set("orchestrator", "wait_for_policy", lambda s: 25.0, steps=range(195, 201))
    assert run.findings()["trainer_bottleneck"].first_step == 195


def test_kv_cache_saturated_needs_waiting_requests():
    run = healthy(0)
    run.live.vllm = {"vllm:kv_cache_usage_perc": 0.98, "vllm:num_requests_waiting": 12.0}
    assert "98% full with 12 requests waiting" in run.findings()["kv_cache_saturated"].summary
    run.live.vllm = {"gpu_cache_usage_perc": 0.97, "num_requests_waiting": 3.0}  # older vLLM names
    assert "kv_cache_saturated" in ids(run)
    run.live.vllm = {"vllm:kv_cache_usage_perc": 0.99, "vllm:num_requests_waiting": 0.0}
    assert "kv_cache_saturated" not in ids(run)


@pytest.mark.parametrize(("seed", "base", "process"), [(0, 40.0, "trainer"), (1, 400.0, "orchestrator"), (2, 8.0, "trainer")])
def test_step_time_regression_generalises(seed, base, process):
    run = healthy(seed)
    rng = random.Random(seed)
    run.set(process, "step_time", lambda s: base * (1 if s < 170 else 1.8) * (1 + rng.gauss(0, 0.04)))
    found = run.findings()["step_time_regression"]
    assert found.first_step == 170 and f"{process} step" in found.summary and "1.8x" in found.summary


def test_off_policy_drops_growing_not_occasional():
    run = healthy(0)
    run.events += [
        ev("off_policy_drop", f"Cancelled {n} train episodes past max_off_policy_steps=8.", step=s, line=s, numbers=(n,))
        for s, n in ((193, 10), (195, 20), (197, 35), (199, 60))
    ]
    found = run.findings()["off_policy_drops"]
    assert "125 rollouts dropped on 4 of the last 10 steps" in found.summary
    assert "max_off_policy_steps=8" in found.summary


# --- orchestration of rules -----------------------------------------------------------------


def test_findings_are_sorted_by_severity_and_unique():
    run = healthy(0)
    run.events.append(crash_event(run, 200))
    run.set("orchestrator", "error", lambda s: 0.2, steps=range(190, 201))
    rng = random.Random(0)
    run.set("orchestrator", "reward", lambda s: 0.5 + rng.gauss(0, 0.05))
    findings = run_rules(run.ctx())
    ranks = [{"critical": 0, "warning": 1, "info": 2}[f.severity] for f in findings]
    assert ranks == sorted(ranks) and ranks[0] == 0 and ranks[-1] == 2
    assert len({f.id for f in findings}) == len(findings)


def test_health_degraded_on_a_warning():
    run = healthy(0)
    run.set("orchestrator", "truncation", lambda s: 0.7, steps=range(190, 201))
    ctx = run.ctx()
    assert health_of(run_rules(ctx), ctx) == Health.DEGRADED


def test_thresholds_are_configurable():
    run = healthy(0)
    run.set("orchestrator", "error", lambda s: 0.12, steps=range(198, 201))  # 3 steps
    assert "errored_rollouts_high" not in ids(run)
    assert "errored_rollouts_high" in ids(run, Thresholds(sustain_steps=3))
    assert "errored_rollouts_high" not in ids(run, Thresholds(sustain_steps=3, errored_high=0.15))


def test_one_rule_per_catalogue_id():
    from rlagent.agents.rules.catalogue import FINDING_IDS

    assert {r.__name__ for r in RULES} == set(FINDING_IDS)


# --- helpers --------------------------------------------------------------------------------


def test_streak_vs_reference_keeps_the_reference_before_the_change():
    points = [(s, 100.0) for s in range(1, 41)] + [(s, 30.0) for s in range(41, 101)]
    streak, ref = streak_vs_reference(points, 0.5, below=True, window=20, min_ref=3)
    assert streak[0][0] == 41 and ref == 100.0


def test_noise_and_trend_estimators_are_robust():
    rng = random.Random(0)
    values = [0.01 * i + rng.gauss(0, 0.1) for i in range(400)]
    assert 0.08 < noise_sd(values) < 0.12
    values[200] = 100.0  # one outlier moves neither
    assert 0.08 < noise_sd(values) < 0.13
    assert 0.009 < theil_sen_slope(list(enumerate(values))) < 0.011
    assert rolling_median([1, 9, 2, 8, 3], 3) == [1, 5, 2, 8, 3]


def test_context_from_state_merges_new_events_once_per_kind():
    run = healthy(0)
    crash = crash_event(run, 200)
    oom = crash.model_copy(update={"kind": "cuda_oom"})  # the collector files the cause under its own kind
    state = CheckinState(
        run=RunInfo(run_dir="/runs/x", layout=Layout.H, name="x"),
        memory=RunMemory(
            history=run.ctx().history, events=[*run.events, crash], config=run.config, processes_seen=run.processes_seen
        ),
        out=CheckinOutput(observation=run.ctx().observation.model_copy(update={"new_events": [crash, oom]})),
    )
    ctx = RuleContext.from_state(state)
    assert len(ctx.events) == len(run.events) + 2
    found = {f.id: f for f in run_rules(ctx)}
    assert found["run_crashed"].severity == found["cuda_oom"].severity == Severity.CRITICAL
    assert found["cuda_oom"].evidence == ["logs/trainer.log:5000: Fatal error in train"]


def test_health_from_findings_alone():
    assert health_of([]) == Health.HEALTHY
    run = healthy(0)
    run.events.append(crash_event(run, 200))
    assert health_of(run_rules(run.ctx())) == Health.DOWN


def test_every_catalogued_id_has_a_rule_and_every_rule_id_is_catalogued():
    import re
    from pathlib import Path

    from rlagent.agents.rules.catalogue import FINDING_IDS

    text = "".join(
        p.read_text()
        for p in (Path(__file__).resolve().parent.parent / "agents" / "rules").glob("*.py")
        if p.name != "catalogue.py"
    )
    assert set(re.findall(r'\bid="([a-z_]+)"', text)) <= set(FINDING_IDS)  # no rule emits an unknown id
    assert {i for i in FINDING_IDS if f'"{i}"' not in text} == set()  # every id has a rule


def test_rules_build_findings_with_the_catalogue_builder():
    from pathlib import Path

    from rlagent.agents.rules.catalogue import CATALOGUE, finding

    made = finding(id="entropy_collapse", severity=Severity.WARNING, summary="s", evidence=("a",), first_step=3, last_step=5)
    assert made.category is CATALOGUE["entropy_collapse"] is Category.STABILITY
    assert (made.evidence, made.first_step, made.last_step, made.source) == (["a"], 3, 5, "rules")
    with pytest.raises(KeyError):
        finding(id="not_a_catalogue_id", severity=Severity.INFO, summary="s")
    rules = Path(__file__).resolve().parent.parent / "agents" / "rules"
    assert [p.name for p in rules.glob("*.py") if "Finding(" in p.read_text()] == ["catalogue.py"]  # the one way


def test_zero_advantage_from_a_reward_pinned_at_its_bound_when_nothing_else_says():
    """Layout L logs no trainable fraction: a mean of exactly 0 means every rollout scored 0."""
    run = healthy(2)
    run.drop("orchestrator", "trainable")
    run.set("orchestrator", "reward", lambda s: 0.0, steps=range(193, 201))
    found = run.findings()["zero_advantage"]
    assert (found.first_step, found.last_step) == (193, 200) and "pinned at 0" in found.summary
    run.set("orchestrator", "reward", lambda s: -0.5 if s == 10 else run.orch[s]["reward"], steps=range(10, 11))
    assert "zero_advantage" not in ids(run)  # rewards outside [0, 1]: a zero mean proves nothing


def test_a_measured_trainable_fraction_wins_over_the_pinned_reward():
    run = healthy(2)
    run.set("orchestrator", "reward", lambda s: 0.0, steps=range(193, 201))
    assert "zero_advantage" not in ids(run)  # trainable stays ~80 % in this run
