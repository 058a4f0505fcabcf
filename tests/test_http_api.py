"""Control over HTTP with plain clients: the JSON API of ``tickwork run --http``.

One real daemon process serves the module (named tokens, one from a token file); each
test asks it with urllib as a program would and reads the state back to see the
effect. The OpenAPI document it serves is checked against every answer collected here
(a small validator over the subset of JSON Schema the document uses).
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_daemon_e2e import LIMIT, Run, wait_until
from tickwork._daemon.web.httpauth import Signer, Tokens, cross_site, parse_token, read_token_file
from tickwork.stores.sqlite import SQLiteStore

ANA, BOT = "ana-secret-0123456789", "bot-secret-9876543210"
#: Every (method, path template, status, body, content type) answered in this module, for
#: the schema test.
SEEN: list[tuple[str, str, int, Any, str]] = []


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = ANA,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
    template: str | None = None,
    kind: str = "application/json",
) -> tuple[int, Any]:
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", kind)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
            ctype = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
        ctype = exc.headers.get("Content-Type", "")
    answer = json.loads(text) if text.startswith(("{", "[")) else text
    SEEN.append((method, template or path, status, answer, ctype))
    return status, answer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    tmp = tmp_path_factory.mktemp("api")
    jobs = tmp / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "report"
            every = "1h"
            first = "0s"
            command = ["sh", "-c", "echo 'built 3 pages'; echo 'disk <full>' >&2; exit 3"]

            [[job]]
            name = "sync"
            cron = "*/5 * * * *"
            command = ["true"]

            [[job]]
            name = "cleanup"
            every = "1h"
            command = ["true"]

            [[job]]
            name = "slow"
            every = "1h"
            first = "0s"
            overlap = "queue"
            command = ["sleep", "60"]
            """
        )
    )
    token_file = tmp / "tokens"
    token_file.write_text(f"# the deploy bot\nbot={BOT}\n")
    token_file.chmod(0o600)
    state = tmp / "s.sqlite3"
    run = Run(
        jobs, state, "--http", "127.0.0.1:0", "--http-token", f"ana={ANA}",
        "--http-token-file", str(token_file), "--shutdown-grace", "1s",
    )  # fmt: skip
    line = run.wait_line("metrics at http://127.0.0.1:")
    base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
    wait_until(
        "the report job's failed run",
        lambda: any(
            i.get("outcome") == "failed"
            for i in call(base, "GET", "/api/jobs/report/history")[1]["items"]
        ),
        LIMIT,
    )
    yield base, state, jobs
    run.stop()  # the slow job's sleep ends with it


def actions_of(state: Path, job: str) -> list[Any]:
    store = SQLiteStore(state)
    try:
        return [a for a in store.actions(None, limit=100) if a.job_id.endswith("/" + job)]
    finally:
        store.close()


def stored(state: Path, job: str) -> Any:
    store = SQLiteStore(state)
    try:
        return next(s for s in store.jobs() if s.id.endswith("/" + job))
    finally:
        store.close()


def test_reading_needs_a_token_and_lists_jobs_and_history(served: tuple[str, Path, Path]) -> None:
    base, _, _ = served
    status, answer = call(base, "GET", "/api/jobs", token=None)
    assert status == 401 and "bearer token" in answer["error"]
    assert call(base, "GET", "/api/jobs", token="wrong")[0] == 401
    status, answer = call(base, "GET", "/api/jobs", token=BOT)
    assert status == 200
    assert sorted(row["job"] for row in answer["jobs"]) == ["cleanup", "report", "slow", "sync"]
    status, row = call(base, "GET", "/api/jobs/report", template="/api/jobs/{name}")
    assert status == 200 and row["outcome"] == "failed" and row["consecutive_failures"] >= 1
    status, answer = call(
        base, "GET", "/api/jobs/report/history?limit=5", template="/api/jobs/{name}/history"
    )
    slot = next(i for i in answer["items"] if i["kind"] == "slot")
    assert slot["outcome"] == "failed" and "built 3 pages" in (slot["output"] or slot["error"])
    assert call(base, "GET", "/api/history?outcome=failed", template="/api/history")[0] == 200
    status, answer = call(base, "GET", "/api/history?limit=0", template="/api/history")
    assert status == 400 and answer["error"] == "limit must be an integer >= 1, got '0'"
    status, answer = call(base, "GET", "/api/jobs/nope", template="/api/jobs/{name}")
    assert status == 404 and answer["error"] == "no job with id 'nope'"
    assert call(base, "GET", "/healthz", token=None)[0] == 200
    assert call(base, "GET", "/metrics", token=None)[0] == 401


