"""The one-offs' charts: the store's bounded window of their ledger, the numbers drawn, the page.

The window is read from both stores; the numbers (pickup latency percentiles, the mean
number waiting, runs per minute) from hand-made windows; the page mounted in an ASGI
app, over 200,000 one-off entries (a bounded read), and in Chromium.
"""

from __future__ import annotations

import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, Browser
from tests.test_web import asgi
from tickwork import web
from tickwork._daemon.oneoffs import enqueue
from tickwork._daemon.web.charts import line_chart, rate_chart
from tickwork._daemon.web.oneoff_page import depth, latency, oneoff_charts, oneoff_page, percentile
from tickwork.stores.contract import OneOffWindow
from tickwork.stores.sqlite import SQLiteStore

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
ROOT = "/ops/tickwork"
FUNC = "app.jobs:send"


def entry(job_id: str, scheduled: float, started: float | None, ended: float, recorded: float,
          outcome: str = "ok") -> tuple[Any, ...]:  # fmt: skip
    """A ledger entry as the store writes it (`LEDGER_INSERT`'s column order)."""
    return (job_id, scheduled, outcome, 1, "schedule", scheduled, started, ended, "n", 1, None,
            None, recorded)  # fmt: skip


def write(store: Any, entries: list[tuple[Any, ...]]) -> None:
    store._run("fill the ledger", lambda cur: store._ledger.write(cur, entries))


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.get("role") == "img" and root.find("title") is not None
    return root


# -- the store's window ------------------------------------------------------------------


def test_the_window_holds_the_one_offs_recorded_in_it_and_those_waiting_now(
    open_either_store: Callable[..., Any],
) -> None:
    store = open_either_store()
    assert store.oneoff_window(T0, T0 + 3600) == OneOffWindow([], 0, [], 0, False)
    write(
        store,
        [
            entry("~" + "0" * 20, T0 - 100, T0 - 90, T0 - 80, T0 - 80),  # before the window
            entry("~" + "1" * 20, T0 + 10, T0 + 12, T0 + 13, T0 + 13),
            entry("tick", T0 + 20, T0 + 20, T0 + 21, T0 + 21),  # a declared job's
            entry("~key:a/b", T0 + 30, None, T0 + 40, T0 + 40, "cancelled"),
            entry("~" + "2" * 20, T0 + 4000, T0 + 4001, T0 + 4002, T0 + 4002),  # after it
        ],
    )
    for due in (T0 - 50, T0 + 100, T0 + 60):
        enqueue(store, {"func": FUNC, "at": due}, now=T0 - 1000)
    enqueue(store, {"func": FUNC, "at": T0 + 5000}, now=T0 - 1000)  # due after the window
    window = store.oneoff_window(T0, T0 + 3600)
    assert window.entries == [
        (T0 + 10, T0 + 12, T0 + 13, "ok", 1.0),
        (T0 + 30, None, T0 + 40, "cancelled", 1.0),
    ]
    assert (window.waiting_before, window.waiting_due) == (1, [T0 + 60, T0 + 100])
    assert (window.read, window.sampled) == (3, False)


def test_a_window_past_its_bound_is_an_even_sample_standing_for_all(
    open_either_store: Callable[..., Any],
) -> None:
    store = open_either_store()
    write(store, [entry(f"~{i:020x}", T0 + i, T0 + i + 1, T0 + i + 2, T0 + i) for i in range(1000)])
    window = store.oneoff_window(T0 + 100, T0 + 900, rows=100)
    assert window.sampled and window.read == 100 and len(window.entries) == 100
    assert sum(w for *_, w in window.entries) == pytest.approx(800)
    # One entry in the middle of each eighth: the whole window, evenly.
    assert sorted(s for s, *_ in window.entries) == [T0 + 104 + 8 * k for k in range(100)]
    full = store.oneoff_window(T0 + 100, T0 + 900)
    assert not full.sampled and full.read == 800 and len(full.entries) == 800


def test_a_bad_window_is_refused_in_words(open_either_store: Callable[..., Any]) -> None:
    store = open_either_store()
    with pytest.raises(ValueError, match="rows must be an int >= 1, got 0"):
        store.oneoff_window(T0, T0 + 1, rows=0)
    with pytest.raises(ValueError, match="until must be after since"):
        store.oneoff_window(T0, T0)


