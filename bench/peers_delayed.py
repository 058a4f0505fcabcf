"""bench/peers.py's delayed-jobs workload (issue 41): enqueue rates, a fixed rate, a soak.

    .venv/bin/python bench/peers.py --delayed                 # 9 min at load 10-20
    .venv/bin/python bench/peers.py --delayed --quick         # a smoke run
    .venv/bin/python bench/peers.py --soak 600 --nodes 1      # dead tuples over 10 min

Each figure of a peer is measured in the same run as tickwork's, on the same server,
each measurement in a fresh database, and its ratio to tickwork is the median of the
per-round ratios (the order of the systems rotates per round).

- **Enqueue rates** (no node running): producers enqueue flat out for
  ``--enqueue-seconds``: the system's bulk API in batches of 1,000 (tickwork
  ``enqueue_many``, pg-boss ``insert``, Procrastinate ``batch_defer_async``) and its
  single enqueue (``enqueue``, ``send``, ``defer_async``) from 1 and from
  ``--producers`` producers (threads sharing one `DurableScheduler`, as one process of
  an app would; pg-boss and Procrastinate: concurrent async producers). tickwork also on
  SQLite (a file, the store's defaults).
- **Fixed rate**: ``--producers`` producers enqueue jobs due now at ``--rate`` jobs/s in
  all for ``--seconds`` while the nodes run them (single enqueues, or ``--batch`` jobs per
  call of the bulk API); then the harness waits for the
  backlog (at most ``max(10, --seconds)`` s). Per run: the rate the producers reached,
  completed/s (jobs whose row was written while they produced, over that time), pickup
  p50/p99 (the job's row written minus its enqueue call; for tickwork also its ledger's
  ``started - scheduled``), runs twice / lost / still pending at the end (tickwork: from
  its ledger and its jobs table; the peers: from the results and their job tables), CPU
  per run (the server's processes, producers' backends included, from the nodes' launch
  to their exit, and the nodes' own), and commits per run as the server counts them
  (``pg_stat_database.xact_commit`` over the same span, less one per producer call,
  one per job's own insert and the harness's polls).
- **Soak** (``--soak SECONDS``, tickwork alone): the fixed rate for that long, sampling
  every ``SOAK_EVERY`` s the live and dead tuples (``pg_stat_user_tables``) and the
  size (``pg_total_relation_size``) of tickwork's job, claim and ledger tables.
- **Preload** (``--preload PENDING DECLARED``, tickwork alone): the fixed rate on each
  ``--nodes`` count beside 1,000 pending one-offs and 1,000 declared recurring jobs, then
  beside PENDING one-offs due over the next day and DECLARED jobs ``Every(3600)`` (none
  falls due during the run); each run's pickup p99 over the small state's, and the jobs
  table's rows and bytes (heap and indexes, after ``VACUUM ANALYZE``) per row.

Nothing here asserts on time; tests/test_bench_peers.py pins the arithmetic.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from bench.postgres import backend_cpu

if TYPE_CHECKING:
    from bench.peers import Lab, System

#: (store, API, producers as given or ``None`` for ``--producers``, jobs per call).
ENQUEUE_WAYS: tuple[tuple[str, str, int | None, int], ...] = (
    ("PostgreSQL", "bulk", 1, 1000),
    ("PostgreSQL", "single", 1, 1),
    ("PostgreSQL", "single", None, 1),
    ("SQLite", "bulk", 1, 1000),
    ("SQLite", "single", 1, 1),
    ("SQLite", "single", None, 1),
)
#: Each system's documented APIs, as the tables name them.
APIS = {
    "tickwork": {"bulk": "enqueue_many", "single": "enqueue"},
    "pgboss": {"bulk": "insert", "single": "send"},
    "procrastinate": {"bulk": "batch_defer_async", "single": "defer_async"},
}
DELAYED_SYSTEMS = tuple(APIS)
SOAK_EVERY = 10.0  # seconds between a soak's samples
SOAK_TABLES = ("tickwork_jobs", "tickwork_claims", "tickwork_ledger")
#: One-offs still pending at the end, per system (its own job table).
PENDING = {
    "tickwork": "SELECT count(*) FROM tickwork_jobs WHERE queue IS NOT NULL",
    "pgboss": "SELECT count(*) FROM pgboss.job WHERE state IN ('created', 'retry', 'active')",
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
}
_RESULTS = (
    "SELECT count(*), count(DISTINCT job), count(*) FILTER (WHERE extract(epoch FROM at) <= %s),"
    " percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at) - due),"
    " percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM at) - due)"
    " FROM bench_results"
)
_LEDGER = (
    "SELECT count(*), count(DISTINCT job_id),"
    " percentile_cont(0.5) WITHIN GROUP (ORDER BY started - scheduled),"
    " percentile_cont(0.99) WITHIN GROUP (ORDER BY started - scheduled)"
    " FROM tickwork_ledger WHERE job_id LIKE '~%'"
)
_SIZES = (
    "SELECT relname, n_live_tup, n_dead_tup, pg_total_relation_size(relid), autovacuum_count"
    " FROM pg_stat_user_tables WHERE relname = ANY(%s) ORDER BY relname"
)

T = TypeVar("T")


@dataclass
class Enqueue:
    """One enqueue-rate measurement."""

    system: str
    store: str
    kind: str  # "bulk" or "single"
    producers: int
    jobs: int
    seconds: float
    api: str = ""

    @property
    def per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else math.nan

    @property
    def way(self) -> tuple[str, str, int]:
        """What is compared across systems: the store, the kind of API, the producers."""
        return self.store, self.kind, self.producers


@dataclass
class Steady:
    """One fixed-rate run of one system on some nodes."""

    system: str
    nodes: int
    rate: float
    enqueued: int = 0
    calls: int = 0
    produced: float = math.nan  # seconds the producers ran
    in_window: int = 0  # rows written while they ran
    rows: int = 0
    distinct: int = 0
    pending: int = 0
    p50: float = math.nan  # seconds: the job's row minus its enqueue call
    p99: float = math.nan
    ledger: tuple[int, int, float, float] | None = None  # entries, jobs, p50, p99
    server_cpu: float = math.nan
    node_cpu: float = math.nan
    commits: float = math.nan  # the server's count, less producers, jobs and harness
    preload: tuple[int, int] = (0, 0)  # pending one-offs and declared jobs beside the run
    sizes: tuple[int, int, int] | None = None  # the jobs table's rows, heap and index bytes
    samples: list[tuple[float, list[tuple[Any, ...]]]] = field(default_factory=list)

    @property
    def reached(self) -> float:
        return self.enqueued / self.produced if self.produced > 0 else math.nan

    @property
    def completed(self) -> float:
        return self.in_window / self.produced if self.produced > 0 else math.nan

    @property
    def twice_lost(self) -> tuple[int, int]:
        """Runs twice and jobs lost (neither run nor pending): the ledger's for tickwork."""
        if self.ledger is not None:
            entries, jobs, _, _ = self.ledger
            return entries - jobs, self.enqueued - jobs - self.pending
        return self.rows - self.distinct, self.enqueued - self.distinct - self.pending

    @property
    def cpu_ms(self) -> tuple[float, float, float]:
        """Server, nodes and total CPU milliseconds per run (per job that ran)."""
        if not self.distinct:
            return math.nan, math.nan, math.nan
        server = self.server_cpu / self.distinct * 1000
        nodes = self.node_cpu / self.distinct * 1000
        return server, nodes, server + nodes

    @property
    def commits_per_run(self) -> float:
        return self.commits / self.distinct if self.distinct else math.nan