def test_pause_and_resume_are_recorded_with_the_tokens_name(served: tuple[str, Path, Path]) -> None:
    base, state, _ = served
    status, done = call(
        base, "POST", "/api/jobs/sync/pause", {"note": "db migration", "until": "2h"},
        template="/api/jobs/{name}/pause",
    )  # fmt: skip
    assert status == 200, done
    assert (
        done["by"] == "ana" and done["paused"] and done["message"].startswith("paused sync until")
    )
    s = stored(state, "sync")
    assert s.paused and s.pause.by == "ana" and s.pause.note == "db migration"
    assert s.pause.until is not None and abs(s.pause.until - (time.time() + 7200)) < 120
    status, done = call(
        base, "POST", "/api/jobs/sync/resume", {}, token=BOT, template="/api/jobs/{name}/resume"
    )
    assert status == 200 and done["resumed"] and done["by"] == "bot"
    assert not stored(state, "sync").paused
    status, done = call(
        base, "POST", "/api/jobs/sync/resume", {}, template="/api/jobs/{name}/resume"
    )
    assert status == 200 and done["message"] == "sync was not paused; nothing done"
    kinds = [(a.action, a.actor, a.note) for a in actions_of(state, "sync")]
    assert ("pause", "ana", "db migration") in kinds and ("resume", "bot", None) in kinds


