"""Benchmark: PostgresStore with 1, 2 and 4 node processes sharing one database.

Needs a PostgreSQL server and psycopg (the dev or postgres extra)::

    TICKWORK_PG_DSN=postgresql:///tickwork_test .venv/bin/python bench/postgres.py

Each node is a separate process looping claim (batches of 20) -> start -> run -> finish
on its own `PostgresStore`; "running" a job inserts one row (its due time and start
time) into a results table on a second connection, committed on its own. Every commit
is durable (the server's synchronous_commit, normally on). Two workloads per node count,
each in a fresh schema:

- throughput: ``--burst`` one-shots all due at the same instant: runs claimed and
  executed per second, from the due time to the last start.
- lateness: ``--rate`` one-shots per second due evenly over ``--seconds``: the delay
  between each run's due time and its start, p50/p99/max.

Ratios are against the 1-node figures of the same run. The anchor to beat
(docs/postgres.md, research/aps4-postgres.md): APScheduler 4 ran about 125 runs/s on this
kind of machine whatever the node count, with p99 lateness of 30 s at 500 runs/s offered.
This is not a test: nothing asserts on absolute time.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.stores import AtSchedule, JobSpec, JobState
from tickwork.stores.postgres import PostgresStore

FUNC = "bench.postgres:noop"


def noop() -> None:
    """The job function named in the specs (the nodes record instead of importing it)."""


def once(state: JobState, now: float) -> float | None:
    return None


def _search_path(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))


def node(config: dict[str, Any]) -> None:
    """One node: claim -> start -> record -> finish until the stop file exists."""
    store = PostgresStore(config["dsn"], schema=config["schema"])
    results = psycopg.connect(config["dsn"], autocommit=True)
    _search_path(results, config["schema"])
    stop, owner = Path(config["stop"]), config["owner"]
    store.wait_for_change(0)
    Path(f"{stop}.{owner}.ready").touch()
    while not stop.exists():
        claims = store.claim_due(
            time.time(), owner=owner, lease_seconds=30.0, limit=20, advance=once
        )
        if not claims:
            wakeup = store.next_wakeup()
            timeout = 0.5 if wakeup is None else min(0.5, max(0.0, wakeup - time.time()))
            if timeout > 0:
                store.wait_for_change(timeout)
            continue
        for c in claims:
            started = time.time()
            if store.start(c, started=started):
                results.execute(
                    "INSERT INTO bench_runs VALUES (%s, %s, %s, %s)",
                    (c.job_id, c.scheduled, started, owner),
                )
                store.finish(c, outcome="ok", ended=time.time())
    store.close()
    results.close()


def run(dsn: str, nodes: int, due: list[float], tmp: Path) -> dict[str, float]:
    """Run ``len(due)`` one-shots on ``nodes`` processes in a fresh schema; the figures."""
    schema = f"tw_bench_{secrets.token_hex(4)}"
    stop = tmp / f"{schema}.stop"
    procs = []
    try:
        fast = make_conninfo(
            "", **{**conninfo_to_dict(dsn), "options": "-c synchronous_commit=off"}
        )
        with PostgresStore(fast, schema=schema) as store:
            for i, at in enumerate(due):
                store.upsert(JobSpec(f"j{i:06}", FUNC, AtSchedule(at)), at)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _search_path(conn, schema)
            conn.execute(
                "CREATE TABLE bench_runs (job_id text, scheduled float8, started float8,"
                " owner text)"
            )
        for n in range(nodes):
            config = {"dsn": dsn, "schema": schema, "owner": f"n{n}", "stop": str(stop)}
            procs.append(subprocess.Popen([sys.executable, __file__, "--node", json.dumps(config)]))
        while not all(Path(f"{stop}.n{n}.ready").exists() for n in range(nodes)):
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a node died while starting")
            time.sleep(0.01)
        if time.time() > min(due):
            print("warning: the nodes were ready after the first due time", file=sys.stderr)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _search_path(conn, schema)
            while True:
                row = conn.execute("SELECT count(*) FROM bench_runs").fetchone()
                if row is not None and row[0] >= len(due):
                    break
                time.sleep(0.1)
            rows = conn.execute("SELECT scheduled, started FROM bench_runs").fetchall()
            (dups,) = conn.execute(
                "SELECT count(*) - count(DISTINCT job_id) FROM bench_runs"
            ).fetchone() or (0,)
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=60)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    late = sorted(started - scheduled for scheduled, started in rows)
    span = max(started for _, started in rows) - min(due)
    return {
        "runs": len(rows),
        "dups": dups,
        "per_s": len(rows) / span if span > 0 else float("inf"),
        "p50": statistics.median(late),
        "p99": late[min(len(late) - 1, int(len(late) * 0.99))],
        "max": late[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--burst", type=int, default=3000, help="one-shots due at once")
    parser.add_argument("--rate", type=float, default=500.0, help="one-shots per second")
    parser.add_argument("--seconds", type=float, default=6.0, help="span of the rate workload")
    parser.add_argument("--lead", type=float, default=3.0, help="seconds to start the nodes")
    parser.add_argument("--node", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.node:
        node(json.loads(args.node))
        return
    dsn = os.environ.get("TICKWORK_PG_DSN")
    if not dsn:
        raise SystemExit("set TICKWORK_PG_DSN (e.g. postgresql:///tickwork_test)")
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    print(f"PostgresStore, {os.cpu_count()} CPUs; burst {args.burst}, rate {args.rate:g}/s")
    print("nodes | burst runs/s (x 1 node) | burst p99 s | rate p50 / p99 / max s | dups")
    base = None
    for nodes in args.nodes:
        t0 = time.time() + args.lead + args.burst / 2000
        burst = run(dsn, nodes, [t0] * args.burst, tmp)
        n = round(args.rate * args.seconds)
        t0 = time.time() + args.lead + n / 2000
        rate = run(dsn, nodes, [t0 + args.seconds * i / n for i in range(n)], tmp)
        base = base or burst["per_s"]
        print(
            f"{nodes:5} | {burst['per_s']:8.0f} (x{burst['per_s'] / base:.2f})"
            f" | {burst['p99']:.2f}"
            f" | {rate['p50'] * 1000:.0f} ms / {rate['p99'] * 1000:.0f} ms /"
            f" {rate['max'] * 1000:.0f} ms | {burst['dups'] + rate['dups']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
