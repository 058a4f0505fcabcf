"""Benchmark: a durable SQLite burst against the floor of the work it must do.

Run ``.venv/bin/python bench/floor.py`` (``--n`` runs per burst, ``--rounds`` rounds).

Where does a durable run's CPU go? This measures, in the same process and the same
rounds (alternating which goes first), three things over ``N`` no-op one-shots due
at once on a fresh SQLite file (``synchronous=FULL``, WAL, the store's real schema):

tickwork    `DurableScheduler` on `SQLiteStore` at its defaults, from ``start()``
            until the N-th run finished (`bench.store.burst_durable`).
statements  the statements a run needs, and nothing else, from one thread, in the
            transactions of a backlog's looks: each records the finishes of the
            last ``--batch`` runs (delete the claim reading its start, set the job's
            last run, insert the ledger entry) and claims the next ``--batch`` (read
            the due rows, insert their claims recorded started, move their next
            runs). No scheduler, no threads; ``--batch`` is the pool's size unless
            given.
handoffs    a `ThreadPoolExecutor` of the same size as tickwork's pool running N
            no-op calls, at most that many outstanding: the cost of handing each run
            to a worker thread and hearing that it ended, with no store at all.

Each line gives runs/s and the CPU per run (user + system, every thread), each the
median over the rounds, and for the first two the statements and commits per run,
counted on one more run of each with the connection traced (not timed). The last
line says what tickwork spends beyond the two floors together: its own Python
(claims, decisions, the recorder, events), the store's reads the floor leaves out,
and the waits of its threads on each other and on the GIL. Nothing here is a test;
no figure is an assertion.
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from bench.store import NOOP, burst_durable  # noqa: E402

from tickwork import At  # noqa: E402
from tickwork._durable.scheduler import DEFAULT_WORKERS  # noqa: E402
from tickwork.stores import JobSpec  # noqa: E402
from tickwork.stores.sqlite import SQLiteStore  # noqa: E402

#: What one measurement gives: (runs per second, CPU seconds per run).
Figure = tuple[float, float]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(n: int, body: Callable[[], None]) -> Figure:
    cpu, wall = _cpu(), time.perf_counter()
    body()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return n / wall, cpu / n


def tickwork_figure(n: int, tmp: Path) -> Figure:
    """Runs/s and CPU per run of `bench.store.burst_durable` (its own timing span)."""
    cpu: list[float] = []
    rate = burst_durable(n, tmp, cpu=cpu)
    return rate, cpu[0] / n


class Counter:
    """Counts the statements and commits a connection executes (its trace callback)."""

    def __init__(self) -> None:
        self.statements = 0
        self.commits = 0

    def __call__(self, sql: str) -> None:
        if sql.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            self.commits += sql.startswith("COMMIT")
        else:
            self.statements += 1


def tickwork_counts(n: int, tmp: Path) -> Counter:
    """Statements and commits of the same burst, counted (not timed) on its connection.

    Counted from ``start()`` to the n-th run's end, on the store's one connection: the
    change watch's connection (``PRAGMA data_version``, five times a second) is left
    out, as it reads nothing of the runs.
    """
    counter = Counter()
    burst_durable(n, tmp, trace=counter)
    return counter


def _load(path: Path, n: int) -> None:
    """``n`` one-shots due now in a state file with the store's own schema."""
    store = SQLiteStore(path)
    now = time.time()
    for i in range(n):
        store.upsert(JobSpec(f"job-{i:06d}", NOOP, At(now)), now)
    store.close()