def test_trigger_skip_next_backfill_and_cancel_change_the_store(
    served: tuple[str, Path, Path],
) -> None:
    base, state, _ = served
    status, done = call(
        base, "POST", "/api/jobs/cleanup/skip-next", {}, template="/api/jobs/{name}/skip-next"
    )
    before = stored(state, "cleanup").next_run
    assert status == 200 and done["skipped"] is not None and done["next_run"] is not None
    assert before is not None and done["message"].startswith("skipped the run of cleanup due")
    # A dry run changes nothing; past --max is refused with the CLI's words.
    status, done = call(
        base, "POST", "/api/jobs/sync/backfill", {"from": "3h", "to": "now", "dry_run": True},
        template="/api/jobs/{name}/backfill",
    )  # fmt: skip
    assert status == 200 and done["dry_run"] and stored(state, "sync").waiting_runs == 0
    # The job was declared moments ago: its slots from before then are left out.
    status, answer = call(
        base, "POST", "/api/jobs/sync/backfill", {"from": "3h", "to": "now"},
        template="/api/jobs/{name}/backfill",
    )  # fmt: skip
    assert status == 200 and answer["queued"] == 0 and answer["before_first_slot"] > 0
    with sqlite3.connect(state) as db:  # as if declared a day ago
        db.execute("UPDATE jobs SET first_slot = first_slot - 86400 WHERE id LIKE '%/sync'")
    status, answer = call(
        base, "POST", "/api/jobs/sync/backfill", {"from": "3h", "to": "2h", "max": 5},
        template="/api/jobs/{name}/backfill",
    )  # fmt: skip
    assert status == 400 and "runs of sync" in answer["error"]
    assert "more than --max 5. Nothing was queued." in answer["error"]
    assert stored(state, "sync").waiting_runs == 0
    status, done = call(
        base, "POST", "/api/jobs/sync/backfill", {"from": "3h", "to": "2h", "note": "outage"},
        template="/api/jobs/{name}/backfill",
    )  # fmt: skip
    assert status == 200 and done["queued"] in (12, 13) and done["by"] == "ana", done
    detail = next(a.detail for a in actions_of(state, "sync") if a.action == "backfill")
    assert detail is not None and detail.startswith(f"{done['queued']} slot(s) queued")
    # While a run of a job whose overlap is "queue" goes, a trigger's run waits; cancel
    # takes it back.
    wait_until("the slow job's run", lambda: call(base, "GET", "/api/jobs/slow")[1]["running"])
    status, done = call(
        base, "POST", "/api/jobs/slow/trigger", {"note": "now please"},
        template="/api/jobs/{name}/trigger",
    )  # fmt: skip
    assert status == 200 and done["result"] == "queued"
    status, waiting = call(
        base, "GET", "/api/jobs/slow/waiting", template="/api/jobs/{name}/waiting"
    )
    assert status == 200 and [w["origin"] for w in waiting["waiting"]] == ["manual"]
    slot = waiting["waiting"][0]["scheduled"]
    status, done = call(
        base, "POST", "/api/jobs/slow/cancel", {"slot": slot}, template="/api/jobs/{name}/cancel"
    )
    assert status == 200 and done["cancelled"] == 1, done
    status, answer = call(
        base, "POST", "/api/jobs/slow/cancel", {"slot": slot}, template="/api/jobs/{name}/cancel"
    )
    assert status == 409 and "has no waiting run due" in answer["error"]
    status, done = call(
        base, "POST", "/api/jobs/slow/cancel", {"all_waiting": True},
        template="/api/jobs/{name}/cancel",
    )  # fmt: skip
    assert status == 200 and done["message"] == "slow has no waiting run; nothing done"
    assert stored(state, "slow").waiting_runs == 0
    # A paused job refuses a backfill, as `tickwork backfill` does.
    assert (
        call(base, "POST", "/api/jobs/cleanup/pause", {}, template="/api/jobs/{name}/pause")[0]
        == 200
    )
    status, answer = call(
        base, "POST", "/api/jobs/cleanup/backfill", {"from": "1h", "to": "now"},
        template="/api/jobs/{name}/backfill",
    )  # fmt: skip
    assert status == 409 and answer["error"].startswith(
        "job 'cleanup' is paused, and a paused job is not backfilled"
    )

    kinds = {a.action for a in actions_of(state, "cleanup") + actions_of(state, "slow")}
    assert {"skip-next", "pause", "trigger", "cancel"} <= kinds
    call(base, "POST", "/api/jobs/cleanup/resume", {}, template="/api/jobs/{name}/resume")


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "pause",
            {"until": "soonish"},
            "until must be a duration from now (30m, 2h, 1d) or an ISO 8601",
        ),
        ("pause", {"until": "-5m"}, "until must"),
        (
            "pause",
            {"color": "red"},
            "pause takes the fields note, until; got an unknown field 'color'",
        ),
        ("backfill", {"from": "2h"}, "backfill needs the field 'to'"),
        ("backfill", {"from": "1h", "to": "3h"}, "the window ends"),
        ("backfill", {"from": "1h", "to": "now", "max": 0}, "max must be an integer >= 1, got 0"),
        ("cancel", {}, "cancel needs exactly one of all_waiting (true) and slot"),
        ("trigger", {"note": 7}, "note must be a str or null, got 7"),
        ("trigger", [1], "the body must be a JSON object, got list"),
        # A JSON body says true and 5: a string is not taken for a boolean or a number.
        ("backfill", {"from": "3h", "to": "2h", "dry_run": "yes"}, "dry_run must be true or"),
        (
            "backfill",
            {"from": "3h", "to": "2h", "max": "5"},
            "max must be an integer >= 1, got '5'",
        ),
        ("cancel", {"all_waiting": "true"}, "all_waiting must be true or false, got 'true'"),
    ],
)
def test_bad_input_is_400_with_the_rule(
    served: tuple[str, Path, Path], path: str, body: Any, message: str
) -> None:
    base, _, _ = served
    status, answer = call(
        base, "POST", f"/api/jobs/sync/{path}", body, template=f"/api/jobs/{{name}}/{path}"
    )
    assert status == 400 and message in answer["error"], answer


def test_writes_need_a_token_and_the_same_origin(served: tuple[str, Path, Path]) -> None:
    base, state, _ = served
    before = len(actions_of(state, "sync"))
    status, answer = call(base, "POST", "/api/jobs/sync/trigger", {}, token=None)
    assert status == 401 and "bearer token" in answer["error"]
    assert call(base, "POST", "/api/jobs/sync/trigger", {}, token="ana-secret-0123456788")[0] == 401
    for headers in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Referer": "https://evil.example/page"},
    ):
        status, answer = call(
            base, "POST", "/api/jobs/sync/trigger", {}, headers=headers,
            template="/api/jobs/{name}/trigger",
        )  # fmt: skip
        assert status == 403 and "cannot act" in answer["error"]
    assert call(base, "POST", "/api/jobs/nope/trigger", {})[0] == 404
    assert call(base, "GET", "/api/jobs/sync/trigger")[0] == 405
    assert call(base, "DELETE", "/api/jobs/sync")[0] == 405
    assert call(base, "POST", "/api/jobs", {})[0] == 405
    assert len(actions_of(state, "sync")) == before  # none of them acted


