"""One `DurableScheduler` node on PostgreSQL, for tests/test_durable_postgres.py.

    python -m tests.durable_pg_node CONFIG_JSON        (from the project root)

The node opens a `PostgresStore`, starts listening for changes, starts a
`DurableScheduler` (``allowed_modules=["tests.durable_pg_node"]``: the test declares the
jobs, the node only runs them), touches ``<stop>.<owner>.ready`` and runs until the file
``stop`` appears. Then it stops the scheduler and prints one JSON line: its owner, how
many runs it recorded, how many timing-loop steps it made, and whether its timing thread
was still alive.

The jobs name `record`: it writes (job id, scheduled time, claim token, owner) from
`DurableScheduler.current_claim()` into ``tw_runs``. Every run gets its own row (the
claim token is part of the key, so a retried insert after a cut commit is not counted
twice), so a slot that ran twice shows up as two rows rather than being hidden. Slots
the missed-run or overlap policy gave up (MISSED/SKIPPED events) go to ``tw_given_up``.

``skew`` (config, seconds) sets the node's wall clock off (`time.time` is replaced);
``tw_runs.server_time`` is the database's clock when the run was recorded.

``die_after`` (config) dooms the node: once it has recorded that many runs, the next
at-most-once one-shot that starts here hangs without recording (it is started in the
store: its lease must expire and it must be recorded ``abandoned``), so does the next
slot of an at-least-once recurring job (started, never recorded: it must run once
elsewhere, while the other nodes go on running the job's later slots, which must not
run again when it is recovered), and then the next at-least-once run (a one-shot or a
recurring slot) records itself and SIGKILLs the process before its `finish` (so it must
run again elsewhere).
All three are written to ``<stop>.<owner>.dying`` first, with the claims the node held
(job id, scheduled, started) at that moment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tickwork import At, DurableScheduler, EventKind, RunEvent
from tickwork.stores.postgres import PostgresStore

RUNS_DDL = (
    "CREATE TABLE IF NOT EXISTS tw_runs (job_id text NOT NULL, scheduled float8 NOT NULL,"
    " token text NOT NULL, owner text NOT NULL, recorded float8 NOT NULL,"
    " server_time float8 NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),"
    " PRIMARY KEY (job_id, scheduled, token))"
)
GIVEN_UP_DDL = (
    "CREATE TABLE IF NOT EXISTS tw_given_up (job_id text NOT NULL, scheduled float8 NOT NULL,"
    " slots int NOT NULL, kind text NOT NULL, owner text NOT NULL)"
)

_config: dict[str, Any] = {}
_local = threading.local()
_lock = threading.Lock()
_ran = 0
_doom: dict[str, str] = {}
_opened: list[psycopg.Connection[Any]] = []  # every thread's connection, for close_all


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(_config["dsn"], autocommit=True)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(_config["schema"])))
        # Only a server crash could lose a row; the tests kill clients and connections.
        conn.execute("SET synchronous_commit TO off")
        _local.conn = conn
        with _lock:
            _opened.append(conn)
    return conn


def _execute(query: str, params: tuple[Any, ...]) -> None:
    """Run one statement on this thread's connection, reconnecting if it was cut."""
    delay = 0.05
    give_up = time.monotonic() + 60
    while True:
        try:
            _connection().execute(query, params)
            return
        except psycopg.OperationalError:  # connection terminated: reconnect and retry
            _local.conn = None
            if time.monotonic() > give_up:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _insert(job_id: str, scheduled: float, token: str) -> None:
    # Keyed by token: a retry after a cut commit does not count the run twice.
    _execute(
        "INSERT INTO tw_runs VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (job_id, scheduled, token, _config["owner"], time.time()),
    )


def close_all() -> None:
    """Close the connections the jobs opened (tests running jobs in their own process)."""
    with _lock:
        conns = list(_opened)
        _opened.clear()
    for conn in conns:
        conn.close()


