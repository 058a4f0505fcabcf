"""DurableScheduler: wake-ups from a `ChangeNotifier` store, and store failures with backoff.

No PostgreSQL here: `NotifyingStore` is a `SQLiteStore` with an in-process change
notifier, `FlakyStore` one whose calls fail on demand. The PostgreSQL versions of these
behaviours, across real processes, are in ``tests/test_durable_postgres.py``.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.executors import ManualExecutor, freeze_looks, inline_scheduler
from tickwork import At, DurableScheduler, EventKind, RunEvent
from tickwork._durable.claims import PREFETCH
from tickwork._durable.scheduler import DEFAULT_NOTIFIED_POLL, DEFAULT_POLL, DEFAULT_WORKERS
from tickwork.stores import JobSpec, StoreError
from tickwork.stores.contract import ChangeNotifier
from tickwork.stores.sqlite import SQLiteStore

from . import durable_jobs

REC = "tests.durable_jobs:record"


class NotifyingStore(SQLiteStore):
    """A SQLite store that announces changes made through `announce` (another "node")."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.changed = threading.Event()
        self.waits = 0
        self.fail_waits = 0

    def announce(self) -> None:
        self.changed.set()

    def wait_for_change(self, timeout: float) -> bool:
        self.waits += 1
        if self.fail_waits:
            self.fail_waits -= 1
            raise StoreError("cannot wait for changes: listening connection refused")
        got = self.changed.wait(timeout)
        self.changed.clear()
        return got

    def interrupt_wait(self) -> None:
        self.changed.set()


class PlainStore:
    """A SQLite store seen without its change announcements (a store that has none)."""

    def __init__(self, path: Path) -> None:
        self._inner = SQLiteStore(path)

    def __getattr__(self, name: str) -> Any:
        if name in ("wait_for_change", "interrupt_wait"):
            raise AttributeError(name)
        return getattr(self._inner, name)


class FlakyStore(SQLiteStore):
    """A SQLite store whose `claim_due` raises `StoreError` while ``failures`` > 0."""

    failures = 0

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise StoreError("cannot claim due runs: database 'x' unreachable for 30.0 s")
        return super().claim_due(*args, **kwargs)


@pytest.fixture
def paths(tmp_path: Path) -> Path:
    durable_jobs.CALLS.clear()
    return tmp_path / "jobs.db"


def finished(ds: DurableScheduler) -> threading.Event:
    done = threading.Event()

    def on_event(e: RunEvent) -> None:
        if e.kind is EventKind.FINISHED:
            done.set()

    ds.add_listener(on_event)
    return done


def test_the_default_poll_is_slower_with_a_change_notifier(paths: Path) -> None:
    with NotifyingStore(paths) as notifying:
        assert isinstance(notifying, ChangeNotifier)
        assert DurableScheduler(notifying)._poll == DEFAULT_NOTIFIED_POLL
        assert DurableScheduler(notifying, poll=0.5)._poll == 0.5
    with SQLiteStore(paths) as sqlite:
        assert isinstance(sqlite, ChangeNotifier)  # its change check
        assert DurableScheduler(sqlite)._poll == DEFAULT_NOTIFIED_POLL
    plain = PlainStore(paths)
    assert not isinstance(plain, ChangeNotifier)
    assert DurableScheduler(plain)._poll == DEFAULT_POLL  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^poll must be a finite number > 0, got 0$"):
        DurableScheduler(plain, poll=0)  # type: ignore[arg-type]
    plain.close()


def test_another_nodes_change_wakes_the_scheduler_before_its_poll(paths: Path) -> None:
    store = NotifyingStore(paths)
    other = SQLiteStore(paths)  # another process writing the same database
    ds = DurableScheduler(store, poll=30.0, allowed_modules=["tests.durable_jobs"])
    done = finished(ds)
    with ds:
        time.sleep(0.2)  # idle: the timing thread waits on its 30 s poll
        due = time.time() + 0.2
        other.upsert(JobSpec("wake", REC, At(due)), due)
        store.announce()  # what NOTIFY does for PostgresStore
        assert done.wait(5.0)
        assert time.time() - due < 2.0
        assert store.waits >= 2  # the listener went back to waiting
    assert [c[2] for c in durable_jobs.CALLS] == [due]
    other.close()
    store.close()


