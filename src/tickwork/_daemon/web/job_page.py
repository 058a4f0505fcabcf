"""The pages beside the status page: one per job, the login form, a refusal, the buttons.

A job's page shows its state, its newest ledger entries with their errors and output
tails, its operators' actions and its waiting runs, and (to a logged-in viewer) forms
for each action. The forms post to ``/jobs/NAME/ACTION`` with the page's form token
and work without JavaScript; where it is on, the status page's one script swaps the
ledger, the waiting runs and the heading for fresh copies every 10 s (never the forms).
Every text from the state is escaped.
"""

from __future__ import annotations

import functools
import html
import json
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode

from tickwork._core.text import iso_due, job_zone, schedule_words, zoned_time
from tickwork._core.text import relative_time as _ago
from tickwork._core.text import short_duration as _seconds
from tickwork._daemon.actions import waiting_why
from tickwork._daemon.web.charts import outcome_bar, time_bars
from tickwork._daemon.web.status_page import STYLE, job_time, live_script, paused_mark, said_box
from tickwork.stores import (
    OUTCOMES,
    ActionRecord,
    JobState,
    RuntimeControl,
    SlotLedger,
    SlotRecord,
)

__all__ = [
    "ENTRIES",
    "OUTPUT_TAIL",
    "HistoryQuery",
    "Refusal",
    "Viewer",
    "confirm_page",
    "controls",
    "job_page",
    "login_page",
    "message_page",
]

#: Ledger entries shown on a job's page.
ENTRIES: Final = 50
#: Seconds between the live refreshes of a job's page (where JavaScript is on).
LIVE_EVERY: Final = 10
#: Characters of a run's output shown (its end).
OUTPUT_TAIL: Final = 2000
#: Actions and waiting runs shown on a job's page.
LISTED: Final = 50
#: The charts' spans: the query's ``span`` -> (seconds, bars, words).
SPANS: Final = {"day": (86400, 144, "last day"), "week": (7 * 86400, 168, "last week")}
#: Ledger entries read for the charts, newest first (the default retention keeps 1,000).
CHART_ENTRIES: Final = 2000

