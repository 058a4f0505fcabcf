"""``tickwork jobs``: the table, the stanzas (``--long``) and the JSON of what the state says.

On SQLite states written through the store API. Lost claims: claims by a live owner
(this process), by a process that is not running on this host, and by an owner whose
lease has run out (in-process). The table and ``--long``: through the real CLI
(``python -m tickwork jobs``) in two time zones.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tickwork import Every
from tickwork.__main__ import build_parser
from tickwork._cli.jobs import run_jobs
from tickwork._daemon.declare import ENTRY_POINT
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

HOST = socket.gethostname()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def claim(store: SQLiteStore, job: str, owner: str, *, now: float, lease: float) -> None:
    store.upsert(JobSpec(f"jobs/{job}", ENTRY_POINT, Every(60), kwargs={"job": job}), now - 1)
    [c] = [
        c
        for c in store.claim_due(
            now, owner=owner, lease_seconds=lease, limit=10, advance=lambda s, at: at + 60
        )
        if c.job_id == f"jobs/{job}"
    ]
    assert store.start(c, started=now)


def jobs(state: Path, *extra: str) -> str:
    args = build_parser().parse_args(["jobs", "--state", str(state), *extra])
    out = io.StringIO()
    assert run_jobs(args, out=out, err=io.StringIO()) == 0
    return out.getvalue()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite3"
    now = time.time()
    store = SQLiteStore(path)
    try:
        claim(store, "alive", f"{HOST}:{os.getpid()}:abcd1234", now=now, lease=300)
        claim(store, "dead", f"{HOST}:{dead_pid()}:abcd1234", now=now, lease=300)
        claim(store, "expired", "elsewhere:42:abcd1234", now=now - 100, lease=30)
    finally:
        store.close()
    return path


def test_json_shows_lost_claims_with_when_and_host_pid_owners(state: Path) -> None:
    rows: dict[str, dict[str, Any]] = {r["job"]: r for r in json.loads(jobs(state, "--json"))}
    assert rows["alive"]["running"] == 1 and rows["alive"]["lost"] == []
    assert rows["dead"]["running"] == 0
    [dead] = rows["dead"]["lost"]
    assert dead["owner"].startswith(f"{HOST}:") and dead["owner"].count(":") == 1
    assert "not running on this host" in dead["why"]
    assert dead["lease_until"].endswith("Z") and dead["since"] is None
    assert rows["expired"]["running"] == 0
    [expired] = rows["expired"]["lost"]
    assert expired["owner"] == "elsewhere:42"
    assert expired["since"] == expired["lease_until"]
    assert f"its lease ran out at {expired['lease_until']}" == expired["why"]


def test_text_marks_lost_not_running_and_times_are_iso_8601(state: Path) -> None:
    text = jobs(state, "--long")
    heads = [line for line in text.splitlines() if not line.startswith(" ")]
    assert "alive [running now]" in heads
    assert "dead [lost]" in heads and "expired [lost]" in heads
    lost = [line for line in text.splitlines() if line.startswith("  lost ")]
    assert len(lost) == 2
    assert any("its owner elsewhere:42 is gone (its lease ran out at 20" in line for line in lost)
    assert any(f"its owner {HOST}:" in line and "not running on this host" in line for line in lost)
    running = next(line for line in text.splitlines() if line.startswith("  running "))
    assert f"by {HOST}:{os.getpid()}" in running and "abcd1234" not in text
    next_run = next(line for line in text.splitlines() if line.startswith("  next run "))
    # 2026-12-02T18:00:10+01:00 (2026-12-02T17:00:10Z)
    when = next_run.split(None, 2)[2]
    if time.localtime().tm_gmtoff:  # local time, then UTC
        local, utc = when.split(" ")
        assert local[10] == "T" and utc.startswith("(") and utc.endswith("Z)")
    else:  # local time is UTC: once
        assert when[10] == "T" and when.endswith("Z") and " " not in when


# -- the table and --long, through the real CLI ----------------------------------------


@pytest.fixture
def views(tmp_path: Path) -> Path:
    """backup: ok, then failed 3 times; report: paused, its next run past; sync: 4 waiting."""
    path = tmp_path / "v.sqlite3"
    now = time.time()
    with SQLiteStore(path) as store:

        def declare(name: str, next_run: float, every: float = 60, **kw: Any) -> None:
            spec = JobSpec(f"jobs/{name}", ENTRY_POINT, Every(every), kwargs={"job": name}, **kw)
            store.upsert(spec, next_run)

        declare("backup", now - 300)
        for k, outcome in enumerate(["ok", "failed", "failed", "failed"]):
            at = now - 300 + 60 * k
            [c] = store.claim_due(
                at, owner="web1:4242:ab12", lease_seconds=30, limit=1,
                advance=lambda s, a: a + 60,
            )  # fmt: skip
            assert store.start(c, started=at + 0.5)
            assert store.finish(c, outcome=outcome, ended=at + 1.5)  # type: ignore[arg-type]
        declare("report", now - 600)
        store.pause_job("jobs/report", by="ana@ops", at=now - 60, note="INC-7")
        declare("sync", now - 240, overlap="queue")  # its first slot, before the backfill
        declare("sync", now + 3600, every=3600, overlap="queue")  # re-declared: next in 1 h
        assert len(store.backfill_job("jobs/sync", [now - 180, now - 120, now - 60],
                                      by="ops", at=now)) == 3  # fmt: skip
        assert store.trigger_job("jobs/sync", by="ops", at=now) == "queued"
    return path


def cli(*args: str, tz: str) -> str:
    """``tickwork jobs`` in a process of its own, forked warm (tests/forked.py)."""
    proc = forked.tickwork("jobs", *args, timeout=60, env={**os.environ, "TZ": tz})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def columns(header: str) -> list[int]:
    return [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]


def test_the_table_has_one_aligned_line_a_job(views: Path) -> None:
    lines = cli("--state", str(views), tz="UTC").splitlines()
    header, *rows = lines[: lines.index("")]
    assert header.split() == [
        "JOB", "SCHEDULE", "NEXT", "LEFT", "LAST", "PASSED", "OUTCOME", "STREAK", "NOTES"
    ]  # fmt: skip
    assert lines[-1] == "3 jobs listed; --long for details."
    starts = columns(header)
    by_job = {row.split()[0]: row for row in rows}
    assert sorted(by_job) == ["backup", "report", "sync"]
    for row in rows:  # every cell starts under its heading, after two spaces at least
        for i, start in enumerate(starts):
            assert row[start] != " " and (i == 0 or row[start - 2 : start] == "  "), (row, i)
    # Each column as wide as its widest cell: some line fills it up to the gap.
    for i, start in enumerate(starts[1:]):
        assert any(line[start - 3] != " " for line in [header, *rows]), i

    def cell(job: str, column: str) -> str:
        i = header.split().index(column)
        row = by_job[job]
        end = starts[i + 1] if i + 1 < len(starts) else len(row)
        return row[starts[i] : end].strip()

    assert cell("backup", "STREAK") == "3 failed" and cell("backup", "OUTCOME") == "failed"
    assert cell("backup", "SCHEDULE") == "every 1 minute"
    assert cell("backup", "PASSED").endswith(" ago")
    assert cell("report", "LEFT") == "held while paused" and cell("report", "NOTES") == "paused"
    assert cell("sync", "NOTES") == "4 waiting" and cell("sync", "LEFT") in ("in 60 min", "in 1 h")
    # Local time is UTC here: each time is shown once, named.
    nxt = cell("sync", "NEXT")
    assert nxt.endswith(" UTC") and nxt.count(":") == 2 and "Z" not in nxt


def test_the_table_shows_local_time_where_it_is_not_utc(views: Path) -> None:
    text = cli("--state", str(views), tz="Europe/Paris")
    assert " CET " in text or " CEST " in text
    assert " UTC " not in text and "Z " not in text


def test_long_shows_each_job_and_a_paused_jobs_next_run_is_held(views: Path) -> None:
    text = cli("--state", str(views), "--long", tz="UTC")
    report = text.split("report [paused]\n", 1)[1].split("\nsync", 1)[0]
    [next_run] = [line for line in report.splitlines() if line.startswith("  next run  ")]
    # 2026-12-02T17:00:10Z, held while paused: once, as local time is UTC
    assert next_run.endswith("Z, held while paused") and "(" not in next_run
    assert "  failing   3 run(s) in a row" in text
    assert "  waiting   3 backfill run(s), to start in order" in text
    assert "  waiting   1 manual run(s), to start in order" in text
    paris = cli("--state", str(views), "--long", tz="Europe/Paris")
    report = paris.split("report [paused]\n", 1)[1].split("\nsync", 1)[0]
    [next_run] = [line for line in report.splitlines() if line.startswith("  next run  ")]
    assert next_run.endswith("Z), held while paused") and "+0" in next_run  # both times


def test_json_adds_the_waiting_runs(views: Path) -> None:
    rows = {r["job"]: r for r in json.loads(cli("--state", str(views), "--json", tz="UTC"))}
    assert rows["sync"]["waiting_runs"] == 4 and rows["sync"]["waiting"] == {
        "backfill": 3, "manual": 1
    }  # fmt: skip
    assert rows["backup"]["waiting_runs"] == 0 and rows["backup"]["consecutive_failures"] == 3
    assert rows["report"]["paused"] is True


def test_long_and_json_are_one_or_the_other(views: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", "jobs", "--state", str(views), "--long", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_many_jobs_are_listed_a_page_at_a_time_searched_and_filtered(tmp_path: Path) -> None:
    path = tmp_path / "many.sqlite3"
    now = time.time()
    with SQLiteStore(path) as store:
        for i in range(150):
            name = f"sync-{i:03d}"
            store.upsert(
                JobSpec(f"jobs/{name}", ENTRY_POINT, Every(60), kwargs={"job": name}), now + 60
            )
        store.set_paused("jobs/sync-007", True)
    args = build_parser().parse_args(["jobs", "--state", str(path), "--json"])
    out, err = io.StringIO(), io.StringIO()
    assert run_jobs(args, out=out, err=err) == 0
    rows = json.loads(out.getvalue())
    assert [r["job"] for r in rows] == [f"sync-{i:03d}" for i in range(100)]  # the default
    assert "100 of 150 jobs listed; --offset 100 for the next" in err.getvalue()
    rest = json.loads(jobs(path, "--json", "--offset", "100", "--limit", "0"))
    assert len(rest) == 50 and rest[0]["job"] == "sync-100"
    assert [r["job"] for r in json.loads(jobs(path, "--json", "--only", "paused"))] == ["sync-007"]
    table = jobs(path, "--search", "SYNC-14")
    assert table.count("sync-14") == 10 and "10 jobs listed" in table
    bad = io.StringIO()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["jobs", "--state", str(path), "--only", "lost"])
    args = build_parser().parse_args(["jobs", "--state", str(path), "--limit", "5000"])
    assert run_jobs(args, out=io.StringIO(), err=bad) == 2
    assert "--limit must be at most 1,000 (0: all), got 5000" in bad.getvalue()
