"""A run's start and end are written even when the store fails for a while (issue 26, point 1).

Before: a finish the store could not record (a full disk, a dropped connection) was
never tried again; the run that did end was recorded ``abandoned`` when its lease
expired, the job stayed blocked until then, and a clean stop returned leaving the
claim. Now a finish is retried at each look until written, in the order the runs
ended, with the run held (its lease renewed) meanwhile; a start is retried by its
worker before the job is called; `DurableScheduler.stop` writes what it owes before it
returns, up to its bound, and names what it could not write.

The faults are injected by `FlakyStore`: a `SQLiteStore` whose writes fail with
`StoreError` while told to, as a full disk makes them fail.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.durable_jobs import CALLS
from tests.waiting import DEADLINE
from tickwork import DurableScheduler, Every
from tickwork.stores import JobSpec, StoreError
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

LEASE = 30.0
POLL = 1.0
LIMIT = DEADLINE  # only a real hang reaches it (tests/waiting.py)


class FlakyStore(SQLiteStore):
    """A SQLite store whose writes fail while ``failing`` says so (a full disk).

    ``failing``: ``"writes"`` (every write transaction), ``"finish"`` (only the
    records of a run's end: reads, claims and lease renewals work), ``"start"`` (only
    the records of a run's start), or ``None``.
    """

    failing: str | None = None
    refused = 0

    def _tx(self, what: str, *, write: bool = True) -> AbstractContextManager[Any]:
        if write and self._fails(what):
            self.refused += 1
            raise StoreError(f"cannot {what}: database or disk is full")
        return super()._tx(what, write=write)

    def _fails(self, what: str) -> bool:
        if self.failing == "writes":
            return True
        if self.failing == "finish":
            return what.startswith("finish")
        return False

    def record(self, starts: Any, finishes: Any) -> Any:
        if (self.failing == "finish" and finishes) or (self.failing == "start" and starts):
            self.refused += 1
            raise StoreError("cannot record runs: database or disk is full")
        return super().record(starts, finishes)

    def start(self, claim: Any, *, started: float) -> bool:
        if self.failing == "start":
            self.refused += 1
            raise StoreError("cannot record a start: database or disk is full")
        return super().start(claim, started=started)


@pytest.fixture
def clock() -> FakeClock:
    CALLS.clear()
    return FakeClock(1000.0, wall_start=1_700_000_000.0)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[SQLiteStore]]:
    opened: list[SQLiteStore] = []
    yield opened
    for s in opened:
        s.close()


def _scheduler(store: SQLiteStore, clock: FakeClock, **kw: Any) -> DurableScheduler:
    kw.setdefault("executor", InlineExecutor())
    return DurableScheduler(
        store,
        lease=LEASE,
        poll=POLL,
        max_workers=2,
        wall_clock=clock.wall,
        monotonic_clock=clock,
        **kw,
    )


def _job(job_id: str, **kw: Any) -> JobSpec:
    return JobSpec(job_id, "tests.durable_jobs:record", Every(10.0), args=[job_id], **kw)


def _passes(ds: DurableScheduler, clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` of fake time pass, looking every ``POLL`` (failed looks included)."""
    for _ in range(round(seconds / POLL)):
        clock.advance(POLL)
        ds.step()


def test_a_finish_the_store_fails_to_write_is_written_once_it_works(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock)
    ds.declare(_job("tick"))
    clock.advance(10.0)
    store.failing = "finish"  # the run starts fine; its end cannot be written
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        ds.step()
        ended = clock.wall()
        assert [c[0] for c in CALLS] == [("tick",)]
        assert [job for job, _ in ds.unrecorded()] == ["tick"]
        assert ds.running() == {}  # the job is over; only its record is owed
        assert "cannot record the end of job 'tick'" in caplog.text
        assert "its lease will expire" not in caplog.text
        # Everything fails now, for four leases: nothing renews, nothing is written.
        store.failing = "writes"
        _passes(ds, clock, 4 * LEASE)
        assert [job for job, _ in ds.unrecorded()] == ["tick"]
        store.failing = None  # the disk has room again
        ds.step()
    assert ds.unrecorded() == []
    entries = ds.history("tick")
    ok = [e for e in entries if e.outcome == "ok"]
    assert len(ok) == 1 and ok[0].ended == pytest.approx(ended)
    assert not [e for e in entries if e.outcome == "abandoned"]
    assert "recorded the end of job 'tick'" in caplog.text
    state = ds.get("tick")
    assert state is not None and not state.claims  # not blocked: the job goes on
    _passes(ds, clock, 20.0)
    assert len(CALLS) >= 2
    ds.stop()


def test_the_lease_is_renewed_while_the_finish_is_owed_so_nobody_recovers_it(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore]
) -> None:
    flaky = FlakyStore(tmp_path / "jobs.db")
    other_store = SQLiteStore(tmp_path / "jobs.db")
    stores.extend([flaky, other_store])
    a = _scheduler(flaky, clock, owner="a")
    b = _scheduler(other_store, clock, owner="b")
    a.declare(_job("tick", delivery="at_most_once"))
    a.declare(_job("tock", delivery="at_most_once"))
    clock.advance(10.0)
    flaky.failing = "finish"
    a.step()  # both run here; neither end can be written
    assert sorted(job for job, _ in a.unrecorded()) == ["tick", "tock"]
    for _ in range(round(3 * LEASE / POLL)):  # three leases; b looks for expired ones
        clock.advance(POLL)
        a.step()  # renews; writing the ends fails
        b.step()
    for job in ("tick", "tock"):
        state = b.get(job)
        assert state is not None and [c.owner for c in state.claims] == ["a"]
    flaky.failing = None
    a.step()
    assert a.unrecorded() == []
    for job in ("tick", "tock"):
        outcomes = [e.outcome for e in a.history(job)]
        assert "abandoned" not in outcomes and outcomes[-1] == "ok", outcomes
    a.stop()
    b.stop()


