"""Declaring a program's jobs at once: `DurableScheduler.declare_many`, `upsert_many`.

- each spec ends as `declare` would end it (created, updated, unchanged; a changed
  schedule restarts, another change keeps the next run), on both stores;
- a spec that fails its checks gets its exception in its place, the others are stored;
- a chained job is declared after the batch, its upstream stored first;
- ids: distinct in a batch, never a one-off's (``~``), for `upsert` too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tickwork import DurableScheduler, Every
from tickwork.stores import JobSpec, JobSpecError, Upsert
from tickwork.testing import FakeClock

HERE = "tests.test_declare_many"
START = 1_700_000_000.0


def work() -> None:
    pass


Made = tuple[DurableScheduler, FakeClock, Any]


@pytest.fixture
def made(open_either_store: Callable[..., Any]) -> Made:
    clock = FakeClock(wall_start=START)
    store = open_either_store()
    return DurableScheduler(store, wall_clock=clock.wall), clock, store


def specs(n: int, every: float = 60) -> list[JobSpec]:
    return [JobSpec(f"job-{i:05}", f"{HERE}:work", Every(every)) for i in range(n)]


def test_each_spec_ends_as_declare_would_end_it(made: Made) -> None:
    ds, clock, store = made
    assert ds.declare_many(specs(2500)) == [Upsert.CREATED] * 2500
    assert len(ds.jobs()) == 2500
    assert store.get("job-00007").next_run == START + 60
    clock.advance(30)
    assert ds.declare_many(specs(2500)) == [Upsert.UNCHANGED] * 2500
    assert store.get("job-00007").next_run == START + 60  # unchanged: kept
    changed = specs(3)
    changed[1] = JobSpec("job-00001", f"{HERE}:work", Every(120))  # a new schedule
    changed[2] = JobSpec("job-00002", f"{HERE}:work", Every(60), retries=2)  # same schedule
    assert ds.declare_many(changed) == [Upsert.UNCHANGED, Upsert.UPDATED, Upsert.UPDATED]
    assert store.get("job-00001").next_run == START + 30 + 120  # restarted from now
    assert store.get("job-00002").next_run == START + 60  # kept
    assert store.get("job-00002").spec.retries == 2


def test_a_spec_that_fails_its_checks_gets_its_error_and_the_others_are_stored(
    made: Made,
) -> None:
    ds, _, _ = made
    batch = [*specs(2), JobSpec("bad", f"{HERE}:nowhere", Every(60)), *specs(4)[2:]]
    results = ds.declare_many(batch)
    assert isinstance(results[2], JobSpecError) and "nowhere" in str(results[2])
    assert results[:2] + results[3:] == [Upsert.CREATED] * 4
    assert sorted(j.id for j in ds.jobs()) == [f"job-{i:05}" for i in range(4)]


def test_a_chained_job_is_declared_after_its_upstream_in_the_same_batch(made: Made) -> None:
    ds, _, _ = made
    down = JobSpec("down", f"{HERE}:work", after=["up"])
    up = JobSpec("up", f"{HERE}:work", Every(60))
    assert ds.declare_many([down, up]) == [Upsert.CREATED, Upsert.CREATED]
    assert ds.get("down").spec.after == (("up", "ok"),)


def test_ids_are_distinct_and_never_a_one_offs(made: Made) -> None:
    ds, _, store = made
    with pytest.raises(ValueError, match="items must have distinct ids, got 'job-00000' twice"):
        store.upsert_many([(s, None) for s in specs(1) * 2])
    [refused] = ds.declare_many([JobSpec("~x", f"{HERE}:work", Every(60))])
    assert isinstance(refused, JobSpecError)
    assert str(refused) == (
        "a declared job's id must not start with '~' (a one-off's mark), got '~x'"
    )
    with pytest.raises(JobSpecError, match="must not start with '~'"):
        ds.declare(JobSpec("~y", f"{HERE}:work", Every(60)))
    assert ds.jobs() == []
