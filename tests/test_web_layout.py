"""The pages' layout in a real browser, at a desktop's, a small window's and a phone's width.

The overview, a job's page and ``/oneoffs`` are loaded in headless Chromium
(tests/browser.py) at 1280, 800 and 375 CSS pixels over one small state. On each:
nothing sticks out sideways, the overview's buttons keep their words on one line (and at
1280 px each row's buttons sit on one line), and
the boxes of the page's landmarks (its heading, tables, forms, charts) match the ones
recorded in tests/web_layout.json, within a tolerance that fonts and antialiasing stay
inside (geometry, not pixels): a column squeezed to a letter a line, a chart gone or a
block pushed under another is caught; a font one pixel wider is not.

After a change of layout meant as such, record the new boxes and the documentation's
screenshots (docs/job-page.png, docs/phone.png) with::

    TICKWORK_LAYOUT=update .venv/bin/python -m pytest tests/test_web_layout.py -p no:randomly

then look at the screenshots and commit both (docs/testing.md, "The pages in a browser").
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, Browser
from tests.test_web_browser import serve_wsgi
from tests.waiting import wait_until
from tickwork import Cron, DurableScheduler, Every, web
from tickwork._daemon.oneoffs import counts, enqueue
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)"
)

RECORDED = Path(__file__).with_name("web_layout.json")
DOCS = Path(__file__).resolve().parent.parent / "docs"
UPDATE = os.environ.get("TICKWORK_LAYOUT") == "update"
FUNC = "tests.durable_jobs:record"
WIDTHS = (1280, 800, 375)
#: Each page and its landmarks, by CSS selector (the first match of each).
PAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "overview": (
        "/",
        (
            "h1",
            "#live-meta",
            "form.find",
            ".filters",
            "#live-jobs table",
            ".pages",
            ".legend",
            "table.oneoffs",
            "svg.chart",
            "ul.actions",
        ),
    ),
    "job": (
        "/jobs/export",
        (
            "h1",
            "#live-meta",
            "table.config",
            ".charts svg.rate",
            ".charts svg.chart",
            ".forms",
            "#live-waiting",
            "table.ledger",
            "ul.actions",
        ),
    ),
    "oneoffs": ("/oneoffs", ("h1", ".meta", "table.oneoffs", ".charts svg")),
}
#: Allowed drift of a box's left edge and width (px, and a share of the value), then of
#: its top and height (more: a line that wraps in one font and not another moves all below).
ACROSS = (24, 0.10)
DOWN = (48, 0.25)
_BOXES = """
Array.from(%s).map(s => {
  const e = document.querySelector(s);
  if (!e) return [s, null];
  const r = e.getBoundingClientRect();
  return [s, [r.left, r.top + scrollY, r.width, r.height].map(Math.round)];
})
"""
_OVERFLOW = (
    "[window.innerWidth, document.documentElement.scrollWidth,"
    " Array.from(document.querySelectorAll('body *'))"
    ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
    ".slice(0, 3).map(e => e.outerHTML.slice(0, 120))]"
)
#: Each of the overview's buttons on one line, its words inside it.
_BUTTONS = (
    "Array.from(document.querySelectorAll('td.job button'))"
    ".filter(b => b.getClientRects().length !== 1 || b.scrollWidth > b.clientWidth"
    " || b.offsetHeight > 2.5 * parseFloat(getComputedStyle(b).fontSize))"
    ".map(b => b.outerHTML)"
)
#: The overview's rows whose buttons are not all on one line (their tops differ).
_ROWS_STACKED = (
    "Array.from(document.querySelectorAll('td.job'))"
    ".filter(td => new Set(Array.from(td.querySelectorAll('button'),"
    " b => Math.round(b.getBoundingClientRect().top))).size > 1)"
    ".map(td => td.firstChild.textContent)"
)


def fill_ledger(path: Path, job_id: str, entries: int, failed: int, *, now: float) -> None:
    """``entries`` ledger entries of ``job_id`` a minute apart up to ``now``, the newest
    ``failed`` of them failed; and the job declared a day ago (a backfill has slots)."""
    rows = [
        (job_id, t, "failed" if i >= entries - failed else "ok", 1, "schedule", t, t + 1,
         t + 2.5 + (i % 7) / 2, "h:1", 1, "exit status 1" if i >= entries - failed else None,
         None, t + 2.5)
        for i, t in enumerate(now - 60 * (entries - i) for i in range(entries))
    ]  # fmt: skip
    with sqlite3.connect(path, timeout=60) as conn:
        conn.executemany(
            "INSERT INTO ledger (job_id, scheduled, outcome, slots, origin, claimed,"
            " started, ended, node, attempt, error, output, recorded)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("UPDATE jobs SET first_slot = ? WHERE id = ?", (now - 86400, job_id))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Five jobs (one failing, one paused, one with runs waiting), one-offs run and pending."""
    path = tmp_path_factory.mktemp("layout") / "s.sqlite3"
    with SQLiteStore(path) as store:
        for i in range(4):
            enqueue(store, {"func": FUNC, "args": [i]}, now=time.time())
        runner = DurableScheduler(store, allowed_modules=["tests.durable_jobs"])
        runner.start()
        try:
            wait_until("the one-offs done", lambda: [c.done for c in counts(store)] == [4])
        finally:
            runner.stop()
        now = time.time()
        for i in range(3):
            enqueue(store, {"func": FUNC, "args": [i], "delay": 3600}, now=now)
        declared = DurableScheduler(store)
        declared.declare(JobSpec("export", FUNC, Every(300), retries=2, timeout=600))
        declared.declare(JobSpec("backup", FUNC, Cron("0 3 * * *", tz="Europe/Paris")))
        declared.declare(JobSpec("rotate-logs", FUNC, Every(3600)))
        declared.declare(JobSpec("report", FUNC, Cron("0 7 * * 1")))
        declared.declare(JobSpec("sync-crm", FUNC, Every(900)))
        fill_ledger(path, "export", 60, 3, now=now)
        fill_ledger(path, "rotate-logs", 30, 0, now=now)
        fill_ledger(path, "sync-crm", 20, 0, now=now)
        store.pause_job("report", by="ana", at=now, note="quarter closing, INC-7")
        store.trigger_job("export", by="ana", at=now, note="after the fix")
        store.resume_job("report", by="ana", at=now)
        store.pause_job("report", by="ana", at=now, note="quarter closing, INC-7")
        served, stop = serve_wsgi(web.wsgi_app(store, user=lambda environ: "ana", title="shop"))
        try:
            yield served
        finally:
            stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.viewport(0)
    chromium.close()


