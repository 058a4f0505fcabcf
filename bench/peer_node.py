"""One process of bench/peers.py: load a burst, or run one node, of one Python system.

    python bench/peer_node.py SYSTEM load CONFIG_JSON
    python bench/peer_node.py SYSTEM node CONFIG_JSON
    python bench/peer_node.py SYSTEM produce CONFIG_JSON

SYSTEM is ``tickwork`` (run with this project's venv and ``PYTHONPATH=src``),
``apscheduler`` or ``procrastinate`` (run with the peers' venv, ``bench/.peers/venv``).
Only the chosen system is imported. pg-boss has its own harness, bench/peer_pgboss.js.

CONFIG: ``dsn`` (a libpq URL of the run's own database), ``n`` (jobs), ``first`` (epoch
seconds: when every job is due), and for ``node``: ``owner``, ``stop`` (a file: the node
touches ``<stop>.<owner>.ready`` once it runs, and stops when ``stop`` exists).

``load`` stores ``n`` one-shot jobs ``j000000``..., all due at ``first``, each calling the
job below with its key (tickwork: one-offs, ``enqueue_many``; ``n`` 0 only creates the
schema). ``node`` runs one node as a user's process would, then prints one JSON line with
the CPU time (user + system, every thread) it spent from ready to stopped. ``produce``
enqueues jobs due now, each with its key and the instant of its enqueue call (``due``),
from ``threads`` producers for ``seconds``: ``batch`` jobs per call (1: the system's
single enqueue; more: its bulk API), at ``rate`` jobs/s in all (0: as fast as they go);
it prints ``enqueued``, ``calls`` (one transaction each) and the epoch ``start``/``end``.
tickwork produces into SQLite instead when CONFIG has ``sqlite`` (a file path).

The job is the same for every system: one autocommit ``INSERT INTO bench_results (job,
node, due) VALUES (key, owner, due)`` on a connection of the node (the column ``at``, the
server's ``clock_timestamp()``, says when the run wrote its row; ``due`` is NULL for a
burst's jobs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

INSERT = "INSERT INTO bench_results (job, node, due) VALUES (%s, %s, %s)"
#: The job of tickwork's one-offs, by import path (the nodes allow the module).
RECORD = "peer_node:record"
#: Jobs per call of a bulk API when loading a burst.
LOAD_BATCH = 1000
#: Jobs one node runs at once, where the system leaves it to the user (Procrastinate's
#: default is 1): tickwork's default pool size (``tickwork.DurableScheduler``'s
#: ``DEFAULT_WORKERS``; not imported: this file also runs in the peers' venv).
CONCURRENCY = 32
#: Procrastinate's ``fetch_job_polling_interval`` (default 5 s). A job deferred for a
#: later time sends no notification when it falls due: workers find it when they poll.
#: 0.5 s, as pg-boss's polling here (bench/peers.py), so neither waits seconds to start.
PROCRASTINATE_POLL = 0.5

_config: dict[str, Any] = {}
_local = threading.local()
_opened: list[Any] = []
_lock = threading.Lock()


def _conn() -> Any:
    """A results connection of the calling thread (opened on first use)."""
    import psycopg

    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = psycopg.connect(_config["dsn"], autocommit=True)
        _local.conn = conn
        with _lock:
            _opened.append(conn)
    return conn


def record(key: str, due: float | None = None) -> None:
    """The job of tickwork and APScheduler: one row, a durable commit of its own."""
    _conn().execute(INSERT, (key, _config["owner"], due))


def keys(n: int) -> list[str]:
    return [f"j{i:06}" for i in range(n)]


def due(config: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(config["first"], UTC)


def run_node(
    config: dict[str, Any], start: Callable[[], Any], stop: Callable[[Any], None]
) -> float:
    """Start a node, say ready, wait for the stop file, stop it; its CPU seconds."""
    handle = start()
    cpu = time.process_time()
    stop_file = Path(config["stop"])
    Path(f"{stop_file}.{config['owner']}.ready").touch()
    while not stop_file.exists():
        time.sleep(0.05)
    stop(handle)
    return time.process_time() - cpu


# -- tickwork ---------------------------------------------------------------------------


def tickwork_load(config: dict[str, Any]) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    import tickwork
    from tickwork import DurableScheduler, OneOff
    from tickwork.stores.postgres import PostgresStore

    params = {**conninfo_to_dict(config["dsn"]), "options": "-c synchronous_commit=off"}
    with PostgresStore(make_conninfo("", **params)) as store:
        ds = DurableScheduler(store, owner="loader", allowed_modules=["peer_node"])
        all_keys = keys(config["n"])
        for i in range(0, len(all_keys), LOAD_BATCH):
            chunk = all_keys[i : i + LOAD_BATCH]
            ds.enqueue_many([OneOff(RECORD, (key,), at=config["first"]) for key in chunk])
        _preload(store, ds, int(config.get("pending", 0)), int(config.get("declared", 0)))
    return {"version": tickwork.__version__, "file": tickwork.__file__}


def _preload(store: Any, ds: Any, pending: int, declared: int) -> None:
    """``pending`` one-offs due over the next day, ``declared`` recurring jobs hourly.

    None of them falls due within the next 10 minutes (the measurement's span): they
    are the state a fixed rate runs beside (``bench/peers.py --preload``).
    """
    from tickwork import Every, OneOff
    from tickwork.stores import JobSpec

    now = time.time()
    step = (86_400 - 600) / max(pending, 1)
    for i in range(0, pending, 10_000):
        ds.enqueue_many(
            [
                OneOff(RECORD, (f"p{k:07}",), at=now + 600 + k * step)
                for k in range(i, min(i + 10_000, pending))
            ]
        )
    for i in range(0, declared, 10_000):
        store.upsert_many(
            [
                (JobSpec(f"d{k:06}", RECORD, Every(3600), args=[f"d{k}"]), now + 900 + k % 2700)
                for k in range(i, min(i + 10_000, declared))
            ]
        )


def tickwork_node(config: dict[str, Any]) -> float:
    from tickwork import DurableScheduler
    from tickwork.stores.postgres import PostgresStore

    def start() -> Any:
        store = PostgresStore(config["dsn"])
        store.wait_for_change(0)  # LISTEN before "ready", as bench/pg_node.py does
        ds = DurableScheduler(store, owner=config["owner"], allowed_modules=["peer_node"])
        ds.start()
        return ds, store

    def stop(handle: Any) -> None:
        handle[0].stop(timeout=60)
        handle[1].close()

    return run_node(config, start, stop)


def tickwork_produce(config: dict[str, Any]) -> dict[str, Any]:
    from tickwork import DurableScheduler, OneOff
    from tickwork.stores import Store

    store: Store
    if config.get("sqlite"):
        from tickwork.stores.sqlite import SQLiteStore

        store = SQLiteStore(config["sqlite"])
    else:
        from tickwork.stores.postgres import PostgresStore

        store = PostgresStore(config["dsn"])
    # One scheduler for every producer thread, as one process of an app would have.
    ds = DurableScheduler(store, owner="producer", allowed_modules=["peer_node"])

    def send(items: list[tuple[str, float]]) -> None:
        if len(items) == 1:
            ds.enqueue(RECORD, *items[0])
        else:
            ds.enqueue_many([OneOff(RECORD, item) for item in items])

    try:
        return produce_threads(config, send)
    finally:
        store.close()


def _plan(config: dict[str, Any]) -> tuple[int, int, float, float]:
    """Producers, jobs per call, seconds, and each producer's step between calls."""
    threads, batch = int(config["threads"]), int(config["batch"])
    rate, seconds = float(config["rate"]), float(config["seconds"])
    return threads, batch, seconds, (threads * batch / rate if rate > 0 else 0.0)


def _items(p: int, k: int, batch: int) -> list[tuple[str, float]]:
    now = time.time()
    return [(f"p{p}-{k * batch + i}", now) for i in range(batch)]


def produce_threads(
    config: dict[str, Any], send: Callable[[list[tuple[str, float]]], None]
) -> dict[str, Any]:
    """Enqueue from ``threads`` threads as `main`'s docstring says; the counts."""
    threads, batch, seconds, step = _plan(config)
    counts = [0] * threads
    start = time.time()
    end = start + seconds

    def one(p: int) -> None:
        k = 0
        while True:
            # Producer p's k-th call is due at start + (k + p / threads) * step.
            at = start + (k + p / threads) * step
            if k and (at >= end or time.time() >= end):  # each makes one call at least
                return
            if at > time.time():
                time.sleep(at - time.time())
            send(_items(p, k, batch))
            k += 1
            counts[p] = k

    pool = [threading.Thread(target=one, args=(p,)) for p in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    calls = sum(counts)
    return {"enqueued": calls * batch, "calls": calls, "start": start, "end": time.time()}


# -- APScheduler 4 ----------------------------------------------------------------------


def _aps(config: dict[str, Any], **options: Any) -> Any:
    from apscheduler import Scheduler
    from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
    from apscheduler.eventbrokers.psycopg import PsycopgEventBroker
    from sqlalchemy.ext.asyncio import create_async_engine

    url = config["dsn"].replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_async_engine(url)
    broker = PsycopgEventBroker.from_async_sqla_engine(engine)
    return Scheduler(SQLAlchemyDataStore(engine), broker, **options)


def apscheduler_load(config: dict[str, Any]) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor
    from importlib import metadata

    from apscheduler.triggers.date import DateTrigger

    with _aps(config) as scheduler:
        # Its default task limit (1 running job in the whole cluster) would serialise
        # the burst: lift it, and never let a late run count as misfired.
        scheduler.configure_task(
            "record", func=record, max_running_jobs=None, misfire_grace_time=None
        )

        def add(key: str) -> None:  # a trigger each: a DateTrigger is used up by next()
            scheduler.add_schedule("record", DateTrigger(due(config)), id=key, args=[key])

        with ThreadPoolExecutor(8) as pool:  # its adds are one transaction each
            list(pool.map(add, keys(config["n"])))
    return {"version": metadata.version("apscheduler")}


def apscheduler_node(config: dict[str, Any]) -> float:
    def start() -> Any:
        scheduler = _aps(config, identity=config["owner"])
        scheduler.__enter__()
        scheduler.configure_task(
            "record", func=record, max_running_jobs=None, misfire_grace_time=None
        )
        scheduler.start_in_background()
        return scheduler

    def stop(scheduler: Any) -> None:
        scheduler.stop()
        scheduler.wait_until_stopped()
        scheduler.__exit__(None, None, None)

    return run_node(config, start, stop)


# -- Procrastinate ----------------------------------------------------------------------


def _procrastinate(config: dict[str, Any]) -> tuple[Any, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=config["dsn"]))
    pool: list[Any] = []

    @app.task(name="record")
    async def record_async(key: str, due: float | None = None) -> None:
        await pool[0].execute_insert(key, due)

    return app, (record_async, pool)


class _AsyncResults:
    """A small psycopg async pool for Procrastinate's async job (sync jobs are discouraged)."""

    def __init__(self, dsn: str, owner: str) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.owner = owner
        self.pool = AsyncConnectionPool(
            dsn, min_size=CONCURRENCY, max_size=CONCURRENCY, kwargs={"autocommit": True}, open=False
        )

    async def execute_insert(self, key: str, due: float | None) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(INSERT, (key, self.owner, due))


def procrastinate_load(config: dict[str, Any]) -> dict[str, Any]:
    import procrastinate

    app, (task, _) = _procrastinate(config)

    async def go() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            if not config["n"]:
                return
            deferrer = task.configure(schedule_at=due(config))
            batch = [{"key": key} for key in keys(config["n"])]
            for i in range(0, len(batch), 1000):
                await deferrer.batch_defer_async(*batch[i : i + 1000])

    asyncio.run(go())
    return {"version": procrastinate.__version__}


def procrastinate_node(config: dict[str, Any]) -> float:
    app, (_, pool) = _procrastinate(config)
    results = _AsyncResults(config["dsn"], config["owner"])
    pool.append(results)
    spent: list[float] = []

    async def go() -> None:
        await results.pool.open(wait=True)
        async with app.open_async():
            worker = asyncio.create_task(
                app.run_worker_async(
                    concurrency=CONCURRENCY,
                    name=config["owner"],
                    install_signal_handlers=False,
                    fetch_job_polling_interval=PROCRASTINATE_POLL,
                )
            )
            await asyncio.sleep(0.5)  # let the worker listen and take its first look
            cpu = time.process_time()
            stop_file = Path(config["stop"])
            Path(f"{stop_file}.{config['owner']}.ready").touch()
            while not stop_file.exists():
                await asyncio.sleep(0.05)
            worker.cancel()  # Procrastinate's way to stop a worker task: it finishes its jobs
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            spent.append(time.process_time() - cpu)
        await results.pool.close()

    asyncio.run(go())
    return spent[0]


def procrastinate_produce(config: dict[str, Any]) -> dict[str, Any]:
    app, (task, _) = _procrastinate(config)
    threads, batch, seconds, step = _plan(config)
    counts = [0] * threads
    out: dict[str, Any] = {}

    async def one(p: int, start: float) -> None:
        end, k = start + seconds, 0
        while True:
            at = start + (k + p / threads) * step
            if k and (at >= end or time.time() >= end):  # each makes one call at least
                return
            if at > time.time():
                await asyncio.sleep(at - time.time())
            items = _items(p, k, batch)
            if batch == 1:
                await task.defer_async(key=items[0][0], due=items[0][1])
            else:
                await task.batch_defer_async(*({"key": key, "due": d} for key, d in items))
            k += 1
            counts[p] = k

    async def go() -> None:
        async with app.open_async():
            out["start"] = start = time.time()
            await asyncio.gather(*(one(p, start) for p in range(threads)))
            out["end"] = time.time()

    asyncio.run(go())
    calls = sum(counts)
    return {**out, "enqueued": calls * batch, "calls": calls}


PRODUCERS = {"tickwork": tickwork_produce, "procrastinate": procrastinate_produce}
LOADERS = {
    "tickwork": tickwork_load,
    "apscheduler": apscheduler_load,
    "procrastinate": procrastinate_load,
}
NODES = {
    "tickwork": tickwork_node,
    "apscheduler": apscheduler_node,
    "procrastinate": procrastinate_node,
}


def main(argv: list[str]) -> None:
    system, mode, config = argv[0], argv[1], json.loads(argv[2])
    _config.update(config)
    if mode == "load":
        t0 = time.time()
        out = LOADERS[system](config)
        out["seconds"] = time.time() - t0
    elif mode == "produce":
        out = PRODUCERS[system](config)
    else:
        cpu = NODES[system](config)
        for conn in _opened:
            conn.close()
        out = {"owner": config["owner"], "cpu": cpu}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    # The jobs name ``peer_node:record``: run the module's own copy, not this __main__ one
    # (its config and connections would be another set).
    from peer_node import main as _main

    _main(sys.argv[1:])