# -- measuring ----------------------------------------------------------------------------


def enqueue_rate(
    lab: Lab, system: System, store: str, kind: str, producers: int, batch: int, seconds: float
) -> Enqueue:
    """Enqueue flat out for ``seconds`` into a fresh database (or SQLite file)."""
    todo = {"threads": producers, "batch": batch, "rate": 0, "seconds": seconds}
    if store == "SQLite":
        path = lab.tmp / f"enqueue_{secrets.token_hex(4)}.db"
        try:
            out = lab.call(system, "produce", {**todo, "sqlite": str(path)})
        finally:
            for extra in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{extra}").unlink(missing_ok=True)
    else:
        name, dsn = lab.database()
        try:
            config = lab.config(system, dsn, 0)
            lab.call(system, "load", config)  # the schema (and pg-boss's queue)
            out = lab.call(system, "produce", {**config, **todo})
        finally:
            lab.drop(name)
    jobs, spent = int(out["enqueued"]), float(out["end"]) - float(out["start"])
    row = system.label if system.name == "tickwork" else system.name  # a baseline's own row
    return Enqueue(row, store, kind, producers, jobs, spent, APIS[system.name][kind])


def steady(
    lab: Lab,
    system: System,
    nodes: int,
    rate: float,
    seconds: float,
    producers: int,
    sample_every: float | None = None,
    patience: float | None = None,
    batch: int = 1,
    preload: tuple[int, int] = (0, 0),
) -> Steady:
    """Produce at ``rate`` for ``seconds`` while ``nodes`` nodes run the jobs.

    The backlog left when the producers stop gets ``patience`` seconds (by default
    ``max(10, seconds)``) before the nodes are stopped; what did not run by then is
    counted as pending (or lost). ``sample_every``: seconds between samples of
    tickwork's tables (`Sampler`). ``batch``: jobs per producer call (1: the single
    enqueue; more: the bulk API, a batch every ``producers * batch / rate`` seconds).
    ``preload``: pending one-offs and declared recurring jobs loaded first (none due
    during the run), then the jobs table vacuumed and analyzed (not counted), as
    autovacuum would have it in a state that grew that large.
    """
    name, dsn = lab.database()
    config = {**lab.config(system, dsn, 0), "pending": preload[0], "declared": preload[1]}
    stop = lab.tmp / f"{name}.stop"
    logs = [lab.tmp / f"{name}.{i}.log" for i in range(nodes)]
    procs: list[Any] = []
    result = Steady(system.label, nodes, rate, preload=preload)
    sampler: Sampler | None = None
    try:
        lab.call(system, "load", config)
        if any(preload):
            result.sizes = jobs_table(dsn)
        commits, server = lab.commits(name), lab.server_cpu()
        lab.launch(system, config, stop, logs, procs)
        if sample_every:
            sampler = Sampler(dsn, sample_every)
        todo = {"threads": producers, "batch": batch, "rate": rate, "seconds": seconds}
        out = lab.call(system, "produce", {**config, **todo})
        wait = max(10.0, seconds) if patience is None else patience
        polls, polling = drain(dsn, out["enqueued"], out["end"] + wait)
        if sampler is not None:
            polls, polling = polls + sampler.polls, polling + sampler.stop()
            result.samples = sampler.samples
    except BaseException:
        if sampler is not None:
            sampler.stop()
        lab._stop(procs, stop, nodes)
        lab.drop(name)
        raise
    result.node_cpu = lab._stop(procs, stop, nodes)
    result.server_cpu = lab.server_cpu() - server - polling
    committed = lab.commits(name) - commits  # before the figures' own reads
    result.enqueued, result.calls = int(out["enqueued"]), int(out["calls"])
    result.produced = float(out["end"]) - float(out["start"])
    figures(dsn, result, system.name, float(out["end"]))
    result.pending -= preload[0]  # the preloaded one-offs wait on (none is due yet)
    # Less the producers' calls (one transaction each), each job's own insert and the
    # harness's polls: what the system's nodes committed.
    result.commits = committed - result.calls - result.rows - polls
    for path in logs:
        path.unlink(missing_ok=True)
    lab.drop(name)
    return result


