"""The pages' charts: pure functions from numbers to an inline SVG string, drawn on the server.

No script and no external file: each chart is an ``<svg role="img">`` with a ``<title>``
and a ``<desc>`` that say in words what it shows, axes labelled with their units and the
time zone, and a ``<title>`` per bar for the mouse. Every text is escaped. A time axis is
cut into at most `MAX_BARS` buckets, so a week of a job every second weighs what a week
of a job every hour does.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tickwork._core.text import human_duration

__all__ = [
    "MAX_BARS",
    "OUTCOME_COLOURS",
    "line_chart",
    "outcome_bar",
    "rate_chart",
    "sparkline",
    "time_bars",
]

#: Most bars on a time axis (a week is bucketed into hours: 168).
MAX_BARS: Final = 200

#: Each outcome's colour, worst first: a bucket of several outcomes takes its worst.
OUTCOME_COLOURS: Final = {
    "abandoned": "#8b3fc4",
    "timeout": "#a8323e",
    "failed": "#d1393b",
    "missed": "#e0a526",
    "skipped": "#9aa3ad",
    "cancelled": "#cfd6dd",
    "ok": "#2e9d4f",
}
_FAILED: Final = ("failed", "timeout", "abandoned")

# The frame of a time chart, in SVG units: the plot sits inside the margins.
_W: Final = 720
_H: Final = 180
_LEFT: Final = 64
_RIGHT: Final = 12
_TOP: Final = 10
_BOTTOM: Final = 42
_PW: Final = _W - _LEFT - _RIGHT
_PH: Final = _H - _TOP - _BOTTOM
_TEXT: Final = 'font-size="11" fill="#5b6570"'
#: Steps between the time axis's ticks, smallest first (seconds).
_TICKS: Final = (60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400)


def _num(value: float) -> str:
    """A coordinate, short: one decimal at most."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _zone_words(zone: str) -> str:
    """The zone as the axes name it: ``local`` is said with this host's zone name."""
    if zone != "local":
        return zone
    return f"local, {datetime.now().astimezone().tzname()}"


def _tz(zone: str) -> tzinfo:
    """The zone a name says (``"local"``: this host's); UTC for one not known here."""
    if zone == "local":
        return datetime.now().astimezone().tzinfo or UTC
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _svg(width: int, height: int, title: str, desc: str, body: str, css: str = "chart") -> str:
    """The ``<svg>`` around a chart: accessible by its title and description."""
    t = html.escape(title)
    return (
        f'<svg class="{css}" role="img" aria-label="{t}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" style="display:block;max-width:100%;height:auto">'
        f"<title>{t}</title>{f'<desc>{html.escape(desc)}</desc>' if desc else ''}{body}</svg>"
    )


def _nice(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (1 for none)."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-9))


def _unit(seconds: float) -> tuple[float, str]:
    """The unit a span of seconds reads best in: ``(seconds in it, its name)``."""
    if seconds < 120:
        return 1.0, "s"
    return (60.0, "min") if seconds < 7200 else (3600.0, "h")


def _y_axis(top: float, label: str) -> str:
    """Grid lines and labels at 0, half and the top of the value axis, and its title."""
    parts = []
    for share in (0.0, 0.5, 1.0):
        y = _num(_TOP + _PH * (1 - share))
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y}" y2="{y}" stroke="#e3e7eb"/>'
            f'<text x="{_LEFT - 4}" y="{y}" dy="4" text-anchor="end" {_TEXT}>'
            f"{top * share:.6g}</text>"
        )
    middle = _TOP + _PH / 2
    parts.append(
        f'<text transform="translate(12 {_num(middle)}) rotate(-90)" text-anchor="middle" '
        f'class="axis-label" {_TEXT}>{html.escape(label)}</text>'
    )
    return "".join(parts)


