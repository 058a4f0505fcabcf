"""Many nodes, real processes, one state: a pool's limit holds across all of them.

Five processes run `tests.pools_node` on one SQLite file, then five on one PostgreSQL
schema: six jobs of pool ``db`` (limit 2), each due every second and taking half a
second, so the nodes race for the pool's slots all the time. Two witnesses, both
checked continuously: the marks each run writes between its claim and its finish
(never more than 2 overlap, and 2 do), and this process sampling the store's count of
held claims of the pool (never above 2). The test waits for a number of runs, not for
a time, so a loaded machine only makes it slower.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tickwork.stores import PoolLimits, Store

from . import pools_node

NODES = 5
#: Runs (ended) to see before the nodes are told to stop.
RUNS = 16
ROOT = Path(__file__).resolve().parent.parent


def overlap(marks: Path) -> tuple[int, int]:
    """(most runs going at once, runs ended) from the marks."""
    events = []
    for line in marks.read_text().splitlines():
        kind, ns, _ = line.split()
        events.append((int(ns), 0 if kind == "E" else 1))  # an end before a start at a tie
    going = most = ended = 0
    for _, start in sorted(events):
        going += 1 if start else -1
        ended += 0 if start else 1
        most = max(most, going)
    return most, ended


def race(tmp_path: Path, node_args: list[str], open_store: Callable[[], Store]) -> None:
    marks, stop = tmp_path / "marks", tmp_path / "stop"
    marks.touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.pools_node", str(marks), str(stop), *node_args],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(NODES)
    ]
    sampled: list[int] = []
    done = threading.Event()

    def sample() -> None:
        store = open_store()
        assert isinstance(store, PoolLimits)
        try:
            while not done.is_set():
                for pool in store.pools(time.time()):
                    if pool.name == "db":
                        sampled.append(pool.running)
                time.sleep(0.01)
        finally:
            store.close()

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        deadline = time.monotonic() + 90.0
        while overlap(marks)[1] < RUNS and time.monotonic() < deadline:
            assert all(n.poll() is None for n in nodes), "a node ended early"
            time.sleep(0.1)
    finally:
        stop.touch()
        errors = [n.communicate(timeout=60)[1] for n in nodes]
        done.set()
        sampler.join()
    assert [n.returncode for n in nodes] == [0] * NODES, errors
    most, ended = overlap(marks)
    assert ended >= RUNS
    assert most == pools_node.LIMIT  # never more, and the pool is used up to its limit
    assert sampled and max(sampled) <= pools_node.LIMIT
    assert pools_node.LIMIT in sampled


def test_five_nodes_on_one_sqlite_file(tmp_path: Path) -> None:
    from tickwork.stores.sqlite import SQLiteStore

    db = tmp_path / "jobs.db"
    SQLiteStore(db).close()  # created once, so the nodes only open it
    race(tmp_path, ["sqlite", str(db)], lambda: SQLiteStore(db))


def test_five_nodes_on_one_postgres_schema(tmp_path: Path, pg_dsn: str, pg_schema: str) -> None:
    from tickwork.stores.postgres import PostgresStore

    PostgresStore(pg_dsn, schema=pg_schema).close()
    race(tmp_path, ["postgres", pg_dsn, pg_schema], lambda: PostgresStore(pg_dsn, schema=pg_schema))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("S 1 a\nS 2 b\nE 3 a\nS 3 c\nE 4 b\nE 5 c\n", (2, 3)), ("S 1 a\nE 1 a\nS 1 b\n", (1, 1))],
)
def test_the_overlap_of_marks(tmp_path: Path, text: str, expected: tuple[int, int]) -> None:
    marks = tmp_path / "marks"
    marks.write_text(text)
    assert overlap(marks) == expected


# -- the same through the daemon: `tickwork run` processes on one state ---------------

#: Runs (ended) the daemons go through before they are stopped.
DAEMON_RUNS = 10
DAEMON_JOBS = """
[pool.db]
limit = 2

[defaults]
pool = "db"
grace = "1h"
{jobs}
"""
DAEMON_JOB = """
[[job]]
name = "j{i}"
shell = true
command = "echo S $(date +%s%N) $$ >> {marks}; sleep 0.5; echo E $(date +%s%N) $$ >> {marks}"
every = "1s"
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_three_daemons_keep_to_the_pool(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    from .test_daemon_e2e import Run

    marks = tmp_path / "marks"
    marks.touch()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        DAEMON_JOBS.format(jobs="".join(DAEMON_JOB.format(i=i, marks=marks) for i in range(5)))
    )
    if kind == "sqlite":
        where: Path | list[str] = tmp_path / "state.sqlite3"
    else:
        where = ["--database", request.getfixturevalue("fresh_database")]
    daemons = [Run(jobs, where) for _ in range(3)]
    try:
        deadline = time.monotonic() + 90.0
        while overlap(marks)[1] < DAEMON_RUNS and time.monotonic() < deadline:
            assert all(d.proc.poll() is None for d in daemons), [d.text() for d in daemons]
            time.sleep(0.1)
    finally:
        for d in daemons:
            d.stop()
    most, ended = overlap(marks)
    logs = "\n---\n".join(d.text() for d in daemons)
    assert ended >= DAEMON_RUNS, logs
    assert most == 2, logs
