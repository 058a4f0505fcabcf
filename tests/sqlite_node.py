"""A `DurableScheduler` on a SQLite file in a process of its own, for test_sqlite_failover.py.

    python -m tests.sqlite_node DB READY OWNER      (from the project root)

Starts a scheduler named OWNER (60-s lease, 2 workers) on the file DB, touches READY
and sleeps until it is killed. Its jobs name `hang_on`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tickwork import DurableScheduler
from tickwork.stores.sqlite import SQLiteStore


def hang_on(owner: str, log: str) -> None:
    """Append ``JOB OWNER`` to ``log``; then, on scheduler ``owner`` only, hang."""
    claim = DurableScheduler.current_claim()
    assert claim is not None, "hang_on() runs only as a durable job"
    with open(log, "a") as f:
        f.write(f"{claim.job_id} {claim.owner}\n")
    if claim.owner == owner:
        time.sleep(3600)  # the test kills the process


def main(db: str, ready: str, owner: str) -> None:
    """Run one scheduler until killed."""
    store = SQLiteStore(db)
    ds = DurableScheduler(
        store, owner=owner, lease=60.0, max_workers=2, allowed_modules=["tests.sqlite_node"]
    )
    ds.start()
    Path(ready).touch()
    time.sleep(3600)


if __name__ == "__main__":
    from tests.sqlite_node import main as _main  # the module's own copy, as the jobs name it

    _main(*sys.argv[1:4])