def jobs_table(dsn: str) -> tuple[int, int, int]:
    """Vacuum and analyze tickwork's jobs table; its rows, heap bytes and index bytes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE tickwork_jobs")
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tickwork_jobs), pg_table_size('tickwork_jobs'),"
            " pg_indexes_size('tickwork_jobs')"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def preload_table(results: Sequence[Steady]) -> list[str]:
    """The fixed rate beside each preload, and each run's p99 over the smallest's."""
    lines = [
        "| pending one-offs | declared jobs | nodes | enqueued/s | completed/s"
        " | pickup p50 / p99 ms | ledger p50 / p99 ms | p99 vs the smallest"
        " | jobs table: rows, heap + indexes MB, bytes per row |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        base = min((b for b in results if b.nodes == r.nodes), key=lambda b: b.preload)
        ledger = r.ledger or (0, 0, math.nan, math.nan)
        ratio = r.p99 / base.p99 if base.p99 > 0 else math.nan
        rows, heap, index = r.sizes or (0, 0, 0)
        size = (
            f"{rows:,}, {heap / 1e6:,.1f} + {index / 1e6:,.1f}, {(heap + index) / rows:,.0f}"
            if rows
            else "-"
        )
        lines.append(
            f"| {r.preload[0]:,} | {r.preload[1]:,} | {r.nodes} | {r.reached:,.0f}"
            f" | {r.completed:,.0f} | {_ms(r.p50)} / {_ms(r.p99)}"
            f" | {_ms(ledger[2])} / {_ms(ledger[3])} | {ratio:.2f}x | {size} |"
        )
    return lines


def figures(dsn: str, result: Steady, system: str, end: float) -> None:
    """Read a fixed-rate run's figures from its database into ``result``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(_RESULTS, (end,)).fetchone()
        assert row is not None
        result.rows, result.distinct, result.in_window = int(row[0]), int(row[1]), int(row[2])
        result.p50, result.p99 = _float(row[3]), _float(row[4])
        pending = conn.execute(PENDING[system]).fetchone()
        result.pending = int(pending[0]) if pending else 0
        if system == "tickwork":
            row = conn.execute(_LEDGER).fetchone()
            assert row is not None
            result.ledger = (int(row[0]), int(row[1]), _float(row[2]), _float(row[3]))


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def drain(dsn: str, n: int, deadline: float) -> tuple[int, float]:
    """Poll until ``n`` jobs ran or the epoch ``deadline``: polls, and their backend's CPU."""
    polls = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(DISTINCT job) FROM bench_results").fetchone()
            polls += 1
            if (row and int(row[0]) >= n) or time.time() > deadline:
                return polls, backend_cpu(conn.info.backend_pid)
            time.sleep(0.25)


