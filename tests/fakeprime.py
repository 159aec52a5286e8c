"""A tiny stand-in for prime-rl's `rl` launcher, for the gate's end-to-end tests.

Unlike `rlagent simulate --live` it sets `WANDB_ARGS` in its children's environment the way
prime-rl does, under an untitled torchrun-like parent: the launch-command discovery is tested
against it. It is stdlib + setproctitle only, so it starts in a few tens of milliseconds.

It behaves where rlagent looks: processes titled `PRIME-RL::Launcher`, `::Trainer` (under an
untitled torchrun-like parent that holds `WANDB_ARGS`, the launcher's argv) and
`::Orchestrator`; layout-H files (`configs/*.json`, `logs/attempt_N` + `logs/latest`, loguru step
lines, `checkpoints/step_N/{trainer/.metadata,orchestrator/progress.pt}`); a crash at a set step
with `Fatal error in train` and the launcher's `Error: Trainer failed with exit code 1`; resume
with `--run.name NAME --resume.step N` into a new attempt. It only ever writes under its output dir.

    rl @ demo.toml [--output-dir DIR] [--run.name NAME] [--max-steps N] [--resume.step N]

demo.toml: `output_dir`, `max_steps`, and `[demo]` `step_seconds`, `crash_at_step` (first attempt
only), `ckpt_interval`, `seq_len`, `max_completion_tokens`. Other `--flags VALUE` are accepted.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from datetime import datetime
from pathlib import Path

_LEVEL = {"INFO": "\x1b[1m", "SUCCESS": "\x1b[32m\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m"}


def log_line(level: str, message: str) -> str:
    """A record as prime-rl's colorized loguru sink writes it (prime-rl-formats.md section 1)."""
    ansi = _LEVEL[level]
    return f"\x1b[2m{datetime.now():%H:%M:%S}\x1b[0m {ansi}{level: >7}\x1b[0m {ansi}\x1b[22m{message}\x1b[0m\x1b[0m\n"


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the parent dies, so nothing outlives a killed launcher."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def parse(argv: list[str]) -> dict:
    opts: dict = {"config": None, "flags": {}}
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "@":
            opts["config"] = argv[index + 1]
            index += 2
        elif token.startswith("--"):
            name, _, inline = token[2:].partition("=")
            if inline:
                opts["flags"][name.replace("_", "-")] = inline
                index += 1
            else:
                opts["flags"][name.replace("_", "-")] = argv[index + 1] if index + 1 < len(argv) else ""
                index += 2
        else:
            index += 1
    return opts


def _spec(argv: list[str]) -> dict:
    opts = parse(argv)
    config = tomllib.loads(Path(opts["config"]).read_text()) if opts["config"] else {}
    demo = config.get("demo", {})
    flags = opts["flags"]
    resume = int(flags["resume.step"]) if "resume.step" in flags else None
    output_dir = Path(flags.get("output-dir", config.get("output_dir", "outputs"))).resolve()
    return {
        "run_dir": str(output_dir / flags.get("run.name", config.get("run_name", "demo-run"))),
        "max_steps": int(flags.get("max-steps", config.get("max_steps", 40))),
        "resume": resume,
        "step_seconds": float(demo.get("step_seconds", 1.0)),
        "crash_at": None if resume else demo.get("crash_at_step"),
        "ckpt_interval": int(demo.get("ckpt_interval", 5)),
        "seq_len": int(flags.get("seq-len", demo.get("seq_len", 2048))),
        "max_completion_tokens": int(demo.get("max_completion_tokens", 128)),
    }


def _prepare(spec: dict) -> Path:
    run_dir = Path(spec["run_dir"])
    if spec["resume"] is None and (run_dir / "checkpoints").exists():
        print(f"FileExistsError: Run directory '{run_dir}' already contains artifacts from a previous run.", flush=True)
        sys.exit(1)
    if spec["resume"] is not None:
        step_dir = run_dir / "checkpoints" / f"step_{spec['resume']}"
        if not (step_dir / "trainer" / ".metadata").exists():
            print(f"No checkpoint at step {spec['resume']} in {run_dir / 'checkpoints'}", flush=True)
            sys.exit(1)
    (run_dir / "configs").mkdir(parents=True, exist_ok=True)
    trainer = {
        "max_steps": spec["max_steps"],
        "output_dir": str(run_dir),
        "model": {"name": "Qwen/Qwen3-0.6B", "seq_len": spec["seq_len"]},
    }
    trainer["ckpt"] = {"interval": spec["ckpt_interval"]}
    orchestrator = {
        "max_steps": spec["max_steps"],
        "output_dir": str(run_dir),
        "batch_size": 64,
        "group_size": 8,
        "seq_len": spec["seq_len"],
        "train": {"sampling": {"max_completion_tokens": spec["max_completion_tokens"], "temperature": 1.0}},
    }
    (run_dir / "configs" / "trainer.json").write_text(json.dumps(trainer))
    (run_dir / "configs" / "orchestrator.json").write_text(json.dumps(orchestrator))
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    attempt = 1 + max((int(p.name.split("_")[1]) for p in logs.glob("attempt_*")), default=0)
    (logs / f"attempt_{attempt}").mkdir()
    latest = logs / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(f"attempt_{attempt}")
    return logs / f"attempt_{attempt}"


