"""The durable scheduler and what kind of callable a job may be, or what it may raise.

- ``declare`` / ``add`` refuse a ``func`` that names a coroutine function.
- A job that returns an awaitable (a coroutine function declared by another process,
  or a plain function wrapping one) is recorded ``failed`` with a clear error text, and
  its coroutine is closed.
- A job that raises `SystemExit` / `KeyboardInterrupt` is recorded ``failed`` (the claim
  is finished, not left to its lease), reported like any failure, and the worker goes on.

Job functions live in this module and are named by import path.
"""

from __future__ import annotations

import gc
import logging
import math
import warnings
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.executors import ManualExecutor, drain
from tickwork import At, DurableScheduler, EventKind, Every, RunEvent
from tickwork.stores import JobSpec, JobSpecError
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

HERE = "tests.test_durable_jobkinds"
START = 1_700_000_000.0

#: Names of the jobs that ran, in order.
RAN: list[str] = []
#: Coroutines the wrapping jobs made.
MADE: list[Coroutine[Any, Any, None]] = []


async def job_async() -> None:
    RAN.append("job_async")  # never reached: nothing awaits it


def wraps_async() -> Coroutine[Any, Any, None]:
    MADE.append(job_async())
    return MADE[-1]


def exits() -> None:
    RAN.append("exits")
    raise SystemExit(3)


def interrupted() -> None:
    RAN.append("interrupted")
    raise KeyboardInterrupt


def fine() -> None:
    RAN.append("fine")


@pytest.fixture
def clock() -> FakeClock:
    RAN.clear()
    MADE.clear()
    return FakeClock(wall_start=START)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "jobs.db")
    yield s
    s.close()


Made = tuple[DurableScheduler, ManualExecutor, list[tuple[str, Exception]], list[RunEvent]]


@pytest.fixture
def made(clock: FakeClock, store: SQLiteStore) -> Made:
    pool = ManualExecutor()
    hooked: list[tuple[str, Exception]] = []
    ds = DurableScheduler(
        store,
        executor=pool,
        wall_clock=clock.wall,
        lease=30.0,
        on_error=lambda job_id, exc: hooked.append((job_id, exc)),
        allowed_modules=[HERE],
    )
    events: list[RunEvent] = []
    ds.add_listener(events.append)
    return ds, pool, hooked, events


# -- declare / add refuse coroutine functions ---------------------------------------------


@pytest.mark.parametrize("how", ["declare", "add"])
def test_declare_and_add_refuse_a_coroutine_function(made: Made, how: str) -> None:
    ds = made[0]
    spec = JobSpec("a", f"{HERE}:job_async", Every(10))
    with pytest.raises(TypeError) as info:
        getattr(ds, how)(spec)
    assert str(info.value) == (
        "func must name a plain function, not a coroutine function (async def):"
        " DurableScheduler calls jobs without awaiting them; use"
        " tickwork.AsyncDurableScheduler, which awaits them on your event loop,"
        " got 'tests.test_durable_jobkinds:job_async'"
    )
    assert ds.jobs() == []  # nothing stored
    ds.declare(JobSpec("b", f"{HERE}:wraps_async", Every(10)))  # plain: accepted
    assert [j.id for j in ds.jobs()] == ["b"]


# -- a returned awaitable is a failed run --------------------------------------------------


@pytest.mark.parametrize("func", ["job_async", "wraps_async"])
def test_a_job_that_returns_an_awaitable_is_recorded_failed(
    made: Made, clock: FakeClock, store: SQLiteStore, func: str
) -> None:
    ds, pool, hooked, events = made
    # job_async can only get here declared by someone else (declare refuses it).
    store.upsert(JobSpec("a", f"{HERE}:{func}", At(START + 1)), START + 1)
    clock.advance(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        logging.disable(logging.ERROR)
        try:
            drain(ds, pool)
        finally:
            logging.disable(logging.NOTSET)
        gc.collect()
    assert not [w for w in seen if "never awaited" in str(w.message)]
    state = ds.get("a")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed" and not state.claims
    error = state.last_run.error or ""
    assert error.startswith(
        "TypeError: fn must not return an awaitable: a plain job is called, never awaited"
        " (give coroutine functions to tickwork.AsyncScheduler); "
    )
    assert " returned <coroutine object job_async at " in error
    assert RAN == []
    assert all(c.cr_frame is None for c in MADE)  # closed
    assert [(j, type(e)) for j, e in hooked] == [("a", TypeError)]
    assert ds.errors[0].startswith("job a: TypeError: fn must not return an awaitable")
    assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FAILED]
    assert ds.running() == {}


