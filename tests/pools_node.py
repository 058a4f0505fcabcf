"""One node of the pool race in `tests/test_pools_cluster.py`, run as a real process.

``python -m tests.pools_node MARKS STOP sqlite PATH`` or ``... postgres DSN SCHEMA``:
declares the same six jobs in pool ``db`` (limit 2) as every other node, runs them
until the file STOP exists (or a minute passes), then stops. Each run appends a start
and an end mark to MARKS with one ``O_APPEND`` write each, between its claim and its
finish, so no two runs' marks overlap unless their claims did.
"""

from __future__ import annotations

import os
import sys
import time

from tickwork import DurableScheduler, Every
from tickwork.stores import JobSpec, Store

#: Jobs in the pool, each due every second, each run taking this long: three runs are
#: wanted at once on average, so the limit of two is what holds them back.
JOBS = 6
RUN = 0.5
LIMIT = 2


def work(marks: str) -> None:
    """Mark the start, take `RUN` seconds, mark the end."""
    fd = os.open(marks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"S {time.time_ns()} {os.getpid()}\n".encode())
        time.sleep(RUN)
        os.write(fd, f"E {time.time_ns()} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


def open_store(kind: str, where: list[str]) -> Store:
    if kind == "sqlite":
        from tickwork.stores.sqlite import SQLiteStore

        return SQLiteStore(where[0], busy_timeout=30.0)
    from tickwork.stores.postgres import PostgresStore

    return PostgresStore(where[0], schema=where[1])


def main(argv: list[str]) -> None:
    marks, stop, kind, *where = argv
    store = open_store(kind, where)
    ds = DurableScheduler(store, pools={"db": LIMIT}, max_workers=4, lease=10.0)
    for i in range(JOBS):
        ds.declare(JobSpec(f"j{i}", f"{__name__}:work", Every(1.0), args=[marks], pool="db"))
    ds.start()
    deadline = time.monotonic() + 60.0
    while not os.path.exists(stop) and time.monotonic() < deadline:
        time.sleep(0.05)
    ds.stop(wait=True, timeout=10.0)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
