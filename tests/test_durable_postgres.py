"""`DurableScheduler` on PostgreSQL, end to end: several real processes on one schema.

Each node is ``python -m tests.durable_pg_node`` running a real `DurableScheduler` on a
`PostgresStore` (listener thread, leases, renewals, backoff). The test declares the jobs
up front; every run records itself in ``tw_runs`` under its claim token, so a slot that
ran twice is two rows, never hidden. Without PostgreSQL these tests skip (see
``conftest.pg_dsn``); with ``TICKWORK_REQUIRE_POSTGRES=1`` they fail instead.

Recurring jobs are ``overlap="allow"``, ``missed="all"``: every slot is its own claim
and none is given up by policy, so "every slot exactly once" is checkable, also when a
node dies holding some of a job's slots while the others run its later ones.
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (pip install -e '.[dev]')"
)

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from tickwork import (  # noqa: E402
    At,
    DurableScheduler,
    EventKind,
    Every,
    RunEvent,
)
from tickwork.stores import Claim, JobSpec  # noqa: E402
from tickwork.stores.postgres import PostgresStore  # noqa: E402

from . import durable_pg_node  # noqa: E402
from .durable_pg_node import GIVEN_UP_DDL, RUNS_DDL  # noqa: E402
from .waiting import DEADLINE, wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FUNC = "tests.durable_pg_node:record"
ONESHOTS, SPREAD = 5000, 10.0
RECURRING, SLOTS = 50, 10
Key = tuple[str, float]


def dsn_with(dsn: str, **params: Any) -> str:
    return make_conninfo("", **{**conninfo_to_dict(dsn), **params})


def is_least(job_id: str) -> bool:
    """Every other job is at-least-once (odd numbers)."""
    return int(job_id[1:]) % 2 == 1


@dataclass
class Cluster:
    dsn: str
    schema: str
    tmp: Path
    t0: float = 0.0  # the one-shots' first due time
    t1: float = 0.0  # the recurring jobs' first slot: t0, or later if loading ran past it
    procs: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    paused: bool = False

    @property
    def stop(self) -> Path:
        return self.tmp / "stop"

    def prepare(self) -> None:
        PostgresStore(self.dsn, schema=self.schema).close()
        self.query(RUNS_DDL)
        self.query(GIVEN_UP_DDL)

    def query(self, q: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            cur = conn.execute(q, args)
            return cur.fetchall() if cur.description else []

    def start(self, owner: str, dsn: str | None = None, **config: Any) -> None:
        config = {
            "dsn": dsn or self.dsn,
            "schema": self.schema,
            "owner": owner,
            "stop": str(self.stop),
            **config,
        }
        with (self.tmp / f"{owner}.log").open("w") as log:
            self.procs[owner] = subprocess.Popen(
                [sys.executable, "-m", "tests.durable_pg_node", json.dumps(config)],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=ROOT,
            )

    def log(self, owner: str) -> str:
        return (self.tmp / f"{owner}.log").read_text()[-3000:]

    def check_alive(self) -> None:
        for owner, p in self.procs.items():
            if p.poll() not in (None, -9):
                pytest.fail(f"node {owner} exited with {p.returncode}:\n{self.log(owner)}")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + DEADLINE
        while not all((self.tmp / f"stop.{o}.ready").exists() for o in self.procs):
            self.check_alive()
            for owner, p in self.procs.items():
                assert p.poll() is None, f"{owner} died:\n{self.log(owner)}"
            assert time.monotonic() < deadline, "nodes did not start"
            time.sleep(0.02)

    def load(self, lead: float) -> None:
        """Declare the jobs, every other one at-least-once; due from now + lead."""
        self.t0 = time.time() + lead
        fast = dsn_with(self.dsn, options="-c synchronous_commit=off")  # setup only
        with PostgresStore(fast, schema=self.schema) as store:
            # One transaction for the one-shots (declared one by one, a loaded machine
            # took longer than the lead, and most one-shots were late before they existed).
            oneshots = []
            for i in range(ONESHOTS):
                at = self.t0 + SPREAD * i / ONESHOTS
                delivery = "at_least_once" if i % 2 else "at_most_once"
                oneshots.append((JobSpec(f"o{i:04}", FUNC, At(at), delivery=delivery), at))
            store.upsert_many(oneshots)
            # A loaded machine can take longer than the lead for the one-shots: slots
            # from t0 would then be more than missed_cap behind, given up by design.
            self.t1 = max(self.t0, time.time() + 1.0)
            for i in range(RECURRING):
                delivery = "at_least_once" if i % 2 else "at_most_once"
                spec = JobSpec(
                    f"r{i:02}",
                    FUNC,
                    Every(1.0),
                    overlap="allow",
                    missed="all",
                    # Every slot replayed however far behind the nodes fall: at a load of
                    # 30 they fell more than 100 slots behind (the default cap), and the
                    # slots the cap drops by design are not what this suite looks for.
                    missed_cap=100_000,
                    delivery=delivery,
                )
                store.upsert(spec, self.t1)
        # A slow machine may finish loading after t0: one-shots are then late, never wrong.

    def wait_done(self, timeout: float, keep_while: Callable[[], bool] | None = None) -> float:
        """Until every one-shot and the first SLOTS slots of each recurring job are done.

        Recurring jobs are stopped (no next run) once all their expected slots are
        claimed, and ``keep_while()`` (if given) is false; later slots claimed meanwhile
        still run, and are checked for duplicates too. Not paused: a paused job's
        recovered slot waits for its resume, and a node killed late may leave one.
        Returns the seconds from the last due time to the end.
        """
        deadline = time.monotonic() + timeout
        end = self.t1 + SLOTS - 0.5
        while True:
            self.check_alive()
            if not self.paused and (keep_while is None or not keep_while()):
                (behind,) = self.query(
                    "SELECT count(*) FROM tickwork_jobs WHERE id LIKE 'r%%' AND next_run < %s",
                    end,
                )[0]
                if behind == 0:
                    with PostgresStore(self.dsn, schema=self.schema) as store:
                        for i in range(RECURRING):
                            store.set_next_run(f"r{i:02}", None)
                    self.paused = True
            left = self.query(
                "SELECT (SELECT count(*) FROM tickwork_jobs WHERE id LIKE 'o%%'"
                " AND next_run IS NOT NULL), (SELECT count(*) FROM tickwork_claims)"
            )[0]
            if self.paused and left == (0, 0):
                return time.time() - (self.t0 + SPREAD)
            assert time.monotonic() < deadline, (
                f"not done: (one-shots, claims) = {left}; claims (job, owner, scheduled,"
                " retry):"
                f" {self.query('SELECT job_id, owner, scheduled, retry FROM tickwork_claims')}"
            )
            time.sleep(0.2)

    def finish(self) -> dict[str, dict[str, Any]]:
        """Stop the nodes; their summaries (the SIGKILLed one has none)."""
        self.stop.touch()
        out = {}
        for owner, p in self.procs.items():
            stdout, _ = p.communicate(timeout=60)
            if p.returncode == -9:
                continue
            assert p.returncode == 0, f"{owner} exited with {p.returncode}:\n{self.log(owner)}"
            out[owner] = json.loads(stdout)
            assert out[owner]["alive"], f"{owner}: the timing thread died:\n{self.log(owner)}"
        return out

    def runs(self) -> dict[Key, list[str]]:
        """(job id, scheduled) -> the owner of every recorded run."""
        out: dict[Key, list[str]] = {}
        for job_id, scheduled, owner in self.query(
            "SELECT job_id, scheduled, owner FROM tw_runs ORDER BY recorded"
        ):
            out.setdefault((job_id, scheduled), []).append(owner)
        return out

    def given_up(self) -> set[Key]:
        """Slots the nodes' policy gave up (overlap skip, missed), from their events."""
        out = set()
        for job_id, first, slots in self.query("SELECT job_id, scheduled, slots FROM tw_given_up"):
            out |= {(job_id, first + k * 1.0) for k in range(slots)}
        return out

    def expected(self) -> set[Key]:
        oneshots = {(f"o{i:04}", self.t0 + SPREAD * i / ONESHOTS) for i in range(ONESHOTS)}
        recurring = {
            (f"r{i:02}", self.t1 + k * 1.0) for i in range(RECURRING) for k in range(SLOTS)
        }
        return oneshots | recurring


