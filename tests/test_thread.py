"""The thread driver: the shared driver contract, thread-only deterministic tests, then a
few bounded real-time ones.

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
from collections import deque
from itertools import pairwise
from typing import Any

import pytest

from tickwork import EventKind, RunEvent, ThreadScheduler
from tickwork.testing import FakeClock

from .driver_contract import (
    DriverContract,
    FakeWait,
    Harness,
    InlineExecutor,
    ManualExecutor,
    count_steps,
)


class ThreadHarness(Harness):
    def make(self, *, inline: bool = False, **kw: Any) -> ThreadScheduler:
        executor = InlineExecutor() if inline else self.pool
        return ThreadScheduler(self.clock, executor=executor, **kw)

    def tick(self, s: Any) -> None:
        s.step()

    def stop(self, s: Any, **kw: Any) -> bool:
        result: bool = s.stop(**kw)
        return result

    def start(self, s: Any) -> None:
        s.start()

    def drive(self, s: Any, fake_wait: FakeWait) -> None:
        s._wait = fake_wait
        s._loop()

    def watch_wakeups(self, s: Any) -> list[int]:
        woken: list[int] = []
        s._cond.notify = lambda n=1: woken.append(n)
        return woken


class TestThreadContract(DriverContract):
    @pytest.fixture
    def harness(self) -> Harness:
        return ThreadHarness()


@pytest.fixture
def pool() -> ManualExecutor:
    return ManualExecutor()


# -- failures: the hook runs without the lock ------------------------------------------


def test_the_hook_runs_without_the_lock(clock: FakeClock, pool: ManualExecutor) -> None:
    seen: list[tuple[int, bool]] = []

    def hook(task_id: int, exc: Exception) -> None:
        # Another thread must be able to use the scheduler meanwhile: no lock held.
        t = threading.Thread(target=lambda: ts.schedule(100, lambda: None))
        t.start()
        t.join(5)
        seen.append((task_id, not t.is_alive()))

    ts = ThreadScheduler(clock, executor=pool, on_error=hook)
    ts.schedule(1, lambda: 1 / 0)
    clock.set(1)
    ts.step()
    logging.disable(logging.ERROR)
    try:
        pool.run_all()
    finally:
        logging.disable(logging.NOTSET)
    assert seen == [(1, True)] and len(ts) == 1


# -- hand-off: each due run reaches the pool exactly once ------------------------------


def test_take_never_hands_out_a_list_the_policy_still_fills(
    clock: FakeClock, pool: ManualExecutor
) -> None:
    # A worker takes after each run and reads what it took once it has unlocked. If
    # an empty take handed out the policy's own list, a tick on another thread would
    # append to it meanwhile: that run (or event) would be handed over twice.
    ts = ThreadScheduler(clock, executor=pool)
    ts.add_listener(lambda event: None)
    policy = ts._policy
    ts.schedule(0, lambda: None, interval=1)
    ts.step()  # its first run goes to the pool (not run: still going at t=1)
    ready, events = policy.take()  # as a worker ending some run: nothing to hand over
    ts.schedule(1, lambda: None)
    clock.set(1)
    ts.step()  # the tick: a one-shot run and a SKIPPED event, handed over here
    assert (ready, events) == ([], [])
    assert len(pool.queue) == 2
    ts._check()


@pytest.mark.parametrize("own_pool", [True, False], ids=["own-pool", "executor"])
def test_a_run_due_while_a_worker_reports_goes_to_the_pool_once(
    clock: FakeClock, pool: ManualExecutor, own_pool: bool
) -> None:
    # The soak's rare "a one-shot ran twice": a worker ends a run, takes the (empty)
    # ready list and unlocks; while it reports (here: in the FINISHED listener) the
    # timing thread ticks and hands a newly due one-shot to the pool; then the worker
    # submitted what it had taken, which now held that same run.
    if own_pool:
        ts = ThreadScheduler(clock, max_workers=1)
        ts._executor = pool  # drainers go to the manual pool; the size stays 1
    else:
        ts = ThreadScheduler(clock, executor=pool)
    runs: list[str] = []

    def listener(event: RunEvent) -> None:
        if event.kind is EventKind.FINISHED and event.task_id == first:
            clock.set(1)
            ts.step()  # the timing thread's tick lands while the worker reports

    ts.add_listener(listener)
    first = ts.schedule(0, lambda: runs.append("first"))
    second = ts.schedule(1, lambda: runs.append("second"))
    ts.step()
    pool.run_all()
    assert runs == ["first", "second"]
    assert second not in ts and ts.running() == {} and ts._backlog == deque()
    assert ts._drainers == 0 and ts._policy.in_progress == 0
    ts._check()


# -- lifecycle -----------------------------------------------------------------------


def test_constructor_validates(pool: ManualExecutor) -> None:
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
    assert 0.05 <= late < 5, late  # woken early: the loop was waiting on the 1 h task


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

        def seen() -> bool:  # what the policy shows, however slowly a loaded machine gets there
            with lock:
                enough = runs >= 2 and (peak >= 2 if overlap == "allow" else True)
            return enough and (overlap == "allow" or ts.skipped_runs() >= 1)

        give_up = time.monotonic() + 10
        while not seen() and time.monotonic() < give_up:
            time.sleep(0.02)
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
    steps = count_steps(ts)
    for i in range(1000):
        ts.schedule(3600 + i, lambda: None)
    ts.start()
    time.sleep(0.3)
    assert ts.stop(timeout=10)
    assert len(steps) <= 2  # the first tick, maybe one spurious wake-up: no polling


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

    logging.disable(logging.ERROR)
    try:
        with ThreadScheduler(max_workers=1) as ts:
            ts.schedule(0, bail)
            ts.schedule(0.01, ran.set)
            assert ran.wait(10)
            assert ts.running() == {} or ran.is_set()
    finally:
        logging.disable(logging.NOTSET)
    # On a worker thread it reaches no one: the run failed (see test_job_kinds.py).
    assert ts.errors == ["task 1: job raised SystemExit(3)"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("later", [False, True])
def test_real_slow_jobs_never_delay_a_quick_one(later: bool) -> None:
    # The own pool adds a worker only when every worker is inside a job: three jobs
    # that block must still leave the fourth worker to the quick job, whether all are
    # due together or the quick one comes due while the three are stuck.
    release = threading.Event()
    quick = threading.Event()
    stuck = threading.Barrier(4, timeout=20)

    def slow() -> None:
        stuck.wait()
        release.wait(30)

    with ThreadScheduler(max_workers=4) as ts:
        for _ in range(3):
            ts.schedule(0, slow)
        if later:
            stuck.wait()  # the three are inside their jobs
            ts.schedule(0, quick.set)
        else:
            ts.schedule(0, quick.set)
            stuck.wait()
        try:
            assert quick.wait(10)
        finally:
            release.set()
    assert ts.errors == []


def test_a_burst_of_quick_jobs_does_not_start_every_worker(clock: FakeClock) -> None:
    ts = ThreadScheduler(clock, executor=None, max_workers=8)
    started: list[object] = []
    ts._executor.submit = lambda fn, *a: started.append(fn)  # type: ignore[method-assign]
    for _ in range(100):
        ts.schedule(0, lambda: None)
    ts.step()
    assert len(started) == 1  # one drainer for now: nobody is inside a job yet
    ts._drain()  # it runs all 100 quick jobs
    # Entering its first job it asked for one helper (every drainer was then inside a
    # job, and it cannot know the job is quick); after that the helper, not yet
    # running, was never inside a job, so no further worker was asked for.
    assert len(started) == 2
    ts._check()


def test_own_pool_refusing_work_is_contained(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    ts = ThreadScheduler(clock, max_workers=2)
    ts.schedule(1, lambda: None)
    ts.schedule(1, lambda: None, interval=1)
    ts._executor.shutdown()  # shut behind the scheduler's back
    clock.set(1)
    with caplog.at_level(logging.WARNING, logger="tickwork"):
        ts.step()
    assert ts.running() == {} and ts._drainers == 0
    assert caplog.messages == [
        "executor refused 2 run(s): cannot schedule new futures after shutdown"
    ]
    ts._check()


def test_cancel_of_the_task_it_sleeps_for_wakes_the_loop(
    clock: FakeClock, pool: ManualExecutor
) -> None:
    ts = ThreadScheduler(clock, executor=pool)
    notified: list[int] = []
    ts._cond.notify = lambda n=1: notified.append(n)  # type: ignore[method-assign]
    head = ts.schedule(10, lambda: None)
    later = ts.schedule(500, lambda: None)
    ts._policy.deadline = 10.0  # the loop sleeps until the head is due
    assert ts.cancel(later)
    assert notified == []  # not the one it waits for: nothing changes for the loop
    assert ts.cancel(head)
    assert notified == [1]  # re-arm for the next task instead of waking for nothing
    assert not ts.cancel(head)
    assert notified == [1]