def raw(
    base: str, method: str, path: str, headers: dict[str, str], body: str = "", source: str = ""
) -> tuple[int, Any, str]:
    """One request (from the address ``source``), redirects not followed: status, headers, body."""
    import http.client

    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(
        host, int(port), timeout=30, source_address=(source, 0) if source else None
    )
    try:
        if body:
            headers = {"Content-Type": "application/x-www-form-urlencoded"} | headers
        connection.request(method, path, body=body.encode() or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode()
    finally:
        connection.close()


def session_of(set_cookie: str) -> dict[str, str]:
    value = set_cookie.split(";", 1)[0]
    assert value.startswith("tickwork_session=") and value != "tickwork_session=", set_cookie
    return {"Cookie": value}


def test_each_login_is_a_new_session_that_ends_at_logout(served: tuple[str, Path, Path]) -> None:
    base, _, _ = served
    status, first, _ = raw(base, "POST", "/login", {}, f"token={ANA}")
    assert status == 303 and first["Location"] == "/"
    cookie = first["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=43200" in cookie
    assert "Secure" not in cookie and ANA not in cookie and "ana" not in cookie
    proxied = raw(base, "POST", "/login", {"X-Forwarded-Proto": "https"}, f"token={ANA}")[1]
    assert proxied["Set-Cookie"].endswith("; Secure")  # over TLS, at the proxy
    one, two = session_of(cookie), session_of(proxied["Set-Cookie"])
    assert one != two  # a random id per login, not a function of the token
    assert "logged in as ana" in raw(base, "GET", "/", one)[2]
    status, out, _ = raw(base, "POST", "/logout", one)
    assert status == 303 and "Max-Age=0" in out["Set-Cookie"]
    assert raw(base, "GET", "/", one)[0] == 401  # the cookie ended with its logout
    assert "logged in as ana" in raw(base, "GET", "/", two)[2]  # the other session goes on


def test_a_token_link_reads_on_with_its_session_and_cannot_act(
    served: tuple[str, Path, Path],
) -> None:
    base, state, _ = served
    status, headers, text = raw(base, "GET", f"/?token={ANA}", {})
    assert status == 200 and "report" in text
    link = session_of(headers["Set-Cookie"])
    status, _, text = raw(base, "GET", "/jobs/report", link)  # a click on the job's link
    assert status == 200 and "<h1>report" in text and "log in</a> to act" in text
    before = len(actions_of(state, "report"))
    status, _, text = raw(base, "POST", "/jobs/report/trigger", link, "note=x")
    assert status == 401 and "log in first" in text
    assert len(actions_of(state, "report")) == before


def test_a_link_cannot_put_its_own_words_in_the_banner(served: tuple[str, Path, Path]) -> None:
    base, _, _ = served
    bearer = {"Authorization": f"Bearer {ANA}"}
    said = "?said=your+account+is+locked%3A+call+555-0100&sig=00"
    status, _, text = raw(base, "GET", "/jobs/report" + said, bearer)
    assert status == 200 and "<h1>report" in text
    assert "account is locked" not in text and 'class="said"' not in text
    status, _, text = raw(base, "GET", "/" + said, bearer)  # nor on the overview
    assert status == 200 and "account is locked" not in text and 'class="said"' not in text
    # What an action said comes back signed, and shows.
    status, out, _ = raw(base, "POST", "/login", {}, f"token={ANA}")
    session = session_of(out["Set-Cookie"])
    page = raw(base, "GET", "/jobs/cleanup", session)[2]
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    status, out, _ = raw(base, "POST", "/jobs/cleanup/skip-next", session, f"csrf={csrf}")
    assert status == 303 and "&sig=" in out["Location"], out["Location"]
    text = raw(base, "GET", out["Location"], session)[2]
    assert '<div class="said" role="status">skipped the run of cleanup due' in text
    # From the overview's buttons, the overview says it the same way.
    overview = out["Location"].replace("/jobs/cleanup?", "/?")
    text = raw(base, "GET", overview, session)[2]
    assert '<div class="said" role="status">skipped the run of cleanup due' in text


def test_wrong_tokens_are_throttled_per_client(tmp_path: Path) -> None:
    from tickwork._daemon.web.httpauth import FAILURES_ALLOWED

    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1h"\ncommand = ["true"]\n')
    run = Run(jobs, tmp_path / "s.db", "--http", "127.0.0.1:0", "--http-token", f"ana={ANA}")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        for i in range(FAILURES_ALLOWED):
            status, _, text = raw(base, "POST", "/login", {}, f"token=guess-{i}")
            assert status == 401 and "that token is not known here" in text
        status, headers, text = raw(base, "POST", "/login", {}, f"token={ANA}")
        assert status == 429 and "too many wrong tokens from this client" in text
        assert 1 <= int(headers["Retry-After"]) <= 60
        status, answer = call(base, "GET", "/api/jobs")  # the bearer header too
        assert status == 429 and "try again in" in answer["error"]
        # Another client (one with an address of its own) is not held back.
        bearer = {"Authorization": f"Bearer {ANA}"}
        assert raw(base, "GET", "/api/jobs", bearer, source="127.0.0.2")[0] == 200
    finally:
        run.stop()


def test_a_body_too_deep_too_big_or_of_another_type_is_refused_in_words(
    served: tuple[str, Path, Path],
) -> None:
    base, state, _ = served
    before = len(actions_of(state, "sync"))
    path, template = "/api/jobs/sync/trigger", "/api/jobs/{name}/trigger"
    deep = b'{"note": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    status, answer = call(base, "POST", path, raw=deep, template=template)
    assert status == 400 and answer["error"].endswith("it is nested too deep"), answer
    big = b'{"note": "' + b"x" * 65_536 + b'"}'
    status, answer = call(base, "POST", path, raw=big, template=template)
    assert status == 413 and "at most 65536 bytes" in answer["error"]
    status, answer = call(base, "POST", path, raw=b"note=x", template=template, kind="text/plain")
    assert status == 415 and "got 'text/plain'" in answer["error"]
    assert len(actions_of(state, "sync")) == before
    # A form's text is read as the pages send it: a checkbox's "on" is true.
    form = b"from=3h&to=2h&dry_run=on&max=7"
    status, done = call(
        base, "POST", "/api/jobs/sync/backfill", raw=form,
        template="/api/jobs/{name}/backfill", kind="application/x-www-form-urlencoded",
    )  # fmt: skip
    assert status == 200 and done["dry_run"] is True, done
    assert len(actions_of(state, "sync")) == before


REC = "tests.durable_jobs:record"


def oneoff_counts(state: Path) -> list[Any]:
    store = SQLiteStore(state)
    try:
        return store.oneoff_counts()
    finally:
        store.close()


def test_enqueue_adds_a_one_off_by_its_path_and_delete_cancels_it(
    served: tuple[str, Path, Path],
) -> None:
    base, state, _ = served
    body = {
        "func": "nowhere_app_xyz.tasks:send",  # not importable here: never imported
        "args": [7, "a"],
        "kwargs": {"lang": "fr"},
        "delay": "1h",  # not due while the module runs
        "key": "order/7",
        "options": {"retries": 2, "timeout": "30s", "missed": "skip"},
    }
    status, done = call(base, "POST", "/api/enqueue", body)
    assert status == 201, done
    assert done["id"] == "~key:order/7" and done["created"] and done["by"] == "ana"
    status, again = call(base, "POST", "/api/enqueue", body | {"args": [8]}, token=BOT)
    assert status == 200 and not again["created"] and again["id"] == "~key:order/7"
    status, plain = call(base, "POST", "/api/enqueue", {"func": REC, "at": 4102444800})
    assert status == 201 and plain["run_at"] == "2100-01-01T00:00:00Z"
    store = SQLiteStore(state)
    try:
        spec = store.get("~key:order/7").spec
    finally:
        store.close()
    assert (spec.func, spec.args, dict(spec.kwargs)) == (body["func"], (7, "a"), {"lang": "fr"})
    assert (spec.retries, spec.timeout) == (2, 30.0)
    status, counts = call(base, "GET", "/api/oneoffs", token=BOT)
    assert status == 200 and counts == {
        "oneoffs": [
            {"queue": q, "pending": 1, "running": 0, "done": 0, "failed": 0, "dropped": 0}
            for q in sorted([body["func"], REC])
        ]
    }
    template = "/api/enqueue/{ref}"
    status, gone = call(base, "DELETE", "/api/enqueue/order%2F7", template=template)
    assert status == 200 and gone == {"id": "~key:order/7", "cancelled": True, "by": "ana"}
    status, answer = call(base, "DELETE", "/api/enqueue/order%2F7", template=template)
    assert status == 404 and "no one-off 'order/7' is pending" in answer["error"]
    status, gone = call(base, "DELETE", f"/api/enqueue/{plain['id']}", template=template)
    assert status == 200 and gone["id"] == plain["id"]
    assert {c.queue: c.dropped for c in oneoff_counts(state)} == {body["func"]: 1, REC: 1}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"args": [1]}, "func must be an import path 'package.module:function', got None"),
        ({"func": "no path"}, "func must be an import path 'package.module:function'"),
        ({"func": REC, "args": {"a": 1}}, "args must be a JSON array, got {'a': 1}"),
        ({"func": REC, "kwargs": [1]}, "kwargs must be a JSON object, got [1]"),
        ({"func": REC, "at": "tomorrow"}, "at must be an ISO 8601 date-time"),
        ({"func": REC, "at": 1, "delay": 2}, "give at or delay, not both"),
        ({"func": REC, "delay": "soon"}, "delay"),
        ({"func": REC, "options": {"every": 3}}, "unknown option(s) every"),
        ({"func": REC, "options": {"retries": -1}}, "retries must be"),
        ({"func": REC, "options": {"timeout": "long"}}, "options.timeout: duration must"),
        ({"func": REC, "key": ""}, "key must be a non-empty printable string"),
        ({"func": REC, "color": "red"}, "got an unknown field 'color'"),
    ],
)
def test_a_bad_enqueue_is_400_naming_the_field_and_adds_nothing(
    served: tuple[str, Path, Path], body: Any, message: str
) -> None:
    base, state, _ = served
    before = oneoff_counts(state)
    status, answer = call(base, "POST", "/api/enqueue", body)
    assert status == 400 and message in answer["error"], answer
    assert oneoff_counts(state) == before


