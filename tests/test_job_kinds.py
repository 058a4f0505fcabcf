"""What kind of callable a job may be, and what a job may do to the driver running it.

- Sync drivers (`Scheduler`, `ThreadScheduler`) refuse coroutine functions at ``schedule``
  and ``add``; a plain callable that returns an awaitable at run time is a failed run,
  never an ok one, and its coroutine is closed (no "never awaited" warning).
- `SystemExit` / `KeyboardInterrupt` out of a job on a worker thread is a failed run
  (logged, in ``errors``, ``on_error``, FAILED) and the driver stays consistent.

The durable scheduler's side is in ``test_durable_jobkinds.py``.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import logging
import re
import sys
import threading
import warnings
from collections.abc import Awaitable, Coroutine, Generator, Iterator
from typing import Any

import pytest

from tickwork import AsyncScheduler, EventKind, Every, Once, RunEvent, Scheduler, ThreadScheduler
from tickwork.testing import FakeClock

from .driver_contract import ManualExecutor


async def job_async() -> None:
    """A coroutine function: sync drivers must refuse it."""


class AsyncCall:
    """An object whose ``__call__`` is ``async def``."""

    async def __call__(self) -> None:
        pass


class SyncCall:
    """An object whose ``__call__`` is plain."""

    def __call__(self) -> None:
        pass


class Holder:
    async def method(self) -> None:
        pass


class Awaits:
    """A non-coroutine awaitable."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


def _marked() -> Any:
    """A plain function returning a coroutine, marked as a coroutine function (3.12+)."""

    def fn() -> Coroutine[Any, Any, None]:
        return job_async()

    return inspect.markcoroutinefunction(fn)  # type: ignore[attr-defined,unused-ignore]


ASYNC_KINDS: list[Any] = [
    pytest.param(job_async, id="async-def"),
    pytest.param(functools.partial(job_async), id="partial-of-async-def"),
    pytest.param(AsyncCall(), id="async-__call__"),
    pytest.param(Holder().method, id="async-method"),
]
if sys.version_info >= (3, 12):  # inspect.markcoroutinefunction is new in 3.12
    ASYNC_KINDS.append(pytest.param("marked", id="markcoroutinefunction"))

SYNC_KINDS: list[Any] = [
    pytest.param(lambda: None, id="lambda"),
    pytest.param(SyncCall(), id="sync-__call__"),
    pytest.param(functools.partial(print, end=""), id="partial-of-builtin"),
    pytest.param(list, id="class"),
    pytest.param(AsyncCall, id="class-with-async-__call__"),  # calling it makes an instance
]


def _kind(fn: Any) -> Any:
    return _marked() if fn == "marked" else fn