@pytest.fixture
def cluster(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(pg_dsn, pg_schema, tmp_path)
    c.prepare()
    yield c
    c.stop.touch()
    for p in c.procs.values():
        try:
            p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


def check_exactly_once(cluster: Cluster) -> dict[Key, list[str]]:
    runs = cluster.runs()
    expected = cluster.expected()
    missing = expected - set(runs)
    assert not missing, f"{len(missing)} runs lost, e.g. {sorted(missing)[:5]}"
    extra = {k for k in set(runs) - expected if not k[0].startswith("r")}
    assert not extra, f"unexpected runs {sorted(extra)[:5]}"
    twice = {k: v for k, v in runs.items() if len(v) > 1}
    assert twice == {}, f"{len(twice)} runs happened more than once: {list(twice.items())[:5]}"
    assert cluster.given_up() == set(), "the policy gave up slots it should have run"
    return runs


@pytest.mark.slow
def test_three_schedulers_run_every_one_shot_and_every_slot_exactly_once(
    cluster: Cluster,
) -> None:
    for owner in ("n1", "n2", "n3"):
        cluster.start(owner)
    cluster.wait_ready()
    cluster.load(lead=4.0)
    lag = cluster.wait_done(timeout=DEADLINE)
    nodes = cluster.finish()
    runs = check_exactly_once(cluster)
    ran = {o: s["ran"] for o, s in nodes.items()}
    assert sum(ran.values()) == len(runs) >= ONESHOTS + RECURRING * SLOTS
    assert all(ran.values()), f"a node ran nothing: {ran}"
    print(f"3 schedulers: {ran} runs, done {lag:.2f} s after the last due time")


@pytest.mark.slow
def test_a_scheduler_sigkilled_mid_run_loses_nothing_and_repeats_only_at_least_once(
    cluster: Cluster,
) -> None:
    """One node dies with runs claimed, started, and run but not finished.

    Recurring jobs are ``overlap="allow"``, ``missed="all"``: a job holds several
    claims at once, so when the dead node's claims are recovered the other nodes have
    already run (or hold) later slots of the same jobs. Recovery re-offers exactly the
    lost slots; no later slot runs again. The doomed node also hangs in one
    at-least-once recurring slot, so at least one such recovery happens every time.
    """
    for owner in ("n1", "n2"):
        cluster.start(owner, lease=5.0)
    cluster.start("doomed", lease=2.0, die_after=10)
    cluster.wait_ready()
    cluster.load(lead=4.0)
    # Recurring slots go on until the doomed node has died: its last step needs one more
    # at-least-once run, and on a loaded machine the one-shots can all be gone by then.
    doomed = cluster.procs["doomed"]
    cluster.wait_done(timeout=DEADLINE, keep_while=lambda: doomed.poll() is None)
    assert doomed.wait(timeout=10) == -9
    nodes = cluster.finish()
    dying: dict[str, Any] = json.loads((cluster.tmp / "stop.doomed.dying").read_text())
    runs = cluster.runs()
    expected = cluster.expected()
    assert {k[0] for k in set(runs) - expected} <= {f"r{i:02}" for i in range(RECURRING)}
    assert cluster.given_up() == set(), "the policy gave up slots it should have run"
    # Held by the doomed node when it died: the snapshot is taken under the run table's
    # lock, kept until the SIGKILL, so nothing is claimed after it (a worker may still
    # start one of the runs it lists).
    held = {(job_id, at) for job_id, at, _ in dying["claims"]}
    missing = []
    for key in expected | set(runs):  # later slots too: none may run twice
        job_id = key[0]
        owners = runs.get(key, [])
        if len(owners) > 1:  # only an at-least-once run the doomed node did not finish
            assert is_least(job_id) and key in held, (key, owners)
            assert len(owners) == 2 and owners[0] == "doomed", (key, owners)
        elif not owners:
            assert not is_least(job_id), f"at-least-once run lost: {key}"
            assert key in held, f"{key} was lost, but the doomed node did not hold it"
            missing.append(key)
    # Lost: only at-most-once runs the doomed node had started (at most its 4 workers).
    assert len(missing) <= 4, f"{len(missing)} at-most-once runs lost: {missing}"
    for job_id, _ in missing:
        if job_id.startswith("o"):
            ((outcome,),) = cluster.query(
                "SELECT last_outcome FROM tickwork_jobs WHERE id = %s", job_id
            )
            assert outcome == "abandoned", (job_id, outcome)
    held_id, held_at = dying["held"].split("@")
    assert (held_id, float(held_at)) in missing  # started, hung, never run again
    slot_id, slot_at = dying["held_recurring"].split("@")
    slot = (slot_id, float(slot_at))
    assert len(runs[slot]) == 1 and runs[slot][0] in nodes, runs[slot]  # re-offered once
    later = [k for k in runs if k[0] == slot_id and k[1] > slot[1] and "doomed" not in runs[k]]
    assert later, f"no later slot of {slot_id} ran elsewhere before the recovery"
    ran_id, ran_at = dying["ran"].split("@")
    owners = runs[ran_id, float(ran_at)]  # recorded, killed before finish: ran again
    assert len(owners) == 2 and owners[0] == "doomed" and owners[1] in nodes, owners
    duplicates = sum(len(v) - 1 for v in runs.values())
    recurring_held = sum(1 for k in held if k[0].startswith("r"))
    print(
        f"SIGKILL: {len(missing)} at-most-once runs abandoned, {duplicates} at-least-once"
        f" runs repeated; the dead node held {len(held)} claims, {recurring_held} recurring"
    )


@pytest.mark.slow
def test_connections_terminated_while_runs_are_due_change_nothing(cluster: Cluster) -> None:
    app = f"tw-loss-{secrets.token_hex(4)}"
    for owner in ("n1", "n2", "n3"):
        cluster.start(owner, dsn=dsn_with(cluster.dsn, application_name=app))
    cluster.wait_ready()
    cluster.load(lead=4.0)
    killed = rounds = 0
    # Through the due times, and on until 20 connections were cut: on a loaded machine
    # the load can end after them (it once did, and no round ran at all).
    while (time.time() < cluster.t0 + SPREAD or killed < 20) and rounds < 100:
        time.sleep(0.7)
        cluster.check_alive()
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            (n,) = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (app,),
            ).fetchone() or (0,)
        killed += n
        rounds += 1
    cluster.wait_done(timeout=DEADLINE)
    nodes = cluster.finish()
    runs = check_exactly_once(cluster)
    assert killed >= 20, f"only {killed} connections were terminated"
    assert sum(s["ran"] for s in nodes.values()) == len(runs)
    reconnects = sum(cluster.log(o).count("reconnecting") for o in nodes)
    print(f"terminated {killed} connections in {rounds} rounds; {reconnects} reconnect warnings")