# -- the numbers -------------------------------------------------------------------------


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile([3.0], 0.99)) == (
        50.0,
        99.0,
        3.0,
    )
    with pytest.raises(ValueError, match="values must not be empty"):
        percentile([], 0.5)


def test_latency_is_p50_and_p99_per_minute_of_start() -> None:
    waits = [(T0 + 5, 1.0), (T0 + 10, 3.0), (T0 + 20, 2.0), (T0 + 70, 30.0)]
    window = OneOffWindow([(s - w, s, s + 1, "ok", 1.0) for s, w in waits], 0, [], 4, False)
    p50, p99 = latency(window, T0, T0 + 180, 60)
    assert p50 == [(T0 + 30, 2.0), (T0 + 90, 30.0)]
    assert p99 == [(T0 + 30, 3.0), (T0 + 90, 30.0)]


def test_depth_is_the_mean_waiting_per_minute_with_those_pending_now() -> None:
    window = OneOffWindow(
        [
            (T0 + 0, T0 + 60, T0 + 61, "ok", 1.0),  # waits all of the first minute
            (T0 + 30, None, T0 + 90, "missed", 2.0),  # never started: until it ended, x2
        ],
        waiting_before=1,  # waits throughout
        waiting_due=[T0 + 150],  # waits the last half of the third minute
        read=2,
        sampled=False,
    )
    assert depth(window, T0, T0 + 180, 60) == [
        (T0 + 30, 1 + 1 + 2 * 0.5),
        (T0 + 90, 1 + 2 * 0.5),
        (T0 + 150, 1 + 0.5),
    ]


def test_a_line_chart_puts_values_in_place_with_units_and_zone() -> None:
    svg = line_chart(
        [("p50", "#000", [(T0, 50.0), (T0 + 1800, 100.0)]), ("p99", "#f00", [])],
        start=T0,
        end=T0 + 3600,
        zone="Europe/Berlin",
        title="How long did one-offs wait?",
        what="pickup latency",
        seconds=True,
        note="Estimated.",
    )
    root = parse(svg)
    title = root.findtext("title") or ""
    assert title.startswith("How long did one-offs wait?, 2027-01-15 09:00")
    assert "Europe/Berlin" in title
    [line] = [p for p in root.iter("polyline")]
    assert line.get("points") == "64,74 386,10"  # 100 s at the top, 50 s halfway
    words = [t.text or "" for t in root.iter("text")]
    assert "pickup latency (s)" in words and "time (Europe/Berlin)" in words
    assert root.findtext("desc") == "p50: largest 1 min 40 s; p99: largest none. Estimated."


def test_runs_per_minute_count_each_sampled_entry_as_many_as_it_stands_for() -> None:
    svg = rate_chart(
        [(T0 + 5, "ok", 10.0), (T0 + 6, "failed", 2.5), (T0 + 7, "ok")],
        start=T0,
        end=T0 + 600,
        zone="UTC",
        title="How many one-offs ended each minute?",
    )
    root = parse(svg)
    assert (root.findtext("title") or "").startswith("How many one-offs ended each minute?, ")
    assert (root.findtext("desc") or "").startswith("2 failed, 11 ok.")


# -- the page ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def busy_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The file of `busy`, written once per module (200,000 rows: seconds of CPU)."""
    now = time.time()
    folder = tmp_path_factory.mktemp("busy")
    with SQLiteStore(folder / "s.sqlite3") as store:
        n, span = 200_000, 5400.0
        rows = []
        for i in range(n):
            ended = now - span + i * span / n
            due = ended - 2.0 - (i % 10) * 0.1
            outcome = "failed" if i % 100 == 0 else "ok"
            rows.append(entry(f"~{i:020x}", due, due + 0.5 + (i % 5) * 0.2, ended, ended, outcome))
        write(store, rows)
        for k in range(5):
            enqueue(store, {"func": FUNC, "at": now - 300 + k}, now=now - 400)
    return folder, now


