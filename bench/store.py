"""Benchmark of durable jobs through `SQLiteStore` against the in-memory drivers.

Run ``.venv/bin/python bench/store.py`` (``--quick`` for a short run; ``--n`` and
``--startup-n`` choose the sizes, ``--rounds`` the rounds of the durable comparison;
``--pools 6 12 32`` runs only the durable burst on pools of those sizes, with its CPU
and commits per run). The
APScheduler baseline needs the bench extra: ``.venv/bin/pip install -e '.[bench]'``.

Workloads, measured in one process, one after the other, on a fresh database file in a
temporary directory (the file system the temporary directory is on matters: every
state change is a committed SQLite transaction with ``synchronous=FULL``):

(a) burst     N = 10,000 no-op one-shots, all due at once, executed to completion.
              - core:     `tickwork.Scheduler` with N `Once(0)` tasks, one ``run_pending``;
              - thread:   `ThreadScheduler` (own pool, default size) with N due tasks,
                          from ``start()`` until the N-th run finished;
              - durable:  `DurableScheduler` (own pool, default size) on `SQLiteStore`,
                          N one-shot jobs stored as due before it starts (storing them
                          is not timed), from ``start()`` until the N-th run finished
                          (each look's transaction records the ends of the last runs
                          and claims and starts the next). Unit: jobs/s.
              - APScheduler 3 + SQLAlchemy: `BackgroundScheduler` with
                          ``SQLAlchemyJobStore`` on a SQLite file and its default thread
                          pool, N one-shot ``date`` jobs due at once stored before it
                          starts, from ``start()`` until the N-th run finished.
              tickwork durable and APScheduler are each warmed up with a discarded
              500-job burst, then run in ``--rounds`` rounds (default 3) that alternate
              which goes first; their figures are the median over the rounds (min and
              max beside it) and the ratio is the median of the per-round ratios.
              Each round then runs tickwork on a pool of APScheduler's default size
              too (the defaults differ: 32 threads against 10).
              Targets of issue 15: >= 5,000 durable jobs/s at N = 10,000, >= 5x
              APScheduler (PASS/MISS printed, never an exit status).
              - ledger:   the durable burst with the slot ledger and without it
                          (``history_keep=0``), alternating, ``--ledger-rounds`` pairs
                          (default 11); budget of issue 13: 10%.
              - bound:    what bounds the durable burst: the same burst with every
                          fsync dropped (``PRAGMA synchronous=OFF``, a measuring
                          device only, never offered) beside the real store,
                          alternating, with the process's CPU time per run (all
                          threads, user + system) next to the wall time per run.
(b) startup   M = 100,000 stored jobs (one-shots a day ahead):
              - declare:  the first ``declare()`` of all M jobs (one upsert each);
              - restart:  a new store + scheduler declaring the same M jobs again
                          (all unchanged: the restart path of a program);
              - first run: from ``start()`` of that scheduler until a job due now (one
                          among the M) ran: the scheduler never loads all jobs, it asks
                          the store for the next due time;
              - list:     ``jobs()``, every job decoded;
              - core:     scheduling M tasks on the in-memory core, the baseline.

Ratios are printed in the same run; absolute numbers depend on the machine and disk.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tickwork import (  # noqa: E402
    At,
    DurableScheduler,
    EventKind,
    Once,
    RunEvent,
    Scheduler,
    ThreadScheduler,
)
from tickwork.stores import JobSpec  # noqa: E402
from tickwork.stores.sqlite import SQLiteStore  # noqa: E402

NOOP = "bench.store:noop"


def noop() -> None:
    """The job."""


def burst_core(n: int) -> float:
    s = Scheduler()
    for _ in range(n):
        s.add(Once(0), noop)
    t = time.perf_counter()
    assert s.run_pending() == n
    return n / (time.perf_counter() - t)


def _finished_counter(n: int) -> tuple[threading.Event, list[int], object]:
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def listener(event: RunEvent) -> None:
        if event.kind is EventKind.FINISHED:
            with lock:
                count[0] += 1
                if count[0] == n:
                    done.set()

    return done, count, listener


def burst_thread(n: int) -> float:
    ts = ThreadScheduler()
    done, _, listener = _finished_counter(n)
    ts.add_listener(listener)  # type: ignore[arg-type]
    for _ in range(n):
        ts.schedule(0, noop)
    t = time.perf_counter()
    ts.start()
    assert done.wait(600)
    rate = n / (time.perf_counter() - t)
    ts.stop()
    return rate


class UnsyncedStore(SQLiteStore):
    """A `SQLiteStore` with ``PRAGMA synchronous=OFF``: no fsync at any commit.

    Never for use: it loses committed runs when the machine stops. It only tells, in
    `burst_bound`, how much of a burst's time the fsyncs of its commits take.
    """

    def _open(self, conn: sqlite3.Connection, **kw: Any) -> None:
        super()._open(conn, **kw)
        conn.execute("PRAGMA synchronous=OFF")


def burst_durable(
    n: int,
    tmp: Path,
    *,
    store_cls: type[SQLiteStore] = SQLiteStore,
    cpu: list[float] | None = None,
    trace: Callable[[str], object] | None = None,
    max_workers: int | None = None,
    **store_kw: Any,
) -> float:
    """Jobs/s of a durable burst of ``n`` one-shots; ``cpu`` gets the CPU seconds used.

    ``max_workers``: the scheduler's pool (default: its default size).
    ``trace`` sees each statement of the store's connection from ``start()`` until the
    n-th run finished (`sqlite3.Connection.set_trace_callback`; it slows the run).

    The CPU time is the process's (every thread, user and system) from ``start()``
    until the n-th run finished, the span the rate is measured over.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    store = store_cls(tmp / "burst.db", **store_kw)
    now = time.time()
    for i in range(n):
        store.upsert(JobSpec(f"job-{i:06d}", NOOP, At(now)), now)
    ds = DurableScheduler(store, max_workers=max_workers)
    ds.declare(JobSpec("job-000000", NOOP, At(now)))  # allow the function
    done, _, listener = _finished_counter(n)
    ds.add_listener(listener)  # type: ignore[arg-type]
    if trace is not None:
        store._conn.set_trace_callback(trace)  # type: ignore[union-attr]
    before = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    ds.start()
    assert done.wait(600)
    rate = n / (time.perf_counter() - t)
    after = resource.getrusage(resource.RUSAGE_SELF)
    if trace is not None:
        store._conn.set_trace_callback(None)  # type: ignore[union-attr]
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    ds.stop()
    assert all(j.last_run is not None and j.last_run.outcome == "ok" for j in ds.jobs())
    store.close()
    return rate


