"""The slot ledger through `DurableScheduler`: every slot ends in exactly one entry.

Deterministic (fake clock, manual pool, ``step()``), on SQLite and on PostgreSQL: the
scenarios of the missed-run and overlap policies, failures, a lost runner, and the
retention pruning the timing thread does when it is idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import AsyncDurableScheduler, DurableScheduler, Every
from tickwork.stores import JobSpec, SlotRecord, Store
from tickwork.testing import FakeClock

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
    def new(store_kw: dict[str, Any] | None = None, **kw: Any) -> tuple[Any, ManualExecutor]:
        pool = ManualExecutor()
        kw.setdefault("lease", 30.0)
        ds = DurableScheduler(
            open_store(**(store_kw or {})),
            executor=pool,
            wall_clock=clock.wall,
            monotonic_clock=clock,
            **kw,
        )
        return ds, pool

    return new


def slots_of(entries: list[SlotRecord], step: float) -> list[tuple[float, str]]:
    """Each slot an entry accounts for, with its outcome, oldest first."""
    out = []
    for e in entries:
        out += [(round(e.scheduled + k * step - START, 6), e.outcome) for k in range(e.slots)]
    return sorted(out)


@pytest.mark.parametrize(
    ("policy", "want"),
    [
        ("skip", [(10, "missed"), (20, "missed"), (30, "missed"), (40, "missed")]),
        ("once", [(10, "ok"), (20, "missed"), (30, "missed"), (40, "missed")]),
        ("all", [(10, "ok"), (20, "ok"), (30, "ok"), (40, "ok")]),
    ],
)
def test_runs_missed_while_down_each_end_in_one_entry(
    make: Make, clock: FakeClock, policy: str, want: list[tuple[float, str]]
) -> None:
    spec = JobSpec("e", REC, Every(10), args=["e"], missed=policy)  # type: ignore[arg-type]
    ds, _ = make()
    ds.declare(spec)
    clock.advance(45)  # down from +0 to +45: slots 10, 20, 30 and 40 passed
    ds2, pool2 = make()
    ds2.declare(spec)
    drain(ds2, pool2)
    assert slots_of(ds2.history("e"), 10) == want
    clock.advance(10)  # +55: slot 50 is on time
    drain(ds2, pool2)
    assert slots_of(ds2.history("e"), 10) == [*want, (50, "ok")]
    assert ds2.history("e", limit=1)[0].lateness == pytest.approx(5.0)


def test_missed_cap_gives_up_the_oldest_in_one_entry(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("e", REC, Every(10), args=["e"], missed="all", missed_cap=3))
    clock.advance(105)  # slots 10..100 passed: the oldest 7 are dropped, 80/90/100 replayed
    drain(ds, pool)
    entries = ds.history("e")
    assert slots_of(entries, 10) == [(10.0 * k, "missed") for k in range(1, 8)] + [
        (80, "ok"),
        (90, "ok"),
        (100, "ok"),
    ]
    assert len(entries) == 5  # the claimed slot, the 6 others in one entry, 3 runs


def test_overlapping_slots_are_skipped_in_the_ledger(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("s", "tests.durable_jobs:slow", Every(10), args=[25]))
    clock.advance(10)
    ds.step()
    pool.run_all()  # runs 10 -> 35 (fake time inside the job)
    drain(ds, pool)
    assert slots_of(ds.history("s"), 10) == [(10, "ok"), (20, "skipped"), (30, "skipped")]
    run = ds.history("s", outcome="ok")[0]
    assert run.duration == pytest.approx(25.0)


def test_failures_keep_their_error_and_node(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("b", "tests.durable_jobs:boom", Every(10)))
    clock.advance(10)
    drain(ds, pool)
    (e,) = ds.history("b")
    assert e.outcome == "failed" and e.error is not None and "RuntimeError" in e.error
    assert e.node == ds.owner and e.attempt == 1
    assert ds.history(outcome="ok") == []
    assert ds.history(since=datetime.fromtimestamp(START + 11, UTC)) == []
    assert ds.history(since=datetime.fromtimestamp(START + 10, UTC)) == [e]
    with pytest.raises(ValueError, match="since must be an aware datetime"):
        ds.history(since=datetime(2026, 1, 1))


@pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once"])
def test_a_dead_runner_leaves_an_abandoned_attempt(
    make: Make, clock: FakeClock, delivery: str
) -> None:
    spec = JobSpec("h", REC, Every(100), args=["h"], delivery=delivery)  # type: ignore[arg-type]
    ds, _ = make()
    ds.declare(spec)
    clock.advance(100)
    ds.step()
    (run,) = ds._table.runs.values()
    assert ds.store.start(run.claim, started=clock.wall())  # then the process "dies"
    ds2, pool2 = make()
    ds2.declare(spec)
    clock.advance(31)  # the first one's lease ends
    drain(ds2, pool2)
    entries = ds2.history("h")
    assert [(e.outcome, e.attempt, e.node) for e in reversed(entries)] == (
        [("abandoned", 1, ds.owner)]
        if delivery == "at_most_once"
        else [("abandoned", 1, ds.owner), ("ok", 2, ds2.owner)]
    )
    assert {e.scheduled for e in entries} == {START + 100}
    assert entries[-1].ended is None and entries[-1].started == START + 100


def test_the_idle_timing_loop_prunes_to_the_retention(make: Make, clock: FakeClock) -> None:
    ds, pool = make({"history_keep": 2})
    ds.declare(JobSpec("e", REC, Every(10), args=["e"]))
    for _ in range(5):
        clock.advance(10)
        drain(ds, pool)
    # pruning happens in a quiet look at most every 10 s of wall time: the last drain
    # pruned before its own run, so 3 entries may remain; the next quiet look trims
    assert len(ds.history("e")) <= 3
    clock.advance(5)
    ds.step()
    assert [e.scheduled - START for e in ds.history("e")] == [50.0, 40.0]


def test_the_async_face_reads_the_ledger(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("e", REC, Every(10), args=["e"]))
    clock.advance(10)
    drain(ds, pool)
    face = AsyncDurableScheduler(ds.store)
    assert [e.outcome for e in asyncio.run(face.history("e"))] == ["ok"]


def test_both_faces_page_the_ledger_back_and_forward(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("e", REC, Every(10), args=["e"]))
    for _ in range(4):
        clock.advance(10)
        drain(ds, pool)
    seqs = [e.seq for e in ds.history("e")]  # newest first
    assert [e.seq for e in ds.history("e", after=seqs[3], limit=2)] == seqs[1:3]
    assert [e.seq for e in ds.history("e", before=seqs[0], limit=2)] == seqs[1:3]
    face = AsyncDurableScheduler(ds.store)
    got = asyncio.run(face.history("e", after=seqs[2], limit=1))
    assert [e.seq for e in got] == [seqs[1]]


def test_a_job_s_recorded_output_goes_into_its_entry(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("n", "tests.durable_jobs:noisy", Every(10), args=["x" * 5000]))
    ds.declare(JobSpec("f", "tests.durable_jobs:noisy_fail", Every(10), args=["why"]))
    clock.advance(10)
    drain(ds, pool)
    (n,) = ds.history("n")
    assert n.outcome == "ok" and n.output == "x" * 4000  # the end, bounded
    (f,) = ds.history("f")
    assert f.outcome == "failed" and f.output == "why" and "after the output" in (f.error or "")


def test_record_output_is_only_for_a_running_job() -> None:
    with pytest.raises(RuntimeError, match="only for a running durable job"):
        DurableScheduler.record_output("x")
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        DurableScheduler.record_output(b"x")  # type: ignore[arg-type]


def test_a_job_that_times_out_ends_as_timeout(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("t", "tests.durable_jobs:too_slow", Every(10)))
    clock.advance(10)
    drain(ds, pool)
    (e,) = ds.history("t")
    assert e.outcome == "timeout" and "more than 30 s" in (e.error or "")
    state = ds.get("t")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "timeout"
