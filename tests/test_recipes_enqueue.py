"""The delayed-job recipes of docs/recipes.md run: each framework's view, then the worker.

Each view is called through its framework (Django's request, FastAPI as an ASGI app,
Flask's test client) on a fresh PostgreSQL database: a committed request leaves its
order and one pending one-off, a rolled-back one (``"sold out"``) neither; then the
worker of `examples.delayed` (a scheduler that enqueued nothing, allowed by module)
runs each receipt once, at its time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from examples import delayed

from tests.django_pg import django_on
from tests.executors import ManualExecutor, drain
from tests.waiting import wait_until
from tickwork.stores.contract import OneOffCounts
from tickwork.stores.postgres import PostgresStore
from tickwork.testing import FakeClock

RECEIPT = "examples.delayed:send_receipt"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def database(fresh_database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The app's database (its ``shop_order`` table), tickwork's tables in it too."""
    monkeypatch.setenv("TICKWORK_DATABASE", fresh_database)
    monkeypatch.delenv("TICKWORK_SCHEMA", raising=False)
    monkeypatch.setattr(delayed, "_producer", None)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE shop_order (id serial PRIMARY KEY, item text NOT NULL)")
    yield fresh_database
    if delayed._producer is not None:
        delayed._producer.store.close()  # type: ignore[attr-defined]


def _orders(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT id, item FROM shop_order ORDER BY id").fetchall()


def _worker_runs(dsn: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Run the worker of examples.delayed 10 minutes on: the log lines of its jobs."""
    clock = FakeClock(wall_start=delayed.producer().now())
    pool = ManualExecutor()
    with PostgresStore(dsn) as store:
        worker = delayed.worker(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
        with caplog.at_level(logging.WARNING, logger="examples.delayed"):
            drain(worker, pool)
            assert _jobs_said(caplog) == []  # not yet: in 10 minutes
            clock.advance(600)
            drain(worker, pool)
        assert worker.oneoffs()[0].pending == 0
    return _jobs_said(caplog)


def _jobs_said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "examples.delayed"]


def test_django_view_enqueues_in_its_transaction(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    from django.test import RequestFactory
    from examples import enqueue_django

    connection, _ = django_on(database)
    try:
        post = RequestFactory().post
        answers = [
            enqueue_django.place_order(
                post("/orders", json.dumps({"item": item}), content_type="application/json")
            )
            for item in ("book", "sold out", "lamp")
        ]
    finally:
        connection.close()
    assert [a.status_code for a in answers] == [201, 409, 201]
    assert [item for _, item in _orders(database)] == ["book", "lamp"]
    ids = [json.loads(answers[i].content)["order"] for i in (0, 2)]
    assert delayed.producer().oneoffs() == [OneOffCounts(RECEIPT, pending=2)]
    assert sorted(_worker_runs(database, caplog)) == [f"receipt sent for order {i}" for i in ids]


def _asgi_post(app: Any, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST ``body`` as JSON to an ASGI app; its status and JSON answer."""
    data = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"test")],
        "server": ("test", 80),
        "client": ("test", 1),
    }
    incoming = [{"type": "http.request", "body": data, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent))


def test_fastapi_handler_enqueues_in_its_sqlalchemy_transaction(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    from examples import enqueue_fastapi

    enqueue_fastapi.engine.cache_clear()
    try:
        answers = [
            _asgi_post(enqueue_fastapi.app, "/orders", {"item": item})
            for item in ("book", "sold out", "lamp")
        ]
    finally:
        enqueue_fastapi.engine().dispose()
        enqueue_fastapi.engine.cache_clear()
    assert [status for status, _ in answers] == [201, 409, 201]
    assert [item for _, item in _orders(database)] == ["book", "lamp"]
    ids = [answers[i][1]["order"] for i in (0, 2)]
    assert delayed.producer().oneoffs() == [OneOffCounts(RECEIPT, pending=2)]
    assert sorted(_worker_runs(database, caplog)) == [f"receipt sent for order {i}" for i in ids]


def test_flask_view_enqueues_once_per_key_with_retries(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    from examples import enqueue_flask

    client = enqueue_flask.create_app().test_client()
    body = {"url": "https://example.com/hook", "data": {"paid": True}}
    first = client.post("/events/ev-1", json=body)
    again = client.post("/events/ev-1", json=body)  # the client retried its request
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json == {"job": "~key:webhook:ev-1", "new": True}
    assert again.json == {"job": "~key:webhook:ev-1", "new": False}
    state = delayed.producer().get("~key:webhook:ev-1")
    assert state is not None and (state.spec.retries, state.spec.timeout) == (5, 10)
    assert _worker_runs(database, caplog) == ["webhook ev-1 delivered to https://example.com/hook"]


def test_the_worker_process_runs_what_is_due_and_stops_on_sigterm(
    database: str, tmp_path: Path
) -> None:
    delayed.producer().enqueue(delayed.send_receipt, 7)
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "examples.delayed"],
            cwd=ROOT,
            env={**os.environ, "TICKWORK_DATABASE": database},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            "the worker to run the receipt",
            lambda: delayed.producer().oneoffs() == [OneOffCounts(RECEIPT, done=1)],
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=120)
    assert code == 0, log.read_text()
    assert "receipt sent for order 7" in log.read_text()
