"""Benchmark of declaring jobs: `declare_many` against one `declare` per job, both stores.

Run ``.venv/bin/python bench/declare.py`` (``--n 100000`` for the issue's size; ``--dsn``
for a PostgreSQL of your own, else a throwaway server is started as the test suite
starts one, made durable: ``fsync`` and ``synchronous_commit`` on).

Workload, per store (SQLite: a fresh file in a temporary folder, ``synchronous=FULL``;
PostgreSQL: a fresh schema), N fixed-rate jobs (``Every(60)``, a stdlib function):

- new:       N jobs declared into an empty state;
- unchanged: a new store and scheduler declaring the same N jobs again (a restart:
             the time includes opening the store);
- changed:   the same N jobs with one option changed (``retries=1``, same schedule).

Each is timed through `DurableScheduler.declare_many` (N jobs) and through one
`DurableScheduler.declare` per job (``--one-by-one`` jobs, default min(N, 2,000): one by
one costs a transaction per job); the ratio is declare_many's jobs/s over one by one's,
both measured in this run. Issue 41's target: a restart with 100,000 unchanged jobs is
running in <= 10 s on PostgreSQL (PASS/MISS printed, never an exit status).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tickwork import DurableScheduler, Every  # noqa: E402
from tickwork.stores import JobSpec, Store  # noqa: E402
from tickwork.stores.sqlite import SQLiteStore  # noqa: E402

FUNC = "os:getpid"  # any importable function that takes no arguments
TARGET_S = 10.0  # issue 41: 100,000 unchanged jobs running in <= 10 s (PostgreSQL)


def specs(n: int, prefix: str, **options: Any) -> list[JobSpec]:
    return [JobSpec(f"{prefix}{i:06}", FUNC, Every(60), **options) for i in range(n)]


def timed_phases(opener: Callable[[], Store], n: int, many: bool, prefix: str) -> dict[str, float]:
    """Seconds of new, unchanged (a restart: the store opened again) and changed."""
    out: dict[str, float] = {}
    batch = specs(n, prefix)
    for phase, jobs in (("new", batch), ("unchanged", batch), ("changed", None)):
        if jobs is None:
            jobs = specs(n, prefix, retries=1)
        begun = time.perf_counter()
        store = opener()
        try:
            ds = DurableScheduler(store)
            if many:
                results = ds.declare_many(jobs)
                bad = [r for r in results if isinstance(r, Exception)]
                assert not bad, bad[:1]
            else:
                for spec in jobs:
                    ds.declare(spec)
            out[phase] = time.perf_counter() - begun
        finally:
            store.close()
    return out


@contextmanager
def postgres(dsn: str | None) -> Iterator[tuple[str, str]]:
    """A DSN (``--dsn``, or a throwaway durable server) and where it came from."""
    if dsn:
        yield dsn, "--dsn"
        return
    from bench.postgres import start_server, stop_server

    print("starting a throwaway PostgreSQL server (tests/pg_server.py) ...", file=sys.stderr)
    found, keeper = start_server()
    try:
        yield found, "a throwaway server (tests/pg_server.py, made durable)"
    finally:
        stop_server(keeper)


def pg_opener(dsn: str) -> tuple[Callable[[], Store], Callable[[], None]]:
    """Opens stores on a fresh schema; and the schema's drop."""
    import psycopg
    from psycopg import sql

    from tickwork.stores.postgres import PostgresStore

    schema = f"tw_bench_{secrets.token_hex(4)}"

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    return lambda: PostgresStore(dsn, schema=schema), drop


def report(store: str, n: int, one: int, many: dict[str, float], single: dict[str, float]) -> None:
    for phase in ("new", "unchanged", "changed"):
        rate_many, rate_one = n / many[phase], one / single[phase]
        print(
            f"{store:10} {phase:9}  declare_many {n:>7,} jobs {many[phase]:7.2f} s"
            f" {rate_many:>9,.0f}/s | one by one {one:>6,} jobs {rate_one:>7,.0f}/s"
            f" | {rate_many / rate_one:6.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="jobs per declare_many")
    parser.add_argument("--one-by-one", type=int, default=None, help="jobs declared one by one")
    parser.add_argument("--dsn", default=os.environ.get("TICKWORK_PG_DSN") or None)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args()
    n, one = args.n, args.one_by_one or min(args.n, 2_000)
    print(f"declaring {n:,} jobs at once, {one:,} one by one; {os.cpu_count()} CPUs")
    if "sqlite" in args.stores:
        with tempfile.TemporaryDirectory(prefix="tw-declare-") as tmp:
            many = timed_phases(lambda: SQLiteStore(Path(tmp) / "many.db"), n, True, "j")
            single = timed_phases(lambda: SQLiteStore(Path(tmp) / "one.db"), one, False, "j")
        report("sqlite", n, one, many, single)
    if "postgres" in args.stores:
        with postgres(args.dsn) as (dsn, source):
            print(f"PostgreSQL: {source}")
            results = []
            for is_many, count in ((True, n), (False, one)):
                opener, drop = pg_opener(dsn)
                try:
                    results.append(timed_phases(opener, count, is_many, "j"))
                finally:
                    drop()
        report("postgres", n, one, results[0], results[1])
        if n >= 100_000:
            verdict = "PASS" if results[0]["unchanged"] <= TARGET_S else "MISS"
            print(
                f"issue 41: restart with {n:,} unchanged jobs in"
                f" {results[0]['unchanged']:.2f} s (<= {TARGET_S:.0f} s): {verdict}"
            )


if __name__ == "__main__":
    main()