def test_enqueue_needs_a_token_and_the_same_origin(served: tuple[str, Path, Path]) -> None:
    base, state, _ = served
    before = oneoff_counts(state)
    status, answer = call(base, "POST", "/api/enqueue", {"func": REC}, token=None)
    assert status == 401 and "bearer token" in answer["error"]
    status, answer = call(
        base, "POST", "/api/enqueue", {"func": REC}, headers={"Origin": "https://evil.example"}
    )
    assert status == 403 and "cannot act" in answer["error"]
    status, _ = call(base, "DELETE", "/api/enqueue/k", token=None, template="/api/enqueue/{ref}")
    assert status == 401
    assert call(base, "GET", "/api/enqueue")[0] == 405
    assert call(base, "POST", "/api/enqueue/k", {})[0] == 405
    assert call(base, "POST", "/api/oneoffs", {})[0] == 405
    assert call(base, "GET", "/api/oneoffs", token=None)[0] == 401
    assert oneoff_counts(state) == before


def test_the_openapi_document_describes_every_answer(served: tuple[str, Path, Path]) -> None:
    base, _, _ = served
    status, doc = call(base, "GET", "/api/openapi.json", token=None)
    assert status == 200 and doc["openapi"].startswith("3.1")
    checked = set()
    for method, template, code, body, ctype in SEEN:
        op = doc["paths"].get(template, {}).get(method.lower())
        if op is None:
            continue
        response = op["responses"].get(str(code))
        assert response is not None, f"{method} {template} answered {code}, not described"
        kind = ctype.split(";")[0]
        assert kind in response["content"], f"{method} {template} {code} answered {ctype}"
        schema = response["content"][kind]["schema"]
        errors = validate(body, schema, doc)
        assert not errors, f"{method} {template} {code}: {errors}"
        checked.add((method, template))
    every = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert every <= checked, f"not exercised: {sorted(every - checked)}"
    accepted = {k for op in _operations(doc) for k in op.get("requestBody", {}).get("content", {})}
    assert accepted == {"application/json", "application/x-www-form-urlencoded"}
    codes = {int(c) for op in _operations(doc) for c in op["responses"]}
    answered = {code for m, t, code, _, _ in SEEN if m.lower() in doc["paths"].get(t, {})}
    assert codes == answered | {503}, f"declared, never answered: {sorted(codes - answered)}"


