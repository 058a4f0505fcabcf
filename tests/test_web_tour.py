"""Every page, button, link and chart of the pages, pressed in a real browser in each host.

The same tour runs in FastAPI (uvicorn), Flask and Django, with the pages mounted under
``/ops/tickwork``, and on ``tickwork run --http --http-prefix`` (a process of its own):
log in (a wrong token first), search, filter and page the jobs, pause, resume and
trigger from the overview, every form of a job's page (the backfill and the *cancel
all waiting* asking first, and a refused form kept as typed), the ledger's filter and
pages, the charts' spans, the live refresh, the one-offs' page over real one-offs, a
refusal's page, and log out. Each press is checked in the store.

`Tour` keeps the inventory: on each kind of page it lists, from the DOM, every form's
button and every link (`_KEY`, the same key a press is counted under), and the tour
fails if one was never pressed: a button added to a page without a browser test of it
fails here. One Chromium serves the module (tests/browser.py); each host is started
once.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, Browser
from tests.test_daemon_e2e import LIMIT, Run
from tests.test_web_browser import ROOT, SECRET, mounted
from tests.test_web_layout import fill_ledger
from tests.waiting import wait_until
from tickwork import Cron, DurableScheduler, Every
from tickwork._daemon.oneoffs import counts, enqueue
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)"
)

HOSTS = ("fastapi", "flask", "django", "daemon")
#: Jobs besides ``alpha`` and ``beta``: more than a page of the overview (50).
FILLERS = 52
#: ``alpha``'s ledger entries (more than a page of a job's, 50); the newest 3 failed.
ENTRIES = 60
NEVER = "0 0 1 1 *"  # a cron slot nobody waits for in a test
FUNC = "tests.durable_jobs:record"

#: The key of a control: a form's button by its method, action and label, a link by
#: where it goes (the mount point, job names and query values left out).
_KEY = """
function tourKey(e) {
  const root = %(root)s;
  const where = u => (u || '').replace(location.origin, '').replace(root, '')
    .replace(/\\/jobs\\/[^/?#]+/, '/jobs/*')
    .replace(/\\?[^#]*/, q => '?' + Array.from(new URLSearchParams(q).keys()).sort().join('&'));
  if (e.tagName === 'A') return 'link ' + (e.getAttribute('href') === '' ? '(this page)'
    : where(e.getAttribute('href')));
  const form = e.form;
  const label = e.dataset.action || e.textContent.trim();
  return (form.method || 'get') + ' ' + (where(form.getAttribute('action')) || '(this page)')
    + ' ' + label;
}
"""
_CONTROLS = "Array.from(document.querySelectorAll('a[href], form button')).map(tourKey)"


@dataclass
class Tour:
    """A browser on one host's pages that keeps the inventory of controls and of presses."""

    browser: Browser
    base: str
    root: str = ROOT
    seen: dict[str, str] = field(default_factory=dict)
    """Every control listed, with the page it was listed on."""
    pressed: set[str] = field(default_factory=set)

    def _js(self) -> None:
        if not self.browser.evaluate("typeof tourKey === 'function'"):
            self.browser.evaluate(
                _KEY % {"root": json.dumps(self.root)} + "; window.tourKey = tourKey"
            )

    def open(self, path: str, shown: str) -> None:
        """Load ``path`` (under the root) and wait for the element ``shown`` on it.

        The page shown before is marked first (as `press` does): its own ``shown``
        element must not pass for the new page's while the navigation is under way.
        """
        self.browser.evaluate("window.tourLeft = 1")
        self.browser.open(
            self.base + self.root + path,
            loaded=f"!window.tourLeft && document.readyState === 'complete'"
            f" && !!document.querySelector({shown!r})",
        )

    def inventory(self, page: str) -> None:
        """List the controls of the page shown, as ``page`` (each must be pressed)."""
        self._js()
        for key in self.browser.evaluate(_CONTROLS):
            self.seen.setdefault(f"{page}: {key}", self.browser.evaluate("location.href"))

    def press(self, page: str, selector: str, *, loaded: str) -> None:
        """Click ``selector`` (counted as a control of ``page``); wait for the next document.

        ``loaded``: what holds on it.
        """
        self._js()
        key = self.browser.evaluate(f"tourKey(document.querySelector({json.dumps(selector)}))")
        self.pressed.add(f"{page}: {key}")
        self.browser.evaluate("window.tourLeft = 1")
        self.browser.click(selector)
        self.browser.wait(f"!window.tourLeft && document.readyState === 'complete' && ({loaded})")

    def text(self) -> str:
        return str(self.browser.evaluate("document.body.innerText"))

    def untested(self) -> dict[str, str]:
        """The controls listed and never pressed, with where each was seen."""
        return {k: v for k, v in sorted(self.seen.items()) if k not in self.pressed}


@dataclass
class Host:
    """One host of the pages: its URL (the mount point excluded), its store, its job ids."""

    base: str
    store: SQLiteStore
    path: Path
    prefix: str
    """Before a job's name in its id (the daemon's namespace)."""
    stop: Callable[[], None]

    def state(self, name: str) -> Any:
        return self.store.get(self.prefix + name)

    def actions(self, name: str) -> list[Any]:
        return list(self.store.actions(self.prefix + name, limit=100))


def _seed(host: Host) -> None:
    """``alpha``'s ledger (60 entries, the newest 3 failed), declared a day ago; one-offs;
    ``beta`` paused."""
    now = time.time()
    fill_ledger(host.path, host.prefix + "alpha", ENTRIES, 3, now=now)
    for i in range(3):
        enqueue(host.store, {"func": FUNC, "args": [i], "delay": 3600}, now=now)
    host.store.pause_job(host.prefix + "beta", by="setup", at=now, note="until the fix")


def _mounted_host(kind: str, path: Path) -> Host:
    store = SQLiteStore(path)
    # Three one-offs run (the one-offs' charts have runs), then the jobs are declared.
    for i in range(3):
        enqueue(store, {"func": FUNC, "args": [i]}, now=time.time())
    runner = DurableScheduler(store, allowed_modules=["tests.durable_jobs"])
    runner.start()
    try:
        wait_until("the one-offs done", lambda: [c.done for c in counts(store)] == [3])
    finally:
        runner.stop()
    declared = DurableScheduler(store)
    declared.declare(JobSpec("alpha", FUNC, Every(60)))
    declared.declare(JobSpec("beta", FUNC, Cron(NEVER)))
    for i in range(FILLERS):
        declared.declare(JobSpec(f"filler-{i:02}", FUNC, Cron(NEVER)))
    base, stop = mounted(kind, store, refresh=1)  # the live refresh seen in a second

    def end() -> None:
        stop()
        store.close()

    host = Host(base, store, path, "", end)
    _seed(host)
    return host


_JOBS = """
max_running = 1  # the hog holds it: every other run waits, as nothing runs them when mounted

[[job]]
name = "hog"
every = "1d"
first = "0s"
command = ["sleep", "600"]

[[job]]
name = "alpha"
every = "1m"
command = ["true"]

[[job]]
name = "beta"
cron = "{never}"
command = ["true"]
"""


def _daemon_host(folder: Path) -> Host:
    jobs, path = folder / "jobs.toml", folder / "s.sqlite3"
    fillers = "".join(
        f'\n[[job]]\nname = "filler-{i:02}"\ncron = "{NEVER}"\ncommand = ["true"]\n'
        for i in range(FILLERS)
    )
    jobs.write_text(textwrap.dedent(_JOBS).format(never=NEVER) + fillers)
    run = Run(
        jobs, path, "--http", "127.0.0.1:0", "--http-token", f"ana={SECRET}",
        "--http-prefix", ROOT, "--shutdown-grace", "1s", "--http-refresh", "1",
    )  # fmt: skip
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("status page at ", 1)[1].split(ROOT, 1)[0]
        store = SQLiteStore(path)
        with sqlite3.connect(path, timeout=60) as conn:
            (hog,) = conn.execute("SELECT id FROM jobs WHERE id LIKE '%/hog'").fetchone()
        prefix = hog.removesuffix("hog")
        wait_until("the hog running", lambda: any(c.owner for c in store.get(hog).claims), LIMIT)
    except BaseException:
        run.stop()
        raise

    def end() -> None:
        run.stop()
        store.close()

    host = Host(base, store, path, prefix, end)
    _seed(host)
    return host


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Host]]:
    """Each host, started at its first use and stopped with the module."""
    started: dict[str, Host] = {}

    def host(kind: str) -> Host:
        if kind not in started:
            folder = tmp_path_factory.mktemp(kind)
            started[kind] = (
                _daemon_host(folder)
                if kind == "daemon"
                else _mounted_host(kind, folder / "s.sqlite3")
            )
        return started[kind]

    yield host
    for each in started.values():
        each.stop()


# -- the tour --------------------------------------------------------------------------


def _log_in(tour: Tour) -> None:
    """The login page: a wrong token is refused on it, the right one opens the overview."""
    tour.browser.forget_cookies()
    tour.open("/", "input[name=token]")
    tour.inventory("login")
    tour.browser.type('input[name="token"]', "not-the-secret")
    tour.press("login", "form button", loaded="!!document.querySelector('input[name=token]')")
    assert "that token is not known here" in tour.text()
    tour.browser.type('input[name="token"]', SECRET)
    tour.press("login", "form button", loaded="!!document.querySelector('td.job')")
    assert "logged in as ana" in tour.text()


def _overview(tour: Tour, host: Host) -> None:
    """Search, the state filters, the pages, and each row's buttons."""
    tour.inventory("overview")
    assert "refreshes every 1 s" in tour.text()  # refresh=1, --http-refresh 1
    listed = "Array.from(document.querySelectorAll('td.job')).map(td => td.firstChild.textContent)"
    assert len(tour.browser.evaluate(listed)) == 50
    assert tour.browser.evaluate("document.querySelectorAll('svg').length") >= 1
    tour.press("overview", 'a[data-state="failing"]', loaded="location.search === '?state=failing'")
    assert tour.browser.evaluate(listed) == ["alpha"]
    tour.press("overview", 'a[data-state="all"]', loaded="location.search === ''")
    tour.browser.type('input[name="q"]', "filler-1")
    tour.press("overview", "form.find button", loaded="location.search === '?q=filler-1'")
    assert tour.browser.evaluate(listed) == [f"filler-1{i}" for i in range(10)]
    tour.open("/", "td.job")
    tour.press("overview", 'a[rel="next"]', loaded="location.search === '?page=2'")
    assert f"filler-{FILLERS - 1}" in tour.browser.evaluate(listed)  # the rest
    tour.press("overview", 'a[rel="prev"]', loaded="!!document.querySelector('td.job')")
    assert len(tour.browser.evaluate(listed)) == 50
    tour.press("overview", 'a[href=""]', loaded="!!document.querySelector('td.job')")
    # Each row's buttons: the paused beta resumed, filler-00 paused and triggered.
    said = "location.search.includes('said=')"
    tour.press("overview", f'form[action="{ROOT}/jobs/beta/resume"] button', loaded=said)
    assert not host.state("beta").paused and "resumed beta" in tour.text()
    tour.press("overview", f'form[action="{ROOT}/jobs/filler-00/pause"] button', loaded=said)
    assert host.state("filler-00").paused and location_path(tour) == ROOT + "/"
    tour.press("overview", f'form[action="{ROOT}/jobs/filler-00/trigger"] button', loaded=said)
    assert [a.action for a in host.actions("filler-00")[:2]] == ["trigger", "pause"]
    assert host.state("filler-00").waiting_runs == 1


def location_path(tour: Tour) -> str:
    return str(tour.browser.evaluate("location.pathname"))


def _form(action: str) -> str:
    return f'form[action="{ROOT}/jobs/alpha/{action}"]'


def _job_page(tour: Tour, host: Host) -> None:
    """Every form of ``alpha``'s page, each checked in the store."""
    tour.press(
        "overview", f'a[href="{ROOT}/jobs/alpha"]', loaded="!!document.querySelector('.charts')"
    )
    tour.inventory("job")
    assert tour.browser.evaluate("document.querySelectorAll('.charts svg').length") == 3
    said = "!!document.querySelector('div.said')"
    tour.browser.type(_form("pause") + ' input[name="note"]', "deploy")
    tour.browser.type(_form("pause") + ' input[name="until"]', "2h")
    tour.press("job", _form("pause") + " button", loaded=said)
    pause = host.state("alpha").pause
    assert pause.by == "ana" and pause.note == "deploy" and pause.until > time.time() + 3600
    tour.inventory("job")  # paused: resume instead of pause
    tour.press("job", _form("resume") + " button", loaded=said)
    assert not host.state("alpha").paused
    tour.browser.type(_form("trigger") + ' input[name="note"]', "by hand")
    tour.press("job", _form("trigger") + " button", loaded=said)
    assert (host.actions("alpha")[0].action, host.actions("alpha")[0].note) == (
        "trigger",
        "by hand",
    )
    tour.press("job", _form("skip-next") + " button", loaded=said)
    assert host.actions("alpha")[0].action == "skip-next"
    _backfill(tour, host)
    _cancel(tour, host)
    _history(tour)
    _live(tour, host)


def _backfill(tour: Tour, host: Host) -> None:
    """A refused backfill kept as typed; a dry run; a large one asking first, twice."""
    said = "!!document.querySelector('div.said')"
    backfill = _form("backfill")
    tour.browser.type(backfill + ' input[name="from"]', "yesterday-ish")
    tour.browser.type(backfill + ' input[name="to"]', "now")
    tour.press("job", backfill + " button", loaded="!!document.getElementById('refused')")
    assert "from " in tour.browser.evaluate("document.getElementById('refused').innerText")
    assert (
        tour.browser.evaluate(f"document.querySelector('{backfill} input[name=from]').value")
        == "yesterday-ish"
    )
    # A dry run queues nothing; a large backfill asks first ("no" keeps it undone).
    waiting = host.state("alpha").waiting_runs
    tour.browser.type(backfill + ' input[name="from"]', "3h")
    tour.browser.evaluate(
        f"document.querySelector('{backfill} input[name=dry_run]').checked = true"
    )
    tour.press("job", backfill + " button", loaded=said)
    assert "dry run: nothing was queued" in tour.text()
    assert host.state("alpha").waiting_runs == waiting
    tour.browser.type(backfill + ' input[name="from"]', "3h")
    tour.browser.type(backfill + ' input[name="to"]', "now")
    tour.press("job", backfill + " button", loaded="!!document.querySelector('.ask')")
    tour.inventory("confirm")
    assert "queue 1" in tour.text() and host.state("alpha").waiting_runs == waiting
    tour.press("confirm", ".confirm a", loaded="!!document.querySelector('.charts')")
    tour.browser.type(backfill + ' input[name="from"]', "3h")
    tour.browser.type(backfill + ' input[name="to"]', "now")
    tour.press("job", backfill + " button", loaded="!!document.querySelector('.ask')")
    tour.press("confirm", ".confirm form button", loaded=said)
    assert host.state("alpha").waiting_runs > waiting + 100


def _cancel(tour: Tour, host: Host) -> None:
    """A waiting run's own cancel button, then *cancel all waiting* (asking first)."""
    said = "!!document.querySelector('div.said')"
    tour.inventory("job")  # waiting runs: a cancel button each
    first = host.state("alpha").waiting[0]
    tour.press("job", "li.waiting-run button", loaded=said)
    assert host.actions("alpha")[0].action == "cancel"
    assert first.scheduled not in [c.scheduled for c in host.state("alpha").waiting]
    tour.press("job", _form("cancel") + " button", loaded="!!document.querySelector('.ask')")
    assert "cancel all" in tour.text() and host.state("alpha").waiting_runs > 100
    tour.inventory("confirm")
    tour.press("confirm", ".confirm form button", loaded=said)
    assert host.state("alpha").waiting_runs == 0


def _history(tour: Tour) -> None:
    """The ledger's filter and pages, the charts' spans, the page's own links."""
    due = "Array.from(document.querySelectorAll('tr.entry')).length"
    assert tour.browser.evaluate(due) == 50
    tour.press("job", 'a[rel="next"]', loaded="location.search.includes('before=')")
    tour.inventory("job")  # an older page: the links back
    assert 0 < tour.browser.evaluate(due) < 50  # the rest of the ledger
    tour.press("job", 'a[rel="prev"]', loaded="location.search.includes('after=')")  # newer
    assert tour.browser.evaluate(due) == 50
    tour.press("job", 'a[rel="next"]', loaded="location.search.includes('before=')")
    tour.press("job", 'a[rel="first"]', loaded="location.search === ''")  # newest
    assert tour.browser.evaluate(due) == 50
    tour.browser.evaluate("document.querySelector('select[name=outcome]').value = 'failed'")
    tour.press("job", "form.find button", loaded="location.search.includes('outcome=failed')")
    outcomes = "Array.from(document.querySelectorAll('tr.entry .outcome')).map(e => e.textContent)"
    assert tour.browser.evaluate(outcomes) == ["failed"] * 3
    tour.press("job", 'a[href="?span=week"]', loaded="location.search === '?span=week'")
    assert "last week" in tour.browser.evaluate(
        "document.querySelector('.charts').previousElementSibling.previousElementSibling.innerText"
    )
    tour.press("job", 'a[href="?span=day"]', loaded="location.search === '?span=day'")
    tour.press("job", '#live-meta a[href=""]', loaded="!!document.querySelector('.charts')")


def _live(tour: Tour, host: Host) -> None:
    """Where JavaScript is on, a change elsewhere shows in place: the page is not reloaded."""
    tour.browser.evaluate("window.keptFromTheLoad = 1")
    host.store.pause_job(host.prefix + "alpha", by="elsewhere", at=time.time(), note="from the CLI")
    tour.browser.wait("document.body.innerText.includes('from the CLI')", limit=LIMIT)
    assert tour.browser.evaluate("window.keptFromTheLoad") == 1
    host.store.resume_job(host.prefix + "alpha", by="elsewhere", at=time.time())
    tour.press(
        "job",
        f'#live-meta a[href="{ROOT}/"]',
        loaded="!!document.querySelector('td.job')",
    )


def _oneoffs(tour: Tour, host: Host) -> None:
    """The one-offs' page from the overview's link: their counts and charts, both spans."""
    tour.press(
        "overview", 'h2 a[href$="/oneoffs"]', loaded="!!document.querySelector('.charts svg')"
    )
    tour.inventory("oneoffs")
    (shown,) = counts(host.store)
    row = "table.oneoffs tr:nth-child(2) td"
    cells = tour.browser.evaluate(
        f"Array.from(document.querySelectorAll({row!r}), td => td.innerText)"
    )
    assert cells[0] == FUNC and int(cells[1]) == shown.pending >= 3, cells
    assert tour.browser.evaluate("document.querySelectorAll('.charts svg').length") == 3
    tour.press("oneoffs", 'a[href="?span=day"]', loaded="location.search === '?span=day'")
    assert "last day" in tour.text()
    tour.press("oneoffs", 'a[href="?span=hour"]', loaded="location.search === '?span=hour'")
    tour.press("oneoffs", ".meta a", loaded="!!document.querySelector('td.job')")


def _refusal_and_logout(tour: Tour, host: Host) -> None:
    """A refusal's page leads back; logging out ends the session (the login form again)."""
    tour.open("/jobs/no-such-job", ".refused")
    tour.inventory("refusal")
    assert "404" in tour.text() and "'no-such-job'" in tour.text()
    tour.press("refusal", "p a", loaded="!!document.querySelector('td.job')")
    tour.press(
        "overview",
        f'form[action="{ROOT}/logout"] button',
        loaded="!!document.querySelector('input[name=token]')",
    )
    tour.open("/", "input[name=token]")  # the session is gone


def _tour(tour: Tour, host: Host) -> None:
    _log_in(tour)
    _overview(tour, host)
    _job_page(tour, host)
    _oneoffs(tour, host)
    _refusal_and_logout(tour, host)


@pytest.mark.parametrize("kind", HOSTS)
def test_every_control_of_every_page_is_pressed_and_does_what_it_says(
    browser: Browser, hosts: Callable[[str], Host], kind: str
) -> None:
    host = hosts(kind)
    tour = Tour(browser, host.base)
    _tour(tour, host)
    assert tour.untested() == {}


def test_a_control_listed_and_never_pressed_is_named_with_its_page(browser: Browser) -> None:
    """The inventory itself: a new button or link without a press of its own fails the tour."""
    page = (
        f'<form method="post" action="{ROOT}/jobs/a%2Fb/pause"><button data-action="pause">'
        f'pause</button></form><a href="{ROOT}/oneoffs?span=day">charts</a>'
        f'<form method="post" action="{ROOT}/jobs/c/trigger"><button>trigger</button></form>'
    )
    browser.open("data:text/html," + urllib.parse.quote(page), loaded="!!document.forms[1]")
    tour = Tour(browser, "")
    tour.inventory("p")
    tour.pressed.add("p: post /jobs/*/trigger trigger")
    assert list(tour.untested()) == ["p: link /oneoffs?span", "p: post /jobs/*/pause pause"]
