"""Child process of tests/test_durable_crash.py: runs durable jobs until killed.

Run as ``python -m tests.durable_crash_child DB RUNS_DB PLAN_JSON [SCHEMA]`` from the
project root; DB is a SQLite file, or a PostgreSQL DSN (``postgresql:...``) with the
schema to use. It declares the jobs of the plan (the same every time: restarts are idempotent),
starts a `DurableScheduler`, prints ``ready`` and runs until SIGKILLed or, on SIGTERM,
stops cleanly. Each run is recorded by `record` in a table of a separate database.
With no jobs in the plan, it runs the one-offs tests/test_oneoff_kills.py enqueues
(`record_oneoff`).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import threading
import time
from typing import Any

from tickwork import At, DurableScheduler, Every
from tickwork.stores import JobSpec, Store
from tickwork.stores.sqlite import SQLiteStore

FUNC = "tests.durable_crash_child:record"


def record(job_id: str, runs_db: str, pause: float) -> None:
    """Record this run (job, slot, claim time) in the runs table; widen the kill windows."""
    claim = DurableScheduler.current_claim()
    assert claim is not None
    time.sleep(pause)  # started, not yet recorded
    conn = sqlite3.connect(runs_db, timeout=30, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO runs (job_id, scheduled, claimed_at, recorded) VALUES (?, ?, ?, ?)",
            (job_id, claim.scheduled, claim.claimed_at, time.time()),
        )
    finally:
        conn.close()
    time.sleep(pause)  # recorded, not yet finished


def record_oneoff(runs_db: str, pause: float) -> None:
    """`record` for a one-off (tests/test_oneoff_kills.py): its id is its claim's."""
    claim = DurableScheduler.current_claim()
    assert claim is not None
    record(claim.job_id, runs_db, pause)


def spec(job: dict[str, Any], runs_db: str) -> JobSpec:
    """The job of one plan entry."""
    schedule = At(job["at"]) if "at" in job else Every(job["every"])
    return JobSpec(
        job["id"],
        FUNC,
        schedule,
        args=[job["id"], runs_db, job.get("pause", 0.01)],
        missed=job.get("missed", "skip"),
        delivery=job.get("delivery", "at_most_once"),
    )


def open_store(db: str, schema: str | None) -> Store:
    """The store named on the command line: a SQLite file or a PostgreSQL schema."""
    if db.startswith("postgresql:"):
        from tickwork.stores.postgres import PostgresStore

        return PostgresStore(db, schema=schema, history_keep=None)
    # Every ledger entry kept: the test counts the given-up slots from it.
    return SQLiteStore(db, busy_timeout=30, history_keep=None)


def main(db: str, runs_db: str, plan_path: str, schema: str | None = None) -> None:
    """Declare the plan's jobs, run them, print ``ready``; stop on SIGTERM."""
    with open(plan_path) as f:
        plan = json.load(f)
    store = open_store(db, schema)
    # One-offs are enqueued by the test, not declared here: their module is allowed.
    # A plan may lengthen the lease where no node dies (a renewal late on a loaded machine
    # must not read as a dead node there); kill tests keep 1 s for a quick failover.
    ds = DurableScheduler(
        store,
        lease=plan.get("lease", 1.0),
        poll=0.2,
        max_workers=8,
        allowed_modules=["tests.durable_crash_child"],
    )
    for job in plan["jobs"]:
        ds.declare(spec(job, runs_db))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ds.start()
    print("ready", flush=True)
    stop.wait()
    ds.stop(timeout=10)
    store.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
