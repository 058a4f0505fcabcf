"""A job's page (`tickwork._daemon.job_page`) through `tickwork._daemon.api.Api`, as the
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
from tickwork._daemon.api import Api, Request, Response
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
    found = re.search(r'<a rel="next" href="([^"]+)">older</a>', page)
    return None if found is None else found.group(1).replace("&amp;", "&")


# -- the ledger's pages ------------------------------------------------------------------


def test_the_ledger_pages_back_by_seq_with_newest_and_older_links(state: SQLiteStore) -> None:
    first = get(state, "/jobs/big").body.decode()
    assert len(due_times(first)) == 50
    link = older_link(first)
    assert link is not None and link.startswith("?before=") and link.endswith("#history")
    assert 'rel="prev"' not in first  # the newest page has no newer one
    second = get(state, "/jobs/big" + link.removesuffix("#history")).body.decode()
    assert len(due_times(second)) == 50 and not set(due_times(second)) & set(due_times(first))
    assert '<a rel="prev" href="?#history">newest</a>' in second
    newest, oldest = store_times(state, limit=100)
    assert due_times(first)[0] == newest and due_times(second)[-1] == oldest


def store_times(store: SQLiteStore, *, limit: int) -> tuple[str, str]:
    from tickwork._daemon.job_page import _entry

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
    from tickwork._daemon.config import JobConfig

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
