"""Pause, resume and trigger a task on `ThreadScheduler` and `AsyncScheduler`.

Most tests run on both drivers, never started: built on a `FakeClock` with the public
`tickwork.testing.InlineExecutor`, moved with the clock and ``step()``, so a due run has
run (and, on the asyncio driver, been booked after a few loop turns) when the step
returns. A run "going on" is a job that calls the scheduler from inside its own run.
The few tests with real threads wait on conditions with generous bounds and never
measure time.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tickwork import (
    AsyncScheduler,
    Cron,
    EventKind,
    Every,
    Once,
    RunEvent,
    ThreadScheduler,
)
from tickwork.testing import FakeClock, InlineExecutor

from .driver_contract import ManualExecutor

#: Only reached when something is broken; a loaded machine is merely slow.
PATIENCE = 60.0
#: A wall-clock start on a minute boundary (for cron).
WALL0 = 1_800_000_000.0


async def _settle() -> None:
    """Let the tasks and callbacks made so far run (a few loop turns, no real time)."""
    for _ in range(10):
        await asyncio.sleep(0)


class Driver:
    """One driver on a fake clock and an inline executor, stepped by the test."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.clock = FakeClock(wall_start=WALL0)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.s: Any
        if kind == "thread":
            self.s = ThreadScheduler(self.clock, executor=InlineExecutor())
        else:
            self.loop = asyncio.new_event_loop()

            async def build() -> AsyncScheduler:
                return AsyncScheduler(self.clock, executor=InlineExecutor())

            self.s = self.loop.run_until_complete(build())

    def settle(self) -> None:
        """Let the asyncio driver book what its executor ran (nothing for threads)."""
        if self.loop is not None:
            self.loop.run_until_complete(_settle())

    def step(self) -> None:
        """One tick on the clock as it is; the due jobs have run when it returns."""
        if self.loop is None:
            self.s.step()
            return

        async def step() -> None:
            self.s.step()
            await _settle()

        self.loop.run_until_complete(step())

    def at(self, t: float) -> None:
        """Move the clock to ``t`` and step."""
        self.clock.set(t)
        self.step()

    def trigger(self, task_id: int) -> bool:
        done: bool = self.s.trigger(task_id)
        self.settle()
        return done

    def close(self) -> None:
        self.s._check()
        if self.loop is not None:
            self.loop.close()


@pytest.fixture(params=["thread", "asyncio"])
def drv(request: pytest.FixtureRequest) -> Iterator[Driver]:
    driver = Driver(request.param)
    yield driver
    driver.close()


class Runs(list[float]):
    """A job that records the clock time of each of its runs."""

    def __init__(self, clock: FakeClock, during: Callable[[], object] | None = None) -> None:
        super().__init__()
        self.clock = clock
        self.during = during  # called inside the first run (the run is going on)

    def __call__(self) -> None:
        self.append(self.clock())
        if self.during is not None and len(self) == 1:
            self.during()


def events_of(s: Any) -> list[RunEvent]:
    events: list[RunEvent] = []
    s.add_listener(events.append)
    return events


# -- pause and resume ---------------------------------------------------------------------


