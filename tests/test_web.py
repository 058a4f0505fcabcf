"""`tickwork.web`: the pages and the API mounted in FastAPI, Flask and Django, in-process.

Each framework's own app is called as its server would call it (ASGI messages, Flask's
test client, Django's test client) over one SQLite state with a job that ran; the tests
read the answers for the mount point in every link, form, redirect and cookie, and act
through the pages with a form token, as a browser would. The same pages in a real
browser: tests/test_web_browser.py.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.waiting import wait_until
from tickwork import DurableScheduler, Every, web
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

SECRET = "ana-secret-0123456789"
ROOT = "/ops/tickwork"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    """A state whose job ``tick`` has run once (one ledger entry)."""
    state = tmp_path_factory.mktemp("web") / "s.sqlite3"
    with SQLiteStore(state) as store:
        scheduler = DurableScheduler(store)
        scheduler.declare(JobSpec("tick", "tests.durable_jobs:record", Every(3600)))
        scheduler.start()
        try:
            scheduler.trigger("tick", by="setup")
            wait_until("the run recorded", lambda: scheduler.history("tick"))
        finally:
            scheduler.stop()
        yield store


# -- a tiny ASGI client ------------------------------------------------------------------


def asgi(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    root_path: str = "",
) -> tuple[int, dict[str, str], str]:
    """One request to an ASGI app: status, headers (last of each), body text."""
    path, _, query = path.partition("?")
    sent: list[dict[str, Any]] = []
    given = {"host": "127.0.0.1:8000"} | {k.lower(): v for k, v in (headers or {}).items()}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": query.encode(),
        "headers": [(k.encode(), v.encode()) for k, v in given.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    out = {k.decode().title(): v.decode() for k, v in start["headers"]}
    text = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    return start["status"], out, text


def links(page: str) -> list[str]:
    """Every path of a page's hrefs and form actions (a link of a query alone stays put)."""
    return [p for p in re.findall(r'[\s<](?:href|action)="([^"?#]*)', page) if p]


