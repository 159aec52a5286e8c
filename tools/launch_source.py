"""Where a run's own launch command can be found, each source on its own; none of them guesses.

In order of trust (the caller tries them in this order):
1. a person's `--launch-command` / config `launch_command` (parsed in tools.launch_command);
2. `WANDB_ARGS` (JSON of the launcher's `sys.argv`: the launcher process's own argv) in the
   environment of the run's children. setproctitle zeroes /proc/PID/environ of every titled
   `PRIME-RL::*` process, so it is read from untitled relatives (torchrun above the Trainer);
   only while the run is alive;
3. SLURM: the `rl @ ...` line of `{run_dir}/rl.sbatch`.

Not a source: the Launcher pane's history. The pane also shows what the training program prints
(model text), and a printed `user@host:~$ uv run rl ...` line looks exactly like a typed one.
`from_pane_history` finds such a line only so that it can be shown to a person as a guess to
confirm (agents.command_plan); a command is never built from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil

from rlagent.models.actions import LaunchCommand, LaunchSource
from rlagent.tools.launch_command import SHELL_OPERATORS, CommandError, check_argv, split_words

TITLES = ("PRIME-RL::", "Verifiers::")
SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "tmux: server", "tmux"})
# A shell prompt: a short prefix without spaces-heavy text (`(venv) user@host:~/prime-rl$ `), not a
# log record (`14:02:31    INFO ...`), which is program output and may quote model text.
_PROMPT = re.compile(r"^(?P<prompt>[^\s$#%]*(?: [^\s$#%]+)?[$#%]) (?P<cmd>\S.*)$")
_LOG_RECORD = re.compile(r"^\s*(?:\[\w+\]:)?\d\d:\d\d:\d\d\b")


def _is_launch(argv: list[str]) -> bool:
    """`rl ...`, `/path/.venv/bin/rl ...` or `uv run rl ...`: prime-rl's `rl` entrypoint."""
    if argv[:2] == ["uv", "run"]:
        argv = argv[2:]
    return bool(argv) and Path(argv[0]).name == "rl"


def parse_wandb_args(value: str) -> list[str] | None:
    try:
        argv = json.loads(value)
    except ValueError:
        return None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    try:
        check_argv(argv)
    except CommandError:
        return None
    return argv


def _titled(proc: psutil.Process) -> bool:
    try:
        first = (proc.cmdline() or [""])[0]
    except psutil.Error:
        return True
    return first.startswith(TITLES)


def from_processes(pids: list[int]) -> LaunchCommand | None:
    """WANDB_ARGS from an untitled relative (ancestors up to the first shell, then descendants)
    of the run's titled processes."""
    seen: set[int] = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            relatives = [p for p in proc.parents()[:3]] + proc.children(recursive=True)
        except psutil.Error:
            continue
        for relative in relatives:
            if relative.pid in seen or relative.pid <= 1:
                continue
            seen.add(relative.pid)
            try:
                name = relative.name()
                if name in SHELLS or _titled(relative):
                    continue
                env = relative.environ()
            except psutil.Error:
                continue
            argv = parse_wandb_args(env.get("WANDB_ARGS", ""))
            if argv:
                return LaunchCommand(
                    argv=argv, source=LaunchSource.WANDB_ARGS, detail=f"WANDB_ARGS of {name} (pid {relative.pid})"
                )
    return None


def from_pane_history(lines: list[str], run_name: str, run_dir: str) -> LaunchCommand | None:
    """The newest prompt line in the Launcher pane that seems to have launched this run: a guess
    for a person to confirm, never a launch command by itself (see the module docstring)."""
    for number in range(len(lines) - 1, -1, -1):
        match = _PROMPT.match(lines[number].rstrip())
        if not match or _LOG_RECORD.match(lines[number]):
            continue
        try:
            argv = split_words(match["cmd"])
            check_argv(argv)
        except (ValueError, CommandError):
            continue
        if not _is_launch(argv) or not any(run_name in token or run_dir in token for token in argv):
            continue
        return LaunchCommand(
            argv=argv, source=LaunchSource.LAUNCHER_PANE, detail=f"the Launcher pane's history ({len(lines) - number} lines up)"
        )
    return None


def from_sbatch(run_dir: Path) -> LaunchCommand | None:
    """The `rl @ ...` line of the run's rl.sbatch (re-run on the login node to resubmit)."""
    path = run_dir / "rl.sbatch"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = split_words(line.split(" #", 1)[0].rstrip().rstrip("\\"))
        except ValueError:
            continue
        for start, word in enumerate(words):
            if Path(word).name != "rl" or words[start + 1 : start + 2] != ["@"]:
                continue
            if start >= 2 and words[start - 2 : start] == ["uv", "run"]:
                start -= 2
            argv = []
            for token in words[start:]:
                if token in SHELL_OPERATORS:
                    if token[0] in "<>&" and argv and argv[-1].isdigit():
                        argv.pop()  # `2>` splits into `2` and `>`
                    break
                argv.append(token)
            try:
                check_argv(argv)
            except CommandError:
                continue
            return LaunchCommand(argv=argv, source=LaunchSource.SBATCH, detail=f"rl.sbatch line {number}")
    return None
