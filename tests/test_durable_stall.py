"""A stalled scheduler reports what happened, not what it saw late (issue 26, point 6).

On injected clocks: a run whose work ended long before the job returned (the daemon
was stopped while its command ended) is recorded with its real end (`record_end`), so
the slots that passed after that end are ``missed``, not ``skipped`` as overlapping it;
the timing loop warns when it wakes much later than it meant to; a claim found gone
names who holds the slot now, and says "recovered elsewhere" only when someone does.
The real daemon under SIGSTOP/SIGCONT is in ``tests/test_daemon_stall.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import DEADLINE
from tickwork import DurableScheduler, Every
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

LEASE = 30.0
LIMIT = DEADLINE  # only a real hang reaches it (tests/waiting.py)
CLOCK: FakeClock | None = None
RELEASE = threading.Event()
RUNNING = threading.Event()


def ended_long_ago() -> None:
    """Its work takes 5 s; the scheduler gets its return 40 s after it started."""
    assert CLOCK is not None
    CLOCK.advance(40.0)  # the process was stopped: the job's end is seen late
    DurableScheduler.record_end(time.monotonic() - 35.0)  # it ended 35 s ago


def held() -> None:
    """Runs until the test lets it go."""
    RUNNING.set()
    RELEASE.wait(LIMIT)


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    global CLOCK
    CLOCK = FakeClock(1000.0, wall_start=1_700_000_000.0)
    RELEASE.clear()
    RUNNING.clear()
    yield CLOCK
    RELEASE.set()
    CLOCK = None


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[SQLiteStore]]:
    opened: list[SQLiteStore] = []
    yield opened
    for s in opened:
        s.close()


def _scheduler(store: SQLiteStore, clock: FakeClock, **kw: Any) -> DurableScheduler:
    kw.setdefault("executor", InlineExecutor())
    return DurableScheduler(
        store, lease=LEASE, poll=1.0, wall_clock=clock.wall, monotonic_clock=clock, **kw
    )


def test_a_run_is_recorded_with_the_end_the_job_reports(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore]
) -> None:
    store = SQLiteStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock)
    ds.declare(JobSpec("j", "tests.test_durable_stall:ended_long_ago", Every(10.0)))
    clock.advance(10.0)
    slot = clock.wall()
    ds.step()  # runs it: the job returns 40 s later, its work ended after 5 s
    first = ds.history("j")
    assert [(e.scheduled, e.outcome) for e in first] == [(slot, "ok")]
    assert first[0].duration == pytest.approx(5.0, abs=1.0)  # not 40 s
    ds.step()
    # The slots 10, 20, 30 and 40 s after it came after the run had ended: missed
    # (the daemon could not start them), not skipped as overlapping the run.
    outcomes = {e.outcome for e in ds.history("j") if e.scheduled > slot}
    assert outcomes == {"missed"}, ds.history("j")
    ds.stop()


def test_record_end_outside_a_job_and_bad_values_are_refused() -> None:
    with pytest.raises(RuntimeError, match="only for a running durable job"):
        DurableScheduler.record_end(time.monotonic())
    with pytest.raises(TypeError, match=r"at must be a time.monotonic\(\) reading, got 'x'"):
        DurableScheduler.record_end("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="got nan"):
        DurableScheduler.record_end(float("nan"))


def test_the_timing_loop_warns_when_it_wakes_much_later_than_it_meant(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "jobs.db")
    stores.append(store)
    ds = _scheduler(store, clock)
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        ds.start()
        try:
            give_up = time.monotonic() + LIMIT
            while ds.health().last_look_age is None and time.monotonic() < give_up:
                time.sleep(0.02)
            clock.advance(60.0)  # the loop slept 1 s of its clock and woke 60 s later
            while "timing loop woke" not in caplog.text and time.monotonic() < give_up:
                time.sleep(0.02)
        finally:
            ds.stop()
    assert "the timing loop woke 59.0 s late (it meant to sleep 1.0 s)" in caplog.text


def _claimed_and_running(ds: DurableScheduler, clock: FakeClock) -> None:
    clock.advance(100.0)  # the first slot of Every(100)
    ds.step()
    assert RUNNING.wait(LIMIT)


def test_a_claim_recovered_by_another_scheduler_names_it(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    a_store, b_store = SQLiteStore(tmp_path / "jobs.db"), SQLiteStore(tmp_path / "jobs.db")
    stores.extend([a_store, b_store])
    a = _scheduler(a_store, clock, owner="a", executor=None)
    b = _scheduler(
        b_store, clock, owner="b", executor=None, allowed_modules=["tests.test_durable_stall"]
    )
    a.declare(JobSpec("j", "tests.test_durable_stall:held", Every(100.0), delivery="at_least_once"))
    _claimed_and_running(a, clock)
    RUNNING.clear()
    clock.advance(2 * LEASE)  # a is stalled: it renews nothing
    b.step()  # b recovers the expired claim and runs the slot again
    assert RUNNING.wait(LIMIT)
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        a.step()
    assert "its lease expired and b recovered it" in caplog.text
    RELEASE.set()
    a.stop(timeout=LIMIT)
    b.stop(timeout=LIMIT)


def test_a_claim_released_with_no_one_else_holding_it_is_not_recovered_elsewhere(
    tmp_path: Path, clock: FakeClock, stores: list[SQLiteStore], caplog: pytest.LogCaptureFixture
) -> None:
    store, other = SQLiteStore(tmp_path / "jobs.db"), SQLiteStore(tmp_path / "jobs.db")
    stores.extend([store, other])
    ds = _scheduler(store, clock, owner="a", executor=None)
    ds.declare(JobSpec("j", "tests.test_durable_stall:held", Every(100.0)))
    _claimed_and_running(ds, clock)
    clock.advance(2 * LEASE)
    other.recover_expired(clock.wall())  # a stalled past its lease; recovery released it
    with caplog.at_level(logging.WARNING, logger="tickwork.durable"):
        ds.step()
    assert "lost the claim on job 'j'" in caplog.text
    assert "no other scheduler holds the slot" in caplog.text
    assert "elsewhere" not in caplog.text and "recovered it" not in caplog.text
    RELEASE.set()
    ds.stop(timeout=LIMIT)
