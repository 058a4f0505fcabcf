"""DurableScheduler: deterministic tests (fake wall clock, manual pool, `_step` by hand).

The timing thread is not started except in the few real-time tests at the end: a test
calls `DurableScheduler._step` where the thread would wake, and runs the pool's work
with `ManualExecutor.run_all`. A "restart" is a second scheduler on the same store
file, as a new process would be.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import At, Cron, CronError, DurableScheduler, EventKind, Every, RunEvent
from tickwork.stores import JobNotFoundError, JobSpec, JobSpecError, Upsert
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

from . import durable_jobs

REC = "tests.durable_jobs:record"
START = DURABLE_START


@pytest.fixture
def clock(durable_clock: FakeClock) -> FakeClock:
    return durable_clock


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def opened(db: Path) -> Iterator[list[SQLiteStore]]:
    stores: list[SQLiteStore] = []
    yield stores
    for s in stores:
        s.close()


Make = Callable[..., tuple[DurableScheduler, ManualExecutor]]


@pytest.fixture
def make(clock: FakeClock, db: Path, opened: list[SQLiteStore]) -> Make:
    """A new scheduler on the same file: a (re)started process."""

    def new(**kw: Any) -> tuple[DurableScheduler, ManualExecutor]:
        store = SQLiteStore(db)
        opened.append(store)
        pool = ManualExecutor()
        kw.setdefault("lease", 30.0)
        return (
            DurableScheduler(
                store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock, **kw
            ),
            pool,
        )

    return new


def calls() -> list[Any]:
    return [c[0] for c in durable_jobs.CALLS]


def every(job_id: str = "e", seconds: float = 10, **kw: Any) -> JobSpec:
    return JobSpec(job_id, REC, Every(seconds), args=[job_id], **kw)


# -- declaring -------------------------------------------------------------------


def test_declare_is_idempotent_across_restarts(make: Make, clock: FakeClock) -> None:
    ds, _ = make()
    assert ds.declare(every()) is Upsert.CREATED
    first = ds.get("e")
    assert first is not None and first.next_run == START + 10
    clock.advance(4)
    ds2, _ = make()  # a restart with the same declarations
    assert ds2.declare(every()) is Upsert.UNCHANGED
    assert [j.next_run for j in ds2.jobs()] == [START + 10]
    # a changed argument updates the job, the schedule goes on
    assert ds2.declare(JobSpec("e", REC, Every(10), args=["new"])) is Upsert.UPDATED
    state = ds2.get("e")
    assert state is not None and state.spec.args == ("new",) and state.next_run == START + 10
    # a changed schedule starts afresh from now
    assert ds2.declare(every(seconds=60)) is Upsert.UPDATED
    state = ds2.get("e")
    assert state is not None and state.next_run == START + 4 + 60
    assert len(ds2.jobs()) == 1


def test_a_decorator_declares_the_function_by_its_own_import_path(
    make: Make, clock: FakeClock
) -> None:
    ds, pool = make()
    decorate = ds.every("10s", args=["d"])
    assert decorate(durable_jobs.record) is durable_jobs.record  # returned unchanged
    ds.cron("0 7 * * *", tz="Europe/Berlin", name="morning", retries=2)(durable_jobs.record)
    path = "tests.durable_jobs:record"
    job = ds.get(path)
    assert job is not None and job.spec.func == path and job.spec.schedule == Every(10)
    assert job.spec.args == ("d",)
    morning = ds.get("morning")
    assert morning is not None and morning.spec.func == path and morning.spec.retries == 2
    assert morning.spec.schedule == Cron("0 7 * * *", "Europe/Berlin")
    clock.advance(10)
    drain(ds, pool)
    assert calls() == [("d",)]  # run by its path, as any durable job

    def local() -> None: ...

    with pytest.raises(TypeError, match=r"importable by its path .* got <function "):
        ds.every("1m")(local)


def test_bad_input_is_refused_and_changes_nothing(make: Make, db: Path) -> None:
    ds, _ = make()
    with pytest.raises(
        JobSpecError,
        match=r"^func 'tests.durable_jobs:nope' cannot be resolved:"
        r" tests.durable_jobs has no 'nope'$",
    ):
        ds.declare(JobSpec("x", "tests.durable_jobs:nope", At(1)))
    with pytest.raises(JobSpecError, match=r"^func 'no_such_mod_xyz:f' cannot be imported: "):
        ds.declare(JobSpec("x", "no_such_mod_xyz:f", At(1)))
    with pytest.raises(JobSpecError, match=r"^args\[0\] must be JSON-serialisable, got nan$"):
        JobSpec("x", REC, At(1), args=[float("nan")])
    with pytest.raises(
        JobSpecError, match=r"^missed must be one of 'skip', 'once', 'all', got 'x'$"
    ):
        JobSpec("x", REC, At(1), missed="x")  # type: ignore[arg-type]
    with pytest.raises(CronError, match=r"^tz: unknown time zone 'Mars/Olympus'"):
        ds.declare(JobSpec("x", REC, Cron("0 3 * * *", "Mars/Olympus")))
    with pytest.raises(TypeError, match=r"^spec must be a tickwork.stores.JobSpec, got 'x'$"):
        ds.declare("x")  # type: ignore[arg-type]
    assert ds.jobs() == []
    assert ds.errors == []


def test_bad_scheduler_arguments() -> None:
    store = SQLiteStore(":memory:")
    with pytest.raises(TypeError, match=r"^store must implement tickwork.stores.Store, got 1$"):
        DurableScheduler(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^lease must be a finite number > 0, got 0$"):
        DurableScheduler(store, lease=0)
    with pytest.raises(ValueError, match=r"^poll must be a finite number > 0, got inf$"):
        DurableScheduler(store, poll=float("inf"))
    with pytest.raises(TypeError, match=r"^allowed_modules must be a list of module prefixes"):
        DurableScheduler(store, allowed_modules="myapp")
    with pytest.raises(ValueError, match=r"^allowed_modules entries must be module names"):
        DurableScheduler(store, allowed_modules=["a:b"])
    store.close()


# -- running ---------------------------------------------------------------------


def test_one_shot_runs_once_and_keeps_its_outcome(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("a", REC, At(START + 5), kwargs={"k": 1}))
    clock.advance(4.9)
    drain(ds, pool)
    assert durable_jobs.CALLS == []
    clock.advance(0.2)
    drain(ds, pool)
    assert durable_jobs.CALLS == [((), {"k": 1}, START + 5)]
    (state,) = ds.jobs()
    assert state.next_run is None and state.last_run is not None
    assert state.last_run.outcome == "ok" and state.last_run.scheduled == START + 5
    # a restart with the same declaration does not run it again
    ds2, pool2 = make()
    assert ds2.declare(JobSpec("a", REC, At(START + 5), kwargs={"k": 1})) is Upsert.UNCHANGED
    clock.advance(100)
    drain(ds2, pool2)
    assert len(durable_jobs.CALLS) == 1


def test_fixed_rate_on_the_grid_and_fixed_delay_from_the_end(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    ds.declare(JobSpec("d", "tests.durable_jobs:slow", Every(10, fixed_delay=True), args=[3]))
    clock.advance(10)
    drain(ds, pool)  # both run; "d" takes 3 s of fake time
    e, d = ds.get("e"), ds.get("d")
    assert e is not None and d is not None
    assert e.next_run == START + 20
    assert d.next_run == START + 13 + 10  # ended at +13 (slow ran after record's run)


@pytest.mark.parametrize(
    ("policy", "runs", "outcome"),
    [
        ("skip", [], "missed"),
        ("once", [START + 10], "ok"),
        ("all", [START + 10, START + 20, START + 30, START + 40], "ok"),
    ],
)
def test_missed_policy_at_start_up(
    make: Make, clock: FakeClock, policy: str, runs: list[float], outcome: str
) -> None:
    ds, _ = make()
    ds.declare(every(missed=policy))
    clock.advance(45)  # down from +0 to +45: slots 10, 20, 30, 40 passed
    ds2, pool2 = make()
    events: list[RunEvent] = []
    ds2.add_listener(events.append)
    ds2.declare(every(missed=policy))
    drain(ds2, pool2)
    assert [c[2] for c in durable_jobs.CALLS] == runs
    state = ds2.get("e")
    assert state is not None and state.last_run is not None
    assert state.next_run == START + 50  # back on the grid
    assert state.last_run.outcome == outcome
    missed = [e.missed for e in events if e.kind is EventKind.MISSED]
    assert missed == {"skip": [4], "once": [3], "all": []}[policy]


def test_all_is_capped_and_warns(
    make: Make, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    ds, pool = make()
    ds.declare(every(missed="all", missed_cap=3))
    clock.advance(105)  # 10 slots passed
    drain(ds, pool)
    assert [c[2] for c in durable_jobs.CALLS] == [START + 80, START + 90, START + 100]
    assert "more than missed_cap=3" in caplog.text


def test_grace_makes_a_late_run_missed(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every(grace=2.0))
    clock.advance(11.5)
    drain(ds, pool)
    assert len(durable_jobs.CALLS) == 1
    clock.advance(12)  # +23.5: slot 20 is 3.5 s late
    drain(ds, pool)
    state = ds.get("e")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "missed" and state.last_run.started is None
    assert len(durable_jobs.CALLS) == 1 and state.next_run == START + 30


def test_overlap_skip_counts_and_skips(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    events: list[RunEvent] = []
    ds.add_listener(events.append)
    ds.declare(JobSpec("s", "tests.durable_jobs:slow", Every(10), args=[25]))
    clock.advance(10)
    ds.step()
    pool.run_all()  # runs 10 -> 35 (fake time inside the job)
    drain(ds, pool)
    assert [c[2] for c in durable_jobs.CALLS] == [START + 10]
    skipped = [e for e in events if e.kind is EventKind.SKIPPED]
    assert [e.missed for e in skipped] == [2]  # slots 20 and 30
    state = ds.get("s")
    assert state is not None and state.next_run == START + 40


def test_run_time_changes_go_through_the_store(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    ds.pause("e")
    clock.advance(15)
    drain(ds, pool)
    assert calls() == []
    other, _ = make()  # another process sees the pause
    state = other.get("e")
    assert state is not None and state.paused
    ds.resume("e")
    drain(ds, pool)
    assert calls() == [("e",)]  # on time: slot 10 is the only one passed
    ds.reschedule("e", Every(100))
    state = other.get("e")
    assert state is not None and state.next_run == START + 115
    ds.remove("e")
    assert other.jobs() == []
    with pytest.raises(JobNotFoundError, match=r"^no job with id 'e'$"):
        ds.pause("e")
    with pytest.raises(JobNotFoundError, match=r"^no job with id 'e'$"):
        ds.reschedule("e", Every(1))
    ds.add(every("n"))
    with pytest.raises(
        ValueError, match=r"^a job with id 'n' exists already; declare\(\) updates it$"
    ):
        ds.add(every("n"))


def test_failure_is_recorded_reported_and_the_schedule_goes_on(
    make: Make, clock: FakeClock
) -> None:
    seen: list[tuple[str, Exception]] = []
    ds, pool = make(on_error=lambda job_id, exc: seen.append((job_id, exc)))
    ds.declare(JobSpec("b", "tests.durable_jobs:boom", Every(10)))
    ds.declare(every())
    clock.advance(10)
    drain(ds, pool)
    state = ds.get("b")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed" and state.next_run == START + 20
    assert state.last_run.error is not None
    assert state.last_run.error.startswith("RuntimeError: boom\n")
    assert ds.errors == ["job b: RuntimeError: boom"]
    assert [(j, str(e)) for j, e in seen] == [("b", "boom")]
    assert calls() == [("e",)]


def test_job_failed_is_recorded_as_its_message_alone(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("r", "tests.durable_jobs:reported", Every(10)))
    clock.advance(10)
    drain(ds, pool)
    state = ds.get("r")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed"
    assert state.last_run.error == "exit=3\nthe end of its output"  # no type, no frames
    assert ds.errors == ["job r: JobFailed: exit=3\nthe end of its output"]


def test_vanished_function_fails_that_job_only(
    make: Make, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = tmp_path / "gone_soon_mod.py"
    mod.write_text("def f():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ds, _ = make()
    ds.declare(JobSpec("g", "gone_soon_mod:f", Every(10)))
    ds.declare(every())
    mod.unlink()
    monkeypatch.delitem(sys.modules, "gone_soon_mod")
    ds2, pool2 = make(allowed_modules=["gone_soon_mod"])  # restarted without that code
    ds2.declare(every())
    clock.advance(10)
    drain(ds2, pool2)
    state = ds2.get("g")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed" and state.last_run.started is None
    assert "func 'gone_soon_mod:f' cannot be imported" in (state.last_run.error or "")
    assert calls() == [("e",)]


def test_allow_list_refuses_and_never_imports(
    make: Make, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "evil_mod_xyz.py").write_text("raise SystemExit('imported!')\ndef f(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ds, pool = make()
    # someone else writes a job naming a function this process never declared
    ds.store.upsert(JobSpec("x", "evil_mod_xyz:f", At(START)), START)
    drain(ds, pool)
    state = ds.get("x")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "failed"
    assert state.last_run.error == (
        "JobSpecError: job 'x': func 'evil_mod_xyz:f' is not allowed here: declare the job in"
        " this process or list its module in allowed_modules; it was not imported"
    )
    assert "evil_mod_xyz" not in sys.modules
    # a listed module prefix is allowed
    ds.store.upsert(JobSpec("y", "tests.durable_jobs:record", At(START)), START)
    ds2, pool2 = make(allowed_modules=["tests"])
    drain(ds2, pool2)
    assert calls() == [()]


def test_stop_hands_back_unstarted_claims(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("a", REC, At(START + 1)))
    clock.advance(2)
    ds.step()  # claimed, waiting in the pool
    assert ds.running() == {"a": 1}
    assert ds.stop(timeout=0) is False
    pool.run_all()  # the worker sees the stop and hands the claim back
    assert calls() == [] and ds.running() == {}
    state = ds.get("a")
    assert state is not None and state.next_run is None  # the schedule is not set back
    assert [(c.scheduled, c.owner, c.retry) for c in state.claims] == [(START + 1, "", True)]
    assert state.last_run is not None and state.last_run.outcome == "cancelled"
    ds2, pool2 = make()
    ds2.declare(JobSpec("a", REC, At(START + 1)))
    drain(ds2, pool2)
    assert calls() == [()]


@pytest.mark.parametrize(("delivery", "runs"), [("at_most_once", 1), ("at_least_once", 2)])
def test_started_run_of_a_dead_process(
    make: Make, clock: FakeClock, delivery: str, runs: int
) -> None:
    ds, _ = make(lease=5.0)
    ds.declare(JobSpec("a", REC, At(START + 1), delivery=delivery))  # type: ignore[arg-type]
    clock.advance(1)
    ds.step()
    (run,) = ds._table.runs.values()
    assert ds.store.start(run.claim, started=clock.wall())
    durable_jobs.record()  # the job ran, then the process died before finish
    ds2, pool2 = make(lease=5.0)
    ds2.declare(JobSpec("a", REC, At(START + 1), delivery=delivery))  # type: ignore[arg-type]
    drain(ds2, pool2)
    assert len(durable_jobs.CALLS) == 1  # lease not expired yet: nothing happens
    clock.advance(5)
    drain(ds2, pool2)
    assert len(durable_jobs.CALLS) == runs
    state = ds2.get("a")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == ("abandoned" if runs == 1 else "ok")


# -- runs handed straight to an idle worker: started by their claim (issue 15) ----------


def test_a_run_for_an_idle_worker_is_recorded_started_by_its_claim(
    make: Make, clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(every())
    clock.advance(10)
    drain(ds, pool)  # the first run imports the function: started the usual way
    assert calls() == [("e",)]
    clock.advance(10)
    ds.step()
    (run,) = ds._table.runs.values()
    assert run.claim.started == clock.wall()  # one commit for the claim and the start
    state = ds.get("e")
    assert state is not None and [c.started for c in state.claims] == [clock.wall()]
    pool.run_all()
    state = ds.get("e")
    assert calls() == [("e",), ("e",)]
    assert state is not None and state.last_run is not None
    assert (state.last_run.started, state.last_run.outcome) == (clock.wall(), "ok")


def test_a_run_started_by_its_claim_still_runs_when_stop_comes_before_its_worker(
    make: Make, clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(every())
    clock.advance(10)
    drain(ds, pool)
    clock.advance(10)
    ds.step()
    assert ds.stop(wait=False)  # the run is queued, not yet on a worker
    pool.run_all()  # it was recorded started, so it cannot be handed back: it runs
    assert calls() == [("e",), ("e",)]
    state = ds.get("e")
    assert state is not None and state.claims == ()
    assert state.last_run is not None and state.last_run.outcome == "ok"


@pytest.mark.parametrize(("delivery", "runs"), [("at_most_once", 1), ("at_least_once", 2)])
def test_a_process_dying_between_a_starting_claim_and_its_job(
    make: Make, clock: FakeClock, delivery: str, runs: int
) -> None:
    # Killed after the claim committed, before the job began: at most once records
    # the slot abandoned and never runs it; at least once runs it again elsewhere.
    job = JobSpec("a", REC, Every(10), delivery=delivery)  # type: ignore[arg-type]
    ds, pool = make(lease=5.0)
    ds.declare(job)
    clock.advance(10)
    drain(ds, pool)
    clock.advance(10)
    ds.step()
    (run,) = ds._table.runs.values()
    assert run.claim.started is not None  # and then the process died
    ds2, pool2 = make(lease=5.0)
    ds2.declare(job)
    clock.advance(5)
    drain(ds2, pool2)
    assert len(durable_jobs.CALLS) == runs
    state = ds2.get("a")
    assert state is not None and state.last_run is not None
    if runs == 1:
        assert state.last_run.outcome == "abandoned" and state.last_run.scheduled == START + 20


# -- a lost claim's slot, decided again when it is re-offered (issue 11, point 1) --------


def lose_a_claim(make: Make, clock: FakeClock, spec: JobSpec, *, start: bool = False) -> None:
    """Claim the job's due slot in a scheduler that then dies (before or after `start`)."""
    ds, _ = make(lease=5.0)
    ds.declare(spec)
    clock.advance(spec.schedule.interval if isinstance(spec.schedule, Every) else 1)
    ds.step()
    (run,) = ds._table.runs.values()
    if start:
        assert ds.store.start(run.claim, started=clock.wall())