def test_stop_interrupts_the_listener_at_once(paths: Path) -> None:
    store = NotifyingStore(paths)
    ds = DurableScheduler(store, poll=30.0)
    ds.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    assert ds.stop(timeout=10)
    assert time.monotonic() - t0 < 2.0
    assert ds._listener is not None and not ds._listener.is_alive()
    store.close()


def test_a_failing_listener_is_retried_and_the_safety_poll_goes_on(
    paths: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = NotifyingStore(paths)
    store.fail_waits = 3
    ds = DurableScheduler(store, poll=0.3)
    done = finished(ds)
    with caplog.at_level(logging.DEBUG, logger="tickwork.durable"), ds:
        ds.declare(JobSpec("j", REC, At(time.time() + 0.1)))
        assert done.wait(5.0)
        deadline = time.monotonic() + 5
        while store.waits < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.waits >= 5  # three failures, then it waits normally again
    warned = [r for r in caplog.records if "waiting for store changes failed" in r.getMessage()]
    assert [r.levelno for r in warned] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "listening connection refused" in warned[0].getMessage()
    store.close()


def test_store_errors_back_off_doubling_up_to_poll_then_recover(
    paths: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Driven step by step, with a held executor: no thread, no real time, no race with a
    # worker (a run that ended before `running()` was read once failed this under load).
    store = FlakyStore(paths)
    pool = ManualExecutor()
    ds = DurableScheduler(
        store, poll=1.0, executor=pool, max_workers=2, allowed_modules=["tests.durable_jobs"]
    )
    ds.declare(JobSpec("j", REC, At(time.time() - 1)))
    store.failures = 6
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        delays = [ds._step() for _ in range(6)]
        assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
        ds._step()  # works again: claims the run
    assert ds._recovery.failures == 0
    assert ds.running() == {"j": 1}
    assert len(pool.queue) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert sum("store call failed" in m for m in messages) == 6
    assert "unreachable for 30.0 s" in messages[0] and "retrying in 0.10 s" in messages[0]
    assert caplog.records[0].exc_info is not None  # the traceback once per streak
    assert all(r.exc_info is None for r in caplog.records[1:6])
    assert "works again after 6 failed attempt(s)" in messages[-1]
    pool.run_all()  # the claimed run, once
    assert ds.running() == {}
    assert len(durable_jobs.CALLS) == 1
    ds.stop(timeout=5)
    store.close()


def test_the_timing_thread_survives_store_errors_and_runs_the_job_once(paths: Path) -> None:
    store = FlakyStore(paths)
    store.failures = 4
    ds = DurableScheduler(store, poll=0.5, allowed_modules=["tests.durable_jobs"])
    done = finished(ds)
    with ds:
        ds.declare(JobSpec("j", REC, At(time.time())))
        for _ in range(20):
            ds._poke()  # wake-ups during the backoff do not make it spin
        assert done.wait(10.0)
        time.sleep(0.3)
        assert ds._thread is not None and ds._thread.is_alive()
    assert store.failures == 0
    assert len(durable_jobs.CALLS) == 1
    store.close()


class HeldStore(SQLiteStore):
    """A SQLite store where another node's claim transaction holds every due row.

    While ``held`` is set, `claim_due` claims nothing (a PostgreSQL claim skips rows
    another transaction has locked), though `next_wakeup` still sees the work due.
    """

    held = True

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        return [] if self.held else super().claim_due(*args, **kwargs)


def test_work_due_but_held_elsewhere_is_looked_at_again_soon_not_after_the_poll(
    paths: Path,
) -> None:
    # The other node's commit sends no notification: waiting for one (or for the 30 s
    # safety poll) left a node idle for 10 s while work was due. Stepped by hand.
    store = HeldStore(paths)
    pool = ManualExecutor()
    ds = DurableScheduler(store, poll=30.0, executor=pool, allowed_modules=["tests.durable_jobs"])
    ds.declare(JobSpec("j", REC, At(time.time() - 1)))
    delays = [ds._step() for _ in range(9)]
    # 10 ms doubling per look that finds work due and claims none, capped at 1 s.
    assert delays == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0])
    store.held = False  # the holder's transaction ended: the row is free again
    ds._step()
    assert ds.running() == {"j": 1}
    pool.run_all()
    assert len(durable_jobs.CALLS) == 1
    # Nothing due any more: the wait is the poll again, and the backoff starts over.
    assert ds._step() == pytest.approx(30.0)
    ds.declare(JobSpec("k", REC, At(time.time() - 1)))
    store.held = True
    assert ds._step() == pytest.approx(0.01)
    ds.stop(timeout=5)
    store.close()