def statements_figure(n: int, tmp: Path, batch: int, counter: Counter | None = None) -> Figure:
    """The statements of ``n`` runs, from one thread, ``batch`` runs a transaction.

    Each transaction records the finishes of the last batch (delete the claim reading
    its start, set the job's last run, insert the ledger entry) and claims the next
    (read the due rows, insert their claims recorded started, move their next runs):
    the shape of a backlog's looks on SQLite.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "floor.db"
    _load(path, n)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    if counter is not None:
        conn.set_trace_callback(counter)

    def finish(claims: list[tuple[str, str, float]], ended: float) -> None:
        for token, _, _ in claims:
            conn.execute(
                "DELETE FROM claims WHERE token = ? RETURNING started", (token,)
            ).fetchall()
        conn.executemany(
            "UPDATE jobs SET last_scheduled = ?, last_started = ?, last_ended = ?,"
            " last_outcome = 'ok', last_error = NULL WHERE id = ?",
            [(at, ended, ended, job) for _, job, at in claims],
        )
        conn.executemany(
            "INSERT INTO ledger (job_id, scheduled, outcome, claimed, started,"
            " ended, node, recorded) VALUES (?, ?, 'ok', ?, ?, ?, 'floor', ?)",
            [(job, at, ended, ended, ended, ended) for _, job, at in claims],
        )

    def body() -> None:
        done = 0
        claims: list[tuple[str, str, float]] = []
        while True:
            now = time.time()
            conn.execute("BEGIN IMMEDIATE")
            finish(claims, now)
            done += len(claims)
            rows = conn.execute(
                "SELECT id, next_run FROM jobs WHERE next_run <= ? AND paused = 0"
                " ORDER BY next_run, id LIMIT ?",
                (now, batch),
            ).fetchall()
            claims = [(secrets.token_urlsafe(16), job, at) for job, at in rows]
            conn.executemany(
                "INSERT INTO claims (token, job_id, owner, scheduled, claimed_at,"
                " lease_until, started) VALUES (?, ?, 'floor', ?, ?, ?, ?)",
                [(token, job, at, now, now + 30.0, now) for token, job, at in claims],
            )
            conn.executemany(
                "UPDATE jobs SET next_run = NULL WHERE id = ?", [(job,) for _, job, _ in claims]
            )
            conn.execute("COMMIT")
            if not claims:
                break
        if done != n:
            raise AssertionError(f"recorded {done} runs of {n}")

    try:
        return _timed(n, body)
    finally:
        conn.close()


def handoffs_figure(n: int, workers: int) -> Figure:
    """``n`` no-op calls through a pool of ``workers``, at most that many outstanding."""
    cond = threading.Condition()
    state = {"busy": 0, "done": 0}

    def call() -> None:
        with cond:
            state["busy"] -= 1
            state["done"] += 1
            cond.notify()

    def body() -> None:
        with ThreadPoolExecutor(workers) as pool:
            sent = 0
            while sent < n:
                with cond:
                    while state["busy"] >= workers:
                        cond.wait()
                    room = min(workers - state["busy"], n - sent)
                    state["busy"] += room
                for _ in range(room):
                    pool.submit(call)
                sent += room
            with cond:
                while state["done"] < n:
                    cond.wait()

    return _timed(n, body)


def main() -> None:
    """Measure the three in alternating rounds and print the medians and the gap."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="runs per burst")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="runs a transaction (0: a pool)")
    args = parser.parse_args()
    workers = DEFAULT_WORKERS  # DurableScheduler's default pool
    batch = args.batch or workers
    figures: dict[str, list[Figure]] = {"tickwork": [], "statements": [], "handoffs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            order = list(figures) if k % 2 == 0 else list(reversed(figures))
            for name in order:
                where = Path(tmp) / f"{name}-{k}"
                if name == "tickwork":
                    figures[name].append(tickwork_figure(args.n, where))
                elif name == "statements":
                    figures[name].append(statements_figure(args.n, where, batch))
                else:
                    figures[name].append(handoffs_figure(args.n, workers))
        # One more of each, counted rather than timed (tracing costs time).
        ours = tickwork_counts(args.n, Path(tmp) / "count-tickwork")
        floors = Counter()
        statements_figure(args.n, Path(tmp) / "count-statements", batch, floors)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}, {args.n:,} runs, {args.rounds} rounds")
    print(f"pool {workers} workers; statements in transactions of {batch} runs\n")
    print("| part | runs/s | CPU µs per run | statements per run | commits per run |")
    print("| --- | ---: | ---: | ---: | ---: |")
    counts = {"tickwork": ours, "statements": floors}
    cpu: dict[str, float] = {}
    for name, values in figures.items():
        rate = statistics.median(v[0] for v in values)
        cpu[name] = statistics.median(v[1] for v in values) * 1e6
        c = counts.get(name)
        sql = "- | -" if c is None else f"{c.statements / args.n:.2f} | {c.commits / args.n:.3f}"
        print(f"| {name} | {rate:,.0f} | {cpu[name]:.0f} | {sql} |")
    floor = cpu["statements"] + cpu["handoffs"]
    print(
        f"\nthe two floors together: {floor:.0f} µs per run; tickwork spends"
        f" {cpu['tickwork'] / floor:.1f}x that, {cpu['tickwork'] - floor:.0f} µs per run"
        " beyond it"
    )


if __name__ == "__main__":
    main()
