"""The database's clock: nodes whose clocks disagree still agree on due times and leases.

`DurableScheduler` on PostgreSQL judges every time by the server's clock (read now and
then, carried forward on the node's monotonic clock). The unit tests drive `StoreTime`
with a fake store clock; the process test runs a node whose whole process sees a wall
clock 30 s ahead (`time.time` replaced) beside an honest one, on a real server.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from tickwork import At, DurableScheduler
from tickwork._durable.storetime import REFRESH, SKEW_WARN, StoreTime
from tickwork.stores import JobSpec
from tickwork.stores.contract import StoreClock
from tickwork.testing import FakeClock

from .test_durable_postgres import Cluster
from .test_pg_failover import HANG, cluster, outcome, owners_of, wait_for

__all__ = ["cluster"]  # the fixture, imported for the process test

RECORD = "tests.durable_pg_node:record"


class ServerClock:
    """A `StoreClock` whose server time is ``offset`` ahead of ``mono``; counts reads."""

    def __init__(self, mono: FakeClock, offset: float) -> None:
        self.mono = mono
        self.offset = offset
        self.reads = 0
        self.trip = 0.002  # each read takes this long on the monotonic clock

    def read_clock(self, local: object) -> tuple[float, float, float]:
        assert callable(local)
        self.reads += 1
        before = local()
        self.mono.advance(self.trip)
        after = local()
        mid = (before + after) / 2.0
        return mid + self.offset, mid, (after - before) / 2.0


def test_store_time_reads_the_store_once_then_carries_it_on_the_monotonic_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mono = FakeClock(start=500.0)
    server = ServerClock(mono, offset=1_000_000.0)
    assert isinstance(server, StoreClock)
    wall = StoreTime(server, mono, owner="n1", node_wall=lambda: mono() + 1_000_030.0)
    with caplog.at_level(logging.INFO, logger="tickwork.durable"):
        first = wall()
    assert server.reads == 3  # the first read keeps the best of three round trips
    assert first == pytest.approx(mono() + 1_000_000.0, abs=0.01)
    assert wall.skew == pytest.approx(30.0, abs=0.01)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "+30.00" in record.getMessage()
    mono.advance(10.0)
    assert wall() == pytest.approx(first + 10.0, abs=0.01) and server.reads == 3
    wall.refresh()  # not yet: REFRESH seconds have not passed
    assert server.reads == 3
    mono.advance(REFRESH)
    wall.refresh()
    assert server.reads == 4


def test_store_time_applies_a_server_clock_change_but_not_round_trip_jitter() -> None:
    mono = FakeClock(start=500.0)
    server = ServerClock(mono, offset=1_000_000.0)
    wall = StoreTime(server, mono, owner="n1", node_wall=lambda: mono() + 1_000_000.0)
    base = wall()
    server.offset += 0.01  # jitter of a read: the carried time stays (no back-and-forth)
    mono.advance(REFRESH)
    wall.refresh()
    assert wall() == pytest.approx(base + REFRESH + 0.002, abs=0.005)
    server.offset += 5.0  # the server's clock stepped: followed, as a step the loop sees
    mono.advance(REFRESH)
    wall.refresh()
    assert wall() == pytest.approx(base + 2 * REFRESH + 5.01 + 0.004, abs=0.005)
    assert wall.skew == pytest.approx(-5.01, abs=0.005)


def test_a_small_skew_is_logged_at_info_and_again_only_when_it_moves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mono = FakeClock(start=500.0)
    server = ServerClock(mono, offset=0.0)
    node = {"off": 0.2}
    wall = StoreTime(server, mono, owner="n1", node_wall=lambda: mono() + node["off"])
    with caplog.at_level(logging.INFO, logger="tickwork.durable"):
        wall()
        mono.advance(REFRESH)
        wall.refresh()  # same skew: not logged again
        node["off"] = SKEW_WARN + 0.5
        mono.advance(REFRESH)
        wall.refresh()
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.INFO, logging.WARNING]
    assert "+0.200 s off the store's" in caplog.records[0].getMessage()


def test_a_scheduler_on_sqlite_judges_by_its_own_clock(tmp_path: Path) -> None:
    from tickwork.stores.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "s.db") as store:
        assert not isinstance(store, StoreClock)
        ds = DurableScheduler(store)
        assert ds.clock_skew is None
        assert abs(ds.now() - time.time()) < 5.0


def test_postgres_reads_the_server_clock(pg_dsn: str, pg_schema: str) -> None:
    from tickwork.stores.postgres import PostgresStore

    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        assert isinstance(store, StoreClock)
        server, mid, uncertainty = store.read_clock(time.monotonic)
        assert 0.0 <= uncertainty < 5.0
        assert abs(mid - time.monotonic()) < 5.0
        # The server runs on this host: its clock is this host's.
        assert abs(server - time.time()) < 5.0
        ds = DurableScheduler(store)
        assert ds.clock_skew is None  # not read until the time is first needed
        assert abs(ds.now() - time.time()) < 5.0
        assert ds.clock_skew is not None and abs(ds.clock_skew) < 1.0
        # A clock given by the caller is used as it is (tests pass fakes).
        faked = DurableScheduler(store, wall_clock=lambda: 123.0)
        assert faked.now() == 123.0 and faked.clock_skew is None


def server_now(c: Cluster) -> float:
    ((now,),) = c.query("SELECT extract(epoch FROM clock_timestamp())::float8")
    return float(now)


@pytest.mark.slow
def test_a_node_with_a_clock_30s_ahead_neither_runs_early_nor_takes_a_live_lease(
    cluster: Cluster, tmp_path: Path
) -> None:
    # The honest node holds a run with a 5-s lease (renewed every 1.7 s) and nothing
    # more (one worker): a node judging by its own clock, 30 s ahead, would see that
    # lease as run out and recover the run under the honest node.
    from tickwork.stores.postgres import PostgresStore

    cluster.start("honest", lease=5.0, max_workers=1)
    cluster.wait_ready()
    with PostgresStore(cluster.dsn, schema=cluster.schema) as store:
        now = server_now(cluster)
        spec = JobSpec("held", HANG, At(now), kwargs={"owner": "honest"})
        store.upsert(spec, now)
    wait_for(cluster, lambda: owners_of(cluster, "held") == ["honest"], "the held run")
    cluster.start("ahead", lease=5.0, skew=30.0, verbose=True)
    cluster.wait_ready()
    with PostgresStore(cluster.dsn, schema=cluster.schema) as store:
        due = server_now(cluster) + 3.0
        store.upsert(JobSpec("early", RECORD, At(due)), due)
    wait_for(cluster, lambda: owners_of(cluster, "early") == ["ahead"], "the one-shot")
    ((ran_at,),) = cluster.query("SELECT server_time FROM tw_runs WHERE job_id = 'early'")
    assert ran_at >= due, f"ran {due - ran_at:.3f} s before it was due"
    # Two leases' time with the ahead node looking: the honest node's claim stands.
    time.sleep(10.0)
    assert owners_of(cluster, "held") == ["honest"]
    assert cluster.query("SELECT owner FROM tickwork_claims WHERE job_id = 'held'") == [("honest",)]
    (tmp_path / "stop.release").touch()
    wait_for(cluster, lambda: outcome(cluster, "held")[0] is not None, "the held run's end")
    assert outcome(cluster, "held") == ("ok", None)
    skews = re.findall(r"this node's clock is ([+-][0-9.]+) s off", cluster.log("ahead"))
    assert skews and abs(float(skews[0]) - 30.0) < 1.0, cluster.log("ahead")
    cluster.finish()
