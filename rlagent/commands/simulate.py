"""`rlagent simulate`: write a simulated prime-rl run, for tests and demos only.

Thin: parses flags, builds the scenario (rlagent.evals.simulator), writes the run or starts the
live launcher, prints one line. User errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import fail, out

HELP = (
    "Write a SIMULATED prime-rl run directory (for tests and demos, nothing more).\n\n"
    "SCENARIO is a named run (--list); OUT_DIR is the run directory (with --run.name: the output dir holding it, "
    "as prime-rl's --output-dir). The files are byte-for-byte prime-rl's formats, layout H (Aug 2026) or L "
    "(May 2026); every number follows from the scenario and its seed.\n\n"
    "--live runs it in real time: this process becomes PRIME-RL::Launcher and starts children titled "
    "PRIME-RL::Trainer, ::Orchestrator, ::Inference and ::EnvServer that append their own logs as simulated time "
    "passes (--speed 60: one simulated minute per second). Typed into a tmux Launcher window it behaves like "
    "`uv run rl`: Ctrl-C stops everything, a crash ends with prime-rl's launcher lines and exit status 1. "
    "Resume as prime-rl does, from a complete checkpoint into a new logs/attempt_N:\n\n"
    "H: rlagent simulate crash-oom-h OUT --live --run.name NAME [--resume.step 20 | --resume]\n\n"
    "L: rlagent simulate crash-python-l --output-dir OUT --live [--ckpt.resume-step 10 | -1]\n\n"
    "SIMULATED verl, TRL and OpenRLHF runs (the scenarios named verl-*, trl-*, openrlhf-*) are written in those "
    "frameworks' formats; --live runs their process trees (Ray actors, torchrun ranks). They resume with the "
    "frameworks' own flags: verl trainer.resume_mode=auto (an override after OUT_DIR), TRL "
    "--resume_from_checkpoint PATH|true, OpenRLHF --ckpt.load_enable."
)


LARGE_RUN_STEPS = 1000
"""From this many steps a written run takes long enough (seconds) to show a spinner on a terminal."""
MAX_STEPS = 1_000_000
"""A typo of a few more digits would write until the disk is full (the bench's 100,000 steps take 2.5 GB)."""


def simulate(
    scenario: Annotated[str | None, typer.Argument(help="Scenario name (see --list).", show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Argument(help="Run directory to write.", show_default=False)] = None,
    hydra: Annotated[
        list[str] | None, typer.Argument(help="verl runs: Hydra overrides (trainer.resume_mode=auto).", show_default=False)
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="Name every scenario with a one-line description.")] = False,
    layout: Annotated[str | None, typer.Option("--layout", help="H or L (default: the scenario's).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed (same seed, same bytes).")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Trainer steps written (live: the run's max_steps).")] = None,
    onset: Annotated[int | None, typer.Option("--onset", help="Step the failure starts at.")] = None,
    severity: Annotated[float | None, typer.Option("--severity", help="Strength of the failure (1.0 = textbook).")] = None,
    step_time: Annotated[float | None, typer.Option("--step-time", help="Mean trainer step, simulated seconds.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a non-empty OUT_DIR.")] = False,
    live: Annotated[bool, typer.Option("--live", help="Write the run in real time from titled processes.")] = False,
    speed: Annotated[float, typer.Option("--speed", help="Live: simulated seconds per real second.")] = 60.0,
    output_dir: Annotated[Path | None, typer.Option("--output-dir", help="Same as OUT_DIR (prime-rl's flag).")] = None,
    run_name: Annotated[str | None, typer.Option("--run.name", help="H: the run is OUT_DIR/NAME (needed to resume).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="H: resume from the newest complete checkpoint.")] = False,
    resume_step: Annotated[int | None, typer.Option("--resume.step", help="H: resume from checkpoint step N.")] = None,
    ckpt_resume_step: Annotated[
        int | None, typer.Option("--ckpt.resume-step", help="L: resume from checkpoint step N (-1: the latest).")
    ] = None,
    resume_from_checkpoint: Annotated[
        str | None, typer.Option("--resume_from_checkpoint", help="TRL runs: resume from a checkpoint-N (true: the newest).")
    ] = None,
    load_enable: Annotated[bool, typer.Option("--ckpt.load_enable", help="OpenRLHF runs: resume from _actor/latest.")] = False,
    load_checkpoint: Annotated[
        bool, typer.Option("--load_checkpoint", help="OpenRLHF <= 0.10.1 runs: --ckpt.load_enable.")
    ] = False,
) -> None:
    from rlagent.evals.simulator import SCENARIOS
    from rlagent.evals.simulator.frameworks.registry import FRAMEWORK_SCENARIOS
    from rlagent.evals.simulator.launch import LaunchError

    if list_:
        width = max(map(len, [*SCENARIOS, *FRAMEWORK_SCENARIOS]))
        for name, sc in SCENARIOS.items():
            out.print(f"{name:<{width}}  {sc.layout}  {sc.description}")
        for name, fsc in FRAMEWORK_SCENARIOS.items():
            out.print(f"{name:<{width}}  {fsc.framework}  SIMULATED: {fsc.description}")
        return
    if scenario is None:
        fail("missing SCENARIO (see `rlagent simulate --list`)")
    if steps is not None and steps < 1:
        fail(f"--steps must be at least 1, not {steps}")
    if steps is not None and steps > MAX_STEPS:
        fail(f"--steps must be at most {MAX_STEPS:,} (about 25 KB a step on disk), not {steps:,}")
    target = out_dir or output_dir
    if target is not None and Path(target).exists() and not Path(target).is_dir():
        from rlagent.tools.safefs import kind_of

        mode = Path(target).stat().st_mode
        what = "a file" if stat.S_ISREG(mode) else kind_of(mode)  # a FIFO or /dev/null is no file either
        fail(f"{target} is {what}, not a directory: give a new or empty directory as OUT_DIR")
    if scenario in FRAMEWORK_SCENARIOS:
        if layout is not None or run_name is not None or resume or resume_step is not None or ckpt_resume_step is not None:
            fail("--layout, --run.name and the prime-rl resume flags are for prime-rl scenarios")
        root = out_dir or output_dir
        if root is None:
            fail("missing OUT_DIR")
        if speed <= 0:
            fail(f"--speed must be positive, not {speed}")
        _framework(
            scenario,
            Path(root),
            {"seed": seed, "onset_step": onset, "severity": severity, "step_time_s": step_time, "steps": steps},
            (tuple(hydra or ()), resume_from_checkpoint, load_enable or load_checkpoint),
            overwrite=overwrite,
            live=live,
            speed=speed,
        )
        return
    if hydra or resume_from_checkpoint is not None or load_enable or load_checkpoint:
        fail("unexpected argument(s): Hydra overrides and framework resume flags are for verl, TRL and OpenRLHF scenarios")
    if scenario not in SCENARIOS:
        fail(f"unknown scenario {scenario!r} (see `rlagent simulate --list`)")
    if out_dir is not None and output_dir is not None and out_dir != output_dir:
        fail("give the run directory once: OUT_DIR or --output-dir")
    root = out_dir or output_dir
    if root is None:
        fail("missing OUT_DIR")
    if layout is not None and layout not in ("H", "L"):
        fail(f"--layout must be H or L, not {layout!r}")
    if speed <= 0:
        fail(f"--speed must be positive, not {speed}")
    overrides = {
        "layout": layout,
        "seed": seed,
        "onset_step": onset,
        "severity": severity,
        "step_time_s": step_time,
        "steps": steps,
    }
    try:
        _run(
            SCENARIOS[scenario],
            Path(root),
            overrides,
            resume_flags=(resume, resume_step, ckpt_resume_step),
            run_name=run_name,
            overwrite=overwrite,
            live=live,
            speed=speed,
        )
    except LaunchError as exc:
        fail(str(exc))


simulate.__doc__ = HELP


def _framework(name: str, root: Path, changes: dict, flags: tuple, *, overwrite: bool, live: bool, speed: float) -> None:
    """A SIMULATED verl, TRL or OpenRLHF launch (rlagent.evals.simulator.frameworks.launch)."""
    from rlagent.evals.simulator.frameworks.launch import ResumeFlags, launch
    from rlagent.evals.simulator.frameworks.writer import FrameworkLaunchError

    overrides, resume_from_checkpoint, load_enable = flags
    started = time.perf_counter()
    try:
        scenario, summary = launch(
            name,
            root,
            changes,
            ResumeFlags(overrides, resume_from_checkpoint, load_enable),
            overwrite=overwrite,
            live=live,
            speed=speed,
        )
    except FrameworkLaunchError as exc:
        fail(str(exc))
    if live:
        from rlagent.evals.simulator.frameworks.live import run_live

        raise typer.Exit(run_live(scenario, root, speed=speed))
    expects = ", ".join(scenario.expectation.expects) if scenario.ends_early or scenario.kind != "healthy" else "no warning"
    if scenario.attempt > 1 and scenario.expectation.ends_run:
        expects = "no warning (the resume gets past the crash)"
    out.print(f"{summary} in {time.perf_counter() - started:.2f}s; a check-in should report: {expects}")


def _run(
    base, root: Path, overrides: dict, *, resume_flags: tuple, run_name: str | None, overwrite: bool, live: bool, speed: float
) -> None:
    """Resolve the launch (fresh or resumed, as prime-rl would) and write or run it."""
    from rlagent.evals.simulator import launch

    resume, resume_step, ckpt_resume_step = resume_flags
    wants_resume = resume or resume_step is not None or ckpt_resume_step is not None
    layout = overrides["layout"] or base.layout
    if layout == "H" and ckpt_resume_step is not None:
        raise launch.LaunchError("--ckpt.resume-step does not exist in layout H: use --resume or --resume.step N")
    if layout == "L" and (resume or resume_step is not None):
        raise launch.LaunchError("--resume / --resume.step do not exist in layout L: use --ckpt.resume-step N (-1: latest)")
    if layout == "L" and run_name is not None:
        raise launch.LaunchError("--run.name does not exist in layout L: the run is its --output-dir")
    run_dir = root / run_name if run_name else root
    if wants_resume:
        if not run_dir.is_dir():
            raise launch.LaunchError(f"{run_dir}: no such run to resume (prime-rl would start a new run from scratch)")
        step = launch.resume_step(run_dir, layout, resume_step if layout == "H" else ckpt_resume_step)
        scenario = launch.resumed(run_dir, step, overrides)
        if live:  # a live attempt goes on until max_steps, a crash or Ctrl-C
            scenario = scenario.model_copy(update={"steps": scenario.max_steps, "finished": True})
    else:
        if not launch.is_empty(run_dir) and not overwrite:
            raise launch.LaunchError(f"{run_dir} is not empty: pass --overwrite to replace it, or resume it")
        scenario = _fresh(base, overrides, live)
    if live and scenario.resume_step is None:
        # real processes on this machine: configs and log lines name the real run directory
        scenario = scenario.model_copy(update={"output_root": str(run_dir.resolve().parent), "run_label": run_dir.name})
    elif run_name and scenario.resume_step is None:
        scenario = scenario.model_copy(update={"run_label": run_name})
    if live:
        from rlagent.evals.simulator.live import run_live

        raise typer.Exit(run_live(scenario, run_dir, speed=speed, overwrite=overwrite))
    _write(scenario, run_dir, overwrite)


def _fresh(base, overrides: dict, live: bool):
    from rlagent.evals.simulator.launch import LaunchError

    changes = {k: v for k, v in overrides.items() if v is not None}
    steps = changes.get("steps")
    if steps is not None and steps > base.max_steps:
        changes["max_steps"] = steps
    if live:
        # a live run goes on until max_steps (--steps sets it), a crash or Ctrl-C
        changes["max_steps"] = steps or base.max_steps
        changes["steps"] = changes["max_steps"]
        changes["finished"] = True
    elif base.finished and steps is not None:
        changes["max_steps"] = steps
    try:
        scenario = base.variant(**changes)
    except ValueError as exc:
        raise LaunchError(_first_error(exc)) from exc
    if scenario.finished and scenario.ends_early:
        scenario = scenario.variant(finished=False)
    return scenario


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"bad parameter{f' {where}' if where else ''}: {first['msg'].removeprefix('Value error, ')}"
    return str(exc)


def _write(scenario, run_dir: Path, overwrite: bool) -> None:
    from rlagent.commands.progress import working
    from rlagent.evals.simulator import launch
    from rlagent.evals.simulator.writer import resume_run, write_run

    started = time.perf_counter()
    with working(f"writing {scenario.steps} simulated steps to {run_dir}", enabled=scenario.steps >= LARGE_RUN_STEPS):
        if scenario.resume_step is None:
            write_run(scenario, run_dir, overwrite=overwrite)
            launch.save_params(run_dir, scenario)
        else:
            if scenario.layout == "L":
                launch.truncate_l_logs(run_dir)
            resume_run(scenario, run_dir)
    took = time.perf_counter() - started
    what = f"attempt {scenario.attempt} from step {scenario.resume_step}" if scenario.resume_step else f"{scenario.steps} steps"
    expects = ", ".join(scenario.expects) or "no warning"
    out.print(
        f"wrote {escape(str(run_dir))} ({scenario.name}, layout {scenario.layout}, seed {scenario.seed}, {what}) in {took:.2f}s; "
        f"a check-in should report: {expects}"
        + (f" (signal from step {scenario.signal_step})" if scenario.signal_step and scenario.expects else "")
    )