def test_pause_stops_runs_and_resume_takes_the_next_slot_of_the_grid(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    drv.at(10)
    drv.at(12)
    assert s.pause(t, note="backend maintenance") is True
    assert s.next_run_in() is None  # nothing is due while it is paused
    for when in (20, 30, 40, 45):
        drv.at(when)
    assert runs == [10.0]
    assert s.resume(t) is True
    assert s.next_run_in() == 5.0  # 50, on its grid: 20, 30 and 40 are missed
    drv.at(50)
    drv.at(60)
    assert runs == [10.0, 50.0, 60.0]


def test_a_slot_at_the_resume_itself_counts_as_passed(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    s.pause(t)
    drv.at(40)
    assert s.resume(t) is True
    assert s.next_run_in() == 10.0  # strictly after now, as the core's rule 4
    drv.at(50)
    assert runs == [50.0]


def test_a_pause_shorter_than_the_wait_keeps_the_due_time(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    drv.at(2)
    s.pause(t)
    drv.at(5)
    s.resume(t)
    assert s.next_run_in() == 5.0
    drv.at(10)
    assert runs == [10.0]


def test_fixed_delay_resumes_an_interval_after_the_resume(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10, fixed_delay=True)
    drv.at(10)
    s.pause(t)
    drv.at(37)
    assert runs == [10.0]
    s.resume(t)
    assert s.next_run_in() == 10.0
    drv.at(47)
    assert runs == [10.0, 47.0]


def test_a_one_shot_whose_time_passed_while_paused_runs_at_once(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(5, runs)
    s.pause(t)
    drv.at(30)
    assert runs == [] and t in s
    s.resume(t)
    assert s.next_run_in() == 0.0
    drv.step()
    assert runs == [30.0] and t not in s


def test_cron_resumes_at_its_next_fire_time_after_now(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.add(Cron("* * * * *"), runs)  # the wall clock starts on a minute boundary
    s.pause(t)
    drv.at(150)
    s.resume(t)
    assert s.next_run_in() == 30.0  # the minute at 180 s; 60 and 120 are missed
    drv.at(180)
    assert runs == [180.0]


def test_a_schedule_that_ends_while_paused_ends_at_the_resume(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.add(Every(10, until=WALL0 + 35), runs)
    s.pause(t)
    drv.at(50)
    assert s.resume(t) is True
    assert t not in s and s.tasks() == [] and s.next_run_in() is None
    drv.at(100)
    assert runs == []


def test_a_run_going_on_when_paused_finishes(drv: Driver) -> None:
    s = drv.s
    events = events_of(s)
    t = 0
    after: list[bool] = []
    runs = Runs(drv.clock, during=lambda: after.append(s.pause(t)))
    t = s.schedule(10, runs, interval=10)
    drv.at(10)
    assert after == [True] and runs == [10.0]  # the job went on after pausing itself
    assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FINISHED]
    assert s.running() == {}
    drv.at(40)
    assert runs == [10.0]


def test_a_fixed_delay_task_paused_during_its_run_stays_off_until_resumed(drv: Driver) -> None:
    s = drv.s
    t = 0
    runs = Runs(drv.clock, during=lambda: s.pause(t))
    t = s.schedule(10, runs, interval=10, fixed_delay=True)
    drv.at(10)
    drv.at(50)
    assert runs == [10.0] and s.tasks()[0].paused
    s.resume(t)
    assert s.next_run_in() == 10.0
    drv.at(60)
    assert runs == [10.0, 60.0]


def test_a_fixed_delay_task_resumed_during_its_run_counts_from_its_end(drv: Driver) -> None:
    s, clock = drv.s, drv.clock
    t = 0

    def during() -> None:
        s.pause(t)
        clock.advance(3)  # the run takes 3 s
        s.resume(t)  # still running: the end of this run sets the next due time

    runs = Runs(clock, during=during)
    t = s.schedule(10, runs, interval=10, fixed_delay=True)
    drv.at(10)
    assert s.next_run_in() == 10.0  # 23: ten seconds after the run ended at 13
    drv.at(23)
    assert runs == [10.0, 23.0]


def test_paused_is_shown_by_tasks_with_its_note(drv: Driver) -> None:
    s = drv.s
    a = s.schedule(10, print, interval=10, name="a")
    b = s.schedule(20, print, name="b")
    assert s.pause(a, note="disk full") is True
    shown = {info.name: info for info in s.tasks()}
    assert shown["a"].paused is True and shown["a"].note == "disk full"
    assert shown["a"].due == 10.0  # the due time it had when paused
    assert shown["b"].paused is False and shown["b"].note is None
    assert len(s) == 2 and a in s and b in s
    assert s.pause(a, note="other") is False  # paused already: the first note stays
    assert s.tasks()[0].note == "disk full"
    s.resume(a)
    assert [(i.name, i.paused, i.note) for i in s.tasks()] == [
        ("a", False, None),
        ("b", False, None),
    ]


def test_cancel_of_a_paused_task(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    s.pause(t)
    assert s.cancel(t) is True
    assert t not in s and s.tasks() == [] and len(s) == 0
    assert s.resume(t) is False and s.trigger(t) is False and s.cancel(t) is False
    drv.at(100)
    assert runs == []


# -- trigger --------------------------------------------------------------------------------


def test_trigger_runs_once_now_and_does_not_move_the_grid(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    events = events_of(s)
    t = s.schedule(10, runs, interval=10)
    drv.at(3)
    assert drv.trigger(t) is True
    assert runs == [3.0]
    assert s.next_run_in() == 7.0 and s.tasks()[0].due == 10.0
    drv.at(10)
    drv.at(20)
    assert runs == [3.0, 10.0, 20.0]
    # A triggered run's events are those of any run, ``scheduled`` at the trigger.
    assert [(e.kind, e.scheduled) for e in events[:2]] == [
        (EventKind.STARTED, 3.0),
        (EventKind.FINISHED, 3.0),
    ]


def test_trigger_runs_a_paused_task_which_stays_paused(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    s.pause(t)
    drv.at(15)
    assert drv.trigger(t) is True
    assert runs == [15.0] and s.tasks()[0].paused
    drv.at(40)
    assert runs == [15.0]


def test_trigger_of_a_one_shot_runs_it_now_instead_of_later(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs)
    drv.at(4)
    assert drv.trigger(t) is True
    assert runs == [4.0] and t not in s
    assert s.cancel(t) is False and s.trigger(t) is False
    drv.at(20)
    assert runs == [4.0]


def test_trigger_of_a_fixed_delay_task_counts_as_one_of_its_runs(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10, fixed_delay=True)
    drv.at(4)
    assert drv.trigger(t) is True
    assert s.next_run_in() == 10.0  # ten seconds after the triggered run ended
    drv.at(10)
    drv.at(14)
    assert runs == [4.0, 14.0]


def test_trigger_while_running_with_skip_is_skipped_and_counted(drv: Driver) -> None:
    s = drv.s
    events = events_of(s)
    t = 0
    answer: list[bool] = []
    runs = Runs(drv.clock, during=lambda: answer.append(s.trigger(t)))
    t = s.schedule(10, runs, interval=10)  # overlap="skip", the default
    drv.at(10)
    assert answer == [False] and runs == [10.0]
    assert s.skipped_runs(t) == 1 and s.skipped_runs() == 1
    skipped = [e for e in events if e.kind is EventKind.SKIPPED]
    assert [(e.task_id, e.scheduled) for e in skipped] == [(t, 10.0)]


def test_trigger_while_a_fixed_delay_run_is_going_on_is_skipped(drv: Driver) -> None:
    s = drv.s
    t = 0
    answer: list[bool] = []
    runs = Runs(drv.clock, during=lambda: answer.append(s.trigger(t)))
    t = s.schedule(10, runs, interval=10, fixed_delay=True, overlap="allow")
    drv.at(10)
    assert answer == [False] and runs == [10.0] and s.skipped_runs(t) == 1


def test_trigger_while_running_with_allow_runs_alongside(drv: Driver) -> None:
    s = drv.s
    t = 0
    answer: list[bool] = []
    runs = Runs(drv.clock, during=lambda: answer.append(s.trigger(t)))
    t = s.schedule(10, runs, interval=10, overlap="allow")
    drv.at(10)
    drv.settle()
    assert answer == [True] and runs == [10.0, 10.0]  # the second inside the first
    assert s.skipped_runs(t) == 0 and s.running() == {}


def test_trigger_with_allow_over_max_running_is_skipped(drv: Driver) -> None:
    s = drv.s
    t = 0
    answer: list[bool] = []
    runs = Runs(drv.clock, during=lambda: answer.append(s.trigger(t)))
    t = s.schedule(10, runs, interval=10, overlap="allow", max_running=1)
    drv.at(10)
    assert answer == [False] and runs == [10.0] and s.skipped_runs(t) == 1


def test_trigger_while_running_with_queue_runs_after_the_current_run(drv: Driver) -> None:
    s, clock = drv.s, drv.clock
    t = 0
    answers: list[bool] = []

    def during() -> None:
        answers.append(s.trigger(t))  # queued
        answers.append(s.trigger(t))  # one waits already: skipped
        clock.advance(2)

    runs = Runs(clock, during=during)
    t = s.schedule(10, runs, interval=10, overlap="queue")
    drv.at(10)
    drv.settle()
    assert answers == [True, False] and runs == [10.0, 12.0]
    assert s.skipped_runs(t) == 1 and s.next_run_in() == 8.0  # the grid: 20


# -- what is refused ------------------------------------------------------------------------


def test_unknown_ids_return_false(drv: Driver) -> None:
    s, runs = drv.s, Runs(drv.clock)
    assert (s.pause(99), s.resume(99), s.trigger(99)) == (False, False, False)
    done = s.schedule(1, runs)
    gone = s.schedule(1, runs, interval=1)
    s.cancel(gone)
    drv.at(1)
    for task_id in (done, gone):
        assert s.pause(task_id) is False
        assert s.resume(task_id) is False
        assert s.trigger(task_id) is False
    live = s.schedule(5, runs, interval=5)
    assert s.resume(live) is False  # not paused
    assert runs == [1.0] and s.skipped_runs() == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s, t: s.pause(str(t)), r"^task_id must be an int, got '1'$"),
        (lambda s, t: s.pause(True), r"^task_id must be an int, got True$"),
        (lambda s, t: s.pause(t, note=3), r"^note must be a str or None, got 3$"),
        (lambda s, t: s.resume(1.0), r"^task_id must be an int, got 1\.0$"),
        (lambda s, t: s.trigger(None), r"^task_id must be an int, got None$"),
        (lambda s, t: s.trigger([t]), r"^task_id must be an int, got \[1\]$"),
    ],
)
def test_bad_arguments_raise_and_change_nothing(
    drv: Driver, call: Callable[[Any, int], object], message: str
) -> None:
    s, runs = drv.s, Runs(drv.clock)
    t = s.schedule(10, runs, interval=10)
    with pytest.raises(TypeError, match=message):
        call(s, t)
    assert [(i.task_id, i.paused) for i in s.tasks()] == [(1, False)]
    drv.at(10)
    assert runs == [10.0]


def test_trigger_on_a_stopped_thread_scheduler_raises() -> None:
    s = ThreadScheduler(FakeClock(), executor=InlineExecutor())
    t = s.schedule(10, print)
    s.stop()
    with pytest.raises(RuntimeError, match=r"^trigger\(\) on a stopped ThreadScheduler"):
        s.trigger(t)
    assert s.pause(t) is True and s.resume(t) is True  # bookkeeping only: nothing runs


def test_trigger_on_a_stopped_asyncio_scheduler_raises() -> None:
    async def main() -> None:
        s = AsyncScheduler(FakeClock(), executor=InlineExecutor())
        t = s.schedule(10, print)
        await s.stop()
        with pytest.raises(RuntimeError, match=r"^trigger\(\) on a stopped AsyncScheduler"):
            s.trigger(t)

    asyncio.run(main())


# -- runs handed over before the pause ------------------------------------------------------


def test_thread_a_run_handed_over_before_the_pause_does_not_start() -> None:
    clock = FakeClock()
    pool = ManualExecutor()
    s = ThreadScheduler(clock, executor=pool)
    runs = Runs(clock)
    t = s.schedule(10, runs, interval=10)
    clock.set(10)
    s.step()
    assert s.running() == {t: 1} and runs == []  # handed to the pool, not started
    s.pause(t)
    assert s.trigger(t) is False  # the run handed over counts as going on: skipped
    pool.run_all()
    assert runs == [] and s.running() == {}  # dropped when it came to start
    clock.set(12)
    assert s.trigger(t) is True
    pool.run_all()
    assert runs == [12.0] and s.running() == {} and s.skipped_runs(t) == 1
    s._check()


def test_asyncio_a_coroutine_run_handed_over_before_the_pause_does_not_start() -> None:
    async def main() -> None:
        clock = FakeClock()
        s = AsyncScheduler(clock)
        runs: list[float] = []

        async def job() -> None:
            runs.append(clock())

        t = s.schedule(10, job, interval=10)
        clock.set(10)
        s.step()  # the run's task exists; it has not taken its first step
        s.pause(t)
        await _settle()
        assert runs == [] and s.running() == {}
        clock.set(12)
        assert s.trigger(t) is True
        await _settle()
        assert runs == [12.0]
        s._check()

    asyncio.run(main())


def test_asyncio_a_coroutine_run_going_on_when_paused_finishes() -> None:
    async def main() -> None:
        clock = FakeClock()
        s = AsyncScheduler(clock)
        events = events_of(s)
        inside, release = asyncio.Event(), asyncio.Event()
        runs: list[float] = []

        async def job() -> None:
            runs.append(clock())
            inside.set()
            await release.wait()

        t = s.schedule(10, job, interval=10)
        clock.set(10)
        s.step()
        await asyncio.wait_for(inside.wait(), PATIENCE)
        assert s.pause(t) is True
        assert s.trigger(t) is False  # overlap "skip": a run is going on
        release.set()
        await _settle()
        assert s.running() == {} and runs == [10.0]
        assert [e.kind for e in events] == [
            EventKind.STARTED,
            EventKind.SKIPPED,
            EventKind.FINISHED,
        ]
        clock.set(40)
        s.step()
        await _settle()
        assert runs == [10.0]
        s._check()

    asyncio.run(main())


# -- waking the timing thread / owner task (stepped: its wake-ups recorded) ---------------


def watch_wakeups(drv: Driver) -> list[int]:
    """Record the driver's early wake-ups of its timing thread or owner task."""
    s, woken = drv.s, []
    if drv.kind == "thread":
        s._cond.notify = lambda n=1: woken.append(n)
    else:

        def wake() -> None:
            s._policy.wake = False
            woken.append(1)

        s._wake = wake
    return woken


def test_pause_of_the_task_slept_for_rearms_and_resume_wakes(drv: Driver) -> None:
    s = drv.s
    head = s.schedule(10, print, interval=10)
    other = s.schedule(20, print, interval=10)
    woken = watch_wakeups(drv)
    s._policy.deadline = 10.0  # asleep until the head's due time, as the loop would be
    assert s.pause(other) is True and woken == []  # not the one it sleeps for
    assert s.pause(head) is True and woken == [1]  # re-armed for the next one
    s._policy.deadline = float("inf")  # asleep with nothing due
    assert s.resume(head) is True and woken == [1, 1]  # due at 10: woken to re-arm
    drv.clock.set(50)  # moving a FakeClock wakes the driver too
    s._policy.deadline = 55.0
    woken.clear()
    assert s.resume(other) is True and woken == []  # due at 60, after 55: let it sleep


# -- started drivers, real threads (conditions, never timings) -----------------------------


def test_thread_resume_wakes_the_timing_thread_and_trigger_runs_on_a_worker() -> None:
    clock = FakeClock()
    ran = threading.Event()
    where: list[str] = []

    def job() -> None:
        where.append(threading.current_thread().name)
        ran.set()

    s = ThreadScheduler(clock, max_workers=2)
    t = s.add(Once(5), job)
    s.pause(t)
    canary = threading.Event()
    s.add(Once(10), canary.set)
    with s:
        clock.advance(10)  # the timing thread runs the canary, then waits forever
        assert canary.wait(PATIENCE)
        assert s.resume(t) is True  # due at once: the waiting thread must be woken
        assert ran.wait(PATIENCE)
        ran.clear()
        every = s.schedule(3600, job, interval=3600)
        caller = threading.Thread(target=s.trigger, args=(every,))
        caller.start()
        caller.join(PATIENCE)
        assert ran.wait(PATIENCE)
    assert len(where) == 2
    assert all(name.startswith("tickwork-worker") for name in where), where


def test_asyncio_started_pause_resume_and_trigger_from_another_thread() -> None:
    async def main() -> None:
        clock = FakeClock()
        ran = asyncio.Event()
        runs: list[float] = []

        async def job() -> None:
            runs.append(clock())
            ran.set()

        async with AsyncScheduler(clock) as s:
            t = s.schedule(5, job)
            every = s.schedule(3600, job, interval=3600)
            assert await asyncio.to_thread(s.pause, t, "later") is True
            clock.advance(10)
            assert [i.paused for i in await asyncio.to_thread(s.tasks)] == [True, False]
            assert await asyncio.to_thread(s.resume, t) is True  # wakes the owner task
            await asyncio.wait_for(ran.wait(), PATIENCE)
            ran.clear()
            assert await asyncio.to_thread(s.trigger, every) is True
            await asyncio.wait_for(ran.wait(), PATIENCE)
        assert runs == [10.0, 10.0]

    asyncio.run(main())


# -- invariants under a random mix (seeded: the same sequence every run) --------------------


@pytest.mark.parametrize("seed", range(4))
def test_a_random_mix_keeps_the_invariants_and_paused_tasks_never_run(seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock(wall_start=WALL0)
    s = ThreadScheduler(clock, executor=InlineExecutor())
    paused: set[int] = set()
    ids: list[int] = []
    wrong: list[int] = []
    triggering: list[int] = []

    def job(task_id: list[int]) -> None:
        if task_id[0] in paused and task_id[0] not in triggering:
            wrong.append(task_id[0])

    for _ in range(400):
        op = rng.random()
        if op < 0.2 or not ids:
            box: list[int] = [0]
            kind = rng.randrange(4)
            if kind == 0:
                box[0] = s.schedule(rng.choice([0, 1, 2.5]), job, args=(box,))
            elif kind == 1:
                box[0] = s.schedule(1, job, interval=rng.choice([1, 2]), args=(box,))
            elif kind == 2:
                box[0] = s.schedule(1, job, interval=2, fixed_delay=True, args=(box,))
            else:
                box[0] = s.add(Every(3, jitter=1), job, args=(box,))
            ids.append(box[0])
        elif op < 0.4:
            t = rng.choice(ids)
            if s.pause(t):
                paused.add(t)
        elif op < 0.55:
            t = rng.choice(ids)
            if s.resume(t):
                paused.discard(t)
        elif op < 0.65:
            t = rng.choice(ids)
            triggering.append(t)
            s.trigger(t)
            triggering.pop()
        elif op < 0.7:
            t = rng.choice(ids)
            s.cancel(t)
            paused.discard(t)
        else:
            clock.advance(rng.choice([0, 0.5, 1, 2, 5]))
            s.step()
        s._check()
        assert {i.task_id for i in s.tasks() if i.paused} == paused & {i.task_id for i in s.tasks()}
    assert wrong == []


def test_metrics_show_no_next_run_for_a_paused_task() -> None:
    from prometheus_client import CollectorRegistry

    from tickwork.metrics import SchedulerMetrics

    clock = FakeClock(wall_start=WALL0)
    s = ThreadScheduler(clock, executor=InlineExecutor())
    m = SchedulerMetrics(registry=CollectorRegistry())
    m.watch(s)
    t = s.schedule(10, print, interval=10, name="probe")

    def next_run() -> float | None:
        return m.registry.get_sample_value("tickwork_next_run_timestamp_seconds", {"job": "probe"})

    assert next_run() == WALL0 + 10
    s.pause(t)
    assert next_run() is None
    s.resume(t)
    assert next_run() == WALL0 + 10
