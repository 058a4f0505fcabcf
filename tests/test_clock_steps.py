"""Steps of the wall clock and suspends, on injected clocks, for every in-memory layer.

What ``docs/cron.md`` ("Steps of the system clock") promises, checked as a matrix: the
wall clock is stepped back or forward by 30 s, 2 h, 4 h and 1 day (or the machine is
suspended: both clocks jump at once) in the middle of a wait, and one scheduler holding
every kind of job is driven for 27 hours of fake time past it:

- the core `Scheduler`, ticked the way a driver ticks it (run what is due, then wait
  `next_wakeup_in()`: at most `WALL_CHECK_INTERVAL` while calendar tasks exist);
- `ThreadScheduler` and `AsyncScheduler`: their real timing loops, with only the waiting
  injected (the wait returns when its timeout has passed on the `FakeClock`; the step
  happens inside it, unseen until the loop wakes). No thread is started, nothing sleeps,
  so the results do not depend on how busy the machine is.

Every job records ``(monotonic, wall)`` at each run; the checks are on those readings.
Then 300 seeded random steps on the core, and the issue's repro as given.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest

from tickwork import At, Cron, Every, Scheduler
from tickwork._core.scheduler import WALL_CHECK_INTERVAL
from tickwork.testing import FakeClock

from .test_asyncio import AsyncHarness
from .test_thread import ThreadHarness

# 2026-12-02 10:00:20 UTC, a Wednesday: the monotonic clock starts at 0 here.
T0 = datetime(2026, 12, 2, 10, 0, 20, tzinfo=UTC).timestamp()
# The step comes at monotonic 1234.5 (wall 10:20:54.5): off every boundary, mid-wait.
STEP_AT = 1234.5
BEFORE = T0 + STEP_AT  # the wall time just before the step
HORIZON = STEP_AT + 27 * 3600  # past the next day's fixed-time slots, whatever the step
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
STEPS = [-30.0, -2 * HOUR, -4 * HOUR, -DAY, 30.0, 2 * HOUR, 4 * HOUR, DAY]
STEP_IDS = ["back-30s", "back-2h", "back-4h", "back-1d", "fwd-30s", "fwd-2h", "fwd-4h", "fwd-1d"]
LAYERS = ["core", "thread", "asyncio"]

# The cron jobs: (name, expression, period or None for fixed-time).
CRON_JOBS = [
    ("minute", "* * * * *", MINUTE),
    ("five", "*/5 * * * *", 5 * MINUTE),
    ("hourly", "0 * * * *", HOUR),  # wildcard: its hour field is `*`
    ("at-10:15", "15 10 * * *", None),  # fixed-time, ran at 10:15 before the step
    ("at-10:30", "30 10 * * *", None),  # fixed-time, due 9 min after the step
]
EXPRS = {name: expr for name, expr, _ in CRON_JOBS}
AT_WHEN = T0 + 1800  # At(10:30:20), not yet run at the step
# Interval jobs on the monotonic clock: (name, interval, fixed_delay).
INTERVALS = [("every-150", 150.0, False), ("delay-210", 210.0, True)]

Runs = dict[str, list[tuple[float, float]]]


class World:
    """One scheduler of a given layer with every kind of job, driven on a `FakeClock`."""

    def __init__(self, layer: str) -> None:
        self.layer = layer
        self.clock = FakeClock(wall_start=T0)
        self.runs: Runs = {}
        self.harness: ThreadHarness | AsyncHarness | None = None
        if layer == "core":
            self.s: Any = Scheduler(self.clock)
        else:
            self.harness = ThreadHarness() if layer == "thread" else AsyncHarness()
            self.harness.clock = self.clock
            self.s = self.harness.make(inline=True)
        for name, expr, _ in CRON_JOBS:
            self.s.add(Cron(expr), self.job(name))
        self.s.add(At(AT_WHEN), self.job("at"))
        for name, every, fixed_delay in INTERVALS:
            self.s.add(Every(every, fixed_delay=fixed_delay), self.job(name))

    def job(self, name: str) -> Callable[[], None]:
        self.runs[name] = []
        return lambda: self.runs[name].append((self.clock(), self.clock.wall()))

    def drive(self, event: Callable[[FakeClock], None], *, at: float = STEP_AT) -> Runs:
        """Drive the layer until `HORIZON`; ``event(clock)`` happens at monotonic ``at``.

        A wait lasts exactly its timeout, unless the event was a suspend that already
        carried the clock past its end: then the loop wakes at once, as a real one does.
        """
        clock = self.clock
        pending = [at]
        stopped = []

        def fake_wait(timeout: float | None) -> None:
            assert timeout is not None and timeout > 0, timeout  # calendar tasks exist
            assert timeout <= WALL_CHECK_INTERVAL, timeout
            deadline = clock() + timeout
            if pending and pending[0] <= deadline:
                clock.set(pending.pop())
                event(clock)
            if clock() < deadline:
                clock.set(deadline)
            if clock() >= HORIZON:
                stopped.append(True)
                if self.harness is not None:
                    self.s._stopping = True

        try:
            if self.harness is None:
                while True:
                    self.s.run_pending()
                    self.s._check()
                    if stopped:
                        break
                    wait = self.s.next_wakeup_in()
                    if wait != 0.0:
                        fake_wait(wait)
            else:
                self.harness.drive(self.s, fake_wait)
                self.s._core._check()
        finally:
            if self.harness is not None:
                self.harness.close()
        assert not pending, "the event never happened"
        return self.runs


@functools.cache
def scenario(layer: str, kind: str, seconds: float) -> Runs:
    """The runs of one layer's `World` under one event (deterministic, so shared)."""
    event = jump(seconds) if kind == "jump" else suspend(seconds)
    return World(layer).drive(event)