def outcomes(ds: DurableScheduler, events: list[RunEvent]) -> list[tuple[str, float]]:
    return [(e.kind.name, e.scheduled - START) for e in events]


def test_a_late_retry_under_skip_is_recorded_missed_not_run(make: Make, clock: FakeClock) -> None:
    lose_a_claim(make, clock, every(seconds=1))  # slot START + 1, claimed, never started
    clock.advance(5 + 1.2)  # the lease ends; the next slot came meanwhile
    ds, pool = make(lease=5.0)
    ds.declare(every(seconds=1))
    events: list[RunEvent] = []
    ds.add_listener(events.append)
    ds.step()
    pool.run_all()
    assert calls() == []  # the re-offered slot 1 is not run 6.2 s late ...
    state = ds.get("e")
    assert state is not None and state.last_run is not None
    assert (state.last_run.scheduled, state.last_run.outcome) == (START + 1, "missed")
    assert outcomes(ds, events)[0] == ("MISSED", 1)
    drain(ds, pool)  # ... the job's own due slot is decided by the same policy
    clock.advance(1 - (clock.wall() - START) % 1 + 0.1)
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == [8]  # on time, on the grid


def test_a_late_retry_under_once_leaves_one_catch_up(make: Make, clock: FakeClock) -> None:
    lose_a_claim(make, clock, every(seconds=1, missed="once"))
    clock.advance(5 + 1.5)  # slot 1 re-offered at 7.5; slots 2..7 passed too
    ds, pool = make(lease=5.0)
    ds.declare(every(seconds=1, missed="once"))
    drain(ds, pool)
    # One catch-up for the whole window (slot 2, the job's own next run), claimed at
    # 7.5: the older slot 1 is given up, not run after it.
    assert [c[2] - START for c in durable_jobs.CALLS] == [2]
    state = ds.get("e")
    assert state is not None and state.next_run == START + 8
    clock.advance(0.6)
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == [2, 8]


