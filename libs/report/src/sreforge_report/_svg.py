"""Inline SVG charts, pure: numbers in, one `<svg>` element out (no script, no fetch).

Every chart has a fixed viewBox and scales with the page; each drawn thing carries a
`<title>` (the browser's tooltip) and a class the tests and the stylesheet can find.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Band", "Line", "Marker", "Point", "cdf_chart", "line_chart", "scatter_chart"]

_W, _H = 900, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 34, 40


@dataclass(frozen=True)
class Line:
    """One series: (x, y) points (y None breaks the line), drawn in `color`."""

    label: str
    color: str
    points: Sequence[tuple[float, float | None]]
    dashed: bool = False


@dataclass(frozen=True)
class Band:
    """A shaded x range (e.g. the alert firing), behind the lines."""

    start: float
    end: float
    color: str
    label: str


@dataclass(frozen=True)
class Marker:
    """A vertical rule at `x` with a short label (e.g. `deployed`)."""

    x: float
    label: str
    color: str = "#444"


@dataclass(frozen=True)
class Point:
    """One labelled dot of a scatter chart."""

    label: str
    x: float
    y: float
    color: str


@dataclass(frozen=True)
class _Axes:
    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return _LEFT + (value - self.x0) / span * (_W - _LEFT - _RIGHT)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return _H - _BOTTOM - (value - self.y0) / span * (_H - _TOP - _BOTTOM)


def line_chart(
    lines: Sequence[Line],
    *,
    title: str,
    x_label: str,
    y_label: str,
    bands: Sequence[Band] = (),
    markers: Sequence[Marker] = (),
    y_min: float | None = None,
    y_max: float | None = None,
    threshold: tuple[float, str] | None = None,
) -> str:
    """A time-series chart: shaded bands, then lines, then labelled vertical markers."""
    xs = [x for line in lines for x, _ in line.points] + [m.x for m in markers]
    xs += [b.start for b in bands] + [b.end for b in bands]
    ys = [y for line in lines for _, y in line.points if y is not None]
    if threshold is not None:
        ys.append(threshold[0])
    axes = _axes(xs, ys, y_min, y_max)
    body = [_frame(axes, title, x_label, y_label)]
    body += [_band(axes, band) for band in bands]
    if threshold is not None:
        body.append(_threshold(axes, *threshold))
    body += [_polyline(axes, line) for line in lines]
    body += [_marker(axes, marker, row) for row, marker in enumerate(markers)]
    legend = [(line.label, line.color) for line in lines] + [(b.label, b.color) for b in bands]
    body.append(_legend(_dedupe(legend)))
    return _svg("chart line-chart", title, body)


def cdf_chart(
    curves: dict[str, Sequence[float]],
    colors: dict[str, str],
    *,
    title: str,
    totals: dict[str, int] | None = None,
) -> str:
    """Empirical CDFs (a step per value), one per key, over a shared x axis (seconds).

    `totals[key]` is the number of trials the share is of (default: the values'): trials
    that never produced a value keep the curve below 1."""
    xs = [v for values in curves.values() for v in values] or [0.0, 1.0]
    axes = _axes([0.0, *xs], [0.0, 1.0], 0.0, 1.0)
    body = [_frame(axes, title, "seconds from deploy to alert cleared", "share of trials")]
    for name, values in curves.items():
        ordered = sorted(values)
        whole = max((totals or {}).get(name, len(ordered)), len(ordered), 1)
        points: list[tuple[float, float | None]] = [(0.0, 0.0)]
        for index, value in enumerate(ordered):
            points += [(value, index / whole), (value, (index + 1) / whole)]
        points.append((axes.x1, len(ordered) / whole))
        body.append(_polyline(axes, Line(name, colors[name], points), css="cdf"))
    body.append(_legend([(name, colors[name]) for name in curves]))
    return _svg("chart cdf-chart", title, body)


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str) -> str:
    """Labelled dots (e.g. cost vs pass rate per agent)."""
    axes = _axes([0.0, *(p.x for p in points)], [p.y for p in points], 0.0, 1.0)
    axes = _Axes(axes.x0, axes.x0 + (axes.x1 - axes.x0) * 1.2, axes.y0, axes.y1)  # room for labels
    body = [_frame(axes, title, x_label, y_label)]
    for point in points:
        cx, cy = axes.x(point.x), axes.y(point.y)
        tip = escape(f"{point.label}: {point.x:.4g}, {point.y:.0%}")
        body.append(
            f'<g class="dot"><title>{tip}</title>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{point.color}"/>'
            f'<text x="{cx + 9:.1f}" y="{cy + 4:.1f}" font-size="12">'
            f"{escape(point.label)}</text></g>"
        )
    return _svg("chart scatter-chart", title, body)


def _axes(
    xs: Sequence[float], ys: Sequence[float], y_min: float | None, y_max: float | None
) -> _Axes:
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    low = y_min if y_min is not None else min(ys, default=0.0)
    high = y_max if y_max is not None else max(ys, default=1.0)
    if high <= low:
        high = low + 1.0
    pad = 0.0 if y_max is not None else (high - low) * 0.08
    return _Axes(x0, x1 if x1 > x0 else x0 + 1.0, low, high + pad)


def _frame(axes: _Axes, title: str, x_label: str, y_label: str) -> str:
    parts = [
        f'<text class="title" x="{_LEFT}" y="18" font-size="14" font-weight="600">'
        f"{escape(title)}</text>",
        f'<rect class="plot" x="{_LEFT}" y="{_TOP}" width="{_W - _LEFT - _RIGHT}" '
        f'height="{_H - _TOP - _BOTTOM}" fill="#fcfcfc" stroke="#bbb"/>',
    ]
    for tick in _ticks(axes.x0, axes.x1):
        x = axes.x(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{_H - _BOTTOM}" x2="{x:.1f}" y2="{_H - _BOTTOM + 4}" '
            f'stroke="#888"/><text x="{x:.1f}" y="{_H - _BOTTOM + 16}" font-size="11" '
            f'text-anchor="middle">{_num(tick)}</text>'
        )
    for tick in _ticks(axes.y0, axes.y1):
        y = axes.y(tick)
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{_num(tick)}</text>"
        )
    parts.append(
        f'<text x="{(_LEFT + _W - _RIGHT) / 2}" y="{_H - 6}" font-size="12" '
        f'text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="14" y="{(_TOP + _H - _BOTTOM) / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {(_TOP + _H - _BOTTOM) / 2})">{escape(y_label)}</text>'
    )
    return "".join(parts)


def _band(axes: _Axes, band: Band) -> str:
    x0, x1 = axes.x(band.start), axes.x(band.end)
    return (
        f'<rect class="band" x="{x0:.1f}" y="{_TOP}" width="{max(x1 - x0, 1.0):.1f}" '
        f'height="{_H - _TOP - _BOTTOM}" fill="{band.color}" opacity="0.25">'
        f"<title>{escape(band.label)}: {_num(band.start)} to {_num(band.end)} s</title></rect>"
    )


def _threshold(axes: _Axes, value: float, label: str) -> str:
    y = axes.y(value)
    return (
        f'<line class="threshold" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" '
        f'stroke="#c0392b" stroke-dasharray="6 4"><title>{escape(label)}</title></line>'
        f'<text x="{_W - _RIGHT - 4}" y="{y - 4:.1f}" font-size="11" fill="#c0392b" '
        f'text-anchor="end">{escape(label)}</text>'
    )


def _polyline(axes: _Axes, line: Line, css: str = "series") -> str:
    runs: list[list[str]] = [[]]
    for x, y in line.points:
        if y is None:
            runs.append([])
        else:
            runs[-1].append(f"{axes.x(x):.1f},{axes.y(y):.1f}")
    dash = ' stroke-dasharray="5 3"' if line.dashed else ""
    drawn = "".join(
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{line.color}" '
        f'stroke-width="2"{dash}/>'
        for run in runs
        if run
    )
    return f'<g class="{css}"><title>{escape(line.label)}</title>{drawn}</g>'


def _marker(axes: _Axes, marker: Marker, row: int) -> str:
    x = axes.x(marker.x)
    y = _TOP + 12 + (row % 4) * 13
    return (
        f'<g class="marker"><title>{escape(marker.label)} at {_num(marker.x)} s</title>'
        f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_H - _BOTTOM}" '
        f'stroke="{marker.color}" stroke-width="1.5" stroke-dasharray="3 2"/>'
        f'<text x="{x + 3:.1f}" y="{y}" font-size="11" fill="{marker.color}">'
        f"{escape(marker.label)}</text></g>"
    )


def _legend(entries: Sequence[tuple[str, str]]) -> str:
    parts, x = [], _W - _RIGHT
    for label, color in reversed(entries):
        x -= 14 + 7 * len(label) + 12
        parts.append(
            f'<rect x="{x}" y="8" width="12" height="12" fill="{color}"/>'
            f'<text x="{x + 16}" y="18" font-size="12">{escape(label)}</text>'
        )
    return f'<g class="legend">{"".join(parts)}</g>'


def _dedupe(entries: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(entries))


def _svg(css: str, title: str, body: Sequence[str]) -> str:
    return (
        f'<svg class="{css}" viewBox="0 0 {_W} {_H}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(title)}">'
        f"{''.join(body)}</svg>"
    )


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    magnitude = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = -(-low // step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