def form_token(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[-2000:]
    return found.group(1)


def fastapi_app(store: SQLiteStore, **options: Any) -> Any:
    from fastapi import FastAPI

    app = FastAPI()
    app.mount(ROOT, web.asgi_app(store, **options))
    return app


FORM = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1:8000"}


def test_mounted_in_fastapi_every_link_form_redirect_and_cookie_has_the_mount_point(
    store: SQLiteStore,
) -> None:
    app = fastapi_app(store, tokens={"ana": SECRET}, title="my app")
    status, _, page = asgi(app, "GET", ROOT + "/")
    assert status == 401 and f'action="{ROOT}/login"' in page  # the token guards reading
    body = urlencode({"token": SECRET}).encode()
    status, headers, _ = asgi(app, "POST", ROOT + "/login", FORM, body)
    assert status == 303 and headers["Location"] == ROOT + "/"
    cookie = headers["Set-Cookie"]
    assert f"Path={ROOT};" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = {"Cookie": cookie.split(";", 1)[0]}
    status, headers, page = asgi(app, "GET", ROOT + "/", session)
    assert status == 200 and "tickwork: my app" in page and "logged in as ana" in page
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert links(page) and all(link.startswith(ROOT + "/") for link in links(page)), links(page)
    assert f'href="{ROOT}/jobs/tick"' in page and "<svg" in page  # the runs-per-minute chart
    status, _, page = asgi(app, "GET", ROOT + "/jobs/tick", session)
    assert status == 200 and all(link.startswith(ROOT + "/") for link in links(page))
    assert f'action="{ROOT}/jobs/tick/trigger"' in page and "run duration" in page
    fields = urlencode({"csrf": form_token(page), "note": "from the app"}).encode()
    status, headers, _ = asgi(app, "POST", ROOT + "/jobs/tick/trigger", FORM | session, fields)
    assert status == 303 and headers["Location"].startswith(ROOT + "/jobs/tick?said=")
    act = store.actions("tick", limit=1)[0]
    assert (act.action, act.actor, act.note) == ("trigger", "ana", "from the app")
    forged = urlencode({"csrf": "1.2.3", "note": "x"}).encode()
    status, _, page = asgi(app, "POST", ROOT + "/jobs/tick/trigger", FORM | session, forged)
    assert status == 403 and "form token" in page and f'href="{ROOT}/"' in page
    status, headers, _ = asgi(app, "POST", ROOT + "/logout", FORM | session)
    assert status == 303 and headers["Location"] == ROOT + "/login"
    bearer = {"Authorization": f"Bearer {SECRET}"}
    status, _, text = asgi(app, "GET", ROOT + "/api/jobs?limit=1", bearer)
    assert status == 200 and '"id": "tick"' in text
    assert asgi(app, "HEAD", ROOT + "/api/jobs", bearer)[2] == ""


def test_a_proxy_s_prefix_comes_before_the_mount_point_and_cannot_leave_the_site(
    store: SQLiteStore,
) -> None:
    app = web.asgi_app(store)  # served alone; the proxy says where
    status, _, page = asgi(app, "GET", "/", {"X-Forwarded-Prefix": "/jobs-ui"})
    assert status == 200 and 'href="/jobs-ui/jobs/tick"' in page
    status, _, page = asgi(app, "GET", "/jobs/tick", {"X-Forwarded-Prefix": "//evil.example/"})
    assert status == 200 and 'href="/evil.example/"' in page and "//evil" not in page
    status, _, page = asgi(app, "GET", "/", {"X-Forwarded-Prefix": '/a"><b>'})
    assert status == 200 and "<b>" not in page and 'href="/a%22%3E%3Cb%3E/jobs/tick"' in page
    # Mounted, behind the proxy too; and the prefix setting for a proxy that says nothing.
    fastapi = fastapi_app(store)
    page = asgi(fastapi, "GET", ROOT + "/", {"X-Forwarded-Prefix": "/app"})[2]
    assert f'href="/app{ROOT}/jobs/tick"' in page
    prefixed = web.asgi_app(store, prefix="/app")
    assert 'href="/app/jobs/tick"' in asgi(prefixed, "GET", "/")[2]
    assert 'href="/app/jobs/tick"' in asgi(prefixed, "GET", "/app/")[2]  # not stripped
    with pytest.raises(ValueError, match=r"prefix must be a path such as /ops/tickwork.*'app/'"):
        web.asgi_app(store, prefix="app/")


def test_a_host_that_is_not_the_app_s_is_refused_unless_named(store: SQLiteStore) -> None:
    app = web.asgi_app(store)
    status, _, text = asgi(app, "GET", "/api/jobs", {"Host": "attacker.example"})
    assert status == 400 and "give host_names=[NAME] to tickwork.web" in text
    named = web.asgi_app(store, host_names=["jobs.example.com"])
    assert asgi(named, "GET", "/", {"Host": "jobs.example.com"})[0] == 200
    assert asgi(named, "GET", "/", {"Host": "attacker.example"})[0] == 400
    anyone = web.asgi_app(store, host_names=["*"])
    assert asgi(anyone, "GET", "/", {"Host": "attacker.example"})[0] == 200


def test_the_app_s_own_login_reads_and_acts_through_the_pages_only(store: SQLiteStore) -> None:
    """``user``: the app says who asks; the forms still need their token and the origin."""

    def user(scope: dict[str, Any]) -> str | None:
        cookie = dict(scope["headers"]).get(b"cookie", b"").decode()
        return "bea" if cookie == "app-session=bea" else None

    app = fastapi_app(store, user=user)
    status, _, page = asgi(app, "GET", ROOT + "/")
    assert status == 401 and "sign in to the application" in page and "<form" not in page
    signed_in = {"Cookie": "app-session=bea"}
    status, _, page = asgi(app, "GET", ROOT + "/jobs/tick", signed_in)
    assert status == 200 and "signed in as bea" not in page  # the banner is the overview's
    overview = asgi(app, "GET", ROOT + "/", signed_in)[2]
    assert "signed in as bea" in overview and "/logout" not in overview
    token = form_token(page)
    fields = urlencode({"csrf": token, "note": "bea's"}).encode()
    status, headers, _ = asgi(app, "POST", ROOT + "/jobs/tick/pause", FORM | signed_in, fields)
    assert status == 303, headers
    assert store.get("tick").paused and store.actions("tick", limit=1)[0].actor == "bea"
    elsewhere = FORM | signed_in | {"Origin": "https://attacker.example"}
    fields = urlencode({"csrf": token}).encode()
    assert asgi(app, "POST", ROOT + "/jobs/tick/resume", elsewhere, fields)[0] == 403
    assert asgi(app, "POST", ROOT + "/jobs/tick/resume", FORM | signed_in, b"")[0] == 403
    json_api = {"Content-Type": "application/json"} | signed_in
    status, _, text = asgi(app, "POST", ROOT + "/api/jobs/tick/resume", json_api, b"{}")
    assert status == 401 and "bearer token" in text  # the JSON API never acts for a cookie
    assert asgi(app, "GET", ROOT + "/api/jobs/tick", signed_in)[0] == 200  # reading: yes
    fields = urlencode({"csrf": token}).encode()
    assert asgi(app, "POST", ROOT + "/jobs/tick/resume", FORM | signed_in, fields)[0] == 303
    assert not store.get("tick").paused


def test_a_store_opened_later_is_found_at_each_request(store: SQLiteStore) -> None:
    opened: list[Any] = [None]
    app = web.asgi_app(lambda: opened[0])
    status, _, text = asgi(app, "GET", "/api/jobs")
    assert status == 503 and "not open (yet)" in text
    opened[0] = DurableScheduler(store)  # a scheduler: its store
    assert asgi(app, "GET", "/api/jobs")[0] == 200
    with pytest.raises(TypeError, match="jobs must be a store, a scheduler with a store"):
        web.asgi_app(42)
    with pytest.raises(TypeError, match=r"tokens must be a mapping of names to secrets"):
        web.wsgi_app(store, tokens=["ana=x"])  # type: ignore[arg-type]


def test_the_pages_refresh_every_10_s_unless_the_app_says_otherwise(store: SQLiteStore) -> None:
    for refresh, app in ((10, web.asgi_app(store)), (1, web.asgi_app(store, refresh=1))):
        overview, job = asgi(app, "GET", "/")[2], asgi(app, "GET", "/jobs/tick")[2]
        assert f"refreshes every {refresh} s" in overview
        assert f'<script data-every="{refresh}">' in overview
        assert f'<script data-every="{refresh}">' in job
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match=rf"^refresh must be .* >= 1, got {bad!r}$"):
            web.wsgi_app(store, refresh=bad)  # type: ignore[arg-type]


