"""Framework adapters: one module per framework, all behind `base.FrameworkAdapter`.

Adding a framework is one module with an adapter class, listed in ADAPTERS.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from rlagent.models.run import Framework, RunInfo
from rlagent.tools.adapters.common import LOG_SUFFIXES
from rlagent.tools.adapters.openrlhf import OpenRLHFAdapter
from rlagent.tools.adapters.primerl import PrimeRLAdapter
from rlagent.tools.adapters.trl import TrlAdapter
from rlagent.tools.adapters.verl import VerlAdapter
from rlagent.tools.frameworks.detect import detect_dir, detect_file

ADAPTERS = (PrimeRLAdapter(), VerlAdapter(), TrlAdapter(), OpenRLHFAdapter())
"""Every framework rlagent reads, prime-rl first (it wins a tie: its layout is checked exactly)."""


class NoFramework(Exception):
    """A directory no adapter recognises."""


def adapter_for(framework: Framework | str):
    name = Framework(framework)
    return next(a for a in ADAPTERS if a.framework is name)


def discover(path: Path, framework: Framework | str | None = None) -> RunInfo:
    """The run at `path`: of `framework` when given, else of the framework with the most evidence."""
    path = Path(path)
    if framework is not None:
        return adapter_for(framework).discover(path)
    if not path.is_dir():
        raise NoFramework(f"{path}: not a directory")
    detection = detect_dir(path)
    others = {name: n for name, n in detection.counts.items() if name != Framework.PRIME_RL.value and n}
    for adapter in ADAPTERS[1:]:
        if adapter.launch_script(path) is not None:  # a run that died before its first step has only its script
            others[adapter.framework.value] = others.get(adapter.framework.value, 0) + 1
    prime = ADAPTERS[0].recognise(path)
    if others and max(others.values()) > detection.counts.get(Framework.PRIME_RL.value, 0) + (prime >= 100):
        return adapter_for(max(others, key=lambda name: others[name])).discover(path)
    if prime:
        return ADAPTERS[0].discover(path)
    raise NoFramework(f"{path}: no prime-rl, verl, TRL or OpenRLHF run found (no step lines, no known layout)")


MAX_LOGS_HERE = 10


def run_here(path: Path) -> RunInfo | None:
    """The verl, TRL or OpenRLHF run whose own files lie in `path` itself, not only in folders under
    it: the framework's launch script, or a console log whose text is the framework's. This is how a
    directory of several runs is told from one run (the fleet walks down until it finds one)."""
    path = Path(path)
    try:
        names = sorted(entry.name for entry in os.scandir(path) if entry.is_file())
    except OSError:
        return None
    for adapter in ADAPTERS[1:]:
        if adapter.launch_script(path) is not None:
            return adapter.discover(path.resolve())
    votes: Counter[str] = Counter()
    for name in [n for n in names if n.endswith(LOG_SUFFIXES)][:MAX_LOGS_HERE]:
        found = detect_file(path / name).framework
        if found is not None and found != Framework.PRIME_RL.value:
            votes[found] += 1
    return adapter_for(votes.most_common(1)[0][0]).discover(path.resolve()) if votes else None
