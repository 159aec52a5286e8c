"""Framework adapters: one module per framework, all behind `base.FrameworkAdapter`.

Adding a framework is one module with an adapter class, listed in ADAPTERS.
"""

from __future__ import annotations

from pathlib import Path

from rlagent.models.run import Framework, RunInfo
from rlagent.tools.adapters.openrlhf import OpenRLHFAdapter
from rlagent.tools.adapters.primerl import PrimeRLAdapter
from rlagent.tools.adapters.trl import TrlAdapter
from rlagent.tools.adapters.verl import VerlAdapter
from rlagent.tools.frameworks.detect import detect_dir

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
