"""A job's page (`tickwork._daemon.web.job_page`) through `tickwork._daemon.web.api.Api`, as the
forms and links of a browser without JavaScript would ask it: the ledger's pages and
filters over 100,000 entries, the job's configuration, refused and confirmed actions.
"""

from __future__ import annotations

import html
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tickwork import Cron, DurableScheduler, Every
from tickwork._daemon.web.api import Api, Request, Response
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

HOST = {"Host": "127.0.0.1:8000"}
FORM = HOST | {
    "Content-Type": "application/x-www-form-urlencoded",
    "Origin": "http://127.0.0.1:8000",
}
#: Entries in the big job's ledger; one in `FAILED_EVERY` failed.
ENTRIES = 100_000
FAILED_EVERY = 1000
T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    """Jobs ``big`` (100,000 ledger entries, every minute), ``small`` and ``paris`` (none)."""
    path = tmp_path_factory.mktemp("job-page") / "s.sqlite3"
    with SQLiteStore(path) as store:
        scheduler = DurableScheduler(store)
        scheduler.declare(JobSpec("big", "tests.durable_jobs:record", Every(60)))
        scheduler.declare(
            JobSpec("small", "tests.durable_jobs:record", Every(3600), retries=2, timeout=30)
        )
        paris = Cron("0 7 * * *", tz="Europe/Paris")
        scheduler.declare(JobSpec("paris", "tests.durable_jobs:record", paris, args=(1,)))
        scheduler.declare(JobSpec("held", "tests.durable_jobs:record", Every(60), paused=True))
        scheduler.declare(JobSpec("minutely", "tests.durable_jobs:record", Every(60)))
        scheduler.declare(JobSpec("queued", "tests.durable_jobs:record", Every(3600)))
        scheduler.trigger("queued", by="setup")  # one waiting run (nothing runs here)
        rows = [
            ("big", T0 + 60 * i, "failed" if i % FAILED_EVERY == 0 else "ok", 1, "schedule",
             T0 + 60 * i, T0 + 60 * i, T0 + 60 * i + 1, "h:1", 1, None, None, T0 + 60 * i + 1)
            for i in range(ENTRIES)
        ]  # fmt: skip
        with sqlite3.connect(path) as conn:
            conn.executemany(
                "INSERT INTO ledger (job_id, scheduled, outcome, slots, origin, claimed,"
                " started, ended, node, attempt, error, output, recorded)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            # Declared a day ago: a backfill of the last hours has slots to queue.
            conn.execute("UPDATE jobs SET first_slot = ? WHERE id = 'minutely'", (T0,))
        yield store


_APIS: dict[int, Api] = {}


def api(store: SQLiteStore) -> Api:
    """The pages of ``store``, the app's login saying who asks: one per store (its form tokens)."""
    return _APIS.setdefault(id(store), Api(store, None, "the app", None, users=True))


def get(store: SQLiteStore, path: str) -> Response:
    path, _, query = path.partition("?")
    asked = Request("GET", path, _query(query), HOST, user="ana")
    return api(store).handle(asked)


def _query(text: str) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    return parse_qs(text, keep_blank_values=True)


def post(store: SQLiteStore, path: str, fields: dict[str, str]) -> Response:
    page = get(store, path.rsplit("/", 1)[0]).body.decode()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf, page[-2000:]
    body = urlencode(fields | {"csrf": csrf.group(1)}).encode()
    return api(store).handle(Request("POST", path, {}, FORM, body, user="ana"))


def due_times(page: str) -> list[str]:
    return re.findall(r'<tr class="entry"><td>([^<]+)<', page)


def older_link(page: str) -> str | None:
    return page_link(page, "next", "older")


def page_link(page: str, rel: str, words: str) -> str | None:
    """The ledger's link ``words`` (its query, unescaped), or None where the page has none."""
    found = re.search(rf'<a rel="{rel}" href="([^"]+)">{words}</a>', page)
    return None if found is None else html.unescape(found.group(1))


# -- the ledger's pages ------------------------------------------------------------------


def test_the_ledger_pages_back_by_seq_with_newest_and_older_links(state: SQLiteStore) -> None:
    first = get(state, "/jobs/big").body.decode()
    assert len(due_times(first)) == 50
    link = older_link(first)
    assert link is not None and link.startswith("?before=") and link.endswith("#history")
    assert 'rel="prev"' not in first  # the newest page has no newer one
    second = get(state, "/jobs/big" + link.removesuffix("#history")).body.decode()
    assert len(due_times(second)) == 50 and not set(due_times(second)) & set(due_times(first))
    assert '<a rel="first" href="?#history">newest</a>' in second
    newest, oldest = store_times(state, limit=100)
    assert due_times(first)[0] == newest and due_times(second)[-1] == oldest


def _walk(store: Any, query: str, rel: str, words: str) -> list[tuple[list[str], str]]:
    """Each page of ``/jobs/walk`` from ``query`` following its ``words`` links: (due times,
    page). On every page, "newest" is there exactly when "newer" is.
    """
    pages: list[tuple[list[str], str]] = []
    link: str | None = query
    while link is not None:
        assert len(pages) < 20, "the links go round"
        assert link.endswith("#history")
        page = get(store, "/jobs/walk" + link.removesuffix("#history")).body.decode()
        newest = page_link(page, "first", "newest")
        assert (newest is None) == (page_link(page, "prev", "newer") is None), link
        assert newest is None or newest == link.split("?")[0] + _kept(link) + "#history"
        pages.append((due_times(page), page))
        link = page_link(page, rel, words)
    return pages


def _kept(link: str) -> str:
    """The filter part of a ledger link's query (what every link keeps)."""
    from urllib.parse import parse_qsl

    fields = parse_qsl(link.split("?", 1)[1].removesuffix("#history"))
    kept = [(k, v) for k, v in fields if k not in ("before", "after")]
    return "?" + urlencode(kept)


@pytest.mark.parametrize("outcome", [None, "failed"])
def test_the_ledger_walks_back_and_forward_showing_every_entry_once(
    open_either_store: Any, outcome: str | None
) -> None:
    """250 entries: older links from the newest page, then newer ones from the oldest."""
    store = open_either_store()
    DurableScheduler(store).declare(JobSpec("walk", "tests.durable_jobs:record", Every(60)))
    rows = [
        ("walk", T0 + 60 * i, "failed" if i % 2 else "ok", 1, "schedule", T0 + 60 * i,
         T0 + 60 * i, T0 + 60 * i + 1, "h:1", 1, None, None, T0 + 60 * i + 1)
        for i in range(250)
    ]  # fmt: skip
    store._run("fill the ledger", lambda cur: store._ledger.write(cur, rows))
    kept = "?" if outcome is None else "?" + urlencode({"outcome": outcome})
    back = _walk(store, kept + "#history", "next", "older")
    sizes = [50, 50, 50, 50, 50] if outcome is None else [50, 50, 25]
    assert [len(times) for times, _ in back] == sizes
    seen = [t for times, _ in back for t in times]
    assert len(set(seen)) == len(seen) == sum(sizes)
    assert seen == sorted(seen, reverse=True)  # newest first, page after page
    if outcome is not None:
        assert all(p.count('<span class="outcome failed">') == len(t) for t, p in back)
    newer = [page_link(p, "prev", "newer") for _, p in back]
    assert newer[0] is None and None not in newer[1:]  # only the newest page has no newer
    # forward from the oldest page, every link keeping the filter: none seen twice
    start = newer[-1]
    assert start is not None and _kept(start) == kept
    forward = _walk(store, start, "prev", "newer")
    ahead = [t for times, _ in forward for t in times]
    assert sorted(back[-1][0] + ahead) == sorted(seen) and len(set(ahead)) == len(ahead)
    assert all(len(times) == 50 for times, _ in forward)
    assert forward[-1][0] == back[0][0]  # the walk ends at the newest page
    # every page forward has an older one: the page before it on the way
    for (_, page), previous in zip(forward, [back[-1], *forward[:-1]], strict=True):
        older = page_link(page, "next", "older")
        assert older is not None and _kept(older) == kept
        before = get(store, "/jobs/walk" + older.removesuffix("#history")).body.decode()
        assert due_times(before) == previous[0]


def test_a_cursor_past_either_end_shows_no_entry_and_a_way_back(state: SQLiteStore) -> None:
    top = state.history("big", limit=1)[0].seq
    beyond = get(state, f"/jobs/big?after={top}").body.decode()
    assert due_times(beyond) == [] and "no entry matches" in beyond
    assert page_link(beyond, "prev", "newer") is None
    assert page_link(beyond, "next", "older") == f"?before={top + 1}#history"
    below = get(state, "/jobs/big?before=0").body.decode()
    assert due_times(below) == [] and page_link(below, "next", "older") is None
    assert page_link(below, "prev", "newer") == "?after=-1#history"
    bad = get(state, "/jobs/big?before=5&after=2")
    assert bad.status == 400 and "not both; got 5 and 2" in bad.body.decode()


def store_times(store: SQLiteStore, *, limit: int) -> tuple[str, str]:
    from tickwork._daemon.web.job_page import _entry

    entries = store.history("big", limit=limit)
    first = due_times(_entry(entries[0], T0))[0]
    last = due_times(_entry(entries[-1], T0))[0]
    return first, last


def test_the_ledger_filters_by_outcome_and_time_and_keeps_the_filter_when_paging(
    state: SQLiteStore,
) -> None:
    failed = get(state, "/jobs/big?outcome=failed").body.decode()
    assert len(due_times(failed)) == 50 and failed.count('<span class="outcome failed">') == 50
    assert '<option value="failed" selected>' in failed
    link = older_link(failed)
    assert link is not None and "outcome=failed" in link
    rest = get(state, "/jobs/big" + link.removesuffix("#history")).body.decode()
    assert len(due_times(rest)) == 50 and older_link(rest) is None  # 100 failed in all
    since = "2023-11-14T22:13:20Z"  # T0: every entry is due since
    recent = get(state, "/jobs/big?" + urlencode({"outcome": "failed", "since": since}))
    assert len(due_times(recent.body.decode())) == 50
    late = "2030-01-01T00:00:00Z"
    none = get(state, "/jobs/big?" + urlencode({"since": late})).body.decode()
    assert due_times(none) == [] and "no entry matches" in none and older_link(none) is None
    assert f'value="{late}"' in none


def test_a_bad_ledger_filter_is_refused_with_its_value(state: SQLiteStore) -> None:
    bad = get(state, "/jobs/big?outcome=great")
    assert bad.status == 400 and "outcome must be one of ok, " in bad.body.decode()
    assert "&#x27;great&#x27;" in bad.body.decode()
    bad = get(state, "/jobs/big?before=-1")
    assert bad.status == 400 and "before must be a ledger seq" in bad.body.decode()
    bad = get(state, "/jobs/big?since=yesterday-ish")
    assert bad.status == 400 and "since" in bad.body.decode()


def test_an_old_page_of_a_100_000_entry_ledger_is_read_with_a_limit(state: SQLiteStore) -> None:
    """The query reads ENTRIES + 1 rows through the (job_id, seq) index, not the ledger."""
    seq = state.history("big", limit=1)[0].seq
    start = time.perf_counter()
    for before in range(seq - 90_000, seq, 10_000):
        page = get(state, f"/jobs/big?before={before}").body.decode()
        assert len(due_times(page)) == 50
    took = (time.perf_counter() - start) / 9
    assert took < 5, took  # generous for a loaded machine: the plan below is the point
    plan = _plan(state, "SELECT seq FROM ledger WHERE job_id = ? AND seq < ? ORDER BY seq DESC")
    assert "ledger_job" in plan and "TEMP B-TREE" not in plan.upper(), plan
    forward = _plan(state, "SELECT seq FROM ledger WHERE job_id = ? AND seq > ? ORDER BY seq")
    assert "ledger_job" in forward and "TEMP B-TREE" not in forward.upper(), forward
    for after in range(seq - 90_000, seq, 10_000):  # paging forward reads as little
        page = get(state, f"/jobs/big?after={after}").body.decode()
        assert len(due_times(page)) == 50 and 'rel="prev"' in page and 'rel="next"' in page


def _plan(store: SQLiteStore, query: str) -> str:
    with sqlite3.connect(Path(store._path)) as conn:
        rows: list[Any] = conn.execute(f"EXPLAIN QUERY PLAN {query}", ("big", 5)).fetchall()
    return " ".join(str(r[-1]) for r in rows)


# -- the job's configuration, its times in its zone ---------------------------------------


def config_rows(page: str) -> dict[str, str]:
    table = page.split('<table class="config">', 1)[1].split("</table>", 1)[0]
    found = re.findall(r'<th scope="row">([^<]+)</th><td>([^<]*)</td>', table)
    return {k: html.unescape(v) for k, v in found}


def test_the_page_shows_what_the_job_runs_and_its_policies(state: SQLiteStore) -> None:
    rows = config_rows(get(state, "/jobs/small").body.decode())
    assert rows["function"] == "tests.durable_jobs:record()"
    assert rows["timeout"] == "30 s" and rows["retries"].startswith("2 (backoff ")
    assert rows["overlap"] == "skip" and rows["pool"] == "none"
    assert rows["delivery"] == "at most once" and rows["isolation"] == "thread"
    assert rows["schedule"].startswith("every ")
    assert rows["next slot"].endswith(" UTC") and " = " not in rows["next slot"]


def test_a_job_s_times_are_in_its_zone_and_its_next_slot_in_utc_too(state: SQLiteStore) -> None:
    page = get(state, "/jobs/paris").body.decode()
    rows = config_rows(page)
    assert rows["function"] == "tests.durable_jobs:record(1)"
    assert rows["schedule"] == "at 07:00 (Europe/Paris)"
    local, utc = rows["next slot (Europe/Paris, UTC)"].split(" = ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 07:00:00 CES?T", local), local
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 0[56]:00:00 UTC", utc), utc
    assert f"next run {local} (" in page  # the heading's time: the same format and zone


def test_the_daemon_s_page_shows_the_jobs_file_s_command_and_limits(state: SQLiteStore) -> None:
    from tickwork._daemon.jobsfile.config import JobConfig

    job = JobConfig("small", Every(3600), command=("echo", "hi there"), timeout=5, retries=1)
    pages = Api(state, None, "the app", None, users=True, configured={"small": job}.get)
    answer = pages.handle(Request("GET", "/jobs/small", {}, HOST, user="ana"))
    rows = config_rows(answer.body.decode())
    assert rows["command"] == "echo 'hi there'" and "isolation" not in rows
    assert rows["timeout"] == "5.00 s" and rows["retries"].startswith("1 (backoff 1.00 s")


# -- refused actions ---------------------------------------------------------------------


def test_a_refused_backfill_stays_on_the_job_s_page_with_what_was_typed_and_why(
    state: SQLiteStore,
) -> None:
    typed = {"from": "yesterday-ish", "to": "now", "note": "<b>catch up</b>", "dry_run": "on"}
    answer = post(state, "/jobs/small/backfill", typed)
    page = answer.body.decode()
    assert answer.status == 400 and answer.content_type.startswith("text/html")
    assert "<h1>small" in page and '<table class="config">' in page  # the job's own page
    refusal = re.search(r'<div class="refused" role="alert" id="refused">([^<]+)</div>', page)
    assert refusal and refusal.group(1).startswith("from ") and "yesterday-ish" in refusal.group(1)
    form = page.split('action="/jobs/small/backfill"', 1)[1].split("</form>", 1)[0]
    assert 'name="from" placeholder="from (2h, ISO time)" size="18" value="yesterday-ish"' in form
    assert 'value="now"' in form and 'value="&lt;b&gt;catch up&lt;/b&gt;"' in form
    assert 'name="dry_run" checked' in form
    other = page.split('action="/jobs/small/trigger"', 1)[1].split("</form>", 1)[0]
    assert "value=" not in other.replace('name="csrf" value=', "")  # only the refused form
    assert state.get("small").waiting_runs == 0


def test_a_backfill_of_a_paused_job_is_refused_on_its_page_with_409(state: SQLiteStore) -> None:
    answer = post(state, "/jobs/held/backfill", {"from": "2h", "to": "now"})
    page = answer.body.decode()
    assert answer.status == 409 and "<h1>held" in page and 'role="alert"' in page
    assert "paused" in page.split('role="alert"', 1)[1].split("</div>", 1)[0]
    assert 'value="2h"' in page


# -- destructive actions ask first -------------------------------------------------------


def test_cancel_all_waiting_asks_first_and_the_first_post_changes_nothing(
    state: SQLiteStore,
) -> None:
    acts = len(state.actions("queued", limit=100))
    asked = post(state, "/jobs/queued/cancel", {"all_waiting": "true", "note": "tidy"})
    page = asked.body.decode()
    assert asked.status == 200 and "cancel all 1 waiting runs of queued?" in page
    assert state.get("queued").waiting_runs == 1 and len(state.actions("queued", limit=100)) == acts
    form = page.split('action="/jobs/queued/cancel"', 1)[1].split("</form>", 1)[0]
    assert 'name="confirm" value="1"' in form and 'name="note" value="tidy"' in form
    assert '<a href="/jobs/queued">no, back to queued</a>' in page
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    fields.pop("csrf")
    done = post(state, "/jobs/queued/cancel", fields)
    assert done.status == 303 and state.get("queued").waiting_runs == 0
    assert state.actions("queued", limit=1)[0].note == "tidy"


def test_a_large_backfill_asks_first_with_its_count_and_a_small_one_does_not(
    state: SQLiteStore,
) -> None:
    asked = post(state, "/jobs/minutely/backfill", {"from": "3h", "to": "now"})
    page = asked.body.decode()
    assert asked.status == 200 and re.search(r"queue 1[78]\d runs of minutely, due ", page)
    assert state.get("minutely").waiting_runs == 0 and state.actions("minutely", limit=1) == []
    form = page.split('action="/jobs/minutely/backfill"', 1)[1].split("</form>", 1)[0]
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    assert fields["confirm"] == "1" and fields["from"] == "3h" and fields["to"] == "now"
    fields.pop("csrf")
    done = post(state, "/jobs/minutely/backfill", fields)
    assert done.status == 303 and state.get("minutely").waiting_runs > 100
    small = post(state, "/jobs/small/backfill", {"from": "30m", "to": "now", "dry_run": "on"})
    assert small.status == 303  # a dry run never asks
