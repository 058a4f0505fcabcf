"""The driver contract as tests: every driver runs this same suite.

Use it by subclassing `DriverContract` in a driver's ``test_*.py`` module and providing
the ``harness`` fixture: a `Harness` that builds the driver on a `FakeClock` with an
executor under test control, and drives it one step at a time. The timing thread or
owner task is never started: `Harness.tick` runs one tick where it would wake up, and
`Harness.drive` runs its loop with the waiting injected. No test sleeps.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork import At, Cron, EventKind, Every, Once, RunEvent
from tickwork._core.scheduler import WALL_CHECK_INTERVAL
from tickwork.testing import FakeClock

from .conftest import Log

FakeWait = Callable[[float | None], None]


def ours(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages tickwork logged: not asyncio's, which may say at any time that a task
    of an earlier test's closed loop was destroyed pending (garbage collection)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("tickwork")]


class ManualExecutor(Executor):
    """Keeps submitted work until the test runs it (in the test's own thread)."""

    def __init__(self) -> None:
        self.queue: list[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = []
        self.shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.shut:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: Future[Any] = Future()
        self.queue.append((fn, args, future))
        return future

    def run_next(self) -> None:
        fn, args, future = self.queue.pop(0)
        _complete(future, fn, args)

    def run_all(self) -> int:
        n = 0
        while self.queue:
            self.run_next()
            n += 1
        return n

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.shut = True


class InlineExecutor(Executor):
    """Runs work at once, in the submitting thread (which holds no scheduler lock)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        _complete(future, fn, args)
        return future


def _complete(future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        future.set_result(fn(*args))
    except BaseException as exc:
        future.set_exception(exc)


class Harness:
    """How the contract builds and drives one kind of driver (subclassed per driver)."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = ManualExecutor()

    def make(self, *, inline: bool = False, **kw: Any) -> Any:
        """The driver on ``clock``, with ``pool`` (or an inline executor) and options."""
        raise NotImplementedError

    def tick(self, s: Any) -> None:
        """One tick of the timing loop, and whatever it makes happen at once."""
        raise NotImplementedError

    def settle(self) -> None:
        """Let the driver book what the executor finished (a no-op for threads)."""

    def run_all(self) -> int:
        n = self.pool.run_all()
        self.settle()
        return n

    def run_next(self) -> None:
        self.pool.run_next()
        self.settle()

    def stop(self, s: Any, **kw: Any) -> bool:
        raise NotImplementedError

    def start(self, s: Any) -> None:
        raise NotImplementedError

    def drive(self, s: Any, fake_wait: FakeWait) -> None:
        """Run the driver's timing loop with ``fake_wait(timeout)`` in place of waiting."""
        raise NotImplementedError

    def watch_wakeups(self, s: Any) -> list[int]:
        """Record each early wake-up of the timing loop instead of doing it."""
        raise NotImplementedError

    def close(self) -> None:
        """Tear down what the harness made."""


def count_steps(s: Any) -> list[int]:
    """Count the driver's ticks (``len`` of the returned list) from now on."""
    steps: list[int] = []
    real_step = s._step

    def counting_step() -> None:
        steps.append(1)
        real_step()

    s._step = counting_step
    return steps


def events_of(s: Any) -> list[RunEvent]:
    events: list[RunEvent] = []
    s.add_listener(events.append)
    return events


class DriverContract:
    """Contract tests; subclasses provide the ``harness`` fixture."""

    @pytest.fixture
    def harness(self) -> Harness:
        raise NotImplementedError("a driver test module must override the harness fixture")

    @pytest.fixture
    def h(self, harness: Harness) -> Harness:
        return harness

    @pytest.fixture
    def s(self, harness: Harness) -> Any:
        return harness.make()

    # -- the core's contract through the driver ------------------------------------------

    def test_spec_example_1_through_the_driver(self, h: Harness, log: Log) -> None:
        s = h.make(inline=True)
        out: list[object] = [
            s.schedule(5, log.job("backup")),
            s.schedule(2, log.job("rotate")),
            s.schedule(3, log.job("probe"), interval=3),
            s.schedule(4, log.job("noop")),
            s.cancel(4),
        ]
        for t in (1, 2, 6, 9):
            h.clock.set(t)
            h.tick(s)
        out += [s.next_run_in(), s.cancel(3)]
        h.clock.set(20)
        h.tick(s)
        out += [s.cancel(3), s.next_run_in()]
        assert out == [1, 2, 3, 4, True, 3.0, True, False, None]
        assert log == ["rotate", "probe", "backup", "probe"]
        s._check()

    def test_the_tick_hands_runs_to_the_executor(self, h: Harness, s: Any, log: Log) -> None:
        s.schedule(1, log.job("a"))
        h.clock.set(1)
        h.tick(s)
        assert log == [] and len(h.pool.queue) == 1
        assert s.running() == {1: 1} and 1 not in s and len(s) == 0
        s._check()
        h.run_all()
        assert log == ["a"] and s.running() == {}
        s._check()

    def test_one_shot_cancel_after_hand_off_is_false_and_it_runs(
        self, h: Harness, s: Any, log: Log
    ) -> None:
        s.schedule(1, log.job("a"))
        h.clock.set(1)
        h.tick(s)
        assert s.cancel(1) is False
        h.run_all()
        assert log == ["a"]

    def test_recurring_cancel_after_hand_off_drops_the_run(
        self, h: Harness, s: Any, log: Log
    ) -> None:
        s.schedule(1, log.job("r"), interval=1)
        h.clock.set(1)
        h.tick(s)
        assert s.cancel(1) is True
        h.run_all()
        assert log == [] and s.running() == {}
        h.clock.set(5)
        h.tick(s)
        assert h.pool.queue == []
        s._check()

    def test_tasks_shows_the_users_job(self, s: Any, log: Log) -> None:
        job = log.job("x")
        s.schedule(2, job, interval=4, fixed_delay=True)
        [info] = s.tasks()
        assert (info.task_id, info.due, info.fn, info.interval, info.fixed_delay) == (
            1,
            2.0,
            job,
            4.0,
            True,
        )

    def test_decorators_add_the_function_on_every_and_cron(self, h: Harness, log: Log) -> None:
        s = h.make(inline=True)
        job = log.job("probe")
        assert s.every("10s", overlap="allow", name="probe")(job) is job  # unchanged
        s.cron("0 7 * * 1-5", tz="Europe/Berlin")(log.job("report"))
        probe, report = s.tasks()
        assert (probe.name, probe.schedule, probe.due) == ("probe", Every(10), 10.0)
        assert report.schedule == Cron("0 7 * * 1-5", "Europe/Berlin")
        h.clock.set(10)
        h.tick(s)
        assert log == ["probe"]

    # -- overlap ---------------------------------------------------------------------------

    def test_overlap_skip_is_the_default_and_counts(
        self, h: Harness, s: Any, log: Log, caplog: pytest.LogCaptureFixture
    ) -> None:
        events = events_of(s)
        s.schedule(1, log.job("r"), interval=1)
        h.clock.set(1)
        h.tick(s)
        with caplog.at_level(logging.DEBUG, logger="tickwork"):
            for t in (2, 3):
                h.clock.set(t)
                h.tick(s)
        assert len(h.pool.queue) == 1
        assert s.skipped_runs(1) == 2 and s.skipped_runs() == 2 and s.skipped_runs(99) == 0
        assert [e for e in events if e.kind is EventKind.SKIPPED] == [
            RunEvent(EventKind.SKIPPED, 1, 2.0),
            RunEvent(EventKind.SKIPPED, 1, 3.0),
        ]
        assert "task 1: run due at 2.0 skipped, 1 still running" in ours(caplog)
        h.run_all()
        h.clock.set(4)
        h.tick(s)
        h.run_all()
        assert log == ["r", "r"]
        s._check()

    def test_overlap_queue_runs_once_right_after_and_never_piles_up(
        self, h: Harness, s: Any
    ) -> None:
        events = events_of(s)
        s.schedule(1, lambda: None, interval=1, overlap="queue")
        for t in (1, 2, 3, 4):
            h.clock.set(t)
            h.tick(s)
        assert len(h.pool.queue) == 1 and s.skipped_runs(1) == 2  # due 2 waits; 3, 4 skipped
        h.run_next()  # the run due at 1 ends: the queued one (due 2) goes at once
        assert len(h.pool.queue) == 1 and s.running() == {1: 1}
        h.run_next()
        assert h.pool.queue == [] and s.running() == {}
        started = [e.scheduled for e in events if e.kind is EventKind.STARTED]
        assert started == [1.0, 2.0]
        s._check()

    def test_overlap_allow_with_and_without_a_cap(self, h: Harness, s: Any) -> None:
        s.schedule(1, lambda: None, interval=1, overlap="allow")
        s.schedule(1, lambda: None, interval=1, overlap="allow", max_running=2)
        for t in (1, 2, 3):
            h.clock.set(t)
            h.tick(s)
        assert s.running() == {1: 3, 2: 2}
        assert s.skipped_runs(1) == 0 and s.skipped_runs(2) == 1
        s._check()
        h.run_all()
        assert s.running() == {}
        s._check()

    def test_overlap_options_are_validated(self, s: Any) -> None:
        def f() -> None:
            pass

        with pytest.raises(
            ValueError, match=r"^overlap must be one of 'skip', 'queue', 'allow', got 'sometimes'$"
        ):
            s.schedule(1, f, interval=1, overlap="sometimes")
        with pytest.raises(ValueError, match=r"^max_running must be >= 1, got 0$"):
            s.schedule(1, f, interval=1, overlap="allow", max_running=0)
        with pytest.raises(TypeError, match=r"^max_running must be an int or None, got True$"):
            s.schedule(1, f, interval=1, overlap="allow", max_running=True)
        with pytest.raises(
            ValueError, match=r"^max_running needs overlap='allow', got overlap='skip'$"
        ):
            s.schedule(1, f, interval=1, max_running=2)
        with pytest.raises(ValueError, match=r"^delay must be a finite number >= 0, got -1$"):
            s.schedule(-1, f)
        with pytest.raises(TypeError, match=r"^fn must be callable, got 3$"):
            s.schedule(1, 3)
        assert s.schedule(1, f) == 1  # no id was used up

    # -- fixed-delay on the pool -------------------------------------------------------------

    def test_fixed_delay_counts_from_the_end_of_the_pool_run(self, h: Harness, s: Any) -> None:
        clock = h.clock
        starts: list[float] = []

        def slow() -> None:
            starts.append(clock.now)
            clock.advance(3)  # the job takes 3 s

        s.schedule(1, slow, interval=5, fixed_delay=True)
        clock.set(1)
        h.tick(s)
        assert s.next_run_in() is None  # off the heap while the run is in the pool
        assert 1 in s and len(s) == 1
        s._check()
        clock.set(2)
        h.run_all()  # runs 2..5
        assert s.next_run_in() == 5.0  # due at 10 = end (5) + 5
        clock.set(10)
        h.tick(s)
        h.run_all()
        assert starts == [2.0, 10.0]
        s._check()

    def test_fixed_delay_cancelled_while_running_is_not_put_back(
        self, h: Harness, s: Any, log: Log
    ) -> None:
        s.schedule(1, log.job("d"), interval=5, fixed_delay=True)
        h.clock.set(1)
        h.tick(s)
        assert s.cancel(1) is True and 1 not in s
        s._check()
        h.run_all()  # dropped: cancelled before it started
        assert log == [] and s.next_run_in() is None
        s._check()

    # -- failures and events -------------------------------------------------------------------

    def test_failures_land_in_errors_the_log_and_the_hook(
        self, h: Harness, caplog: pytest.LogCaptureFixture
    ) -> None:
        clock = h.clock
        seen: list[tuple[int, str]] = []

        def hook(task_id: int, exc: Exception) -> None:
            seen.append((task_id, str(exc)))
            s.schedule(100, lambda: None)  # the hook may use the scheduler

        s = h.make(on_error=hook, max_errors=2)
        events = events_of(s)

        def boom() -> None:
            clock.advance(0.5)
            raise OSError("disk full")

        for _ in range(3):
            s.schedule(1, boom)
        clock.set(1)
        h.tick(s)
        with caplog.at_level(logging.ERROR, logger="tickwork"):
            h.run_all()
        assert s.errors == ["task 2: disk full", "task 3: disk full"]
        assert seen == [(1, "disk full"), (2, "disk full"), (3, "disk full")]
        assert ours(caplog) == [f"task {i} failed: disk full" for i in (1, 2, 3)]
        failed = [e for e in events if e.kind is EventKind.FAILED]
        assert [(e.task_id, e.scheduled, e.started, e.duration) for e in failed] == [
            (1, 1.0, 1.0, 0.5),
            (2, 1.0, 1.5, 0.5),
            (3, 1.0, 2.0, 0.5),
        ]
        assert all(isinstance(e.error, OSError) for e in failed)
        assert len(s) == 3  # the hook's three tasks
        s._check()

    def test_events_carry_scheduled_started_duration(self, h: Harness, s: Any) -> None:
        events = events_of(s)
        s.schedule(2, lambda: h.clock.advance(0.25), interval=2)
        h.clock.set(2.5)
        h.tick(s)
        h.clock.set(3)
        h.run_all()
        assert events == [
            RunEvent(EventKind.STARTED, 1, 2.0, 3.0),
            RunEvent(EventKind.FINISHED, 1, 2.0, 3.0, 0.25),
        ]
        h.clock.set(7.5)  # due 4 and 6 missed: slots are skipped, MISSED reported
        h.tick(s)
        assert events[2:] == [RunEvent(EventKind.MISSED, 1, 6.0, missed=1)]

    def test_a_listener_that_raises_never_breaks_the_driver(
        self, h: Harness, s: Any, log: Log, caplog: pytest.LogCaptureFixture
    ) -> None:
        def bad(event: RunEvent) -> None:
            raise RuntimeError("listener bug")

        s.add_listener(bad)
        events = events_of(s)
        s.schedule(1, log.job("a"))
        h.clock.set(1)
        h.tick(s)
        with caplog.at_level(logging.ERROR, logger="tickwork"):
            h.run_all()
        assert log == ["a"]
        assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FINISHED]
        assert sum("event listener" in m for m in ours(caplog)) == 2
        s.remove_listener(bad)
        s.remove_listener(bad)  # unknown: ignored
        with pytest.raises(TypeError, match=r"^listener must be callable, got 1$"):
            s.add_listener(1)

    def test_no_listeners_means_no_core_observation(self, s: Any) -> None:
        listener = events_of(s)
        assert s._core._listeners
        s.remove_listener(listener.append)
        assert not s._core._listeners  # the core's fast path is back

    # -- the timing loop, with its waiting injected ----------------------------------------

    def test_loop_waits_exactly_until_the_next_due_time(self, h: Harness, log: Log) -> None:
        s = h.make(inline=True)
        waits: list[float | None] = []

        def fake_wait(timeout: float | None) -> None:
            waits.append(timeout)
            if timeout is None:
                s._stopping = True  # nothing left: end the loop
            else:
                h.clock.advance(timeout)

        s.schedule(2, log.job("a"))
        s.schedule(3, log.job("r"), interval=3)
        s.schedule(10, lambda: s.cancel(2))
        h.drive(s, fake_wait)
        assert waits == [2.0, 1.0, 3.0, 3.0, 1.0, None]
        assert log == ["a", "r", "r", "r"]

    def test_schedule_wakes_the_loop_only_when_due_before_its_wait(
        self, h: Harness, s: Any
    ) -> None:
        woken = h.watch_wakeups(s)
        s._policy.deadline = 100.0  # the loop sleeps until t=100
        s.schedule(200, lambda: None)
        assert woken == []
        s.schedule(50, lambda: None)
        assert woken == [1]

    def test_fixed_delay_put_back_earlier_than_the_wait_wakes_the_loop(
        self, h: Harness, s: Any
    ) -> None:
        s.schedule(0, lambda: None, interval=1, fixed_delay=True)
        h.tick(s)
        woken = h.watch_wakeups(s)
        s._policy.deadline = 100.0
        h.run_all()
        assert woken == [1]

    def test_loop_caps_its_wait_while_calendar_tasks_exist(self, h: Harness, log: Log) -> None:
        s = h.make(inline=True)
        waits: list[float | None] = []

        def fake_wait(timeout: float | None) -> None:
            waits.append(timeout)
            if len(waits) == 3:
                h.clock.jump_wall(60 * 86400)  # resumed after 60 days asleep: the run is late
            if len(waits) == 5:
                s._stopping = True
            h.clock.advance(timeout or 0)

        s.add(Cron("0 0 1 1 *"), log.job("new year"))  # months away
        h.drive(s, fake_wait)
        assert waits[:3] == [WALL_CHECK_INTERVAL] * 3
        assert log == ["new year"]  # noticed at the next capped wake-up, run once

    # -- lifecycle ---------------------------------------------------------------------------

    def test_stop_drops_runs_not_started_and_refuses_new_work(
        self, h: Harness, s: Any, log: Log
    ) -> None:
        name = type(s).__name__
        s.schedule(1, log.job("a"))
        s.schedule(1, log.job("r"), interval=1)
        h.clock.set(1)
        h.tick(s)
        h.stop(s, wait=False)
        h.run_all()  # both runs reach a worker after stop: dropped there
        assert h.stop(s) is True  # twice is harmless
        assert log == [] and s.running() == {}
        with pytest.raises(RuntimeError, match=rf"^schedule\(\) on a stopped {name}, got fn="):
            s.schedule(1, log.job("late"))
        with pytest.raises(
            RuntimeError, match=rf"^start\(\) on a stopped {name} \(it does not restart\)$"
        ):
            h.start(s)
        s._check()

    def test_executor_refusing_work_is_contained(
        self, h: Harness, s: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        s.schedule(1, lambda: None)
        s.schedule(1, lambda: None, interval=1)
        h.pool.shut = True  # someone else shut the executor down
        h.clock.set(1)
        with caplog.at_level(logging.WARNING, logger="tickwork"):
            h.tick(s)
        assert s.running() == {}
        refused = [m for m in ours(caplog) if m.startswith("executor refused")]
        assert sum(int(m.split()[2]) for m in refused) == 2
        assert all(m.endswith("(s): cannot schedule new futures after shutdown") for m in refused)
        s._check()

    def test_stop_validates_its_timeout(self, h: Harness, s: Any) -> None:
        with pytest.raises(
            ValueError, match=r"^timeout must be None or a finite number >= 0, got -1$"
        ):
            h.stop(s, timeout=-1)

    # -- schedule values and the wall clock ----------------------------------------------------

    def test_add_runs_schedule_values_on_the_pool(self, h: Harness, log: Log) -> None:
        t0 = datetime(2026, 3, 2, 8, 30, tzinfo=UTC).timestamp()
        h.clock = clock = FakeClock(wall_start=t0)
        s = h.make(inline=True)
        s.add(Once(1), log.job("once"))
        s.add(Every(2, fixed_delay=True), log.job("delay"))
        s.add(At(t0 + 3), log.job("at"))
        s.add(Cron("31 8 * * *"), log.job("cron"), overlap="queue")
        for t in (1, 2, 3, 60):
            clock.set(t)
            h.tick(s)
        assert log == ["once", "delay", "at", "delay", "cron"]
        s._check()

    def test_add_validates_and_refuses_after_stop(self, h: Harness, s: Any) -> None:
        with pytest.raises(
            TypeError, match=r"^schedule must be a Once, At, Every or Cron value, got 3$"
        ):
            s.add(3, print)
        with pytest.raises(
            ValueError, match=r"^overlap must be one of 'skip', 'queue', 'allow', got 'x'$"
        ):
            s.add(Every(1), print, overlap="x")
        assert len(s) == 0
        h.stop(s)
        name = type(s).__name__
        with pytest.raises(RuntimeError, match=rf"^add\(\) on a stopped {name}, got fn="):
            s.add(Every(1), print)

    # -- what a job may be and do (issue 11, points 6 and 8) -------------------------------

    def test_a_job_returning_an_awaitable_fails_its_run(
        self, h: Harness, caplog: pytest.LogCaptureFixture
    ) -> None:
        made: list[Coroutine[Any, Any, None]] = []
        hooked: list[tuple[int, Exception]] = []

        async def later() -> None:
            pass

        def wraps_async() -> Coroutine[Any, Any, None]:
            made.append(later())
            return made[-1]

        s = h.make(on_error=lambda task_id, exc: hooked.append((task_id, exc)))
        events = events_of(s)
        s.schedule(1, wraps_async, interval=1)
        h.clock.set(1)
        h.tick(s)
        with caplog.at_level(logging.ERROR, logger="tickwork"):
            h.run_all()
        assert len(s.errors) == 1
        assert s.errors[0].startswith(
            "task 1: fn must not return an awaitable: a plain job is called, never awaited"
            " (give coroutine functions to tickwork.AsyncScheduler); "
        )
        assert s.errors[0].endswith(f"returned {made[0]!r}")
        assert [(t, type(e)) for t, e in hooked] == [(1, TypeError)]
        assert [m.split(":")[0] for m in ours(caplog)] == ["task 1 failed"]
        assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FAILED]
        assert isinstance(events[1].error, TypeError)
        assert inspect.getcoroutinestate(made[0]) == "CORO_CLOSED"  # no "never awaited"
        assert s.running() == {} and len(s) == 1  # still scheduled
        s._check()

    @pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=repr)
    def test_a_base_exception_out_of_a_pooled_job_fails_its_run(
        self, h: Harness, exc: BaseException, caplog: pytest.LogCaptureFixture
    ) -> None:
        hooked: list[tuple[int, Exception]] = []
        calls: list[int] = []

        def bail() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise exc

        s = h.make(on_error=lambda task_id, e: hooked.append((task_id, e)))
        events = events_of(s)
        s.schedule(1, bail, interval=1)  # overlap="skip": a stuck count would skip slot 2
        h.clock.set(1)
        h.tick(s)
        with caplog.at_level(logging.ERROR, logger="tickwork"):
            h.run_all()  # the executor's item returns: nothing propagates into the pool
        assert s.errors == [f"task 1: job raised {exc!r}"]
        assert ours(caplog) == [f"task 1 failed: job raised {exc!r}"]
        assert [(t, str(e), e.__cause__) for t, e in hooked] == [(1, f"job raised {exc!r}", exc)]
        assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FAILED]
        assert events[1].error is hooked[0][1]
        assert s.running() == {}
        s._check()
        h.clock.set(2)  # the driver goes on: the next slot runs
        h.tick(s)
        h.run_all()
        assert calls == [1, 1] and s.running() == {}
        assert [e.kind for e in events[2:]] == [EventKind.STARTED, EventKind.FINISHED]
        assert h.stop(s) is True

    # -- at most once per tick for any interval (issue 11, point 7) -------------------------

    @pytest.mark.timeout(60)  # the bug this pins was an endless tick
    def test_an_interval_too_small_for_the_clock_is_refused_or_never_loops(
        self, h: Harness, log: Log
    ) -> None:
        h.clock.set(1e6)
        s = h.make()
        with pytest.raises(ValueError, match=r"^interval must be at least 1\.16"):
            s.schedule(0, log.job("x"), interval=1e-12)
        with pytest.raises(ValueError, match=r"^interval must be at least 1\.16"):
            s.add(Every(1e-12, fixed_delay=True), log.job("x"))
        assert len(s) == 0
        h.clock = clock = FakeClock()  # accepted at t=0 ...
        s = h.make()
        s.schedule(0, log.job("rate"), interval=1e-12)
        s.schedule(0, log.job("delay"), interval=1e-12, fixed_delay=True)
        clock.set(1e6)  # ... and at t=1e6, now + interval == now
        h.tick(s)
        h.run_all()  # the fixed-delay run ends: its next run is put back
        assert sorted(log) == ["delay", "rate"]
        assert all(t.due > 1e6 for t in s.tasks())  # strictly past now
        h.tick(s)
        assert h.run_all() == 0  # the same now: nothing is due again
        clock.advance(1)
        h.tick(s)
        h.run_all()
        assert sorted(log) == ["delay", "delay", "rate", "rate"]
        s._check()
