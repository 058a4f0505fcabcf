"""The daemon's status page: one server-rendered HTML page, no external files.

`render` turns what the state says (the daemon's jobs, their recent ledger entries and
failure streaks, the runs waiting, the nodes seen and which of them are gone) into a page
that refreshes itself (its table, by one small inline script; the whole page where
JavaScript is off); `page` reads all that from a running scheduler. Every text from
the state is escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import os
import socket
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

from tickwork._core.text import iso, job_zone, zoned_time
from tickwork._core.text import relative_time as _ago
from tickwork._core.text import short_duration as _seconds
from tickwork._core.text import utc_time as _time
from tickwork._daemon.oneoffs import counts, counts_table
from tickwork._daemon.web.charts import rate_chart, sparkline
from tickwork.stores import (
    ActionRecord,
    JobState,
    RuntimeControl,
    SlotLedger,
    SlotRecord,
    Store,
    StoreError,
)
from tickwork.stores.contract import (
    JOB_STATES,
    STREAK_DEPTH,
    JobQuery,
    JobsPage,
    OneOffCounts,
    SessionLiveness,
    failure_streak,
    list_jobs,
    schedule_and_after,
)

__all__ = [
    "ACTIONS_SHOWN",
    "LIVE_HASH",
    "LIVE_SCRIPT",
    "PER_PAGE",
    "STYLE",
    "SUMMARY_DEPTH",
    "JobView",
    "failure_summary",
    "gone_owners",
    "job_time",
    "live_script",
    "oneoffs_table",
    "page",
    "paused_mark",
    "pid_running",
    "render",
    "said_box",
]

_log = logging.getLogger("tickwork.daemon")

#: Jobs shown per page of the status page.
PER_PAGE: Final = 50
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
    failures: int | None = None
    """Failed runs since the last ok one (``None``: the store keeps no ledger)."""
    last_ok: float | None = None
    """When the last ok run ended (``None``: never, or not known)."""
    waiting_for: str | None = None
    """Due but held back by a full concurrency pool: ``"pool <name>"`` or
    ``"max_running"`` (`tickwork._daemon.jobsfile.pools.pool_waits`)."""


def job_time(ts: float | None, state: JobState) -> str:
    """An instant as the pages show one of ``state``'s job: in its schedule's zone."""
    return zoned_time(ts, job_zone(state.spec.schedule))


def _strip(entries: Sequence[SlotRecord], zone: str = "UTC") -> str:
    cells = []
    for e in reversed(entries[:STRIP]):  # oldest on the left
        colour = _COLOURS.get(e.outcome, "#cfd6dd")
        title = f"{zoned_time(e.scheduled, zone)}: {e.outcome}"
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


def said_box(said: str) -> str:
    """What an operator's action just did, above the page (``""``: nothing)."""
    return "" if not said else f'<div class="said" role="status">{html.escape(said)}</div>'


def paused_mark(s: JobState) -> str:
    """The paused mark under a job's name: where the pause comes from, until when, why.

    An operator's pause says who and when; a pause with no note is the declaration's:
    the jobs file's ``enabled = false`` for a daemon's job, ``JobSpec(paused=True)`` else.
    """
    from tickwork._daemon.declare import ENTRY_POINT

    if not s.paused:
        return ""
    p = s.pause
    if p is None:
        where = (
            "in the jobs file (enabled = false)"
            if s.spec.func == ENTRY_POINT
            else "declared paused (JobSpec paused=True)"
        )
        return f' <em>paused</em><div class="sub">{where}</div>'
    words = f"by {p.by}, {job_time(p.at, s)}"
    if p.until is not None:
        words += f", until {job_time(p.until, s)}"
    note = "" if not p.note else f'<div class="note">{html.escape(p.note)}</div>'
    return f' <em>paused</em><div class="sub">{html.escape(words)}</div>{note}'


def _next_note(s: JobState, now: float) -> str:
    """Under the next run: how far off it is, or why it is past yet not started."""
    if s.paused:
        return "held while paused"
    if s.next_run is not None and s.next_run <= now and any(c.owner for c in s.claims):
        return "after the run going now"  # overlap: the slot waits for (or skips) it
    return _ago(now, s.next_run)


