"""``tickwork jobs``: a claim whose owner is gone is shown as lost, with when, never running.

In-process, on a SQLite state written through the store API: claims by a live owner
(this process), by a process that is not running on this host, and by an owner whose
lease has run out.
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
    text = jobs(state)
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
    local, utc = next_run.split(None, 2)[2].split(" ")
    assert local[10] == "T" and utc.startswith("(") and utc.endswith("Z)")