@pytest.fixture
def no_unawaited_warning() -> Iterator[None]:
    """Fail if a coroutine is collected un-awaited (its RuntimeWarning leaks)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
        gc.collect()
    leaked = [w for w in seen if "never awaited" in str(w.message)]
    assert not leaked, leaked


# -- point 6: the sync core refuses coroutine functions --------------------------------


def _refusal(driver: str) -> str:
    return (
        rf"^fn must not be a coroutine function \(async def\): {driver} calls jobs without"
        r" awaiting them; run it on tickwork\.AsyncScheduler, got .+$"
    )


@pytest.mark.parametrize("fn", ASYNC_KINDS)
def test_core_schedule_and_add_refuse_coroutine_functions(clock: FakeClock, fn: Any) -> None:
    s = Scheduler(clock)
    fn = _kind(fn)
    with pytest.raises(TypeError, match=_refusal("Scheduler")):
        s.schedule(1, fn)
    with pytest.raises(TypeError, match=_refusal("Scheduler")):
        s.schedule(1, fn, interval=2)
    with pytest.raises(TypeError, match=_refusal("Scheduler")):
        s.add(Every(5), fn)
    assert s.schedule(1, lambda: None) == 1  # no id was used up
    assert len(s) == 1


def test_core_refusal_shows_the_function(clock: FakeClock) -> None:
    with pytest.raises(TypeError) as info:
        Scheduler(clock).schedule(0, job_async)
    assert str(info.value).endswith(f"got {job_async!r}")


@pytest.mark.parametrize("fn", SYNC_KINDS)
def test_core_accepts_plain_callables(clock: FakeClock, fn: Any) -> None:
    s = Scheduler(clock)
    s.schedule(0, fn)
    s.add(Once(0), fn)
    assert s.run_pending() == 2
    assert s.errors == []


def _awaitable_failure(task_id: int) -> str:
    return (
        rf"^task {task_id}: fn must not return an awaitable: a plain job is called, never"
        r" awaited \(give coroutine functions to tickwork\.AsyncScheduler\); .+ returned"
        r" <coroutine object job_async at .+>$"
    )


@pytest.mark.usefixtures("no_unawaited_warning")
@pytest.mark.parametrize("observed", [False, True], ids=["fast-path", "with-listener"])
def test_core_records_a_returned_coroutine_as_a_failure_and_closes_it(
    clock: FakeClock, observed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    made: list[Coroutine[Any, Any, None]] = []
    hooked: list[tuple[int, Exception]] = []

    def wraps_async() -> Awaitable[None]:
        made.append(job_async())
        return made[-1]

    s = Scheduler(clock, on_error=lambda task_id, exc: hooked.append((task_id, exc)))
    events: list[RunEvent] = []
    if observed:
        s.add_listener(events.append)
    s.schedule(1, wraps_async)  # a one-shot
    s.schedule(1, wraps_async, interval=1)  # fixed-rate
    s.add(Every(1, fixed_delay=True), wraps_async)  # a plan (the slow path)
    clock.set(1)
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        assert s.run_pending() == 3
    assert len(s.errors) == 3
    for task_id, error in zip((1, 2, 3), s.errors, strict=True):
        assert re.match(_awaitable_failure(task_id), error), error
    assert [t for t, _ in hooked] == [1, 2, 3]
    assert all(isinstance(exc, TypeError) for _, exc in hooked)
    assert [m.split(":")[0] for m in caplog.messages] == [f"task {i} failed" for i in (1, 2, 3)]
    assert [inspect.getcoroutinestate(c) for c in made] == ["CORO_CLOSED"] * 3
    if observed:
        assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FAILED] * 3
        assert all(isinstance(e.error, TypeError) for e in events[1::2])
    # the recurring ones are still scheduled (a failing recurring task is rescheduled)
    assert len(s) == 2
    s._check()


def test_core_records_any_returned_awaitable(clock: FakeClock) -> None:
    s = Scheduler(clock)
    logging.disable(logging.ERROR)
    try:
        s.schedule(0, Awaits)  # returns an object with __await__
        s.schedule(0, lambda: 42)  # returns a value: fine
        s.schedule(0, lambda: "x")
        assert s.run_pending() == 3
    finally:
        logging.disable(logging.NOTSET)
    assert len(s.errors) == 1
    assert s.errors[0].startswith("task 1: fn must not return an awaitable")
    assert f"; {Awaits!r} returned <" in s.errors[0]  # it names the job that did it
    assert "returned <tests.test_job_kinds.Awaits object at" in s.errors[0]


# -- point 6: the thread driver refuses them too; AsyncScheduler takes them --------------


@pytest.mark.parametrize("fn", ASYNC_KINDS)
def test_thread_schedule_and_add_refuse_coroutine_functions(clock: FakeClock, fn: Any) -> None:
    ts = ThreadScheduler(clock, executor=ManualExecutor())
    fn = _kind(fn)
    with pytest.raises(TypeError, match=_refusal("ThreadScheduler")):
        ts.schedule(1, fn)
    with pytest.raises(TypeError, match=_refusal("ThreadScheduler")):
        ts.schedule(1, fn, interval=2, overlap="allow")
    with pytest.raises(TypeError, match=_refusal("ThreadScheduler")):
        ts.add(Every(5), fn)
    assert ts.schedule(1, lambda: None) == 1  # no id was used up
    assert len(ts) == 1
    ts._check()


@pytest.mark.parametrize("fn", SYNC_KINDS)
def test_thread_accepts_plain_callables(clock: FakeClock, fn: Any) -> None:
    ts = ThreadScheduler(clock, executor=ManualExecutor())
    ts.schedule(1, fn)
    ts.add(Once(1), fn)
    assert len(ts) == 2


def test_async_scheduler_still_takes_every_kind_of_coroutine_function(clock: FakeClock) -> None:
    async def main() -> list[int]:
        s = AsyncScheduler(clock, executor=ManualExecutor())
        return [s.schedule(1, _kind(p.values[0])) for p in ASYNC_KINDS[:4]]

    assert asyncio.run(main()) == [1, 2, 3, 4]


# -- point 8: SystemExit / KeyboardInterrupt on the thread driver's own pool ------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_real_pool_reports_a_base_exception_and_keeps_its_worker(
    exc_type: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    after = threading.Event()
    hooked: list[Exception] = []
    events: list[RunEvent] = []
    workers: set[str] = set()

    def bail() -> None:
        workers.add(threading.current_thread().name)
        raise exc_type("out")

    def then() -> None:
        workers.add(threading.current_thread().name)
        after.set()

    with caplog.at_level(logging.ERROR, logger="tickwork"):
        ts = ThreadScheduler(max_workers=1, on_error=lambda task_id, e: hooked.append(e))
        ts.add_listener(events.append)
        with ts:
            ts.schedule(0, bail)
            ts.schedule(0, then)
            assert after.wait(30)  # the one worker ran the next job
        assert ts.stop() is True
    assert ts.running() == {}
    assert len(workers) == 1  # the same pool thread ran both
    assert ts.errors == [f"task 1: job raised {exc_type.__name__}('out')"]
    assert [m for m in caplog.messages if "failed" in m] == [
        f"task 1 failed: job raised {exc_type.__name__}('out')"
    ]
    assert len(hooked) == 1 and isinstance(hooked[0].__cause__, exc_type)
    ends = [(e.task_id, e.kind) for e in events if e.kind is not EventKind.STARTED]
    assert sorted(ends, key=lambda e: e[0]) == [(1, EventKind.FAILED), (2, EventKind.FINISHED)]
    ts._check()


def test_async_scheduler_runs_a_class_with_async_call_on_the_executor(clock: FakeClock) -> None:
    # Calling the class makes an instance (no coroutine): a plain callable.
    async def main() -> tuple[int, int]:
        s = AsyncScheduler(clock, executor=ManualExecutor())
        s.schedule(1, AsyncCall)
        s.schedule(1, AsyncCall())
        return s._policy.tasks[1].driver[0], s._policy.tasks[2].driver[0]

    from tickwork._drivers.asyncio import _AWAIT, _POOL

    assert asyncio.run(main()) == (_POOL, _AWAIT)


def test_a_recurring_job_that_returns_an_awaitable_is_named(clock: FakeClock) -> None:
    s = Scheduler(clock)
    logging.disable(logging.ERROR)
    try:
        s.schedule(0, Awaits, interval=10)  # the fixed-rate path of run_pending
        assert s.run_pending() == 1
    finally:
        logging.disable(logging.NOTSET)
    assert s.errors[0].startswith("task 1: fn must not return an awaitable")
    assert f"; {Awaits!r} returned <" in s.errors[0]
