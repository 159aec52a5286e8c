"""Fuzzing of every reader of a run dir (hypothesis): the logs of both prime-rl layouts (trainer,
orchestrator, inference, env servers, SLURM job logs), metrics.jsonl, the configs (JSON and TOML),
the rollouts (H traces and L rows), the checkpoint and attempt layout. Inputs: random bytes, NUL,
invalid UTF-8, 1 MB and 10 MB lines, huge and out-of-range numbers, deep nesting, FIFOs, symlink
loops, links to nothing and out of the run, directories and unreadable directories where files
should be, files deleted or truncated in the middle of a read. A reader never raises, never
hangs, and what it returns can be saved in the state store.

Then whole check-ins: healthy simulated runs of both layouts with junk added stay Healthy, write
their entry, never take longer than a bound, and survive a second check-in (the saved state
reloads). The number of cases run is printed at the end of the module (`fuzz: N cases`).

Default sizes run in the default suite, derandomized (the same cases every run); RLAGENT_NIGHTLY=1
multiplies the examples by 10 and draws new ones each night.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections import Counter
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from rlagent.agents.report import build_report
from rlagent.evals.simulator import SCENARIOS, write_run
from rlagent.graph.runner import Monitor
from rlagent.models.run import Health, Layout
from rlagent.tools import logscan, rollouts, tail
from rlagent.tools.bounds import MAX_STEP, plausible_time
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.configs import read_run_config
from rlagent.tools.layout import current_attempt, discover_run, log_files
from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.logread import read_log
from rlagent.tools.metrics_jsonl import read_metrics
from rlagent.tools.rollouts import l_step_fractions, pick_telling, read_samples, sample_key

from conftest import loguru_line
from faultkit import HAZARDS, HUGE_LINE_SIZES, ROOT, VanishingReads, bounded, json_values, junk_bytes, junk_line, make_hazard

SCALE = 10 if os.environ.get("RLAGENT_NIGHTLY") else 1
CASES: Counter[str] = Counter()
SERDE = JsonPlusSerializer()


def fuzz(examples: int, shrink: bool = True):
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
        database=None,
        derandomize=SCALE == 1,  # the default suite is reproducible; the nightly run explores new cases
        phases=list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate],
    )


@pytest.fixture(scope="module", autouse=True)
def _report_cases(request):
    yield
    total = sum(CASES.values())
    line = f"fuzz: {total} cases ({', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))})"
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{line}")


def saveable(value) -> None:
    """What a reader returns goes into the state store: the checkpointer must accept it."""
    SERDE.dumps_typed(value)


# --- Logs -------------------------------------------------------------------------------------

LOG_NAMES = [
    "logs/attempt_1/trainer.log",
    "logs/attempt_1/orchestrator.log",
    "logs/attempt_1/inference.log",
    "logs/attempt_1/envs/train/reverse-text.log",
    "logs/trainer.log",
    "logs/envs/train/reverse-text/env_server.log",
    "job_4242.log",
]
GOOD = [
    loguru_line("14:00:00", "SUCCESS", "Step 1 |   38.9s | Loss 0.0012 | Entropy 0.5000 | Grad. Norm 0.2143"),
    loguru_line("14:00:41", "SUCCESS", "Step 1 |   41.2s | Reward 0.3000 | Truncation 3.1%"),
    loguru_line("14:01:00", "WARNING", "Rollout failed: TimeoutError: episode exceeded 30s"),
]


@fuzz(220)
@given(
    name=st.sampled_from(LOG_NAMES),
    before=st.lists(st.one_of(junk_line, st.sampled_from(GOOD).map(str.encode)), max_size=8),
    after=st.lists(junk_line, max_size=6),
    huge=st.sampled_from((0, 0, 0, *HUGE_LINE_SIZES)),
    partial=st.booleans(),
    shrink=st.booleans(),
)
def test_log_reader_takes_any_bytes(name, before, after, huge, partial, shrink):
    CASES["logs"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        path = run / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(junk_bytes(before) + (b"x" * huge + b" WARNING\n" if huge else b""))
        first = read_log(path, name, None, UTC)
        with open(path, "ab") as f:
            f.write(junk_bytes(after, newline_last=not partial))
        if shrink:
            os.truncate(path, path.stat().st_size // 3)
        second = read_log(path, name, first.cursor, UTC)
        for read in (first, second):
            assert all(0 <= step.step <= MAX_STEP for step, _ in read.steps)
            saveable({"cursor": read.cursor.model_dump() if read.cursor else None})
            saveable([e.model_dump() for e in read.events])
            saveable({k: g.model_dump() for k, g in read.groups.items()})
        if second.cursor is not None:
            assert second.cursor.offset <= path.stat().st_size


# --- metrics.jsonl ----------------------------------------------------------------------------

ROW_NUMBERS = st.one_of(
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, 1e12, 1e11, -1.0, 1.5, 10**9, 10**9 + 1]),
)


@fuzz(220)
@given(
    rows=st.lists(
        st.one_of(
            st.fixed_dictionaries({"step": ROW_NUMBERS, "time": ROW_NUMBERS, "loss/mean": ROW_NUMBERS}),
            st.fixed_dictionaries({"step": ROW_NUMBERS, "train/agg/all/reward/mean": ROW_NUMBERS, "time": ROW_NUMBERS}),
            json_values(),
        ),
        max_size=8,
    ),
    junk=st.lists(junk_line, max_size=3),
    partial=st.booleans(),
)
def test_metrics_reader_takes_any_rows(rows, junk, partial):
    CASES["metrics.jsonl"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        lines = [json.dumps(r, allow_nan=True).encode() for r in rows] + junk
        (run / "metrics.jsonl").write_bytes(junk_bytes(lines, newline_last=not partial))
        read = read_metrics(run, None)
        for table in (read.trainer, read.orchestrator):
            assert all(0 <= step <= MAX_STEP for step in table)
        assert all(plausible_time(t) for t in read.times.values())
        saveable({"t": read.trainer, "o": read.orchestrator, "e": [p.model_dump() for p in read.evals], "times": read.times})


# --- configs ----------------------------------------------------------------------------------


def toml_of(value) -> bytes:
    if isinstance(value, dict):
        return "\n".join(f'"{k}" = {json.dumps(v)}' for k, v in value.items() if not isinstance(v, dict | list)).encode()
    return json.dumps(value).encode()


@fuzz(200)
@given(
    layout=st.sampled_from([Layout.H, Layout.L]),
    doc=st.one_of(
        json_values(20),
        st.fixed_dictionaries(
            {"max_steps": ROW_NUMBERS | json_values(4), "model": json_values(4), "seq_len": ROW_NUMBERS, "ckpt": json_values(4)}
        ),
    ),
    junk=st.one_of(st.none(), junk_line),
    deep=st.sampled_from([0, 0, 100_000]),
)
def test_config_reader_takes_any_document(layout, doc, junk, deep):
    CASES["configs"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "configs").mkdir()
        name = "trainer.json" if layout is Layout.H else "trainer.toml"
        raw = json.dumps(doc).encode() if layout is Layout.H else toml_of(doc)
        if deep:
            raw = (b"[" * deep) if layout is Layout.H else b"a = " + b"[" * deep
        (run / "configs" / name).write_bytes(junk if junk is not None else raw)
        config = read_run_config(run, layout)
        saveable(config.model_dump())


# --- rollouts ---------------------------------------------------------------------------------


def h_episode(value) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {
            "env": json_values(4) | st.fixed_dictionaries({"name": json_values(2)}),
            "traces": st.lists(
                st.fixed_dictionaries(
                    {
                        "rewards": json_values(6)
                        | st.dictionaries(st.text(max_size=5), st.fixed_dictionaries({"score": value, "weight": value})),
                        "nodes": json_values(6),
                        "stop_condition": json_values(2),
                        "errors": json_values(4),
                    }
                ),
                max_size=3,
            )
            | json_values(3),
            "errors": json_values(4),
        }
    )


@fuzz(200)
@given(
    layout=st.sampled_from([Layout.H, Layout.L]),
    step_name=st.sampled_from(["step_3", "step_99999999999999999999", "step_-1", "step_x", "step_1000000000"]),
    rows=st.lists(
        st.one_of(
            h_episode(ROW_NUMBERS | json_values(2)),
            st.fixed_dictionaries(
                {"reward": ROW_NUMBERS | json_values(2), "env_name": json_values(2), "completion": json_values(6)}
            ),
            json_values(),
        ),
        max_size=5,
    ),
    junk=st.lists(junk_line, max_size=3),
)
def test_rollout_readers_take_any_rows(layout, step_name, rows, junk):
    CASES["rollouts"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        base = run / ("rollouts" if layout is Layout.H else "run_default/rollouts") / step_name
        path = base / ("train/all/traces.jsonl" if layout is Layout.H else "train_rollouts.jsonl")
        path.parent.mkdir(parents=True)
        path.write_bytes(junk_bytes([json.dumps(r).encode() for r in rows] + junk))
        sample_key(run, layout)
        step, _, sampled, _ = read_samples(run, layout)
        picked = pick_telling(sampled)
        assert step is None or 0 <= step <= MAX_STEP
        saveable([r.model_dump() for r in picked])
        saveable(l_step_fractions(run, 0))


# --- checkpoints and attempts -----------------------------------------------------------------

ENTRY = st.tuples(
    st.sampled_from(["step_1", "step_10", "step_99999999999999999999", "step_abc", "step_1000000000"]),
    st.sampled_from(["dir", "complete", "trainer_only", "file", *HAZARDS]),
)


@fuzz(160)
@given(
    layout=st.sampled_from([Layout.H, Layout.L]),
    entries=st.lists(ENTRY, max_size=5, unique_by=lambda entry: entry[0]),
    latest=st.sampled_from(["attempt_1", "attempt_2", "latest", "../..", "/etc", "nothing", *HAZARDS]),
)
def test_checkpoint_and_attempt_layout_takes_any_tree(layout, entries, latest):
    CASES["checkpoints+attempts"] += 1
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as outside:
        run = Path(tmp) / "run"
        (run / "logs" / "attempt_1").mkdir(parents=True)
        (run / "logs" / "attempt_1" / "trainer.log").write_text(GOOD[0])
        link = run / "logs" / "latest"
        if latest in HAZARDS:
            make_hazard(link, latest, Path(outside))
        elif latest != "nothing":
            link.symlink_to(latest)
        for name, kind in entries:
            for base in (run / "checkpoints", run / "run_default" / "checkpoints"):
                target = base / name
                if kind in ("dir", "complete", "trainer_only"):
                    (target / "trainer").mkdir(parents=True, exist_ok=True)
                    if kind != "dir":
                        (target / "trainer" / ".metadata").write_text("m")
                    if kind == "complete":
                        (target / "orchestrator").mkdir(exist_ok=True)
                        (target / "orchestrator" / "progress.pt").write_text("p")
                elif kind == "file":
                    base.mkdir(parents=True, exist_ok=True)
                    if not target.exists():
                        target.write_text("x")
                elif not target.exists() and not target.is_symlink():
                    make_hazard(target, kind, Path(outside))
        notes: list[str] = []
        with bounded(10, "reading the layout"):
            parts = checkpoint_parts(run, layout, newest=10**6, notes=notes)
            newest_complete(parts)
            current_attempt(run, notes)
            files = log_files(run, layout, notes)
        assert all(0 <= step <= MAX_STEP for step in parts)
        assert all(f.is_file() for f in files)
        saveable({"parts": parts, "notes": notes})
        for path in [*run.rglob("*")]:  # let TemporaryDirectory clean up what was made unreadable
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)


# --- Hazards where each reader expects a file -------------------------------------------------

TRAINER_H = "logs/attempt_1/trainer.log"
HAZARD_TARGETS = {
    "metrics.jsonl": lambda run: read_metrics(run, None).notes,
    "configs/trainer.json": lambda run: read_run_config(run, Layout.H).problems,
    "logs/attempt_1/trainer.log": lambda run: read_log(run / TRAINER_H, TRAINER_H, None, UTC),
    "rollouts/step_5/train/all/traces.jsonl": lambda run: read_samples(run, Layout.H)[3],
    "run_default/rollouts/step_5/train_rollouts.jsonl": lambda run: [str(l_step_fractions(run, 0))],
}


@pytest.mark.parametrize("kind", HAZARDS)
@pytest.mark.parametrize("target", sorted(HAZARD_TARGETS))
def test_each_reader_meets_each_hazard_with_a_note_never_a_hang(tmp_path, target, kind):
    CASES["hazards"] += 1
    if kind == "unreadable_dir" and not ROOT:
        pytest.skip("needs root to drop the DAC capabilities (see test_faults.py for the unprivileged case)")
    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    make_hazard(run / target, kind, outside)
    try:
        with bounded(10, f"reading {target} as a {kind}"):
            HAZARD_TARGETS[target](run)
    finally:
        (run / target).parent.chmod(0o755)


READERS_OPEN = {
    "log": (logscan, lambda run: read_log(run / "logs/trainer.log", "logs/trainer.log", None, UTC)),
    "metrics": (tail, lambda run: read_metrics(run, None)),
    "rollouts": (rollouts, lambda run: read_samples(run, Layout.L)),
}


@pytest.mark.parametrize("how", ["truncate", "delete"])
@pytest.mark.parametrize("reader", sorted(READERS_OPEN))
def test_a_file_truncated_or_deleted_mid_read_is_no_crash(tmp_path, monkeypatch, reader, how):
    CASES["mid-read"] += 1
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs/trainer.log").write_bytes(b"".join(g.encode() for g in GOOD) * 2000)
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "time": 1.0, "loss/mean": 0.1}\n' * 2000)
    (run / "run_default/rollouts/step_2").mkdir(parents=True)
    (run / "run_default/rollouts/step_2/train_rollouts.jsonl").write_bytes(b'{"reward": 0.5, "completion": "x"}\n' * 500)
    module, read = READERS_OPEN[reader]
    vanishing = VanishingReads(how)
    monkeypatch.setattr(module, "open_regular", vanishing.wrap(module.open_regular))
    with bounded(10):
        read(run)
    assert vanishing.hits >= 1
    # And the next read of what is left is fine too.
    monkeypatch.undo()
    read(run)


# --- Whole check-ins: healthy runs with junk stay Healthy --------------------------------------

BASES = {"healthy-h": 20, "healthy-l": 20, "healthy-multienv-h": 16}


@pytest.fixture(scope="module")
def healthy_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("healthy")
    runs = {}
    for name, steps in BASES.items():
        scenario = SCENARIOS[name].variant(seed=7, steps=steps, rollout_steps_kept=2)
        runs[name] = write_run(scenario, root / name)
        (runs[name] / "STATUS.md").unlink(missing_ok=True)
    return runs


JUNK_PLACES = st.sampled_from(["log", "metrics", "rollouts", "config", "hazard"])


def is_junk(line: bytes) -> bool:
    """Not a well-formed record with a real time of day: such a line is the run's data (a line at
    00:00:00 after 09:00 rightly means midnight passed), not junk."""
    head = parse_head(clean(line))
    return head is None or not 0 <= head.seconds < 86400


@fuzz(100, shrink=False)  # a check-in takes about a second: shrinking would take many minutes
@given(
    name=st.sampled_from(sorted(BASES)),
    junk=st.lists(
        st.tuples(JUNK_PLACES, st.lists(junk_line.filter(is_junk), min_size=1, max_size=4), st.integers(0, 10**6)), max_size=5
    ),
    hazard=st.sampled_from(HAZARDS[:-1]),
    huge=st.sampled_from((0, 0, HUGE_LINE_SIZES[0])),
)
def test_healthy_runs_with_junk_added_stay_healthy(healthy_runs, name, junk, hazard, huge):
    CASES["check-ins"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = tmp / name
        shutil.copytree(healthy_runs[name], run, symlinks=True)
        home = tmp / "home"
        first = checked(run, home)
        assert first.out.health is Health.HEALTHY, first.out.findings
        with bounded(20, "adding junk"):  # the test's own writes must not block on a FIFO it made
            for place, lines, pick in junk:
                add_junk(run, place, lines, pick, hazard, tmp)
        if huge:
            with open(sorted(run.rglob("orchestrator.log"))[0], "ab") as f:
                f.write(b"y" * huge + b"\n")
        second = checked(run, home)
        assert second.out.health is Health.HEALTHY, (
            [(f.id, f.summary) for f in second.out.findings],
            second.out.observation.now,
            {k: (c.last_time, c.offset) for k, c in second.memory.cursors.items()},
            second.out.observation.notes,
            [(p, [len(x) for x in lines], pick) for p, lines, pick in junk],
        )
        assert second.checkin == 2 and second.out.write_error is None
        # an offline re-check that read nothing new (a half line waits) appends nothing (issue 11)
        assert second.out.written == (second.out.observation.bytes_read > 0)
        json.dumps(build_report(second))


def checked(run: Path, home: Path):
    with bounded(30):
        monitor = Monitor(discover_run(run), home=home, offline=True)
        try:
            return monitor.check_in()
        finally:
            monitor.close()


def add_junk(run: Path, place: str, lines: list[bytes], pick: int, hazard: str, outside: Path) -> None:
    data = junk_bytes(lines)
    if place == "log":
        logs = sorted(p for p in run.rglob("*.log") if p.is_file() and not p.is_symlink())
        target = logs[pick % len(logs)]
    elif place == "metrics":
        target = run / "metrics.jsonl"
        if not target.exists():
            target = next(p for p in sorted(run.rglob("*.log")) if p.is_file() and not p.is_symlink())
    elif place == "rollouts":
        files = sorted(p for p in run.rglob("*.jsonl") if "rollouts" in str(p) and p.is_file() and not p.is_symlink())
        target = files[pick % len(files)]
    elif place == "config":  # an extra config file the reader does not know, and junk in an env config
        configs = sorted(
            p for p in (run / "configs").rglob("*") if p.is_file() and not p.is_symlink() and p.parent != run / "configs"
        )
        if not configs:
            return
        target = configs[pick % len(configs)]
    else:  # a hazard where an optional file of the run's layout may be
        if (run / "logs" / "latest").is_symlink():
            options = [
                run / "configs" / "rl.json",
                run / "logs" / "attempt_1" / "evals.log",
                run / "logs" / "attempt_1" / "envs" / "train" / "zz.log",
                run / "rollouts" / "step_9999" / "train" / "all" / "traces.jsonl",
            ]
        else:
            options = [
                run / "configs" / "rl.toml",
                run / "logs" / "envs" / "train" / "zz" / "zz.log",
                run / "run_default" / "rollouts" / "step_9999" / "train_rollouts.jsonl",
            ]
        make_hazard(options[pick % len(options)], hazard, outside)
        return
    with open(target, "ab") as f:
        f.write(data)
