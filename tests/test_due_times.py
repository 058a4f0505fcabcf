"""The core's due-time arithmetic at its edges: grids, plans, pause and resume, clock steps.

Each test states one rule on a fake clock; most were written to kill a mutant that the
rest of the suite let live (``python3 dev.py mutate``, docs/testing.md).
"""

from __future__ import annotations

import logging
import math
import random

import pytest

from tickwork import At, Cron, EventKind, Every, RunEvent, Scheduler, ThreadScheduler
from tickwork._core.scheduler import COMPACT_SLACK
from tickwork._core.schedules import next_slot
from tickwork.testing import FakeClock, InlineExecutor

from .driver_contract import ManualExecutor

#: A wall-clock start on a minute boundary (for cron).
WALL0 = 1_800_000_000.0
#: An ``until`` far away: it makes an interval a plan, and never ends it.
FAR = WALL0 + 1e9


def core(rng: random.Random | None = None) -> tuple[Scheduler, FakeClock]:
    clock = FakeClock(wall_start=WALL0)
    return Scheduler(clock, rng=rng), clock


def driver() -> tuple[ThreadScheduler, FakeClock]:
    clock = FakeClock(wall_start=WALL0)
    return ThreadScheduler(clock, executor=InlineExecutor()), clock


# -- next_slot: the first grid slot strictly after now ------------------------------------


def test_next_slot_keeps_a_slot_still_ahead() -> None:
    assert next_slot(30.0, 10.0, 25.0) == 30.0


def test_next_slot_moves_a_slot_exactly_at_now_one_step_on() -> None:
    assert next_slot(10.0, 5.0, 10.0) == 15.0
    assert next_slot(10.0, 5.0, 27.0) == 30.0


def test_next_slot_moves_past_now_when_rounding_lands_on_it() -> None:
    # 0.2 + 3 * 0.1 rounds to exactly 0.5: the next slot is 0.6, not 0.5 and not 0.7
    got = next_slot(0.2, 0.1, 0.5)
    assert got > 0.5 and got == pytest.approx(0.6, abs=1e-9)


def test_next_slot_of_a_grid_too_fine_for_the_clock_is_the_next_float() -> None:
    now = 1e17  # a microsecond grid is below this clock's resolution
    assert next_slot(0.0, 1e-6, now) == math.nextafter(now, math.inf)


# -- fixed-rate plans (an interval with an until is one) -----------------------------------


def test_a_late_run_exactly_on_the_next_slot_goes_an_interval_after_now() -> None:
    s, clock = core()
    s.add(Every(10, until=FAR), lambda: None)
    clock.set(20.0)  # slot 10 runs late, exactly at slot 20: slot 20 is missed
    assert s.run_pending() == 1
    assert s.next_run_in() == 10.0


def test_a_late_run_of_a_plan_goes_an_interval_after_now() -> None:
    s, clock = core()
    s.add(Every(10, until=FAR), lambda: None)
    clock.set(25.0)
    assert s.run_pending() == 1
    assert s.next_run_in() == 10.0  # 35: now + interval, not the passed slot 20


def test_an_interval_ends_at_its_until() -> None:
    s, clock = core()
    runs: list[float] = []
    s.add(Every(10, until=WALL0 + 25), lambda: runs.append(clock()))
    for t in (10.0, 20.0, 30.0, 40.0):
        clock.set(t)
        s.run_pending()
    assert runs == [10.0, 20.0] and len(s) == 0


def test_resume_puts_an_interval_plan_back_on_its_grid() -> None:
    s, clock = driver()
    t = s.add(Every(10, until=FAR), lambda: None)
    s.pause(t)
    clock.set(45.0)
    assert s.resume(t) is True
    assert t in s and s.next_run_in() == 5.0  # 50: 10 to 40 were missed


def test_resume_exactly_at_the_due_time_counts_the_slot_as_passed() -> None:
    s, clock = driver()
    t = s.schedule(10, lambda: None, interval=10)
    s.pause(t)
    clock.set(10.0)
    s.resume(t)
    assert s.next_run_in() == 10.0  # 20: the slot at the resume itself has passed


def test_resume_draws_a_fresh_jitter_after_the_grid_slot() -> None:
    s, clock = driver()
    t = s.add(Every(10, jitter=4.0), lambda: None)
    s.pause(t)
    clock.set(45.0)
    s.resume(t)
    wait = s.next_run_in()
    assert wait is not None and 5.0 <= wait < 9.0  # in [50, 54): the slot plus a draw


