"""Child process of tests/test_chains_e2e.py: a node that runs a chain, or dies in it.

Run as ``python -m tests.chains_child DB RUNS_DB MODE AT [SCHEMA]`` from the project
root; DB is a SQLite file, or a PostgreSQL DSN (``postgresql:...``) with the schema to
use. It declares ``up`` (one run, at AT), ``down`` after ``up`` and ``last`` after ``down``
(the same declarations every time: a restart changes nothing),
prints ``ready`` and runs. MODE ``kill``: the store SIGKILLs this process right after it
committed ``up``'s finish (which queued ``down``), before anything else is claimed, so
the node dies exactly between "up finished" and "down runs". MODE ``run``: runs until
SIGTERM. Each run is noted in a table of RUNS_DB.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
from typing import Any

from tickwork import At, DurableScheduler
from tickwork.stores import JobSpec, Store
from tickwork.stores.sqlite import SQLiteStore

FUNC = "tests.chains_child:note"


def note(job_id: str, runs_db: str) -> None:
    """Note this run (job and slot) in the runs table."""
    claim = DurableScheduler.current_claim()
    assert claim is not None
    conn = sqlite3.connect(runs_db, timeout=30, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO runs (job_id, scheduled) VALUES (?, ?)", (job_id, claim.scheduled)
        )
    finally:
        conn.close()


def killing(base: type[Any]) -> type[Any]:
    """``base`` whose finish of ``up`` kills the process once it has committed."""

    class Killing(base):  # type: ignore[misc, valid-type]
        gate = threading.RLock()  # no claim between up's commit and the kill

        def claim_due(self, *args: Any, **kw: Any) -> Any:
            with self.gate:
                return super().claim_due(*args, **kw)

        def finish(self, claim: Any, **kw: Any) -> Any:
            with self.gate:
                done = super().finish(claim, **kw)
                if claim.job_id == "up":
                    os.kill(os.getpid(), signal.SIGKILL)
                return done

        def record(self, starts: Any, finishes: Any) -> Any:
            with self.gate:
                done = super().record(starts, finishes)
                if any(f.claim.job_id == "up" for f in finishes):
                    os.kill(os.getpid(), signal.SIGKILL)
                return done

        def claim_due_carrying(self, finishes: Any, *args: Any, **kw: Any) -> Any:
            # A finish carried to the next look would be committed with that look's
            # claim, which may take the run it queued: no moment "between" would be
            # left to die in. This node records apart, so it dies right there.
            with self.gate:
                ended = self.record([], finishes)[1]  # SIGKILLed after up's commit
                return ended, self.claim_due(*args, **kw)

    return Killing


def open_store(db: str, schema: str | None, kill: bool) -> Store:
    if db.startswith("postgresql"):
        from tickwork.stores.postgres import PostgresStore

        cls: type[Any] = killing(PostgresStore) if kill else PostgresStore
        return cls(db, schema=schema)  # type: ignore[no-any-return]
    cls = killing(SQLiteStore) if kill else SQLiteStore
    return cls(db)  # type: ignore[no-any-return]


def main() -> None:
    db, runs_db, mode, at = sys.argv[1:5]
    schema = sys.argv[5] if len(sys.argv) > 5 else None
    store = open_store(db, schema, mode == "kill")
    ds = DurableScheduler(store, poll=0.1)
    ds.declare(JobSpec("up", FUNC, At(float(at)), args=["up", runs_db]))
    ds.declare(JobSpec("down", FUNC, args=["down", runs_db], after=["up"]))
    ds.declare(JobSpec("last", FUNC, args=["last", runs_db], after=["down"]))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    ds.start()
    print("ready", flush=True)
    done.wait()
    ds.stop()
    store.close()


if __name__ == "__main__":
    main()
