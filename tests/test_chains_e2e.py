"""Chains end to end: ``tickwork run`` on a jobs file, and a node killed mid-chain.

Real processes on SQLite and on PostgreSQL. The daemon runs a chain extract -> load ->
report (and a failing job with one job chained on ``ok`` and one on ``any``) until the
upstream's schedule ends, and every upstream slot has caused exactly one run of each
downstream job, whose ledger entry names it. A node SIGKILLed right after an upstream's
finish committed loses nothing: the downstream run was queued in that same transaction,
and another node runs it (and what follows it) exactly once.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.test_daemon_e2e import Run, lines_of, wait_until
from tickwork._core.text import iso
from tickwork.stores import SlotRecord, Store
from tickwork.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], Callable[[], Store]]:
    """The daemon's state options, and how the test opens the same store."""
    if request.param == "sqlite":
        db = tmp_path / "state.db"
        return ["--state", str(db)], lambda: SQLiteStore(db)
    from tickwork.stores.postgres import PostgresStore

    dsn = request.getfixturevalue("fresh_database")
    return ["--database", dsn], lambda: PostgresStore(dsn)


def _by_job(store: Store) -> dict[str, list[SlotRecord]]:
    """Each job's entries of runs (not the slots given up: they never ran), oldest first."""
    out: dict[str, list[SlotRecord]] = {}
    for e in reversed(store.history(limit=1000)):  # type: ignore[attr-defined]
        if e.started is not None:
            out.setdefault(e.job_id.rpartition("/")[2], []).append(e)
    return out


def _causes(entries: list[SlotRecord], upstream: str) -> list[str]:
    return [
        f"{upstream}@{iso(e.scheduled, millis=round(e.scheduled, 3) % 1 != 0)}" for e in entries
    ]


JOBS = """\
[[job]]
name = "load"
command = ["true"]
after = ["extract"]

[[job]]
name = "extract"
command = ["true"]
every = "300ms"

[[job]]
name = "report"
command = ["true"]
after = [{job = "load", on = "any"}]

[[job]]
name = "broken"
command = ["false"]
every = "400ms"

[[job]]
name = "never"
command = ["true"]
after = ["broken"]

[[job]]
name = "cleanup"
command = ["true"]
after = [{job = "broken", on = "any"}]
"""


def test_a_chain_runs_through_the_daemon(
    where: tuple[list[str], Callable[[], Store]], tmp_path: Path
) -> None:
    state, open_store = where
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    run = Run(jobs, state, "--poll", "200ms")
    store: Any = None
    try:
        # The daemon has created the state before a run of extract ends.
        run.wait_line("extract finished", limit=60)
        store = open_store()

        def ran(name: str, n: int) -> bool:
            return len(_by_job(store).get(name, [])) >= n

        wait_until("extract and broken to run", lambda: ran("extract", 3) and ran("broken", 2))
        ids = {s.spec.kwargs["job"]: s.id for s in store.jobs()}
        for name in ("extract", "broken"):  # no more upstream slots: the chains settle
            store.pause_job(ids[name], by="test", at=time.time())

        def settled() -> dict[str, list[SlotRecord]] | None:
            if any(store.get(i).claims for i in ids.values()):
                return None  # a run going or waiting
            got = _by_job(store)
            counts = [len(got.get(j, [])) for j in ("extract", "load", "report")]
            if len(set(counts)) != 1 or len(got.get("cleanup", [])) != len(got["broken"]):
                return None
            return got

        got = wait_until("the chains to settle", settled, limit=60)
    finally:
        run.stop()  # SIGTERM, then closed
        if store is not None:
            store.close()
    assert run.proc.returncode == 0, run.text()
    extract, load, report = got["extract"], got["load"], got["report"]
    assert all(e.outcome == "ok" and e.origin == "schedule" for e in extract)
    ns = extract[0].job_id.rpartition("/")[0]
    assert [e.cause for e in load] == [f"{ns}/{c}" for c in _causes(extract, "extract")]
    assert [e.cause for e in report] == [f"{ns}/{c}" for c in _causes(load, "load")]
    assert all(e.origin == "after" and e.outcome == "ok" for e in load + report)
    assert "never" not in got  # a failed upstream runs only the jobs chained on any
    assert [e.cause for e in got["cleanup"]] == [
        f"{ns}/{c}" for c in _causes(got["broken"], "broken")
    ]
    # tickwork history shows the cause, tickwork jobs the chain.
    shown = subprocess.run(
        [sys.executable, "-m", "tickwork", "history", str(jobs), "report", *state],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "(after load@" in shown.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "tickwork", "jobs", str(jobs), *state],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    load_row = next(line for line in listed.stdout.splitlines() if line.startswith("load "))
    assert "after extract" in load_row
    assert "after load (any outcome)" in listed.stdout


