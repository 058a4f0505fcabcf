"""Runtime control of durable jobs (issue 14): pause with a note, resume, trigger, backfill.

Deterministic (fake clock, manual pool, ``step()``), on SQLite and on PostgreSQL. The
races with a live daemon in another process are in tests/test_control_races.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import Cron, DurableScheduler, Every
from tickwork._durable.control import BackfillError
from tickwork.stores import JobNotFoundError, JobPausedError, JobSpec, Store
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

from . import durable_jobs

REC = "tests.durable_jobs:record"
START = DURABLE_START

Make = Callable[..., tuple[DurableScheduler, ManualExecutor]]


@pytest.fixture
def clock(durable_clock: FakeClock) -> FakeClock:
    return durable_clock


@pytest.fixture
def open_store(open_either_store: Callable[..., Store]) -> Callable[..., Store]:
    return open_either_store


@pytest.fixture
def make(clock: FakeClock, open_store: Callable[..., Store]) -> Make:
    def new(**kw: Any) -> tuple[Any, ManualExecutor]:
        pool = ManualExecutor()
        ds = DurableScheduler(
            open_store(), executor=pool, wall_clock=clock.wall, monotonic_clock=clock, **kw
        )
        return ds, pool

    return new


def ran() -> list[float]:
    """The slots the recording job ran, relative to START, in order."""
    return [round(c[2] - START, 6) for c in durable_jobs.CALLS if c[2] is not None]


def every(job_id: str = "e", interval: float = 10.0, **kw: Any) -> JobSpec:
    kw.setdefault("args", [job_id])
    return JobSpec(job_id, REC, Every(interval), **kw)


# -- pause and resume ------------------------------------------------------------------


def test_a_pause_keeps_who_when_why_and_stops_the_runs(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    clock.advance(10)
    drain(ds, pool)
    assert ran() == [10]
    ds.pause("e", note="disk full, see INC-42", by="ana@ops")
    state = ds.get("e")
    assert state is not None and state.paused and state.pause is not None
    assert (state.pause.by, state.pause.at, state.pause.note, state.pause.until) == (
        "ana@ops",
        START + 10,
        "disk full, see INC-42",
        None,
    )
    clock.advance(30)
    drain(ds, pool)
    assert ran() == [10]  # nothing while paused
    assert ds.resume("e", by="ana@ops") is True
    assert ds.resume("e", by="ana@ops") is False  # not paused: nothing recorded
    state = ds.get("e")
    assert state is not None and not state.paused and state.pause is None
    actions = ds.actions("e")
    assert [(a.action, a.actor, a.note) for a in reversed(actions)] == [
        ("pause", "ana@ops", "disk full, see INC-42"),
        ("resume", "ana@ops", None),
    ]


def test_a_pause_until_ends_by_itself_and_says_so(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    ds.pause("e", until=START + 25, note="maintenance")
    clock.advance(20)
    drain(ds, pool)
    assert ran() == []
    assert ds.get("e").pause.until == START + 25  # type: ignore[union-attr]
    # The timing loop wakes for the pause's end (next_wakeup knows it) and resumes.
    assert ds.step() == pytest.approx(5.0)
    clock.advance(5)
    drain(ds, pool)
    state = ds.get("e")
    assert state is not None and not state.paused and state.pause is None
    (auto, _) = ds.actions("e")
    assert (auto.action, auto.actor) == ("resume", "tickwork")
    assert auto.detail is not None and "ended" in auto.detail
    clock.advance(5)  # slot 30 is on time again
    drain(ds, pool)
    assert ran()[-1] == 30


def test_a_pause_refuses_bad_arguments(make: Make, clock: FakeClock) -> None:
    ds, _ = make()
    ds.declare(every())
    with pytest.raises(ValueError, match="until must be later than now"):
        ds.pause("e", until=START - 1)
    with pytest.raises(TypeError, match="note must be a str or None, got 5"):
        ds.pause("e", note=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="by must be 1 to 200 printable characters"):
        ds.pause("e", by="")
    with pytest.raises(JobNotFoundError, match="'nope'"):
        ds.pause("nope")
    assert not ds.get("e").paused  # type: ignore[union-attr]


def test_the_declaration_wins_only_when_its_own_pause_changes(make: Make) -> None:
    ds, _ = make()
    ds.declare(every())
    ds.pause("e", note="by hand")
    ds.declare(every(args=["changed"]))  # same declared pause (none): the runtime one stays
    state = ds.get("e")
    assert state is not None and state.paused and state.pause is not None
    ds.declare(every(paused=True))  # the file now pauses it: its word wins
    state = ds.get("e")
    assert state is not None and state.paused and state.pause is None
    ds.declare(every(paused=False))
    assert not ds.get("e").paused  # type: ignore[union-attr]


# -- trigger ---------------------------------------------------------------------------


def test_a_trigger_runs_once_now_off_the_grid(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    clock.advance(3)
    assert ds.trigger("e", by="bo@ops", note="check the fix") == "queued"
    drain(ds, pool)
    assert ran() == [3]
    assert ds.get("e").next_run == START + 10  # type: ignore[union-attr]
    clock.advance(7)
    drain(ds, pool)
    assert ran() == [3, 10]
    manual, scheduled = ds.history("e", outcome="ok")[::-1]
    assert (manual.origin, manual.scheduled) == ("manual", START + 3)
    assert scheduled.origin == "schedule"
    (act,) = ds.actions("e")
    assert (act.action, act.actor, act.note) == ("trigger", "bo@ops", "check the fix")


def test_two_triggers_at_once_under_skip_make_one_run(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every(interval=100))
    assert ds.trigger("e") == "queued"
    assert ds.trigger("e") == "skipped"  # the first waits: overlap "skip" gives this up
    drain(ds, pool)
    assert ran() == [0]
    skipped = ds.history("e", outcome="skipped")
    assert [(e.origin, e.slots) for e in skipped] == [("manual", 1)]
    assert skipped[0].error is not None and "overlap 'skip'" in skipped[0].error


def test_triggers_under_queue_run_one_after_another(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("q", "tests.durable_jobs:slow", Every(100), args=[2], overlap="queue"))
    assert ds.trigger("q") == "queued"
    clock.advance(1)
    assert ds.trigger("q") == "queued"
    ds.step()
    assert len(pool.queue) == 1  # one at a time
    pool.run_all()
    drain(ds, pool)
    oks = ds.history("q", outcome="ok")[::-1]
    assert [(e.origin, e.scheduled - START) for e in oks] == [("manual", 0), ("manual", 1)]
    assert oks[1].started is not None and oks[0].ended is not None
    assert oks[1].started >= oks[0].ended  # never side by side


def test_triggers_under_allow_run_side_by_side(make: Make) -> None:
    ds, pool = make()
    ds.declare(every(interval=100, overlap="allow"))
    ds.trigger("e")
    ds.trigger("e")
    ds.step()
    assert len(pool.queue) == 2
    pool.run_all()
    drain(ds, pool)
    assert ran() == [0, 0]


def test_a_paused_job_runs_its_trigger_and_stays_paused(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    ds.pause("e", note="held")
    clock.advance(5)
    assert ds.trigger("e") == "queued"
    clock.advance(30)  # slots 10, 20, 30 pass: the pause holds them
    drain(ds, pool)
    assert ran() == [5]
    state = ds.get("e")
    assert state is not None and state.paused and state.pause is not None
    with pytest.raises(JobPausedError, match="'e' is paused"):
        ds.backfill("e", START, START + 30)


def test_an_unknown_or_removed_job_cannot_be_triggered(make: Make) -> None:
    ds, pool = make()
    ds.declare(every())
    with pytest.raises(JobNotFoundError):
        ds.trigger("gone")
    ds.remove("e")
    with pytest.raises(JobNotFoundError):
        ds.trigger("e")
    drain(ds, pool)
    assert ran() == []


def test_a_waiting_trigger_goes_with_its_job(make: Make) -> None:
    ds, pool = make()
    ds.declare(every())
    ds.trigger("e")
    ds.remove("e")  # before any scheduler took it
    drain(ds, pool)
    assert ran() == []


# -- backfill ----------------------------------------------------------------------------


def test_a_backfill_runs_past_slots_in_order_once(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    spec = every(missed="skip")
    ds.declare(spec)
    ds.pause("e")
    clock.advance(45)  # slots 10..40 pass while paused
    ds.resume("e")
    drain(ds, pool)
    assert ran() == []  # missed="skip": given up
    queued = ds.backfill("e", START + 5, START + 100, by="cy@ops", note="replay the outage")
    # Only slots before now and the next run (50): the grid's own are not taken twice.
    assert [t - START for t in queued] == [10, 20, 30, 40]
    assert ds.backfill("e", START + 5, START + 40) == []  # already waiting
    ds.step()
    assert len(pool.queue) == 1  # one after another (overlap "skip")
    drain(ds, pool)
    assert ran() == [10, 20, 30, 40]
    clock.advance(5)
    drain(ds, pool)
    assert ran() == [10, 20, 30, 40, 50]
    origins = [(e.scheduled - START, e.origin) for e in ds.history("e", outcome="ok")[::-1]]
    assert origins == [
        (10, "backfill"),
        (20, "backfill"),
        (30, "backfill"),
        (40, "backfill"),
        (50, "schedule"),
    ]
    act = ds.actions("e")[1]  # the second backfill queued nothing
    assert (act.action, act.note) == ("backfill", "replay the outage")
    assert act.detail is not None and act.detail.startswith("4 slot(s) queued")


def test_a_backfill_of_a_cron_job_uses_its_zone(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("c", REC, Cron("0 * * * *", "Europe/Berlin"), args=["c"]))
    clock.advance(3 * 3600)
    drain(ds, pool)  # the grid catches up first (missed="skip": given up)
    queued = ds.backfill("c", START, START + 3 * 3600)
    # START is 22:13:20 UTC: the hours after it, up to now.
    assert [(t - START) for t in queued] == [2800.0, 6400.0, 10000.0]
    drain(ds, pool)
    backfilled = ds.history("c", outcome="ok")
    assert [(e.scheduled - START, e.origin) for e in backfilled[::-1]] == [
        (2800.0, "backfill"),
        (6400.0, "backfill"),
        (10000.0, "backfill"),
    ]


def test_a_backfill_is_bounded_and_explains_refusals(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every(interval=1))
    clock.advance(5000)
    drain(ds, pool)
    with pytest.raises(BackfillError, match=r"more than 1,000 slots.*--force"):
        ds.backfill("e", START, START + 5000)
    # The grid's slots from its first (START + 1: the job was declared at START, so the
    # slot START is from before it existed) to now, but not now's: that is the next run's.
    assert len(ds.backfill("e", START, START + 5000, force=True)) == 4999
    with pytest.raises(BackfillError, match=r"ends .* before it starts"):
        ds.backfill("e", START + 10, START)
    ds.declare(JobSpec("d", REC, Every(10, fixed_delay=True)))
    with pytest.raises(BackfillError, match="fixed-delay job: it has no grid"):
        ds.backfill("d", START, START + 100)
    with pytest.raises(ValueError, match="start must be an aware datetime"):
        ds.backfill("e", datetime(2026, 1, 1), START)


def test_a_backfill_before_the_job_existed_is_clipped_and_a_dry_run_changes_nothing(
    make: Make, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 26: `backfill --from 30d` on a cron job declared minutes before queued
    # 43,194 runs. Only the slots since its first slot are the job's.
    ds, pool = make()
    ds.declare(JobSpec("m", REC, Cron("* * * * *"), args=["m"]))
    first = ds.get("m").first_slot  # type: ignore[union-attr]
    assert first is not None and START < first <= START + 60
    ds.pause("m")
    clock.advance(8 * 60)  # eight slots pass while paused
    ds.resume("m")
    drain(ds, pool)  # missed="skip": given up
    assert ran() == []
    month = START - 30 * 86400
    with caplog.at_level("INFO", logger="tickwork.durable"):
        would = ds.backfill("m", month, START + 8 * 60, dry_run=True)
    assert [t - first for t in would] == [60.0 * k for k in range(8)]
    assert "left out 43,2" in caplog.text and "before the job's first slot" in caplog.text
    assert ds.get("m").waiting == () and ds.actions("m")[0].action == "resume"  # type: ignore[union-attr]
    # No --force needed: the cap counts the slots kept, not those before the job.
    assert ds.backfill("m", month, START + 8 * 60, by="ops@x") == would
    drain(ds, pool)
    assert [round(t - first) for t in (c[2] for c in durable_jobs.CALLS)] == [
        60 * k for k in range(8)
    ]
    with pytest.raises(BackfillError, match=r"ends .* before it starts"):
        ds.backfill("m", START, month)


def test_cancel_waiting_takes_a_mistaken_backfill_back(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every(missed="skip"))
    ds.pause("e")
    clock.advance(95)  # slots 10..90 pass while paused
    ds.resume("e")
    drain(ds, pool)
    queued = ds.backfill("e", START, START + 95)
    assert [t - START for t in queued] == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    when = datetime.fromtimestamp(START + 20, UTC)
    assert ds.cancel_waiting("e", slot=when, by="ops@x", note="not that one") == [START + 20]
    assert ds.cancel_waiting("e", slot=when) == []  # gone: nothing done, nothing recorded
    ds.step()  # slot 10 is taken: it goes on
    assert len(pool.queue) == 1
    assert ds.cancel_waiting("e", by="ops@x", note="wrong window") == [
        START + t for t in (30, 40, 50, 60, 70, 80, 90)
    ]
    assert ds.get("e").waiting == ()  # type: ignore[union-attr]
    drain(ds, pool)
    assert ran() == [10]
    cancelled = sorted(
        (e.scheduled - START, e.slots, e.origin) for e in ds.history("e", outcome="cancelled")
    )
    assert cancelled == [(20, 1, "backfill"), (30, 7, "backfill")]
    acts = ds.actions("e")
    assert [(a.action, a.note) for a in acts[:2]] == [
        ("cancel", "wrong window"),
        ("cancel", "not that one"),
    ]
    clock.advance(5)  # the grid runs on
    drain(ds, pool)
    assert ran() == [10, 100]
    with pytest.raises(JobNotFoundError):
        ds.cancel_waiting("nope")
    with pytest.raises(ValueError, match="slot must be an aware datetime"):
        ds.cancel_waiting("e", slot=datetime(2026, 1, 1))


# -- skip-next -----------------------------------------------------------------------------


def test_skip_next_gives_up_one_slot_in_the_ledger(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(every())
    assert ds.skip_next("e", by="di@ops", note="deploy window") == (START + 10, START + 20)
    clock.advance(20)
    drain(ds, pool)
    assert ran() == [20]
    (skip,) = ds.history("e", outcome="skipped")
    assert (skip.scheduled, skip.origin) == (START + 10, "manual")
    assert skip.error == "skipped by di@ops: deploy window"
    ds.declare(JobSpec("once", REC, Every(10)))
    ds.remove("once")
    with pytest.raises(JobNotFoundError):
        ds.skip_next("once")


# -- SQLite's change check ---------------------------------------------------------------


def test_sqlite_wakes_on_another_process_change_and_not_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with SQLiteStore(path) as mine, SQLiteStore(path) as theirs:
        theirs.upsert(every(), START + 10)
        assert mine.wait_for_change(0.0) is True  # the first call: changes were not watched
        assert mine.wait_for_change(0.3) is False
        # A write that changes nothing due (a ledger read, a claim of nothing) is ignored.
        theirs.claim_due(START, owner="x", lease_seconds=5, limit=5, advance=lambda s, n: None)
        assert mine.wait_for_change(0.3) is False
        woke: list[bool] = []
        waiter = threading.Thread(target=lambda: woke.append(mine.wait_for_change(60.0)))
        waiter.start()
        theirs.pause_job("e", by="x@y", at=START)
        waiter.join(30.0)
        assert woke == [True]
        done: list[bool] = []
        waiter = threading.Thread(target=lambda: done.append(mine.wait_for_change(60.0)))
        waiter.start()
        mine.interrupt_wait()
        waiter.join(30.0)
        assert done == [True]


def test_the_async_face_has_the_same_verbs(make: Make, clock: FakeClock) -> None:
    import asyncio

    from tickwork import AsyncDurableScheduler

    ds, _ = make()
    ds.declare(every())
    face = AsyncDurableScheduler(ds.store, wall_clock=clock.wall, monotonic_clock=clock)

    async def main() -> None:
        await face.pause("e", note="async", by="as@ops")
        assert await face.resume("e") is True
        assert await face.trigger("e") == "queued"
        assert await face.skip_next("e") == (START + 10, START + 20)
        assert await face.backfill("e", START + 1, START + 5) == []
        assert await face.backfill("e", START + 1, START + 5, dry_run=True) == []
        assert await face.cancel_waiting("e", by="as@ops") == [START]  # the trigger's run
        acts = await face.actions("e")
        assert [a.action for a in acts] == [
            "cancel", "backfill", "skip-next", "trigger", "resume", "pause",
        ]  # fmt: skip

    asyncio.run(main())


def test_actions_are_pruned_by_age_with_the_ledger(open_store: Callable[..., Store]) -> None:
    store: Any = open_store(history_days=1.0)
    store.upsert(every(), START + 10)
    store.pause_job("e", by="old@ops", at=START, note="long ago")
    store.resume_job("e", by="new@ops", at=START + 2 * 86400)
    store.prune_history(START + 2 * 86400 + 1)
    assert [(a.action, a.actor) for a in store.actions("e")] == [("resume", "new@ops")]
