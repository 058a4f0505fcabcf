"""The one-offs' page (``/oneoffs``): how long they wait, how many wait, how they end.

Drawn on the server from the ledger of the one-offs (all functions together: an entry
does not name its function) over the last hour or day, read through
`tickwork.stores.contract.OneOffQueue.oneoff_window`: a bounded number of rows however
many one-offs ran, a sample where the window holds more (the charts say so). The counts
per function head the page, as on the overview.
"""

from __future__ import annotations

import functools
import html
import math
import time
from collections.abc import Sequence
from typing import Any, Final

from tickwork._daemon.oneoffs import counts
from tickwork._daemon.web.charts import line_chart, rate_chart
from tickwork._daemon.web.status_page import STYLE, oneoffs_table
from tickwork.stores import Store
from tickwork.stores.contract import OneOffQueue, OneOffWindow

__all__ = ["SPANS", "depth", "latency", "oneoff_charts", "oneoff_page", "percentile"]

#: The charts' spans: the query's ``span`` -> (seconds, bucket seconds, words).
SPANS: Final = {"hour": (3600, 60, "last hour"), "day": (86400, 600, "last day")}
_P50: Final = "#3d6fb6"
_P99: Final = "#d1393b"


def percentile(values: Sequence[float], share: float) -> float:
    """The value at ``share`` (0 to 1) of sorted ``values``, nearest rank."""
    if not values:
        raise ValueError("values must not be empty")
    ordered = sorted(values)
    rank = math.ceil(share * len(ordered) - 1e-9)  # 0.99 * 100 is 99.00000000000001
    return ordered[min(len(ordered), max(1, rank)) - 1]


def latency(
    window: OneOffWindow, start: float, end: float, step: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """p50 and p99 of ``started - scheduled`` per bucket of ``step`` seconds, by start time.

    Each point sits at its bucket's middle; a bucket with no start has none.
    """
    buckets: dict[int, list[float]] = {}
    for scheduled, started, _, _, _ in window.entries:
        if started is not None and start <= started < end:
            buckets.setdefault(int((started - start) // step), []).append(started - scheduled)
    middles = {i: start + (i + 0.5) * step for i in buckets}
    p50 = [(middles[i], percentile(buckets[i], 0.5)) for i in sorted(buckets)]
    p99 = [(middles[i], percentile(buckets[i], 0.99)) for i in sorted(buckets)]
    return p50, p99


def depth(window: OneOffWindow, start: float, end: float, step: float) -> list[tuple[float, float]]:
    """The mean number of one-offs due and not started over each bucket of ``step`` seconds.

    An ended entry waited from its due time until it started (never started: until it
    ended); a pending one waits from its due time on. The mean over a bucket (the time
    waited in it over its length) is what a sample of runs of entries estimates well; an
    instant's count would depend on whether a run of the sample fell on it. Each point
    sits at its bucket's middle.
    """
    n = max(1, math.ceil((end - start) / step))
    waited = [0.0] * n
    spans = [(s, b if b is not None else e, w) for s, b, e, _, w in window.entries]
    spans += [(due, end, 1.0) for due in window.waiting_due]
    spans.append((start, end, float(window.waiting_before)))
    for due, until, weight in spans:
        if until is None or not until > due:
            continue
        a, b = max(due, start), min(until, end)
        for i in range(int((a - start) // step), min(n - 1, int((b - start) // step)) + 1):
            lo, hi = start + i * step, min(start + (i + 1) * step, end)
            waited[i] += weight * max(0.0, min(b, hi) - max(a, lo))
    return [
        (start + (i + 0.5) * step, total / (min(start + (i + 1) * step, end) - start - i * step))
        for i, total in enumerate(waited)
    ]


def _charts(window: OneOffWindow, start: float, end: float, step: float, zone: str) -> str:
    note = (
        f"Estimated from a sample of {window.read:,} ledger entries spread over the window."
        if window.sampled
        else ""
    )
    p50, p99 = latency(window, start, end, step)
    every = "minute" if step == 60 else f"{step / 60:.0f} minutes"
    lines = functools.partial(line_chart, start=start, end=end, zone=zone, note=note)
    return (
        lines(
            [("p50", _P50, p50), ("p99", _P99, p99)],
            title=f"How long did one-offs wait to start? p50 and p99 per {every}",
            what="pickup latency",
            seconds=True,
        )
        + lines(
            [("due, not started (mean)", _P50, depth(window, start, end, step))],
            title=f"How many one-offs were due and waiting? Mean per {every}",
            what="one-offs waiting",
        )
        + rate_chart(
            [(e, o, w) for _, _, e, o, w in window.entries if e is not None],
            start=start,
            end=end,
            zone=zone,
            note=note,
            title="How many one-offs ended each minute, and how?",
        )
    )


def oneoff_charts(store: Store, span: str = "hour", *, now: float | None = None) -> str:
    """The one-offs' section: counts per function, then the charts over ``span``.

    ``span``: a key of `SPANS` (the hour for anything else). ``""`` where the store
    keeps no one-offs.
    """
    queue: Any = store
    if not isinstance(queue, OneOffQueue):
        return ""
    now = time.time() if now is None else now
    span = span if span in SPANS else "hour"
    seconds, step, words = SPANS[span]
    window = queue.oneoff_window(now - seconds, now)
    links = " \u00b7 ".join(
        f"<strong>{w}</strong>" if k == span else f'<a href="?span={k}">{w}</a>'
        for k, (_, _, w) in SPANS.items()
    )
    return (
        oneoffs_table(counts(store))
        + f"<h2>charts \u00b7 {words}, all functions, times in UTC</h2>"
        f'<div class="sub">{links}</div><div class="charts">'
        + _charts(window, now - seconds, now, step, "UTC")
        + "</div>"
    )


def oneoff_page(store: Store, title: str, *, root: str = "", span: str = "hour") -> str:
    """The ``/oneoffs`` page: `oneoff_charts` with a way back to the jobs.

    ``root``: the path the pages are under. ``span``: see `oneoff_charts`.
    """
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickwork: one-offs \u00b7 {html.escape(title)}</title>
<style>
{STYLE}.charts svg {{ display: block; margin: 4px 0 10px; }}
</style>
</head>
<body>
<h1>tickwork: one-offs</h1>
<div class="meta"><a href="{html.escape(root)}/">all jobs</a> \u00b7 {html.escape(title)}</div>
{oneoff_charts(store, span) or '<p class="none">this state keeps no one-offs</p>'}
</body>
</html>
"""
