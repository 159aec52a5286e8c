"""Fuzzing of the verl, TRL and OpenRLHF readers (tools/adapters, tools/frameworks), as
tests/test_fuzz_readers.py does for prime-rl's: every file an adapter reads (console logs, verl's
file-logger JSONL, rollout dumps, TRL's completions parquet and trainer_state.json, the tracker
files, YAML configs, launch and training scripts) replaced by a FIFO, a symlink loop, a link to
nothing or out of the run, a directory, or made unreadable; junk lines (random bytes, NUL, invalid
UTF-8, huge and out-of-range numbers, deep nesting, escape sequences) added; files truncated or
deleted in the middle of a read. A reader never raises and never hangs, what it returns can be
saved in the state store, and a healthy run with junk added stays Healthy.

Default sizes run in the default suite, derandomized; RLAGENT_NIGHTLY=1 multiplies the examples
by 10 and draws new ones each night. The number of cases run is printed (`fuzz frameworks: N cases`).
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
from rlagent.evals.simulator.frameworks import FRAMEWORK_SCENARIOS, write_framework_run
from rlagent.graph.runner import Monitor
from rlagent.models.run import Health
from rlagent.tools.adapters import adapter_for, discover, lineblocks
from rlagent.tools.adapters import console as console_module
from rlagent.tools.adapters import verl as verl_adapter

from faultkit import HAZARDS, ROOT, VanishingReads, bounded, junk_bytes, junk_line, make_hazard

SCALE = 10 if os.environ.get("RLAGENT_NIGHTLY") else 1
CASES: Counter[str] = Counter()
SERDE = JsonPlusSerializer()
FRAMEWORKS = ("verl", "trl", "openrlhf")

# The files each adapter reads, relative to the simulated healthy run (tests/test_simulator_frameworks).
VERL_CKPT = "checkpoints/verl_grpo_example_gsm8k/qwen2_5_0_5b_instruct_function_rm"
TRL_OUT = "Qwen2.5-0.5B-Instruct-GRPO"
TARGETS = {
    "verl": {
        "console log": "verl_demo.log",  # where the driver's prints go (tee'd by the launch script)
        "hydra log": "outputs/2026-08-24/14-02-00/main_ppo.log",  # hydra's job log: empty, as verl prints
        "file logger": "verl_grpo_example_gsm8k/qwen2_5_0_5b_instruct_function_rm.jsonl",
        "hydra config": "outputs/2026-08-24/14-02-00/.hydra/config.yaml",
        "rollout dump": "rollouts/40.jsonl",
        "tracker": f"{VERL_CKPT}/latest_checkpointed_iteration.txt",
        "launch script": "run_grpo.sh",
    },
    "trl": {
        "console log": "train.log",
        "config": "grpo_config.yaml",
        "completions": f"{TRL_OUT}/completions/completions_00040.parquet",
        "trainer state": f"{TRL_OUT}/checkpoint-40/trainer_state.json",
        "launch script": "launch.sh",
        "training script": "train_grpo.py",
    },
    "openrlhf": {
        "console log": "train.log",
        "launch script": "train_ppo_ray.sh",
        "tracker": "ckpt/checkpoints_ppo_ray/_actor/latest",
    },
}


def fuzz(examples: int):
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
        database=None,
        derandomize=SCALE == 1,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a check-in takes a fraction of a second: no shrinking
    )


@pytest.fixture(scope="module", autouse=True)
def report_cases(request):
    yield
    total = sum(CASES.values())
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\nfuzz frameworks: {total} cases ({', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))})")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    root = tmp_path_factory.mktemp("healthy-frameworks")
    runs = {}
    for framework in FRAMEWORKS:
        runs[framework] = root / framework
        write_framework_run(FRAMEWORK_SCENARIOS[f"{framework}-healthy"].variant(samples_kept=2), runs[framework])
        for rel in TARGETS[framework].values():
            assert (runs[framework] / rel).is_file(), f"the simulator no longer writes {rel}"
    return runs


@contextlib.contextmanager
def copy_of(src: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(src, run, symlinks=True)
        try:
            yield run
        finally:
            for path in [run, *run.rglob("*")]:  # let TemporaryDirectory clean up what was made unreadable
                with contextlib.suppress(OSError):
                    if path.is_dir() and not path.is_symlink():
                        path.chmod(0o755)


def checked(run: Path, home: Path, framework: str):
    with bounded(30, f"a {framework} check-in"):
        info = discover(run, framework)
        monitor = Monitor(info, home=home, offline=True)
        try:
            state = monitor.check_in()
        finally:
            monitor.close()
    json.dumps(build_report(state))
    return state


def read_everything(run: Path, framework: str) -> list[str]:
    """Every reader of the adapter, as the collector, the planner and `diagnose` call them."""
    adapter = adapter_for(framework)
    info = adapter.discover(run)
    notes: list[str] = []
    config = adapter.read_config(run)
    notes += config.problems
    read = adapter.read(info, {}, UTC, keep_per_kind=50)
    notes += read.notes
    for file in read.files:
        notes += file.notes
    samples = adapter.samples(run, None)
    notes += samples.notes if samples else []
    parts = adapter.checkpoints(run, notes=notes)
    adapter.resume_plan(run, ["bash", "launch.sh"])
    adapter.process_markers(info)
    SERDE.dumps_typed({"config": config.model_dump(mode="json"), "parts": parts, "notes": notes})
    SERDE.dumps_typed([(f.rel, f.cursor, [r.__dict__ for r in f.rows], f.evals, f.events) for f in read.files])
    return notes


# --- Hazards where each reader expects a file -------------------------------------------------

HAZARD_CASES = [(framework, what, kind) for framework in FRAMEWORKS for what in TARGETS[framework] for kind in HAZARDS]


@pytest.mark.parametrize(("framework", "what", "kind"), HAZARD_CASES)
def test_each_framework_reader_meets_each_hazard_with_a_note_never_a_hang(healthy, tmp_path, framework, what, kind):
    CASES["hazards"] += 1
    if kind == "unreadable_dir" and not ROOT:
        pytest.skip("needs root to drop the DAC capabilities")
    with copy_of(healthy[framework]) as run:
        target = run / TARGETS[framework][what]
        outside = tmp_path / "outside"
        outside.mkdir()
        make_hazard(target, kind, outside)
        with bounded(20, f"reading {framework}'s {what} as a {kind}"):
            notes = read_everything(run, framework)
        if kind in ("fifo", "out_of_run") and what in ("file logger", "console log", "hydra log", "completions", "trainer state"):
            assert any(target.name in note and "not read" in note for note in notes), notes  # said, never silent


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_fifo_for_every_file_at_once_is_a_whole_check_in_that_ends(healthy, framework):
    """The check-in (collector, rules, writer) with every file the adapter reads a FIFO: it ends."""
    CASES["check-ins"] += 1
    with copy_of(healthy[framework]) as run:
        for rel in TARGETS[framework].values():
            if "script" not in rel and not rel.endswith(".sh"):  # the launch script is how the framework is found
                make_hazard(run / rel, "fifo", run)
        state = checked(run, run.parent / "home", framework)
        assert state.out.written and state.out.observation is not None


# --- Junk in the files, whole check-ins -------------------------------------------------------

JUNK_PLACES = {
    "verl": ("console log", "file logger", "rollout dump", "hydra config"),
    "trl": ("console log", "config"),
    "openrlhf": ("console log",),
}
FRAMEWORK_JUNK = st.one_of(
    junk_line,
    st.sampled_from(["1e300", "99999999999999999999999999", "-5", "NaN", "1e11"]).map(
        lambda n: f'{{"step": {n}, "data": {{"actor/entropy": {n}}}}}'.encode()
    ),
    st.sampled_from(["99999999999999999999", "1e300", "-3"]).map(lambda n: f"step:{n} - actor/entropy:0.5".encode()),
    st.sampled_from(["1e300", "1" * 400, "inf"]).map(lambda n: f"{{'epoch': {n}}}".encode()),
    # Out-of-range steps only: a well-formed line for a real step reporting `reward: inf` (or 1e300)
    # is not junk but a reward, which the rules judge (test_a_well_formed_non_finite_metric_line_is_nan_detected).
    st.sampled_from(["99999999999999999999", "-3", "1e300"]).map(lambda n: f"Global step {n}: {{'reward': 0.5}}".encode()),
    st.integers(1, 100_000).map(lambda n: b"a: " + b"[" * n),
)


@fuzz(30)
@given(
    framework=st.sampled_from(FRAMEWORKS),
    junk=st.lists(st.tuples(st.integers(0, 10), st.lists(FRAMEWORK_JUNK, min_size=1, max_size=4)), min_size=1, max_size=4),
)
def test_healthy_framework_runs_with_junk_added_stay_healthy(healthy, framework, junk):
    CASES["check-ins"] += 1
    with copy_of(healthy[framework]) as run:
        home = run.parent / "home"
        first = checked(run, home, framework)
        assert first.out.health is Health.HEALTHY, [(f.id, f.summary) for f in first.out.findings]
        places = JUNK_PLACES[framework]
        for pick, lines in junk:
            target = run / TARGETS[framework][places[pick % len(places)]]
            before = target.stat()
            with open(target, "ab") as f:
                f.write(junk_bytes(lines))
            # These consoles carry no times: a file's mtime dates its lines. The junk is written "at
            # the same moment" as the last line, so the run is not stalled by the test's clock.
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        second = checked(run, home, framework)
        assert second.out.health is Health.HEALTHY, (
            [(f.id, f.summary) for f in second.out.findings],
            second.out.observation.notes,
        )
        assert second.checkin == 2 and second.out.write_error is None
        # an offline re-check that read nothing new (junk appended to a file that is not a log)
        # appends nothing by design (issue 11); one that read anything is appended
        assert second.out.written == (second.out.observation.bytes_read > 0)


NON_FINITE_LINES = {
    "verl": b"step:41 - actor/entropy:nan",
    # tqdm.write clears the bar (this log ends in one, as TRL's do) and writes the dict line
    "trl": b"\r" + b" " * 50 + b"\r{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'epoch': 0.5}",
    "openrlhf": b"Global step 3: {'reward': inf}",
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_well_formed_non_finite_metric_line_is_nan_detected(healthy, framework):
    """The counterpart of the junk test: a line in the framework's own metric format reporting a NaN or
    an inf is not junk, wherever in the run it lands; the run is Degraded with nan_detected."""
    with copy_of(healthy[framework]) as run:
        home = run.parent / "home"
        assert checked(run, home, framework).out.health is Health.HEALTHY
        target = run / TARGETS[framework]["console log"]
        before = target.stat()
        with open(target, "ab") as f:
            f.write(NON_FINITE_LINES[framework] + b"\n")
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        out = checked(run, home, framework).out
        assert out.health is Health.DEGRADED and {f.id for f in out.findings} == {"nan_detected"}, out.findings


# --- Files that change under the reader ---------------------------------------------------------

MID_READ = {
    "verl file logger": ("verl", "file logger", verl_adapter),
    "verl console log": ("verl", "console log", console_module),
    "trl console log": ("trl", "console log", console_module),
}


@pytest.mark.parametrize("backlog", ["one read", "head and tail"])
@pytest.mark.parametrize("how", ["truncate", "delete"])
@pytest.mark.parametrize("reader", sorted(MID_READ))
def test_a_framework_file_truncated_or_deleted_mid_read_is_no_crash(healthy, monkeypatch, reader, how, backlog):
    """Also with a backlog longer than a read: verl's and OpenRLHF's skip its middle (lineblocks.HeadAndTail),
    TRL's is read oldest first."""
    CASES["mid-read"] += 1
    framework, what, module = MID_READ[reader]
    with copy_of(healthy[framework]) as run:
        target = run / TARGETS[framework][what]
        target.write_bytes(target.read_bytes() * 200)
        if backlog == "head and tail":
            monkeypatch.setattr(lineblocks, "MAX_READ", target.stat().st_size // 5)
        vanishing = VanishingReads(how)
        real = module.open_regular

        def opener(path, *args, **kwargs):  # only the file under test vanishes
            return (vanishing.wrap(real) if Path(path) == target else real)(path, *args, **kwargs)

        monkeypatch.setattr(module, "open_regular", opener)
        with bounded(20):
            read_everything(run, framework)
        assert vanishing.hits >= 1
        monkeypatch.undo()
        read_everything(run, framework)


# --- Numbers and nesting no run writes ----------------------------------------------------------


def test_out_of_range_steps_and_times_are_skipped_and_the_state_saves(healthy):
    CASES["numbers"] += 1
    with copy_of(healthy["verl"]) as run:
        home = run.parent / "home"
        checked(run, home, "verl")
        with open(run / TARGETS["verl"]["file logger"], "ab") as f:
            f.write(b'{"step": 99999999999999999999999999, "data": {"actor/entropy": 0.4}}\n')
            f.write(b'{"step": 1e300, "data": {"actor/entropy": 1e999}}\n')
            f.write(b'{"step": 41, "data": {"actor/entropy": 1' + b"0" * 400 + b"}}\n")
        with open(run / TARGETS["verl"]["console log"], "ab") as f:
            f.write(b"step:99999999999999999999 - actor/entropy:0.5\n")
        state = checked(run, home, "verl")
        assert state.out.written
        assert all(step <= 10**9 for step in state.memory.history.table("trainer"))
    with copy_of(healthy["trl"]) as run:
        path = run / TARGETS["trl"]["trainer state"]
        doc = json.loads(path.read_text())
        doc["log_history"] += [{"step": float("nan"), "loss": 1.0}, {"step": 1e300, "loss": 1.0}, {"step": -5, "loss": 1.0}]
        path.write_text(json.dumps(doc))
        state = checked(run, run.parent / "home", "trl")
        assert state.out.written and all(0 <= step <= 10**9 for step in state.memory.history.table("trainer"))


@pytest.mark.parametrize(("framework", "what"), [("verl", "hydra config"), ("trl", "config"), ("trl", "trainer state")])
def test_a_config_nested_100000_deep_is_a_note(healthy, framework, what):
    CASES["nesting"] += 1
    with copy_of(healthy[framework]) as run:
        target = run / TARGETS[framework][what]
        target.write_bytes(b"[" * 100_000 if target.suffix == ".json" else b"a: " + b"[" * 100_000)
        with bounded(20):
            notes = read_everything(run, framework)
        assert any("nested too deep" in note or "unreadable" in note or "not valid" in note for note in notes), notes
