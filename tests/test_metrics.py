"""`tickwork.metrics.SchedulerMetrics` on every scheduler, deterministically.

Each scheduler runs on a `FakeClock`, its due jobs run inside ``step()`` (or
``run_pending()``), and the figures are read back from the registry as a scrape would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.executors import ManualExecutor
from tickwork import (
    AsyncScheduler,
    DurableScheduler,
    Every,
    OneOff,
    Scheduler,
    ThreadScheduler,
)
from tickwork.metrics import SchedulerMetrics
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

from . import durable_jobs

START = 1_800_000_000.0


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def ok() -> None:
    """A job that works."""


def boom() -> None:
    """A job that fails."""
    raise RuntimeError("boom")


def late() -> None:
    """A job that gives up as timed out."""
    raise TimeoutError("took too long")


def test_a_timed_out_run_is_counted_as_timeout() -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    m = SchedulerMetrics(wall_clock=lambda: START)
    m.watch(s)
    s.schedule(1, late, name="export")
    clock.advance(1)
    s.run_pending()
    assert value(m.registry, "tickwork_runs_total", job="export", outcome="timeout") == 1
    assert value(m.registry, "tickwork_runs_total", job="export", outcome="failed") is None


def test_the_core_scheduler_counts_runs_by_name_and_outcome() -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    m = SchedulerMetrics(wall_clock=lambda: START)
    m.watch(s)
    s.schedule(1, ok, 1)  # named after the function
    s.schedule(1, boom, name="nightly")
    for _ in range(3):
        clock.advance(1)
        s.run_pending()
    r = m.registry
    assert value(r, "tickwork_runs_total", job="ok", outcome="ok") == 3
    assert value(r, "tickwork_runs_total", job="nightly", outcome="failed") == 1
    assert value(r, "tickwork_run_duration_seconds_count", job="ok") == 3
    assert value(r, "tickwork_run_lateness_seconds_count", job="nightly") == 1
    assert value(r, "tickwork_last_success_timestamp_seconds", job="ok") == START
    assert value(r, "tickwork_last_success_timestamp_seconds", job="nightly") is None
    assert value(r, "tickwork_running", job="ok") == 0
    # the recurring task's next run, read at scrape time from tasks()
    (info,) = s.tasks()
    assert value(r, "tickwork_next_run_timestamp_seconds", job="ok") == pytest.approx(
        info.next_run.timestamp()  # type: ignore[union-attr]
    )
    assert value(r, "tickwork_next_run_timestamp_seconds", job="nightly") is None


def test_a_tasks_failure_streak_counts_failures_since_its_last_ok_run() -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    m = SchedulerMetrics()
    m.watch(s)
    results = iter([boom, boom, late, ok, boom])  # timeouts are failures too

    def flaky() -> None:
        next(results)()

    s.schedule(1, flaky, 1, name="flaky")
    s.schedule(1, ok, 1, name="fine")
    streaks = []
    for _ in range(5):
        clock.advance(1)
        s.run_pending()
        streaks.append(value(m.registry, "tickwork_failure_streak", job="flaky"))
    assert streaks == [1, 2, 3, 0, 1]
    assert value(m.registry, "tickwork_failure_streak", job="fine") == 0
    assert value(m.registry, "tickwork_paused", job="flaky") == 0
    assert value(m.registry, "tickwork_waiting_runs", job="flaky") is None  # durable only


def test_a_late_core_task_counts_its_missed_slots() -> None:
    clock = FakeClock()
    s = Scheduler(clock)
    m = SchedulerMetrics()
    m.watch(s)
    s.schedule(1, ok, 1, name="tick")
    clock.advance(4.5)  # due at 1; slots 2, 3 and 4 pass unrun
    s.run_pending()
    assert value(m.registry, "tickwork_slots_skipped_total", job="tick", reason="missed") == 3


def test_the_thread_driver_counts_overlap_skips_and_running() -> None:
    clock = FakeClock()
    pool = ManualExecutor()
    ts = ThreadScheduler(clock, executor=pool)
    m = SchedulerMetrics()
    m.watch(ts)
    seen: list[float | None] = []

    def sync() -> None:
        seen.append(value(m.registry, "tickwork_running", job=sync.__qualname__))

    ts.schedule(1, sync, 1, overlap="skip")
    clock.advance(1)
    ts.step()  # handed to the pool, not started yet
    clock.advance(1)
    ts.step()  # due again while the first run is pending: skipped
    pool.run_all()
    ts.step()
    r = m.registry
    assert seen == [1.0]  # the gauge counted it while it ran
    assert value(r, "tickwork_slots_skipped_total", job=sync.__qualname__, reason="overlap") == 1
    assert value(r, "tickwork_runs_total", job=sync.__qualname__, outcome="ok") == 1
    assert value(r, "tickwork_running", job=sync.__qualname__) == 0


def test_the_asyncio_driver_is_watched_the_same_way() -> None:
    async def main() -> CollectorRegistry:
        clock = FakeClock()
        s = AsyncScheduler(clock)
        m = SchedulerMetrics()
        m.watch(s)
        s.schedule(1, boom, name="fetch")
        clock.advance(1)
        s.step()
        for _ in range(3):
            await asyncio.sleep(0)
        return m.registry

    r = asyncio.run(main())
    assert value(r, "tickwork_runs_total", job="fetch", outcome="failed") == 1


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    c = FakeClock(wall_start=START)
    durable_jobs.CALLS.clear()
    durable_jobs.CLOCK = c
    yield c
    durable_jobs.CLOCK = None


def test_the_durable_scheduler_labels_by_job_and_reports_its_next_runs(
    tmp_path: Path, clock: FakeClock
) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        pool = ManualExecutor()
        ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
        m = SchedulerMetrics(job_label=lambda job: job.partition("/")[2] or job)
        m.watch(ds)
        ds.declare(JobSpec("ns/report", "tests.durable_jobs:record", Every(10)))
        ds.declare(JobSpec("ns/bad", "tests.durable_jobs:boom", Every(10)))
        clock.advance(10)
        ds.step()
        pool.run_all()
        ds.step()
        r = m.registry
        assert value(r, "tickwork_runs_total", job="report", outcome="ok") == 1
        assert value(r, "tickwork_runs_total", job="bad", outcome="failed") == 1
        # durable events carry wall-clock times: the success is the run's own end
        assert value(r, "tickwork_last_success_timestamp_seconds", job="report") == START + 10
        assert value(r, "tickwork_next_run_timestamp_seconds", job="report") == START + 20
        assert value(r, "tickwork_store_errors_total") == 0
        assert value(r, "tickwork_lost_leases_total") == 0
        text = generate_latest(r).decode()
        assert 'tickwork_runs_total{job="report",outcome="ok"} 1.0' in text
        assert "ns/report" not in text  # labels are the names job_label makes


def test_run_counts_equal_the_ledger_outcome_for_outcome(tmp_path: Path, clock: FakeClock) -> None:
    # Issue 39: a run "replace" ended was counted failed while its ledger entry said
    # cancelled. Every outcome a run (or a retried attempt) ends with, counted as recorded.
    durable_jobs.FLAKY.clear()
    with SQLiteStore(tmp_path / "s.db") as store:
        ds = DurableScheduler(
            store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
        )
        m = SchedulerMetrics()
        m.watch(ds)
        J = "tests.durable_jobs"
        ds.declare(JobSpec("ok", f"{J}:record", Every(10)))
        ds.declare(JobSpec("bad", f"{J}:boom", Every(10)))
        ds.declare(JobSpec("slow", f"{J}:too_slow", Every(10)))
        ds.declare(JobSpec("replaced", f"{J}:cancelled", Every(10)))
        ds.declare(
            JobSpec("flaky", f"{J}:flaky", Every(10), args=["m", 2], retries=2, retry_backoff=0.001)
        )
        for _ in range(2):
            clock.advance(10)
            ds.step()
        ledger: dict[tuple[str, str], int] = {}
        for entry in ds.history(limit=1000):
            ledger[(entry.job_id, entry.outcome)] = ledger.get((entry.job_id, entry.outcome), 0) + 1
        counted = {
            (s.labels["job"], s.labels["outcome"]): int(s.value)
            for family in m.registry.collect()
            if family.name == "tickwork_runs"
            for s in family.samples
            if s.name == "tickwork_runs_total"
        }
        assert counted == ledger
        assert ledger[("replaced", "cancelled")] == 2 and ledger[("flaky", "failed")] == 2


def test_each_retried_attempt_starts_and_ends_so_the_running_gauge_returns_to_zero(
    tmp_path: Path, clock: FakeClock
) -> None:
    # Issue 39: a call with retries had one STARTED but a FAILED per attempt, so
    # tickwork_running went to -2. Each attempt is a start and an end, as in the ledger.
    durable_jobs.FLAKY.clear()
    with SQLiteStore(tmp_path / "s.db") as store:
        ds = DurableScheduler(
            store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
        )
        m = SchedulerMetrics()
        m.watch(ds)
        kinds: list[str] = []
        ds.add_listener(lambda event: kinds.append(event.kind.value))
        J = "tests.durable_jobs"
        ds.declare(
            JobSpec("flaky", f"{J}:flaky", Every(10), args=["g", 2], retries=2, retry_backoff=0.001)
        )
        clock.advance(10)
        ds.step()
        assert kinds == ["started", "failed", "started", "failed", "started", "finished"]
        assert [e.attempt for e in ds.history("flaky")] == [3, 2, 1]
        assert value(m.registry, "tickwork_running", job="flaky") == 0
        assert value(m.registry, "tickwork_run_lateness_seconds_count", job="flaky") == 3


def test_the_last_success_is_also_read_from_the_shared_state(
    tmp_path: Path, clock: FakeClock
) -> None:
    # Another node's ok run, before this scheduler started: only the ledger knows it.
    with SQLiteStore(tmp_path / "s.db") as store:
        other = DurableScheduler(
            store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
        )
        other.declare(JobSpec("report", "tests.durable_jobs:record", Every(10)))
        other.declare(JobSpec("bad", "tests.durable_jobs:boom", Every(10)))
        clock.advance(10)
        other.step()
        m = SchedulerMetrics()
        m.watch(DurableScheduler(store, wall_clock=clock.wall, monotonic_clock=clock))
        r = m.registry
        assert value(r, "tickwork_last_success_timestamp_seconds", job="report") is None
        assert value(r, "tickwork_state_last_success_timestamp_seconds", job="report") == (
            START + 10
        )
        assert value(r, "tickwork_state_last_success_timestamp_seconds", job="bad") is None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="registry must be a CollectorRegistry"):
        SchedulerMetrics(registry="default")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="job_label must be callable"):
        SchedulerMetrics(job_label="job")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must have add_listener"):
        SchedulerMetrics().watch(object())  # type: ignore[arg-type]


def test_inline_executor_runs_count_at_once() -> None:
    clock = FakeClock()
    ts = ThreadScheduler(clock, executor=InlineExecutor())
    m = SchedulerMetrics()
    m.watch(ts)
    ts.schedule(2, ok)
    clock.advance(2)
    ts.step()
    assert value(m.registry, "tickwork_runs_total", job="ok", outcome="ok") == 1


def test_one_offs_are_counted_per_function_and_label_their_runs_by_it(
    open_either_store: Any, clock: FakeClock
) -> None:
    store = open_either_store()
    pool = ManualExecutor()
    ds = DurableScheduler(
        store,
        executor=pool,
        wall_clock=clock.wall,
        monotonic_clock=clock,
        allowed_modules=["tests.durable_jobs"],
    )
    m = SchedulerMetrics()
    m.watch(ds)
    rec, boom = "tests.durable_jobs:record", "tests.durable_jobs:boom"
    ds.enqueue_many([OneOff(rec), OneOff(rec), OneOff(boom), OneOff(rec, delay=60)])
    ds.cancel(ds.enqueue(rec, delay=60, key="k"))
    for _ in range(3):
        ds.step()
        pool.run_all()
    r = m.registry
    assert value(r, "tickwork_runs_total", job=rec, outcome="ok") == 2
    assert value(r, "tickwork_runs_total", job=boom, outcome="failed") == 1
    assert value(r, "tickwork_running", job=rec) == 0
    assert value(r, "tickwork_oneoffs", queue=rec, state="pending") == 1
    assert value(r, "tickwork_oneoffs", queue=rec, state="running") == 0
    assert value(r, "tickwork_oneoffs_ended_total", queue=rec, outcome="done") == 2
    assert value(r, "tickwork_oneoffs_ended_total", queue=rec, outcome="dropped") == 1
    assert value(r, "tickwork_oneoffs_ended_total", queue=boom, outcome="failed") == 1
    assert "~" not in generate_latest(r).decode()  # no label a run: ids stay out
