"""One scheduler node for the multi-process PostgreSQL tests, run as a separate process.

    python tests/pg_node.py CONFIG_JSON

The node loops claim -> start -> run -> finish on a `PostgresStore` until the stop file
appears. "Running" a job is `record`: one row in ``tw_results`` keyed by (job id,
scheduled time, claim token), committed in its own transaction before `finish`, so a
duplicate run shows up as two tokens for one (job id, scheduled time).

The loop is `run_loop`, kept apart from the job (`record`) and the policy (`advance`) so
it can be swapped for the durable scheduler once that exists: the test only needs the
processes to run the jobs in the store, record them, and stop on the stop file.

``die_after`` makes the node SIGKILL itself mid-run: once it has run that many jobs, on
its next batch of at least 3 claims it starts the first two thirds, runs the first third,
writes what it did to ``<stop file>.<owner>.dying`` and kills itself before any `finish`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tickwork import Every
from tickwork.stores import Claim, JobState, StoreError
from tickwork.stores.postgres import PostgresStore

RESULTS_DDL = (
    "CREATE TABLE IF NOT EXISTS tw_results (job_id text NOT NULL, scheduled float8 NOT NULL,"
    " token text NOT NULL, owner text NOT NULL, started float8 NOT NULL,"
    " PRIMARY KEY (job_id, scheduled, token))"
)


def advance(state: JobState, now: float) -> float | None:
    """The tests' missed-run policy: one-shots end; recurring jobs run every grid slot.

    Every slot runs (none is skipped when the nodes fall behind), up to the job's
    ``until`` keyword argument, so "every slot exactly once" is checkable.
    """
    schedule = state.spec.schedule
    if not isinstance(schedule, Every) or state.next_run is None:
        return None
    following = state.next_run + schedule.interval
    return following if following < float(state.spec.kwargs["until"]) else None


def record(**kwargs: Any) -> None:
    """The job function the test specs name (``tests.pg_node:record``); importable.

    The store-level loop runs `Recorder` instead, which knows the claim. When the durable
    scheduler replaces `run_loop`, this function must record (job id, scheduled time,
    claim token or another per-run id) in tw_results from whatever run context the
    scheduler offers.
    """


class Recorder:
    """The job: record the run in tw_results on its own connection, reconnecting if cut."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        self.conn: psycopg.Connection[Any] | None = None

    def __call__(self, claim: Claim, started: float) -> None:
        delay = 0.05
        while True:
            try:
                if self.conn is None or self.conn.closed or self.conn.broken:
                    self.conn = psycopg.connect(self.dsn, autocommit=True)
                    self.conn.execute(
                        psycopg.sql.SQL("SET search_path TO {}").format(
                            psycopg.sql.Identifier(self.schema)
                        )
                    )
                # Idempotent by token: a retry after a cut commit cannot count twice.
                self.conn.execute(
                    "INSERT INTO tw_results VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (claim.job_id, claim.scheduled, claim.token, claim.owner, started),
                )
                return
            except psycopg.OperationalError:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)


def run_loop(
    store: PostgresStore,
    *,
    owner: str,
    job: Callable[[Claim, float], None],
    stop: Path,
    lease: float,
    batch: int,
    poll: float = 1.0,
    die_after: int | None = None,
) -> int:
    """Claim, start, run and finish due jobs until ``stop`` exists; how many ran."""
    ran = 0
    while not stop.exists():
        try:
            claims = store.claim_due(
                time.time(), owner=owner, lease_seconds=lease, limit=batch, advance=advance
            )
            if not claims:
                wakeup = store.next_wakeup()
                timeout = poll if wakeup is None else min(poll, max(0.0, wakeup - time.time()))
                if timeout > 0:
                    store.wait_for_change(timeout)
                continue
            if die_after is not None and ran >= die_after and len(claims) >= 3:
                die_mid_batch(store, claims, job, stop, owner)
            for c in claims:
                started = time.time()
                if not store.start(c, started=started):
                    continue
                job(c, started)
                ran += 1
                store.finish(c, outcome="ok", ended=time.time())
        except StoreError as exc:  # never crash: the store gave up reconnecting for now
            logging.getLogger("pg_node").warning("%s: %s", owner, exc)
            time.sleep(0.5)
    return ran


def die_mid_batch(
    store: PostgresStore,
    claims: list[Claim],
    job: Callable[[Claim, float], None],
    stop: Path,
    owner: str,
) -> None:
    """Start 2/3 of the batch, run 1/3, tell the test which, and SIGKILL this process."""
    n = len(claims)
    started_n, ran_n = max(2, 2 * n // 3), max(1, n // 3)
    phases = {}
    for i, c in enumerate(claims):
        phase = "claimed"
        if i < started_n and store.start(c, started=time.time()):
            phase = "started"
            if i < ran_n:
                job(c, time.time())
                phase = "ran"
        phases[f"{c.job_id}@{c.scheduled!r}"] = phase
    Path(f"{stop}.{owner}.dying").write_text(json.dumps(phases))
    os.kill(os.getpid(), signal.SIGKILL)


def main(config: dict[str, Any]) -> None:
    logging.basicConfig(level=logging.ERROR)
    store = PostgresStore(config["dsn"], schema=config["schema"])
    ready = Path(f"{config['stop']}.{config['owner']}.ready")
    store.wait_for_change(0)  # start listening before the first look at the store
    ready.touch()
    ran = run_loop(
        store,
        owner=config["owner"],
        job=Recorder(config["dsn"], config["schema"]),
        stop=Path(config["stop"]),
        lease=config.get("lease", 10.0),
        batch=config.get("batch", 20),
        die_after=config.get("die_after"),
    )
    store.close()
    print(json.dumps({"owner": config["owner"], "ran": ran}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