def test_a_fixed_delay_task_resumed_while_its_run_goes_on_stays_off_until_it_ends() -> None:
    clock = FakeClock(wall_start=WALL0)
    pool = ManualExecutor()
    s = ThreadScheduler(clock, executor=pool)
    t = s.schedule(10, lambda: None, interval=10, fixed_delay=True)
    clock.set(10.0)
    s.step()
    assert len(pool.queue) == 1  # the run of 10 is handed over, not yet ended
    s.pause(t)
    s.resume(t)
    clock.set(25.0)
    s.step()
    assert len(pool.queue) == 1  # no second run while the first goes on
    pool.run_all()
    assert s.next_run_in() == 10.0  # 35: an interval after the run ended


# -- wall-clock plans after the wall clock steps -------------------------------------------


def test_an_at_task_moves_with_the_wall_clock() -> None:
    s, clock = core()
    s.add(At(WALL0 + 3600), lambda: None)
    clock.advance(60.0)
    clock.jump_wall(1800.0)  # the wall clock is set 30 min ahead
    assert s.run_pending() == 0
    assert s.next_run_in() == 1740.0


def test_a_wildcard_cron_task_set_back_waits_for_its_next_minute() -> None:
    s, clock = core()
    s.add(Cron("* * * * *"), lambda: None)
    clock.advance(30.0)
    assert s.run_pending() == 0
    clock.jump_wall(-7200.0)  # set back 2 h: it follows real time, to the next minute
    assert s.run_pending() == 0
    assert s.next_run_in() == 30.0


def test_a_cron_task_set_back_gets_a_fresh_jitter_after_its_new_slot() -> None:
    s, clock = core(random.Random(7))
    draws = random.Random(7)
    first, second = draws.random() * 20.0, draws.random() * 20.0
    s.add(Cron("* * * * *", jitter=20.0), lambda: None)
    assert s.next_run_in() == pytest.approx(60.0 + first)
    clock.advance(30.0)
    clock.jump_wall(-7200.0)
    assert s.run_pending() == 0
    assert s.next_run_in() == pytest.approx(30.0 + second)


# -- schedules that end, and what is left after ---------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [Every(10, fixed_delay=True, until=WALL0 + 25), Cron("*/10 * * * * *", until=WALL0 + 20)],
    ids=["fixed delay", "cron, until exactly on a slot"],
)
def test_a_schedule_runs_up_to_its_until_and_then_ends(schedule: Every | Cron) -> None:
    s, clock = core()
    runs: list[float] = []
    s.add(schedule, lambda: runs.append(clock()))
    for t in (10.0, 20.0):
        clock.set(t)
        s.run_pending()
    # it ends with its last run, not when the slot after until would have come
    assert runs == [10.0, 20.0] and len(s) == 0 and s.next_run_in() is None
    assert s.next_wakeup_in() is None  # no wall-clock task is left to watch for
    clock.set(40.0)
    assert s.run_pending() == 0


def test_a_fixed_delay_interval_draws_its_jitter_after_the_run() -> None:
    s, clock = core(random.Random(3))
    draws = random.Random(3)
    first, second = draws.random() * 5.0, draws.random() * 5.0
    s.add(Every(10, fixed_delay=True, jitter=5.0), lambda: clock.advance(2.0))
    assert s.next_run_in() == pytest.approx(10.0 + first)
    clock.set(10.0 + first)
    s.run_pending()  # the run takes 2 s
    assert s.next_run_in() == pytest.approx(10.0 + second)


def test_a_fixed_rate_plan_after_a_long_run_keeps_its_grid_slot() -> None:
    s, clock = core()
    s.add(Every(10, until=FAR), lambda: clock.advance(25.0))
    clock.set(10.0)
    s.run_pending()  # the run of slot 10 ends at 35, after slot 20 and 30
    # the next slot is reckoned from the tick that ran it (10): slot 20, overdue now
    assert s.next_run_in() == 0.0 and s.tasks()[0].due == 20.0


# -- what the core tells a driver ----------------------------------------------------------


def test_a_task_added_by_a_job_for_now_makes_next_run_in_zero() -> None:
    s, clock = core()
    seen: list[float | None] = []

    def job() -> None:
        s.schedule(0, lambda: None)  # due now: held for the next run_pending
        seen.append(s.next_run_in())

    s.schedule(5, job)
    clock.set(5.0)
    s.run_pending()
    assert seen == [0.0]


