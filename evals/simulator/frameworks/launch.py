"""`rlagent simulate <verl|trl|openrlhf scenario> DIR [--live] [resume flags]`: one launch of a SIMULATED
run, fresh or resumed as the framework resumes (tests and demos only).

Resume flags are the frameworks' own, so a resume command built from the run's launch command works:
- verl: Hydra overrides after DIR, `trainer.resume_mode=auto` (verl's default: a relaunch without it
  resumes too), `trainer.resume_mode=resume_path trainer.resume_from_path=.../global_step_N`, or
  `trainer.resume_mode=disable` (from scratch);
- TRL: `--resume_from_checkpoint PATH` (a `checkpoint-N` under output_dir) or `--resume_from_checkpoint true`
  (the newest), as the run's script passes it on to `trainer.train`;
- OpenRLHF: `--ckpt.load_enable` (`--load_checkpoint` for the <= 0.8 style): `_actor/latest`.
A relaunch that the framework would start from scratch over an existing run is refused (one line, exit
status 2) unless `--overwrite`; so is a resume with no checkpoint to resume from.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .registry import FRAMEWORK_SCENARIOS
from .scenario import FrameworkScenario
from .writer import PARAMS_FILE, FrameworkLaunchError, load_params, next_attempt, resume_point, write_framework_run


@dataclass(frozen=True)
class ResumeFlags:
    overrides: tuple[str, ...] = ()
    """verl Hydra overrides given after the run directory."""
    resume_from_checkpoint: str | None = None
    """TRL."""
    load_enable: bool = False
    """OpenRLHF `--ckpt.load_enable` / `--load_checkpoint`."""


def _verl_resume(flags: ResumeFlags) -> tuple[bool, str | None]:
    """(resume?, requested path) from verl overrides; verl's default resume_mode is auto."""
    values = dict(o.split("=", 1) for o in flags.overrides if "=" in o)
    unknown = [
        o
        for o in flags.overrides
        if "=" not in o or o.split("=", 1)[0] not in ("trainer.resume_mode", "trainer.resume_from_path")
    ]
    if unknown:
        raise FrameworkLaunchError(f"unsupported override(s) for a simulated verl run: {' '.join(unknown)}")
    mode = values.get("trainer.resume_mode", "auto")
    if mode not in ("auto", "disable", "resume_path"):
        raise FrameworkLaunchError(f"trainer.resume_mode must be auto, disable or resume_path, not {mode!r}")
    if mode == "resume_path":
        path = values.get("trainer.resume_from_path")
        if not path or "global_step_" not in path:
            raise FrameworkLaunchError("resume ckpt must specify the global_steps (trainer.resume_from_path=.../global_step_N)")
        return True, path
    return mode == "auto", None


def _wants_resume(sc: FrameworkScenario, flags: ResumeFlags) -> tuple[bool, str | None]:
    if sc.framework == "verl":
        if flags.resume_from_checkpoint or flags.load_enable:
            raise FrameworkLaunchError("verl resumes with trainer.resume_mode=auto (a Hydra override), not that flag")
        return _verl_resume(flags)
    if flags.overrides:
        raise FrameworkLaunchError(f"unexpected argument(s) for a {sc.framework} run: {' '.join(flags.overrides)}")
    if sc.framework == "trl":
        if flags.load_enable:
            raise FrameworkLaunchError("TRL resumes with --resume_from_checkpoint PATH|true, not --ckpt.load_enable")
        return flags.resume_from_checkpoint is not None, flags.resume_from_checkpoint
    if flags.resume_from_checkpoint:
        raise FrameworkLaunchError("OpenRLHF resumes with --ckpt.load_enable, not --resume_from_checkpoint")
    return flags.load_enable, None


