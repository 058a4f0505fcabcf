"""The asyncio driver: the shared driver contract, then asyncio-only tests.

Deterministic tests build the scheduler on a `FakeClock` inside a private event loop
and never start the owner task: `AsyncScheduler._step` runs one tick, and the loop is
run just long enough for the tasks and callbacks it made to settle. Real-time tests
(timeouts, thread-safe entry, shutdown) use small, tolerant delays.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from tickwork import AsyncScheduler, EventKind, Every, RunEvent

from .driver_contract import DriverContract, FakeWait, Harness, InlineExecutor, count_steps


async def settle() -> None:
    """Let the tasks and callbacks made so far run (a few loop iterations)."""
    for _ in range(8):
        await asyncio.sleep(0)


class AsyncHarness(Harness):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()

    def make(self, *, inline: bool = False, **kw: Any) -> AsyncScheduler:
        executor = InlineExecutor() if inline else self.pool

        async def build() -> AsyncScheduler:
            return AsyncScheduler(self.clock, executor=executor, **kw)

        return self.loop.run_until_complete(build())

    def tick(self, s: Any) -> None:
        async def step() -> None:
            s.step()
            await settle()

        self.loop.run_until_complete(step())

    def settle(self) -> None:
        self.loop.run_until_complete(settle())

    def stop(self, s: Any, **kw: Any) -> bool:
        result: bool = self.loop.run_until_complete(s.stop(**kw))
        return result

    def start(self, s: Any) -> None:
        self.loop.run_until_complete(s.start())

    def drive(self, s: Any, fake_wait: FakeWait) -> None:
        async def wait(timeout: float | None) -> None:
            await settle()  # the jobs handed over finish "at once"
            fake_wait(timeout)

        s._wait = wait
        self.loop.run_until_complete(s._own())

    def watch_wakeups(self, s: Any) -> list[int]:
        woken: list[int] = []

        def wake() -> None:
            s._policy.wake = False
            woken.append(1)

        s._wake = wake
        return woken

    def close(self) -> None:
        loop = self.loop
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left))
        loop.close()


@pytest.fixture
def ah() -> Iterator[AsyncHarness]:
    harness = AsyncHarness()
    yield harness
    harness.close()


class TestAsyncContract(DriverContract):
    @pytest.fixture
    def harness(self, ah: AsyncHarness) -> Harness:
        return ah


def run(main: Callable[[], Awaitable[None]]) -> None:
    """Run ``main()`` on a fresh loop, failing on anything the loop would only log."""
    problems: list[dict[str, Any]] = []

    async def checked() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: problems.append(ctx))
        await main()
        assert asyncio.all_tasks() == {asyncio.current_task()}, "a task was left behind"

    asyncio.run(checked())
    gc.collect()
    assert problems == []


# -- coroutine jobs through the shared policy (fake clock) ------------------------------


def test_coroutine_jobs_meet_the_same_overlap_policy(ah: AsyncHarness) -> None:
    s = ah.make()
    release = ah.loop.run_until_complete(make_event())
    runs: list[float] = []

    async def slow() -> None:
        runs.append(ah.clock.now)
        await release.wait()

    events: list[RunEvent] = []
    s.add_listener(events.append)
    s.schedule(1, slow, interval=1)
    for t in (1, 2, 3):
        ah.clock.set(t)
        ah.tick(s)
    assert runs == [1.0] and s.running() == {1: 1} and s.skipped_runs(1) == 2
    s._check()
    release.set()
    ah.settle()
    assert s.running() == {} and [e.kind for e in events if e.kind is not EventKind.SKIPPED] == [
        EventKind.STARTED,
        EventKind.FINISHED,
    ]
    s._check()


def test_coroutine_fixed_delay_counts_from_the_end_of_the_awaited_run(ah: AsyncHarness) -> None:
    s = ah.make()
    starts: list[float] = []

    async def job() -> None:
        starts.append(ah.clock.now)
        ah.clock.advance(2)

    s.schedule(1, job, interval=5, fixed_delay=True)
    for t in (1, 8):
        ah.clock.set(t)
        ah.tick(s)
    assert starts == [1.0, 8.0] and s.next_run_in() == 5.0  # ended at 10, next due 15
    s._check()


def test_inline_plain_callables_run_on_the_loop_in_due_order(ah: AsyncHarness) -> None:
    s = ah.make()
    seen: list[tuple[str, bool]] = []

    def job(name: str) -> Callable[[], None]:
        return lambda: seen.append((name, threading.get_ident() == main))

    main = threading.get_ident()
    s.schedule(2, job("b"), inline=True)
    s.schedule(1, job("a"), inline=True)
    s.schedule(1, job("pool"))
    ah.clock.set(2)
    ah.tick(s)
    assert seen == [("a", True), ("b", True)] and len(ah.pool.queue) == 1
    s._check()


def test_a_coroutine_job_that_is_never_started_makes_no_coroutine(ah: AsyncHarness) -> None:
    made = 0

    async def job() -> None:  # pragma: no cover - must never run
        nonlocal made
        made += 1

    s = ah.make()
    s.schedule(1, job, interval=1)
    s.schedule(1, job)
    ah.clock.set(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ah.loop.run_until_complete(tick_cancel_stop(s))
        gc.collect()
    assert made == 0 and caught == [] and s.running() == {}
    assert asyncio.all_tasks(ah.loop) == set()
    s._check()


async def make_event() -> asyncio.Event:
    return asyncio.Event()


async def tick_cancel_stop(s: Any) -> None:
    s.step()  # both runs handed over: a task each, not yet started
    assert s.cancel(1) is True  # the recurring one is dropped at its start
    assert await s.stop() is True  # and the one-shot too


# -- validation -----------------------------------------------------------------------------


def test_it_needs_a_running_loop() -> None:
    with pytest.raises(
        RuntimeError,
        match=r"^AsyncScheduler\(\) needs a running event loop: create it in a coroutine$",
    ):
        AsyncScheduler()


def test_constructor_validates() -> None:
    with pytest.raises(
        TypeError, match=r"^executor must be a concurrent.futures.Executor or None, got 3$"
    ):
        build(executor=3)
    with pytest.raises(TypeError, match=r"^cancel_on_exit must be a bool, got 1$"):
        build(cancel_on_exit=1)
    with pytest.raises(
        ValueError, match=r"^exit_timeout must be None or a finite number >= 0, got -1$"
    ):
        build(exit_timeout=-1)


def build(**kw: Any) -> AsyncScheduler:
    async def make() -> AsyncScheduler:
        return AsyncScheduler(**kw)

    return asyncio.run(make())


def test_schedule_options_are_validated(ah: AsyncHarness) -> None:
    s = ah.make()

    async def coro() -> None:
        pass

    def plain() -> None:
        pass

    with pytest.raises(ValueError, match=r"^timeout must be None or a finite number > 0, got 0$"):
        s.schedule(1, coro, timeout=0)
    with pytest.raises(
        ValueError,
        match=r"^timeout needs a coroutine function \(a plain callable cannot be cancelled\), "
        r"got fn=<function .*plain at 0x\w+>$",
    ):
        s.schedule(1, plain, timeout=1)
    with pytest.raises(
        ValueError,
        match=r"^inline=True is for plain callables \(coroutine functions run as tasks on the "
        r"loop\), got fn=<function .*coro at 0x\w+>$",
    ):
        s.add(Every(1), coro, inline=True)
    with pytest.raises(TypeError, match=r"^inline must be a bool, got 1$"):
        s.schedule(1, plain, inline=1)  # type: ignore[arg-type]
    assert s.schedule(1, coro, timeout=2) == 1  # no id was used up
    assert s.tasks()[0].fn is coro


def test_start_and_stop_belong_to_the_schedulers_loop(ah: AsyncHarness) -> None:
    s = ah.make()
    with pytest.raises(
        RuntimeError, match=r"^start\(\) must be awaited on the scheduler's event loop$"
    ):
        asyncio.run(s.start())
    with pytest.raises(
        RuntimeError, match=r"^stop\(\) must be awaited on the scheduler's event loop$"
    ):
        asyncio.run(s.stop())
    ah.start(s)
    with pytest.raises(
        RuntimeError, match=r"^start\(\) on an AsyncScheduler that is already running$"
    ):
        ah.start(s)
    assert ah.stop(s) is True


# -- real time: timeouts, hand-off, shutdown --------------------------------------------------


@pytest.mark.timeout(30)
def test_real_timeout_cancels_the_run_and_records_a_failure() -> None:
    async def main() -> None:
        cleaned: list[bool] = []
        events: list[RunEvent] = []

        async def stuck() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                cleaned.append(True)

        async def own_timeout() -> None:
            raise TimeoutError("upstream")

        async with AsyncScheduler() as s:
            s.add_listener(events.append)
            s.schedule(0, stuck, timeout=0.05)
            s.schedule(0, own_timeout, timeout=10)
            for _ in range(200):
                await asyncio.sleep(0.01)
                if len(s.errors) == 2:
                    break
            assert sorted(s.errors) == ["task 1: timed out after 0.05 s", "task 2: upstream"]
            assert cleaned == [True] and s.running() == {}
        failed = [e for e in events if e.kind is EventKind.FAILED]
        assert {type(e.error) for e in failed} == {TimeoutError}

    run(main)


@pytest.mark.timeout(30)
def test_real_slow_job_does_not_delay_the_others_and_callables_run_in_the_executor() -> None:
    async def main() -> None:
        loop_thread = threading.get_ident()
        done = asyncio.Event()
        late: list[float] = []
        where: list[bool] = []
        listener_threads: set[int] = set()

        async def slow() -> None:
            await asyncio.sleep(0.5)

        def blocking() -> None:
            where.append(threading.get_ident() == loop_thread)
            time.sleep(2.0)

        async def quick(due: float) -> None:
            late.append(time.monotonic() - due)
            done.set()

        async with AsyncScheduler(cancel_on_exit=True) as s:
            s.add_listener(lambda e: listener_threads.add(threading.get_ident()))
            s.schedule(0, slow)
            s.schedule(0, blocking)
            due = time.monotonic() + 0.05
            s.schedule(0.05, functools.partial(quick, due))  # a partial is detected too
            await asyncio.wait_for(done.wait(), 10)
        assert where == [False] and late and late[-1] < 1.5  # not held by the 2-s block
        assert listener_threads == {loop_thread}  # every event, even the executor job's

    run(main)


@pytest.mark.timeout(30)
def test_real_thread_safe_entry_points() -> None:
    async def main() -> None:
        fired = asyncio.Event()
        results: list[Any] = []

        def other_thread(s: AsyncScheduler) -> None:
            far = [s.schedule(3600 + i, print) for i in range(50)]
            results.append(all(i in s for i in far) and len(s) >= 50)
            results.append([s.cancel(i) for i in far[:10]] == [True] * 10)
            results.append(len(s.tasks()) == 40 and s.running() == {} and s.errors == [])
            s.schedule(0.05, fired.set, inline=True)

        async with AsyncScheduler() as s:
            await asyncio.sleep(0.02)  # the owner now waits on nothing
            t0 = time.monotonic()
            await asyncio.to_thread(other_thread, s)
            await asyncio.wait_for(fired.wait(), 10)
            late = time.monotonic() - t0
            assert results == [True, True, True]
            assert late < 5  # woken early by the other thread's schedule, not polled

    run(main)


@pytest.mark.timeout(30)
def test_real_idle_owner_does_not_poll_and_head_cancel_rearms() -> None:
    async def main() -> None:
        s = AsyncScheduler()
        steps = count_steps(s)
        head = s.schedule(1.0, print)
        for i in range(1000):
            s.schedule(3600 + i, print)
        await s.start()
        await asyncio.sleep(0.05)
        assert s.cancel(head) is True  # the owner slept for it: woken once to re-arm
        await asyncio.sleep(1.2)  # past the cancelled head's time
        assert len(steps) == 2  # the first tick, the re-arm: no polling
        assert await s.stop() is True

    run(main)


@pytest.mark.timeout(30)
def test_real_stop_cancels_or_awaits_running_jobs_and_leaves_no_task() -> None:
    async def main() -> None:
        cleaned: list[str] = []
        started = asyncio.Event()

        async def stuck(name: str) -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            finally:
                cleaned.append(name)

        s = AsyncScheduler()
        await s.start()
        s.schedule(0, functools.partial(stuck, "a"))  # type: ignore[arg-type]
        await asyncio.wait_for(started.wait(), 10)
        t0 = time.monotonic()
        assert await s.stop(timeout=0.1) is False  # cut short, then cancelled
        assert time.monotonic() - t0 < 5 and cleaned == ["a"] and s.errors == []

        started.clear()
        s = AsyncScheduler()
        await s.start()
        s.schedule(0, functools.partial(stuck, "b"))  # type: ignore[arg-type]
        await asyncio.wait_for(started.wait(), 10)
        assert await s.stop(cancel=True) is True
        assert cleaned == ["a", "b"] and s.running() == {}
        s._check()

    run(main)


@pytest.mark.timeout(30)
def test_real_context_exit_waits_and_an_error_cancels() -> None:
    async def main() -> None:
        finished: list[str] = []

        async def short() -> None:
            await asyncio.sleep(0.05)
            finished.append("short")

        async def long() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                finished.append("long")

        async with AsyncScheduler() as s:
            s.schedule(0, short)
            await asyncio.sleep(0.01)
        assert finished == ["short"]  # awaited on exit
        with pytest.raises(ValueError, match=r"^body$"):
            await failing_body(long)
        assert finished == ["short", "long"]  # cancelled on the way out

    run(main)


async def failing_body(job: Callable[[], Awaitable[None]]) -> None:
    async with AsyncScheduler() as s:
        s.schedule(0, job)
        await asyncio.sleep(0.02)
        raise ValueError("body")


@pytest.mark.timeout(30)
def test_real_a_job_may_stop_its_own_scheduler() -> None:
    async def main() -> None:
        result: list[bool] = []
        s = AsyncScheduler()

        async def stopper() -> None:
            result.append(await s.stop(cancel=True))

        await s.start()
        s.schedule(0, stopper)
        for _ in range(500):
            await asyncio.sleep(0.01)
            if result:
                break
        assert result == [True]
        assert await s.stop() is True

    run(main)