@pytest.fixture
def busy(busy_file: tuple[Path, float], tmp_path: Path) -> Iterator[tuple[SQLiteStore, float]]:
    """A SQLite state whose last 1.5 hours hold 200,000 one-off entries, and 5 pending.

    Each test's own copy of `busy_file`'s: no test sees another's changes.
    """
    folder, now = busy_file
    for made in folder.glob("s.sqlite3*"):  # the database, and its journal if one is left
        shutil.copyfile(made, tmp_path / made.name)
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        yield store, now


def test_200000_one_off_entries_render_from_a_bounded_read(
    busy: tuple[SQLiteStore, float],
) -> None:
    store, now = busy
    # The work bounded: SQLite's virtual machine steps, counted by the thousand (a scan
    # of the 200,000 entries alone takes over 1,400 thousand; the read of 20,000, ~300).
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    store._conn.set_progress_handler(step, 1000)  # type: ignore[union-attr]
    window = store.oneoff_window(now - 3600, now)
    store._conn.set_progress_handler(None, 0)  # type: ignore[union-attr]
    assert window.sampled and window.read <= 20_000
    assert steps[0] < 1000, f"{steps[0]} thousand steps: a scan of the ledger?"
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
    began = time.perf_counter()
    page = oneoff_page(store, "the app", root=ROOT)
    took = time.perf_counter() - began
    store._conn.set_trace_callback(None)  # type: ignore[union-attr]
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) < 400  # two bisections (~20 seeks each), 240 runs, counts, pending
    assert took < 10.0  # well under a second unloaded (see docs); generous for a busy host
    assert page.count("<svg") == 3 and 'href="/ops/tickwork/"' in page
    assert "Estimated from a sample of" in page and "times in UTC" in page
    # The sample's estimates hold against the whole window read (37 one-offs a second,
    # each waiting 0.5 to 1.3 s: 33 waiting on average, and 5 pending in the last minutes).
    whole = store.oneoff_window(now - 3600, now, rows=10**7)
    assert not whole.sampled and whole.read > 130_000
    for i, ((t, got), (_, want)) in enumerate(
        zip(depth(window, now - 3600, now, 60), depth(whole, now - 3600, now, 60), strict=True)
    ):
        assert got == pytest.approx(want, rel=0.1) and 30 < want < 40, (i, t, got, want)
    assert latency(window, now - 3600, now, 60) == latency(whole, now - 3600, now, 60)


def test_the_overview_links_to_the_page_mounted_under_its_path(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        app = web.asgi_app(store)
        status, _, overview = asgi(app, "GET", "/", root_path=ROOT)
        assert status == 200 and "/oneoffs" not in overview  # no one-offs: no table, no link
        enqueue(store, {"func": FUNC, "delay": 60}, now=time.time())
        status, _, overview = asgi(app, "GET", "/", root_path=ROOT)
        assert f'href="{ROOT}/oneoffs">charts</a>' in overview
        status, headers, page = asgi(app, "GET", "/oneoffs?span=day", root_path=ROOT)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert "<strong>last day</strong>" in page and '<a href="?span=hour">' in page
        assert page.count("<svg") == 3 and FUNC in page
        assert asgi(app, "POST", "/oneoffs", root_path=ROOT)[0] == 405


def test_a_store_without_one_offs_has_no_charts() -> None:
    assert oneoff_charts(object()) == ""  # type: ignore[arg-type]
    assert "this state keeps no one-offs" in oneoff_page(object(), "t")  # type: ignore[arg-type]


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")
def test_chromium_draws_the_three_charts(busy: tuple[SQLiteStore, float], tmp_path: Path) -> None:
    store, _ = busy
    page = tmp_path / "oneoffs.html"
    page.write_text(oneoff_page(store, "the app", root=ROOT))
    browser = Browser(tmp_path / "chromium")
    try:
        browser.open(page.as_uri(), loaded="document.querySelectorAll('.charts svg').length")
        sizes = browser.evaluate(
            "Array.from(document.querySelectorAll('.charts svg'))"
            ".map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; })"
        )
        assert len(sizes) == 3 and all(w > 300 and h > 60 for w, h in sizes)
        lines = browser.evaluate("document.querySelectorAll('.charts polyline').length")
        assert lines == 3  # p50, p99, waiting
    finally:
        browser.close()