def jump(step: float) -> Callable[[FakeClock], None]:
    """Step the wall clock alone (NTP, an administrator; Linux resuming from suspend)."""

    def event(clock: FakeClock) -> None:
        clock.jump_wall(step)

    return event


def suspend(seconds: float) -> Callable[[FakeClock], None]:
    """Both clocks jump at once: a machine resumed where the monotonic clock kept going."""

    def event(clock: FakeClock) -> None:
        clock.advance(seconds)

    return event


def split(runs: list[tuple[float, float]], at: float) -> tuple[list[float], list[float]]:
    """The wall readings of the runs before and after monotonic ``at``."""
    return [w for m, w in runs if m < at], [w for m, w in runs if m > at]


def after_step(runs: list[tuple[float, float]]) -> list[float]:
    """The monotonic delays from the step to each run after it."""
    return [m - STEP_AT for m, _ in runs if m > STEP_AT]


def increasing(xs: list[float]) -> bool:
    return all(a < b for a, b in pairwise(xs))


@pytest.fixture(params=LAYERS)
def layer(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


# -- the matrix: wall-clock steps -------------------------------------------------------


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
def test_wildcard_jobs_run_within_their_period_and_then_on_every_slot(
    layer: str, step: float
) -> None:
    runs = scenario(layer, "jump", step)
    for name, _, period in CRON_JOBS:
        if period is None:
            continue
        delays = after_step(runs[name])
        # Within its next period of real time (`* * * * *`: within 60 s of the step).
        assert delays[0] <= period, (name, delays[:3])
        # Then on every slot of the new wall time, one period of real time apart.
        walls = [w for m, w in runs[name] if m > STEP_AT]
        assert all(w % period == 0 for w in walls[1:]), (name, walls[:3])
        gaps = {b - a for a, b in pairwise(delays[1:])}
        assert gaps == {period}, (name, sorted(gaps)[:5])
        assert len(delays) >= (HORIZON - STEP_AT) // period - 1, name


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
def test_no_slot_runs_twice_within_a_pass_and_no_burst(layer: str, step: float) -> None:
    runs = scenario(layer, "jump", step)
    for name, expr, period in CRON_JOBS:
        before, after = split(runs[name], STEP_AT)
        assert increasing(before) and increasing(after), name
        # At most one run off the slots (a late one), and only the first after the step.
        off_slot = [w for w in after[1:] if Cron(expr).expression.next_after_timestamp(w - 1) != w]
        assert off_slot == [], (name, off_slot)
        if step > 0:
            # Forward: the wall clock never repeats, so neither does any slot.
            assert not before or after[0] > before[-1], name
        elif period is None and -step <= 3 * HOUR:
            # Back by up to 3 h: a fixed-time job runs only in the first pass.
            assert not before or after[0] > before[-1], name
        else:
            # Back, wildcard or a correction: the second pass starts where the wall
            # clock landed, never before it.
            assert after[0] > BEFORE + step - WALL_CHECK_INTERVAL, name
    for name in ("every-150", "delay-210", "at"):
        monos = [m for m, _ in runs[name]]
        assert increasing(monos), name


# Seconds from the step to the first run after it, per fixed-time job and step; None:
# run late, once, when the step is noticed (at most WALL_CHECK_INTERVAL after it).
FIXED_FIRST: dict[str, dict[float, float | None]] = {
    # Ran at 10:15 before the step; the wall clock read 10:20:54.5 just before it.
    "at-10:15": {
        -30.0: 86045.5 + 30,  # repeated interval: not again; tomorrow's 10:15
        -2 * HOUR: 86045.5 + 2 * HOUR,  # the same: first pass only
        -4 * HOUR: -354.5 + 4 * HOUR,  # a correction: runs again at today's 10:15
        -DAY: 86045.5,  # a correction: today's 10:15 again, a day of real time later
        30.0: 86045.5 - 30,  # forward: tomorrow's 10:15, sooner
        2 * HOUR: 86045.5 - 2 * HOUR,
        4 * HOUR: 86045.5 - 4 * HOUR,
        DAY: None,  # carried past tomorrow's 10:15: it runs once, late
    },
    # Due at 10:30, 545.5 s after the step.
    "at-10:30": {
        -30.0: 545.5 + 30,
        -2 * HOUR: 545.5 + 2 * HOUR,
        -4 * HOUR: 545.5 + 4 * HOUR,
        -DAY: 545.5,  # a correction: yesterday's 10:30 on the new clock (second pass)
        30.0: 545.5 - 30,
        2 * HOUR: None,  # carried past 10:30: once, late
        4 * HOUR: None,
        DAY: None,
    },
    # At(10:30:20): a wall instant, moves with the wall clock whatever the step.
    "at": {
        -30.0: 565.5 + 30,
        -2 * HOUR: 565.5 + 2 * HOUR,
        -4 * HOUR: 565.5 + 4 * HOUR,
        -DAY: 565.5 + DAY,
        30.0: 565.5 - 30,
        2 * HOUR: None,
        4 * HOUR: None,
        DAY: None,
    },
}


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
def test_fixed_time_jobs_and_at_follow_the_clock_step_table(layer: str, step: float) -> None:
    runs = scenario(layer, "jump", step)
    for name, table in FIXED_FIRST.items():
        delays = after_step(runs[name])
        want = table[step]
        if want is None:
            assert 0 < delays[0] <= WALL_CHECK_INTERVAL, (name, delays[:2])
        else:
            assert delays[0] == pytest.approx(want), (name, delays[:2], want)
    assert len(runs["at"]) == 1
    # A fixed-time job runs once a day of wall time: the next run after the first one
    # is the next day's slot (after a late run: the first slot after the new wall time).
    for name in ("at-10:15", "at-10:30"):
        walls = [w for m, w in runs[name] if m > STEP_AT]
        if len(walls) > 1:
            assert walls[1] == Cron(EXPRS[name]).expression.next_after_timestamp(walls[0])


@pytest.mark.parametrize("step", STEPS, ids=STEP_IDS)
def test_interval_jobs_never_see_a_wall_step(layer: str, step: float) -> None:
    runs = scenario(layer, "jump", step)
    for name, every, _ in INTERVALS:
        monos = [m for m, _ in runs[name]]
        assert monos == [every * k for k in range(1, len(monos) + 1)], name
        assert monos[-1] > HORIZON - every, name


# -- suspend: both clocks jump at once --------------------------------------------------

SUSPENDS = [30.0, 2 * HOUR, 4 * HOUR, DAY]
SUSPEND_IDS = ["30s", "2h", "4h", "1d"]


@pytest.mark.parametrize("seconds", SUSPENDS, ids=SUSPEND_IDS)
def test_suspend_runs_each_late_job_once_then_keeps_its_rhythm(layer: str, seconds: float) -> None:
    resume = STEP_AT + seconds
    runs = scenario(layer, "suspend", seconds)
    for name, runs_of in runs.items():
        monos = [m for m, _ in runs_of]
        assert not any(STEP_AT < m < resume for m in monos), name  # asleep
        assert monos.count(resume) <= 1, name  # one late run, never a burst
        assert increasing(monos), name
    # Whatever was due while asleep ran once, at the resume, and went on from there.
    minute = after_step(runs["minute"])
    assert minute[0] == seconds and minute[1] - minute[0] <= MINUTE
    for name, every, fixed_delay in INTERVALS:
        monos = [m for m, _ in runs[name]]
        due = max(m for m in monos if m < STEP_AT) + every
        later = [m for m in monos if m >= resume]
        if due <= resume:
            # Late: runs at the resume; then fixed-delay waits an interval, fixed-rate
            # goes to its grid slot if still ahead, else an interval after the late run.
            assert later[0] == resume, name
            gap = later[1] - later[0]
            assert gap == every if fixed_delay else 0 < gap <= every, (name, gap)
        else:
            assert later[0] == due, name  # slept through none of its slots
    at = [m for m, _ in runs["at"]]
    assert at == ([resume] if BEFORE + seconds > AT_WHEN else [STEP_AT + 565.5])
    late_1015 = BEFORE + seconds >= datetime(2026, 12, 3, 10, 15, tzinfo=UTC).timestamp()
    assert (resume in [m for m, _ in runs["at-10:15"]]) == late_1015


# -- the issue's repro, as given ------------------------------------------------------------


@pytest.mark.parametrize("step", [-30.0, -7200.0, -14400.0, -DAY])
def test_issue_repro_a_minute_job_runs_within_a_minute_after_the_clock_is_set_back(
    step: float,
) -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    ran: list[float] = []
    s.add(Cron("* * * * *"), lambda: ran.append(clock()))
    clock.jump_wall(step)
    while not ran and clock() < 3 * HOUR:
        wait = s.next_wakeup_in()
        clock.advance(wait or 0.0)
        s.run_pending()
    # Before: 70 s (-30 s), 7,240 s (-2 h), none within 3 h (-4 h, -1 day). Now 30-40 s.
    assert ran and ran[0] <= 60.0, ran


# -- random steps: the promise for `* * * * *` holds whatever the size and moment ----------


def test_random_steps_never_hold_a_minute_job_back_more_than_a_minute() -> None:
    rnd = random.Random(11)
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock, rng=random.Random(5))
    ran: list[float] = []
    s.add(Cron("* * * * *"), lambda: ran.append(clock()))
    s.add(Cron("*/7 9-17 * * 1-5", jitter=5), lambda: None)  # wildcard, sparse, jittered
    s.add(Cron("45 3 * * *"), lambda: None)  # fixed-time
    steps: list[float] = []
    end = math.inf
    while clock() < end:
        wait = s.next_wakeup_in()
        assert wait is not None and wait <= WALL_CHECK_INTERVAL
        deadline = clock() + wait
        if len(steps) < 300 and rnd.random() < 0.2:
            clock.set(rnd.uniform(clock(), deadline))
            size = rnd.choice([rnd.uniform(1.5, 120), rnd.uniform(120, 2 * DAY)])
            clock.jump_wall(rnd.choice([-1, 1]) * size)
            steps.append(clock())
            if len(steps) == 300:
                end = clock() + 2 * MINUTE
        clock.set(max(clock(), deadline))
        s.run_pending()
        s._check()
    for t, later in zip(steps, [*steps[1:], math.inf], strict=True):
        first = min(m for m in ran if m > t)
        assert first <= t + MINUTE or later < first, (t, first)
    assert len(ran) == len(set(ran))  # never twice at one instant
