"""`tickwork.testing` drives every driver deterministically, through public names only.

Two ways, both without sleeping: a started driver is woken when its `FakeClock` moves
(the test waits on a condition its job sets), or a driver that is not started is
stepped with ``step()`` and runs its jobs inside that call on an `InlineExecutor`.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from tickwork import (
    AsyncScheduler,
    DurableScheduler,
    EventKind,
    Every,
    RunEvent,
    ThreadScheduler,
)
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

#: Only reached when something is broken; a loaded machine is merely slow.
PATIENCE = 60.0
CALLS: list[str] = []


def record(label: str) -> None:
    """A durable job (named by import path)."""
    CALLS.append(label)


class Counter:
    """Counts runs; a test waits until a given count is reached."""

    def __init__(self) -> None:
        self.n = 0
        self.cond = threading.Condition()

    def __call__(self) -> None:
        with self.cond:
            self.n += 1
            self.cond.notify_all()

    def reaches(self, n: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.n >= n, PATIENCE)


def test_moving_the_clock_wakes_a_started_thread_scheduler() -> None:
    clock = FakeClock()
    finished = Counter()

    def listener(event: RunEvent) -> None:
        if event.kind is EventKind.FINISHED:
            finished()

    ts = ThreadScheduler(clock)
    ts.add(Every(60), lambda: None)
    # The test waits for each run's end, not for its job's call: a run counted from
    # inside the job may still be going when the clock moves again, and the next
    # minute is then rightly skipped (overlap="skip"), which is not what this tests.
    ts.add_listener(listener)
    ts.start()
    try:
        for minute in range(1, 6):
            clock.advance(60)  # no real time passes: only the clock wakes it
            assert finished.reaches(minute)
        assert finished.n == 5 and ts.skipped_runs() == 0
        assert ts.next_run_in() == 60.0
    finally:
        ts.stop()


def test_a_thread_scheduler_is_stepped_with_an_inline_executor() -> None:
    clock = FakeClock()
    ran: list[float] = []
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    ts.add(Every(60), lambda: ran.append(clock()))
    assert ts.step() == 60.0 and ran == []
    for _ in range(10):
        clock.advance(60)
        ts.step()
    assert ran == [60.0 * k for k in range(1, 11)]  # exactly one run per minute


def test_moving_the_clock_wakes_a_started_asyncio_scheduler() -> None:
    async def main() -> list[float]:
        clock = FakeClock()
        ran = asyncio.Event()
        runs: list[float] = []

        async def job() -> None:
            runs.append(clock())
            ran.set()

        async with AsyncScheduler(clock) as s:
            s.add(Every(60), job)
            for _ in range(3):
                ran.clear()
                clock.advance(60)  # no real time passes: only the clock wakes it
                await asyncio.wait_for(ran.wait(), PATIENCE)
        return runs

    assert asyncio.run(main()) == [60.0, 120.0, 180.0]


def test_an_asyncio_scheduler_is_stepped_on_its_loop() -> None:
    async def main() -> list[float]:
        clock = FakeClock()
        runs: list[float] = []

        async def job() -> None:
            runs.append(clock())

        s = AsyncScheduler(clock)
        s.add(Every(30), job)
        for _ in range(4):
            clock.advance(30)
            s.step()
            await asyncio.sleep(0)  # the run's task takes its step
        return runs

    assert asyncio.run(main()) == [30.0, 60.0, 90.0, 120.0]


def test_a_durable_scheduler_is_stepped_with_an_inline_executor(tmp_path: Path) -> None:
    CALLS.clear()
    clock = FakeClock(wall_start=1_800_000_000.0)
    store = SQLiteStore(tmp_path / "jobs.db")
    try:
        ds = DurableScheduler(
            store, wall_clock=clock.wall, monotonic_clock=clock, executor=InlineExecutor()
        )
        ds.declare(JobSpec("tick", "tests.test_testing_drivers:record", Every(60), args=["t"]))
        for _ in range(5):
            clock.advance(60)
            ds.step()
        assert CALLS == ["t"] * 5
        state = ds.get("tick")
        assert state is not None and state.last_run is not None
        assert state.last_run.outcome == "ok" and state.next_run == 1_800_000_000.0 + 360
    finally:
        store.close()


def test_moving_the_clock_wakes_a_started_durable_scheduler(tmp_path: Path) -> None:
    CALLS.clear()
    clock = FakeClock(wall_start=1_800_000_000.0)
    store = SQLiteStore(tmp_path / "jobs.db")
    finished = Counter()

    def listener(event: RunEvent) -> None:
        if event.kind is EventKind.FINISHED:
            finished()

    try:
        # A safety poll far longer than the test: only the moving clock wakes it.
        ds = DurableScheduler(store, wall_clock=clock.wall, monotonic_clock=clock, poll=3600)
        ds.add_listener(listener)
        ds.declare(JobSpec("tick", "tests.test_testing_drivers:record", Every(60), args=["t"]))
        ds.start()
        try:
            for n in range(1, 4):
                clock.advance(60)
                assert finished.reaches(n)
        finally:
            ds.stop()
        assert CALLS == ["t"] * 3
    finally:
        store.close()
