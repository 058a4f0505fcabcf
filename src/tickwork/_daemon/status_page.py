"""The daemon's status page: one server-rendered HTML page, no script, no external files.

`render` turns what the state says (the daemon's jobs, their recent ledger entries, the
nodes seen) into a page that refreshes itself. Every text from the state is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from tickwork._core.text import iso
from tickwork._core.text import relative_time as _ago
from tickwork._core.text import short_duration as _seconds
from tickwork._core.text import utc_time as _time
from tickwork.stores._model import ActionRecord, JobState, SlotRecord
from tickwork.stores._protocol import SlotLedger, Store

__all__ = ["ACTIONS_SHOWN", "SUMMARY_DEPTH", "JobView", "failure_summary", "render"]

#: Ledger entries shown per job in its strip.
STRIP: Final = 30
#: Operators' actions shown under the table, newest first.
ACTIONS_SHOWN: Final = 10

_COLOURS: Final = {
    "ok": "#2e9d4f",
    "failed": "#d1393b",
    "timeout": "#a8323e",
    "abandoned": "#8b3fc4",
    "missed": "#e0a526",
    "skipped": "#9aa3ad",
    "cancelled": "#cfd6dd",
}


@dataclass(frozen=True, slots=True)
class JobView:
    """One row of the page: a job, its schedule in words, and its newest entries."""

    name: str
    state: JobState
    schedule: str
    entries: Sequence[SlotRecord]
    """Newest first."""


def _strip(entries: Sequence[SlotRecord]) -> str:
    cells = []
    for e in reversed(entries[:STRIP]):  # oldest on the left
        colour = _COLOURS.get(e.outcome, "#cfd6dd")
        title = f"{_time(e.scheduled)}: {e.outcome}"
        if e.slots > 1:
            title += f" ({e.slots} slots)"
        if e.lateness is not None:
            title += f", {_seconds(e.lateness)} late"
        if e.duration is not None:
            title += f", took {_seconds(e.duration)}"
        if e.error:
            title += f"\n{e.error.strip().splitlines()[-1]}"
        cells.append(
            f'<span class="slot {html.escape(e.outcome)}" style="background:{colour}"'
            f' title="{html.escape(title)}"></span>'
        )
    return "".join(cells) or '<span class="none">no runs yet</span>'


def _paused(s: JobState) -> str:
    """The paused mark under a job's name: who paused it, until when, why."""
    if not s.paused:
        return ""
    p = s.pause
    if p is None:
        return ' <em>paused</em><div class="sub">in the jobs file</div>'
    words = f"by {p.by}, {_time(p.at)}"
    if p.until is not None:
        words += f", until {_time(p.until)}"
    note = "" if not p.note else f'<div class="note">{html.escape(p.note)}</div>'
    return f' <em>paused</em><div class="sub">{html.escape(words)}</div>{note}'


def _next_note(s: JobState, now: float) -> str:
    """Under the next run: how far off it is, or why it is past yet not started."""
    if s.paused:
        return "held while paused"
    if s.next_run is not None and s.next_run <= now and any(c.owner for c in s.claims):
        return "after the run going now"  # overlap: the slot waits for (or skips) it
    return _ago(now, s.next_run)


def _actions(actions: Sequence[tuple[str, ActionRecord]]) -> str:
    if not actions:
        return ""
    items = []
    for name, a in actions:
        text = f"{_time(a.at)} \u00b7 {name} \u00b7 {a.action} by {a.actor}"
        if a.detail:
            text += f" \u00b7 {a.detail}"
        note = "" if not a.note else f' <span class="note">{html.escape(a.note)}</span>'
        items.append(f'<li class="action">{html.escape(text)}{note}</li>')
    return '<h2>recent actions</h2>\n<ul class="actions">' + "".join(items) + "</ul>"


def _row(job: JobView, now: float) -> str:
    """One job's row of the table: name and pause, schedule, next run, last run, strip."""
    s = job.state
    last = job.entries[0] if job.entries else None
    outcome = last.outcome if last else "-"
    flags = _paused(s)
    late = _seconds(last.lateness) if last is not None else "-"
    error = ""
    if last is not None and last.error:
        error = f'<div class="error">{html.escape(last.error.strip().splitlines()[-1])}</div>'
    return (
        "<tr>"
        f'<td class="job">{html.escape(job.name)}{flags}</td>'
        f"<td>{html.escape(job.schedule)}</td>"
        f'<td>{_time(s.next_run)}<div class="sub">{_next_note(s, now)}</div></td>'
        f'<td><span class="outcome {html.escape(outcome)}">{html.escape(outcome)}</span>'
        f"{error}</td>"
        f"<td>{late}</td>"
        f'<td class="strip">{_strip(job.entries)}</td>'
        "</tr>"
    )


