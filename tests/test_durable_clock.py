"""DurableScheduler under wall-clock steps and suspends, on injected clocks (issue 11, point 2).

No real time passes: a `FakeClock` gives the wall clock (``clock.wall``) and the
monotonic one (``clock``), the pool runs each job inline when it is submitted, and
`simulate` plays the timing thread: it calls ``_step`` and then lets exactly the time
the step asked to sleep pass. A wall step happens in the middle of such a sleep, so
the scheduler notices it at its next look, as the real thread would (at most ``poll``
seconds later).

What is checked (``docs/durability.md``, "Wall-clock steps and suspends"):

- after a step back or forward of 30 s, 2 h, 4 h or 1 day, a ``* * * * *`` job runs
  again within 60 s, and 1-s and 7-s interval jobs within their interval, of real time
  counted from the scheduler's first look after the step, which comes at most ``poll``
  after it;
- no slot runs twice in one pass of the clock, and no job runs more often than its
  period of real time allows (no burst after a step);
- a fixed-time job (``0 12 * * *``) follows the table of docs/cron.md;
- a suspend (wall and monotonic clocks jump together) is downtime: the missed-run
  policy decides, no step is reported;
- ``tickwork run``'s Python path (`Daemon`) gets the same behaviour;
- with ``missed="all"`` a step forward's passed slots (up to ``missed_cap``) are all
  replayed at the first look after it, in order, through the public test path
  (``step()``, `InlineExecutor`), on SQLite and PostgreSQL; then the job is on its
  grid within one period, with no gap shorter than it (issue 39, point 2).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tickwork import Cron, DurableScheduler, EventKind, Every, RunEvent
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

REC = "tests.durable_jobs:record"
POLL = 1.0
#: 2024-01-01 12:00:00 UTC, a Monday.
NOON = datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp()
DAY = 86400.0
STEPS = [-30.0, -7200.0, -14400.0, -DAY, 30.0, 7200.0, 14400.0, DAY]


class Inline(Executor):
    """Runs each job as soon as it is submitted, on the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fn(*args, **kwargs)
        done: Future[Any] = Future()
        done.set_result(None)
        return done


@dataclass(frozen=True)
class Run:
    job_id: str
    scheduled: float
    real: float  # the monotonic reading when it started
    wall: float


class Harness:
    """One scheduler on injected clocks, and what it ran."""

    def __init__(self, ds: DurableScheduler, clock: FakeClock) -> None:
        self.ds = ds
        self.clock = clock
        self.runs: list[Run] = []
        self.missed: list[RunEvent] = []
        self.looks: list[float] = []  # monotonic readings of every _step
        ds.add_listener(self._on_event)

    def _on_event(self, e: RunEvent) -> None:
        if e.kind is EventKind.STARTED:
            assert e.job_id is not None
            self.runs.append(Run(e.job_id, e.scheduled, self.clock(), self.clock.wall()))
        elif e.kind is EventKind.MISSED:
            self.missed.append(e)

    def step(self) -> float:
        self.looks.append(self.clock())
        return self.ds._step()

    def simulate(self, seconds: float, *, jump: float = 0.0) -> float:
        """Let ``seconds`` of real time pass; the wall steps by ``jump`` mid-sleep.

        Returns the monotonic reading of the step (or of the start, without a jump).
        """
        end = self.clock() + seconds
        at = self.clock()
        jumped = jump == 0.0
        for _ in range(200_000):
            wait = self.step()
            assert 0.0 <= wait <= self.ds._poll, wait
            if not jumped:
                self.clock.advance(min(wait, end - self.clock()) / 2)
                at = self.clock()
                self.clock.jump_wall(jump)
                jumped = True
                self.clock.advance(min(wait / 2, end - self.clock()))
            else:
                self.clock.advance(min(wait, end - self.clock()))
            if self.clock() >= end:
                return at
        raise AssertionError("the scheduler never slept")

    def of(self, job_id: str, since: float = -1.0) -> list[Run]:
        return [r for r in self.runs if r.job_id == job_id and r.real > since]

    def first_look_after(self, t: float) -> float:
        return min(x for x in self.looks if x > t)


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    stores: list[SQLiteStore] = []

    def new(*specs: JobSpec, wall: float, poll: float = POLL) -> Harness:
        clock = FakeClock(1000.0, wall_start=wall)
        store = SQLiteStore(tmp_path / f"jobs{len(stores)}.db")
        stores.append(store)
        ds = DurableScheduler(
            store,
            executor=Inline(),
            max_workers=4,
            poll=poll,
            wall_clock=clock.wall,
            monotonic_clock=clock,
        )
        for spec in specs:
            ds.declare(spec)
        return Harness(ds, clock)

    yield new
    for s in stores:
        s.close()


