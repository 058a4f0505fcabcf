"""A finish carried to the next look: recorded by its claim's transaction (one commit a run).

While the timing thread's next look is only milliseconds away, a run's finish waits for
it instead of committing on its own, and the look records it in its claim's
transaction (`tickwork.stores.contract.CarryingClaim`). These tests drive the parts by
hand (fake clocks, a manual executor): what is carried, that the look writes it with its
claim in one commit, that `stop` writes what is still carried, and that a failing store
leaves the finish owed, not lost.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.executors import freeze_looks, manual_scheduler
from tickwork import At
from tickwork._durable.claims import CARRY_FOR
from tickwork._durable.recorder import Recorder
from tickwork.stores import JobSpec, StoreError
from tickwork.stores.contract import Finish
from tickwork.stores.sqlite import SQLiteStore

from . import durable_jobs

REC = "tests.durable_jobs:record"


def _commits(store: SQLiteStore) -> list[str]:
    """Every statement ``store`` runs from now on (its trace)."""
    seen: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(seen.append)
    return seen


def _sparse(tmp_path: Path, clock: Any) -> tuple[Any, Any, SQLiteStore, float]:
    """A manual scheduler with carrying on, as `start` turns it on, and two one-shots."""
    store = SQLiteStore(tmp_path / "jobs.db")
    ds, pool = manual_scheduler(store, clock)
    now = clock.wall()
    ds.declare(JobSpec("first", REC, At(now + 10)))
    ds.declare(JobSpec("second", REC, At(now + 10.01)))
    recorder = ds._running.recorder
    assert recorder is not None and ds._claiming.carries  # SQLite can carry finishes
    recorder.carry_when(ds._timing.look_near)
    return ds, pool, store, now


def _first_run_carried(ds: Any, pool: Any, clock: Any) -> None:
    """Claim and run "first" while the timing thread sleeps until a look 10 ms away."""
    clock.advance(10)
    ds.step()
    ds._table.next_look = clock() + 0.01
    assert pool.run_all() == 1


def test_a_finish_waits_for_a_near_look_which_records_it_with_its_claim(
    tmp_path: Path, durable_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickwork._durable import claims as claims_mod

    freeze_looks(monkeypatch)  # the look takes no time: the next comes LOOK_GAP after it
    ds, pool, store, now = _sparse(tmp_path, durable_clock)
    durable_clock.advance(10)
    # Claimed "first"; "second" is due in 10 ms, and shares the next look, LOOK_GAP on.
    assert ds.step() == pytest.approx(max(0.01, claims_mod.LOOK_GAP))
    ds._table.next_look = durable_clock() + 0.01  # the timing thread sleeps until then
    assert pool.run_all() == 1
    assert ds.unrecorded() == [("first", now + 10)]  # carried: not yet written
    state = store.get("first")
    assert state is not None and len(state.claims) == 1
    durable_clock.advance(0.01)
    ds._table.next_look = math.inf  # it wakes
    seen = _commits(store)
    ds.step()  # claims "second", recording the end of "first" in the same transaction
    assert seen.count("COMMIT") == 1
    assert ds.unrecorded() == []
    assert [e.outcome for e in store.history("first")] == ["ok"]
    second = store.get("second")
    assert second is not None and len(second.claims) == 1
    store.close()


def test_a_finish_is_written_at_once_when_no_look_is_near(
    tmp_path: Path, durable_clock: Any
) -> None:
    ds, pool, store, _now = _sparse(tmp_path, durable_clock)
    durable_clock.advance(10)
    ds.step()
    ds._table.next_look = durable_clock() + CARRY_FOR * 2  # the next look is too far
    assert pool.run_all() == 1
    assert ds.unrecorded() == []
    assert [e.outcome for e in store.history("first")] == ["ok"]
    store.close()


def test_stop_writes_the_finishes_still_waiting_for_a_look(
    tmp_path: Path, durable_clock: Any
) -> None:
    ds, pool, store, now = _sparse(tmp_path, durable_clock)
    _first_run_carried(ds, pool, durable_clock)
    assert ds.unrecorded() == [("first", now + 10)]
    assert ds.stop(timeout=5)
    assert ds.unrecorded() == []
    assert [e.outcome for e in store.history("first")] == ["ok"]
    store.close()


def test_a_look_that_fails_leaves_its_carried_finish_owed_then_writes_it(
    tmp_path: Path, durable_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, pool, store, now = _sparse(tmp_path, durable_clock)
    _first_run_carried(ds, pool, durable_clock)
    durable_clock.advance(0.01)
    ds._table.next_look = math.inf

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("cannot claim due jobs: disk I/O error (test)")

    monkeypatch.setattr(store, "claim_due_carrying", broken)
    ds.step()  # the look fails (and backs off); the finish is owed, still held
    assert ds.unrecorded() == [("first", now + 10)]
    monkeypatch.undo()
    ds.step()  # the next look writes what is owed first, then claims
    assert ds.unrecorded() == []
    assert [e.outcome for e in store.history("first")] == ["ok"]
    assert [c[2] for c in durable_jobs.CALLS] == [now + 10]
    store.close()


def test_the_recorder_carries_only_while_a_look_is_near_and_hands_the_rest_back(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "jobs.db")
    for job in ("a", "b", "c"):
        store.upsert(JobSpec(job, REC, At(100.0)), 100.0)
    a, b, c = store.claim_due(100.0, owner="me", lease_seconds=30.0, limit=10, advance=_once)
    recorder = Recorder(store)
    near = [True]
    recorder.carry_when(lambda: near[0])
    got: list[object] = []
    recorder.finish(Finish(a, "ok", 101.0), got.append)
    assert got == [] and recorder.carrying and store.history("a") == []
    (op,) = recorder.take_carried()
    ended, _ = store.claim_due_carrying(
        [op.item], 102.0, owner="me", lease_seconds=30.0, limit=10, advance=_once
    )
    recorder.settle([op], ended)
    assert got == [True] and not recorder.carrying
    near[0] = False  # no look is near: written at once
    recorder.finish(Finish(b, "ok", 101.0), got.append)
    assert got == [True, True]
    near[0] = True
    recorder.finish(Finish(c, "ok", 101.0), got.append)
    left = recorder.carry_when(None)  # carrying ends: what waits is handed back
    assert len(left) == 1 and not recorder.carrying and got == [True, True]
    recorder.write_now(left)
    assert got == [True, True, True]
    assert [len(store.history(job)) for job in ("a", "b", "c")] == [1, 1, 1]
    store.close()


def _once(state: Any, now: float) -> float | None:
    return None


def test_a_finish_that_ends_during_a_look_waits_for_the_next_one(
    tmp_path: Path, durable_clock: Any
) -> None:
    """At a few hundred runs a second the timing thread is often mid-look: that counts."""
    ds, pool, store, now = _sparse(tmp_path, durable_clock)
    durable_clock.advance(10)
    ds.step()
    ds._table.looking = True  # a look is going on (its successor comes within CARRY_FOR)
    assert pool.run_all() == 1
    assert ds.unrecorded() == [("first", now + 10)]
    ds._table.looking = False
    ds.step()  # the next look records it with its claim
    assert ds.unrecorded() == []
    assert [e.outcome for e in store.history("first")] == ["ok"]
    store.close()