# -- what a look costs: the claim's own wake-up, and wake-ups only when they can help ----


class CountingStore(SQLiteStore):
    """A SQLite store counting the transactions a scheduler asks of it, by kind."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked: dict[str, int] = {"claim_due": 0, "next_wakeup": 0}

    def claim_due(self, *args: Any, **kwargs: Any) -> Any:
        self.asked["claim_due"] += 1
        return super().claim_due(*args, **kwargs)

    def next_wakeup(self) -> float | None:
        self.asked["next_wakeup"] += 1
        return super().next_wakeup()


def test_a_look_that_claims_less_than_a_batch_asks_no_second_question(
    tmp_path: Path, durable_clock: Any
) -> None:
    """The claim's transaction found the next wake-up (ClaimWakeup): one transaction a look."""
    store = CountingStore(tmp_path / "jobs.db")
    start = durable_clock.wall()
    ds = inline_scheduler(store, durable_clock)
    for i in range(3):
        ds.declare(JobSpec(f"once{i}", REC, At(start + 10 * (i + 1))))
    for i in range(3):
        durable_clock.advance(10)
        assert ds.step() == pytest.approx(10.0 if i < 2 else DEFAULT_NOTIFIED_POLL)
    assert [c[2] for c in durable_jobs.CALLS] == [start + 10, start + 20, start + 30]
    assert store.asked == {"claim_due": 3, "next_wakeup": 0}
    store.close()


