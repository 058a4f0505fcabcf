"""PostgreSQL: a node finds work due that another node's claim transaction holds.

The claim skips rows another transaction has locked (``SKIP LOCKED``), so while a
second node is inside its claim, this node sees the work due and claims none of it. The
holder's commit (or rollback) sends no notification: the node must look again soon on
its own, not sleep out its safety poll (it once slept 10 s with work due).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

from tickwork import At, DurableScheduler
from tickwork.stores import JobSpec
from tickwork.stores.postgres import PostgresStore

from . import durable_jobs

POLL = 60.0


def wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_due_work_held_by_another_transaction_runs_soon_after_it_ends(
    pg_dsn: str, pg_schema: str
) -> None:
    durable_jobs.CALLS.clear()
    store = PostgresStore(pg_dsn, schema=pg_schema)
    store.upsert(JobSpec("j", "tests.durable_jobs:record", At(time.time() - 1)), time.time() - 1)
    other = psycopg.connect(pg_dsn)  # "another node", inside its claim transaction
    other.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
    locked = other.execute("SELECT id FROM tickwork_jobs WHERE id = 'j' FOR NO KEY UPDATE")
    assert locked.fetchall() == [("j",)]
    ds = DurableScheduler(store, poll=POLL, allowed_modules=["tests.durable_jobs"])
    try:
        ds.start()
        # The node has looked, found the work due and claimed none of it.
        wait_for(lambda: ds._claiming.held >= 2, "a look that finds the due row held")
        assert durable_jobs.CALLS == [] and ds.running() == {}
        other.rollback()  # the holder's transaction ends, with no notification
        released = time.monotonic()
        wait_for(lambda: len(durable_jobs.CALLS) == 1, "the run", timeout=POLL / 2)
        waited = time.monotonic() - released
        # Looked at again within about a second (the backoff's cap), not after the poll;
        # the bound leaves room for a loaded machine and still fails at POLL.
        assert waited < POLL / 4, waited
    finally:
        other.close()
        ds.stop(timeout=10)
        store.close()