def _waiting(s: JobState) -> str:
    """Under the next run: the runs waiting for a node, by why they run, if any."""
    count = s.waiting_runs
    if not count:
        return ""
    origins: dict[str, int] = {}
    for c in s.claims:
        if not c.owner:
            why = "recovered" if c.origin == "schedule" else c.origin
            origins[why] = origins.get(why, 0) + 1
    detail = " \u00b7 ".join(f"{why} {n:,}" for why, n in sorted(origins.items()))
    held = ", held while paused" if s.paused else ""
    return (
        f'<div class="waiting">{count:,} run{"s" if count != 1 else ""} waiting{held}'
        f'<div class="sub">{html.escape(detail)}</div></div>'
    )


def _pool_wait(job: JobView) -> str:
    """Under the next run: the full pool (or ``max_running``) the job waits for a slot of."""
    if job.waiting_for is None:
        return ""
    return f'<div class="waiting">waiting for {html.escape(job.waiting_for)}</div>'


def _streak(job: JobView, now: float) -> str:
    """Under the last outcome: the failure streak and when the job last succeeded."""
    if not job.failures:
        return ""
    n = job.failures
    ok = (
        "never"
        if job.last_ok is None
        else f"{_ago(now, job.last_ok)}, {job_time(job.last_ok, job.state)}"
    )
    return (
        f'<div class="streak">failing {n} run{"s" if n != 1 else ""} in a row'
        f'<div class="sub">last ok {html.escape(ok)}</div></div>'
    )


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


def oneoffs_table(rows: Sequence[OneOffCounts], root: str | None = None) -> str:
    """The one-offs per function, a small table (none: nothing).

    ``root``: the path the pages are under, for a link to the one-offs' charts
    (``None``: no link).
    """
    if not rows:
        return ""
    link = "" if root is None else f' <a class="sub" href="{html.escape(root)}/oneoffs">charts</a>'
    head, *lines = counts_table(rows)
    cells = "".join(f"<th>{html.escape(h.lower())}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in lines
    )
    return f'<h2>one-offs{link}</h2>\n<table class="oneoffs"><tr>{cells}</tr>{body}</table>\n'


def _node(label: str, gone: bool) -> str:
    """One node of the meta line; a gone one struck through and marked in words."""
    if not gone:
        return f'<span class="node">{html.escape(label)}</span>'
    title = "its process or database session has ended"
    return (
        f'<span class="node gone" title="{title}">{html.escape(label)}'
        '<span class="mark">(gone)</span></span>'
    )


def _row(job: JobView, now: float, controls: Callable[[JobView], str] | None = None) -> str:
    """One job's row of the table: name and pause, schedule, next run, last run, strip."""
    s = job.state
    last = job.entries[0] if job.entries else None
    outcome = last.outcome if last else "-"
    flags = paused_mark(s)
    late = _seconds(last.lateness) if last is not None else "-"
    error = ""
    if last is not None and last.error:
        error = f'<div class="error">{html.escape(last.error.strip().splitlines()[-1])}</div>'
    return (
        "<tr>"
        f'<td class="job">{html.escape(job.name)}{flags}{controls(job) if controls else ""}</td>'
        f"<td>{html.escape(job.schedule)}</td>"
        f'<td>{job_time(s.next_run, s)}<div class="sub">{_next_note(s, now)}</div>{_waiting(s)}'
        f"{_pool_wait(job)}</td>"
        f'<td><span class="outcome {html.escape(outcome)}">{html.escape(outcome)}</span>'
        f"{error}{_streak(job, now)}</td>"
        f"<td>{late}</td>"
        f'<td class="strip">{_strip(job.entries, job_zone(s.spec.schedule))}'
        f"{sparkline([e.duration for e in reversed(job.entries) if e.duration is not None])}</td>"
        "</tr>"
    )


def _link(query: JobQuery, **changed: Any) -> str:
    """A link to the listing ``query`` with ``changed`` (``state``, ``page``): its query only."""
    fields: dict[str, Any] = {"q": query.search, "state": query.state or "", "page": 1}
    fields |= changed
    kept = {k: v for k, v in fields.items() if v and (k != "page" or v > 1)}
    return html.escape("?" + urlencode(kept)) if kept else "?"


