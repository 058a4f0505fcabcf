"""`AsyncDurableScheduler`: coroutine jobs awaited on the application's loop, by the
durable engine itself (claims, records and recovery are `DurableScheduler`'s)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tickwork import AsyncDurableScheduler, At, DurableScheduler, OneOff
from tickwork.stores import JobSpec, JobState
from tickwork.stores.contract import OneOffCounts
from tickwork.stores.sqlite import SQLiteStore

HERE = "tests.test_async_durable"
#: Generous: only ever reached when something is broken (a loaded machine is slow).
PATIENCE = 60.0

seen: dict[str, Any] = {}
gate: dict[str, asyncio.Event] = {}


async def coro_job(label: str) -> None:
    await asyncio.sleep(0)
    claim = AsyncDurableScheduler.current_claim()
    seen[label] = {
        "thread": threading.get_ident(),
        "loop": asyncio.get_running_loop(),
        "job": None if claim is None else claim.job_id,
    }


async def failing_job() -> None:
    await asyncio.sleep(0)
    raise LookupError("the record is gone")


def plain_job(label: str) -> None:
    seen[label] = {"thread": threading.get_ident()}


async def held_job() -> None:
    gate["started"].set()
    await gate["release"].wait()
    seen["held"] = "done"


def _due_now(job_id: str, func: str, **kw: Any) -> JobSpec:
    return JobSpec(job_id, f"{HERE}:{func}", At(time.time()), **kw)


async def _until(
    check: Callable[[], Awaitable[JobState | None]], what: str
) -> JobState:  # polls the store, never asserts on time
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        state = await check()
        if state is not None and state.last_run is not None:
            return state
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} never recorded a run")


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()
    gate.clear()


def test_a_coroutine_job_is_awaited_on_the_loop_and_recorded(tmp_path: Path) -> None:
    async def main() -> JobState:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            async with AsyncDurableScheduler(store) as scheduler:
                await scheduler.declare(_due_now("c", "coro_job", args=["c"]))
                state = await _until(lambda: scheduler.get("c"), "the coroutine job")
                assert seen["c"]["loop"] is asyncio.get_running_loop()
                assert seen["c"]["thread"] == threading.get_ident()
                assert seen["c"]["job"] == "c"  # current_claim() inside the coroutine
                return state
        finally:
            store.close()

    state = asyncio.run(main())
    assert state.last_run is not None and state.last_run.outcome == "ok"


def test_a_failing_coroutine_is_recorded_failed_with_its_error(tmp_path: Path) -> None:
    async def main() -> tuple[JobState, list[str]]:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            async with AsyncDurableScheduler(store) as scheduler:
                await scheduler.declare(_due_now("f", "failing_job"))
                state = await _until(lambda: scheduler.get("f"), "the failing job")
                return state, scheduler.errors
        finally:
            store.close()

    state, errors = asyncio.run(main())
    assert state.last_run is not None and state.last_run.outcome == "failed"
    assert "LookupError: the record is gone" in (state.last_run.error or "")
    assert any("the record is gone" in e for e in errors)


def test_a_plain_job_runs_on_a_worker_not_on_the_loop(tmp_path: Path) -> None:
    async def main() -> int:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            async with AsyncDurableScheduler(store) as scheduler:
                await scheduler.declare(_due_now("p", "plain_job", args=["p"]))
                state = await _until(lambda: scheduler.get("p"), "the plain job")
                assert state.last_run is not None and state.last_run.outcome == "ok"
                return threading.get_ident()
        finally:
            store.close()

    loop_thread = asyncio.run(main())
    assert seen["p"]["thread"] != loop_thread


def test_stop_waits_for_a_coroutine_being_awaited(tmp_path: Path) -> None:
    async def main() -> tuple[bool, JobState | None]:
        gate["started"], gate["release"] = asyncio.Event(), asyncio.Event()
        store = SQLiteStore(tmp_path / "s.db")
        try:
            scheduler = AsyncDurableScheduler(store)
            await scheduler.declare(_due_now("h", "held_job"))
            await scheduler.start()
            await asyncio.wait_for(gate["started"].wait(), PATIENCE)
            stopping = asyncio.create_task(scheduler.stop())
            await asyncio.sleep(0.1)
            assert not stopping.done()  # the job cannot have ended: it waits on the gate
            assert scheduler.running() == {"h": 1}
            gate["release"].set()
            finished = await asyncio.wait_for(stopping, PATIENCE)
            return finished, await scheduler.get("h")
        finally:
            store.close()

    finished, state = asyncio.run(main())
    assert finished and seen["held"] == "done"
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "ok"


def test_the_threaded_scheduler_still_refuses_coroutine_functions(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with pytest.raises(TypeError, match="AsyncDurableScheduler"):
            DurableScheduler(store).declare(_due_now("c", "coro_job", args=["c"]))
        assert store.jobs() == []
    finally:
        store.close()


@pytest.mark.parametrize("name", ["enqueue", "enqueue_many"])
def test_the_async_enqueue_takes_the_engines_parameters(name: str) -> None:
    # The async face forwards: the engine's parameters, typed as they are there, and a
    # docstring of its own.
    import inspect

    face = getattr(AsyncDurableScheduler, name)
    engine = getattr(DurableScheduler, name)
    assert inspect.iscoroutinefunction(face)
    face_params = list(inspect.signature(face).parameters.values())
    engine_params = list(inspect.signature(engine).parameters.values())
    assert face_params[1:] == engine_params[1:]
    assert face.__qualname__ == f"AsyncDurableScheduler.{name}"
    assert face.__doc__.startswith(f"`DurableScheduler.{name}`, in a thread")


def test_store_calls_do_not_run_on_the_loop(tmp_path: Path) -> None:
    threads: list[int] = []

    class Spy(SQLiteStore):
        def jobs(self) -> list[JobState]:
            threads.append(threading.get_ident())
            return super().jobs()

    async def main() -> int:
        store = Spy(tmp_path / "s.db")
        try:
            scheduler = AsyncDurableScheduler(store)
            assert await scheduler.jobs() == []
            return threading.get_ident()
        finally:
            store.close()

    loop_thread = asyncio.run(main())
    assert threads and loop_thread not in threads


def test_the_asgi_example_runs_its_job_within_the_lifespan(tmp_path: Path) -> None:
    from examples import asgi_durable

    asgi_durable.refreshed.clear()
    app = asgi_durable.make_app(str(tmp_path / "app.db"), every=0.2)

    async def main() -> dict[str, Any]:
        to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def send(message: Any) -> None:
            await from_app.put(dict(message))

        lifespan = asyncio.create_task(app({"type": "lifespan"}, to_app.get, send))
        await to_app.put({"type": "lifespan.startup"})
        assert (await asyncio.wait_for(from_app.get(), PATIENCE))["type"] == (
            "lifespan.startup.complete"
        )
        deadline = time.monotonic() + PATIENCE
        while not asgi_durable.refreshed and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        # An HTTP request answers with the last outcome of each job, from the store.
        answer: list[dict[str, Any]] = []

        async def collect(message: Any) -> None:
            answer.append(dict(message))

        async def nothing() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        body: dict[str, Any] = {}
        while time.monotonic() < deadline:
            answer.clear()
            await app({"type": "http", "method": "GET", "path": "/"}, nothing, collect)
            body = json.loads(answer[1]["body"])
            if body.get("refresh") == "ok":  # a slot given up (loaded machine) may come first
                break
            await asyncio.sleep(0.02)
        await to_app.put({"type": "lifespan.shutdown"})
        assert (await asyncio.wait_for(from_app.get(), PATIENCE))["type"] == (
            "lifespan.shutdown.complete"
        )
        await lifespan
        assert answer[0]["status"] == 200
        return body

    body = asyncio.run(main())
    assert asgi_durable.refreshed[:1] == ["refresh"]  # awaited, with its claim
    assert body == {"refresh": "ok"}


def test_a_coroutine_whose_loop_stopped_is_recorded_failed(tmp_path: Path) -> None:
    # The application's loop stops running (not closed, not cancelled) while a
    # coroutine job waits on it: the worker notices, records the run failed and is freed.
    store = SQLiteStore(tmp_path / "s.db")
    loop = asyncio.new_event_loop()
    try:
        gate["started"], gate["release"] = asyncio.Event(), asyncio.Event()
        scheduler = AsyncDurableScheduler(store)

        async def begin() -> None:
            await scheduler.declare(_due_now("h", "held_job"))
            await scheduler.start()
            await asyncio.wait_for(gate["started"].wait(), PATIENCE)

        loop.run_until_complete(begin())  # returns: the loop no longer runs
        deadline = time.monotonic() + PATIENCE
        state = store.get("h")
        while (state is None or state.last_run is None) and time.monotonic() < deadline:
            time.sleep(0.05)
            state = store.get("h")
        assert state is not None and state.last_run is not None
        assert state.last_run.outcome == "failed"
        assert "event loop stopped" in (state.last_run.error or "")
        assert scheduler.engine.stop(timeout=PATIENCE)
    finally:
        loop.close()
        store.close()


def test_an_async_one_off_is_awaited_on_the_loop_and_leaves(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            async with AsyncDurableScheduler(store) as scheduler:
                ref = await scheduler.enqueue(coro_job, "once")
                [later] = await scheduler.enqueue_many([OneOff(coro_job, ("later",), delay=3600)])
                want = [OneOffCounts(f"{HERE}:coro_job", pending=1, done=1)]
                deadline = time.monotonic() + PATIENCE
                while await scheduler.oneoffs() != want and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                assert await scheduler.oneoffs() == want
                assert seen["once"]["loop"] is asyncio.get_running_loop()
                assert seen["once"]["thread"] == threading.get_ident()
                assert seen["once"]["job"] == ref.id
                assert await scheduler.get(ref.id) is None  # it left the jobs table
                assert [e.outcome for e in await scheduler.history(ref.id)] == ["ok"]
                assert await scheduler.cancel(later) and not await scheduler.cancel(later)
                assert await scheduler.oneoffs() == [
                    OneOffCounts(f"{HERE}:coro_job", done=1, dropped=1)
                ]
        finally:
            store.close()

    asyncio.run(main())
    assert set(seen) == {"once"}


def test_an_enqueue_on_the_apps_connection_runs_where_the_app_uses_it(
    pg_dsn: str, pg_schema: str
) -> None:
    """The app's connection is used on its own thread (Django's belong to their thread),
    in its transaction; the other store calls go to a thread."""
    import psycopg

    from tickwork.stores.postgres import PostgresStore

    threads: list[int] = []

    class Spy(PostgresStore):
        def oneoff_statement(self, rows: Any) -> Any:
            threads.append(threading.get_ident())
            return super().oneoff_statement(rows)

        def enqueue(self, rows: Any) -> list[bool]:
            threads.append(threading.get_ident())
            return super().enqueue(rows)

    async def main() -> None:
        with Spy(pg_dsn, schema=pg_schema) as store:
            scheduler = AsyncDurableScheduler(store)
            with psycopg.connect(pg_dsn) as app:  # commits at the end of the block
                ref = await scheduler.enqueue(coro_job, "x", connection=app)
                [many] = await scheduler.enqueue_many([OneOff(coro_job, ("y",))], connection=app)
            assert threads == [threading.get_ident()] * 2
            await scheduler.enqueue(coro_job, "z")
            assert threads[-1] != threading.get_ident()
            assert await scheduler.oneoffs() == [OneOffCounts(f"{HERE}:coro_job", pending=3)]
            assert ref.created and many.created

    asyncio.run(main())