class Sampler:
    """A thread sampling tickwork's tables' tuples and sizes every ``every`` seconds."""

    def __init__(self, dsn: str, every: float) -> None:
        self.dsn, self.every = dsn, every
        self.samples: list[tuple[float, list[tuple[Any, ...]]]] = []
        self.polls = 0
        self.cpu = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while True:
                rows = conn.execute(_SIZES, (list(SOAK_TABLES),)).fetchall()
                self.polls += 1
                self.samples.append((time.monotonic() - start, [tuple(r) for r in rows]))
                if self._done.is_set():  # that was the last sample
                    self.cpu = backend_cpu(conn.info.backend_pid)
                    return
                self._done.wait(self.every)

    def stop(self) -> float:
        """Take a last sample, stop; the CPU seconds of the sampling backend."""
        self._done.set()
        self._thread.join()
        return self.cpu


# -- figures ------------------------------------------------------------------------------


def paired(
    rounds: Sequence[Sequence[T]],
    mine: Callable[[T], bool],
    base: Callable[[T], bool],
    value: Callable[[T], float],
) -> list[float]:
    """Per round with both: ``value`` of the first ``mine`` over that of the first ``base``."""
    out = []
    for one in rounds:
        a = [value(r) for r in one if mine(r)]
        b = [value(r) for r in one if base(r)]
        if a and b and b[0] > 0 and math.isfinite(a[0]) and math.isfinite(b[0]):
            out.append(a[0] / b[0])
    return out


