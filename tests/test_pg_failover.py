"""PostgreSQL failover: a dead node's claims are recovered within seconds, not its lease.

Real node processes (`tests/durable_pg_node.py`), each a `DurableScheduler` with a
60-s lease on one schema. The victim starts two one-shots that hold (`hang_on`): one
at-most-once, one at-least-once. Then it dies (SIGKILL), loses its database sessions
(terminated, as a network cut or a DBA would) or stalls (SIGSTOP). Its sessions end in
the first two cases: the survivor recovers its claims at once, long before the lease
(the at-most-once run is recorded ``abandoned`` and never runs again; the at-least-once
one runs again on the survivor). A stalled node keeps its sessions, so only its lease
frees its claims; when it wakes up it cannot record a finish over the new owner.

Timing bounds are loose on purpose (a quarter of the lease, on a loaded machine); the
measured recovery times are printed (``-s``) and the benchmark reports them.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install -e '.[dev]'"
)

from tickwork import At, DurableScheduler  # noqa: E402
from tickwork.stores import JobSpec  # noqa: E402
from tickwork.stores.postgres import PostgresStore  # noqa: E402

from .test_durable_postgres import Cluster, dsn_with  # noqa: E402

LEASE = 60.0
HANG = "tests.durable_pg_node:hang_on"


@pytest.fixture
def cluster(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(pg_dsn, pg_schema, tmp_path)
    c.prepare()
    yield c
    (tmp_path / "stop.release").touch()
    c.stop.touch()
    for p in c.procs.values():
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
        try:
            p.communicate(timeout=30)
        except Exception:
            p.kill()
            p.communicate()


def wait_for(cluster: Cluster, condition: Any, what: str, timeout: float = 60.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        cluster.check_alive()
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


def victim_holds_two_runs(
    cluster: Cluster, lease: float = LEASE, dsn: str | None = None, *, oneoffs: bool = False
) -> None:
    """The victim alone, then two one-shots (or one-offs) it starts and holds; then the survivor.

    One-offs are enqueued with the keys ``most`` and ``least`` (ids ``~key:...``).
    """
    cluster.start("victim", lease=lease, max_workers=2, dsn=dsn)
    cluster.wait_ready()
    now = time.time()
    with PostgresStore(cluster.dsn, schema=cluster.schema) as store:
        for job_id, delivery in (("most", "at_most_once"), ("least", "at_least_once")):
            if oneoffs:
                DurableScheduler(store).enqueue(
                    HANG, kwargs={"owner": "victim"}, key=job_id, delivery=delivery
                )
                continue
            spec = JobSpec(job_id, HANG, At(now), kwargs={"owner": "victim"}, delivery=delivery)
            store.upsert(spec, now)
    wait_for(cluster, lambda: len(cluster.runs()) == 2, "the victim to start both runs")
    assert {o for owners in cluster.runs().values() for o in owners} == {"victim"}
    cluster.start("survivor", lease=lease)
    cluster.wait_ready()


def owners_of(cluster: Cluster, job_id: str) -> list[str]:
    return [o for (j, _), owners in cluster.runs().items() if j == job_id for o in owners]


def outcome(cluster: Cluster, job_id: str) -> tuple[Any, ...]:
    """The last run's (outcome, error): a one-off's from its ledger (its row is gone)."""
    if job_id.startswith("~"):
        got = cluster.query(
            "SELECT outcome, error FROM tickwork_ledger WHERE job_id = %s ORDER BY seq DESC"
            " LIMIT 1",
            job_id,
        )
        return tuple(got[0]) if got else (None, None)
    ((row),) = cluster.query(
        "SELECT last_outcome, last_error FROM tickwork_jobs WHERE id = %s", job_id
    )
    return tuple(row)


def recovered(cluster: Cluster, most: str = "most", least: str = "least") -> bool:
    return (
        owners_of(cluster, least) == ["victim", "survivor"]
        and outcome(cluster, most)[0] == "abandoned"
    )


def check_recovered_once(cluster: Cluster, most: str = "most", least: str = "least") -> None:
    assert owners_of(cluster, most) == ["victim"]  # at most once: never again
    assert owners_of(cluster, least) == ["victim", "survivor"]  # at least once: again
    state, error = outcome(cluster, most)
    assert state == "abandoned" and "'victim' was gone" in error, error
    assert cluster.query("SELECT count(*) FROM tickwork_claims") == [(0,)]


@pytest.mark.slow
def test_a_sigkilled_node_is_recovered_in_seconds_not_after_its_lease(
    cluster: Cluster,
) -> None:
    victim_holds_two_runs(cluster)
    time.sleep(1.5)  # the survivor has looked at the victim's claims and left them alone
    assert not recovered(cluster)
    os.kill(cluster.procs["victim"].pid, signal.SIGKILL)
    killed = time.monotonic()
    assert cluster.procs["victim"].wait(timeout=10) == -9
    wait_for(cluster, lambda: recovered(cluster), "the recovery", timeout=LEASE / 4)
    took = time.monotonic() - killed
    cluster.finish()
    check_recovered_once(cluster)
    print(f"SIGKILL: claims recovered {took:.2f} s after the kill (lease {LEASE:.0f} s)")


@pytest.mark.slow
def test_a_sigkilled_node_s_one_offs_run_elsewhere_in_seconds(cluster: Cluster) -> None:
    # The same failover for one-offs: the at-most-once one is given up (its row goes,
    # its ledger says abandoned), the at-least-once one runs once more on the survivor
    # and then leaves.
    most, least = "~key:most", "~key:least"
    victim_holds_two_runs(cluster, oneoffs=True)
    os.kill(cluster.procs["victim"].pid, signal.SIGKILL)
    killed = time.monotonic()
    assert cluster.procs["victim"].wait(timeout=10) == -9
    wait_for(
        cluster,
        lambda: recovered(cluster, most, least) and outcome(cluster, least)[0] == "ok",
        "the recovery",
        timeout=LEASE / 4,
    )
    took = time.monotonic() - killed
    cluster.finish()
    check_recovered_once(cluster, most, least)
    assert cluster.query("SELECT count(*) FROM tickwork_jobs WHERE queue IS NOT NULL") == [(0,)]
    ledger = cluster.query("SELECT job_id, outcome FROM tickwork_ledger ORDER BY seq")
    assert sorted(ledger) == [(least, "abandoned"), (least, "ok"), (most, "abandoned")]
    ((done, failed),) = cluster.query("SELECT done, failed FROM tickwork_queues")
    assert (done, failed) == (1, 1)
    print(f"SIGKILL: one-offs recovered {took:.2f} s after the kill (lease {LEASE:.0f} s)")


@pytest.mark.slow
def test_a_node_cut_off_from_the_database_loses_its_claims_and_cannot_finish_them(
    cluster: Cluster,
) -> None:
    # A network partition: the victim's sessions end and it cannot connect again (its
    # role may not log in) until the test lets it; the process lives on meanwhile.
    role = f"tw_victim_{secrets.token_hex(4)}"
    cluster.query(f"CREATE ROLE {role} LOGIN SUPERUSER")
    try:
        partitioned(cluster, role)
    finally:
        cluster.query(f"ALTER ROLE {role} LOGIN")
        (cluster.tmp / "stop.release").touch()
        cluster.stop.touch()
        for p in cluster.procs.values():
            try:
                p.communicate(timeout=30)
            except Exception:
                p.kill()
                p.communicate()
        cluster.query(f"DROP ROLE IF EXISTS {role}")


def partitioned(cluster: Cluster, role: str) -> None:
    victim_holds_two_runs(cluster, dsn=dsn_with(cluster.dsn, user=role))
    cluster.query(f"ALTER ROLE {role} NOLOGIN")
    (n,) = cluster.query(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = %s", role
    )[0]
    assert n >= 1
    cut = time.monotonic()
    wait_for(cluster, lambda: recovered(cluster), "the recovery", timeout=LEASE / 4)
    took = time.monotonic() - cut
    cluster.query(f"ALTER ROLE {role} LOGIN")  # the partition heals
    (cluster.tmp / "stop.release").touch()  # the victim's runs end; their claims are gone
    wait_for(
        cluster,
        lambda: cluster.log("victim").count("claim was gone") >= 2,
        "the victim to find its claims gone",
    )
    nodes = cluster.finish()
    assert set(nodes) == {"victim", "survivor"}  # the victim lived on, reconnected
    check_recovered_once(cluster)
    assert outcome(cluster, "least")[0] == "ok"  # the survivor's run, not overwritten
    print(f"sessions cut: claims recovered {took:.2f} s after the cut (lease {LEASE:.0f} s)")


@pytest.mark.slow
def test_a_stalled_node_keeps_its_claims_until_its_lease_and_is_fenced_after(
    cluster: Cluster,
) -> None:
    lease = 4.0
    victim_holds_two_runs(cluster, lease=lease)
    os.kill(cluster.procs["victim"].pid, signal.SIGSTOP)
    ((until,),) = cluster.query("SELECT max(lease_until) FROM tickwork_claims")
    wait_for(cluster, lambda: recovered(cluster), "the recovery after the lease")
    ((rerun,),) = cluster.query(
        "SELECT recorded FROM tw_runs WHERE job_id = 'least' AND owner = 'survivor'"
    )
    assert rerun >= until  # alive (its sessions stayed): only the lease freed the claims
    state, error = outcome(cluster, "most")
    assert state == "abandoned" and "lease of 'victim' expired at" in error, error
    (cluster.tmp / "stop.release").touch()
    os.kill(cluster.procs["victim"].pid, signal.SIGCONT)
    wait_for(
        cluster,
        lambda: cluster.log("victim").count("claim was gone") >= 2,
        "the woken victim to find its claims gone",
    )
    cluster.finish()
    assert owners_of(cluster, "most") == ["victim"]
    assert owners_of(cluster, "least") == ["victim", "survivor"]
    assert outcome(cluster, "least")[0] == "ok"  # fenced: the late finish changed nothing
    assert outcome(cluster, "most")[0] == "abandoned"
