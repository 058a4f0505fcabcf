"""Concurrency pools as store contract tests: every store with `PoolLimits` runs them.

Subclass `PoolContract` and provide ``open_store`` as for `tests.store_contract`
(each call a new store object on the same database: two objects are two nodes). Times
are plain numbers; no test sleeps. The race of real processes is in
``tests/test_pools_cluster.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tickwork import Every
from tickwork.stores import JobSpec, JobSpecError, PoolLimits, PoolState, Store
from tickwork.stores.contract import spec_to_json

from .store_contract import LEASE, OpenStore, _control, claim, spec


def pooled(job_id: str, pool: str | None = "db", **kw: Any) -> JobSpec:
    return spec(job_id, Every(10), pool=pool, **kw)


def limits(store: Store) -> PoolLimits:
    assert isinstance(store, PoolLimits)
    return store


def ids(claims: list[Any]) -> list[str]:
    return sorted(c.job_id for c in claims)


def usage(store: Store, now: float) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.limit, p.running, p.waiting) for p in limits(store).pools(now)}


class PoolContract:
    """Pool tests; subclasses provide ``open_store``."""

    @pytest.fixture
    def store(self, open_store: OpenStore) -> Store:
        return open_store()

    def test_a_pool_limits_the_runs_one_claim_takes(self, store: Store) -> None:
        limits(store).set_pool_limit("db", 2)
        for i in range(5):
            store.upsert(pooled(f"p{i}"), 100.0)
        store.upsert(pooled("free", pool=None), 100.0)
        got = claim(store, 100.0)
        assert ids(got) == ["free", "p0", "p1"]  # the pool's oldest first, by id
        assert usage(store, 100.0) == {"db": (2, 2, 3)}
        # the pool is full: its due jobs wait (not claimed, not advanced)
        assert claim(store, 101.0) == []
        assert store.get("p4").next_run == 100.0  # type: ignore[union-attr]
        # a run ends: its slot goes to the next waiting job
        store.finish(got[1], outcome="ok", ended=102.0)
        assert ids(claim(store, 102.0)) == ["p2"]

    def test_two_nodes_share_the_limit(self, open_store: OpenStore) -> None:
        a, b = open_store(), open_store()
        limits(a).set_pool_limit("db", 3)
        for i in range(6):
            a.upsert(pooled(f"p{i}"), 100.0)
        got_a = claim(a, 100.0, "A", limit=2)
        got_b = claim(b, 100.0, "B")
        assert len(got_a) == 2 and len(got_b) == 1
        assert claim(a, 100.0, "A") == [] and claim(b, 100.0, "B") == []

    def test_max_running_caps_every_job(self, store: Store) -> None:
        limits(store).set_max_running(3)
        limits(store).set_pool_limit("db", 5)
        for i in range(3):
            store.upsert(pooled(f"p{i}"), 100.0)
            store.upsert(pooled(f"q{i}", pool=None), 100.0)
        assert len(claim(store, 100.0)) == 3
        assert usage(store, 100.0)["*"] == (3, 3, 3)
        limits(store).set_max_running(None)  # lifted: the rest go
        assert len(claim(store, 100.0)) == 3
        assert "*" not in usage(store, 100.0)

    def test_recovery_frees_the_slots_of_a_dead_owner(self, open_store: OpenStore) -> None:
        a, b = open_store(), open_store()
        limits(a).set_pool_limit("db", 2)
        for i in range(3):
            a.upsert(pooled(f"p{i}", delivery="at_least_once"), 100.0)
        got = claim(a, 100.0, "A")
        for c in got:
            a.start(c, started=100.0)
        assert claim(b, 110.0, "B") == []  # A holds both slots
        # A is gone: its leases end; B's claim recovers them first, then takes the pool
        # up to its limit again (the re-offered slots and the job that waited)
        taken = claim(b, 100.0 + LEASE, "B")
        assert len(taken) == 2 and {c.owner for c in taken} == {"B"}
        assert usage(b, 100.0 + LEASE)["db"][:2] == (2, 2)

    def test_runs_asked_for_by_an_operator_wait_for_a_slot(self, store: Store) -> None:
        limits(store).set_pool_limit("db", 1)
        store.upsert(pooled("p0"), 100.0)
        store.upsert(pooled("p1", overlap="allow"), 1000.0)
        (held,) = claim(store, 100.0)
        assert _control(store).trigger_job("p1", by="op", at=101.0) == "queued"
        assert claim(store, 101.0) == []  # queued, waiting for the slot
        assert usage(store, 101.0)["db"] == (1, 1, 1)
        store.finish(held, outcome="ok", ended=102.0)
        (manual,) = claim(store, 102.0)
        assert manual.job_id == "p1" and manual.origin == "manual"

    def test_the_last_declaration_wins_and_a_change_is_logged(
        self, open_store: OpenStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        a, b = open_store(), open_store()
        limits(a).set_pool_limit("db", 2)
        with caplog.at_level(logging.WARNING, "tickwork.stores"):
            limits(b).set_pool_limit("db", 2)  # the same: nothing to say
            assert caplog.messages == []
            limits(b).set_pool_limit("db", 4)
        assert caplog.messages == [
            "limit of pool 'db' changed from 2 to 4 by this declaration (the last one wins)"
        ]
        assert limits(a).pools(0.0) == [PoolState("db", 4, 0, 0)]
        limits(a).set_pool_limit("db", None)
        assert limits(b).pools(0.0) == []

    def test_bad_limits_are_refused(self, store: Store) -> None:
        s = limits(store)
        with pytest.raises(ValueError, match=r"^limit must be an integer from 1 to 1,000,000"):
            s.set_pool_limit("db", 0)
        with pytest.raises(ValueError, match=r"^max_running must be an integer .*got True$"):
            s.set_max_running(True)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^pool must be a pool name of 1-100 letters"):
            s.set_pool_limit("*", 2)  # the cap's own row
        with pytest.raises(JobSpecError, match=r"^pool must be a pool name .*got 'a b'$"):
            pooled("x", pool="a b")
        assert s.pools(0.0) == []

    def test_a_pool_is_stored_only_when_set(self, store: Store) -> None:
        assert "pool" not in json.loads(spec_to_json(pooled("x", pool=None)))
        store.upsert(pooled("x"), 100.0)
        got = store.get("x")
        assert got is not None and got.spec.pool == "db"
        store.upsert(pooled("x", pool=None), 100.0)
        got = store.get("x")
        assert got is not None and got.spec.pool is None

    def test_a_job_in_a_pool_with_no_limit_is_not_limited(self, store: Store) -> None:
        limits(store).set_pool_limit("other", 1)
        for i in range(3):
            store.upsert(pooled(f"p{i}"), 100.0)
        assert len(claim(store, 100.0)) == 3