def enqueue_table(rounds: list[list[Enqueue]]) -> list[str]:
    """Per store, kind of API and producers, each system's jobs/s and ratio to tickwork."""
    from bench.peers import _n, _x, median_range

    lines = [
        "| store | system | API | producers | jobs/s, median (min-max) | vs tickwork |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    seen: list[tuple[tuple[str, str, int], str]] = []
    for one in rounds:
        for r in one:
            if (r.way, r.system) not in seen:
                seen.append((r.way, r.system))
    for way, system in sorted(seen, key=lambda s: (s[0], s[1] != "tickwork", s[1])):
        mine = [r for one in rounds for r in one if r.way == way and r.system == system]
        rate = median_range([r.per_s for r in mine])
        ratio = median_range(
            paired(
                rounds,
                lambda r, w=way, s=system: r.way == w and r.system == s,  # type: ignore[misc]
                lambda r, w=way: r.way == w and r.system == "tickwork",  # type: ignore[misc]
                lambda r: r.per_s,
            )
        )[0]
        lines.append(
            f"| {way[0]} | {system} | `{mine[0].api}` | {way[2]} | {_n(rate[0])}"
            f" ({_n(rate[1])}-{_n(rate[2])}) | {_x(ratio)} |"
        )
    return lines


def steady_table(
    rounds: list[list[Steady]], labels: list[str], node_counts: list[int]
) -> list[str]:
    """Per node count and system: medians over the rounds, ratios to tickwork's."""
    from bench.peers import _f, _n, _x, median_range

    lines = [
        "| system | nodes | enqueued/s | completed/s | pickup p50 / p99 ms"
        " | ledger p50 / p99 ms | twice / lost / pending | CPU ms per run: server + nodes"
        " = total | CPU vs tickwork | commits per run |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def med(values: list[float]) -> float:
        return median_range(values)[0]

    for nodes in node_counts:
        for label in labels:
            mine = [r for one in rounds for r in one if r.system == label and r.nodes == nodes]
            if not mine:
                continue
            cpu = [med([r.cpu_ms[i] for r in mine]) for i in range(3)]
            ratio = med(
                paired(
                    rounds,
                    lambda r, s=label, n=nodes: r.system == s and r.nodes == n,  # type: ignore[misc]
                    lambda r, n=nodes: r.system == "tickwork" and r.nodes == n,  # type: ignore[misc]
                    lambda r: r.cpu_ms[2],
                )
            )
            ledger = [r.ledger for r in mine if r.ledger is not None]
            led = (
                f"{_ms(med([x[2] for x in ledger]))} / {_ms(med([x[3] for x in ledger]))}"
                if ledger
                else "-"
            )
            twice = sum(r.twice_lost[0] for r in mine)
            lost = sum(r.twice_lost[1] for r in mine)
            pending = sum(r.pending for r in mine)
            lines.append(
                f"| {label} | {nodes} | {_n(med([r.reached for r in mine]))}"
                f" | {_n(med([r.completed for r in mine]))}"
                f" | {_ms(med([r.p50 for r in mine]))} / {_ms(med([r.p99 for r in mine]))}"
                f" | {led} | {twice} / {lost} / {pending}"
                f" | {_f(cpu[0])} + {_f(cpu[1])} = {_f(cpu[2])} | {_x(ratio)}"
                f" | {_f(med([r.commits_per_run for r in mine]))} |"
            )
    return lines


def soak_table(result: Steady) -> list[str]:
    """A soak's samples: per table, live and dead tuples and total size, over time."""
    lines = [
        "| s | " + " | ".join(f"{t}: live / dead / MB" for t in SOAK_TABLES) + " | autovacuums |",
        "| ---: | " + " | ".join("---:" for _ in SOAK_TABLES) + " | ---: |",
    ]
    for at, rows in result.samples:
        by = {str(r[0]): r for r in rows}
        cells = []
        for t in SOAK_TABLES:
            r = by.get(t)
            cells.append("-" if r is None else f"{r[1]:,} / {r[2]:,} / {r[3] / 1e6:.1f}")
        vacuums = sum(int(r[4]) for r in rows)
        lines.append(f"| {at:.0f} | " + " | ".join(cells) + f" | {vacuums} |")
    return lines


def _ms(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds * 1000:,.1f}"