def _runs(runs_db: Path) -> list[tuple[str, float]]:
    conn = sqlite3.connect(runs_db)
    try:
        return [tuple(r) for r in conn.execute("SELECT job_id, scheduled FROM runs ORDER BY seq")]
    finally:
        conn.close()


def test_a_node_killed_between_the_upstream_finish_and_the_downstream_run_loses_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, open_either_store: Callable[..., Store]
) -> None:
    store: Any = open_either_store()  # creates the schema; tells which store this is
    if isinstance(store, SQLiteStore):
        db, extra = str(tmp_path / "jobs.db"), []
    else:
        db, extra = request.getfixturevalue("pg_dsn"), [request.getfixturevalue("pg_schema")]
    runs_db = tmp_path / "runs.db"
    conn = sqlite3.connect(runs_db)
    conn.execute("CREATE TABLE runs (seq INTEGER PRIMARY KEY, job_id TEXT, scheduled REAL)")
    conn.commit()
    conn.close()
    at = repr(time.time())

    def child(mode: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.chains_child", db, str(runs_db), mode, at, *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    first = child("kill")
    first.communicate(timeout=60)
    assert first.returncode == -9  # killed by its store, right after up's finish
    assert [job for job, _ in _runs(runs_db)] == ["up"]
    down = store.get("down")
    assert [(c.origin, c.owner) for c in down.claims] == [("after", "")]  # queued, waiting
    second = child("run")  # another node (a restart is the same: a new owner)
    try:
        wait_until("down and last to run", lambda: len(_runs(runs_db)) >= 3, limit=40)
        time.sleep(0.5)  # a duplicate would show up now
    finally:
        second.terminate()
        second.communicate(timeout=60)
    runs = _runs(runs_db)
    assert [job for job, _ in runs] == ["up", "down", "last"]
    (up,) = store.history("up")
    (down_entry,) = store.history("down")
    (last,) = store.history("last")
    assert (up.outcome, down_entry.outcome, last.outcome) == ("ok", "ok", "ok")
    assert down_entry.cause == f"up@{iso(up.scheduled, millis=round(up.scheduled, 3) % 1 != 0)}"
    assert last.cause is not None and last.cause.startswith("down@")
    assert store.get("down").claims == () and store.get("last").claims == ()


def test_a_downstream_killed_mid_run_runs_again_with_at_least_once(
    where: tuple[list[str], Callable[[], Store]], tmp_path: Path
) -> None:
    # Issue 39: a chained run killed mid-run was abandoned and never ran. With
    # delivery = "at_least_once" it runs again once recovered; the default
    # (at-most-once) records it abandoned and does not repeat it.
    state, open_store = where
    starts, done = tmp_path / "starts", tmp_path / "done"
    body = f"echo $1 >> {starts}; sleep 2; echo $1 >> {done}"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f"""
[[job]]
name = "up"
command = ["true"]
in = "0s"

[[job]]
name = "again"
command = ["sh", "-c", "{body}", "sh", "again"]
after = ["up"]
delivery = "at_least_once"
kill_grace = "1s"

[[job]]
name = "once"
command = ["sh", "-c", "{body}", "sh", "once"]
after = ["up"]
kill_grace = "1s"
"""
    )
    first = Run(jobs, state)
    try:
        wait_until("both downstream runs to start", lambda: len(lines_of(starts)) >= 2, limit=60)
    finally:
        first.kill()  # SIGKILL, mid-run
    assert lines_of(done) == []
    second = Run(jobs, state)
    store: Any = None
    try:
        wait_until("the at-least-once run to end", lambda: lines_of(done) == ["again"], limit=60)
        store = open_store()
        ids = {s.spec.kwargs["job"]: s.id for s in store.jobs()}
        wait_until("no run left", lambda: not any(store.get(i).claims for i in ids.values()))
    finally:
        second.stop()
        if store is not None:
            got = {
                k: [(e.outcome, e.origin, e.attempt) for e in v] for k, v in _by_job(store).items()
            }
            store.close()
    assert sorted(lines_of(starts)) == ["again", "again", "once"]
    assert lines_of(done) == ["again"]
    assert got["again"] == [("abandoned", "after", 1), ("ok", "after", 2)]
    assert got["once"] == [("abandoned", "after", 1)]
