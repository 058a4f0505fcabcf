"""The thread driver: deterministic tests first, then a few bounded real-time ones.

Deterministic tests never start the timing thread: they inject a `FakeClock` and an
executor under test control, and call `ThreadScheduler._step` (one tick of the loop)
where the thread would wake up. `ThreadScheduler._loop` itself is driven with its
waiting injected (`_wait` replaced by a fake that advances the fake clock).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from itertools import pairwise
from typing import Any

import pytest

from tickwork import EventKind, RunEvent, ThreadScheduler
from tickwork.testing import FakeClock

from .conftest import Log


class ManualExecutor(Executor):
    """Keeps submitted work until the test runs it (in the test's own thread)."""

    def __init__(self) -> None:
        self.queue: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.shut:
            raise RuntimeError("cannot schedule new futures after shutdown")
        self.queue.append((fn, args))
        return Future()

    def run_next(self) -> None:
        fn, args = self.queue.pop(0)
        fn(*args)

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
        fn(*args)
        return Future()


@pytest.fixture
def pool() -> ManualExecutor:
    return ManualExecutor()


@pytest.fixture
def ts(clock: FakeClock, pool: ManualExecutor) -> ThreadScheduler:
    return ThreadScheduler(clock, executor=pool)


def events_of(ts: ThreadScheduler) -> list[RunEvent]:
    events: list[RunEvent] = []
    ts.add_listener(events.append)
    return events


# -- the contract through the driver ---------------------------------------------------


def test_spec_example_1_through_the_driver(clock: FakeClock, log: Log) -> None:
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    out: list[object] = [
        ts.schedule(5, log.job("backup")),
        ts.schedule(2, log.job("rotate")),
        ts.schedule(3, log.job("probe"), interval=3),
        ts.schedule(4, log.job("noop")),
        ts.cancel(4),
    ]
    for t in (1, 2, 6, 9):
        clock.set(t)
        ts._step()
    out += [ts.next_run_in(), ts.cancel(3)]
    clock.set(20)
    ts._step()
    out += [ts.cancel(3), ts.next_run_in()]
    assert out == [1, 2, 3, 4, True, 3.0, True, False, None]
    assert log == ["rotate", "probe", "backup", "probe"]
    ts._check()


def test_the_tick_hands_runs_to_the_executor(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, log: Log
) -> None:
    ts.schedule(1, log.job("a"))
    clock.set(1)
    ts._step()
    assert log == [] and len(pool.queue) == 1
    assert ts.running() == {1: 1} and 1 not in ts and len(ts) == 0
    ts._check()
    pool.run_all()
    assert log == ["a"] and ts.running() == {}
    ts._check()


def test_one_shot_cancel_after_hand_off_is_false_and_it_runs(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, log: Log
) -> None:
    ts.schedule(1, log.job("a"))
    clock.set(1)
    ts._step()
    assert ts.cancel(1) is False
    pool.run_all()
    assert log == ["a"]


def test_recurring_cancel_after_hand_off_drops_the_run(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, log: Log
) -> None:
    ts.schedule(1, log.job("r"), interval=1)
    clock.set(1)
    ts._step()
    assert ts.cancel(1) is True
    pool.run_all()
    assert log == [] and ts.running() == {}
    clock.set(5)
    ts._step()
    assert pool.queue == []
    ts._check()


def test_tasks_shows_the_users_job(clock: FakeClock, ts: ThreadScheduler, log: Log) -> None:
    job = log.job("x")
    ts.schedule(2, job, interval=4, fixed_delay=True)
    [info] = ts.tasks()
    assert (info.task_id, info.due, info.fn, info.interval, info.fixed_delay) == (
        1,
        2.0,
        job,
        4.0,
        True,
    )


# -- overlap -------------------------------------------------------------------------


def test_overlap_skip_is_the_default_and_counts(
    clock: FakeClock,
    pool: ManualExecutor,
    ts: ThreadScheduler,
    log: Log,
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = events_of(ts)
    ts.schedule(1, log.job("r"), interval=1)
    clock.set(1)
    ts._step()
    with caplog.at_level(logging.DEBUG, logger="tickwork"):
        for t in (2, 3):
            clock.set(t)
            ts._step()
    assert len(pool.queue) == 1
    assert ts.skipped_runs(1) == 2 and ts.skipped_runs() == 2 and ts.skipped_runs(99) == 0
    assert [e for e in events if e.kind is EventKind.SKIPPED] == [
        RunEvent(EventKind.SKIPPED, 1, 2.0),
        RunEvent(EventKind.SKIPPED, 1, 3.0),
    ]
    assert "task 1: run due at 2.0 skipped, 1 still running" in caplog.messages
    pool.run_all()
    clock.set(4)
    ts._step()
    pool.run_all()
    assert log == ["r", "r"]
    ts._check()


def test_overlap_queue_runs_once_right_after_and_never_piles_up(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler
) -> None:
    events = events_of(ts)
    ts.schedule(1, lambda: None, interval=1, overlap="queue")
    for t in (1, 2, 3, 4):
        clock.set(t)
        ts._step()
    assert len(pool.queue) == 1 and ts.skipped_runs(1) == 2  # due 2 waits; 3 and 4 skipped
    pool.run_next()  # the run due at 1 ends: the queued one (due 2) goes at once
    assert len(pool.queue) == 1 and ts.running() == {1: 1}
    pool.run_next()
    assert pool.queue == [] and ts.running() == {}
    started = [e.scheduled for e in events if e.kind is EventKind.STARTED]
    assert started == [1.0, 2.0]
    ts._check()


def test_overlap_allow_with_and_without_a_cap(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler
) -> None:
    ts.schedule(1, lambda: None, interval=1, overlap="allow")
    ts.schedule(1, lambda: None, interval=1, overlap="allow", max_running=2)
    for t in (1, 2, 3):
        clock.set(t)
        ts._step()
    assert ts.running() == {1: 3, 2: 2}
    assert ts.skipped_runs(1) == 0 and ts.skipped_runs(2) == 1
    ts._check()
    pool.run_all()
    assert ts.running() == {}
    ts._check()


def test_overlap_options_are_validated(ts: ThreadScheduler) -> None:
    def f() -> None:
        pass

    with pytest.raises(
        ValueError, match=r"^overlap must be one of 'skip', 'queue', 'allow', got 'sometimes'$"
    ):
        ts.schedule(1, f, interval=1, overlap="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^max_running must be >= 1, got 0$"):
        ts.schedule(1, f, interval=1, overlap="allow", max_running=0)
    with pytest.raises(TypeError, match=r"^max_running must be an int or None, got True$"):
        ts.schedule(1, f, interval=1, overlap="allow", max_running=True)
    with pytest.raises(
        ValueError, match=r"^max_running needs overlap='allow', got overlap='skip'$"
    ):
        ts.schedule(1, f, interval=1, max_running=2)
    with pytest.raises(ValueError, match=r"^delay must be a finite number >= 0, got -1$"):
        ts.schedule(-1, f)
    with pytest.raises(TypeError, match=r"^fn must be callable, got 3$"):
        ts.schedule(1, 3)  # type: ignore[arg-type]
    assert ts.schedule(1, f) == 1  # no id was used up


# -- fixed-delay on the pool -----------------------------------------------------------


def test_fixed_delay_counts_from_the_end_of_the_pool_run(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler
) -> None:
    starts: list[float] = []

    def slow() -> None:
        starts.append(clock.now)
        clock.advance(3)  # the job takes 3 s

    ts.schedule(1, slow, interval=5, fixed_delay=True)
    clock.set(1)
    ts._step()
    assert ts.next_run_in() is None  # off the heap while the run is in the pool
    assert 1 in ts and len(ts) == 1
    ts._check()
    clock.set(2)
    pool.run_all()  # runs 2..5
    assert ts.next_run_in() == 5.0  # due at 10 = end (5) + 5
    clock.set(10)
    ts._step()
    pool.run_all()
    assert starts == [2.0, 10.0]
    ts._check()


def test_fixed_delay_cancelled_while_running_is_not_put_back(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, log: Log
) -> None:
    ts.schedule(1, log.job("d"), interval=5, fixed_delay=True)
    clock.set(1)
    ts._step()
    assert ts.cancel(1) is True and 1 not in ts
    ts._check()
    pool.run_all()  # dropped: cancelled before it started
    assert log == [] and ts.next_run_in() is None
    ts._check()


# -- failures and events ---------------------------------------------------------------


def test_failures_land_in_errors_log_and_hook_without_the_lock(
    clock: FakeClock, pool: ManualExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[int, str, bool]] = []

    def hook(task_id: int, exc: Exception) -> None:
        # Another thread must be able to use the scheduler meanwhile: no lock held.
        t = threading.Thread(target=lambda: ts.schedule(100, lambda: None))
        t.start()
        t.join(5)
        seen.append((task_id, str(exc), not t.is_alive()))

    ts = ThreadScheduler(clock, executor=pool, on_error=hook, max_errors=2)
    events = events_of(ts)

    def boom() -> None:
        clock.advance(0.5)
        raise OSError("disk full")

    for _ in range(3):
        ts.schedule(1, boom)
    clock.set(1)
    ts._step()
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        pool.run_all()
    assert ts.errors == ["task 2: disk full", "task 3: disk full"]
    assert seen == [(1, "disk full", True), (2, "disk full", True), (3, "disk full", True)]
    assert caplog.messages == [f"task {i} failed: disk full" for i in (1, 2, 3)]
    failed = [e for e in events if e.kind is EventKind.FAILED]
    assert [(e.task_id, e.scheduled, e.started, e.duration) for e in failed] == [
        (1, 1.0, 1.0, 0.5),
        (2, 1.0, 1.5, 0.5),
        (3, 1.0, 2.0, 0.5),
    ]
    assert all(isinstance(e.error, OSError) for e in failed)


def test_events_carry_scheduled_started_duration(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler
) -> None:
    events = events_of(ts)
    ts.schedule(2, lambda: clock.advance(0.25), interval=2)
    clock.set(2.5)
    ts._step()
    clock.set(3)
    pool.run_all()
    assert events == [
        RunEvent(EventKind.STARTED, 1, 2.0, 3.0),
        RunEvent(EventKind.FINISHED, 1, 2.0, 3.0, 0.25),
    ]
    clock.set(7.5)  # due 4 and 6 missed: slots are skipped, MISSED reported
    ts._step()
    assert events[2:] == [RunEvent(EventKind.MISSED, 1, 6.0, missed=1)]


def test_a_listener_that_raises_never_breaks_the_driver(
    clock: FakeClock,
    pool: ManualExecutor,
    ts: ThreadScheduler,
    log: Log,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def bad(event: RunEvent) -> None:
        raise RuntimeError("listener bug")

    ts.add_listener(bad)
    events = events_of(ts)
    ts.schedule(1, log.job("a"))
    clock.set(1)
    ts._step()
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        pool.run_all()
    assert log == ["a"] and [e.kind for e in events] == [EventKind.STARTED, EventKind.FINISHED]
    assert sum("event listener" in m for m in caplog.messages) == 2
    ts.remove_listener(bad)
    ts.remove_listener(bad)  # unknown: ignored
    with pytest.raises(TypeError, match=r"^listener must be callable, got 1$"):
        ts.add_listener(1)  # type: ignore[arg-type]


def test_no_listeners_means_no_core_observation(ts: ThreadScheduler) -> None:
    listener = events_of(ts)
    assert ts._core._listeners
    ts.remove_listener(listener.append)
    assert not ts._core._listeners  # the core's fast path is back


# -- the loop, with its waiting injected ---------------------------------------------


def test_loop_waits_exactly_until_the_next_due_time(clock: FakeClock, log: Log) -> None:
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    waits: list[float | None] = []

    def fake_wait(timeout: float | None) -> None:
        waits.append(timeout)
        if timeout is None:
            ts._stopping = True  # nothing left: end the loop
        else:
            clock.advance(timeout)

    ts._wait = fake_wait  # type: ignore[method-assign]
    ts.schedule(2, log.job("a"))
    ts.schedule(3, log.job("r"), interval=3)
    ts.schedule(10, lambda: ts.cancel(2))
    ts._loop()
    assert waits == [2.0, 1.0, 3.0, 3.0, 1.0, None]
    assert log == ["a", "r", "r", "r"]


def test_schedule_notifies_only_when_due_before_the_wait(
    clock: FakeClock, ts: ThreadScheduler
) -> None:
    notified: list[int] = []
    ts._cond.notify = lambda n=1: notified.append(n)  # type: ignore[method-assign]
    ts._policy.deadline = 100.0  # the loop sleeps until t=100
    ts.schedule(200, lambda: None)
    assert notified == []
    ts.schedule(50, lambda: None)
    assert notified == [1]


def test_fixed_delay_put_back_earlier_than_the_wait_notifies(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler
) -> None:
    ts.schedule(0, lambda: None, interval=1, fixed_delay=True)
    ts._step()
    notified: list[int] = []
    ts._cond.notify = lambda n=1: notified.append(n)  # type: ignore[method-assign]
    ts._policy.deadline = 100.0
    pool.run_all()
    assert notified == [1]


# -- lifecycle -----------------------------------------------------------------------


def test_stop_drops_runs_not_started_and_refuses_new_work(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, log: Log
) -> None:
    ts.schedule(1, log.job("a"))
    ts.schedule(1, log.job("r"), interval=1)
    clock.set(1)
    ts._step()
    assert ts.stop(wait=False) is True
    assert ts.stop() is True  # twice is harmless
    pool.run_all()
    assert log == [] and ts.running() == {}
    with pytest.raises(RuntimeError, match=r"^schedule\(\) on a stopped ThreadScheduler"):
        ts.schedule(1, log.job("late"))
    with pytest.raises(
        RuntimeError, match=r"^start\(\) on a stopped ThreadScheduler \(it does not restart\)$"
    ):
        ts.start()


def test_executor_refusing_work_is_contained(
    clock: FakeClock, pool: ManualExecutor, ts: ThreadScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    ts.schedule(1, lambda: None)
    ts.schedule(1, lambda: None, interval=1)
    pool.shut = True  # someone else shut the executor down
    clock.set(1)
    with caplog.at_level(logging.WARNING, logger="tickwork"):
        ts._step()
    assert ts.running() == {}
    assert caplog.messages == [
        "executor refused 2 run(s): cannot schedule new futures after shutdown"
    ]
    ts._check()


def test_constructor_and_stop_validate(pool: ManualExecutor) -> None:
    with pytest.raises(
        TypeError, match=r"^executor must be a concurrent.futures.Executor or None, got 3$"
    ):
        ThreadScheduler(executor=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^max_workers must be >= 1, got 0$"):
        ThreadScheduler(max_workers=0)
    with pytest.raises(TypeError, match=r"^max_workers must be an int or None, got 2.0$"):
        ThreadScheduler(max_workers=2.0)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^max_workers sizes the default pool; with an executor, got 2$"
    ):
        ThreadScheduler(executor=pool, max_workers=2)
    with pytest.raises(TypeError, match=r"^clock must be a zero-argument callable, got 1$"):
        ThreadScheduler(1)  # type: ignore[arg-type]
    ts = ThreadScheduler(executor=pool)
    with pytest.raises(ValueError, match=r"^timeout must be None or a finite number >= 0, got -1$"):
        ts.stop(timeout=-1)


# -- real time: bounded, generous, few ---------------------------------------------------


@pytest.mark.timeout(30)
def test_real_start_twice_refused_and_context_manager_stops() -> None:
    with ThreadScheduler(max_workers=2) as ts:
        with pytest.raises(
            RuntimeError, match=r"^start\(\) on a ThreadScheduler that is already running$"
        ):
            ts.start()
        thread = ts._thread
        assert thread is not None and thread.daemon and thread.is_alive()
    thread.join(10)
    assert not thread.is_alive()


@pytest.mark.timeout(30)
def test_real_early_wake_up() -> None:
    fired = threading.Event()
    with ThreadScheduler(max_workers=2) as ts:
        ts.schedule(3600, lambda: None)
        time.sleep(0.05)  # the loop is now waiting on the 1 h task
        t0 = time.monotonic()
        ts.schedule(0.05, fired.set)
        assert fired.wait(10)
        late = time.monotonic() - t0
    assert 0.05 <= late < 0.05 + 0.5, late


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("overlap", "most"), [("skip", 1), ("queue", 1), ("allow", 3)])
def test_real_overlap_with_a_sleeping_job(overlap: str, most: int) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()
    runs = 0

    def slow() -> None:
        nonlocal active, peak, runs
        with lock:
            active += 1
            runs += 1
            peak = max(peak, active)
        time.sleep(0.12)
        with lock:
            active -= 1

    cap = 3 if overlap == "allow" else None
    with ThreadScheduler(max_workers=6) as ts:
        ts.schedule(0, slow, interval=0.03, overlap=overlap, max_running=cap)  # type: ignore[arg-type]
        time.sleep(0.5)
        assert ts.stop(timeout=10)
    assert peak <= most and runs >= 2
    if overlap == "allow":
        assert peak >= 2
    else:
        assert ts.skipped_runs() >= 1


@pytest.mark.timeout(30)
def test_real_fixed_delay_spacing() -> None:
    spans: list[tuple[float, float]] = []

    def job() -> None:
        start = time.monotonic()
        time.sleep(0.03)
        spans.append((start, time.monotonic()))

    with ThreadScheduler(max_workers=4) as ts:
        ts.schedule(0, job, interval=0.05, fixed_delay=True)
        time.sleep(0.45)
    assert len(spans) >= 2
    for (_, end), (start, _) in pairwise(spans):
        assert start - end >= 0.05


@pytest.mark.timeout(30)
def test_real_stop_with_a_stuck_job_honours_the_timeout() -> None:
    release = threading.Event()
    started = threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(20)

    ts = ThreadScheduler(max_workers=2)
    ts.start()
    ts.schedule(0, stuck)
    assert started.wait(10)
    t0 = time.monotonic()
    assert ts.stop(timeout=0.2) is False
    assert time.monotonic() - t0 < 5
    assert ts.running() == {1: 1}
    release.set()
    assert ts.stop(timeout=10) is True


@pytest.mark.timeout(30)
def test_real_stop_from_inside_a_job_does_not_deadlock() -> None:
    result: list[bool] = []
    done = threading.Event()
    ts = ThreadScheduler(max_workers=2)

    def stopper() -> None:
        result.append(ts.stop(timeout=10))
        done.set()

    ts.start()
    ts.schedule(0, stopper)
    assert done.wait(10)
    assert result == [True]


@pytest.mark.timeout(30)
def test_real_idle_loop_does_not_poll() -> None:
    ts = ThreadScheduler(max_workers=2)
    steps = 0
    real_step = ts._step

    def counting_step() -> None:
        nonlocal steps
        steps += 1
        real_step()

    ts._step = counting_step  # type: ignore[method-assign]
    for i in range(1000):
        ts.schedule(3600 + i, lambda: None)
    ts.start()
    time.sleep(0.3)
    assert ts.stop(timeout=10)
    assert steps <= 2  # the first tick, maybe one spurious wake-up: no polling


@pytest.mark.timeout(60)
def test_real_process_that_forgets_to_stop_still_exits() -> None:
    code = (
        "import time\n"
        "from tickwork import ThreadScheduler\n"
        "s = ThreadScheduler()\n"
        "s.start()\n"
        "s.schedule(3600, print)\n"
        "s.schedule(0, lambda: None, interval=0.01)\n"
        "time.sleep(0.1)\n"
        "print('bye')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=True
    )
    assert out.stdout == "bye\n"


@pytest.mark.timeout(30)
def test_real_base_exception_in_a_job_does_not_stall_the_pool() -> None:
    ran = threading.Event()

    def bail() -> None:
        raise SystemExit(3)

    with ThreadScheduler(max_workers=1) as ts:
        ts.schedule(0, bail)
        ts.schedule(0.01, ran.set)
        assert ran.wait(10)
        assert ts.running() == {} or ran.is_set()
    assert ts.errors == []  # not an Exception: not recorded, as in the core


def test_own_pool_refusing_work_is_contained(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    ts = ThreadScheduler(clock, max_workers=2)
    ts.schedule(1, lambda: None)
    ts.schedule(1, lambda: None, interval=1)
    ts._executor.shutdown()  # shut behind the scheduler's back
    clock.set(1)
    with caplog.at_level(logging.WARNING, logger="tickwork"):
        ts._step()
    assert ts.running() == {} and ts._drainers == 0
    assert caplog.messages == [
        "executor refused 2 run(s): cannot schedule new futures after shutdown"
    ]
    ts._check()


# -- schedule values and the wall clock ---------------------------------------------------


def test_add_runs_schedule_values_on_the_pool(log: Log) -> None:
    from datetime import UTC, datetime

    from tickwork import At, Cron, Every, Once

    t0 = datetime(2026, 3, 2, 8, 30, tzinfo=UTC).timestamp()
    clock = FakeClock(wall_start=t0)
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    ts.add(Once(1), log.job("once"))
    ts.add(Every(2, fixed_delay=True), log.job("delay"))
    ts.add(At(t0 + 3), log.job("at"))
    ts.add(Cron("31 8 * * *"), log.job("cron"), overlap="queue")
    for t in (1, 2, 3, 60):
        clock.set(t)
        ts._step()
    assert log == ["once", "delay", "at", "delay", "cron"]
    ts._check()


def test_loop_caps_its_wait_while_calendar_tasks_exist(log: Log) -> None:
    from tickwork import Cron
    from tickwork._scheduler import WALL_CHECK_INTERVAL

    clock = FakeClock()
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    waits: list[float | None] = []

    def fake_wait(timeout: float | None) -> None:
        waits.append(timeout)
        if len(waits) == 3:
            clock.jump_wall(60 * 86400)  # resumed after 60 days asleep: the run is late
        if len(waits) == 5:
            ts._stopping = True
        clock.advance(timeout or 0)

    ts._wait = fake_wait  # type: ignore[method-assign]
    ts.add(Cron("0 0 1 1 *"), log.job("new year"))  # months away
    ts._loop()
    assert waits[:3] == [WALL_CHECK_INTERVAL] * 3
    assert log == ["new year"]  # noticed at the next capped wake-up, run once


def test_add_validates_and_refuses_after_stop(clock: FakeClock, ts: ThreadScheduler) -> None:
    from tickwork import Every

    with pytest.raises(
        TypeError, match=r"^schedule must be a Once, At, Every or Cron value, got 3$"
    ):
        ts.add(3, print)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^overlap must be one of 'skip', 'queue', 'allow', got 'x'$"
    ):
        ts.add(Every(1), print, overlap="x")  # type: ignore[arg-type]
    assert len(ts) == 0
    ts.stop()
    with pytest.raises(RuntimeError, match=r"^add\(\) on a stopped ThreadScheduler, got fn="):
        ts.add(Every(1), print)
