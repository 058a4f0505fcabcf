"""One process of bench/postgres.py: load the jobs, or run one real `DurableScheduler` node.

    python -m bench.pg_node load CONFIG_JSON      (from the project root)
    python -m bench.pg_node node CONFIG_JSON

``node`` reports the CPU time (user + system) its process spent from ``ready`` until the
scheduler stopped (``cpu``, seconds), for the CPU per run of bench/postgres.py.

Whichever ``tickwork`` is first on ``sys.path`` is used: bench/postgres.py sets
``PYTHONPATH`` to the ``src`` folder of the tree it measures (this checkout, or a
``git worktree`` of the baseline), so this file must work with both trees' public API.
Each mode prints one JSON line, which includes the ``tickwork`` file it imported (and,
for ``load``, the tree's default lease of `DurableScheduler`, which the nodes use).

``load`` opens a `PostgresStore` on ``dsn`` in ``schema`` (created by the store) with
``synchronous_commit=off`` (setup only: the nodes' commits are all durable) and declares
the jobs with ``store.upsert``: ``oneshots`` (``[first, span, count]``: one-shots due
evenly over ``span`` seconds from ``first``, all at ``first`` when ``span`` is 0) and
``every`` (``[count, seconds, first]``: `Every` jobs). Every job names `record`.

``node`` is what a user's process does: a `PostgresStore`, ``wait_for_change(0)`` (so it
listens before it says ready), a `DurableScheduler` with the library's defaults (lease,
poll, pool size) and ``allowed_modules=["bench.pg_node"]``, ``start()``; it touches
``<stop>.<owner>.ready`` and runs until the file ``stop`` exists, then ``stop()``.

`record`, the jobs' function, writes (job id, scheduled time, start time, owner, claim
token) into ``runs`` in ``results_schema`` of ``results_dsn``, one autocommit insert per
run on a connection of its worker thread. With ``sleep`` in the config (the fault
workload "quiet"), it first sleeps that long (the start time is taken before): a run
cut short by a SIGKILL leaves no row. The results live in another database than the
jobs, so the jobs database's commit counter counts the scheduler alone. Rows are keyed
by nothing: a slot that ran twice shows up as two rows.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tickwork import At, DurableScheduler, Every
from tickwork.stores import JobSpec
from tickwork.stores.postgres import PostgresStore

FUNC = "bench.pg_node:record"

_config: dict[str, Any] = {}
_local = threading.local()
_lock = threading.Lock()
_opened: list[psycopg.Connection[Any]] = []
_ran = 0


def _results() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None:
        conn = psycopg.connect(_config["results_dsn"], autocommit=True)
        conn.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(_config["results_schema"]))
        )
        _local.conn = conn
        with _lock:
            _opened.append(conn)
    return conn


def record() -> None:
    """The benchmark's job: one row in ``runs`` (a durable commit of its own)."""
    global _ran
    started = time.time()
    claim = DurableScheduler.current_claim()
    assert claim is not None, "record() runs only as a durable job"
    if _config.get("sleep"):
        time.sleep(_config["sleep"])
    _results().execute(
        "INSERT INTO runs VALUES (%s, %s, %s, %s, %s)",
        (claim.job_id, claim.scheduled, started, _config["owner"], claim.token),
    )
    with _lock:
        _ran += 1


def load(config: dict[str, Any]) -> dict[str, Any]:
    """Create the schema and declare the jobs; how long it took."""
    t0 = time.time()
    params = {**conninfo_to_dict(config["dsn"]), "options": "-c synchronous_commit=off"}
    with PostgresStore(make_conninfo("", **params), schema=config["schema"]) as store:
        first, span, count = config.get("oneshots") or (0.0, 0.0, 0)
        for i in range(count):
            at = first + span * i / count
            store.upsert(JobSpec(f"once{i:06}", FUNC, At(at)), at)
        count, seconds, first = config.get("every") or (0, 1.0, 0.0)
        for i in range(count):
            store.upsert(JobSpec(f"every{i:03}", FUNC, Every(seconds)), first)
    lease = inspect.signature(DurableScheduler).parameters["lease"].default
    return {"tickwork": tickwork.__file__, "seconds": time.time() - t0, "lease": lease}


def node(config: dict[str, Any]) -> dict[str, Any]:
    """Run one `DurableScheduler` until the stop file appears; a summary."""
    _config.update(config)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    store = PostgresStore(config["dsn"], schema=config["schema"], **config.get("store", {}))
    store.wait_for_change(0)  # LISTEN before "ready": no change after it is missed
    ds = DurableScheduler(store, owner=config["owner"], allowed_modules=["bench.pg_node"])
    ds.start()
    stop = Path(config["stop"])
    cpu = time.process_time()
    Path(f"{stop}.{config['owner']}.ready").touch()
    while not stop.exists():
        time.sleep(0.05)
    ds.stop(timeout=60)
    cpu = time.process_time() - cpu  # from ready to stopped: the runs, not the start-up
    store.close()
    with _lock:
        for conn in _opened:
            conn.close()
    return {"owner": config["owner"], "ran": _ran, "tickwork": tickwork.__file__, "cpu": cpu}


def main(argv: list[str]) -> None:
    """``load`` or ``node``, with a JSON config; prints one JSON line."""
    mode, config = argv[0], json.loads(argv[1])
    result = load(config) if mode == "load" else node(config)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    # Run the module's own copy (bench.pg_node), whose `record` the jobs name, not this
    # __main__ copy (its counters and connections would be another set).
    from bench.pg_node import main as _main

    _main(sys.argv[1:])
