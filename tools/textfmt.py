"""Small text helpers: cadence parsing, sparklines, number formatting."""

from __future__ import annotations

import math
import re

_CADENCE = re.compile(r"(\d+)(d|h|m|s)")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
MAX_CADENCE_S = 366 * 86400
"""Longer waits are a typo; they would overflow the clock's sleep and the dates computed from them."""
_BARS = "▁▂▃▄▅▆▇█"


def parse_cadence(text: str) -> int:
    """`30s`, `10m`, `1h`, `1h30m` -> seconds. Raises ValueError with a clear message."""
    compact = text.strip().lower().replace(" ", "")
    parts = _CADENCE.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"bad cadence {text!r}: use a duration like 30s, 10m, 1h or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"bad cadence {text!r}: must be longer than 0s")
    if seconds > MAX_CADENCE_S:
        raise ValueError(f"bad cadence {text!r}: at most a year (366d)")
    return seconds


def sparkline(values: list[float], width: int = 24) -> str:
    """Unicode sparkline of the last `width` values; non-finite values show as `×`."""
    values = values[-width:]
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "×" * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append("×")
        elif span == 0:
            out.append(_BARS[3])
        else:
            out.append(_BARS[min(7, int((v - low) / span * 7.999))])
    return "".join(out)


def fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 10**6):
        return f"{value:.2e}"
    return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"


def pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return fmt(value)
    return f"{value * 100:.1f}%"
