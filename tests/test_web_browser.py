"""The pages in a real browser, mounted under ``/ops/tickwork`` in FastAPI, Flask and Django,
and served there by ``tickwork run --http --http-prefix``.

Each app runs in a real server in this process (uvicorn, werkzeug's) over one SQLite
state whose jobs have run; the daemon is a process of its own. One headless Chromium
(tests/browser.py) serves the module: it logs in with the form, reads the overview and
its chart, follows a job's link to its page and charts, and presses a button whose form
carries the page's form token; every link and form of both pages must stay under the
sub-path.
"""

from __future__ import annotations

import socket
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, Browser
from tests.test_daemon_e2e import LIMIT, Run
from tests.test_http import get
from tests.waiting import wait_until
from tickwork import DurableScheduler, Every, web
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)"
)

SECRET = "ana-secret-0123456789"
ROOT = "/ops/tickwork"
APPS = ("fastapi", "flask", "django")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    """A state with one job per app, each run once (its ledger entry, its charts)."""
    with SQLiteStore(tmp_path_factory.mktemp("web") / "s.sqlite3") as store:
        scheduler = DurableScheduler(store)
        for name in APPS:
            scheduler.declare(JobSpec(name, "tests.durable_jobs:record", Every(3600)))
        scheduler.start()
        try:
            for name in APPS:
                scheduler.trigger(name, by="setup")
            wait_until("the runs recorded", lambda: all(scheduler.history(n) for n in APPS))
        finally:
            scheduler.stop()
        yield store


def serve_wsgi(app: Any) -> tuple[str, Callable[[], None]]:
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        thread.join()

    return f"http://127.0.0.1:{server.port}", stop


def serve_asgi(app: Any) -> tuple[str, Callable[[], None]]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until("uvicorn started", lambda: server.started)

    def stop() -> None:
        server.should_exit = True
        thread.join()
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def mounted(kind: str, store: SQLiteStore, **extra: Any) -> tuple[str, Callable[[], None]]:
    """The app of ``kind`` with tickwork's pages at `ROOT`, served: its URL, its stop.

    ``extra``: more of the app's options (`tickwork.web.MountOptions`).
    """
    options: dict[str, Any] = {"tokens": {"ana": SECRET}, "title": f"the {kind} app"} | extra
    if kind == "fastapi":
        from fastapi import FastAPI

        fastapi = FastAPI()
        fastapi.mount(ROOT, web.asgi_app(store, **options))
        return serve_asgi(fastapi)
    if kind == "flask":
        import flask
        from werkzeug.middleware.dispatcher import DispatcherMiddleware

        app = flask.Flask(__name__)
        app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
            app.wsgi_app, {ROOT: web.wsgi_app(store, **options)}
        )
        return serve_wsgi(app)
    from django.core.handlers.wsgi import WSGIHandler
    from django.urls import include, path

    from tests.django_mount import configure

    configure(path(ROOT.strip("/") + "/", include(web.django_urls(store, **options))))
    return serve_wsgi(WSGIHandler())


#: The links and forms leaving the mount point ("" and "#...": the page itself).
_OUTSIDE = (
    "Array.from(document.querySelectorAll('a[href], form[action]'))"
    ".map(e => e.getAttribute('href') ?? e.getAttribute('action'))"
    ".filter(u => u !== '' && !u.startsWith('?') && !u.startsWith('#')"
    f" && !u.startsWith({ROOT!r} + '/'))"
)


def _drive(
    browser: Browser, base: str, job: str, who: str = "ana", signed_in: bool = False
) -> None:
    """Log in, read the overview and a job's page, trigger the job with its form.

    ``signed_in``: the app's own login already says who (the ``user`` hook).
    """
    if signed_in:
        browser.open(base + ROOT + "/", loaded="!!document.querySelector('td.job')")
        assert f"signed in as {who}" in browser.html() and "/login" not in browser.html()
    else:
        browser.forget_cookies()
        browser.open(base + ROOT + "/", loaded="!!document.querySelector('input[name=token]')")
        browser.type('input[name="token"]', SECRET)
        browser.click(f'form[action="{ROOT}/login"] button')
        browser.wait(f"location.pathname === '{ROOT}/' && !!document.querySelector('td.job')")
        assert f"logged in as {who}" in browser.html()
    assert browser.evaluate(_OUTSIDE) == []
    assert browser.evaluate("document.querySelectorAll('svg').length") >= 1  # runs per minute
    browser.click(f'a[href="{ROOT}/jobs/{job}"]')
    browser.wait(f"location.pathname === '{ROOT}/jobs/{job}' && !!document.querySelector('h1')")
    assert browser.evaluate(_OUTSIDE) == []
    charts = "Array.from(document.querySelectorAll('.charts svg')).length"
    assert browser.evaluate(charts) == 3  # the success rate, run duration, lateness
    trigger = f'form[action="{ROOT}/jobs/{job}/trigger"]'
    assert browser.evaluate(f"document.querySelector('{trigger} input[name=csrf]').value")
    browser.type(trigger + ' input[name="note"]', "from the browser")
    browser.click(trigger + " button")
    # The whole page, not its first half: under load the banner can be parsed while the
    # rest (the ledger, the operators' actions) is still arriving.
    browser.wait(
        f"location.pathname === '{ROOT}/jobs/{job}' && location.search.includes('said=')"
        " && !!document.querySelector('div.said') && document.readyState === 'complete'"
    )
    assert f"trigger by {who}" in browser.evaluate("document.body.innerText")
    assert "from the browser" in browser.html()


