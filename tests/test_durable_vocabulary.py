"""One vocabulary: `Every`, `Cron`, `At` and `Once` are the durable schedules too.

The stores keep them (with ``jitter``, ``first`` and ``until``), rows stored by earlier
versions read back unchanged, and the durable engine honours every field.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import tickwork.stores
import tickwork.stores.contract
from tickwork import At, Cron, DurableScheduler, Every, Once
from tickwork.stores import (
    JobSpec,
    JobSpecError,
    StoreError,
    Upsert,
)
from tickwork.stores.contract import spec_from_json, spec_to_json
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

from . import durable_jobs
from .executors import ManualExecutor, drain

REC = "tests.durable_jobs:record"
START = 1_700_000_000.0


@pytest.fixture
def clock() -> FakeClock:
    durable_jobs.CALLS.clear()
    return FakeClock(wall_start=START)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "jobs.db")
    yield s
    s.close()


def scheduler(store: SQLiteStore, clock: FakeClock) -> tuple[DurableScheduler, ManualExecutor]:
    pool = ManualExecutor()
    ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
    return ds, pool


def slots() -> list[float]:
    return [scheduled - START for _, _, scheduled in durable_jobs.CALLS if scheduled is not None]


def run_for(ds: DurableScheduler, pool: ManualExecutor, clock: FakeClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(1)
        drain(ds, pool)


# -- the values -------------------------------------------------------------------------


def test_the_old_names_build_the_shared_values_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"tickwork.stores.EverySchedule .*tickwork.Every"):
        assert tickwork.stores.EverySchedule(10) == Every(10)
    with pytest.warns(DeprecationWarning, match=r"tickwork.stores.AtSchedule .*tickwork.At"):
        assert tickwork.stores.AtSchedule(5) == At(5)
    with pytest.warns(DeprecationWarning, match=r"CronSchedule .*tickwork.Cron"):
        cron = tickwork.stores.CronSchedule("0 3 * * *", "Europe/Berlin")
    assert cron == Cron("0 3 * * *", "Europe/Berlin")
    with pytest.warns(
        DeprecationWarning, match=r"^Every.seconds is deprecated; use Every.interval$"
    ):
        assert Every(7).seconds == 7.0
    with pytest.warns(DeprecationWarning, match=r"^At.at is deprecated; use At.when$"):
        assert At(9).at == 9.0


def test_the_old_names_are_outside_the_public_surface() -> None:
    for name in ("AtSchedule", "EverySchedule", "CronSchedule", "Advance", "GiveUp", "StartNow"):
        assert name not in tickwork.stores.__all__
        assert name not in tickwork.stores.contract.__all__


@pytest.mark.parametrize(
    ("old", "new"),
    [("Advance", "AdvanceFn"), ("GiveUp", "GiveUpFn"), ("StartNow", "StartNowFn")],
)
def test_the_callback_types_say_they_are_functions(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"use tickwork.stores.contract.{new}"):
        value = getattr(tickwork.stores, old)
    assert value is getattr(tickwork.stores.contract, new)


@pytest.mark.parametrize("name", ["Finish", "Start", "GivenUp", "spec_to_json", "StoreClock"])
def test_a_store_authors_names_moved_to_the_contract_module(name: str) -> None:
    with pytest.warns(DeprecationWarning, match="import it from tickwork.stores.contract"):
        value = getattr(tickwork.stores, name)
    assert value is getattr(tickwork.stores.contract, name)
    assert name not in tickwork.stores.__all__ and name in tickwork.stores.contract.__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = tickwork.stores.Nope  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        # Exactly as the previous version stored them: read, and written back unchanged
        # (so an upgrade is not a changed declaration, and no schedule restarts).
        '{"args":[],"delivery":"at_most_once","func":"m:f","grace":null,"id":"a","kwargs":{},'
        '"missed":"skip","missed_cap":100,"overlap":"skip","paused":false,'
        '"schedule":{"fixed_delay":false,"kind":"every","seconds":10.0},"v":1}',
        '{"args":[],"delivery":"at_most_once","func":"m:f","grace":null,"id":"a","kwargs":{},'
        '"missed":"skip","missed_cap":100,"overlap":"skip","paused":false,'
        '"schedule":{"expr":"0 3 * * *","kind":"cron","tz":"Europe/Berlin"},"v":1}',
        '{"args":[],"delivery":"at_most_once","func":"m:f","grace":null,"id":"a","kwargs":{},'
        '"missed":"skip","missed_cap":100,"overlap":"skip","paused":false,'
        '"schedule":{"at":1700000000.0,"kind":"at"},"v":1}',
    ],
)
def test_rows_stored_before_read_back_and_encode_unchanged(text: str) -> None:
    spec = spec_from_json(text)
    assert isinstance(spec.schedule, Every | Cron | At)
    assert spec_to_json(spec) == text


@pytest.mark.parametrize(
    "schedule",
    [
        Every(10, jitter=2.5, first=3, until=START + 100),
        Every(10, fixed_delay=True, until=datetime.fromtimestamp(START + 50, UTC)),
        Cron("*/5 * * * *", tz="Europe/Berlin", jitter=30, until=START + 86400),
        Once(30),
        At(START + 5),
    ],
)
def test_every_field_survives_the_store(schedule: Any, store: SQLiteStore) -> None:
    spec = JobSpec("a", REC, schedule)
    store.upsert(spec, START)
    state = store.get("a")
    assert state is not None and state.spec == spec and state.spec.schedule == schedule
    assert spec_from_json(spec_to_json(spec)) == spec


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"kind": "every", "seconds": 10, "jitter": -1}, r"^schedule.jitter must be .*-1"),
        ({"kind": "every", "seconds": 10, "until": "soon"}, r"^schedule.until must be .*'soon'"),
        ({"kind": "once", "delay": -2}, r"^schedule.delay must be .*-2"),
        ({"kind": "cron", "expr": "0 3 * * *", "tz": "Mars/Olympus"}, r"^schedule: tz: .*Mars"),
    ],
)
def test_bad_stored_fields_name_the_field(schedule: dict[str, Any], message: str) -> None:
    text = json.dumps(
        {
            "v": 1,
            "id": "a",
            "func": "m:f",
            "schedule": schedule,
            "args": [],
            "kwargs": {},
            "overlap": "skip",
            "missed": "skip",
            "missed_cap": 100,
            "grace": None,
            "delivery": "at_most_once",
            "paused": False,
        }
    )
    with pytest.raises(StoreError) as info:
        spec_from_json(text)
    assert isinstance(info.value.__cause__, JobSpecError)
    assert re.search(message, str(info.value.__cause__)), str(info.value.__cause__)


# -- the engine honours every field ------------------------------------------------------


def test_reschedule_takes_an_every(store: SQLiteStore, clock: FakeClock) -> None:
    ds, _ = scheduler(store, clock)
    ds.declare(JobSpec("e", REC, Every(60)))
    clock.advance(3)
    ds.reschedule("e", Every(5))
    state = ds.get("e")
    assert state is not None and state.spec.schedule == Every(5)
    assert state.next_run == START + 3 + 5


def test_first_sets_the_first_slot_and_the_grid_follows(
    store: SQLiteStore, clock: FakeClock
) -> None:
    ds, pool = scheduler(store, clock)
    ds.declare(JobSpec("e", REC, Every(10, first=2)))
    run_for(ds, pool, clock, 33)
    assert slots() == [2, 12, 22, 32]


def test_until_ends_a_durable_interval(store: SQLiteStore, clock: FakeClock) -> None:
    ds, pool = scheduler(store, clock)
    ds.declare(JobSpec("e", REC, Every(10, until=START + 25)))
    run_for(ds, pool, clock, 60)
    assert slots() == [10, 20]
    state = ds.get("e")
    assert state is not None and state.next_run is None


def test_until_ends_a_durable_fixed_delay_job(store: SQLiteStore, clock: FakeClock) -> None:
    ds, pool = scheduler(store, clock)
    ds.declare(JobSpec("e", REC, Every(10, fixed_delay=True, until=START + 25)))
    run_for(ds, pool, clock, 60)
    assert slots() == [10, 20]
    state = ds.get("e")
    assert state is not None and state.next_run is None


def test_until_ends_a_durable_cron_job(store: SQLiteStore, clock: FakeClock) -> None:
    ds, pool = scheduler(store, clock)  # START is 22:13:20 UTC
    ds.declare(JobSpec("c", REC, Cron("* * * * *", until=START + 150)))
    run_for(ds, pool, clock, 400)
    assert [datetime.fromtimestamp(START + s, UTC).strftime("%H:%M") for s in slots()] == [
        "22:14",
        "22:15",
    ]


def test_a_declaration_whose_until_has_passed_plans_nothing(
    store: SQLiteStore, clock: FakeClock
) -> None:
    ds, pool = scheduler(store, clock)
    assert ds.declare(JobSpec("e", REC, Every(10, until=START - 1))) is Upsert.CREATED
    state = ds.get("e")
    assert state is not None and state.next_run is None
    run_for(ds, pool, clock, 30)
    assert slots() == []


def test_once_counts_from_the_first_declaration(store: SQLiteStore, clock: FakeClock) -> None:
    ds, _ = scheduler(store, clock)
    ds.declare(JobSpec("o", REC, Once(30)))
    clock.advance(10)
    ds2, pool2 = scheduler(store, clock)  # a restart declares it again: nothing moves
    assert ds2.declare(JobSpec("o", REC, Once(30))) is Upsert.UNCHANGED
    run_for(ds2, pool2, clock, 60)
    assert slots() == [30]


def test_jitter_delays_the_start_by_a_draw_below_it(
    store: SQLiteStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws: list[tuple[float, float]] = []

    def uniform(a: float, b: float) -> float:
        draws.append((a, b))
        return 0.0

    monkeypatch.setattr(random, "uniform", uniform)
    ds, pool = scheduler(store, clock)
    ds.declare(JobSpec("j", REC, Every(10, jitter=4)))
    run_for(ds, pool, clock, 21)
    assert slots() == [10, 20]
    assert draws == [(0.0, 4.0), (0.0, 4.0)]


def test_a_run_waiting_for_its_jitter_is_handed_back_by_stop(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real pool: the worker waits out a long draw until stop() ends the wait; the run
    # had not started, so it is recorded cancelled and the job was never called.
    waiting = threading.Event()
    real_wait = threading.Event.wait

    def uniform(a: float, b: float) -> float:
        waiting.set()
        return 3600.0

    monkeypatch.setattr(random, "uniform", uniform)
    durable_jobs.CALLS.clear()
    ds = DurableScheduler(store, max_workers=2)
    ds.declare(JobSpec("j", REC, Every(3600, first=0, jitter=7200)))
    ds.start()
    assert real_wait(waiting, 60)
    assert ds.stop(timeout=60)
    state = store.get("j")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "cancelled"
    assert durable_jobs.CALLS == []