def test_stop_writes_what_it_owes_before_it_returns(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore]
) -> None:
    store = FlakyStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock)
    ds.declare(_job("tick"))
    clock.advance(10.0)
    store.failing = "finish"
    ds.step()
    store.failing = "writes"
    assert [job for job, _ in ds.unrecorded()] == ["tick"]
    threading.Timer(0.5, lambda: setattr(store, "failing", None)).start()
    assert ds.stop(timeout=LIMIT) is True  # it kept trying until the store worked
    assert ds.unrecorded() == []
    assert [e.outcome for e in ds.history("tick")] == ["ok"]


def test_stop_names_what_it_could_not_write(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock)
    ds.declare(_job("tick"))
    clock.advance(10.0)
    slot = clock.wall()
    store.failing = "finish"
    ds.step()
    store.failing = "writes"
    refused = store.refused
    with caplog.at_level(logging.ERROR, logger="tickwork.durable"):
        assert ds.stop(timeout=1.0) is False
    assert store.refused > refused + 1  # tried again while stopping, not once
    assert ds.unrecorded() == [("tick", slot)]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(
        "stopping without having recorded the end of job 'tick'" in m and "scheduled" in m
        for m in errors
    ), errors


def test_a_start_the_store_fails_to_write_is_retried_before_the_job_runs(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore]
) -> None:
    store = FlakyStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock, executor=None)  # a real pool: the worker retries
    ds.declare(_job("tick"))
    clock.advance(10.0)
    store.failing = "start"
    ds.step()
    give_up = threading.Event()
    deadline = threading.Timer(LIMIT, give_up.set)
    deadline.start()
    try:
        while store.refused < 3 and not give_up.is_set():
            give_up.wait(0.02)
        assert store.refused >= 3, "the start was not tried again"
        assert CALLS == []  # the job waits for its start to be written
        store.failing = None
        while not CALLS and not give_up.is_set():
            give_up.wait(0.02)
        assert [c[0] for c in CALLS] == [("tick",)]
    finally:
        deadline.cancel()
    assert ds.stop(timeout=LIMIT) is True
    assert [e.outcome for e in ds.history("tick")] == ["ok"]