def launcher(argv: list[str]) -> int:
    import setproctitle

    spec = _spec(argv)
    attempt_dir = _prepare(spec)
    setproctitle.setproctitle("PRIME-RL::Launcher")
    env = {**os.environ, "WANDB_ARGS": json.dumps(argv_of_launcher()), "PRL_RUN_NAME": Path(spec["run_dir"]).name}
    env["DEMO_RUN_SPEC"] = json.dumps({**spec, "attempt_dir": str(attempt_dir)})
    me = [sys.executable, __file__]
    print(f"Starting RL run in {spec['run_dir']} ({attempt_dir.name})", flush=True)
    children = {
        "Trainer": subprocess.Popen([*me, "--role", "torchrun"], env=env),
        "Orchestrator": subprocess.Popen([*me, "--role", "orchestrator"], env=env),
    }
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    code = 0
    while not stopping:
        done = {name: p.poll() for name, p in children.items() if p.poll() is not None}
        failed = {name: rc for name, rc in done.items() if rc != 0}
        if failed:
            name, rc = next(iter(failed.items()))
            print(f"Error: {name} failed with exit code {rc}", flush=True)
            print("Terminating all processes...", flush=True)
            code = 1
            break
        if len(done) == len(children):
            print("Training finished!", flush=True)
            return 0
        time.sleep(0.05)
    if stopping:
        print("Received interrupt signal, terminating all processes...", flush=True)
        code = 130
    for proc in children.values():
        if proc.poll() is None:
            proc.terminate()
    for proc in children.values():
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return code


def argv_of_launcher() -> list[str]:
    """The launcher's argv as prime-rl stores it in WANDB_ARGS: its own `sys.argv`."""
    return list(sys.argv)


def torchrun() -> int:
    """An untitled parent of the trainer, as torchrun is: its environment keeps WANDB_ARGS."""
    _die_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    child = subprocess.Popen([sys.executable, __file__, "--role", "trainer"])
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()


def worker(role: str) -> int:
    import setproctitle

    _die_with_parent()
    spec = json.loads(os.environ["DEMO_RUN_SPEC"])
    setproctitle.setproctitle(f"PRIME-RL::{role.capitalize()}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    attempt_dir, run_dir = Path(spec["attempt_dir"]), Path(spec["run_dir"])
    prefix = "[trainer0]:" if role == "trainer" else ""
    with open(attempt_dir / f"{role}.log", "a", buffering=1, encoding="utf-8") as log:

        def write(level: str, message: str) -> None:
            log.write(prefix + log_line(level, message))

        start = spec["resume"] or 0
        write("INFO", f"Starting {role}")
        if spec["resume"]:
            what = "training" if role == "trainer" else "orchestrator"
            write("INFO", f"Resuming {what} from checkpoint step {start}")
        for step in range(start + 1, spec["max_steps"] + 1):
            time.sleep(spec["step_seconds"])
            if role == "trainer" and spec["crash_at"] == step:
                write("ERROR", "Fatal error in train")
                log.write(f"{prefix}Traceback (most recent call last):\n")
                log.write(f'{prefix}  File "/workspace/prime-rl/src/prime_rl/trainer/rl/train.py", line 412, in train\n')
                log.write(f"{prefix}RuntimeError: simulated trainer failure at step {step}\n")
                return 1
            if role == "trainer":
                write(
                    "SUCCESS",
                    f"Step {step} | {spec['step_seconds']:>6.1f}s | Loss 0.0012 | Entropy 0.4410 | Mismatch KL 0.0008 | "
                    "Grad. Norm 0.2143 | LR 3.00e-06 | Throughput 10432 tokens/s | MFU 12.1% | Peak Mem. 31.7 GiB",
                )
            else:
                write(
                    "SUCCESS",
                    f"Step {step} | {spec['step_seconds']:>6.1f}s | Reward {0.3 + 0.002 * step:.4f} | "
                    "Trainable 112/128 (87.5%) | Turns 1.0 | Branches 1.0 | Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | "
                    "Truncation 3.1%",
                )
            if step % spec["ckpt_interval"] == 0:
                part = run_dir / "checkpoints" / f"step_{step}" / role
                part.mkdir(parents=True, exist_ok=True)
                (part / (".metadata" if role == "trainer" else "progress.pt")).write_text("demo\n")
        write("SUCCESS", "RL trainer finished!" if role == "trainer" else "Orchestrator finished.")
    return 0


def main() -> None:
    """`--role` is internal (the launcher starts its own children with it)."""
    if sys.argv[1:2] == ["--role"]:
        role = sys.argv[2]
        sys.exit(torchrun() if role == "torchrun" else worker(role))
    sys.exit(launcher(sys.argv[1:]))


def write_rl_script(bin_dir: Path) -> Path:
    """An executable `rl` for the stand-in: its argv[0] is a runnable path, as prime-rl's is."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "rl"
    here = str(Path(__file__).resolve().parent)
    path.write_text(f"#!{sys.executable}\nimport sys\n\nsys.path.insert(0, {here!r})\nfrom fakeprime import main\n\nmain()\n")
    path.chmod(0o755)
    return path


if __name__ == "__main__":
    main()
