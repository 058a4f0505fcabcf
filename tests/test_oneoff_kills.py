"""One-offs under SIGKILL: several node processes, killed and restarted, and a producer.

Each node is ``tests/durable_crash_child.py`` with no declared jobs: a real
`DurableScheduler` (1 s lease, 8 workers) that runs the one-offs this test enqueues, on
SQLite and again on PostgreSQL. Some one-offs are enqueued before the nodes start,
the rest by a producer thread while the test SIGKILLs a node now and then and starts it
again (some die while starting). Every run inserts a row (its id, its slot) into a
separate database. At the end, per `docs/durability.md`:

- an at-most-once one-off ran at most once, with exactly one ledger entry: ``ok`` if it
  ended, ``abandoned`` if its node died with it started (it then ran once or never);
- an at-least-once one-off ran at least once, and its ledger's last entry is its one
  ``ok`` (each earlier attempt, lost with its node, is ``abandoned``);
- no one-off is left in the jobs table and no claim is held; the ledger names no
  one-off that was not enqueued; ``oneoffs()`` counts each exactly once.
"""

from __future__ import annotations

import logging
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tickwork import DurableScheduler, OneOff
from tickwork.stores.contract import OneOffCounts

from .durable_crash_child import open_store
from .test_durable_crash import spawn, wait_ready
from .waiting import wait_until

FUNC = "tests.durable_crash_child:record_oneoff"
SEED = 20261206


@dataclass(frozen=True)
class Soak:
    """How much: one-offs before the nodes start and while they are killed; kills; nodes."""

    before: int
    during: int
    kills: int
    nodes: int = 3