def cron(job_id: str, expr: str, **kw: Any) -> JobSpec:
    return JobSpec(job_id, REC, Cron(expr), args=[job_id], **kw)


def every(job_id: str, seconds: float, **kw: Any) -> JobSpec:
    return JobSpec(job_id, REC, Every(seconds), args=[job_id], **kw)


PERIODS = {"minute": 60.0, "every1": 1.0, "every7": 7.0}


def no_slot_twice_per_pass(runs: list[Run]) -> None:
    slots = [r.scheduled for r in runs]
    assert len(set(slots)) == len(slots), f"a slot ran twice: {slots}"


@pytest.mark.parametrize("jump", STEPS, ids=[f"{s:+.0f}s" for s in STEPS])
def test_wildcard_and_interval_jobs_never_stall_after_a_wall_step(
    make: Callable[..., Harness], jump: float
) -> None:
    h = make(
        cron("minute", "* * * * *"),
        every("every1", 1.0),
        every("every7", 7.0),
        wall=NOON + 10,
    )
    h.simulate(130.0)
    before = {j: h.of(j) for j in PERIODS}
    assert len(before["minute"]) == 2 and len(before["every1"]) >= 120
    at = h.simulate(180.0, jump=jump)
    look = h.first_look_after(at)
    assert look - at <= POLL
    for job_id, period in PERIODS.items():
        after = h.of(job_id, since=at)
        assert after, f"{job_id} never ran again after a {jump:+.0f} s step"
        assert after[0].real - look <= period + 1e-6, (job_id, after[0], look)
        # Each pass on its own: no slot twice; and never a burst of runs.
        no_slot_twice_per_pass(before[job_id])
        no_slot_twice_per_pass(after)
        gaps = [b.real - a.real for a, b in pairwise(after)]
        assert all(g >= period - 1e-6 for g in gaps), (job_id, gaps)
        # Real time keeps its pace: 180 s hold 180 / period runs, give or take a couple.
        assert len(after) >= 180.0 / period - 3, (job_id, len(after))
        if jump > 0:  # forward: the new pass lies after the old one, nothing repeats
            assert max(r.scheduled for r in before[job_id]) < after[0].scheduled


