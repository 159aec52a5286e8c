"""Host and service probes: RAM, disk, vLLM `/metrics` (SLURM: tools/slurm_probe). Each bounded in time.

The host (RAM, disk) and HTTP are reached through two small interfaces, `HostProbe` and
`HttpGet`, whose real implementations are here; the collector takes them as dependencies, so
tests pass fakes (tests/fakes.py).
"""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol

import psutil

_PROM_LINE = re.compile(r"^(vllm:[a-z_]+)(?:\{[^}]*\})? ([-+0-9.eE]+|NaN)\s*$", re.M)
VLLM_KEYS = ("kv_cache_usage_perc", "gpu_cache_usage_perc", "num_requests_waiting", "num_requests_running")


class HostProbe(Protocol):
    def ram_percent(self) -> float:
        """Host RAM in use, percent."""
        ...

    def disk_free(self, path: Path) -> tuple[float, float]:
        """(free fraction, free GiB) of the filesystem holding `path`; OSError if it cannot tell."""
        ...


class HttpGet(Protocol):
    def __call__(self, url: str, timeout: float) -> str:
        """The body of GET `url` (at most 4 MB); OSError or ValueError when it cannot be had."""
        ...


def host_ram_percent() -> float:
    return psutil.virtual_memory().percent


def disk_free(path: Path) -> tuple[float, float]:
    """(free fraction, free GiB) of the filesystem holding `path`."""
    usage = shutil.disk_usage(path)
    return usage.free / usage.total, usage.free / 2**30


class SystemHost:
    """The real host probe: psutil and statvfs."""

    def ram_percent(self) -> float:
        return host_ram_percent()

    def disk_free(self, path: Path) -> tuple[float, float]:
        return disk_free(path)


def urllib_get(url: str, timeout: float) -> str:
    """The real HTTP GET (urllib; no proxy settings are special-cased)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read(4 << 20).decode("utf-8", "replace")


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """Sum each vLLM gauge over its label sets (max for cache usage, which is a fraction)."""
    out: dict[str, float] = {}
    for name, value in _PROM_LINE.findall(text):
        key = name.removeprefix("vllm:")
        if key not in VLLM_KEYS:
            continue
        number = float(value)
        if key.endswith("_perc"):
            out[key] = max(out.get(key, 0.0), number)
        else:
            out[key] = out.get(key, 0.0) + number
    return out


def probe_vllm(base_url: str, timeout: float = 2.0, get: HttpGet = urllib_get) -> dict[str, float]:
    """GET {base_url}/metrics; H's router (8000) fronts the engine (8100), so try the engine too."""
    urls = [base_url.rstrip("/") + "/metrics"]
    match = re.match(r"^(https?://[^/:]+):8000$", base_url.rstrip("/"))
    if match:
        urls.append(f"{match.group(1)}:8100/metrics")
    last_error: Exception | None = None
    for url in urls:
        try:
            metrics = parse_vllm_metrics(get(url, timeout))
            if metrics:
                return metrics
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last_error = exc
    if last_error is not None:
        raise OSError(f"vLLM /metrics at {base_url} not reachable ({last_error})")
    return {}