def _finder(query: JobQuery, listed: JobsPage) -> str:
    """Above the table: the name search (a plain form) and a link per state with its count."""
    state = (
        ""
        if query.state is None
        else f'<input type="hidden" name="state" value="{html.escape(query.state)}">'
    )
    counts = listed.counts
    links: list[tuple[str | None, str, int]] = [(None, "all", counts.get("all", listed.total))]
    links += [(s, s, counts.get(s, 0)) for s in JOB_STATES]
    shown = " \u00b7 ".join(
        f'<a class="filter{" on" if which == query.state else ""}" data-state="{word}"'
        f' href="{_link(query, state=which or "")}">{word} {count:,}</a>'
        for which, word, count in links
    )
    return (
        f'<form class="find" method="get">{state}<input type="search" name="q"'
        f' value="{html.escape(query.search)}" placeholder="job name contains"'
        ' aria-label="search jobs by name"> <button type="submit">search</button></form>'
        f'<div class="filters">{shown}</div>'
    )


def _pager(query: JobQuery, listed: JobsPage, shown: int) -> str:
    """Under the table: which jobs these are of how many, and links to the pages beside."""
    size = query.limit or max(1, listed.total)
    number = query.offset // size + 1
    last = max(1, -(-listed.total // size))
    first = query.offset + 1 if shown else 0
    parts = [f"jobs {first:,}\u2013{query.offset + shown:,} of {listed.total:,}"]
    if number > 1:
        parts.append(
            f'<a rel="prev" href="{_link(query, page=min(number - 1, last))}">previous</a>'
        )
    parts.append(f"page {number:,} of {last:,}")
    if number < last:
        parts.append(f'<a rel="next" href="{_link(query, page=number + 1)}">next</a>')
    return '<div class="pages">' + " \u00b7 ".join(parts) + "</div>"


#: The pages' one script, inline (the CSP allows it by `LIVE_HASH`): every
#: ``data-every`` seconds, while the tab is shown, it fetches the page again and swaps
#: each ``data-live`` element for its fresh copy, so that forms being typed in stay. Without
#: JavaScript the overview reloads itself (a ``<noscript>`` meta refresh).
LIVE_SCRIPT: Final = """\
(function () {
  var me = document.currentScript, every = 1000 * Number(me.dataset.every || 10);
  function swap() {
    if (document.hidden) return;
    fetch(location.href, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (old) {
          var now = fresh.getElementById(old.id);
          if (now) old.replaceWith(document.importNode(now, true));
        });
        document.documentElement.dataset.swapped = String(Date.now());
      })
      .catch(function () {});
  }
  setInterval(swap, every);
})();
"""
#: The Content-Security-Policy source that allows `LIVE_SCRIPT` and no other script.
LIVE_HASH: Final = (
    "'sha256-" + base64.b64encode(hashlib.sha256(LIVE_SCRIPT.encode()).digest()).decode() + "'"
)


def live_script(every: int) -> str:
    """The ``<script>`` element of `LIVE_SCRIPT`, swapping every ``every`` seconds."""
    return f'<script data-every="{every}">{LIVE_SCRIPT}</script>'


#: The page's style sheet (the page has no external files).
STYLE: Final = """\
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d232a; }
h1 { font-size: 20px; margin: 0 0 4px; }
.meta { color: #5b6570; margin-bottom: 16px; }
table { border-collapse: collapse; width: 100%; } table.oneoffs { width: auto; }
th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid #e3e7eb;
  vertical-align: top; }
th { font-weight: 600; color: #5b6570; }
td.job { font-weight: 600; min-width: 8em; }
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
.said { background: #eef7f0; border: 1px solid #2e9d4f; padding: 8px; margin-bottom: 12px; }
.note { color: #6b4e00; font-size: 12px; font-style: italic; }
ul.actions { padding-left: 18px; color: #3a434c; }
.waiting, .streak { color: #a15c00; font-weight: 600; font-size: 12px; margin-top: 4px; }
.streak { color: #a12b2d; }
.waiting .sub, .streak .sub { font-weight: normal; }
.node.gone { color: #8a939c; text-decoration: line-through; }
.node.gone .mark { text-decoration: none; display: inline-block; margin-left: 3px;
  color: #a12b2d; font-weight: 600; }
form.inline { display: inline; margin: 0 4px 0 0; }
form.find { margin: 0 0 6px; } .filters, .pages { margin: 6px 0; color: #5b6570; }
a.filter.on { font-weight: 600; color: #1d232a; text-decoration: none; }
td { overflow-wrap: break-word; } svg { max-width: 100%; height: auto; }
@media (max-width: 1000px) { td.strip { white-space: normal; } }
@media (max-width: 640px) {
  body { margin: 10px; }
  td { overflow-wrap: anywhere; }
  table, tbody, tr, th, td { display: block; width: auto; }
  thead { display: none; }
  tr { border-bottom: 1px solid #e3e7eb; padding: 6px 0; }
  th, td { border: 0; padding: 2px 0; }
  td.strip { white-space: normal; }
  input, select { max-width: 100%; box-sizing: border-box; }
}
"""


def render(
    title: str,
    jobs: Sequence[JobView],
    nodes: Sequence[str],
    now: float,
    refresh: int = 10,
    *,
    actions: Sequence[tuple[str, ActionRecord]] = (),
    gone: Collection[str] = (),
    controls: Callable[[JobView], str] | None = None,
    banner: str = "",
    chart: str = "",
    nav: tuple[JobQuery, JobsPage] | None = None,
    oneoffs: Sequence[OneOffCounts] = (),
    root: str = "",
) -> str:
    """The status page as HTML text.

    Args:
        title: What the page is about (the jobs file).
        jobs: One view per job, in the order to show.
        nodes: The nodes (``host:pid``) seen running this state.
        now: The time the page shows as "now" (POSIX seconds).
        refresh: Seconds between the page's own reloads.
        actions: Operators' recent actions, newest first, with their job's name.
        gone: Those of ``nodes`` known to be gone (their process or database session
            ended): marked so beside the live ones.
        controls: Each row's buttons and links under the job's name (HTML), if any.
        banner: HTML under the title (who is logged in).
        chart: HTML under the table (the cluster's runs per minute).
        nav: The listing these jobs are a page of, and what it holds: adds the search
            form, a link per state and links to the pages beside (all plain HTML).
        oneoffs: The one-offs per function, shown as a small table under the jobs,
            with a link to their charts.
        root: The path the pages are under (the link to the one-offs' charts).

    """
    node_list = ", ".join(_node(n, n in gone) for n in nodes) or "none seen in the last hour"
    return f"""{_head(title, refresh)}
<body>
<h1>tickwork: {html.escape(title)}</h1>
{banner}<div class="meta" id="live-meta" data-live>{_time(now)} &middot; nodes: {node_list}
&middot; refreshes every {refresh} s (<a href="">reload</a>)</div>
{_jobs_table(jobs, now, controls, nav)}<div class="legend">{_legend()}</div>
{oneoffs_table(oneoffs, root)}{chart}{_actions(actions)}
{live_script(refresh)}
</body>
</html>
"""


def _head(title: str, refresh: int) -> str:
    """The page's ``<head>``: its title, its style, a reload for browsers without scripts."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<noscript><meta http-equiv="refresh" content="{refresh}"></noscript>
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickwork: {html.escape(title)}</title>
<style>
{STYLE}</style>
</head>"""


def _jobs_table(
    jobs: Sequence[JobView],
    now: float,
    controls: Callable[[JobView], str] | None,
    nav: tuple[JobQuery, JobsPage] | None,
) -> str:
    """The jobs' table; with ``nav``, the search form above it and the page links below."""
    rows = [_row(job, now, controls) for job in jobs]
    finder, pager = ("", "") if nav is None else (_finder(*nav), _pager(*nav, len(jobs)))
    asked = nav is not None and (nav[0].search or nav[0].state or nav[0].offset)
    empty = "no job matches (see the links above)" if asked else "no jobs in the state"
    body = "\n".join(rows) or f'<tr><td colspan="6">{empty}</td></tr>'
    return f"""{finder}<div id="live-jobs" data-live><table>
<thead><tr><th>job</th><th>schedule</th><th>next run</th><th>last outcome</th>
<th>lateness</th><th>recent slots (oldest left)</th></tr></thead>
<tbody>
{body}
</tbody>
</table>
{pager}</div>"""


def _legend() -> str:
    """What each colour of the recent slots means."""
    return "".join(
        f'<span class="slot" style="background:{c}"></span> {o} ' for o, c in _COLOURS.items()
    )


#: Ledger entries read per job for its failure streak.
SUMMARY_DEPTH = STREAK_DEPTH


def failure_summary(store: Store, job_id: str, *, excluding: float | None = None) -> dict[str, Any]:
    """``last_success`` (ISO time or None) and ``consecutive_failures`` from the ledger.

    Failures are ``failed``, ``timeout`` and ``abandoned`` entries since the newest
    ``ok`` (given-up slots neither break nor extend the streak; the retried attempts
    of one run count once), counted over the newest `SUMMARY_DEPTH` entries; ``None``
    for both where the store keeps no ledger. ``excluding``: a slot left out (see
    `failure_streak`).
    """
    failures, last_ok = _streak_of(store, job_id, excluding)
    return {
        "last_success": None if last_ok is None else iso(last_ok, millis=True),
        "consecutive_failures": failures,
    }


def _streak_of(
    store: Store, job_id: str, excluding: float | None = None
) -> tuple[int | None, float | None]:
    """``(failures in a row, when the last ok run ended)``; ``(None, None)``: no ledger."""
    if not isinstance(store, SlotLedger):
        return None, None
    failures, ok = failure_streak(store, job_id, excluding=excluding)
    if ok is None:  # not among the newest: look for the last success alone
        older = store.history(job_id, outcome="ok", limit=1)
        ok = older[0] if older else None
    return failures, None if ok is None else ok.ended if ok.ended is not None else ok.scheduled


# -- reading the page from a running scheduler ------------------------------------------

#: Ledger entries read for the cluster's runs per minute, in pages of `_RATE_PAGE`.
RATE_ENTRIES: Final = 5000
_RATE_PAGE: Final = 500


def _runs_per_minute(store: Store, prefix: str, now: float) -> str:
    """The chart of runs per minute by outcome, last hour, of the ``prefix`` jobs (ledger).

    All the namespace's jobs (``prefix``; ``""``: every job), not only the page's.

    Read newest first until an entry ended before the hour (the ledger's order is the
    order runs ended), at most `RATE_ENTRIES` entries of any namespace.
    """
    if not isinstance(store, SlotLedger):
        return ""
    points: list[tuple[float, str]] = []
    before, since, capped = None, now - 3600, True
    for _ in range(RATE_ENTRIES // _RATE_PAGE):
        entries = store.history(before=before, limit=_RATE_PAGE)
        ends = [(e.ended or e.scheduled, e.outcome) for e in entries]
        points += [p for p, e in zip(ends, entries, strict=True) if e.job_id.startswith(prefix)]
        if len(entries) < _RATE_PAGE or min(t for t, _ in ends) < since:
            capped = False
            break
        before = entries[-1].seq
    note = f"Only the newest {RATE_ENTRIES:,} ledger entries were read." if capped else ""
    chart = rate_chart(points, start=since, end=now, zone="UTC", note=note)
    return f"<h2>runs per minute by outcome, last hour (UTC)</h2>\n{chart}\n"


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie nobody reaped has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def gone_owners(store: Store, owners: Iterable[str]) -> set[str]:
    """Those of ``owners`` (claim owners, ``host:pid:...``) known to be gone.

    Gone: the store's session liveness says so (PostgreSQL: none of its database
    sessions is open; SQLite: its listed process has ended), or it names a process on
    this host that is not running. An owner that cannot be judged (another host, a
    store that cannot be read now) is not called gone.
    """
    wanted = {o for o in owners if o}
    gone: set[str] = set()
    if isinstance(store, SessionLiveness) and wanted:
        try:
            gone = wanted - store.live_owners(wanted)
        except StoreError as exc:
            _log.debug("status page: cannot read which nodes are live: %s", exc)
    host = socket.gethostname()
    for owner in wanted - gone:
        owner_host, _, rest = owner.partition(":")
        pid = rest.partition(":")[0]
        if owner_host == host and pid.isdigit() and not pid_running(int(pid)):
            gone.add(owner)
    return gone


def page(
    store: Store,
    namespace: str | None,
    title: str,
    *,
    controls: Callable[[JobView], str] | None = None,
    banner: str = "",
    listing: JobQuery | None = None,
    root: str = "",
    refresh: int = 10,
) -> str:
    """The status page of a namespace's jobs: what the state says right now.

    Args:
        store: The store: its jobs, ledger and actions, which nodes are live, each
            job's failure streak.
        namespace: Only this namespace's jobs (a daemon's), shown by name; ``None``:
            every job of the store, shown by its id.
        title: What the page is about (the jobs file).
        controls: Each row's buttons (see `render`).
        banner: HTML under the title (see `render`).
        listing: The search, state and page asked for (its prefix is the namespace's);
            ``None``: the first `PER_PAGE` jobs. Only the page's jobs are read in full.
        root: The path the pages are under (see `render`).
        refresh: Seconds between the page's own reloads (see `render`).

    """
    from tickwork._daemon.declare import owner_label

    now = time.time()
    prefix = "" if namespace is None else namespace + "/"
    query = replace(listing or JobQuery(limit=PER_PAGE), prefix=prefix)
    listed = list_jobs(store, query, now=now)
    views, owners = _views(store, listed.jobs, namespace, prefix, now)
    recent = store.actions(limit=ACTIONS_SHOWN * 10) if isinstance(store, RuntimeControl) else []
    actions = [(a.job_id.removeprefix(prefix), a) for a in recent if a.job_id.startswith(prefix)]
    labels = {owner_label(o) for o in owners}
    return render(
        title,
        views,
        sorted(labels),
        now,
        refresh,
        actions=actions[:ACTIONS_SHOWN],
        gone=_gone_labels(store, owners),
        controls=controls,
        banner=banner,
        chart=_runs_per_minute(store, prefix, now),
        nav=(query, listed),
        oneoffs=counts(store),
        root=root,
    )


def _views(
    store: Store, states: Sequence[JobState], namespace: str | None, prefix: str, now: float
) -> tuple[list[JobView], set[str]]:
    """The rows of the page's jobs, and the owners seen running them in the last hour."""
    from tickwork._daemon.declare import owned
    from tickwork._daemon.jobsfile.pools import pool_waits

    views: list[JobView] = []
    owners: set[str] = set()
    for state in states:
        if namespace is not None and not owned(state, namespace):
            continue
        entries = store.history(state.id, limit=STRIP) if isinstance(store, SlotLedger) else []
        owners.update(e.node for e in entries if e.node and (e.ended or e.scheduled) > now - 3600)
        owners.update(c.owner for c in state.claims if c.owner)
        failures, last_ok = _streak_of(store, state.id)
        name = str(state.spec.kwargs.get("job", state.id)) if prefix else state.id
        # Chains: the jobs it runs after, by their names in the file.
        words = schedule_and_after(state.spec.schedule, state.spec.after, prefix=prefix)
        views.append(JobView(name, state, words, entries, failures=failures, last_ok=last_ok))
    waits = pool_waits(store, [v.state for v in views], now)  # concurrency pools
    return [replace(v, waiting_for=waits.get(v.state.id)) for v in views], owners


def _gone_labels(store: Store, owners: set[str]) -> set[str]:
    """The nodes (``host:pid``) of ``owners`` known to be gone (see `gone_owners`)."""
    from tickwork._daemon.declare import owner_label

    gone_raw = gone_owners(store, owners)
    # A label is gone when every owner behind it is (a process has one owner per start).
    return {owner_label(o) for o in gone_raw} - {owner_label(o) for o in owners - gone_raw}
