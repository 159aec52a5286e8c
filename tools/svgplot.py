"""Server-rendered SVG line plots: one small, self-contained `<svg>` per plot, no script.

Why SVG strings and not a JavaScript chart library: the report must open with no network, and a
plot here is a few hundred points; a path per series is ~5 KB, renders in any browser (or none:
the file is readable as text), prints, and cannot throw at view time. Series are bounded before
drawing (min/max per bucket, so a spike survives downsampling).

Coordinates are rounded to one decimal; every label goes through `escape`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

MAX_POINTS = 400
"""Points kept per series: above it, the min and the max of each of MAX_POINTS/2 step buckets."""

PALETTE = ("#2563eb", "#d97706", "#059669", "#7c3aed")
SEVERITY_COLOR = {"critical": "#dc2626", "warning": "#d97706", "info": "#6b7280"}


def downsample(points: Sequence[tuple[int, float]], limit: int = MAX_POINTS) -> list[tuple[int, float]]:
    """At most `limit` points in step order; each bucket keeps its lowest and highest value."""
    if len(points) <= limit:
        return list(points)
    buckets = max(1, limit // 2)
    size = len(points) / buckets
    values = [v for _, v in points]
    bounds = sorted({int(b * size) for b in range(buckets + 1)})  # a bucket that would be empty is skipped
    starts = bounds[:-1]
    chunks = [values[a:b] for a, b in zip(starts, bounds[1:], strict=True)]
    # Each bucket's first lowest and first highest, found by map over C functions, not a Python loop.
    lows = map(list.index, chunks, map(min, chunks))
    highs = map(list.index, chunks, map(max, chunks))
    out: list[tuple[int, float]] = []
    for start, low, high in zip(starts, lows, highs, strict=True):
        first, second = (low, high) if low <= high else (high, low)
        out.append(points[start + first])
        if second != first:
            out.append(points[start + second])
    return out


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.2e}"
    if magnitude >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def line_plot(
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[int, float]], Sequence[int]]],
    marks: Sequence[tuple[int, str, str, str]] = (),
    *,
    unit: str = "",
    width: int = 360,
    height: int = 150,
    key: str = "",
) -> str:
    """An SVG line plot. `series`: (name, [(step, value)], [non-finite steps]); `marks`: (step,
    kind, severity, label) drawn as vertical lines across the plot (findings, restarts)."""
    left, right, top, bottom = 44, 8, 18, 20
    pw, ph = width - left - right, height - top - bottom
    steps = [s for _, pts, bad in series for s in [*(p[0] for p in pts), *bad]]
    values = [v for _, pts, _ in series for _, v in pts]
    if not steps:
        return ""
    x0, x1 = min(steps), max(steps)
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = (min(values), max(values)) if values else (0.0, 1.0)
    if y1 == y0:
        pad = abs(y0) * 0.05 or 1.0
        y0, y1 = y0 - pad, y1 + pad

    def x(step: float) -> float:
        return round(left + (step - x0) / (x1 - x0) * pw, 1)

    def y(value: float) -> float:
        return round(top + (1 - (value - y0) / (y1 - y0)) * ph, 1)

    parts = [
        f'<svg class="plot" data-key="{escape(key)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text class="title" x="{left}" y="12">{escape(title)}{escape(f" ({unit})" if unit else "")}</text>',
        f'<rect class="frame" x="{left}" y="{top}" width="{pw}" height="{ph}"/>',
        f'<text class="tick" x="{left - 4}" y="{top + 4}" text-anchor="end">{_fmt(y1)}</text>',
        f'<text class="tick" x="{left - 4}" y="{top + ph}" text-anchor="end">{_fmt(y0)}</text>',
        f'<text class="tick" x="{left}" y="{height - 6}">{x0}</text>',
        f'<text class="tick" x="{left + pw}" y="{height - 6}" text-anchor="end">step {max(steps)}</text>',
    ]
    for step, kind, severity, label in marks:
        if not x0 <= step <= max(steps):
            continue
        color = SEVERITY_COLOR.get(severity, "#6b7280") if kind == "finding" else "#0f766e"
        dash = "4 3" if kind == "finding" else "1 2"
        parts.append(
            f'<line class="mark {escape(kind)}" x1="{x(step)}" x2="{x(step)}" y1="{top}" y2="{top + ph}" '
            f'stroke="{color}" stroke-dasharray="{dash}"><title>{escape(label)} @ step {step}</title></line>'
        )
    for i, (name, pts, bad) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        if pts:
            d = "M" + "L".join(f"{x(s)},{y(v)}" for s, v in pts)
            parts.append(
                f'<path class="series" data-series="{escape(name)}" data-points="{len(pts)}" d="{d}" fill="none" '
                f'stroke="{color}" stroke-width="1.4" stroke-linejoin="round"><title>{escape(name)}</title></path>'
            )
            if len(pts) == 1:
                s, v = pts[0]
                parts.append(f'<circle class="point" cx="{x(s)}" cy="{y(v)}" r="2.5" fill="{color}"/>')
        for s in bad:
            parts.append(
                f'<line class="nonfinite" x1="{x(s)}" x2="{x(s)}" y1="{top + ph - 6}" y2="{top + ph}" stroke="#dc2626" '
                f'stroke-width="2"><title>{escape(name)} not finite @ step {s}</title></line>'
            )
        if len(series) > 1:
            lx = left + 6 + i * 110
            parts.append(
                f'<text class="legend" x="{lx + 12}" y="{top + 12}" fill="{color}">{escape(name)}</text>'
                f'<rect x="{lx}" y="{top + 6}" width="9" height="3" fill="{color}"/>'
            )
    parts.append("</svg>")
    return "".join(parts)


def sparkline_svg(points: Sequence[float], width: int = 90, height: int = 20) -> str:
    """A tiny inline trend (fleet table), finite values only."""
    values = [v for v in points if math.isfinite(v)][-60:]
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = width / (len(values) - 1)
    d = "M" + "L".join(
        f"{round(i * step, 1)},{round(height - 2 - (v - low) / span * (height - 4), 1)}" for i, v in enumerate(values)
    )
    return (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}"><path class="series" d="{d}" fill="none" stroke="#2563eb" stroke-width="1.2"/></svg>'
    )
