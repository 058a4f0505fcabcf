"""What planning each statement once saves: a PostgreSQL look and finish, auto vs generic.

    .venv/bin/python bench/plans.py                  # 6 rounds of 1,500 looks, about 2 min
    .venv/bin/python bench/plans.py --rounds 10 --looks 3000

`PostgresStore` sets ``plan_cache_mode = force_generic_plan`` on its connections
(docs/durability.md, "Each statement is planned once per connection"). This measures
that one setting against the server's default (``auto``) in the same run, with no
threads and no timing in the loop, so the figures scatter far less than the real
nodes' of bench/postgres.py: a `PostgresStore` in a fresh schema of a throwaway
server (as bench/postgres.py starts one: fsync and synchronous_commit on) holds
one-shots due one a second; each look claims what is due two seconds on (two runs, as
at 100 runs a second with looks 20 ms apart) and records their finishes set-based
or item by item as the store chooses, in its own transaction. After 20 looks of
warm-up (psycopg prepares a statement at its fifth run), ``--looks`` looks are
measured: the server's CPU (its processes from ``/proc``, as bench/postgres.py reads
it, without the harness's own backend) and this process's, per run. The two settings
alternate which goes first over ``--rounds`` rounds; it prints each one's median (and
range) and the median of the per-round ratios. Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

import psycopg  # noqa: E402
from bench.postgres import _parent, server_cpu, start_server, stop_server  # noqa: E402

import tickwork.stores.postgres as pg_mod  # noqa: E402
from tickwork import At  # noqa: E402
from tickwork.stores import JobSpec  # noqa: E402
from tickwork.stores.contract import Finish  # noqa: E402
from tickwork.stores.postgres import PostgresStore  # noqa: E402

MODES = ("auto", "force_generic_plan")


def measure(dsn: str, harness: int, schema: str, mode: str, looks: int) -> tuple[float, float]:
    """Server and client CPU ms per run over ``looks`` looks with ``mode`` set."""
    shipped = pg_mod._SESSION_SQL
    pg_mod._SESSION_SQL = f"SELECT set_config('plan_cache_mode', '{mode}', false)"
    store = PostgresStore(dsn, schema=schema)
    try:
        # Nothing calls the jobs (the store is driven directly): the function is a name.
        for i in range(2 * (looks + 20) + 2):
            store.upsert(JobSpec(f"j{i:06}", "bench.plans:job", At(1000.0 + i)), 1000.0 + i)

        def look(k: int) -> int:
            now = 1001.0 + 2 * k
            taken = store.claim_due(
                now, owner="A", lease_seconds=30.0, limit=32, advance=lambda s, n: None
            )
            store.record([], [Finish(c, "ok", now + 0.5) for c in taken])
            return len(taken)

        for k in range(20):
            look(k)
        postmaster = _parent(harness)
        server, client = server_cpu(postmaster, skip=harness), time.process_time()
        runs = sum(look(k) for k in range(20, 20 + looks))
        server = server_cpu(postmaster, skip=harness) - server
        client = time.process_time() - client
        return server / runs * 1000, client / runs * 1000
    finally:
        store.close()
        pg_mod._SESSION_SQL = shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--looks", type=int, default=1500)
    args = parser.parse_args()
    dsn, keeper = start_server()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            print(f"PostgreSQL {version[0] if version else '?'}, {args.rounds} rounds of"
                  f" {args.looks:,} looks of two runs each, one store, no threads")  # fmt: skip
            got: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
            for r in range(args.rounds):
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    schema = f"plans_{r}_{mode[:4]}"
                    got[mode].append(measure(dsn, conn.info.backend_pid, schema, mode, args.looks))
        print("| plan_cache_mode | server CPU ms per run, median (min-max) | this process |")
        print("| --- | ---: | ---: |")
        for mode in MODES:
            server = [s for s, _ in got[mode]]
            client = statistics.median(c for _, c in got[mode])
            print(f"| {mode} | {statistics.median(server):.3f} ({min(server):.3f}-"
                  f"{max(server):.3f}) | {client:.3f} |")  # fmt: skip
        ratios = [g[0] / a[0] for a, g in zip(got["auto"], got["force_generic_plan"], strict=True)]
        each = ", ".join(f"{x:.2f}x" for x in ratios)
        median = statistics.median(ratios)
        print(f"server CPU per run, generic / auto, each round: {each}; median {median:.2f}x")
    finally:
        stop_server(keeper)


if __name__ == "__main__":
    main()