def _near(now: int, then: int, slack: tuple[int, float]) -> bool:
    return abs(now - then) <= slack[0] + slack[1] * abs(then)


def drift(page: str, width: int, boxes: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """How the landmarks' boxes differ from the recorded ones beyond the tolerance."""
    said = []
    for what, box in boxes.items():
        then = recorded.get(what)
        if box is None or then is None:
            if box != then:
                said.append(f"{page} at {width}: {what} was {then}, now {box}")
            continue
        x, y, w, h = box
        x0, y0, w0, h0 = then
        if not (_near(x, x0, ACROSS) and _near(w, w0, ACROSS)):
            said.append(f"{page} at {width}: {what} across was x={x0} w={w0}, now x={x} w={w}")
        if not (_near(y, y0, DOWN) and _near(h, h0, DOWN)):
            said.append(f"{page} at {width}: {what} down was y={y0} h={h0}, now y={y} h={h}")
    if said or boxes.keys() != recorded.keys():
        return said
    order = sorted(boxes, key=lambda k: boxes[k][1])
    order_then = sorted(recorded, key=lambda k: recorded[k][1])
    if order != order_then:
        said.append(f"{page} at {width}: landmarks top to bottom were {order_then}, now {order}")
    return said


def test_drift_tells_a_squeezed_column_from_a_wider_font() -> None:
    """The comparison itself: what it lets through and what it catches."""
    then = {"h1": [24, 20, 300, 28], "table": [24, 100, 1200, 900]}
    font = {"h1": [24, 21, 310, 29], "table": [24, 104, 1195, 960]}
    assert drift("p", 1280, font, then) == []
    squeezed = {"h1": [24, 20, 300, 28], "table": [24, 100, 1200, 2900]}
    assert drift("p", 1280, squeezed, then) == [
        "p at 1280: table down was y=100 h=900, now y=100 h=2900"
    ]
    gone = {"h1": [24, 20, 300, 28], "table": None}
    assert drift("p", 1280, gone, then) == ["p at 1280: table was [24, 100, 1200, 900], now None"]
    swapped = {"h1": [24, 70, 300, 28], "table": [24, 60, 1200, 900]}
    assert drift("p", 1280, swapped, then) == [
        "p at 1280: landmarks top to bottom were ['h1', 'table'], now ['table', 'h1']"
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pages_keep_their_layout_at_each_width(browser: Browser, base: str, width: int) -> None:
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    browser.viewport(width, 900)
    found: dict[str, Any] = {}
    problems: list[str] = []
    for page, (path, landmarks) in PAGES.items():
        browser.open(
            base + path,
            loaded="!!document.querySelector('h1') && document.readyState === 'complete'",
        )
        shown, scrolled, wide = browser.evaluate(_OVERFLOW)
        assert shown == width and scrolled <= width, (page, width, scrolled, wide)
        if page == "overview":
            assert browser.evaluate(_BUTTONS) == [], (width, "a button's words wrap")
            if width == 1280:
                assert browser.evaluate(_ROWS_STACKED) == [], "a row's buttons stack"
        boxes = dict(browser.evaluate(_BOXES % json.dumps(landmarks)))
        found[f"{page}@{width}"] = boxes
        problems += drift(page, width, boxes, recorded.get(f"{page}@{width}", {}))
        _shoot(browser, page, width)
    if UPDATE:
        RECORDED.write_text(_json(recorded | found))
        return
    assert f"overview@{width}" in recorded, "no recorded layout: run with TICKWORK_LAYOUT=update"
    assert problems == [], "\n".join(problems)


def _json(layouts: dict[str, dict[str, Any]]) -> str:
    """The recorded boxes, a landmark a line (a change of layout reads as a short diff)."""
    pages = []
    for page, boxes in sorted(layouts.items()):
        lines = ",\n".join(
            f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(boxes.items())
        )
        pages.append(f"  {json.dumps(page)}: {{\n{lines}\n  }}")
    return "{\n" + ",\n".join(pages) + "\n}\n"


#: The documentation's screenshots: (page, width) -> the file under docs/.
SHOTS = {("job", 1280): "job-page.png", ("overview", 375): "phone.png"}


def _shoot(browser: Browser, page: str, width: int) -> None:
    name = SHOTS.get((page, width))
    if UPDATE and name is not None:
        browser.screenshot(DOCS / name)
        assert (DOCS / name).stat().st_size < 150_000, name