@pytest.mark.parametrize("kind", APPS)
def test_a_browser_logs_in_reads_the_charts_and_acts_in_a_mounted_app(
    browser: Browser, store: SQLiteStore, kind: str
) -> None:
    base, stop = mounted(kind, store)
    try:
        _drive(browser, base, kind)
    finally:
        stop()
    act = store.actions(kind, limit=1)[0]
    assert (act.action, act.actor, act.note) == ("trigger", "ana", "from the browser")


def test_a_browser_signed_in_to_a_flask_app_acts_as_its_user(
    browser: Browser, store: SQLiteStore
) -> None:
    """The app's own login in front (``user=``, inside a Flask view), no tickwork token."""
    import flask

    app = flask.Flask(__name__)
    app.secret_key = "test-only"
    pages = web.wsgi_app(store, user=lambda environ: flask.session.get("user"), prefix=ROOT)

    @app.route(ROOT + "/", defaults={"rest": ""}, methods=["GET", "POST"])
    @app.route(ROOT + "/<path:rest>", methods=["GET", "POST"])
    def tickwork_pages(rest: str) -> Any:
        return pages

    @app.get("/sign-in")
    def sign_in() -> Any:
        flask.session["user"] = "cleo"
        return flask.redirect(ROOT + "/")

    base, stop = serve_wsgi(app)
    try:
        browser.forget_cookies()
        browser.open(base + ROOT + "/", loaded="document.readyState === 'complete'")
        assert "sign in to the application" in browser.html()
        browser.open(base + "/sign-in", loaded=f"location.pathname === '{ROOT}/'")
        _drive(browser, base, "flask", who="cleo", signed_in=True)
    finally:
        stop()
    assert store.actions("flask", limit=1)[0].actor == "cleo"


def test_a_browser_does_the_same_on_the_daemon_under_its_prefix(
    browser: Browser, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "backup"
            every = "1h"
            first = "0s"
            command = ["true"]
            """
        )
    )
    run = Run(
        jobs, tmp_path / "s.sqlite3", "--http", "127.0.0.1:0", "--http-token", f"ana={SECRET}",
        "--http-prefix", ROOT,
    )  # fmt: skip
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("status page at ", 1)[1].split(ROOT, 1)[0]
        assert line.split("status page at ", 1)[1].startswith(base + ROOT + "/,")
        wait_until(
            "the backup's run",
            lambda: '"outcome": "ok"' in get(base + ROOT + "/api/jobs/backup/history", SECRET)[1],
            LIMIT,
        )
        _drive(browser, base, "backup")
        # The daemon's job page shows the jobs file's command, not its entry point.
        assert '<th scope="row">command</th><td>true</td>' in browser.html()
    finally:
        run.stop()


_OVERFLOW = (
    "[window.innerWidth, document.documentElement.scrollWidth,"
    " Array.from(document.querySelectorAll('body *'))"
    ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
    ".slice(0, 3).map(e => e.outerHTML.slice(0, 120))]"
)


def test_the_pages_fit_a_phone_s_width_without_sideways_scrolling(
    browser: Browser, store: SQLiteStore
) -> None:
    """At 375 CSS pixels (a phone) the overview and a job's page reflow: nothing sticks out."""
    pages = web.wsgi_app(store, user=lambda environ: "cleo", title="a phone")
    base, stop = serve_wsgi(pages)
    browser.viewport(375)
    try:
        for path in ("/", "/jobs/flask"):
            browser.open(base + path, loaded="document.readyState === 'complete'")
            assert "<h1" in browser.html()
            width, scrolled, wide = browser.evaluate(_OVERFLOW)
            assert width == 375 and scrolled <= width, (path, scrolled, wide)
    finally:
        browser.viewport(0)
        stop()


def test_with_javascript_the_tables_refresh_in_place_without_a_reload(
    browser: Browser, store: SQLiteStore
) -> None:
    """The live script (allowed by the CSP's hash) swaps the table: the page is not reloaded."""
    import time

    DurableScheduler(store).declare(JobSpec("live", "tests.durable_jobs:record", Every(3600)))
    pages = web.wsgi_app(store, user=lambda environ: "cleo", title="live")
    base, stop = serve_wsgi(pages)
    try:
        for path, shown in (("/", "td.job"), ("/jobs/live", "#live-waiting")):
            browser.open(base + path, loaded=f"!!document.querySelector({shown!r})")
            browser.evaluate("window.keptFromTheLoad = 1; document.querySelector('input')"
                             ".value = 'typed'")  # fmt: skip
            note = f"paused from elsewhere {path}"
            if store.get("live").paused:
                store.resume_job("live", by="test", at=time.time())
            store.pause_job("live", by="test", at=time.time(), note=note)
            browser.wait(f"document.body.innerText.includes({note!r})", limit=60)
            assert browser.evaluate("window.keptFromTheLoad") == 1  # swapped, not reloaded
            assert browser.evaluate("document.querySelector('input').value") == "typed"
    finally:
        stop()
