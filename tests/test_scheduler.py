"""The core's contract (docs/concepts.md#the-contract): its examples verbatim, each rule."""

from __future__ import annotations

import logging
import math
import re
from fractions import Fraction

import pytest

from tickwork import EventKind, Every, RunEvent, Scheduler, TaskInfo
from tickwork._core.scheduler import COMPACT_SLACK, DEFAULT_MAX_ERRORS
from tickwork.testing import FakeClock

from .conftest import Log

# -- the contract's examples (docs/concepts.md), verbatim ----------------------------


def test_spec_example_1(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    out = []
    out.append(s.schedule(5, log.job("backup")))
    out.append(s.schedule(2, log.job("rotate")))
    out.append(s.schedule(3, log.job("probe"), interval=3))
    out.append(s.schedule(4, log.job("noop")))
    out.append(s.cancel(4))
    clock.set(1)
    out.append(s.run_pending())
    clock.set(2)
    out.append(s.run_pending())
    clock.set(6)
    out.append(s.run_pending())
    clock.set(9)
    out.append(s.run_pending())
    out.append(s.next_run_in())
    out.append(s.cancel(3))
    clock.set(20)
    out.append(s.run_pending())
    out.append(s.cancel(3))
    out.append(s.next_run_in())
    assert out == [1, 2, 3, 4, True, 0, 1, 2, 1, 3.0, True, 0, False, None]
    assert type(out[9]) is float
    assert log == ["rotate", "probe", "backup", "probe"]
    s._check()


def test_spec_example_2(clock: FakeClock, log: Log, caplog: pytest.LogCaptureFixture) -> None:
    s = Scheduler(clock)

    def boom() -> None:
        raise OSError("disk full")

    def once_then_stop() -> None:
        log.append("tick")
        s.cancel(3)

    out = [
        s.schedule(1, boom),
        s.schedule(1, log.job("after-boom")),
        s.schedule(1, once_then_stop, interval=1),
    ]
    clock.set(1)
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        out.append(s.run_pending())
    clock.set(5)
    out.append(s.run_pending())
    assert out == [1, 2, 3, 3, 0]
    assert s.errors == ["task 1: disk full"]
    assert log == ["after-boom", "tick"]
    assert len(s) == 0
    s._check()


# -- rule 1: due at t + d ------------------------------------------------------------


def test_rule1_due_is_schedule_time_plus_delay(clock: FakeClock, log: Log) -> None:
    clock.set(10)
    s = Scheduler(clock)
    s.schedule(2.5, log.job("a"))
    clock.set(12.4)
    assert s.run_pending() == 0
    assert s.next_run_in() == pytest.approx(0.1)
    clock.set(12.5)
    assert s.run_pending() == 1
    assert log == ["a"]


def test_rule1_zero_delay_is_due_immediately(sched: Scheduler, log: Log) -> None:
    sched.schedule(0, log.job("now"))
    assert sched.next_run_in() == 0.0
    assert sched.run_pending() == 1
    assert log == ["now"]


# -- rule 2: one clock read, due order, ties in scheduling order ----------------------


def test_rule2_due_order_then_scheduling_order(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(3, log.job("c"))
    s.schedule(1, log.job("a1"))
    s.schedule(2, log.job("b"))
    s.schedule(1, log.job("a2"))
    s.schedule(1, log.job("a3"))
    clock.set(3)
    assert s.run_pending() == 5
    assert log == ["a1", "a2", "a3", "b", "c"]


def test_rule2_same_time_tie_survives_cancel(clock: FakeClock, log: Log) -> None:
    # The sched regression (bpo-19270): cancelling one of several equal-time tasks must
    # cancel exactly that one and keep the others in order.
    s = Scheduler(clock)
    ids = [s.schedule(1, log.job(str(i))) for i in range(6)]
    assert s.cancel(ids[2])
    assert s.cancel(ids[4])
    clock.set(1)
    assert s.run_pending() == 4
    assert log == ["0", "1", "3", "5"]


def test_rule2_clock_read_once_slow_job_does_not_chase(log: Log) -> None:
    reads = []
    t = [0.0]

    def clock() -> float:
        reads.append(t[0])
        return t[0]

    s = Scheduler(clock)

    def slow() -> None:
        t[0] += 10  # the job takes 10 s
        log.append("slow")

    s.schedule(1, slow)
    s.schedule(5, log.job("later"))
    t[0] = 1
    reads.clear()
    assert s.run_pending() == 1  # "later" became due while slow ran: next call
    assert reads == [1]
    assert log == ["slow"]
    assert s.run_pending() == 1
    assert log == ["slow", "later"]


# -- rule 3: one-shots are removed ----------------------------------------------------


def test_rule3_one_shot_removed_after_run(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    tid = s.schedule(1, log.job("a"))
    clock.set(1)
    s.run_pending()
    assert tid not in s
    assert len(s) == 0
    assert s.cancel(tid) is False
    clock.set(100)
    assert s.run_pending() == 0
    assert log == ["a"]


# -- rule 4: fixed-rate rescheduling, missed runs skipped -----------------------------


def test_rule4_on_time_stays_on_grid(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    tid = s.schedule(3, log.job("p"), interval=3)
    for t in (3, 6, 9, 12):
        clock.set(t + 0.5)  # a little late each time, still before the next slot
        assert s.run_pending() == 1
        assert s.tasks()[0].due == t + 3
    assert tid in s


def test_rule4_late_call_skips_missed_slots(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(3, log.job("p"), interval=3)
    clock.set(16)  # slots 3, 6, 9, 12, 15 all passed
    assert s.run_pending() == 1  # at most once per call, no burst
    assert s.tasks()[0].due == 19  # now + interval, since 6 <= now
    assert s.run_pending() == 0


def test_rule4_next_slot_equal_to_now_is_not_future(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(3, log.job("p"), interval=3)
    clock.set(6)
    assert s.run_pending() == 1
    assert s.tasks()[0].due == 9
    assert log == ["p"]


# -- rule 5: failures recorded, the rest keep going ------------------------------------


def test_rule5_failure_recorded_and_recurring_rescheduled(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)

    def bad() -> None:
        raise ValueError("nope")

    tid = s.schedule(1, bad, interval=1)
    s.schedule(1, log.job("ok"))
    clock.set(1)
    assert s.run_pending() == 2
    clock.set(2)
    assert s.run_pending() == 1
    assert s.errors == [f"task {tid}: nope", f"task {tid}: nope"]
    assert log == ["ok"]
    assert tid in s


def test_rule5_failure_is_logged_with_traceback(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(clock)

    def bad() -> None:
        raise KeyError("k")

    s.schedule(0, bad)
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        s.run_pending()
    [record] = caplog.records
    assert record.name == "tickwork"
    assert record.getMessage() == "task 1 failed: 'k'"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], KeyError)
    assert s.errors == ["task 1: 'k'"]


def test_rule5_on_error_hook_receives_id_and_exception(clock: FakeClock) -> None:
    seen: list[tuple[int, Exception]] = []
    s = Scheduler(clock, on_error=lambda tid, exc: seen.append((tid, exc)))
    exc = RuntimeError("x")

    def bad() -> None:
        raise exc

    s.schedule(0, bad)
    s.run_pending()
    assert seen == [(1, exc)]


def test_rule5_on_error_hook_that_raises_is_contained(
    clock: FakeClock, log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    def hook(tid: int, exc: Exception) -> None:
        raise RuntimeError("hook broke")

    s = Scheduler(clock, on_error=hook)
    s.schedule(0, lambda: 1 / 0)
    s.schedule(0, log.job("after"))
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        assert s.run_pending() == 2
    assert log == ["after"]
    assert s.errors == ["task 1: division by zero"]
    assert "on_error hook raised while handling task 1" in caplog.text


def test_errors_are_bounded_keeping_the_newest(clock: FakeClock) -> None:
    s = Scheduler(clock, max_errors=3)
    counter = iter(range(100))

    def bad() -> None:
        raise RuntimeError(f"failure {next(counter)}")

    s.schedule(1, bad, interval=1)
    for t in range(1, 11):
        clock.set(t)
        s.run_pending()
    assert s.errors == ["task 1: failure 7", "task 1: failure 8", "task 1: failure 9"]
    s._check()


def test_errors_default_bound_and_unbounded(clock: FakeClock) -> None:
    assert DEFAULT_MAX_ERRORS == 1000
    s = Scheduler(clock, max_errors=None)
    for _ in range(DEFAULT_MAX_ERRORS + 5):
        s.schedule(0, lambda: 1 / 0)
    s.run_pending()
    assert len(s.errors) == DEFAULT_MAX_ERRORS + 5
    s = Scheduler(clock, max_errors=0)
    s.schedule(0, lambda: 1 / 0)
    s.run_pending()
    assert s.errors == []


# -- rule 6: cancelling while running ---------------------------------------------------


def test_rule6_job_cancels_a_later_task_in_the_same_call(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(1, lambda: (log.append("first"), s.cancel(2)))
    s.schedule(1, log.job("second"))
    s.schedule(1, log.job("third"))
    clock.set(1)
    assert s.run_pending() == 2
    assert log == ["first", "third"]
    s._check()


def test_rule6_job_cancels_an_earlier_one_shot_returns_false(clock: FakeClock) -> None:
    s = Scheduler(clock)
    results = []
    s.schedule(1, lambda: None)
    s.schedule(1, lambda: results.append(s.cancel(1)))
    clock.set(1)
    s.run_pending()
    assert results == [False]


def test_rule6_one_shot_cancelling_itself_returns_false(clock: FakeClock) -> None:
    s = Scheduler(clock)
    results = []
    s.schedule(1, lambda: results.append(s.cancel(1)))
    clock.set(1)
    assert s.run_pending() == 1
    assert results == [False]
    s._check()


def test_rule6_recurring_self_cancel_not_rescheduled(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    results = []

    def once() -> None:
        log.append("tick")
        results.append(s.cancel(1))

    s.schedule(1, once, interval=1)
    clock.set(1)
    s.run_pending()
    assert results == [True]
    assert 1 not in s
    s._check()
    clock.set(10)
    assert s.run_pending() == 0
    assert log == ["tick"]


def test_rule6_recurring_cancelled_by_other_job_during_call(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(1, log.job("rec"), interval=1)
    s.schedule(1, lambda: s.cancel(1))
    clock.set(1)
    assert s.run_pending() == 2
    assert 1 not in s
    assert s.next_run_in() is None
    s._check()


# -- rule 7: complexity (cancel never scans) --------------------------------------------


def test_rule7_cancel_does_not_touch_the_heap(sched: Scheduler) -> None:
    ids = [sched.schedule(i, lambda: None) for i in range(1, 101)]
    heap_before = list(sched._heap)
    assert sched.cancel(ids[50])
    assert sched._heap == heap_before  # O(1): marked dead in place, not removed
    assert sched._dead == 1
    sched._check()


# -- rule 8: bad delay / interval, nothing scheduled, no id used up --------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        ({"delay": -1}, ValueError, "delay must be a finite number >= 0, got -1"),
        ({"delay": -0.5}, ValueError, "delay must be a finite number >= 0, got -0.5"),
        ({"delay": math.nan}, ValueError, "delay must be a finite number >= 0, got nan"),
        ({"delay": math.inf}, ValueError, "delay must be a finite number >= 0, got inf"),
        ({"delay": True}, TypeError, "delay must be a number of seconds, got True"),
        ({"delay": "5"}, TypeError, "delay must be a number of seconds, got '5'"),
        ({"delay": None}, TypeError, "delay must be a number of seconds, got None"),
        ({"interval": 0}, ValueError, "interval must be a finite number > 0, got 0"),
        ({"interval": -3}, ValueError, "interval must be a finite number > 0, got -3"),
        ({"interval": math.nan}, ValueError, "interval must be a finite number > 0, got nan"),
        ({"interval": math.inf}, ValueError, "interval must be a finite number > 0, got inf"),
        ({"interval": False}, TypeError, "interval must be a number of seconds, got False"),
        ({"interval": "3"}, TypeError, "interval must be a number of seconds, got '3'"),
        ({"fn": 42}, TypeError, "fn must be callable, got 42"),
        ({"fn": None}, TypeError, "fn must be callable, got None"),
        (
            {"fixed_delay": True},
            ValueError,
            "fixed_delay=True needs an interval, got interval=None",
        ),
        (
            {"interval": 1, "fixed_delay": 1},
            TypeError,
            "fixed_delay must be a bool, got 1",
        ),
    ],
)
def test_rule8_bad_arguments_raise_and_schedule_nothing(
    sched: Scheduler, kwargs: dict[str, object], exc: type[Exception], message: str
) -> None:
    args: dict[str, object] = {"delay": 1, "fn": lambda: None}
    args.update(kwargs)
    with pytest.raises(exc, match=f"^{message}$"):
        sched.schedule(**args)  # type: ignore[arg-type]
    assert len(sched) == 0
    assert sched.next_run_in() is None
    assert sched.schedule(1, lambda: None) == 1  # no id was used up
    sched._check()


# -- rule 4 for any interval: at most once per call, even below the clock's resolution --


def _tiny_interval_message(due: float, interval: float) -> str:
    return re.escape(
        f"interval must be at least {math.ulp(due)!r} s, the clock's resolution at the"
        f" first due time {due!r}, got {interval!r}"
    )


@pytest.mark.parametrize(
    ("now", "interval"),
    [(1e6, 1e-12), (1_700_000_000.0, 1e-7), (1_700_000_000.0, 2e-7)],
    ids=["issue-11", "time.time-1e-7", "time.time-2e-7"],
)
def test_an_interval_the_clock_cannot_resolve_is_refused(
    clock: FakeClock, now: float, interval: float
) -> None:
    clock.set(now)
    s = Scheduler(clock)
    message = _tiny_interval_message(now, interval)
    with pytest.raises(ValueError, match=f"^{message}$"):
        s.schedule(0, lambda: None, interval=interval)
    with pytest.raises(ValueError, match=f"^{message}$"):
        s.schedule(0, lambda: None, interval=interval, fixed_delay=True)
    with pytest.raises(ValueError, match=f"^{message}$"):
        s.add(Every(interval, first=0), lambda: None)
    with pytest.raises(ValueError, match=f"^{message}$"):
        s.add(Every(interval, first=0, fixed_delay=True), lambda: None)
    # the resolution itself is enough: each run moves the due time
    assert s.schedule(0, lambda: None, interval=math.ulp(now)) == 1  # no id was used up
    assert s.run_pending() == 1
    assert s.tasks()[0].due == now + math.ulp(now)
    s._check()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("observed", [False, True], ids=["fast-path", "with-listener"])
def test_an_interval_the_clock_outgrew_still_runs_at_most_once_per_call(
    clock: FakeClock, observed: bool
) -> None:
    # Accepted at t=0; at t=1e6, now + interval == now. It must never loop in one call.
    s = Scheduler(clock)
    if observed:
        s.add_listener(lambda event: None)
    runs: list[str] = []
    s.schedule(0, lambda: runs.append("rate"), interval=1e-12)
    s.schedule(0, lambda: runs.append("delay"), interval=1e-12, fixed_delay=True)
    s.add(Every(1e-12, first=0, jitter=1e-13), lambda: runs.append("jitter"))
    s.add(Every(1e-12, first=0), lambda: runs.append("every"))
    clock.set(1e6)
    assert s.run_pending() == 4
    assert sorted(runs) == ["delay", "every", "jitter", "rate"]
    assert all(t.due > 1e6 for t in s.tasks())  # strictly past now
    assert s.run_pending() == 0  # the same now: nothing is due again
    clock.advance(1)
    assert s.run_pending() == 4
    assert len(runs) == 8
    s._check()


def test_numeric_types_accepted(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(Fraction(1, 2), log.job("fraction"))
    s.schedule(1, log.job("int"), interval=Fraction(3, 2))
    clock.set(1)
    assert s.run_pending() == 2
    assert s.tasks()[0].due == 2.5
    assert isinstance(s.tasks()[0].due, float)


# -- open point: tasks scheduled during run_pending wait -------------------------------


def test_tasks_scheduled_by_a_job_wait_for_the_next_call(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)

    def spawner() -> None:
        log.append("spawner")
        s.schedule(0, log.job("child"))

    s.schedule(1, spawner)
    s.schedule(1, log.job("sibling"))
    clock.set(1)
    assert s.run_pending() == 2
    assert log == ["spawner", "sibling"]
    assert s.next_run_in() == 0.0
    s._check()
    assert s.run_pending() == 1
    assert log == ["spawner", "sibling", "child"]


def test_held_task_runs_next_call_after_older_due_tasks(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(1, lambda: s.schedule(0, log.job("child")))  # child due at 5, when it runs
    s.schedule(5, log.job("old"))  # due at 5 too, scheduled before the call
    clock.set(5)
    assert s.run_pending() == 2
    assert log == ["old"]  # the child was held back although it is due at 5
    assert s.run_pending() == 1
    assert log == ["old", "child"]
    s._check()


def test_self_rescheduling_with_delay_zero_cannot_loop_forever(clock: FakeClock) -> None:
    s = Scheduler(clock)
    count = [0]

    def again() -> None:
        count[0] += 1
        s.schedule(0, again)

    s.schedule(0, again)
    for expected in range(1, 6):
        assert s.run_pending() == 1
        assert count[0] == expected
    assert len(s) == 1
    s._check()


def test_cancel_a_held_task(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(0, lambda: s.cancel(s.schedule(0, log.job("never"))))
    assert s.run_pending() == 1
    s._check()
    assert s.run_pending() == 0
    assert log == []
    assert s.next_run_in() is None


def test_task_scheduled_in_future_during_call_goes_to_heap(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    s.schedule(0, lambda: s.schedule(2, log.job("later")))
    s.run_pending()
    assert s.next_run_in() == 2.0
    clock.advance(2)
    assert s.run_pending() == 1


def test_run_pending_is_not_reentrant(clock: FakeClock) -> None:
    s = Scheduler(clock)
    s.schedule(0, lambda: s.run_pending())
    assert s.run_pending() == 1
    assert s.errors == ["task 1: run_pending() called from inside a job of the same scheduler"]


# -- open point: BaseException propagates, state stays consistent ---------------------


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_base_exception_from_one_shot(clock: FakeClock, log: Log, exc_type: type) -> None:
    s = Scheduler(clock)

    def interrupt() -> None:
        raise exc_type()

    s.schedule(1, log.job("before"))
    tid = s.schedule(1, interrupt)
    s.schedule(1, log.job("after"))
    s.schedule(1, lambda: s.schedule(0, log.job("held")))
    clock.set(1)
    with pytest.raises(exc_type):
        s.run_pending()
    s._check()
    assert log == ["before"]
    assert s.cancel(tid) is False  # counts as finished
    assert s.errors == []
    assert s.run_pending() == 2  # "after" and the spawner
    assert s.run_pending() == 1  # "held" (scheduled during the second call)
    assert log == ["before", "after", "held"]


def test_base_exception_from_recurring_reschedules_it(clock: FakeClock) -> None:
    s = Scheduler(clock)

    def interrupt() -> None:
        raise KeyboardInterrupt

    tid = s.schedule(3, interrupt, interval=3)
    clock.set(3)
    with pytest.raises(KeyboardInterrupt):
        s.run_pending()
    s._check()
    assert [t.due for t in s.tasks()] == [6.0]
    assert tid in s
    assert s._tick_now is None


def test_base_exception_with_listeners(clock: FakeClock) -> None:
    s = Scheduler(clock)
    events: list[RunEvent] = []
    s.add_listener(events.append)

    def interrupt() -> None:
        raise SystemExit(3)

    s.schedule(1, interrupt, interval=1)
    clock.set(1)
    with pytest.raises(SystemExit):
        s.run_pending()
    s._check()
    assert [e.kind for e in events] == [EventKind.STARTED]
    assert s.tasks()[0].due == 2


# -- open point: the clock ---------------------------------------------------------------


def test_clock_going_backwards_never_moves_the_schedule_back(
    log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    t = [10.0]
    s = Scheduler(lambda: t[0])
    s.schedule(5, log.job("a"))  # due 15
    t[0] = 12
    assert s.run_pending() == 0
    t[0] = 2  # stepped back 10 s
    with caplog.at_level(logging.WARNING, logger="tickwork"):
        assert s.next_run_in() == 3.0  # measured from the last reading, 12
        s.schedule(1, log.job("b"))  # due 13, not 3
    assert "clock went backwards" in caplog.text
    assert [x.due for x in s.tasks()] == [13.0, 15.0]
    t[0] = 15
    assert s.run_pending() == 2
    assert log == ["b", "a"]


@pytest.mark.parametrize("bad", [math.nan, "soon", None])
def test_clock_returning_garbage_is_refused(bad: object) -> None:
    s = Scheduler(lambda: bad)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match=r"^clock must return a number of seconds, got "):
        s.schedule(1, lambda: None)
    assert len(s) == 0


def test_constructor_validates_arguments() -> None:
    with pytest.raises(TypeError, match=r"^clock must be a zero-argument callable, got 5$"):
        Scheduler(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^max_errors must be an int >= 0 or None, got -1$"):
        Scheduler(max_errors=-1)
    with pytest.raises(ValueError, match=r"^max_errors must be an int >= 0 or None, got 1.5$"):
        Scheduler(max_errors=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^on_error must be callable or None, got 'x'$"):
        Scheduler(on_error="x")  # type: ignore[arg-type]


def test_default_clock_is_monotonic() -> None:
    s = Scheduler()
    s.schedule(0, lambda: None)
    assert s.run_pending() == 1
    s.schedule(3600, lambda: None)
    wait = s.next_run_in()
    assert wait is not None
    assert 3599 < wait <= 3600


# -- open point: memory held by cancelled tasks ------------------------------------------


def test_cancel_frees_the_callable_immediately(sched: Scheduler) -> None:
    import gc
    import weakref

    class Job:
        def __call__(self) -> None:
            pass

    job = Job()
    ref = weakref.ref(job)
    tid = sched.schedule(100, job)
    del job
    assert ref() is not None
    assert sched.cancel(tid)
    gc.collect()
    assert ref() is None


def test_compaction_keeps_dead_entries_bounded(clock: FakeClock) -> None:
    s = Scheduler(clock)
    keep = [s.schedule(10_000 + i, lambda: None) for i in range(100)]
    peak_dead = 0
    compactions = 0
    for round_ in range(20):
        ids = [s.schedule(1 + i % 50, lambda: None) for i in range(1000)]
        for tid in ids:
            before = s._dead
            assert s.cancel(tid)
            if s._dead < before:
                compactions += 1
            peak_dead = max(peak_dead, s._dead)
            assert s._dead <= len(s) + COMPACT_SLACK
        s._check()
        assert len(s._heap) <= 2 * len(s) + COMPACT_SLACK + 1, round_
    assert compactions >= 10  # the rule fired, repeatedly
    assert peak_dead > COMPACT_SLACK  # dead entries did pile up before each compaction
    assert len(s) == len(keep)


def test_compaction_while_running_does_not_lose_tasks(clock: FakeClock, log: Log) -> None:
    s = Scheduler(clock)
    victims = [s.schedule(100, lambda: None) for _ in range(COMPACT_SLACK + 10)]

    def cancel_all() -> None:
        for tid in victims:
            s.cancel(tid)  # triggers a compaction in the middle of run_pending

    s.schedule(1, cancel_all)
    s.schedule(1, log.job("a"))
    s.schedule(2, log.job("b"), interval=1)
    clock.set(2)
    assert s.run_pending() == 3
    s._check()
    assert log == ["a", "b"]
    assert s._dead < 10  # compacted mid-call; only the last few cancels left dead entries
    assert len(s._heap) - s._dead == 1


def test_dead_entries_shed_when_live_tasks_run_out(clock: FakeClock) -> None:
    s = Scheduler(clock)
    live = [s.schedule(1, lambda: None) for _ in range(2000)]
    for tid in [s.schedule(50, lambda: None) for _ in range(1500)]:
        s.cancel(tid)
    assert s._dead == 1500  # 1500 <= 3500 live + slack: no compaction yet
    clock.set(1)
    assert s.run_pending() == len(live)
    s._check()  # live dropped to 0: run_pending compacted the dead away
    assert s._heap == []


def test_next_run_in_skips_dead_head(clock: FakeClock) -> None:
    s = Scheduler(clock)
    a = s.schedule(1, lambda: None)
    s.schedule(4, lambda: None)
    s.cancel(a)
    assert s.next_run_in() == 4.0
    assert s._dead == 0
    s._check()


# -- introspection ---------------------------------------------------------------------


def test_introspection(clock: FakeClock) -> None:
    s = Scheduler(clock)

    def f() -> None:
        pass

    a = s.schedule(5, f)
    b = s.schedule(2, f, interval=7)
    c = s.schedule(2, f, interval=1, fixed_delay=True)
    s.cancel(a)
    assert len(s) == 2
    assert b in s
    assert c in s
    assert a not in s
    assert "x" not in s
    assert s.tasks() == [
        TaskInfo(b, 2.0, f, 7.0, False),
        TaskInfo(c, 2.0, f, 1.0, True),
    ]


# -- fixed-delay ------------------------------------------------------------------------


def test_fixed_delay_measures_from_the_end_of_the_run(log: Log) -> None:
    clock = FakeClock()
    s = Scheduler(clock)

    def slow() -> None:
        log.append(f"start {clock.now:g}")
        clock.advance(4)  # runs for 4 s

    s.schedule(1, slow, interval=2, fixed_delay=True)
    clock.set(1)
    s.run_pending()
    assert s.tasks()[0].due == 7.0  # finished at 5, +2
    clock.set(7)
    s.run_pending()
    assert s.tasks()[0].due == 13.0
    assert log == ["start 1", "start 7"]


def test_fixed_rate_with_slow_job_keeps_its_grid(log: Log) -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    s.schedule(1, lambda: clock.advance(1.5), interval=2)
    clock.set(1)
    s.run_pending()
    assert s.tasks()[0].due == 3.0  # due + interval, regardless of the run's length


def test_fixed_delay_failure_still_rescheduled(clock: FakeClock) -> None:
    s = Scheduler(clock)
    s.schedule(0, lambda: 1 / 0, interval=5, fixed_delay=True)
    s.run_pending()
    assert s.tasks()[0].due == 5.0
    assert s.errors == ["task 1: division by zero"]


# -- events ----------------------------------------------------------------------------


def test_listener_receives_started_finished_failed_missed() -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    events: list[RunEvent] = []
    s.add_listener(events.append)
    err = RuntimeError("bad")

    def bad() -> None:
        clock.advance(0.25)
        raise err

    s.schedule(1, lambda: clock.advance(0.5))
    s.schedule(1, bad)
    s.schedule(1, lambda: None, interval=1)
    clock.set(4)
    assert s.run_pending() == 3
    assert events == [
        RunEvent(EventKind.STARTED, 1, 1.0, 4.0),
        RunEvent(EventKind.FINISHED, 1, 1.0, 4.0, 0.5),
        RunEvent(EventKind.STARTED, 2, 1.0, 4.5),
        RunEvent(EventKind.FAILED, 2, 1.0, 4.5, 0.25, err),
        RunEvent(EventKind.STARTED, 3, 1.0, 4.75),
        RunEvent(EventKind.FINISHED, 3, 1.0, 4.75, 0.0),
        # the next slots 2, 3 and 4 are all <= now (4): skipped, next run at 5
        RunEvent(EventKind.MISSED, 3, 2.0, missed=3),
    ]
    assert s.tasks()[0].due == 5.0
    assert s.errors == ["task 2: bad"]


def test_listener_that_raises_never_breaks_the_scheduler(
    clock: FakeClock, log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(clock)
    good: list[RunEvent] = []

    def broken(event: RunEvent) -> None:
        raise RuntimeError("listener broke")

    s.add_listener(broken)
    s.add_listener(good.append)
    s.schedule(0, log.job("a"))
    with caplog.at_level(logging.ERROR, logger="tickwork"):
        assert s.run_pending() == 1
    assert log == ["a"]
    assert [e.kind for e in good] == [EventKind.STARTED, EventKind.FINISHED]
    assert "event listener" in caplog.text
    assert s.errors == []
    s.remove_listener(broken)
    s.remove_listener(broken)  # unknown: ignored
    s.remove_listener(good.append)
    s.schedule(0, log.job("b"))
    s.run_pending()
    assert len(good) == 2


def test_add_listener_validates() -> None:
    with pytest.raises(TypeError, match=r"^listener must be callable, got 3$"):
        Scheduler().add_listener(3)  # type: ignore[arg-type]


def test_observed_path_follows_the_same_rules(clock: FakeClock, log: Log) -> None:
    # Example 1 again, with a listener attached: identical outputs.
    s = Scheduler(clock)
    s.add_listener(lambda e: None)
    s.schedule(5, log.job("backup"))
    s.schedule(2, log.job("rotate"))
    s.schedule(3, log.job("probe"), interval=3)
    s.schedule(4, log.job("noop"))
    s.cancel(4)
    results = []
    for t in (1, 2, 6, 9):
        clock.set(t)
        results.append(s.run_pending())
    assert results == [0, 1, 2, 1]
    assert log == ["rotate", "probe", "backup", "probe"]
    s.schedule(0, lambda: s.schedule(0, log.job("held")))
    assert s.run_pending() == 1
    assert s.run_pending() == 1
    s._check()