def test_the_apps_share_one_list_of_options_checked_by_mypy_and_at_run_time(
    store: SQLiteStore, tmp_path: Any
) -> None:
    import subprocess
    import sys
    import textwrap

    for make in (web.asgi_app, web.wsgi_app):
        with pytest.raises(TypeError, match=rf"^{make.__name__}\(\) got an unexpected keyword"
                           r" argument 'token'$"):  # fmt: skip
            make(store, token={"ana": SECRET})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^django_urls\(\) got an unexpected keyword argument"
                       r" 'prefix'$"):  # fmt: skip
        web.django_urls(store, prefix="/ops")  # type: ignore[call-arg]
    common = {"tokens", "user", "title", "namespace", "refresh"}
    assert web.MountOptions.__optional_keys__ == common and not web.WebOptions.__required_keys__
    assert web.WebOptions.__optional_keys__ == common | {"prefix", "host_names"}
    app = web.wsgi_app(store, title="ops", namespace=None, prefix="", host_names=["ops.example"])
    assert isinstance(app, web.WSGIApp)
    source = tmp_path / "mounts.py"
    source.write_text(
        textwrap.dedent(
            """
            from tickwork import web
            from tickwork.stores.sqlite import SQLiteStore

            store = SQLiteStore(":memory:")
            ok = web.asgi_app(store, tokens={"ana": "s"}, user=lambda scope: None, title="t")
            also = web.wsgi_app(store, namespace="n", prefix="/p", host_names=["h"])
            urls = web.django_urls(store, title="t")
            bad = web.asgi_app(store, token={"ana": "s"})
            worse = web.wsgi_app(store, title=3)
            no = web.django_urls(store, host_names=["h"])
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [int(line.split(":")[1]) for line in errors] == [9, 10, 11], done.stdout
    assert '"token"' in errors[0] and '"title"' in errors[1] and '"host_names"' in errors[2]


def test_mounted_in_flask_by_dispatcher_or_inside_a_view_with_its_session(
    store: SQLiteStore,
) -> None:
    import flask
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    app = flask.Flask(__name__)
    app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, {ROOT: web.wsgi_app(store, tokens={"ana": SECRET})}
    )
    client = app.test_client()
    origin = {"Origin": "http://localhost"}  # the test client's host
    answer = client.post(ROOT + "/login", data={"token": SECRET}, headers=origin)
    assert answer.status_code == 303 and answer.headers["Location"] == ROOT + "/"
    page = client.get(ROOT + "/").text
    assert "logged in as ana" in page and all(link.startswith(ROOT) for link in links(page))
    # Inside a view: the view's request context is live for the user hook.
    app = flask.Flask(__name__)
    app.secret_key = "test-only"
    ops = web.wsgi_app(store, user=lambda environ: flask.session.get("user"), prefix="/ops")

    @app.route("/ops/", defaults={"rest": ""}, methods=["GET", "POST"])
    @app.route("/ops/<path:rest>", methods=["GET", "POST"])
    def tickwork_pages(rest: str) -> Any:
        return ops

    @app.post("/sign-in")
    def sign_in() -> str:
        flask.session["user"] = "cleo"
        return "ok"

    client = app.test_client()
    assert client.get("/ops/").status_code == 401
    client.post("/sign-in")
    page = client.get("/ops/jobs/tick").text
    assert 'action="/ops/jobs/tick/trigger"' in page
    answer = client.post(
        "/ops/jobs/tick/trigger", data={"csrf": form_token(page), "note": "cleo"}, headers=origin
    )
    assert answer.status_code == 303 and answer.headers["Location"].startswith("/ops/jobs/tick?")
    assert store.actions("tick", limit=1)[0].actor == "cleo"


def test_mounted_in_django_behind_its_hosts_check_and_without_its_csrf_check(
    store: SQLiteStore,
) -> None:
    from django.urls import include, path

    from tests.django_mount import configure

    configure(path("ops/tickwork/", include(web.django_urls(store, tokens={"ana": SECRET}))))
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    form = "application/x-www-form-urlencoded"  # as a browser posts the pages' forms
    answer = client.post(ROOT + "/login", urlencode({"token": SECRET}), form)  # no Django CSRF
    assert answer.status_code == 303 and answer["Location"] == ROOT + "/"
    assert answer.cookies["tickwork_session"]["path"] == ROOT
    page = client.get(ROOT + "/jobs/tick").content.decode()
    assert all(link.startswith(ROOT + "/") for link in links(page)), links(page)
    answer = client.post(
        ROOT + "/jobs/tick/skip-next",
        urlencode({"csrf": form_token(page)}),
        form,
        headers={"Origin": "http://testserver"},
    )
    assert answer.status_code == 303, answer.content.decode()[-600:]
    assert answer["Location"].startswith(ROOT + "/jobs/tick?said=")
    assert store.actions("tick", limit=1)[0].action == "skip-next"
    forged = urlencode({"csrf": "1.2.3"})
    assert client.post(ROOT + "/jobs/tick/trigger", forged, form).status_code == 403
    assert Client(HTTP_HOST="attacker.example").get(ROOT + "/").status_code == 400


def test_an_app_s_job_id_with_slashes_has_its_pages_and_its_api(tmp_path: Any) -> None:
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        DurableScheduler(store).declare(
            JobSpec("reports/daily", "tests.durable_jobs:record", Every(86400))
        )
        app = fastapi_app(store, tokens={"ana": SECRET})
        bearer = {"Authorization": f"Bearer {SECRET}"}
        page = asgi(app, "GET", ROOT + "/", bearer)[2]
        assert f'href="{ROOT}/jobs/reports/daily"' in page
        status, _, page = asgi(app, "GET", ROOT + "/jobs/reports/daily", bearer)
        assert status == 200 and "<h1>reports/daily" in page
        status, _, text = asgi(app, "GET", ROOT + "/api/jobs/reports/daily", bearer)
        assert status == 200 and '"id": "reports/daily"' in text
        status, _, text = asgi(app, "GET", ROOT + "/api/jobs/reports/daily/waiting", bearer)
        assert status == 200 and '"waiting": []' in text
        json_body = bearer | {"Content-Type": "application/json"}
        path = ROOT + "/api/jobs/reports/daily/pause"
        assert asgi(app, "POST", path, json_body, b"{}")[0] == 200
        assert store.get("reports/daily").paused
        status, _, text = asgi(app, "GET", ROOT + "/api/jobs/reports/nightly/history", bearer)
        assert status == 404 and "no job with id 'reports/nightly'" in text