def record() -> None:
    """The tests' job: record this run in ``tw_runs`` (see the module docstring)."""
    global _ran
    claim = DurableScheduler.current_claim()
    assert claim is not None, "record() runs only as a durable job"
    key = f"{claim.job_id}@{claim.scheduled!r}"
    die_after = _config.get("die_after")
    doomed = die_after is not None and _ran >= die_after
    oneshot = isinstance(claim.spec.schedule, At)
    least = claim.spec.delivery == "at_least_once"
    if doomed and oneshot != least:  # an at-most-once one-shot, an at-least-once slot
        which = "held" if oneshot else "held_recurring"
        with _lock:
            hold = which not in _doom
            if hold:
                _doom[which] = key
        if hold:
            time.sleep(3600)  # started, never recorded: the SIGKILL ends it
    _insert(claim.job_id, claim.scheduled, claim.token)
    with _lock:
        _ran += 1
        if doomed and least and {"held", "held_recurring"} <= set(_doom):
            _doom["ran"] = key
            if _scheduler is None:
                _die([])
            # The run table's lock held from the snapshot to the SIGKILL: no run is
            # claimed here (and started) that the snapshot does not list.
            with _scheduler._table.lock:
                _die(_scheduler.held())


def _die(held: list[tuple[str, float, bool]]) -> None:
    dying = {**_doom, "claims": held}
    Path(f"{_config['stop']}.{_config['owner']}.dying").write_text(json.dumps(dying))
    os.kill(os.getpid(), signal.SIGKILL)


def hang_on(owner: str) -> None:
    """Record this run; then, on node ``owner`` only, wait for ``<stop>.release``.

    The failover tests: the run is started and recorded on ``owner``, which is then
    killed, cut off or stopped while it is held; elsewhere the run ends at once.
    """
    claim = DurableScheduler.current_claim()
    assert claim is not None, "hang_on() runs only as a durable job"
    _insert(claim.job_id, claim.scheduled, claim.token)
    if _config["owner"] == owner:
        release = Path(f"{_config['stop']}.release")
        while not release.exists():
            time.sleep(0.05)


def given_up(event: RunEvent) -> None:
    """Listener: note slots the policy gave up (``tw_given_up``), so none vanishes unseen."""
    if event.kind in (EventKind.SKIPPED, EventKind.MISSED) and event.job_id is not None:
        _execute(
            "INSERT INTO tw_given_up VALUES (%s, %s, %s, %s, %s)",
            (event.job_id, event.scheduled, event.missed, event.kind.name, _config["owner"]),
        )


def sleep_then_record(seconds: float) -> None:
    """A long job: sleep ``seconds``, then `record`."""
    time.sleep(seconds)
    record()


class _CountingScheduler(DurableScheduler):
    """Counts the timing loop's steps, to show an idle node does not poll tightly."""

    steps = 0

    def _step(self) -> float:
        self.steps += 1
        return super()._step()

    def held(self) -> list[tuple[str, float, bool]]:
        """The claims this node holds: (job id, scheduled, started)."""
        with self._table.lock:
            return [
                (r.claim.job_id, r.claim.scheduled, r.started) for r in self._table.runs.values()
            ]


_scheduler: _CountingScheduler | None = None


def main(config: dict[str, Any]) -> None:
    """Run one node until the stop file appears; print a JSON summary."""
    _config.update(config)
    skew = float(config.get("skew", 0.0))
    if skew:
        # This host's clock is off by ``skew`` seconds: everything in the process that
        # reads the wall clock sees it so (tickwork reads `time.time` at each call).
        real = time.time
        time.time = lambda: real() + skew
    logging.basicConfig(
        level=logging.INFO if config.get("verbose") else logging.WARNING,
        format="%(asctime)s %(threadName)s %(name)s: %(message)s",
    )
    store = PostgresStore(config["dsn"], schema=config["schema"])
    store.wait_for_change(0)  # LISTEN before "ready": no change after it is missed
    ds = _CountingScheduler(
        store,
        owner=config["owner"],
        lease=config.get("lease", 5.0),
        poll=config.get("poll"),
        max_workers=config.get("max_workers", 4),
        allowed_modules=["tests.durable_pg_node"],
    )
    ds.add_listener(given_up)
    global _scheduler
    _scheduler = ds
    ds.start()
    Path(f"{config['stop']}.{config['owner']}.ready").touch()
    stop = Path(config["stop"])
    while not stop.exists():
        time.sleep(0.05)
    alive = ds._thread is not None and ds._thread.is_alive()
    ds.stop(timeout=30)
    store.close()
    print(json.dumps({"owner": config["owner"], "ran": _ran, "steps": ds.steps, "alive": alive}))


if __name__ == "__main__":
    # Run the module's own copy (tests.durable_pg_node), whose `record` the jobs name,
    # not this __main__ copy.
    from tests.durable_pg_node import main as _main

    _main(json.loads(sys.argv[1]))