def test_runs_due_faster_than_the_look_gap_share_a_look(
    tmp_path: Path, durable_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a look that took runs, the next comes no sooner than LOOK_GAP after it.

    Runs due a few milliseconds apart are taken several a look (two at 100 runs a
    second), one transaction for them all; a look that took nothing, or a due time
    further off than the gap, is not held back.
    """
    from tickwork._durable import claims as claims_mod

    freeze_looks(monkeypatch)  # the look takes no time: only the gap is measured
    store = SQLiteStore(tmp_path / "jobs.db")
    start = durable_clock.wall()
    ds = inline_scheduler(store, durable_clock)
    ds.declare(JobSpec("a", REC, At(start + 10)))
    ds.declare(JobSpec("b", REC, At(start + 10.001)))
    ds.declare(JobSpec("c", REC, At(start + 10.004)))
    ds.declare(JobSpec("d", REC, At(start + 11)))
    assert ds.step() == pytest.approx(10.0)  # took nothing: the due time itself
    durable_clock.advance(10)
    assert ds.step() == pytest.approx(claims_mod.LOOK_GAP)  # b is 1 ms off: the gap
    durable_clock.advance(claims_mod.LOOK_GAP)
    assert ds.step() == pytest.approx(1.0 - claims_mod.LOOK_GAP)  # b and c; d is further
    assert [c[2] for c in durable_jobs.CALLS] == [start + 10, start + 10.001, start + 10.004]
    store.close()


def test_a_worker_done_wakes_the_timing_thread_only_when_the_pool_was_full() -> None:
    """Room to claim matters only where a full pool kept the last look from claiming."""
    from tickwork._durable.decide import Decision
    from tickwork._durable.engine import RunTable, _Run
    from tickwork.stores import Claim

    def run(token: str) -> _Run:
        claim = Claim(token, "job", "me", 0.0, 0.0, 30.0, None, JobSpec("job", REC, At(1.0)))
        return _Run(claim, Decision("run", None), 10.0)

    table = RunTable(capacity=2)
    first, second = run("a"), run("b")
    table.hold(first)
    table.done_on_worker(first)
    assert not table.wake  # one of two workers was busy: the last look could claim
    table.hold(second)
    table.hold(run("c"))  # two busy: the pool is full
    table.done_on_worker(second)
    assert table.wake


def _ends_with_a_look(ds: DurableScheduler, pool: ManualExecutor) -> bool:
    """Run what the last look claimed; whether a run's end asked for another look."""
    ds._table.wake = False
    assert pool.run_all()
    return ds._table.wake


def test_a_plain_runs_end_asks_for_no_look_but_one_that_frees_work_does(
    tmp_path: Path, durable_clock: Any
) -> None:
    """A one-shot's end costs no look; one that frees work the last look missed does.

    The last look's wake-up covers what was claimable then. A run's end can make more
    claimable only through what its claim held back: the next run of a job allowing no
    overlap, a run queued behind it, a chain run queued at its end. Without the check,
    every end below asks for a look (at sparse rates a transaction a run); with a check
    too eager to save it, the held-back runs would wait for the safety poll.
    """
    from tests.executors import manual_scheduler
    from tickwork import Every

    store = SQLiteStore(tmp_path / "jobs.db")
    ds, pool = manual_scheduler(store, durable_clock)
    now = durable_clock.wall()
    ds.declare(JobSpec("once1", REC, At(now + 10)))
    ds.declare(JobSpec("once2", REC, At(now + 20)))
    ds.declare(JobSpec("tick", REC, Every(60), overlap="skip"))
    ds.declare(JobSpec("queued", REC, At(now + 500), overlap="queue"))
    ds.declare(JobSpec("up", REC, At(now + 1000)))
    ds.declare(JobSpec("down", REC, after=["up"]))

    durable_clock.advance(10)
    ds.step()
    # The first end looks once: the declarations above were announced since (harmless).
    assert _ends_with_a_look(ds, pool)
    durable_clock.advance(10)
    ds.step()  # claims "once2"
    assert not _ends_with_a_look(ds, pool)  # a one-shot: nothing was held back

    durable_clock.advance(40)
    ds.step()  # claims "tick"; its next run waits for this one's end
    assert _ends_with_a_look(ds, pool)

    durable_clock.advance(440)
    ds.step()  # claims "queued"
    assert ds.trigger("queued") == "queued"  # a manual run waits behind it
    assert _ends_with_a_look(ds, pool)
    ds.step()
    assert _ends_with_a_look(ds, pool)  # the manual run: not a scheduled one

    durable_clock.advance(500)
    ds.step()  # claims "up"
    assert _ends_with_a_look(ds, pool)  # its end queues a run of "down"
    ds.step()
    assert _ends_with_a_look(ds, pool)  # a queued run ("down"), like a manual one: looks
    assert len(durable_jobs.CALLS) == 7  # once1, once2, tick, queued twice, up, down
    store.close()


def test_a_run_queued_by_another_process_behind_a_running_claim_gets_a_look(
    tmp_path: Path, durable_clock: Any
) -> None:
    """A waiting run this store did not queue: the last look saw it, so the end looks."""
    from tests.executors import manual_scheduler

    store = SQLiteStore(tmp_path / "jobs.db")
    ds, pool = manual_scheduler(store, durable_clock)
    now = durable_clock.wall()
    ds.declare(JobSpec("queued", REC, At(now + 10), overlap="queue"))
    store.look_after_finish()  # takes the declaration's announcement: not what is shown
    durable_clock.advance(10)
    ds.step()  # claims "queued"
    other = DurableScheduler(SQLiteStore(tmp_path / "jobs.db"), wall_clock=durable_clock.wall)
    assert other.trigger("queued") == "queued"  # through another store: no announcement here
    ds.step()  # the other process's change woke it: the waiting run is held back
    assert _ends_with_a_look(ds, pool)
    ds.step()
    assert pool.run_all() == 1  # and the look took it at once, not at the poll


def _run(token: str) -> Any:
    from tickwork._durable.decide import Decision
    from tickwork._durable.engine import _Run
    from tickwork.stores import Claim

    claim = Claim(token, "job", "me", 0.0, 0.0, 30.0, None, JobSpec("job", REC, At(1.0)))
    return _Run(claim, Decision("run", None), 10.0)


def test_runs_waiting_for_a_worker_keep_the_timing_thread_asleep_until_an_end_makes_room() -> None:
    """Runs claimed ahead of the workers (`PREFETCH` > 1): ends before they drain make no room."""
    from tickwork._durable.engine import RunTable

    table = RunTable(capacity=2)
    runs = [_run(t) for t in "abcd"]
    for r in runs:
        table.hold(r)  # two running, two waiting for a worker
    table.done_on_worker(runs[0])
    table.done_on_worker(runs[1])
    assert not table.wake  # their workers took the waiting runs: still full
    table.done_on_worker(runs[2])
    assert table.wake  # now a worker is free


def test_a_wake_for_room_is_passed_over_once_the_pool_is_full_again_a_poke_is_not() -> None:
    from tickwork._durable.engine import RunTable

    table = RunTable(capacity=1)
    first = _run("a")
    table.hold(first)
    table.forget(first, look=False)  # handed back before it ran: room, a look is wanted...
    assert table.wake and not table.refill
    second = _run("b")
    table.hold(second)  # ...but a look running meanwhile filled the pool again
    assert not table.woken() and not table.wake
    table.poke()  # asked for a look (a finish owed, the clock moved): always honoured
    assert table.woken() and not table.wake
    # The end of the run on the last busy worker: finishes may wait for the look it
    # brings on (`refill`), so that wake is honoured even once the pool is full again.
    table.done_on_worker(second)
    assert table.wake and table.refill
    table.hold(_run("c"))
    assert table.woken() and not table.wake
    table.forget(second)  # its end written: c holds the only worker
    assert not table.wake


def test_a_backlog_records_each_runs_start_and_end_with_the_claims(paths: Path) -> None:
    """A run's end in a full pool brings on the next look, which records its finish.

    Each look claims runs for the idle workers only, so its claim records them started
    (no start of their own), and the finishes of a backlog wait for the look their
    ends bring on (`RunTable.refill`): no record transaction of their own either. Two
    pools deep, a third of the runs needed a start transaction and most finishes one.
    """
    store = SQLiteStore(paths)
    written: list[tuple[int, int]] = []  # (starts, finishes) of each record transaction
    real = store.record

    def record(starts: Any, finishes: Any) -> Any:
        written.append((len(starts), len(finishes)))
        return real(starts, finishes)

    store.record = record  # type: ignore[method-assign]
    ds = DurableScheduler(store, max_workers=2, allowed_modules=["tests.durable_jobs"])
    n = 60

    def wait_for(ran: int) -> None:
        deadline = time.monotonic() + 60
        while sum(1 for j in ds.jobs() if j.last_run is not None) < ran:
            assert time.monotonic() < deadline, f"ran {len(durable_jobs.CALLS)} of {ran}"
            time.sleep(0.02)

    # A first run imports the function: a claim starts only runs it can call at once.
    ds.declare(JobSpec("first", REC, At(time.time() - 1)))
    ds.start()
    try:
        wait_for(1)
        later = time.time() + 3600
        for i in range(n):
            ds.declare(JobSpec(f"j{i:02d}", REC, At(later)))
        written.clear()
        # All due at once: one transaction from another connection (another process).
        with contextlib.closing(sqlite3.connect(paths, isolation_level=None)) as other:
            other.execute("UPDATE jobs SET next_run = ? WHERE id LIKE 'j%'", (time.time() - 1,))
        wait_for(n + 1)
    finally:
        ds.stop(timeout=30)
        store.close()
    assert len(durable_jobs.CALLS) == n + 1
    starts = sum(s for s, _ in written)
    finishes = sum(f for _, f in written)
    assert starts == 0, written  # every run was started by its claim
    # Only the ends of the last runs, after the backlog, may be written on their own.
    assert finishes <= 2, written


@pytest.mark.parametrize("ahead", [None, 0, 1, 3])
def test_a_look_claims_for_the_idle_workers_and_the_pools_ahead_the_store_asks_for(
    paths: Path, ahead: int | None
) -> None:
    class Ahead(SQLiteStore):
        claim_ahead = ahead

    store = SQLiteStore(paths) if ahead is None else Ahead(paths)
    pool = ManualExecutor()
    ds = DurableScheduler(
        store, poll=30.0, executor=pool, max_workers=2, allowed_modules=["tests.durable_jobs"]
    )
    for i in range(12):
        ds.declare(JobSpec(f"j{i:02d}", REC, At(time.time() - 1)))
    ds._step()
    assert len(pool.queue) == 2 * (1 + (ahead or 0))
    pool.run_all()
    ds.stop(timeout=5)
    store.close()


@pytest.mark.parametrize("ahead", [-1, 9, 1.0, True, "1"])
def test_a_store_asking_for_claims_ahead_is_checked(paths: Path, ahead: object) -> None:
    class Ahead(SQLiteStore):
        claim_ahead = ahead

    store = Ahead(paths)
    with pytest.raises(ValueError, match=r"Ahead\.claim_ahead must be an int from 0 to 8, got "):
        DurableScheduler(store)
    store.close()


def test_a_look_that_fills_the_pool_waits_for_an_end_instead_of_looking_again(
    paths: Path,
) -> None:
    """A full batch is looked after again at once only while workers are free."""
    store = SQLiteStore(paths)
    pool = ManualExecutor()
    ds = DurableScheduler(
        store, poll=30.0, executor=pool, max_workers=1, allowed_modules=["tests.durable_jobs"]
    )
    for i in range(2 * PREFETCH + 1):
        ds.declare(JobSpec(f"j{i}", REC, At(time.time() - 1)))
    # A full batch (one run for the worker, the others waiting for it) leaves the pool
    # full: the next look is when a run ends (or the lease needs renewing), not at once.
    assert ds._step() == pytest.approx(30.0 / 3, abs=1.0)
    assert len(pool.queue) == PREFETCH
    pool.run_all()
    assert len(durable_jobs.CALLS) == PREFETCH
    assert ds._step() == pytest.approx(30.0 / 3, abs=1.0)
    assert len(pool.queue) == PREFETCH
    pool.run_all()  # stop() would wait for the runs held
    ds.stop(timeout=5)
    store.close()


@pytest.fixture
def crowd() -> Iterator[dict[str, int]]:
    """`durable_jobs.crowd`'s counts, reset; its runs are released at the end whatever."""
    durable_jobs.CROWD.update(now=0, peak=0)
    durable_jobs.CROWD_GO.clear()
    yield durable_jobs.CROWD
    durable_jobs.CROWD_GO.set()


def _crowd_reaches(n: int) -> bool:
    with durable_jobs.CROWD_SEEN:
        return durable_jobs.CROWD_SEEN.wait_for(lambda: durable_jobs.CROWD["now"] >= n, 60)


def _pool_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Worker threads of a durable pool started since ``before`` (other tests' left out)."""
    return [
        t
        for t in threading.enumerate()
        if t not in before and t.name.startswith("tickwork-durable_")
    ]


def test_the_default_pool_runs_32_slow_jobs_at_once_on_threads_started_as_needed(
    paths: Path, crowd: dict[str, int]
) -> None:
    """40 blocking jobs due at once: 32 go at once, on 32 threads; one job alone, one."""
    assert DEFAULT_WORKERS == 32
    store = SQLiteStore(paths)
    ds = DurableScheduler(store, poll=30.0, allowed_modules=["tests.durable_jobs"])
    ends: list[str] = []
    all_ended = threading.Event()

    def on_event(e: RunEvent) -> None:
        if e.kind is EventKind.FINISHED:
            ends.append(e.job_id)
            if len(ends) == 41:
                all_ended.set()

    ds.add_listener(on_event)
    before = set(threading.enumerate())
    ds.declare(JobSpec("alone", "tests.durable_jobs:crowd", At(time.time() - 1)))
    ds.start()
    try:
        assert _crowd_reaches(1)
        assert len(_pool_threads(before)) == 1  # a thread only as a run needs one
        for i in range(40):
            ds.declare(JobSpec(f"j{i:02d}", "tests.durable_jobs:crowd", At(time.time() - 1)))
        assert _crowd_reaches(DEFAULT_WORKERS)
        assert len(_pool_threads(before)) == DEFAULT_WORKERS
    finally:
        durable_jobs.CROWD_GO.set()
    assert all_ended.wait(60), f"{len(ends)} of 41 runs ended"
    ds.stop(timeout=10)
    assert crowd["peak"] == DEFAULT_WORKERS
    assert all(j.last_run is not None and j.last_run.outcome == "ok" for j in ds.jobs())
    store.close()


class SizedExecutor(ManualExecutor):
    """A `ManualExecutor` that tells its size as the standard pools do."""

    def __init__(self, size: object) -> None:
        super().__init__()
        self._max_workers = size


@pytest.mark.parametrize(
    ("told", "max_workers", "claimed"),
    [(None, None, 32), (3, None, 3), (3, 5, 5), (0, None, 32), ("3", None, 32), (True, None, 32)],
)
def test_a_look_claims_for_the_size_a_given_executor_tells(
    paths: Path, told: object, max_workers: int | None, claimed: int
) -> None:
    """No run waits in the executor's queue with its start recorded by the claim.

    An executor that tells no size (None: as any but the standard pools) gets 32 runs,
    whatever the number of cores (it was ``min(32, cores + 4)``).
    """
    store = SQLiteStore(paths)
    pool = SizedExecutor(told)
    ds = DurableScheduler(
        store,
        poll=30.0,
        executor=pool,
        max_workers=max_workers,
        allowed_modules=["tests.durable_jobs"],
    )
    for i in range(40):
        ds.declare(JobSpec(f"j{i:02d}", REC, At(time.time() - 1)))
    ds._step()
    assert len(pool.queue) == claimed
    pool.run_all()
    ds.stop(timeout=5)
    store.close()


def test_a_standard_pool_given_as_the_executor_runs_as_many_as_its_threads(
    paths: Path, crowd: dict[str, int]
) -> None:
    store = SQLiteStore(paths)
    with ThreadPoolExecutor(3) as pool:
        ds = DurableScheduler(
            store, poll=30.0, executor=pool, allowed_modules=["tests.durable_jobs"]
        )
        for i in range(10):
            ds.declare(JobSpec(f"j{i:02d}", "tests.durable_jobs:crowd", At(time.time() - 1)))
        ds.start()
        try:
            assert _crowd_reaches(3)
            # Only the three running runs are claimed: none waits in the pool's queue.
            assert sum(1 for j in ds.jobs() if j.claims) == 3
        finally:
            durable_jobs.CROWD_GO.set()
        ds.stop(timeout=30)
    assert crowd["peak"] == 3
    store.close()