def _x_axis(start: float, end: float, zone: str, label: str) -> str:
    """Ticks on whole hours or days of ``zone`` between ``start`` and ``end``, and the title."""
    tz = _tz(zone)
    step = next((s for s in _TICKS if (end - start) / s <= 8), _TICKS[-1])
    offset = (datetime.fromtimestamp(start, tz).utcoffset() or timedelta(0)).total_seconds()
    t = math.ceil((start + offset) / step) * step - offset
    shape = "%a %d" if step >= 86400 else "%H:%M"
    parts = []
    while t <= end:
        x = _num(_LEFT + (t - start) / (end - start) * _PW)
        parts.append(
            f'<line x1="{x}" x2="{x}" y1="{_TOP + _PH}" y2="{_TOP + _PH + 4}" stroke="#8a939c"/>'
            f'<text x="{x}" y="{_TOP + _PH + 16}" text-anchor="middle" {_TEXT}>'
            f"{datetime.fromtimestamp(t, tz).strftime(shape)}</text>"
        )
        t += step
    parts.append(
        f'<text x="{_LEFT + _PW / 2:.0f}" y="{_H - 4}" text-anchor="middle" class="axis-label" '
        f"{_TEXT}>{html.escape(label)} ({html.escape(_zone_words(zone))})</text>"
    )
    return "".join(parts)


def _span_words(start: float, end: float, zone: str) -> str:
    tz = _tz(zone)
    a, b = (datetime.fromtimestamp(t, tz).strftime("%Y-%m-%d %H:%M") for t in (start, end))
    return f"{a} to {b} {_zone_words(zone)}"