def launch(
    name: str,
    run_dir: Path,
    changes: dict,
    flags: ResumeFlags,
    *,
    overwrite: bool = False,
    live: bool = False,
    speed: float = 60.0,
) -> tuple[FrameworkScenario, str]:
    """Resolve one launch into its scenario and write it (offline); returns it and a one-line summary.
    A live launch is returned unstarted (the caller runs `live.run_live`)."""
    base = FRAMEWORK_SCENARIOS[name]
    params = load_params(run_dir) if run_dir.is_dir() else None
    has_run = params is not None or (run_dir.is_dir() and any(run_dir.iterdir()))
    fresh_changes = {k: v for k, v in changes.items() if v is not None}
    steps = fresh_changes.get("steps")
    if steps is not None and (live or base.finished or steps > base.max_steps):
        fresh_changes["max_steps"] = steps  # live, or a finished run: --steps is the run's length
    try:
        probe = base.variant(**fresh_changes) if fresh_changes else base
    except ValueError as exc:
        raise FrameworkLaunchError(_first_error(exc)) from exc
    want, requested = _wants_resume(probe, flags)
    if has_run and not overwrite:
        if params is None:
            raise FrameworkLaunchError(f"{run_dir} is not empty and was not written by `rlagent simulate`: pass --overwrite")
        if params.get("name") != name:
            raise FrameworkLaunchError(f"{run_dir} holds a run of {params.get('name')!r}, not {name!r}")
        saved = FrameworkScenario.model_validate(
            {k: v for k, v in params.items() if not k.startswith("_")} | {"start": base.start}
        )
        if not want:
            hint = {"verl": "trainer.resume_mode=auto", "trl": "--resume_from_checkpoint", "openrlhf": "--ckpt.load_enable"}
            raise FrameworkLaunchError(
                f"{run_dir} holds a run: {saved.framework} would start it from scratch; pass {hint[saved.framework]} to "
                "resume, or --overwrite"
            )
        step = _resume_step(run_dir, saved, requested)
        attempt = int(params.get("_attempts", 1))
        previous = saved.model_copy(update={"attempt": attempt})
        sc = next_attempt(previous, run_dir, step, steps=saved.max_steps if live else saved.steps)
        if live:
            sc = sc.model_copy(update={"steps": sc.max_steps, "finished": True})
        if sc.steps <= step:
            raise FrameworkLaunchError(f"the run already reached step {step} of {sc.steps}: nothing to resume")
        _save(run_dir, sc, attempt + 1)
        if live:
            return sc, f"resuming {name} from step {step} (attempt {sc.attempt}), live"
        write_framework_run(sc, run_dir)
        return sc, f"wrote attempt {sc.attempt} of {run_dir} ({name}, {sc.framework}) from checkpoint step {step}"
    if want and sc_has_checkpoint_request(probe, flags):
        raise FrameworkLaunchError(f"{run_dir}: no such run to resume ({probe.framework} would start from scratch)")
    sc = probe
    if live:
        # a live run goes on until max_steps (--steps sets it), a crash or Ctrl-C
        total = fresh_changes.get("steps", sc.max_steps)
        live_changes: dict = {"steps": total, "max_steps": total, "finished": not sc.expectation.ends_run}
        live_changes["launch_dir"] = str(run_dir.resolve())
        try:
            sc = sc.variant(**live_changes)
        except ValueError as exc:
            raise FrameworkLaunchError(_first_error(exc)) from exc
    run_dir.mkdir(parents=True, exist_ok=True)
    if live:
        if overwrite:
            _clear(run_dir)
        _save(run_dir, sc, 1)
        return sc, f"starting {name} live"
    write_framework_run(sc, run_dir, overwrite=True)
    _save(run_dir, sc, 1)
    what = f"until the crash at step {sc.crash_step}" if sc.ends_early else f"{sc.steps} steps"
    return sc, f"wrote {run_dir} ({name}, {sc.framework} {sc.style}, seed {sc.seed}, {what})"


def sc_has_checkpoint_request(sc: FrameworkScenario, flags: ResumeFlags) -> bool:
    """An explicit resume request (verl's default auto on a fresh dir just trains from scratch)."""
    if sc.framework == "verl":
        return any(o.startswith("trainer.resume_mode=resume_path") for o in flags.overrides)
    return flags.load_enable or flags.resume_from_checkpoint is not None


def _resume_step(run_dir: Path, sc: FrameworkScenario, requested: str | None) -> int:
    if sc.framework == "verl" and requested:
        name = requested.rstrip("/").rsplit("/", 1)[-1]
        step = name.removeprefix("global_step_")
        folder = Path(requested) if requested.startswith("/") else run_dir / requested
        if not step.isdigit() or not folder.is_dir():
            raise FrameworkLaunchError(f"no checkpoint folder {requested}")
        return int(step)
    step = resume_point(run_dir, sc, requested)
    if step is None:
        what = {
            "verl": "latest_checkpointed_iteration.txt",
            "trl": "checkpoint-N with trainer_state.json",
            "openrlhf": "_actor/latest",
        }
        raise FrameworkLaunchError(
            f"no checkpoint to resume from under {run_dir} (no {what[sc.framework]}): the framework would start from scratch"
        )
    return step


def _save(run_dir: Path, sc: FrameworkScenario, attempts: int) -> None:
    fields = sc.model_dump(mode="json", exclude={"attempt", "resume_step", "start", "pids"})
    fields["_attempts"] = attempts
    (run_dir / PARAMS_FILE).write_text(json.dumps(fields, indent=2) + "\n")


def _clear(run_dir: Path) -> None:
    for path in run_dir.iterdir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"bad parameter{f' {where}' if where else ''}: {first['msg'].removeprefix('Value error, ')}"
    return str(exc)