@pytest.fixture(params=["sqlite", "postgres"])
def store_args(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The nodes' store: a SQLite file, or a fresh PostgreSQL schema (DSN, schema)."""
    if request.param == "sqlite":
        return [str(tmp_path / "jobs.db")]
    return [request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")]


class Producer:
    """Enqueues one-offs from the test process, and remembers each one's delivery."""

    def __init__(self, store_args: list[str], runs: Path, rng: random.Random) -> None:
        self.store = open_store(store_args[0], store_args[1] if len(store_args) > 1 else None)
        self.ds = DurableScheduler(self.store)  # never started: it only enqueues
        self.runs, self.rng = str(runs), rng
        self.delivery: dict[str, str] = {}
        self.keys = 0

    def items(self, n: int, spread: float) -> list[OneOff]:
        out = []
        for _ in range(n):
            i = len(self.delivery) + len(out)
            options = {"delivery": "at_least_once"} if i % 3 == 0 else {}
            key = None
            if i % 5 == 0:
                self.keys += 1
                key = f"k{self.keys}"
            delay = self.rng.uniform(0, spread)
            out.append(OneOff(FUNC, (self.runs, 0.01), delay=delay, key=key, options=options))
        return out

    def put(self, items: list[OneOff]) -> None:
        if len(items) == 1:
            item = items[0]
            refs = [
                self.ds.enqueue(
                    item.func, *item.args, delay=item.delay, key=item.key, **item.options
                )
            ]
        else:
            refs = self.ds.enqueue_many(items)
        for ref, item in zip(refs, items, strict=True):
            assert ref.created, ref  # every key is new
            self.delivery[ref.id] = str(item.options.get("delivery", "at_most_once"))

    def counts(self) -> list[OneOffCounts]:
        return self.ds.oneoffs()

    def ended(self) -> bool:
        """Every one-off enqueued has ended (none pending, none held)."""
        got = self.counts()
        return len(got) == 1 and got[0].done + got[0].failed + got[0].dropped == len(self.delivery)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """The rows of ``query`` ({jobs}, {claims}, {ledger} name the store's tables)."""
        return list(
            self.store._run(  # type: ignore[attr-defined]
                "read", lambda cur: cur.execute(self.store._q(query)).fetchall(), write=False
            )
        )


def children_log(tmp_path: Path) -> str:
    """The end of the nodes' logs (`spawn` writes them there), for a failure's message."""
    log = tmp_path / "children.log"
    return log.read_text()[-3000:] if log.exists() else "(no log)"


def make_runs(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # kept by the file: the nodes write at once
    conn.execute("CREATE TABLE runs (job_id TEXT, scheduled REAL, claimed_at REAL, recorded REAL)")
    conn.commit()
    conn.close()


def soak(tmp_path: Path, store_args: list[str], plan: Soak) -> str:
    """Run ``plan``; check every one-off's runs, ledger entries and counts; a summary."""
    rng = random.Random(SEED)
    runs, plan_file = tmp_path / "runs.db", tmp_path / "plan.json"
    make_runs(runs)
    plan_file.write_text('{"jobs": []}')
    producer = Producer(store_args, runs, rng)
    started = time.monotonic()
    for at in range(0, plan.before, 200):
        producer.put(producer.items(min(200, plan.before - at), spread=3.0))
    nodes = [spawn(store_args, runs, plan_file) for _ in range(plan.nodes)]
    for node in nodes:
        wait_ready(node)
    failures: list[BaseException] = []

    def produce() -> None:
        try:
            made = 0
            while made < plan.during:
                n = min(rng.choice([1, 1, 5, 20, 50]), plan.during - made)
                producer.put(producer.items(n, spread=1.5))
                made += n
                time.sleep(0.02)
        except BaseException as exc:  # the test thread reports it
            failures.append(exc)

    thread = threading.Thread(target=produce, name="producer")
    thread.start()
    kills = 0
    try:
        while kills < plan.kills or thread.is_alive():
            time.sleep(rng.uniform(0.2, 0.8))
            if kills >= plan.kills:
                continue
            i = rng.randrange(len(nodes))
            nodes[i].send_signal(signal.SIGKILL)
            nodes[i].wait()
            assert nodes[i].stdout is not None
            nodes[i].stdout.close()
            kills += 1
            nodes[i] = spawn(store_args, runs, plan_file)
            if rng.random() < 0.7:
                wait_ready(nodes[i])  # else it may die while starting
        thread.join()
        assert not failures, failures
        for i, node in enumerate(nodes):
            if node.poll() is not None:
                nodes[i] = spawn(store_args, runs, plan_file)
        wait_until("every one-off to end", producer.ended)
    finally:
        for node in nodes:
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            code = node.wait(60)
            assert node.stdout is not None
            node.stdout.close()
            # -SIGTERM: a node restarted just before the end had no handler yet.
            assert code in (0, -signal.SIGKILL, -signal.SIGTERM), (code, children_log(tmp_path))
    elapsed = time.monotonic() - started
    try:
        return check(producer, runs, plan, elapsed)
    finally:
        producer.store.close()


def check(producer: Producer, runs: Path, plan: Soak, elapsed: float) -> str:
    conn = sqlite3.connect(runs)
    ran = Counter(job_id for (job_id,) in conn.execute("SELECT job_id FROM runs"))
    conn.close()
    entries: dict[str, list[str]] = {}
    for job_id, outcome in producer.rows(
        "SELECT job_id, outcome FROM {ledger} WHERE job_id LIKE '~%' ORDER BY seq"
    ):
        entries.setdefault(job_id, []).append(outcome)
    delivery = producer.delivery
    assert len(delivery) == plan.before + plan.during
    assert set(entries) == set(delivery), "a one-off has no ledger entry, or one not enqueued"
    assert set(ran) <= set(delivery)
    abandoned = repeated = 0
    for job_id, how in delivery.items():
        n, got = ran[job_id], entries[job_id]
        if how == "at_most_once":
            assert n <= 1, f"{job_id} ran {n} times"
            assert got in (["ok"], ["abandoned"]), (job_id, got)
            assert n == 1 or got == ["abandoned"], (job_id, n, got)
            abandoned += got == ["abandoned"]
        else:
            assert n >= 1, f"{job_id} never ran: {got}"
            assert got[-1] == "ok" and set(got[:-1]) <= {"abandoned"}, (job_id, got)
            assert n <= len(got), (job_id, n, got)  # each run was an attempt on record
            repeated += n - 1
    assert producer.rows("SELECT COUNT(*) FROM {jobs} WHERE queue IS NOT NULL") == [(0,)]
    assert producer.rows("SELECT COUNT(*) FROM {claims}") == [(0,)]
    ok = sum(1 for got in entries.values() if got[-1] == "ok")
    assert producer.counts() == [OneOffCounts(FUNC, done=ok, failed=len(delivery) - ok)], (
        "oneoffs() counts each one-off's end once"
    )
    return (
        f"{len(delivery)} one-offs, {plan.kills} kills on {plan.nodes} nodes in"
        f" {elapsed:.1f} s: {abandoned} at-most-once abandoned mid-run, {repeated}"
        " at-least-once runs repeated"
    )


def test_one_offs_run_once_on_nodes_killed_and_restarted(
    tmp_path: Path, store_args: list[str]
) -> None:
    print("\n" + soak(tmp_path, store_args, Soak(before=600, during=900, kills=6)))


@pytest.mark.slow
def test_one_offs_run_once_through_a_long_kill_loop(tmp_path: Path, store_args: list[str]) -> None:
    print("\n" + soak(tmp_path, store_args, Soak(before=2000, during=3000, kills=30)))


# -- PostgreSQL: connections terminated while one-offs are enqueued and run ---------------


def test_connections_terminated_while_one_offs_are_enqueued_and_run_change_nothing(
    tmp_path: Path, pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``pg_terminate_backend`` on the nodes' and the producer's sessions, again and again.

    No one-off runs twice or is lost (all at-most-once: no node dies, so none may be
    abandoned), and each ``enqueue_many`` is wholly in or wholly out: one that returned
    has all its one-offs, one that raised has all or none.
    """
    import psycopg

    app = f"tw-oneoff-loss-{SEED}"
    # A URL, as the nodes take it (tests/durable_crash_child.py).
    cut = [f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}application_name={app}", pg_schema]
    runs, plan_file = tmp_path / "runs.db", tmp_path / "plan.json"
    make_runs(runs)
    # No node dies here, so none may lose a claim: the lease is long enough that only a
    # hang reaches it, where 1 s was outlived by renewals late under load (a live node's
    # claims then recovered as `abandoned`). Cut sessions are told apart by their locks.
    plan_file.write_text('{"jobs": [], "lease": 30}')
    store = open_store(cut[0], pg_schema)
    producer = DurableScheduler(store)
    caplog.set_level(logging.WARNING, logger="tickwork.stores")  # the producer's retries
    nodes = [spawn(cut, runs, plan_file) for _ in range(3)]
    batches: list[tuple[list[str], bool]] = []  # (ids, whether enqueue_many returned)
    stop = threading.Event()
    killed = rounds = 0
    try:
        for node in nodes:
            wait_ready(node)

        def produce() -> None:
            n = 0
            while not stop.is_set() and n < 150:
                ids = [f"b{n}-{i}" for i in range(10)]
                items = [OneOff(FUNC, (str(runs), 0.002), key=k, delay=0.2) for k in ids]
                try:
                    refs = producer.enqueue_many(items)
                    assert all(r.created for r in refs)
                    batches.append(([r.id for r in refs], True))
                except Exception:  # a StoreError: told, not lost
                    batches.append((["~key:" + k for k in ids], False))
                n += 1
                time.sleep(0.01)

        thread = threading.Thread(target=produce, name="producer")
        thread.start()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            while thread.is_alive() or killed < 20:
                time.sleep(0.3)
                row = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (app,),
                ).fetchone()
                killed += row[0] if row else 0
                rounds += 1
                assert rounds < 400, f"only {killed} sessions terminated in {rounds} rounds"
        stop.set()
        thread.join()

        def settled() -> bool:
            got = producer.oneoffs()
            return all(c.pending == c.running == 0 for c in got)

        wait_until("every one-off to end", settled)
    finally:
        stop.set()
        for node in nodes:
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            assert node.wait(60) == 0, children_log(tmp_path)
            assert node.stdout is not None
            node.stdout.close()
    conn = sqlite3.connect(runs)
    ran = Counter(job_id for (job_id,) in conn.execute("SELECT job_id FROM runs"))
    conn.close()
    entries: dict[str, list[str]] = {}
    for job_id, outcome in store._run(  # type: ignore[attr-defined]
        "read",
        lambda cur: cur.execute(
            "SELECT job_id, outcome FROM tickwork_ledger WHERE job_id LIKE '~%%' ORDER BY seq"
        ).fetchall(),
        write=False,
    ):
        entries.setdefault(job_id, []).append(outcome)
    enqueued: set[str] = set()
    for ids, returned in batches:
        there = [i for i in ids if i in entries]
        assert len(there) in (0, len(ids)), f"a batch half in: {there}"
        assert there or not returned, f"a batch that returned is lost: {ids}"
        enqueued |= set(there)
    assert set(entries) == enqueued and set(ran) == enqueued
    twice = {k: n for k, n in ran.items() if n != 1}
    assert twice == {}, f"{len(twice)} one-offs ran more than once"
    assert all(got == ["ok"] for got in entries.values()), "a one-off not ended once, ok"
    assert producer.oneoffs() == [OneOffCounts(FUNC, done=len(enqueued))]
    store.close()
    failed = sum(1 for _, returned in batches if not returned)
    retried = [r.getMessage() for r in caplog.records if "cannot enqueue" in r.getMessage()]
    unknown = sum("commit outcome unknown" in m for m in retried)
    print(
        f"\n{killed} sessions terminated in {rounds} rounds; {len(batches)} batches,"
        f" {failed} raised, {len(retried)} retried ({unknown} with their commit cut off);"
        f" {len(enqueued)} one-offs ran once each"
    )