def test_next_run_in_counts_from_the_latest_reading_when_the_clock_goes_back() -> None:
    readings = [10.0]
    s = Scheduler(lambda: readings[-1], wall_clock=lambda: WALL0)
    s.schedule(20, lambda: None)  # due at 30
    readings.append(5.0)  # the clock reads earlier: the schedule keeps 10
    assert s.next_run_in() == 20.0


def test_missed_events_name_the_task() -> None:
    s, clock = core()
    events: list[object] = []
    s.add_listener(events.append)

    def tick() -> None:
        pass

    s.schedule(10, tick, interval=10)
    clock.set(35.0)
    s.run_pending()
    assert EventKind.MISSED in {getattr(e, "kind", None) for e in events}
    names = {getattr(e, "name", None) for e in events}
    assert names == {"test_missed_events_name_the_task.<locals>.tick"}


def test_a_wall_clock_step_of_exactly_wall_step_is_no_step() -> None:
    from tickwork._core.clocks import WALL_STEP

    s, clock = core()
    s.add(At(WALL0 + 3600), lambda: None)
    clock.jump_wall(WALL_STEP)  # within the tolerance: due times stay where they are
    assert s.run_pending() == 0
    assert s.next_run_in() == 3600.0


# -- the end of a run on a pooled driver ---------------------------------------------------


def test_a_failed_run_is_recorded_under_its_task() -> None:
    s, clock = driver()

    def boom() -> None:
        raise RuntimeError("boom")

    fine = s.schedule(5, lambda: None)
    bad = s.schedule(5, boom)
    clock.set(5.0)
    s.step()
    assert fine != bad and s.errors == [f"task {bad}: boom"]


def test_a_queued_run_keeps_its_slot_and_runs_after_the_current_one() -> None:
    clock = FakeClock(wall_start=WALL0)
    pool = ManualExecutor()
    s = ThreadScheduler(clock, executor=pool)
    events: list[RunEvent] = []
    s.add_listener(events.append)
    s.schedule(10, lambda: None, interval=10, overlap="queue")
    clock.set(10.0)
    s.step()
    clock.set(20.0)
    s.step()  # slot 20 is due while the run of 10 goes on: queued
    assert len(pool.queue) == 1
    pool.run_all()  # the run of 10 ends, then the queued run of 20 runs
    assert [(e.kind, e.scheduled) for e in events if e.kind is EventKind.STARTED] == [
        (EventKind.STARTED, 10.0),
        (EventKind.STARTED, 20.0),
    ]


def test_a_run_queued_by_a_trigger_while_paused_still_runs() -> None:
    s, clock = driver()
    runs: list[float] = []
    queued: list[bool] = []

    def job() -> None:
        runs.append(clock())
        if len(runs) == 1:  # during the first run: pause, then trigger one more
            s.pause(t)
            queued.append(s.trigger(t))

    t = s.schedule(10, job, interval=10, overlap="queue")
    clock.set(10.0)
    s.step()
    assert queued == [True] and runs == [10.0, 10.0]


def test_a_queued_run_of_a_task_paused_before_it_starts_is_dropped() -> None:
    clock = FakeClock(wall_start=WALL0)
    pool = ManualExecutor()
    s = ThreadScheduler(clock, executor=pool)
    runs: list[float] = []
    t = s.schedule(10, lambda: runs.append(clock()), interval=10, overlap="queue")
    clock.set(10.0)
    s.step()
    clock.set(20.0)
    s.step()  # slot 20 queued
    pool.run_next()  # the run of 10 ends: the queued run of 20 is handed over
    s.pause(t)
    pool.run_all()
    assert runs == [20.0]


# -- the wall clock drifting or stepping under wall-clock tasks ------------------------------


@pytest.mark.parametrize("jumps", [(-0.6, -0.6), (-0.5, -1.0)], ids=["drift", "exactly WALL_STEP"])
def test_a_slow_drift_back_never_repeats_a_cron_slot(jumps: tuple[float, float]) -> None:
    s, clock = core()
    runs: list[float] = []
    s.add(Cron("* * * * *"), lambda: runs.append(clock.wall()))
    clock.set(60.0)
    assert s.run_pending() == 1  # the minute WALL0 + 60; it waits for WALL0 + 120 now
    for jump in jumps:  # each reading moved by at most WALL_STEP: drift, not a step
        clock.advance(0.5)
        clock.jump_wall(jump)
        assert s.run_pending() == 0
    assert s.next_run_in() == pytest.approx(WALL0 + 120 - clock.wall())