_PAGE_STYLE: Final = """\
button { font: inherit; padding: 2px 8px; cursor: pointer; }
.forms form { margin: 6px 0; padding: 8px; border: 1px solid #e3e7eb; border-radius: 4px; }
.refused { background: #fbeeee; border: 1px solid #d1393b; padding: 8px; }
.ask { background: #fff6e5; border: 1px solid #a15c00; padding: 8px; margin-bottom: 8px; }
.charts svg { display: block; margin: 4px 0 10px; }
pre.output { background: #f5f7f9; padding: 6px; max-height: 16em; overflow: auto;
  white-space: pre-wrap; font-size: 12px; margin: 4px 0 0; }
"""


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """Which page of a job's ledger its page shows: ``?outcome=&since=&before=|after=``.

    ``outcome``: one of `tickwork.stores.OUTCOMES` or ``None`` (all). ``since``: due at
    or after (POSIX seconds), ``since_text`` as typed. ``before``: the entries right
    older than this ``seq`` (paging back); ``after``: the entries right newer than it
    (paging forward); neither: the newest.
    """

    outcome: str | None = None
    since: float | None = None
    since_text: str = ""
    before: int | None = None
    after: int | None = None

    def link(self, *, before: int | None = None, after: int | None = None) -> str:
        """The query of this filter's page before or after a ``seq`` (neither: the newest).

        Escaped for an attribute, with the ledger's anchor.
        """
        fields = {"outcome": self.outcome, "since": self.since_text, "before": before,
                  "after": after}  # fmt: skip
        kept = {k: v for k, v in fields.items() if v not in (None, "")}
        return html.escape("?" + urlencode(kept)) + "#history"


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who looks at a page: the token's name if logged in, the form token, control on/off.

    ``root``: the path the pages are served under, before every link, form and
    redirect. ``app_login``: the name is the application's own login's (no log-out
    form here, no link to ``/login``).
    """

    name: str | None
    form_token: str | None
    control: bool
    root: str = ""
    app_login: bool = False

    def banner(self) -> str:
        """The line at the top of the status page: who is logged in, or how to log in."""
        if not self.control:
            return ""
        if self.name is None:
            return f'<div class="sub">{self.log_in()} to act on the jobs</div>'
        if self.app_login:
            return f'<div class="sub">signed in as {html.escape(self.name)}</div>'
        return (
            f'<div class="sub">logged in as {html.escape(self.name)} '
            f"{_form(self.root + '/logout', 'log out', self, {})}</div>"
        )

    def log_in(self) -> str:
        """How to log in, as a link (or in words, where the application's login is)."""
        if self.app_login:
            return "sign in to the application"
        return f'<a href="{html.escape(self.root)}/login">log in</a>'


def _form(action: str, label: str, viewer: Viewer, fields: dict[str, str], extra: str = "") -> str:
    hidden = "".join(
        f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    if viewer.form_token is not None and not action.endswith("/logout"):
        hidden += f'<input type="hidden" name="csrf" value="{html.escape(viewer.form_token)}">'
    name = label.replace(" ", "-")
    return (
        f'<form class="inline" method="post" action="{html.escape(action)}">{hidden}{extra}'
        f'<button type="submit" data-action="{name}">'
        f"{html.escape(label)}</button></form>"
    )


def controls(view: Any, viewer: Viewer) -> str:
    """A status page row's buttons: pause or resume, trigger, and the job's page link."""
    base = f"{viewer.root}/jobs/{quote(view.name)}"
    link = f'<div class="sub"><a href="{html.escape(base)}">details</a></div>'
    if viewer.name is None:
        return link
    base += "/"
    back = {"back": "/"}
    which = "resume" if view.state.paused else "pause"
    buttons = _form(base + which, which, viewer, back) + _form(
        base + "trigger", "trigger", viewer, back
    )
    return f'<div class="buttons">{buttons}</div>{link}'


def _head(title: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickwork: {html.escape(title)}</title>
<style>
{STYLE}{_PAGE_STYLE}</style>
</head>
<body>
"""


def login_page(
    title: str, *, status: int = 200, wrong: bool = False, root: str = "", app: bool = False
) -> str:
    """The login form: a token's secret, kept as a session cookie.

    ``root``: the path the pages are under. ``app``: only the application's own login
    says who asks (no tokens): the page says so instead of a form.
    """
    said = '<div class="refused">that token is not known here</div>' if wrong else ""
    need = '<p class="sub">a token is needed to see this page</p>' if status == 401 else ""
    if app:
        need = '<p class="sub">sign in to the application to see this page</p>'
        return _head(title) + f"<h1>tickwork: {html.escape(title)}</h1>{need}\n</body>\n</html>\n"
    return (
        _head(title)
        + f"<h1>tickwork: {html.escape(title)}</h1>{need}{said}"
        + f'<form method="post" action="{html.escape(root)}/login"><label>token '
        + '<input type="password" name="token" autocomplete="current-password"></label> '
        + '<button type="submit">log in</button></form>\n</body>\n</html>\n'
    )


def message_page(title: str, status: int, message: str, *, root: str = "") -> str:
    """A refusal, for a person: the status, what the API would say, a way back."""
    return (
        _head(title)
        + f"<h1>tickwork: {html.escape(title)}</h1>"
        + f'<div class="refused"><strong>{status}</strong>: {html.escape(message)}</div>'
        + f'<p><a href="{html.escape(root)}/">back to the status page</a></p>\n</body>\n</html>\n'
    )


def confirm_page(
    title: str, name: str, action: str, question: str, fields: Mapping[str, Any], viewer: Viewer
) -> str:
    """The step before a destructive action: what it would do, and a form that does it.

    Nothing is done by the POST that shows this page: its form posts ``fields`` again
    with ``confirm=1`` (and the page's form token); the other way goes back to the job.
    """
    kept = {
        k: ("true" if v is True else str(v))
        for k, v in fields.items()
        if k not in ("csrf", "confirm") and v not in (None, False, "")
    }
    base = f"{viewer.root}/jobs/{quote(name)}"
    label = f"yes, {action}"
    return (
        _head(f"{name} \u00b7 {title}")
        + f"<h1>{html.escape(name)}: {html.escape(action)}?</h1>"
        + f'<div class="ask" role="alert">{html.escape(question)}</div>'
        + '<p class="sub">nothing is done until you confirm</p><div class="confirm">'
        + _form(f"{base}/{action}", label, viewer, kept | {"confirm": "1"})
        + f' <a href="{html.escape(base)}">no, back to {html.escape(name)}</a></div>'
        + "\n</body>\n</html>\n"
    )


def _entry(e: SlotRecord, now: float, zone: str = "UTC") -> str:
    late = "-" if e.lateness is None else _seconds(e.lateness)
    took = "-" if e.duration is None else _seconds(e.duration)
    error = "" if not e.error else f'<div class="error">{html.escape(e.error.strip())}</div>'
    output = ""
    if e.output:
        tail = e.output[-OUTPUT_TAIL:]
        output = f'<pre class="output">{html.escape(tail)}</pre>'
    host = e.node.split(":", 2)[0] if e.node else ""
    extra = [] if e.slots == 1 else [f"{e.slots} slots"]
    if e.origin != "schedule":
        extra.append(e.origin)
    if e.attempt > 1:
        extra.append(f"attempt {e.attempt}")
    return (
        f'<tr class="entry"><td>{zoned_time(e.scheduled, zone)}'
        f'<div class="sub">{_ago(now, e.scheduled)}</div></td>'
        f'<td><span class="outcome {html.escape(e.outcome)}">'
        f"{html.escape(e.outcome)}</span> {html.escape(', '.join(extra))}{error}{output}</td>"
        f"<td>{late}</td><td>{took}</td><td>{html.escape(host)}</td></tr>"
    )


def _action(a: ActionRecord, zone: str) -> str:
    text = f"{zoned_time(a.at, zone)} \u00b7 {a.action} by {a.actor}"
    if a.detail:
        text += f" \u00b7 {a.detail}"
    note = "" if not a.note else f' <span class="note">{html.escape(a.note)}</span>'
    return f'<li class="action">{html.escape(text)}{note}</li>'


@dataclass(frozen=True, slots=True)
class Refusal:
    """An action the job's page refused: which, why, and the fields as they were typed."""

    action: str
    message: str
    typed: Mapping[str, Any]


def _input(name: str, hint: str, size: int, typed: Mapping[str, Any], extra: str = "") -> str:
    """A text field of an action's form, holding what was typed if the action was refused."""
    value = typed.get(name)
    shown = "" if value in (None, "", True, False) else f' value="{html.escape(str(value))}"'
    return f'<input name="{name}" placeholder="{hint}" size="{size}"{shown}{extra}> '


def _forms(name: str, state: JobState, viewer: Viewer, refused: Refusal | None = None) -> str:
    """The job's action forms, for a logged-in viewer; a refused one says why, as typed."""
    if not viewer.control:
        return (
            '<p class="sub">control over HTTP is off'
            " (no token: --http-token; mounted: tokens= or user=)</p>"
        )
    if viewer.name is None:
        return f'<p class="sub">{viewer.log_in()} to act on this job</p>'
    base = f"{viewer.root}/jobs/{quote(name)}/"

    def typed(action: str) -> Mapping[str, Any]:
        return refused.typed if refused is not None and refused.action == action else {}

    def note(action: str) -> str:
        return _input("note", "note (why)", 24, typed(action))

    fill = typed("backfill")
    dry = " checked" if fill.get("dry_run") is True else ""
    window = (
        _input("from", "from (2h, ISO time)", 18, fill, " required")
        + _input("to", "to (now, ISO time)", 18, fill, " required")
        + f'<label><input type="checkbox" name="dry_run"{dry}> dry run</label> '
    )
    rows = {
        "resume": _form(base + "resume", "resume", viewer, {}, note("resume")),
        "pause": _form(
            base + "pause",
            "pause",
            viewer,
            {},
            note("pause") + _input("until", "until (2h, ISO time)", 18, typed("pause")),
        ),
        "trigger": _form(base + "trigger", "trigger", viewer, {}, note("trigger")),
        "skip-next": _form(base + "skip-next", "skip next", viewer, {}, note("skip-next")),
        "backfill": _form(base + "backfill", "backfill", viewer, {}, note("backfill") + window),
        "cancel": _form(
            base + "cancel", "cancel all waiting", viewer, {"all_waiting": "true"}, note("cancel")
        ),
    }
    del rows["pause" if state.paused else "resume"]
    said = {}
    if refused is not None:
        said[refused.action] = (
            f'<div class="refused" role="alert" id="refused">{html.escape(refused.message)}</div>'
        )
    return (
        '<div class="forms">'
        + "".join(f"<div>{said.get(k, '')}{r}</div>" for k, r in rows.items())
        + "</div>"
    )


def _waiting(name: str, state: JobState, viewer: Viewer) -> str:
    if not state.waiting:
        return '<p class="none">no run waiting</p>'
    items = []
    for c in state.waiting[:LISTED]:
        cancel = ""
        if viewer.name is not None:
            slot = iso_due(c.scheduled)
            cancel = _form(
                f"{viewer.root}/jobs/{quote(name)}/cancel", "cancel", viewer, {"slot": slot}
            )
        items.append(
            f'<li class="waiting-run">{html.escape(job_time(c.scheduled, state))} '
            f"\u00b7 {html.escape(waiting_why(c))} {cancel}</li>"
        )
    more = len(state.waiting) - LISTED
    tail = f"<li>... and {more:,} more</li>" if more > 0 else ""
    return f'<ul class="waiting-runs">{"".join(items)}{tail}</ul>'


def _what_runs(state: JobState, job: Any) -> tuple[str, str]:
    """What the job runs: the jobs file's command or call, else the stored function."""
    from tickwork._daemon.declare import ENTRY_POINT

    spec = state.spec
    if job is not None and job.command is not None:
        text = job.command if isinstance(job.command, str) else shlex.join(job.command)
        return "command", text + (" (in a shell)" if job.shell else "")
    func, args, kwargs = spec.func, spec.args, dict(spec.kwargs)
    if job is not None and job.call is not None:
        func, args, kwargs = job.call, job.args, dict(job.kwargs)
    elif spec.func == ENTRY_POINT:
        return "runs", f"the jobs file's job {kwargs.get('job', spec.id)!r} (tickwork run)"
    shown = [json.dumps(a) for a in args] + [f"{k}={json.dumps(v)}" for k, v in kwargs.items()]
    return "function", f"{func}({', '.join(shown)})"


def _configuration(state: JobState, job: Any) -> str:
    """The job's settings: what it runs, its schedule, its limits and policies.

    The next slot is shown in the job's zone and in UTC. ``job``: the jobs file's entry
    (`tickwork._daemon.jobsfile.config.JobConfig`) where the daemon serving the page has one (its
    command, time limit and retries are the file's); else the stored declaration says.
    """
    spec = state.spec
    zone = job_zone(spec.schedule)
    source = spec if job is None else job
    nxt = state.next_run
    when = "none" if nxt is None else zoned_time(nxt, zone)
    if nxt is not None and zone != "UTC":
        when += f" = {zoned_time(nxt)}"
    retries = "none"
    if source.retries:
        retries = (
            f"{source.retries} (backoff {_seconds(source.retry_backoff)},"
            f" doubled up to {_seconds(source.retry_backoff_max)})"
        )
    grace = "no limit" if source.grace is None else _seconds(source.grace)
    runs = _what_runs(state, job)
    rows = [
        runs,
        ("schedule", "none (runs when triggered or chained)" if spec.schedule is None
         else schedule_words(spec.schedule)),
        ("next slot" if zone == "UTC" else f"next slot ({zone}, UTC)", when),
        ("timeout", "none" if not source.timeout else _seconds(source.timeout)),
        ("retries", retries),
        ("overlap", source.overlap),
        ("missed runs", f"{source.missed} (grace {grace})"),
        ("pool", spec.pool or "none"),
        ("delivery", source.delivery.replace("_", " ")),
    ]  # fmt: skip
    if runs[0] != "command":
        rows.append(("isolation", source.isolation))
    cells = "".join(
        f'<tr><th scope="row">{k}</th><td>{html.escape(str(v))}</td></tr>' for k, v in rows
    )
    return f'<h2>configuration</h2><table class="config"><tbody>{cells}</tbody></table>'


def _charts(store: Any, state: JobState, span: str, now: float) -> str:
    """The success-rate bar, and run duration and lateness per slot, over the span."""
    seconds, bars, words = SPANS.get(span, SPANS["day"])
    zone = job_zone(state.spec.schedule)
    entries = _history(store, state.id, since=now - seconds, limit=CHART_ENTRIES)
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.outcome] = counts.get(e.outcome, 0) + e.slots
    chart = functools.partial(time_bars, start=now - seconds, end=now, zone=zone, bars=bars)
    took = [(e.scheduled, e.duration, e.outcome) for e in entries if e.duration is not None]
    late = [(e.scheduled, e.lateness, e.outcome) for e in entries if e.lateness is not None]
    capped = f" (its newest {CHART_ENTRIES:,} entries)" if len(entries) >= CHART_ENTRIES else ""
    links = " \u00b7 ".join(
        f"<strong>{w}</strong>" if k == span else f'<a href="?span={k}">{w}</a>'
        for k, (_, _, w) in SPANS.items()
    )
    return (
        f"<h2>charts \u00b7 {words}{capped}, times in {html.escape(zone)}</h2>"
        f'<div class="sub">{links}</div><div class="charts">'
        + outcome_bar(counts, when=words)
        + chart(took, what="run duration")
        + chart(late, what="lateness")
        + "</div>"
    )


def _history(store: Any, job_id: str, **asked: Any) -> list[SlotRecord]:
    """The job's ledger entries, newest first (none where the store keeps no ledger)."""
    return list(store.history(job_id, **asked)) if isinstance(store, SlotLedger) else []


def _ledger_page(
    store: Any, job_id: str, asked: HistoryQuery
) -> tuple[list[SlotRecord], int | None, int | None]:
    """The page ``asked`` for, newest first, and the cursors of the newer and older pages.

    A cursor is ``None`` where no entry lies that way. One query of `ENTRIES` + 1
    entries (``LIMIT`` over the ledger's ``(job_id, seq)`` index) from the cursor, the
    one more saying whether a page follows that way; away from the newest page, one of
    a single entry saying whether one lies the other way.
    """
    read = functools.partial(_history, store, job_id, outcome=asked.outcome, since=asked.since)
    if asked.after is not None:  # paging forward: the entries right after the cursor
        entries = read(after=asked.after, limit=ENTRIES + 1)
        more = len(entries) > ENTRIES
        entries = entries[-ENTRIES:]
        newer = entries[0].seq if more else None
        edge = entries[-1].seq if entries else asked.after + 1
        return entries, newer, edge if read(before=edge, limit=1) else None
    entries = read(before=asked.before, limit=ENTRIES + 1)
    older = entries[ENTRIES - 1].seq if len(entries) > ENTRIES else None
    entries = entries[:ENTRIES]
    if asked.before is None:
        return entries, None, older
    edge = entries[0].seq if entries else asked.before - 1
    return entries, edge if read(after=edge, limit=1) else None, older


def _ledger(store: Any, job_id: str, asked: HistoryQuery, now: float, zone: str) -> str:
    """The ledger's page ``asked`` for: a filter form, the entries, newest, newer and older links.

    Every link keeps the filter; "newest" and "newer" show where newer entries exist,
    "older" where older ones do (see `_ledger_page`).
    """
    entries, newer, older = _ledger_page(store, job_id, asked)
    paged = asked.before is not None or asked.after is not None
    none = "no entry matches" if asked.outcome or asked.since or paged else "no runs yet"
    rows = "".join(_entry(e, now, zone) for e in entries) or f'<tr><td colspan="5">{none}</td></tr>'
    options = "".join(
        f'<option value="{o}"{" selected" if o == asked.outcome else ""}>{o}</option>'
        for o in ("", *OUTCOMES)
    ).replace('<option value="">', '<option value="">any outcome')
    pages = []
    if newer is not None:
        pages.append(f'<a rel="first" href="{asked.link()}">newest</a>')
        pages.append(f'<a rel="prev" href="{asked.link(after=newer)}">newer</a>')
    if older is not None:
        pages.append(f'<a rel="next" href="{asked.link(before=older)}">older</a>')
    return (
        '<h2 id="history">slots (newest first)</h2><form class="find" method="get"'
        ' action="#history"><select name="outcome" aria-label="outcome">'
        f'{options}</select> <input name="since" value="{html.escape(asked.since_text)}"'
        ' placeholder="due since (2h, ISO time)" size="22" aria-label="due since">'
        ' <button type="submit">filter</button></form>'
        '<div id="live-ledger" data-live><table class="ledger"><thead><tr><th>due</th>'
        "<th>outcome</th><th>lateness</th><th>took</th><th>node</th></tr></thead>"
        f'<tbody>{rows}</tbody></table><div class="pages">{" &middot; ".join(pages)}</div></div>'
    )


def job_page(
    store: Any,
    title: str,
    name: str,
    job_id: str,
    viewer: Viewer,
    said: str,
    span: str = "day",
    history: HistoryQuery | None = None,
    job: Any = None,
    refused: Refusal | None = None,
    every: int = LIVE_EVERY,
) -> str:
    """One job's page: its state, charts, actions to take, waiting runs, ledger, actions taken.

    ``span``: the charts' time (a key of `SPANS`; the day for anything else).
    ``history``: the ledger's page and filter (``None``: the newest entries).
    ``job``: the jobs file's entry of the job, where the daemon has one (its settings).
    ``refused``: an action just refused: its form says why and keeps what was typed.
    ``every``: seconds between the page's live refreshes.
    """
    now = time.time()
    state: JobState = store.get(job_id)
    zone = job_zone(state.spec.schedule)
    acts = store.actions(job_id, limit=LISTED) if isinstance(store, RuntimeControl) else []
    nxt = "held while paused" if state.paused else _ago(now, state.next_run)
    listed = "".join(_action(a, zone) for a in acts) or '<li class="none">none</li>'
    return (
        _head(f"{name} \u00b7 {title}")
        + f'<h1>{html.escape(name)}<span class="job-state" id="live-state" data-live>'
        + f"{paused_mark(state)}</span></h1>"
        + f'<div class="meta" id="live-meta" data-live><a href="{html.escape(viewer.root)}/">'
        + f"all jobs</a> \u00b7 {html.escape(title)} \u00b7 "
        + f"{html.escape(schedule_words(state.spec.schedule))} \u00b7 next run "
        + f"{job_time(state.next_run, state)} ({html.escape(nxt)}) \u00b7 "
        + '<a href="">reload</a></div>'
        + said_box(said)
        + _configuration(state, job)
        + _charts(store, state, span if span in SPANS else "day", now)
        + f"<h2>actions</h2>{_forms(name, state, viewer, refused)}"
        + f'<div id="live-waiting" data-live><h2>waiting runs ({state.waiting_runs:,})</h2>'
        + f"{_waiting(name, state, viewer)}</div>"
        + _ledger(store, job_id, history or HistoryQuery(), now, zone)
        + f'<h2>operators\' actions</h2><ul class="actions">{listed}</ul>'
        + live_script(every)
        + "\n</body>\n</html>\n"
    )