def aps_pool_size() -> int | None:
    """The size of the thread pool APScheduler 3 gives a scheduler by default."""
    try:
        from apscheduler.executors.pool import ThreadPoolExecutor
    except ImportError:
        return None
    default = inspect.signature(ThreadPoolExecutor).parameters["max_workers"].default
    return int(default)


def burst_aps(n: int, tmp: Path) -> float | None:
    """APScheduler 3 with its SQLAlchemy job store on a SQLite file: the same burst.

    ``n`` one-shot ``date`` jobs due now (``misfire_grace_time=None``: none is dropped as
    misfired) are stored by a first scheduler, started paused and shut down (not timed,
    as tickwork's jobs are stored before it starts). A second ``BackgroundScheduler`` on
    the same database file, with its default executor (a thread pool of
    `aps_pool_size()` threads), is timed from ``start()`` until the n-th run ended
    (``EVENT_JOB_EXECUTED``). ``None`` when APScheduler or SQLAlchemy is missing.
    """
    try:
        from apscheduler.events import (
            EVENT_JOB_ERROR,
            EVENT_JOB_EXECUTED,
            EVENT_JOB_MISSED,
            JobExecutionEvent,
        )
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        return None
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"aps-{time.monotonic_ns()}.db"
    url = f"sqlite:///{path}"

    filler = BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=url)}, timezone="UTC")
    filler.start(paused=True)
    due = datetime.now(UTC) - timedelta(seconds=1)
    for i in range(n):
        filler.add_job(
            NOOP,
            "date",
            run_date=due,
            id=f"job-{i:06d}",
            misfire_grace_time=None,
            coalesce=False,
        )
    # Detach the store first: a stopped APScheduler 3 thread makes one last pass over
    # its stores' due jobs (and logs a failed submission for each); this one has none.
    filler.remove_jobstore("default")
    filler.shutdown(wait=True)

    s = BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=url)}, timezone="UTC")
    done = threading.Event()
    counts = {"executed": 0, "error": 0, "missed": 0}
    lock = threading.Lock()

    def listener(event: JobExecutionEvent) -> None:
        with lock:
            if event.code == EVENT_JOB_MISSED:
                counts["missed"] += 1
            elif event.code == EVENT_JOB_ERROR:
                counts["error"] += 1
            else:
                counts["executed"] += 1
                if counts["executed"] == n:
                    done.set()

    s.add_listener(listener, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
    t = time.perf_counter()
    s.start()
    finished = done.wait(1800)
    rate = n / (time.perf_counter() - t)
    s.shutdown(wait=True)
    assert finished, f"APScheduler: {counts} of {n} runs"
    assert counts == {"executed": n, "error": 0, "missed": 0}, f"APScheduler: {counts}"
    with sqlite3.connect(path) as db:
        (left,) = db.execute("SELECT COUNT(*) FROM apscheduler_jobs").fetchone()
    db.close()
    assert left == 0, f"APScheduler left {left} of {n} one-shots in its store"
    return rate


def compare_burst(
    n: int, tmp: Path, rounds: int
) -> tuple[list[float], list[float] | None, list[float], list[str]]:
    """tickwork durable and APScheduler 3 + SQLAlchemy, warmed up, order rotated.

    Each is warmed up with a discarded 500-job burst; then round r starts with the
    tickwork durable burst when r is even and with APScheduler's when r is odd. With
    APScheduler, each round also runs tickwork on a pool of APScheduler's default size
    (``same pool``), after the other two: their pools differ by default.
    Returns the rates of each (``None`` without APScheduler; ``[]`` for the same-pool
    runs without it) and the order per round.
    """
    warm = min(500, n)
    burst_durable(warm, tmp / "warm-tw")
    have_aps = burst_aps(warm, tmp / "warm-aps") is not None
    ours: list[float] = []
    theirs: list[float] = []
    same_pool: list[float] = []
    orders: list[str] = []
    for r in range(rounds):
        order = ["tickwork", "APScheduler"] if r % 2 == 0 else ["APScheduler", "tickwork"]
        if not have_aps:
            order = ["tickwork"]
        else:
            order.append("same pool")
        orders.append(" then ".join(order))
        print(f"    round {r + 1}: {orders[-1]}", file=sys.stderr)
        for name in order:
            if name == "tickwork":
                ours.append(burst_durable(n, tmp / f"round-{r}"))
            elif name == "same pool":
                same = burst_durable(n, tmp / f"round-{r}-same", max_workers=aps_pool_size())
                same_pool.append(same)
            else:
                rate = burst_aps(n, tmp / f"round-{r}")
                assert rate is not None
                theirs.append(rate)
    return ours, (theirs if have_aps else None), same_pool, orders


def ledger_cost(n: int, tmp: Path, rounds: int) -> tuple[list[float], list[float]]:
    """Durable bursts with the slot ledger and without it (``history_keep=0``).

    Same tree, same run: warmed up, then each round alternates which goes first.
    """
    if "history_keep" not in inspect.signature(SQLiteStore).parameters:
        return [], []  # a tree from before the ledger
    burst_durable(min(500, n), tmp / "warm-ledger")
    with_ledger: list[float] = []
    without: list[float] = []
    for r in range(rounds):
        for keep in (None, 0) if r % 2 == 0 else (0, None):
            kw = {} if keep is None else {"history_keep": 0}
            rate = burst_durable(n, tmp / f"ledger-{r}-{keep}", **kw)
            (with_ledger if keep is None else without).append(rate)
    return with_ledger, without


def burst_bound(n: int, tmp: Path, rounds: int) -> None:
    """What bounds the durable burst: the commits' fsyncs, or the CPU?

    Bursts on the real store and on `UnsyncedStore` (no fsync at all), alternating,
    each with the CPU time the process used per run. If dropping every fsync leaves
    the rate where it is and the CPU time per run is about the wall time per run, the
    burst is bound by the CPU (the Python and SQLite work of each run, serialized by
    the GIL and the store's one connection), not by its commits.
    """
    burst_durable(min(500, n), tmp / "warm-bound", store_cls=UnsyncedStore)
    rates: dict[str, list[float]] = {"FULL": [], "OFF": []}
    cpus: dict[str, list[float]] = {"FULL": [], "OFF": []}
    for r in range(rounds):
        for name in ("FULL", "OFF") if r % 2 == 0 else ("OFF", "FULL"):
            cls = SQLiteStore if name == "FULL" else UnsyncedStore
            used: list[float] = []
            rates[name].append(burst_durable(n, tmp / f"bound-{r}-{name}", store_cls=cls, cpu=used))
            cpus[name].append(used[0] / n)
    for name in ("FULL", "OFF"):
        rate = statistics.median(rates[name])
        print(
            f"    synchronous={name:<4} {rate:>8,.0f} jobs/s   wall {1e6 / rate:,.0f} µs/run,"
            f" CPU {1e6 * statistics.median(cpus[name]):,.0f} µs/run (median of {rounds})"
        )
    ratios = [o / f for o, f in zip(rates["OFF"], rates["FULL"], strict=True)]
    print(
        f"    without any fsync / durable: {statistics.median(ratios):.2f}x (per round"
        f" {', '.join(f'{x:.2f}' for x in ratios)}); CPU per run / wall per run:"
        f" {statistics.median(cpus['FULL']) * statistics.median(rates['FULL']):.2f}"
    )


def pool_sweep(n: int, tmp: Path, rounds: int, sizes: list[int]) -> None:
    """The durable burst on pools of each of ``sizes``: what the pool's size does.

    Warmed up, then ``rounds`` rounds, each running every size once, the order rotated
    by one per round. Per size: jobs/s and CPU µs per run (medians over the rounds), and
    the commits per run of one more burst whose statements are traced (not timed).
    """
    burst_durable(min(500, n), tmp / "warm-sweep")
    rates: dict[int, list[float]] = {w: [] for w in sizes}
    cpus: dict[int, list[float]] = {w: [] for w in sizes}
    for r in range(rounds):
        order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
        for w in order:
            used: list[float] = []
            rates[w].append(burst_durable(n, tmp / f"sweep-{r}-{w}", cpu=used, max_workers=w))
            cpus[w].append(used[0] / n)
    print(f"    pool size sweep: {n:,} runs, median of {rounds} rounds, order rotated")
    print("    workers      jobs/s   CPU µs/run   commits/run (one traced burst)")
    for w in sizes:
        commits = [0]

        def count(statement: str, commits: list[int] = commits) -> None:
            if statement.lstrip().upper().startswith("COMMIT"):
                commits[0] += 1

        burst_durable(n, tmp / f"sweep-traced-{w}", trace=count, max_workers=w)
        print(
            f"    {w:>7} {statistics.median(rates[w]):>11,.0f}"
            f" {1e6 * statistics.median(cpus[w]):>12,.0f} {commits[0] / n:>13.3f}"
        )


def startup(m: int, tmp: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    ahead = time.time() + 86400
    specs = [JobSpec(f"job-{i:06d}", NOOP, At(ahead + i)) for i in range(m)]
    path = tmp / "startup.db"

    store = SQLiteStore(path)
    ds = DurableScheduler(store)
    t = time.perf_counter()
    for spec in specs:
        ds.declare(spec)
    out["declare"] = time.perf_counter() - t
    store.close()

    t = time.perf_counter()
    store = SQLiteStore(path)
    ds = DurableScheduler(store)
    for spec in specs:
        ds.declare(spec)
    out["restart"] = time.perf_counter() - t

    done, _, listener = _finished_counter(1)
    ds.add_listener(listener)  # type: ignore[arg-type]
    ds.declare(JobSpec("due-now", NOOP, At(time.time())))
    t = time.perf_counter()
    ds.start()
    assert done.wait(60)
    out["first run"] = time.perf_counter() - t
    ds.stop()

    t = time.perf_counter()
    assert len(ds.jobs()) == m + 1
    out["list"] = time.perf_counter() - t
    store.close()

    core = Scheduler()
    t = time.perf_counter()
    for i in range(m):
        core.add(Once(86400 + i), noop)
    out["core"] = time.perf_counter() - t
    return out


def main() -> None:
    """Run both workloads and print figures with ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--n", type=int, default=10_000, help="burst size (default 10,000)")
    parser.add_argument("--startup-n", type=int, default=100_000, help="stored jobs (100,000)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the durable comparison (default 3)"
    )
    parser.add_argument(
        "--ledger-rounds",
        type=int,
        default=11,
        help="rounds of the ledger's cost (default 11: one burst varies by 20-30%% from the"
        " next on a shared machine, so a 10%% budget needs the median of many pairs)",
    )
    parser.add_argument(
        "--pools",
        type=int,
        nargs="+",
        metavar="W",
        help="only sweep the durable burst over these pool sizes (max_workers)",
    )
    args = parser.parse_args()
    n, m = (1000, 5000) if args.quick else (args.n, args.startup_n)
    if args.pools:
        if min(args.pools) < 1:
            parser.error(f"--pools: every size must be at least 1, got {args.pools}")
        with tempfile.TemporaryDirectory(prefix="tickwork-bench-") as d:
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, database in {d}")
            pool_sweep(n, Path(d), max(1, args.rounds), args.pools)
        return
    with tempfile.TemporaryDirectory(prefix="tickwork-bench-") as d:
        tmp = Path(d)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, database in {tmp}")
        print(f"(a) burst: {n:,} no-op one-shots due at once")
        core = burst_core(n)
        thread = burst_thread(n)
        ours, theirs, same_pool, orders = compare_burst(n, tmp, max(1, args.rounds))
        durable = statistics.median(ours)
        print(f"    core     {core:>12,.0f} jobs/s")
        print(f"    thread   {thread:>12,.0f} jobs/s")
        if n == 10_000:
            target = "PASS" if durable >= 5000 else "MISS"
        else:
            target = "n/a (the target is for N = 10,000)"
        print(
            f"    durable  {durable:>12,.0f} jobs/s   median of {len(ours)} rounds"
            f" (min {min(ours):,.0f}, max {max(ours):,.0f}); target >= 5,000: {target}"
        )
        print(
            f"             {thread / durable:.0f}x slower than thread,"
            f" {core / durable:.0f}x slower than core"
        )
        if theirs is None:
            print(
                "    APScheduler 3 + SQLAlchemy: skipped, APScheduler or SQLAlchemy is missing"
                " (.venv/bin/pip install -e '.[bench]')"
            )
        else:
            from apscheduler import __version__ as aps_version
            from sqlalchemy import __version__ as sa_version

            aps = statistics.median(theirs)
            ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
            ratio = statistics.median(ratios)
            verdict = "PASS" if ratio >= 5 else "MISS"
            print(
                f"    APScheduler {aps_version} + SQLAlchemy {sa_version} job store on SQLite,"
                f" default pool of {aps_pool_size()} threads:"
            )
            print(
                f"             {aps:>12,.0f} jobs/s   median of {len(theirs)} rounds"
                f" (min {min(theirs):,.0f}, max {max(theirs):,.0f})"
            )
            print(
                f"    tickwork durable / APScheduler: {ratio:.1f}x (median of the per-round"
                f" ratios, min {min(ratios):.1f}x, max {max(ratios):.1f}x); target >= 5x: {verdict}"
            )
            same = [s / t for s, t in zip(same_pool, theirs, strict=True)]
            print(
                f"    tickwork durable on APScheduler's pool of {aps_pool_size()} threads:"
                f" {statistics.median(same_pool):,.0f} jobs/s, {statistics.median(same):.1f}x"
                f" APScheduler (median of the per-round ratios, {min(same):.1f}x-{max(same):.1f}x)"
            )
        print(f"    (warm-up: a discarded {min(500, n)}-job burst each, then per round:)")
        for r, order in enumerate(orders):
            figures = f"tickwork durable {ours[r]:,.0f}"
            if theirs is not None:
                figures += f", APScheduler {theirs[r]:,.0f} ({ours[r] / theirs[r]:.1f}x)"
                figures += f", tickwork on APScheduler's pool {same_pool[r]:,.0f}"
            print(f"      round {r + 1}, {order}: {figures} jobs/s")
        led, bare = ledger_cost(n, tmp, 3 if args.quick else max(1, args.ledger_rounds))
        if led:
            costs = [b / w for w, b in zip(led, bare, strict=True)]
            cost = statistics.median(costs)
            verdict = "PASS" if cost <= 1.10 else "MISS"
            print(
                f"    ledger cost: {statistics.median(led):,.0f} jobs/s with the slot ledger,"
                f" {statistics.median(bare):,.0f} without (history_keep=0);"
                f" without / with = {cost:.3f} (median of the per-round ratios,"
                f" {min(costs):.3f}-{max(costs):.3f}); target <= 1.10: {verdict}"
            )
        print("    what bounds the durable burst (fsync or CPU; synchronous=OFF only measures):")
        burst_bound(n, tmp, max(1, args.rounds))
        print(f"(b) startup: {m:,} stored jobs")
        res = startup(m, tmp)
        core_s = res["core"]
        for key in ("declare", "restart", "first run", "list"):
            secs = res[key]
            print(f"    {key:<10} {secs:>8.3f} s   ({secs / core_s:.3g}x the core's scheduling)")
        print(f"    core       {core_s:>8.3f} s   (schedule {m:,} tasks in memory)")


if __name__ == "__main__":
    main()