def test_a_paused_wall_clock_task_follows_a_step_while_paused() -> None:
    s, clock = driver()
    t = s.add(At(WALL0 + 3600), lambda: None)
    s.pause(t)
    clock.jump_wall(1800.0)
    s.step()
    s.resume(t)
    assert s.next_run_in() == 1800.0


def test_a_fixed_delay_task_whose_until_ends_it_after_a_run_is_gone_from_the_driver() -> None:
    s, clock = driver()
    t = s.add(Every(10, fixed_delay=True, until=WALL0 + 25), lambda: None)
    for when in (10.0, 20.0):  # the run of 20 ends at 20: the next, 30, is after until
        clock.set(when)
        s.step()
    assert t not in s and s.tasks() == []
    assert s.pause(t) is False and s.trigger(t) is False and s.cancel(t) is False
    s._check()


def test_a_fixed_delay_run_that_pauses_its_task_still_finishes() -> None:
    s, clock = driver()
    events: list[RunEvent] = []
    s.add_listener(events.append)
    t = 0
    t = s.schedule(10, lambda: s.pause(t), interval=10, fixed_delay=True)
    clock.set(10.0)
    s.step()
    assert [e.kind for e in events] == [EventKind.STARTED, EventKind.FINISHED]


# -- run_pending's own rules: one clock read, time never backwards, the compaction bound --


class _Readings:
    """A clock that returns what the test sets, as a float, and counts its reads."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def test_run_pending_reads_the_clock_once_per_tick() -> None:
    clock = _Readings(100.0)
    s = Scheduler(clock)
    ran: list[int] = []
    s.schedule(0, lambda: ran.append(1))
    s.schedule(0, lambda: ran.append(2), interval=5)
    clock.reads = 0
    assert s.run_pending() == 2
    assert clock.reads == 1 and ran == [1, 2]


def test_a_float_clock_that_goes_back_keeps_the_last_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Readings(10.0)
    s = Scheduler(clock)
    s.run_pending()
    clock.now = 3.0  # a float reading, earlier than the last one
    with caplog.at_level(logging.WARNING, logger="tickwork"):
        s.run_pending()
    assert "clock went backwards" in caplog.text
    ran: list[str] = []
    s.schedule(1, lambda: ran.append("x"))  # due 1 s after the kept reading (10.0)
    clock.now = 4.5
    assert s.run_pending() == 0 and ran == []
    clock.now = 11.0
    assert s.run_pending() == 1 and ran == ["x"]


def test_run_pending_compacts_only_past_the_slack() -> None:
    clock = _Readings(0.0)
    s = Scheduler(clock)
    far = [s.schedule(1000 + i, lambda: None) for i in range(10)]
    victims = [s.schedule(500, lambda: None) for _ in range(len(far) + COMPACT_SLACK)]

    def cancel_all() -> None:
        for tid in victims:
            assert s.cancel(tid)

    s.schedule(1, cancel_all)
    clock.now = 1.0
    assert s.run_pending() == 1
    # Exactly at the bound (dead == live + COMPACT_SLACK): not compacted yet...
    assert (s._dead, len(s)) == (len(far) + COMPACT_SLACK, len(far))
    s._check()
    # ...one more dead entry is past it: the heap is rebuilt without them.
    assert s.cancel(far[0])
    assert s._dead == 0 and len(s._heap) == len(far) - 1
    s._check()


def test_a_wall_step_during_a_fixed_delay_run_is_seen_when_the_run_ends() -> None:
    """The run ends after the wall clock was set past ``until``: the task ends with it.

    ``until`` is a wall time; the next run (10 s after this one ends) would fall before
    it on the old wall reading and after it on the new one. Ending the run re-reads the
    wall clock first, so the task is gone at once, not one look later.
    """
    clock = FakeClock(wall_start=WALL0)
    pool = ManualExecutor()
    s = ThreadScheduler(clock, executor=pool)
    t = s.add(Every(10, fixed_delay=True, until=WALL0 + 25), lambda: None)
    clock.set(10.0)
    s.step()  # the run of 10 is handed to the pool, and goes on
    clock.jump_wall(60.0)  # the wall clock is set a minute ahead meanwhile
    pool.run_all()  # the run ends: its next run would be at wall WALL0 + 80, after until
    assert t not in s and s.tasks() == []
    s._check()
