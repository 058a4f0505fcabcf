"""Bulk enqueues as the pending one-offs pile up, this tree against a baseline ref.

    .venv/bin/python bench/enqueue_depth.py --baseline HEAD~1 [--batches 50] [--steps 4]

Each tree (this checkout's ``src``, and a ``git worktree`` of ``--baseline``) runs in a
process of its own, alternately, ``--rounds`` times (default 2), on each of ``--stores``:
a fresh SQLite file (the store's defaults: WAL, ``synchronous=FULL``), and a fresh
schema on a throwaway PostgreSQL server made durable (`bench.postgres.start_server`):
``--steps`` steps of ``--batches``
calls of `DurableScheduler.enqueue_many` with 1,000 one-offs each, nothing running
them, so each step starts with more pending rows than the last. It prints each step's
jobs/s (median of the rounds) and this tree's ratio to the baseline's. What a step's
rate shows is how an insert's cost grows with the B-trees it lands in: the one-offs'
ids (random before, time-ordered now) decide where in the primary key each goes. Last,
the bytes each pending one-off takes: the SQLite file, or PostgreSQL's jobs table with
its indexes and TOAST, over the one-offs in it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.postgres import Tree, start_server

CHILD = """
import json, os, secrets, sys, tempfile, time
from tickwork import DurableScheduler, OneOff
batches, steps, dsn = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with tempfile.TemporaryDirectory() as tmp:
    if dsn:
        import psycopg
        from tickwork.stores.postgres import PostgresStore
        schema = "depth_" + secrets.token_hex(4)
        store = PostgresStore(dsn, schema=schema)
    else:
        from tickwork.stores.sqlite import SQLiteStore
        path = os.path.join(tmp, "s.db")
        store = SQLiteStore(path)
    ds = DurableScheduler(store, owner="bench", allowed_modules=["bench"])
    now, out = time.time(), []
    for step in range(steps):
        t = time.perf_counter()
        for b in range(batches):
            ds.enqueue_many(
                [OneOff("bench.enqueue_depth:record", (step, b, i, now)) for i in range(1000)]
            )
        out.append(batches * 1000 / (time.perf_counter() - t))
    store.close()
    if dsn:  # the jobs table with its indexes and TOAST, over its rows
        with psycopg.connect(dsn, autocommit=True) as conn:
            size = conn.execute(
                "SELECT pg_total_relation_size(%s)", (schema + ".tickwork_jobs",)
            ).fetchone()[0]
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    else:  # the whole file, checkpointed (closing the last connection does it)
        size = os.path.getsize(path)
    out.append(size / (steps * batches * 1000))
print(json.dumps(out))
"""


def record(*args: object) -> None:
    """The one-offs' function (never run here: nothing claims them)."""


def measure(tree: Tree, batches: int, steps: int, dsn: str) -> list[float]:
    """One fresh run of `CHILD` on ``tree``: jobs/s per step, then bytes per one-off."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(batches), str(steps), dsn],
        env=tree.env(),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    rates: list[float] = json.loads(done.stdout)
    return rates


def main() -> None:
    """Parse the arguments, run both trees alternately on each store, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, help="the git ref to compare with")
    parser.add_argument("--batches", type=int, default=50, help="calls per step (1,000 each)")
    parser.add_argument("--steps", type=int, default=4, help="steps (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument(
        "--stores", nargs="+", default=["SQLite", "PostgreSQL"], choices=["SQLite", "PostgreSQL"]
    )
    args = parser.parse_args()
    this, base = Tree.checkout("this", None), Tree.checkout("baseline", args.baseline)
    keeper = None
    try:
        for store in args.stores:
            dsn = ""
            if store == "PostgreSQL" and keeper is None:
                dsn, keeper = start_server()
            got: dict[str, list[list[float]]] = {"this": [], "baseline": []}
            for r in range(args.rounds):
                for tree in (this, base) if r % 2 == 0 else (base, this):
                    got[tree.name].append(measure(tree, args.batches, args.steps, dsn))
            report(store, got, args, this, base)
    finally:
        base.remove()
        if keeper is not None and keeper.stdin is not None:
            keeper.stdin.close()
            keeper.wait(timeout=120)


def report(
    store: str, got: dict[str, list[list[float]]], args: argparse.Namespace, this: Tree, base: Tree
) -> None:
    """One store's table: jobs/s per step, and bytes per pending one-off at the end."""
    print(f"\n{store}. this: {this.label}; baseline: {base.label}; {args.rounds} rounds, medians")
    print("| pending before the step | this jobs/s | baseline jobs/s | this / baseline |")
    print("| ---: | ---: | ---: | ---: |")
    for step in range(args.steps + 1):
        a = statistics.median(run[step] for run in got["this"])
        b = statistics.median(run[step] for run in got["baseline"])
        if step == args.steps:
            print(f"| bytes per pending one-off, at the end | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |")
        else:
            print(f"| {step * args.batches * 1000:,} | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