def test_a_late_retry_under_all_is_replayed_first_in_order(make: Make, clock: FakeClock) -> None:
    lose_a_claim(make, clock, every(seconds=1, missed="all"))
    clock.advance(5 + 1.5)
    ds, pool = make(lease=5.0)
    ds.declare(every(seconds=1, missed="all"))
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == [1, 2, 3, 4, 5, 6, 7]


def test_a_late_retry_over_missed_cap_is_dropped(make: Make, clock: FakeClock) -> None:
    lose_a_claim(make, clock, every(seconds=1, missed="all", missed_cap=3))
    clock.advance(5 + 1.5)
    ds, pool = make(lease=5.0)
    ds.declare(every(seconds=1, missed="all", missed_cap=3))
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == [5, 6, 7]


def test_an_on_time_retry_runs(make: Make, clock: FakeClock) -> None:
    lose_a_claim(make, clock, every(seconds=60))  # slot 60, lease 5
    clock.advance(5.5)
    ds, pool = make(lease=5.0)
    ds.declare(every(seconds=60))
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == [60]


@pytest.mark.parametrize(
    ("seconds", "missed", "ran"),
    [
        (60, "skip", [60]),  # re-offered before its next slot: runs again
        (1, "skip", []),  # its next slot came: given up, recorded missed
        (1, "once", [2]),  # the catch-up is the job's own due slot
    ],
)
def test_an_unfinished_at_least_once_run_is_decided_again(
    make: Make, clock: FakeClock, seconds: float, missed: str, ran: list[float]
) -> None:
    spec = every(seconds=seconds, missed=missed, delivery="at_least_once")
    lose_a_claim(make, clock, spec, start=True)  # started, then the process died
    clock.advance(5.5)
    ds, pool = make(lease=5.0)
    ds.declare(spec)
    ds.step()
    state = ds.get("e")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == ("abandoned" if ran == [seconds] else "missed")
    drain(ds, pool)
    assert [c[2] - START for c in durable_jobs.CALLS] == ran


def test_long_runs_renew_their_lease(make: Make, clock: FakeClock) -> None:
    ds, pool = make(lease=3.0)
    ds.declare(every())
    clock.advance(10)
    ds.step()
    assert len(ds._table.runs) == 1
    for _ in range(5):
        clock.advance(1.5)
        ds.step()
    state = ds.get("e")
    assert state is not None and state.claims[0].lease_until >= clock.wall() + 1.5
    pool.run_all()
    assert ds.running() == {}


# -- real time -----------------------------------------------------------------------


def test_real_thread_runs_and_wakes_on_declare(tmp_path: Path) -> None:
    durable_jobs.CALLS.clear()
    store = SQLiteStore(tmp_path / "rt.db")
    done = threading.Event()
    ds = DurableScheduler(store, poll=30.0)  # a long poll: a declare must wake the thread
    ds.add_listener(lambda e: done.set() if e.kind is EventKind.FINISHED else None)
    with ds:
        time.sleep(0.05)
        t0 = time.time()
        ds.declare(JobSpec("now", REC, At(t0)))
        assert done.wait(5.0)
        assert time.time() - t0 < 2.0
    assert calls() == [()]
    store.close()