def _operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for ops in doc["paths"].values() for op in ops.values()]


def validate(value: Any, schema: dict[str, Any], doc: dict[str, Any], at: str = "$") -> list[str]:
    """The ways ``value`` breaks ``schema`` (the subset the document uses)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return validate(value, doc["components"]["schemas"][name], doc, at)
    if "oneOf" in schema:
        fits = [s for s in schema["oneOf"] if not validate(value, s, doc, at)]
        return [] if len(fits) == 1 else [f"{at}: fits {len(fits)} of oneOf"]
    if "enum" in schema:
        return [] if value in schema["enum"] else [f"{at}: {value!r} not in {schema['enum']}"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{at}: {value!r} is not {kinds}"]
    errors: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{at}: {k} missing" for k in schema.get("required", []) if k not in value]
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            if sub is not None:
                errors += validate(v, sub, doc, f"{at}.{k}")
            elif extra is False:
                errors.append(f"{at}: {k} not allowed")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += validate(v, schema["items"], doc, f"{at}[{i}]")
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{at}: {value} < {schema['minimum']}")
    return errors


def _is(value: Any, kind: str) -> bool:
    return {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "null": value is None,
    }[kind]


def test_the_validator_sees_a_wrong_answer() -> None:
    doc = {
        "components": {
            "schemas": {
                "E": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}},
                    "required": ["error"],
                }
            }
        }
    }
    assert validate({"error": "x"}, {"$ref": "#/components/schemas/E"}, doc) == []
    assert validate({"error": 1}, {"$ref": "#/components/schemas/E"}, doc)
    assert validate({}, {"$ref": "#/components/schemas/E"}, doc)


# -- tokens, in-process ------------------------------------------------------------------


def test_tokens_are_named_and_checked(tmp_path: Path) -> None:
    assert parse_token("ana=s3cret") == ("ana", "s3cret")
    assert parse_token("s3cret") == ("http-token", "s3cret")
    assert parse_token("YWJj==") == ("http-token", "YWJj==")  # no name before '='
    assert parse_token("ana=") == ("http-token", "ana=")
    with pytest.raises(ValueError, match=r"must be NAME=SECRET.*'\.\.\.' with an empty"):
        parse_token("")
    with pytest.raises(ValueError, match=r"must be NAME=SECRET.*'ana=\.\.\.' with a spaced"):
        parse_token("ana=two words")
    tokens = Tokens([("ana", "a" * 20), ("bot", "b" * 20)])
    assert tokens.bearer("Bearer " + "b" * 20) == "bot" and tokens.bearer("Bearer x") is None
    assert tokens.by_secret("a" * 20) == "ana" and tokens.bearer(None) is None
    cookie = tokens.login("ana")
    assert tokens.from_cookie({"tickwork_session": cookie}) == "ana"
    assert tokens.from_cookie({"tickwork_session": "bot." + cookie}) is None
    signer = Signer()
    form = signer.form_token("ana", now=1000.0)
    assert signer.form_token_ok(form, "ana", now=1000.0 + 3600)
    assert not signer.form_token_ok(form, "bot", now=1000.0)
    assert not signer.form_token_ok(form, "ana", now=1000.0 + 13 * 3600)
    assert signer.form_token("ana") != signer.form_token("ana")  # one per page
    assert not Signer().form_token_ok(form, "ana", now=1000.0)  # another process's key
    with pytest.raises(ValueError, match="token names must be unique, got 'ana' twice"):
        Tokens([("ana", "x1"), ("ana", "x2")])
    open_file = tmp_path / "tokens"
    open_file.write_text("ana=abc\n")
    open_file.chmod(0o644)
    with pytest.raises(ValueError, match="others may read it \\(mode 644\\)"):
        read_token_file(str(open_file))
    open_file.chmod(0o600)
    open_file.write_text("# c\n\nana=abc\nnoname\n")
    with pytest.raises(ValueError, match="tokens:4: must be NAME=SECRET, the line has no name"):
        read_token_file(str(open_file))


def test_sessions_expire_and_past_the_cap_the_oldest_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    from tickwork._daemon.web import httpauth
    from tickwork._daemon.web.httpauth import FAILURE_WINDOW, SESSION_LIFE, Throttled

    tokens = Tokens([("ana", "a" * 20), ("bot", "b" * 20)])
    jar = {"tickwork_session": tokens.login("ana", now=1000.0)}
    assert tokens.from_cookie(jar, now=1000.0 + SESSION_LIFE - 1) == "ana"
    assert tokens.from_cookie(jar, now=1000.0 + SESSION_LIFE) is None  # expired
    read = {"tickwork_session": tokens.login("bot", write=False, now=1000.0)}
    assert tokens.from_cookie(read, now=1000.0) is None  # it may not act
    assert tokens.from_cookie(read, write=False, now=1000.0) == "bot"
    monkeypatch.setattr(httpauth, "MAX_SESSIONS", 3)
    ids = [tokens.login("ana", now=2000.0 + i) for i in range(4)]
    live = [tokens.from_cookie({"tickwork_session": i}, now=2010.0) for i in ids]
    assert live == [None, "ana", "ana", "ana"]  # the oldest made room
    assert len(tokens._sessions) == 3  # and the expired ones went at the first login
    # Wrong secrets from one client: refused after FAILURES_ALLOWED until they age out.
    for i in range(httpauth.FAILURES_ALLOWED):
        assert tokens.by_secret(f"guess{i}", "10.0.0.9", now=5000.0 + i) is None
    with pytest.raises(Throttled) as caught:
        tokens.by_secret("a" * 20, "10.0.0.9", now=5010.0)
    assert caught.value.retry_after == pytest.approx(FAILURE_WINDOW - 10)
    assert tokens.by_secret("a" * 20, "10.0.0.8", now=5010.0) == "ana"  # another client
    assert tokens.by_secret("a" * 20, "10.0.0.9", now=5000.0 + FAILURE_WINDOW) == "ana"


def test_cross_site_requests_are_told_apart() -> None:
    host = {"Host": "127.0.0.1:9120"}
    assert cross_site(host) is None
    assert cross_site(host | {"Origin": "http://127.0.0.1:9120"}) is None
    assert cross_site(host | {"Sec-Fetch-Site": "same-origin"}) is None
    assert cross_site(host | {"Origin": "http://127.0.0.1:9121"}) is not None
    assert cross_site(host | {"Origin": "null"}) is not None
    assert cross_site(host | {"Sec-Fetch-Site": "same-site"}) is not None
    assert cross_site(host | {"Referer": "http://localhost:9120/"}) is not None


def test_bad_tokens_stop_the_start_before_the_state_is_opened(tmp_path: Path) -> None:
    import io

    from tickwork._daemon.start import DaemonConfig, run_daemon

    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "t"\nevery = "1s"\ncommand = ["true"]\n')
    readable = tmp_path / "tokens"
    readable.write_text("ana=abc\n")
    readable.chmod(0o644)
    for extra, message in [
        ({"http_token_file": str(readable)}, "others may read it (mode 644); chmod o="),
        ({"http_tokens": ("ana=a1", "ana=a2")}, "--http-token: token names must be unique"),
        ({"http_tokens": ("ana=two words",)}, "--http-token must be NAME=SECRET"),
        ({"http_token_file": str(tmp_path / "none")}, "cannot read it"),
    ]:
        err = io.StringIO()
        config = DaemonConfig(str(jobs), state=str(tmp_path / "s.db"), http="127.0.0.1:0", **extra)
        assert run_daemon(config, err=err) == 2
        assert message in err.getvalue()
    assert not (tmp_path / "s.db").exists()


def test_run_takes_named_tokens_and_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    from tickwork._cli.main import build_parser
    from tickwork._cli.run import daemon_config

    parser = build_parser()
    monkeypatch.setenv("TICKWORK_HTTP_TOKEN", "from-env")
    args = parser.parse_args(["run", "j.toml", "--http", ":0"])
    config = daemon_config(args)
    assert config.http_token == "from-env" and config.http_tokens == ()
    args = parser.parse_args(
        ["run", "j.toml", "--http-token", "a=1x", "--http-token", "b=2y", "--http-token-file", "f"]
    )
    config = daemon_config(args)  # given tokens replace the environment's
    assert config.http_token is None and config.http_tokens == ("a=1x", "b=2y")
    assert config.http_token_file == "f"