def time_bars(
    points: Iterable[tuple[float, float, str]],
    *,
    start: float,
    end: float,
    zone: str,
    what: str,
    bars: int = MAX_BARS,
) -> str:
    """Seconds per slot over time: one bar per bucket, as tall as its largest value.

    Args:
        points: ``(due time, seconds, outcome)`` per slot (POSIX seconds); those outside
            ``[start, end)`` are left out, a negative value counts as 0.
        start: The left end of the time axis.
        end: The right end (after ``start``).
        zone: The time zone the axis is read in (an IANA name, ``"UTC"`` or ``"local"``).
        what: What the seconds are (``"run duration"``), the chart's title and axis.
        bars: Buckets on the axis, at most `MAX_BARS`.

    Each bar is coloured by the worst outcome in its bucket (`OUTCOME_COLOURS`).

    """
    if not end > start:
        raise ValueError(f"end must be after start, got start={start!r}, end={end!r}")
    n = max(1, min(bars, MAX_BARS))
    width = (end - start) / n
    buckets: dict[int, list[tuple[float, str]]] = {}
    for due, seconds, outcome in points:
        if start <= due < end:
            buckets.setdefault(int((due - start) // width), []).append((max(seconds, 0.0), outcome))
    largest = max((v for b in buckets.values() for v, _ in b), default=0.0)
    scale, unit = _unit(largest)
    top = _nice(largest / scale)
    title = f"{what} per slot, {_span_words(start, end, zone)}"
    body = [_y_axis(top, f"{what} ({unit})"), _x_axis(start, end, zone, "slot due time")]
    step = human_duration(width)
    for i, values in sorted(buckets.items()):
        peak = max(v for v, _ in values)
        worst = next((o for o in OUTCOME_COLOURS if any(o == oc for _, oc in values)), "ok")
        h = peak / scale / top * _PH
        x = _LEFT + i * _PW / n
        label = (
            f"{datetime.fromtimestamp(start + i * width, _tz(zone)).strftime('%a %H:%M')}: "
            f"{len(values)} slot{'s' if len(values) != 1 else ''}, "
            f"largest {human_duration(peak)}, worst {worst}"
        )
        body.append(
            f'<rect class="bar {worst}" x="{_num(x)}" y="{_num(_TOP + _PH - h)}" '
            f'width="{_num(max(_PW / n - 1, 1))}" height="{_num(h)}" '
            f'fill="{OUTCOME_COLOURS[worst]}"><title>{html.escape(label)}</title></rect>'
        )
    count = sum(len(b) for b in buckets.values())
    desc = (
        f"{count:,} slot{'s' if count != 1 else ''} in {n} buckets of {step}; "
        f"the largest {what} {human_duration(largest)}."
        if count
        else f"No slot with a {what} in this time."
    )
    return _svg(_W, _H, title, desc, "".join(body))


def rate_chart(
    points: Iterable[tuple[float, str] | tuple[float, str, float]],
    *,
    start: float,
    end: float,
    zone: str,
    note: str = "",
    title: str = "runs per minute by outcome",
) -> str:
    """Runs per minute by outcome, stacked: how busy the cluster is and how it goes.

    Args:
        points: ``(when the run ended, outcome)`` per ledger entry, or ``(when, outcome,
            entries it stands for)`` for a sample.
        start: The left end of the time axis; the axis is cut into whole minutes.
        end: The right end (after ``start``).
        zone: The time zone the axis is read in.
        note: A sentence added to the description (what was left out).
        title: The question the chart answers (its title; the span is added).

    """
    if not end > start:
        raise ValueError(f"end must be after start, got start={start!r}, end={end!r}")
    n = max(1, min(MAX_BARS, math.ceil((end - start) / 60)))
    width = (end - start) / n
    counts: dict[int, dict[str, float]] = {}
    for when, outcome, *weight in points:
        if start <= when < end:
            per = counts.setdefault(int((when - start) // width), {})
            per[outcome] = per.get(outcome, 0) + (weight[0] if weight else 1)
    per_minute = 60 / width
    largest = max((sum(c.values()) * per_minute for c in counts.values()), default=0.0)
    top = _nice(largest)
    body = [_y_axis(top, "runs / min"), _x_axis(start, end, zone, "run end time")]
    for i, per in sorted(counts.items()):
        y = float(_TOP + _PH)
        x = _num(_LEFT + i * _PW / n)
        tip = ", ".join(f"{k} {v:,.0f}" for k, v in per.items())
        for outcome in reversed(OUTCOME_COLOURS):  # ok at the bottom
            if outcome in per:
                h = per[outcome] * per_minute / top * _PH
                y -= h
                body.append(
                    f'<rect class="bar {outcome}" x="{x}" y="{_num(y)}" '
                    f'width="{_num(max(_PW / n - 1, 1))}" height="{_num(h)}" '
                    f'fill="{OUTCOME_COLOURS[outcome]}"><title>'
                    f"{datetime.fromtimestamp(start + i * width, _tz(zone)).strftime('%H:%M')}"
                    f": {html.escape(tip)}</title></rect>"
                )
    total: dict[str, float] = {}
    for per in counts.values():
        for k, v in per.items():
            total[k] = total.get(k, 0) + v
    said = ", ".join(f"{v:,.0f} {k}" for k, v in sorted(total.items())) or "no runs"
    title = f"{title}, {_span_words(start, end, zone)}"
    return _svg(_W, _H, title, f"{said}. {note}".strip(), "".join(body))


def line_chart(
    series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]],
    *,
    start: float,
    end: float,
    zone: str,
    title: str,
    what: str,
    seconds: bool = False,
    note: str = "",
) -> str:
    """Values over time, one line per series, and a legend: a level and how it moves.

    Args:
        series: ``(name, colour, points)`` each; points are ``(time, value)``, earliest
            first (those outside ``[start, end]`` are left out).
        start: The left end of the time axis.
        end: The right end (after ``start``).
        zone: The time zone the axis is read in.
        title: The question the chart answers (its title; the span is added).
        what: What the values are, for the value axis (its unit is added).
        seconds: The values are seconds (the axis takes s, min or h); else counts.
        note: A sentence added to the description (what was left out, estimated).

    """
    if not end > start:
        raise ValueError(f"end must be after start, got start={start!r}, end={end!r}")
    shown = [(n, c, [(t, max(v, 0.0)) for t, v in p if start <= t <= end]) for n, c, p in series]
    largest = max((v for _, _, p in shown for _, v in p), default=0.0)
    scale, unit = _unit(largest) if seconds else (1.0, "")
    top = _nice(largest / scale)
    axis = f"{what} ({unit})" if unit else what
    body = [_y_axis(top, axis), _x_axis(start, end, zone, "time")]
    said = []
    for i, (name, colour, points) in enumerate(shown):
        xy = " ".join(
            f"{_num(_LEFT + (t - start) / (end - start) * _PW)},"
            f"{_num(_TOP + _PH * (1 - v / scale / top))}"
            for t, v in points
        )
        if points:
            body.append(
                f'<polyline class="line" points="{xy}" fill="none" stroke="{colour}"'
                f' stroke-width="1.5"><title>{html.escape(name)}</title></polyline>'
            )
        peak = max((v for _, v in points), default=None)
        words = "none" if peak is None else human_duration(peak) if seconds else f"{peak:,.0f}"
        said.append(f"{name}: largest {words}")
        body.append(
            f'<text x="{_LEFT + 8 + 150 * i}" y="{_TOP + 10}" {_TEXT}>'
            f'<tspan fill="{colour}">\u25a0</tspan> {html.escape(name)}</text>'
        )
    full = f"{title}, {_span_words(start, end, zone)}"
    return _svg(_W, _H, full, f"{'; '.join(said)}. {note}".strip(), "".join(body))


def outcome_bar(counts: Mapping[str, int], *, when: str) -> str:
    """The success-rate bar: each outcome's share of the slots, and ok runs over runs.

    Args:
        counts: Slots per outcome.
        when: The time they cover, in words (``"last day"``).

    The rate counts runs that ended (``ok`` over ``ok``, ``failed``, ``timeout`` and
    ``abandoned``); slots given up (``missed``, ``skipped``, ``cancelled``) show in the bar
    but not in the rate.

    """
    total = sum(counts.values())
    runs = counts.get("ok", 0) + sum(counts.get(o, 0) for o in _FAILED)
    of = f"{runs:,} run{'s' if runs != 1 else ''}"
    rate = f"{100 * counts.get('ok', 0) / runs:.0f}% of {of} ok" if runs else "no runs"
    words = ", ".join(f"{counts[o]:,} {o}" for o in reversed(OUTCOME_COLOURS) if counts.get(o))
    title = f"success rate, {when}: {rate}"
    body, x = [], 0.0
    for outcome in reversed(OUTCOME_COLOURS):
        if counts.get(outcome):
            w = counts[outcome] / total * _W
            body.append(
                f'<rect class="bar {outcome}" x="{_num(x)}" y="0" width="{_num(w)}" height="18" '
                f'fill="{OUTCOME_COLOURS[outcome]}"><title>{counts[outcome]:,} {outcome}</title>'
                "</rect>"
            )
            x += w
    if not total:
        body.append(f'<rect x="0" y="0" width="{_W}" height="18" fill="#eef1f4"/>')
    body.append(f'<text x="0" y="34" {_TEXT}>{html.escape(title)} ({words or "no slots"})</text>')
    return _svg(_W, 40, title, f"Slots by outcome: {words or 'none'}.", "".join(body), "rate")


def sparkline(values: Sequence[float], *, what: str = "run duration") -> str:
    """A small line of the last values, oldest left, scaled to the largest; ``""`` for none.

    Args:
        values: Seconds, oldest first.
        what: What they are, for the title.

    """
    if not values:
        return ""
    w, h, pad = 120, 24, 2
    largest = max(max(values), 0.0) or 1.0
    step = (w - 2 * pad) / max(len(values) - 1, 1)
    xy = [
        (pad + i * step, pad + (h - 2 * pad) * (1 - max(v, 0.0) / largest))
        for i, v in enumerate(values)
    ]
    line = " ".join(f"{x:.0f},{y:.0f}" for x, y in xy)
    title = (
        f"{what}, last {len(values)} run{'s' if len(values) != 1 else ''} (oldest left): "
        f"newest {human_duration(values[-1])}, largest {human_duration(largest)}"
    )
    body = (
        f'<polyline points="{line}" fill="none" stroke="#3d6fb6" stroke-width="1.5"/>'
        f'<circle cx="{_num(xy[-1][0])}" cy="{_num(xy[-1][1])}" r="2" fill="#3d6fb6"/>'
    )
    return _svg(w, h, title, "", body, "spark")
