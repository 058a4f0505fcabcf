"""Statements and commits per durable run on PostgreSQL, by statement, old tree vs new.

    .venv/bin/python bench/statements.py                       # this tree vs 4af5497
    .venv/bin/python bench/statements.py --baseline main~3 --runs 5000
    .venv/bin/python bench/statements.py --new f32d0ef --baseline 4af5497

What a run costs the database is mostly its round trips: each statement is a message
both ways and work for the node and the server. This counts them exactly, with no
timing at all, so it gives the same figures on a loaded machine as on an idle one.

For each tree (this checkout's ``src`` or ``--new REF``, and ``--baseline REF``, each
ref checked out with ``git worktree``), a child process imports that tree's
``tickwork``, declares ``--runs`` one-shots due at one instant in a fresh schema of a
throwaway server (the one bench/postgres.py starts), runs one `DurableScheduler` at
its defaults until every run has ended, and counts every ``execute``/``executemany``
and commit of psycopg from the scheduler's start to its stop. It prints statements
and commits per run, and the statements per run by statement text (first 100
characters), the most frequent first. ``executemany`` counts once (psycopg sends it
as one pipeline). Declaring the jobs and the schedulers' start-up are not counted.
``--spread S`` spreads the due times evenly over S seconds (a steady rate) and
``--nodes K`` runs K schedulers, each with its own store connections.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres import Tree, start_server, stop_server  # noqa: E402

CHILD = """
import collections, json, re, sys, threading, time
import psycopg
counts = collections.Counter()
commits = [0]
on = [False]
ran = [0]
lock = threading.Lock()
_ex, _exm, _cm = psycopg.Cursor.execute, psycopg.Cursor.executemany, psycopg.Connection.commit
def text(q): return re.sub(r"\\s+", " ", q if isinstance(q, str) else str(q))[:100]
def execute(self, query, params=None, **kw):
    if on[0]: counts[text(query)] += 1
    return _ex(self, query, params, **kw)
def executemany(self, query, params, **kw):
    if on[0]: counts["(many) " + text(query)] += 1
    return _exm(self, query, params, **kw)
def commit(self):
    if on[0]: commits[0] += 1
    return _cm(self)
psycopg.Cursor.execute, psycopg.Cursor.executemany = execute, executemany
psycopg.Connection.commit = commit
def noop():
    with lock: ran[0] += 1
sys.modules["twbench_job"] = sys.modules[__name__]
import tickwork
from tickwork import At, DurableScheduler
from tickwork.stores import JobSpec
from tickwork.stores.postgres import PostgresStore
dsn, schema, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
spread, nodes = float(sys.argv[4]), int(sys.argv[5])
store = PostgresStore(dsn, schema=schema)
due = time.time() + 1.5
for i in range(n):
    at = due + spread * i / n
    store.upsert(JobSpec(f"once{i:06}", "twbench_job:noop", At(at)), at)
stores = [store] + [PostgresStore(dsn, schema=schema) for _ in range(nodes - 1)]
schedulers = [
    DurableScheduler(s, owner=f"n{k + 1}", allowed_modules=["twbench_job"])
    for k, s in enumerate(stores)
]
for ds in schedulers:
    ds.start()
time.sleep(0.5)  # start-up is not counted
on[0] = True
give_up = time.monotonic() + 600
while ran[0] < n and time.monotonic() < give_up:
    time.sleep(0.01)
time.sleep(0.5)
on[0] = False
for ds in schedulers:
    ds.stop(timeout=60)
for s in stores:
    s.close()
print(json.dumps({"tickwork": tickwork.__file__, "ran": ran[0], "commits": commits[0],
                  "counts": dict(counts)}))
"""


def measure(
    tree: Tree, dsn: str, schema: str, runs: int, spread: float = 0.0, nodes: int = 1
) -> dict[str, Any]:
    """One tree's counts (the child's JSON line)."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, dsn, schema, str(runs), str(spread), str(nodes)],
        env=tree.env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"[{tree.name}] failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["ran"] != runs:
        raise SystemExit(f"[{tree.name}] ran {result['ran']} of {runs} runs")
    return result


def report(name: str, result: dict[str, Any], runs: int, top: int) -> None:
    """Per-run figures of one tree."""
    counts = collections.Counter(result["counts"])
    total = sum(counts.values())
    print(f"\n{name}: tickwork from {result['tickwork']}")
    print(f"  {total / runs:.2f} statements and {result['commits'] / runs:.2f} commits per run")
    for query, count in counts.most_common(top):
        print(f"  {count / runs:6.3f}  {query}")


def main() -> None:
    """Count both trees on one throwaway server and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="4af5497", help="git ref ('none': new only)")
    parser.add_argument("--new", default=None, help="git ref of the new tree (default: src/)")
    parser.add_argument("--runs", type=int, default=3000, help="one-shots due at once")
    parser.add_argument("--top", type=int, default=12, help="statements listed per tree")
    parser.add_argument(
        "--spread",
        type=float,
        default=0.0,
        help="seconds the runs are due over, evenly (0: all at once; 10 with --runs 1000"
        " is a steady 100 runs/s)",
    )
    parser.add_argument("--nodes", type=int, default=1, help="schedulers sharing the state")
    args = parser.parse_args()
    trees = [Tree.checkout("new", args.new)]
    if args.baseline != "none":
        trees.append(Tree.checkout("old", args.baseline))
    dsn, keeper = start_server()
    try:
        results = {}
        for i, tree in enumerate(trees):
            schema = f"twbench_{i}_{int(time.time())}"
            results[tree.name] = measure(tree, dsn, schema, args.runs, args.spread, args.nodes)
    finally:
        stop_server(keeper)
        for tree in trees:
            tree.remove()
    when = f"due evenly over {args.spread:g} s" if args.spread else "due at once"
    print(f"{args.runs:,} one-shots {when}, {args.nodes} DurableScheduler(s) at their defaults")
    for tree in trees:
        print(f"{tree.name}: {tree.label}")
    for name, result in results.items():
        report(name, result, args.runs, args.top)
    if len(results) == 2:
        new, old = (sum(results[k]["counts"].values()) for k in ("new", "old"))
        print(f"\nstatements per run, new / old: {new / old:.2f}x")


if __name__ == "__main__":
    main()