def test_the_issue_repro_an_hour_back_does_not_stop_a_one_second_job(
    make: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    h = make(every("e", 1.0), wall=NOON)
    h.simulate(5.0)
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        at = h.simulate(10.0, jump=-3600.0)
    state = h.ds.get("e")
    assert state is not None and state.next_run is not None
    assert state.next_run - h.clock.wall() <= 1.0  # was 3597 s before the fix
    assert len(h.of("e", since=at)) >= 8
    assert "wall clock stepped back by 3600.0 s" in caplog.text


def test_a_job_paused_across_a_step_back_does_not_stall_on_resume(
    make: Callable[..., Harness],
) -> None:
    h = make(every("e", 5.0), wall=NOON)
    h.simulate(12.0)
    h.ds.pause("e")
    h.simulate(10.0, jump=-7200.0)
    h.ds.resume("e")
    resumed = h.clock()
    h.simulate(10.0)
    after = h.of("e", since=resumed)
    assert after and after[0].real - resumed <= 5.0


# docs/cron.md, for a fixed-time job: (jump, runs of "0 12 * * *" on day 1 / day 2 seen)
@pytest.mark.parametrize(
    ("jump", "ran"),
    [
        (30.0, [NOON]),  # forward < 5 min: once, right after the jump
        (7200.0, [NOON]),  # forward < 3 h: its skipped time runs once, right after
        (14400.0, []),  # forward >= 3 h: nothing for the vanished time
        (DAY, [NOON + DAY]),  # nothing for the vanished day; the next day's noon as usual
    ],
)
def test_fixed_time_cron_after_a_step_forward(
    make: Callable[..., Harness], jump: float, ran: list[float]
) -> None:
    h = make(cron("noon", "0 12 * * *"), wall=NOON - 20)
    h.simulate(5.0)
    at = h.simulate(60.0, jump=jump)
    runs = h.of("noon")
    assert [r.scheduled for r in runs] == ran
    if ran == [NOON]:
        assert runs[0].real - at <= POLL  # right after the jump
    if jump >= 14400:
        assert [(e.scheduled, e.missed) for e in h.missed] == [(NOON, 1)]  # recorded missed


@pytest.mark.parametrize(
    ("jump", "again"),
    [
        (-30.0, None),  # back <= 3 h: once, in the first pass
        (-7200.0, None),
        (-14400.0, NOON),  # back > 3 h: a clock correction, both passes
        (-DAY, NOON),
    ],
)
def test_fixed_time_cron_after_a_step_back(
    make: Callable[..., Harness], jump: float, again: float | None
) -> None:
    # A long poll keeps the simulation of a day short; the job's due time still wakes it.
    h = make(cron("noon", "0 12 * * *"), wall=NOON - 20, poll=600.0)
    h.simulate(30.0)
    assert [r.scheduled for r in h.of("noon")] == [NOON]
    at = h.simulate(-jump + 120.0, jump=jump)  # the whole repeated stretch, and on
    second = [r for r in h.of("noon", since=at)]
    if again is None:
        assert second == []
        state = h.ds.get("noon")
        assert state is not None and state.next_run == NOON + DAY
    else:
        assert [r.scheduled for r in second] == [again]
        assert abs(second[0].wall - again) < 1e-6  # at noon of the second pass


@pytest.mark.parametrize("monotonic_counts_suspend", [True, False])
def test_a_suspend_is_downtime_for_the_missed_run_policy(
    make: Callable[..., Harness],
    caplog: pytest.LogCaptureFixture,
    monotonic_counts_suspend: bool,
) -> None:
    """Both clocks jump by 2 h (CLOCK_BOOTTIME counts a suspend), or only the wall one."""
    h = make(
        cron("minute", "* * * * *"),
        every("every7", 7.0),
        cron("noon", "0 12 * * *"),
        wall=NOON - 3600,
    )
    h.simulate(70.0)
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        if monotonic_counts_suspend:
            h.clock.advance(7200.0)  # the machine slept; both clocks moved
        else:
            h.clock.jump_wall(7200.0)  # only the wall clock moved: seen as a 2 h step
        resumed = h.clock()
        h.simulate(90.0)
    assert ("stepped" in caplog.text) is not monotonic_counts_suspend
    # Slots passed while suspended are missed slots: skip records them, the job goes on.
    assert {e.job_id for e in h.missed} == {"minute", "every7"}
    assert h.of("minute", since=resumed)[0].real - resumed <= 60.0
    assert h.of("every7", since=resumed)[0].real - resumed <= 7.0
    # The fixed-time job's one slot (noon) passed during the suspend: it runs once.
    assert [r.scheduled for r in h.of("noon")] == [NOON]


def test_the_daemon_path_recovers_from_a_wall_step(tmp_path: Path) -> None:
    """`tickwork run` builds its `DurableScheduler` in `Daemon`: the same steps hold there.

    The daemon passes ``wall_clock``, ``monotonic_clock`` and ``executor`` on to its
    scheduler. The jobs' entry point refuses to
    run outside a serving daemon, so each run is recorded failed; the STARTED events
    show when the runs came.
    """
    from tickwork._daemon.daemon import Daemon
    from tickwork._daemon.filejobs import FileJobs
    from tickwork._daemon.jobsfile.config import parse_config
    from tickwork._daemon.runlog import RunLog
    from tickwork._daemon.state import place_of

    clock = FakeClock(1000.0, wall_start=NOON + 10)
    store = SQLiteStore(tmp_path / "daemon.db")
    d = Daemon(
        str(tmp_path / "jobs.toml"),
        DurableScheduler(store, wall_clock=clock.wall, monotonic_clock=clock, executor=Inline()),
        place=place_of("jobs.toml"),
        log=RunLog(sys.stderr),
    )
    FileJobs(d.config_path, d.scheduler, place=d.place, dead_man=d.dead_man).apply(
        parse_config(
            '[[job]]\nname = "m"\ncron = "* * * * *"\ncommand = ["true"]\n'
            '[[job]]\nname = "e"\nevery = "5s"\ncommand = ["true"]\n'
        )
    )
    h = Harness(d.scheduler, clock)
    h.simulate(70.0)
    for jump in (-7200.0, DAY):
        at = h.simulate(130.0, jump=jump)
        look = h.first_look_after(at)
        for job_id, period in (("jobs/m", 60.0), ("jobs/e", 5.0)):
            after = h.of(job_id, since=at)
            assert after and after[0].real - look <= period + 1e-6, (jump, job_id, after[:1])
            no_slot_twice_per_pass(after)
    store.close()


# -- Replays after a step forward (issue 39, point 2) ------------------------------------


class Stepped(Harness):
    """A `Harness` on the public test path: `DurableScheduler.step()`, `InlineExecutor`."""

    def step(self) -> float:
        self.looks.append(self.clock())
        return self.ds.step()


@pytest.fixture
def stepped(open_either_store: Callable[..., Any]) -> Callable[..., Stepped]:
    def new(spec: JobSpec, *, wall: float, poll: float = POLL) -> Stepped:
        clock = FakeClock(1000.0, wall_start=wall)
        ds = DurableScheduler(
            open_either_store(),
            executor=InlineExecutor(),
            poll=poll,
            wall_clock=clock.wall,
            monotonic_clock=clock,
        )
        ds.declare(spec)
        return Stepped(ds, clock)

    return new


def replayed_then_on_grid(h: Stepped, at: float, slots: list[float], period: float) -> None:
    """The passed ``slots`` ran in order, at once; then the grid, ``period`` apart.

    All of ``slots`` at the first look after the step (back to back, no clock time
    between them); then the job's next run within one ``period`` of that look, each at
    its slot, and no gap between two of them other than ``period``.
    """
    look = h.first_look_after(at)
    after = h.of(h.runs[0].job_id, since=at)
    replays, on_grid = after[: len(slots)], after[len(slots) :]
    assert [r.scheduled for r in replays] == slots
    assert on_grid and on_grid[0].real - look <= period, ("late on its grid", on_grid[0], look)
    gaps = [b.real - a.real for a, b in pairwise(on_grid)]
    assert all(g == pytest.approx(period) for g in gaps), ("gaps", gaps)
    assert all(r.wall == r.scheduled for r in on_grid), on_grid
    assert {r.real for r in replays} == {look}, "replays were paced, not handed out at once"


def slots_upto(wall: float, period: float, n: int, origin: float = 0.0) -> list[float]:
    """The last ``n`` slots of the grid ``origin + k * period`` at or before ``wall``."""
    last = origin + (wall - origin) // period * period
    return [last - period * k for k in range(n - 1, -1, -1)]


def test_a_capped_backlog_is_replayed_back_to_back_after_a_step_forward(
    stepped: Callable[..., Stepped],
) -> None:
    """Every(10), 720 slots behind: the newest 100, then the grid within 10 s."""
    h = stepped(every("e", 10.0, missed="all"), wall=NOON)  # slots NOON + 10 k
    h.simulate(25.0)
    at = h.simulate(150.0, jump=7200.0)
    wall = h.of("e", since=at)[0].wall  # the first look after the step, on its wall
    replayed_then_on_grid(h, at, slots_upto(wall, 10.0, 100, NOON), 10.0)


def test_a_wildcard_cron_job_is_on_its_grid_within_a_minute_after_its_replays(
    stepped: Callable[..., Stepped],
) -> None:
    h = stepped(cron("m", "* * * * *", missed="all"), wall=NOON + 10)
    h.simulate(70.0)
    at = h.simulate(200.0, jump=7200.0)
    wall = h.of("m", since=at)[0].wall
    replayed_then_on_grid(h, at, slots_upto(wall, 60.0, 100), 60.0)


def test_a_daily_job_stepped_a_day_and_more_replays_each_passed_slot(
    stepped: Callable[..., Stepped],
) -> None:
    h = stepped(cron("noon", "0 12 * * *", missed="all"), wall=NOON - 20)
    h.simulate(5.0)
    at = h.simulate(30.0, jump=25 * 3600.0)  # past noon, and the next day's noon
    after = h.of("noon", since=at)
    assert [r.scheduled for r in after] == [NOON, NOON + DAY]
    assert {r.real for r in after} == {h.first_look_after(at)}, "the second was paced"
    state = h.ds.get("noon")
    assert state is not None and state.next_run == NOON + 2 * DAY


def test_after_a_short_step_forward_no_gap_is_shorter_than_the_period(
    stepped: Callable[..., Stepped],
) -> None:
    h = stepped(every("e", 10.0, missed="all"), wall=NOON)
    h.simulate(25.0)  # NOON + 10 and NOON + 20 ran
    at = h.simulate(60.0, jump=60.0)
    wall = h.of("e", since=at)[0].wall
    passed = slots_upto(wall, 10.0, int((wall - NOON) // 10.0) - 2, NOON)
    assert passed[0] == NOON + 30.0
    replayed_then_on_grid(h, at, passed, 10.0)


def test_step_after_an_inline_run_returns_the_time_to_the_next_slot(
    stepped: Callable[..., Stepped],
) -> None:
    # A poll longer than the period (PostgreSQL's default poll is 10 s): after a run
    # that ended inside its own look, step() waited out the poll, so Every(7) ran late.
    h = stepped(every("e", 7.0), wall=NOON, poll=30.0)
    end = h.clock() + 100.0
    while h.clock() < end:
        h.clock.advance(h.step())
    runs = h.of("e")
    assert len(runs) == 14, runs
    assert all(r.wall == pytest.approx(r.scheduled) for r in runs), runs