#: The page's style sheet (the page has no external files).
_STYLE: Final = """\
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d232a; }
h1 { font-size: 20px; margin: 0 0 4px; }
.meta { color: #5b6570; margin-bottom: 16px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid #e3e7eb;
  vertical-align: top; }
th { font-weight: 600; color: #5b6570; }
td.job { font-weight: 600; }
.sub { color: #5b6570; font-size: 12px; }
.error { color: #a12b2d; font-size: 12px; max-width: 28em; overflow-wrap: anywhere; }
.outcome { font-weight: 600; }
.outcome.ok { color: #2e9d4f; } .outcome.failed { color: #d1393b; }
.slot { display: inline-block; width: 10px; height: 18px; margin-right: 2px;
  border-radius: 2px; vertical-align: middle; }
.legend { color: #5b6570; margin-top: 12px; font-size: 12px; }
.none { color: #8a939c; }
td.strip { white-space: nowrap; }
h2 { font-size: 16px; margin: 20px 0 6px; }
.note { color: #6b4e00; font-size: 12px; font-style: italic; }
ul.actions { padding-left: 18px; color: #3a434c; }
"""


def render(
    title: str,
    jobs: Sequence[JobView],
    nodes: Sequence[str],
    now: float,
    refresh: int = 10,
    *,
    actions: Sequence[tuple[str, ActionRecord]] = (),
) -> str:
    """The status page as HTML text.

    Args:
        title: What the page is about (the jobs file).
        jobs: One view per job, in the order to show.
        nodes: The nodes (``host:pid``) seen running this state.
        now: The time the page shows as "now" (POSIX seconds).
        refresh: Seconds between the page's own reloads.
        actions: Operators' recent actions, newest first, with their job's name.

    """
    rows = [_row(job, now) for job in jobs]
    legend = "".join(
        f'<span class="slot" style="background:{c}"></span> {o} ' for o, c in _COLOURS.items()
    )
    node_list = ", ".join(html.escape(n) for n in nodes) or "none seen in the last hour"
    body = "\n".join(rows) or '<tr><td colspan="6">no jobs in the state</td></tr>'
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickwork: {html.escape(title)}</title>
<style>
{_STYLE}</style>
</head>
<body>
<h1>tickwork: {html.escape(title)}</h1>
<div class="meta">{_time(now)} &middot; nodes: {node_list} &middot;
refreshes every {refresh} s</div>
<table>
<thead><tr><th>job</th><th>schedule</th><th>next run</th><th>last outcome</th>
<th>lateness</th><th>recent slots (oldest left)</th></tr></thead>
<tbody>
{body}
</tbody>
</table>
<div class="legend">{legend}</div>
{_actions(actions)}
</body>
</html>
"""


#: Ledger entries read per job for its failure streak.
SUMMARY_DEPTH = 200


def failure_summary(store: Store, job_id: str) -> dict[str, Any]:
    """``last_success`` (ISO time or None) and ``consecutive_failures`` from the ledger.

    Failures are ``failed`` and ``abandoned`` entries since the newest ``ok`` (given-up
    slots neither break nor extend the streak), counted over the newest `SUMMARY_DEPTH`
    entries; ``None`` for both where the store keeps no ledger.
    """
    if not isinstance(store, SlotLedger):
        return {"last_success": None, "consecutive_failures": None}
    failures = 0
    last_ok: float | None = None
    for e in store.history(job_id, limit=SUMMARY_DEPTH):
        if e.outcome == "ok":
            last_ok = e.ended if e.ended is not None else e.scheduled
            break
        if e.outcome in ("failed", "timeout", "abandoned"):
            failures += 1
    if last_ok is None:  # not among the newest: look for the last success alone
        older = store.history(job_id, outcome="ok", limit=1)
        if older:
            last_ok = older[0].ended if older[0].ended is not None else older[0].scheduled
    return {
        "last_success": None if last_ok is None else iso(last_ok, millis=True),
        "consecutive_failures": failures,
    }
