"""Schedule values (`Once`, `At`, `Every`, `Cron`) and how the core runs them."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tickwork import At, Calendar, Cron, CronError, Every, Once, Scheduler, TaskInfo
from tickwork._core.scheduler import WALL_CHECK_INTERVAL
from tickwork._core.schedules import parse_duration
from tickwork.testing import FakeClock

from .conftest import Log

# 2026-03-02 08:30:00 UTC, a Monday
T0 = datetime(2026, 3, 2, 8, 30, tzinfo=UTC).timestamp()


def wall(clock: FakeClock) -> datetime:
    return datetime.fromtimestamp(clock.wall(), UTC)


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "exc", "message"),
    [
        (lambda: Once(-1), ValueError, "delay must be a finite number >= 0, got -1"),
        (lambda: Once(b"1"), TypeError, "delay must be a number of seconds, got b'1'"),
        (lambda: Every(0), ValueError, "interval must be a finite number > 0, got 0"),
        (lambda: Every(math.nan), ValueError, "interval must be a finite number > 0, got nan"),
        (lambda: Every(1, jitter=-1), ValueError, "jitter must be a finite number >= 0, got -1"),
        (lambda: Every(1, first=-2), ValueError, "first must be a finite number >= 0, got -2"),
        (lambda: Every(1, fixed_delay=1), TypeError, "fixed_delay must be a bool, got 1"),
        (
            lambda: At(datetime(2026, 1, 1)),
            ValueError,
            r"when must be an aware datetime \(with a time zone\), "
            r"got datetime.datetime\(2026, 1, 1, 0, 0\)",
        ),
        (
            lambda: At("tomorrow"),
            TypeError,
            "when must be an aware datetime or finite POSIX seconds, got 'tomorrow'",
        ),
        (
            lambda: Cron("0 0 30 2 *"),
            CronError,
            "day-of-month: 30 never occurs in February in `0 0 30 2 \\*`",
        ),
        (
            lambda: Cron("* * * * *", tz=5),
            TypeError,
            "tz must be an IANA zone name or 'local', got 5",
        ),
        (
            lambda: Cron("* * * * *", jitter=math.inf),
            ValueError,
            "jitter must be a finite number >= 0, got inf",
        ),
    ],
)
def test_bad_values_are_refused(make: object, exc: type[Exception], message: str) -> None:
    with pytest.raises(exc, match=f"^{message}$"):
        make()  # type: ignore[operator]


def test_values_are_plain_data() -> None:
    assert Every(3) == Every(3.0)
    assert hash(Every(3)) == hash(Every(3.0))
    assert Every(3).interval == 3.0
    assert isinstance(Once(2).delay, float)
    assert Cron("0 3 * * *", tz="Europe/Berlin") == Cron("0 3 * * *", "Europe/Berlin")
    assert Cron("0 3 * * *", tz=ZoneInfo("Europe/Berlin")).tz == "Europe/Berlin"
    assert repr(Cron("@daily")) == (
        "Cron(expr='@daily', tz='UTC', jitter=0.0, until=None, calendar=None, shift='skip',"
        " seed=None, stable_jitter=False)"
    )
    assert At(datetime(2026, 1, 1, tzinfo=UTC)).when == 1767225600.0
    with pytest.raises(AttributeError):
        Every(3).interval = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("250ms", 0.25),
        ("2d", 172800),
        ("1w", 604800),
        ("10", 10),
        ("1.5h", 5400),
        (" 1h 2m ", 3720),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5 minutes", "1h-2m", "-5", "m5", "1.2.3s"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(
        ValueError, match=r"^duration must look like '30s', '5m', '1h30m' or '250ms', got "
    ):
        parse_duration(text)


def test_schedules_take_durations_as_the_jobs_file_writes_them() -> None:
    """``Every("10s")``, a `timedelta`, seconds: one value, kept as seconds."""
    assert Every("10s") == Every(timedelta(seconds=10)) == Every(10)
    assert Every("1m", jitter="250ms", first=timedelta(0)) == Every(60, jitter=0.25, first=0)
    assert Once("1h30m") == Once(timedelta(hours=1, minutes=30)) == Once(5400)
    assert Every("5m").to_dict() == Every(300).to_dict()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "ten",
            "interval must be a number of seconds, a timedelta or a duration like '10s',"
            " '5m' or '1h30m', got 'ten'",
        ),
        ("0s", "interval must be a finite number > 0, got '0s'"),
        (timedelta(0), "interval must be a finite number > 0, got datetime.timedelta(0)"),
        ("400000d", "interval must be at most 365000 days (about 1000 years), got '400000d'"),
    ],
)
def test_a_bad_duration_names_the_argument_and_shows_the_value(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=r"^interval must be ") as caught:
        Every(value)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_the_core_scheduler_takes_the_decorators(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    job = log.job("probe")
    assert s.every(timedelta(seconds=3), name="probe")(job) is job
    s.cron("0 7 * * *", tz="Europe/Berlin")(log.job("report"))
    assert [t.schedule for t in s.tasks()] == [Every(3), Cron("0 7 * * *", "Europe/Berlin")]
    clock.advance(3)
    assert s.run_pending() == 1 and log == ["probe"]


# -- add(): one uniform way to schedule ----------------------------------------------


def test_add_once_and_every_match_the_shorthand(clock: FakeClock, log: Log) -> None:
    a, b = Scheduler(clock), Scheduler(clock)
    a.schedule(2, log.job("x"))
    a.schedule(1, log.job("y"), interval=3)
    a.schedule(1, log.job("z"), interval=3, fixed_delay=True)
    b.add(Once(2), log.job("x"))
    b.add(Every(3, first=1), log.job("y"))
    b.add(Every(3, first=1, fixed_delay=True), log.job("z"))
    assert [(t.task_id, t.due, t.interval, t.fixed_delay) for t in a.tasks()] == [
        (t.task_id, t.due, t.interval, t.fixed_delay) for t in b.tasks()
    ]
    assert b.tasks()[0] == TaskInfo(2, 1.0, b.tasks()[0].fn, 3.0, False)


def test_every_defaults_first_run_to_one_interval(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.add(Every(5), log.job("x"))
    assert s.next_run_in() == 5.0


def test_add_refuses_non_schedules(sched: Scheduler) -> None:
    with pytest.raises(
        TypeError, match=r"^schedule must be a Once, At, Every or Cron value, got 5$"
    ):
        sched.add(5, print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^fn must be callable, got 'x'$"):
        sched.add(Once(1), "x")  # type: ignore[arg-type]
    assert len(sched) == 0
    assert sched.schedule(1, print) == 1


# -- jitter ---------------------------------------------------------------------------


def test_jitter_delays_each_run_without_drifting_the_grid() -> None:
    clock = FakeClock()
    s = Scheduler(clock, rng=random.Random(7))
    runs: list[float] = []
    s.add(Every(10, jitter=2), lambda: runs.append(clock.now))
    while len(runs) < 50:
        clock.set(s.tasks()[0].due)
        s.run_pending()
    for k, t in enumerate(runs, start=1):
        assert 10 * k <= t < 10 * k + 2  # slot k, delayed by less than the jitter
    assert len({round(t % 10, 6) for t in runs}) > 40  # fresh draws, not one offset


def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    def dues(seed: int) -> list[float]:
        clock = FakeClock()
        s = Scheduler(clock, rng=random.Random(seed))
        s.add(Every(10, jitter=5), print)
        out = []
        for _ in range(5):
            out.append(s.tasks()[0].due)
            clock.set(out[-1])
            s.schedule(0, lambda: None)
            s.run_pending()
        return out

    assert dues(1) == dues(1)
    assert dues(1) != dues(2)


def test_fixed_delay_with_jitter_measures_from_the_end() -> None:
    clock = FakeClock()
    s = Scheduler(clock, rng=random.Random(3))
    s.add(Every(5, fixed_delay=True, jitter=1, first=0), lambda: clock.advance(2))
    first = s.tasks()[0].due
    assert 0 <= first < 1  # the first run is jittered too
    clock.set(first)
    assert s.run_pending() == 1
    assert first + 7 <= s.tasks()[0].due < first + 8  # ended 2 s later, + 5, + up to 1


def test_rng_must_be_a_random() -> None:
    with pytest.raises(TypeError, match=r"^rng must be a random.Random or None, got 3$"):
        Scheduler(rng=3)  # type: ignore[arg-type]


# -- calendar schedules on the core ---------------------------------------------------


def test_cron_runs_at_wall_clock_times() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    fired: list[datetime] = []
    s.add(Cron("0 * * * *"), lambda: fired.append(wall(clock)))
    assert s.next_run_in() == 30 * 60
    for _ in range(3):
        clock.advance(s.next_run_in() or 0)
        assert s.run_pending() == 1
    assert [f.strftime("%H:%M") for f in fired] == ["09:00", "10:00", "11:00"]
    s._check()


def test_cron_in_a_time_zone_across_dst() -> None:
    # Europe/Berlin springs forward on 2026-03-29: 02:30 does not exist that night.
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC).timestamp()
    clock = FakeClock(wall_start=start)
    s = Scheduler(clock)
    berlin = ZoneInfo("Europe/Berlin")
    fired: list[str] = []
    s.add(
        Cron("30 2 * * *", tz="Europe/Berlin"),
        lambda: fired.append(wall(clock).astimezone(berlin).isoformat()),
    )
    for _ in range(3):
        clock.advance(s.next_run_in() or 0)
        s.run_pending()
    assert fired == [
        "2026-03-29T03:00:00+02:00",  # the skipped 02:30 runs right after the jump
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_at_runs_once_at_a_wall_time(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    tid = s.add(At(clock.wall() + 90), log.job("at"))
    assert s.next_run_in() == 90
    clock.advance(90)
    assert s.run_pending() == 1
    assert tid not in s
    assert s.cancel(tid) is False
    s._check()


def test_at_in_the_past_runs_at_the_next_tick(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.add(At(datetime.fromtimestamp(clock.wall(), UTC) - timedelta(hours=1)), log.job("late"))
    assert s.next_run_in() == 0.0
    assert s.run_pending() == 1
    assert log == ["late"]


def test_wall_clock_jump_forward_fires_late_run_once_then_next_slot() -> None:
    clock = FakeClock(wall_start=T0)  # 08:30
    s = Scheduler(clock)
    fired: list[str] = []
    s.add(Cron("0 * * * *"), lambda: fired.append(wall(clock).strftime("%H:%M")))
    clock.advance(60)
    clock.jump_wall(3600)  # NTP steps the wall clock forward: 09:31
    assert s.run_pending() == 1  # the 09:00 slot has passed in wall time: runs once, late
    assert fired == ["09:31"]
    assert s.next_run_in() == pytest.approx(29 * 60)  # then 10:00, wall time
    s._check()


def test_wall_clock_jump_back_keeps_wall_times() -> None:
    clock = FakeClock(wall_start=T0)  # 08:30
    s = Scheduler(clock)
    fired: list[str] = []
    s.add(Cron("0 9 * * *"), lambda: fired.append(wall(clock).strftime("%H:%M")))
    clock.advance(60)
    clock.jump_wall(-3600)  # 07:31
    assert s.run_pending() == 0
    assert s.next_run_in() == pytest.approx(89 * 60)  # 09:00 is now 89 minutes away
    clock.advance(89 * 60)
    assert s.run_pending() == 1
    assert fired == ["09:00"]
    s._check()


def test_suspend_and_resume_runs_one_late_run_not_a_burst() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    fired: list[str] = []
    s.add(Cron("0 * * * *"), lambda: fired.append(wall(clock).strftime("%H:%M")))
    s.schedule(3600 * 5, print)  # a monotonic task, unaffected by the wall clock
    mono_due = s.tasks()[-1].due
    # Suspended for 3 h: the monotonic clock stood still, the wall clock did not.
    clock.jump_wall(3 * 3600)
    assert s.next_wakeup_in() == WALL_CHECK_INTERVAL  # the driver wakes to look
    assert s.run_pending() == 1
    assert fired == ["11:30"]
    assert s.next_run_in() == pytest.approx(30 * 60)  # next: 12:00
    assert s.tasks()[-1].due == mono_due
    s._check()


def test_small_wall_drift_is_absorbed(clock: FakeClock) -> None:
    s = Scheduler(clock)
    s.add(Cron("0 * * * *"), print)
    due = s.tasks()[0].due
    clock.jump_wall(0.5)  # NTP slewing: below the tolerance
    s.run_pending()
    assert s.tasks()[0].due == due


def test_slow_drift_moves_due_times_but_never_repeats_a_slot() -> None:
    clock = FakeClock(wall_start=T0 - 30)  # 08:29:30
    s = Scheduler(clock)
    fired: list[float] = []
    s.add(Cron("* * * * *"), lambda: fired.append(clock.wall()))
    clock.advance(30)
    assert s.run_pending() == 1  # 08:30:00
    for _ in range(3):  # NTP slews the wall clock back, 0.4 s between readings
        clock.jump_wall(-0.4)
        clock.advance(10)
        assert s.run_pending() == 0  # 1.2 s in all: re-anchored, 08:30 not run again
    clock.advance(s.next_run_in() or 0.0)
    assert s.run_pending() == 1
    assert fired == [T0, T0 + 60]
    s._check()


def test_step_back_noticed_while_a_cron_job_runs_does_not_stall_it() -> None:
    clock = FakeClock(wall_start=T0 - 30)
    s = Scheduler(clock)
    fired: list[float] = []

    def job() -> None:
        fired.append(clock())
        if len(fired) == 1:
            clock.jump_wall(-7200)  # the step comes while the job runs...
            s.add(At(clock.wall() + 3600), print)  # ...and is noticed here

    s.add(Cron("* * * * *"), job)
    clock.advance(30)
    assert s.run_pending() == 1
    assert s.next_run_in() == 60.0  # the next minute of the new wall time, not 2 h on
    s._check()


def test_next_wakeup_in_without_wall_schedules_is_next_run_in(clock: FakeClock) -> None:
    s = Scheduler(clock)
    assert s.next_wakeup_in() is None
    s.schedule(3600, print)
    assert s.next_wakeup_in() == 3600.0
    tid = s.add(Cron("0 0 1 1 *"), print)
    assert s.next_wakeup_in() == WALL_CHECK_INTERVAL
    s.cancel(tid)
    assert s.next_wakeup_in() == 3600.0
    s._check()


def test_cancel_cron_task_from_its_own_run(clock: FakeClock) -> None:
    s = Scheduler(clock)
    tid = s.add(Cron("* * * * *"), lambda: s.cancel(tid))
    clock.advance(s.next_run_in() or 0)
    assert s.run_pending() == 1
    assert len(s) == 0
    s._check()


def test_wall_clock_defaults(clock: FakeClock) -> None:
    assert Scheduler(clock)._wall_clock == clock.wall
    assert Scheduler(lambda: 0.0)._wall_clock.__name__ == "time"
    with pytest.raises(TypeError, match=r"^wall_clock must be a zero-argument callable, got 1$"):
        Scheduler(wall_clock=1)  # type: ignore[arg-type]


def test_random_wall_jumps_keep_the_scheduler_consistent() -> None:
    rnd = random.Random(11)
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock, rng=random.Random(5))
    ran: list[int] = []
    exprs = ["* * * * *", "*/5 * * * *", "0 * * * *", "30 9 * * *"]
    ids = []
    for step in range(400):
        op = rnd.random()
        if op < 0.2:
            ids.append(s.add(Cron(rnd.choice(exprs), jitter=rnd.choice([0, 5])), lambda: None))
        elif op < 0.3:
            ids.append(s.schedule(rnd.uniform(0, 600), lambda: None, rnd.choice([None, 60.0])))
        elif op < 0.4 and ids:
            s.cancel(rnd.choice(ids))
        elif op < 0.5:
            clock.jump_wall(rnd.choice([-7200, -3600, -0.5, 0.5, 3600, 10800]))
        else:
            clock.advance(rnd.uniform(0, 400))
            ran.append(s.run_pending())
        s._check()
        wait = s.next_wakeup_in()
        assert wait is None or wait >= 0, step
    assert sum(ran) > 100


# -- until: a recurring schedule that ends -------------------------------------------


def _runs(s: Scheduler, clock: FakeClock, seconds: float, step: float = 1.0) -> None:
    """AdvanceFn the clock by ``step`` and tick, for ``seconds``."""
    end = clock() + seconds
    while clock() < end:
        clock.advance(step)
        s.run_pending()


@pytest.mark.parametrize("fixed_delay", [False, True])
def test_every_until_ends_the_schedule_at_that_instant(fixed_delay: bool) -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    ran: list[float] = []
    until = datetime.fromtimestamp(T0 + 35, UTC)
    s.add(Every(10, fixed_delay=fixed_delay, until=until), lambda: ran.append(clock.wall()))
    _runs(s, clock, 100)
    assert ran == [T0 + 10, T0 + 20, T0 + 30]
    assert s.tasks() == [] and s.next_run_in() is None


def test_until_keeps_a_slot_exactly_on_it() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    ran: list[float] = []
    s.add(Every(10, until=T0 + 30), lambda: ran.append(clock.wall()))
    _runs(s, clock, 100)
    assert ran == [T0 + 10, T0 + 20, T0 + 30]


def test_cron_until_ends_the_schedule() -> None:
    clock = FakeClock(wall_start=T0)  # 08:30:00
    s = Scheduler(clock)
    ran: list[datetime] = []
    s.add(Cron("*/5 * * * *", until=T0 + 12 * 60), lambda: ran.append(wall(clock)))
    _runs(s, clock, 3600, step=30.0)
    assert [t.strftime("%H:%M") for t in ran] == ["08:35", "08:40"]
    assert s.tasks() == []


def test_a_schedule_whose_until_has_passed_never_runs() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    ran: list[float] = []
    first = s.add(Every(10, until=T0 - 1), lambda: ran.append(1.0))
    second = s.add(Cron("* * * * *", until=T0 + 30), lambda: ran.append(2.0))
    assert second == first + 1  # ids are still issued, in order
    assert s.tasks() == [] and not s.cancel(first)
    _runs(s, clock, 300)
    assert ran == []


def test_a_slot_carried_past_by_a_clock_step_runs_once_then_until_ends_it() -> None:
    clock = FakeClock(wall_start=T0)  # 08:30
    s = Scheduler(clock)
    ran: list[str] = []
    s.add(Cron("0 * * * *", until=T0 + 3600), lambda: ran.append(wall(clock).strftime("%H:%M")))
    s.run_pending()
    clock.jump_wall(2 * 3600)  # 10:30: the 09:00 slot (before until) was stepped over
    _runs(s, clock, 4 * 3600, step=60.0)
    assert ran == ["10:31"]  # carried past: once, late; 10:00 and later are after until
    assert s.tasks() == []


@pytest.mark.parametrize(
    ("until", "error", "message"),
    [
        (datetime(2026, 1, 1), ValueError, "until must be an aware datetime (with a time zone)"),
        ("tomorrow", TypeError, "until must be an aware datetime or finite POSIX seconds, got 'to"),
        (True, TypeError, "until must be an aware datetime or finite POSIX seconds, got True"),
        (math.nan, TypeError, "until must be an aware datetime or finite POSIX seconds, got nan"),
    ],
)
def test_bad_until_is_refused_naming_it(until: object, error: type, message: str) -> None:
    for make in (lambda: Every(10, until=until), lambda: Cron("@daily", until=until)):
        with pytest.raises(error) as info:
            make()
        assert message in str(info.value)


def test_until_is_kept_as_posix_seconds() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert Every(5, until=moment) == Every(5, until=moment.timestamp())
    assert Every(5, until=moment).until == 1767225600.0


def test_every_until_is_a_wall_instant_even_when_the_clock_steps() -> None:
    # The interval runs on the monotonic clock; its until is read on the wall clock.
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    ran: list[float] = []
    s.add(Every(10, until=T0 + 35), lambda: ran.append(clock()))
    _runs(s, clock, 15)  # ran at monotonic 10
    clock.jump_wall(20)  # the wall reads T0 + 35 at monotonic 15
    _runs(s, clock, 100)
    assert ran == [10.0]  # monotonic 20 is wall T0 + 40, after until
    assert s.tasks() == []


def test_each_kind_answers_what_the_jobs_file_and_the_store_ask() -> None:
    # The daemon asks these instead of the kind (issue 40): calendars, shifts, the stored
    # form of a one-shot, the interval's seconds and a cron expression.
    weekdays = Calendar(weekdays=["sat", "sun"])
    assert [k.takes_calendar for k in (Once, At, Every, Cron)] == [False, False, True, True]
    assert [k.takes_shift for k in (Once, At, Every, Cron)] == [False, False, False, True]
    every = Every(60).with_calendar(weekdays, "skip", "Europe/Berlin", seed="job")
    assert every == Every(60, calendar=weekdays, tz="Europe/Berlin", seed="job")
    cron = Cron("0 9 * * *").with_calendar(weekdays, "next", "Europe/Berlin")
    assert cron == Cron("0 9 * * *", calendar=weekdays, shift="next")
    assert Every(60).with_calendar(None, "skip", "UTC") == Every(60)
    with pytest.raises(TypeError, match="takes no calendar"):
        At(T0).with_calendar(weekdays, "skip", "UTC")
    assert Once(5).declared(T0) == At(T0 + 5)
    assert Every(60).declared(T0) == Every(60)
    assert [Every(60).period, Cron("* * * * *").period, Once(5).period] == [60, None, None]
    assert Cron("*/5 * * * *").cron_expression is not None
    assert Every(60).cron_expression is None