@pytest.mark.slow
def test_a_change_made_elsewhere_wakes_an_idle_scheduler_long_before_its_poll(
    cluster: Cluster,
) -> None:
    for owner in ("n1", "n2"):
        cluster.start(owner, poll=30.0)
    cluster.wait_ready()
    time.sleep(1.0)  # both idle in a 30 s wait
    latencies = []
    with PostgresStore(cluster.dsn, schema=cluster.schema) as store:
        for i in range(3):
            due = time.time() + 0.2
            store.upsert(JobSpec(f"o{i:04}", FUNC, At(due)), due)
            deadline = time.monotonic() + 20
            while not (
                rows := cluster.query("SELECT recorded FROM tw_runs WHERE job_id = %s", f"o{i:04}")
            ):
                cluster.check_alive()
                assert time.monotonic() < deadline, "the change did not wake any node"
                time.sleep(0.02)
            latencies.append(rows[0][0] - due)
            time.sleep(0.5)
    nodes = cluster.finish()
    assert max(latencies) < 10.0, latencies  # woken: the poll is 30 s
    steps = {o: s["steps"] for o, s in nodes.items()}
    # A few steps per change (the notification, the due time), none between: no polling.
    assert all(n < 30 for n in steps.values()), steps
    print(f"due-to-recorded latencies {[round(x, 3) for x in latencies]} s; steps {steps}")