# -- SystemExit / KeyboardInterrupt: recorded failed, reported, the worker goes on -------


@pytest.mark.parametrize(
    ("func", "raised"), [("exits", "SystemExit(3)"), ("interrupted", "KeyboardInterrupt()")]
)
def test_a_base_exception_from_a_job_is_a_finished_failed_run(
    made: Made,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    func: str,
    raised: str,
) -> None:
    ds, pool, hooked, events = made
    ds.declare(JobSpec("x", f"{HERE}:{func}", Every(10)))
    ds.declare(JobSpec("y", f"{HERE}:fine", Every(10)))
    clock.advance(10)
    with caplog.at_level(logging.ERROR, logger="tickwork.durable"):
        drain(ds, pool)  # the pool item returns normally: nothing escapes into the pool
    state = ds.get("x")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed"
    assert not state.claims  # finished now, not left to the lease
    kind = raised.split("(")[0]
    assert (state.last_run.error or "").startswith(f"{kind}: ")
    assert f"in {func}" in (state.last_run.error or "")  # the job's frame
    assert ds.errors == [f"job x: JobInterrupted: job raised {raised}"]
    assert caplog.messages == [f"job 'x' failed: JobInterrupted: job raised {raised}"]
    assert [(j, str(e)) for j, e in hooked] == [("x", f"job raised {raised}")]
    assert type(hooked[0][1].__cause__).__name__ == kind
    failed = [e for e in events if e.kind is EventKind.FAILED]
    assert [(e.job_id, e.error) for e in failed] == [("x", hooked[0][1])]
    assert ds.running() == {}
    assert sorted(RAN) == sorted([func, "fine"])
    clock.advance(10)  # the job goes on: its next slot is claimed and run
    with caplog.at_level(logging.CRITICAL, logger="tickwork.durable"):
        drain(ds, pool)
    assert sorted(RAN) == sorted([func, "fine"] * 2)
    assert ds.running() == {}


# -- an interval the wall clock cannot resolve -------------------------------------------


def test_declare_refuses_an_interval_below_the_wall_clocks_resolution(made: Made) -> None:
    ds = made[0]
    with pytest.raises(JobSpecError) as info:
        ds.declare(JobSpec("t", f"{HERE}:fine", Every(1e-12, fixed_delay=True)))
    first = START + 1e-12
    assert str(info.value) == (
        f"job 't': schedule.seconds must be at least {math.ulp(first)!r} s, the wall"
        f" clock's resolution at the first run {first!r}, got 1e-12"
    )
    assert ds.jobs() == []
    ds.declare(JobSpec("t", f"{HERE}:fine", Every(math.ulp(START))))  # enough


def test_a_fixed_delay_run_too_small_for_the_wall_clock_is_next_due_strictly_later(
    made: Made, clock: FakeClock, store: SQLiteStore
) -> None:
    ds, pool, _, _ = made
    # Stored by someone else (declare refuses it): its next run must still move on.
    spec = JobSpec("t", f"{HERE}:fine", Every(1e-12, fixed_delay=True))
    store.upsert(spec, START + 1)
    clock.advance(1)
    ds._step()
    pool.run_all()
    state = ds.get("t")
    assert state is not None and state.last_run is not None
    ended = state.last_run.ended
    assert ended is not None and state.next_run == math.nextafter(ended, math.inf)
    assert RAN == ["fine"]


def test_a_job_module_that_exits_on_import_fails_the_run_and_frees_the_claim(
    made: Made, clock: FakeClock, store: SQLiteStore, tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "exits_on_import_mod.py").write_text("raise SystemExit('bye')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ds, pool, hooked, _ = made
    ds._functions.prefixes = ("exits_on_import_mod",)  # allowed here, declared elsewhere
    spec = JobSpec("m", "exits_on_import_mod:f", At(START + 1))
    store.upsert(spec, START + 1)
    clock.advance(1)
    logging.disable(logging.ERROR)
    try:
        drain(ds, pool)  # nothing escapes into the pool
    finally:
        logging.disable(logging.NOTSET)
    state = ds.get("m")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed" and not state.claims
    assert state.last_run.error == (
        "JobSpecError: func 'exits_on_import_mod:f' cannot be imported: SystemExit: bye"
    )
    assert ds.running() == {}
    assert [j for j, _ in hooked] == ["m"]