# -- leases of long runs, in one process: two schedulers, two stores ------------------


class StalledStore(PostgresStore):
    """A store whose renewals claim success but change nothing: a stalled runner."""

    def renew(self, claim: Claim, *, now: float, lease_seconds: float) -> bool:
        return True


@pytest.fixture
def stores(pg_dsn: str, pg_schema: str) -> Iterator[list[PostgresStore]]:
    opened: list[PostgresStore] = []
    yield opened
    for s in opened:
        s.close()


def recorded(dsn: str, schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return [(str(r[0]), str(r[1])) for r in conn.execute("SELECT job_id, owner FROM tw_runs")]


@pytest.fixture
def node_config(pg_dsn: str, pg_schema: str) -> Iterator[None]:
    PostgresStore(pg_dsn, schema=pg_schema).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        conn.execute(RUNS_DDL)
    durable_pg_node._config.update(dsn=pg_dsn, schema=pg_schema, owner="this-process")
    yield
    durable_pg_node.close_all()
    durable_pg_node._config.clear()


@pytest.mark.usefixtures("node_config")
def test_a_run_longer_than_its_lease_keeps_its_claim(
    pg_dsn: str, pg_schema: str, stores: list[PostgresStore]
) -> None:
    a = PostgresStore(pg_dsn, schema=pg_schema)
    b = PostgresStore(pg_dsn, schema=pg_schema)
    stores += [a, b]
    # Leases of 2 s (renewed every 2/3 s) leave a loaded machine's stalls some room.
    ds_a = DurableScheduler(a, owner="a", lease=2.0, allowed_modules=["tests.durable_pg_node"])
    ds_b = DurableScheduler(b, owner="b", lease=2.0, allowed_modules=["tests.durable_pg_node"])
    spec = JobSpec("long", "tests.durable_pg_node:sleep_then_record", At(time.time()), args=[6.0])
    with ds_a:
        ds_a.declare(spec)
        deadline = time.monotonic() + 20
        while not ds_a.running():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with ds_b:  # another node, waking at every lease end it sees
            time.sleep(7.0)
    state = a.get("long")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "ok"
    assert state.last_run.ended is not None and state.last_run.started is not None
    assert state.last_run.ended - state.last_run.started >= 6.0  # three leases long
    assert recorded(pg_dsn, pg_schema) == [("long", "this-process")]
    assert ds_a.errors == [] and ds_b.errors == []


@pytest.mark.usefixtures("node_config")
def test_a_node_that_lost_its_lease_does_not_report_the_run_as_its_own(
    pg_dsn: str, pg_schema: str, stores: list[PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    stalled = StalledStore(pg_dsn, schema=pg_schema)
    other = PostgresStore(pg_dsn, schema=pg_schema)
    stores += [stalled, other]
    allowed = ["tests.durable_pg_node"]
    ds_a = DurableScheduler(stalled, owner="stalled", lease=1.0, allowed_modules=allowed)
    ds_b = DurableScheduler(other, owner="other", lease=1.0, allowed_modules=allowed)
    spec = JobSpec("long", "tests.durable_pg_node:sleep_then_record", At(time.time()), args=[2.5])
    with caplog.at_level(logging.WARNING), ds_a:
        ds_a.declare(spec)
        # The stalled scheduler must hold the run before the other one starts looking
        # (otherwise the other may claim it first and simply run it).
        deadline = time.monotonic() + 10
        while not any(c.owner == "stalled" for c in other.get("long").claims):  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the stalled scheduler did not claim the run"
            time.sleep(0.01)
        with ds_b:
            deadline = time.monotonic() + 10
            while "claim was gone" not in caplog.text:
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.05)
    state = other.get("long")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "abandoned"  # recovered by the other node ...
    assert "'stalled'" in (state.last_run.error or "")
    assert state.next_run is None and not state.claims  # ... and not run again
    assert recorded(pg_dsn, pg_schema) == [("long", "this-process")]
    assert "outcome 'ok' was not recorded" in caplog.text


def settled_commits(dsn: str) -> int:
    """The database's committed transactions, once the sessions that ended have reported.

    Each reading is a session of its own, which adds its own few as it ends: the count
    is settled when two readings in a row find only that much more.
    """
    readings: list[int] = []
    deadline = time.monotonic() + 30
    while True:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        assert row is not None
        readings.append(int(row[0]))
        if len(readings) >= 3:
            last, prev = readings[-1] - readings[-2], readings[-2] - readings[-3]
            if last == prev <= 3:
                return readings[-1]
        assert time.monotonic() < deadline, f"the database's counts do not settle: {readings}"
        time.sleep(0.3)


@pytest.mark.usefixtures("node_config")
def test_two_nodes_cost_about_one_transaction_per_run_when_one_takes_them_all(
    pg_dsn: str, pg_schema: str
) -> None:
    # 80 one-shots 25 ms apart, a steady 40 runs a second, on two nodes. Without the
    # promise to look at every due time (`LookCover`), both nodes look at each due
    # time or announce nearly every look, and each announcement costs both listening
    # sessions a transaction: over three transactions per run in all.
    count, gap = 80, 0.025
    start = time.time() + 2.0
    with PostgresStore(pg_dsn, schema=pg_schema) as setup:  # ended: its counts reported
        for i in range(count):
            at = start + i * gap
            setup.upsert(JobSpec(f"o{i:02}", "tests.durable_pg_node:record", At(at)), at)
    before = settled_commits(pg_dsn)
    allowed = ["tests.durable_pg_node"]
    with (
        PostgresStore(pg_dsn, schema=pg_schema) as a,
        PostgresStore(pg_dsn, schema=pg_schema) as b,
    ):
        ds_a = DurableScheduler(a, owner="a", allowed_modules=allowed)
        ds_b = DurableScheduler(b, owner="b", allowed_modules=allowed)
        # Waited for in this process, at no cost to the count: a loaded machine that
        # takes longer adds no transactions of the test's own.
        ended: list[RunEvent] = []
        for ds in (ds_a, ds_b):
            ds.add_listener(lambda e: ended.append(e) if e.kind is EventKind.FINISHED else None)
        with ds_a, ds_b:
            wait_until(f"{count} runs to finish", lambda: len(ended) >= count)
        assert ds_a.errors == [] and ds_b.errors == []
    durable_pg_node.close_all()
    spent = settled_commits(pg_dsn) - before - count  # less the jobs' own inserts
    runs = recorded(pg_dsn, pg_schema)
    assert sorted(job for job, _ in runs) == [f"o{i:02}" for i in range(count)]  # once each
    print(f"two nodes: {spent / count:.2f} transactions per run ({spent} for {count})")
    # Measured: 1.7 per run with the promise (start-up included), 3.6 without.
    assert spent < 2.5 * count, f"{spent} transactions for {count} runs"
