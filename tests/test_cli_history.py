"""``tickwork history`` and the ledger summary of ``tickwork jobs``, in-process.

The state is a SQLite file written through the store API, as the daemon writes it
(job ids ``<namespace>/<name>``, the daemon's entry point as the function).
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tickwork import Every
from tickwork.__main__ import build_parser
from tickwork._cli.history import parse_since, run_history
from tickwork._cli.jobs import run_jobs
from tickwork._daemon.declare import ENTRY_POINT
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def grid(state: object, at: float) -> float:
    return at + 60


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Two daemon jobs: backup ok, ok, failed, failed; report skipped three slots."""
    path = tmp_path / "s.sqlite3"
    with SQLiteStore(path) as store:
        for name in ("backup", "report"):
            spec = JobSpec(f"jobs/{name}", ENTRY_POINT, Every(60), kwargs={"job": name})
            store.upsert(spec, T0)
        outcomes = ["ok", "ok", "failed", "failed"]
        for k, outcome in enumerate(outcomes):
            now = T0 + 60 * k
            for c in store.claim_due(
                now, owner="web1:4242:ab12", lease_seconds=30, limit=10, advance=grid
            ):
                if c.job_id == "jobs/backup":
                    assert store.start(c, started=now + 0.25)
                    error = "Traceback...\nOSError: disk full" if outcome == "failed" else None
                    assert store.finish(
                        c,
                        outcome=outcome,  # type: ignore[arg-type]
                        ended=now + 1.25,
                        error=error,
                    )
                else:
                    assert store.finish(c, outcome="skipped", ended=now)
    return path


def history(state: Path, *extra: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["history", "--state", str(state), *extra])
    out, err = io.StringIO(), io.StringIO()
    return run_history(args, out=out, err=err), out.getvalue(), err.getvalue()


def test_text_lists_every_slot_newest_first(state: Path) -> None:
    code, out, _ = history(state)
    assert code == 0
    lines = [line for line in out.splitlines() if not line.startswith("    ")]
    assert len(lines) == 8
    assert lines[0].startswith("2027-01-15T08:03:00Z  ")
    backup = [line for line in lines if "  backup  " in line]
    assert backup[0] == (
        "2027-01-15T08:03:00Z  backup  failed  late 0.250s  took 1.000s  on web1:4242"
    )
    assert "    OSError: disk full" in out  # the error's last line under a failure


def test_name_outcome_since_and_limit_filter(state: Path) -> None:
    _, out, _ = history(state, "backup", "--outcome", "ok")
    assert out.count("  backup  ok  ") == 2 and "report" not in out
    _, out, _ = history(state, "report", "--since", "2027-01-15T08:02:00Z")
    assert [line.split("  ")[0] for line in out.splitlines()] == [
        "2027-01-15T08:03:00Z",
        "2027-01-15T08:02:00Z",
    ]
    _, out, _ = history(state, "--limit", "1")
    assert len(out.splitlines()) <= 2
    code, out, err = history(state, "nobody")
    assert (code, out) == (1, "")
    assert "no job 'nobody' in the state" in err


def test_json_has_iso_times_names_and_ids(state: Path) -> None:
    _, out, _ = history(state, "backup", "--json", "--limit", "1")
    (entry,) = json.loads(out)
    assert entry["job"] == "backup" and entry["id"] == "jobs/backup"
    assert entry["scheduled"] == "2027-01-15T08:03:00.000Z"
    assert entry["started"] == "2027-01-15T08:03:00.250Z"
    assert entry["outcome"] == "failed" and entry["node"] == "web1:4242:ab12"
    assert entry["lateness_seconds"] == pytest.approx(0.25)
    assert entry["duration_seconds"] == pytest.approx(1.0)


def test_since_takes_a_duration_or_a_date_time() -> None:
    now = time.time()
    assert parse_since("2h", now) == pytest.approx(now - 7200)
    assert parse_since("2027-01-15T08:00:00Z") == T0
    assert parse_since("2027-01-15T09:00:00+01:00") == T0
    local = datetime(2027, 1, 15, 8, 0).astimezone()  # no offset: local time
    assert parse_since("2027-01-15T08:00") == local.timestamp()
    with pytest.raises(argparse.ArgumentTypeError, match="got 'yesterday'"):
        parse_since("yesterday")


def test_bad_options_and_missing_state_are_clear(tmp_path: Path, state: Path) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["history", "--outcome", "fine", "--state", str(state)])
    args = build_parser().parse_args(["history"])
    err = io.StringIO()
    assert run_history(args, out=io.StringIO(), err=err) == 2
    assert "give the jobs file (FILE or -f FILE), --state PATH or --database DSN" in err.getvalue()
    code, _, err_text = history(tmp_path / "none.sqlite3")
    assert code == 1 and "no state at" in err_text


def test_jobs_shows_last_success_and_the_failure_streak(state: Path) -> None:
    args = build_parser().parse_args(["jobs", "--state", str(state), "--json"])
    out = io.StringIO()
    assert run_jobs(args, out=out, err=io.StringIO()) == 0
    rows = {row["job"]: row for row in json.loads(out.getvalue())}
    assert rows["backup"]["consecutive_failures"] == 2
    assert rows["backup"]["last_success"] == "2027-01-15T08:01:01.250Z"
    assert rows["backup"]["next_run"] is not None
    assert rows["report"]["consecutive_failures"] == 0
    assert rows["report"]["last_success"] is None
    args = build_parser().parse_args(["jobs", "--state", str(state), "--long"])
    out = io.StringIO()
    assert run_jobs(args, out=out, err=io.StringIO()) == 0
    text = out.getvalue()
    assert "  failing   2 run(s) in a row" in text
    last_ok = next(line for line in text.splitlines() if line.startswith("  last ok   20"))
    assert last_ok.endswith(("(2027-01-15T08:01:01Z)", " 2027-01-15T08:01:01Z"))


def backfilled(state: Path) -> None:
    """Backfill backup's slot due an hour before T0, run and record it last of all.

    The job is made one declared before stores kept its first slot, whose backfills reach
    back as far as asked (a job's own first slot would clip this one).
    """
    with sqlite3.connect(state) as db:
        db.execute("UPDATE jobs SET first_slot = NULL WHERE id = 'jobs/backup'")
    db.close()
    with SQLiteStore(state) as store:
        at = T0 + 200
        assert store.backfill_job("jobs/backup", [T0 - 3600], by="ops@x", at=at) == [T0 - 3600]
        [c] = [
            c
            for c in store.claim_due(
                at, owner="web1:4242:ab12", lease_seconds=30, limit=10, advance=grid
            )
            if c.origin == "backfill"
        ]
        assert store.start(c, started=at)
        assert store.finish(c, outcome="ok", ended=at + 5)


def test_newest_first_means_the_newest_due_time(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot recorded last for an old due time is listed under that time, not on top."""
    backfilled(state)
    _, out, _ = history(state, "backup", "--outcome", "ok")
    assert [line.split("  ")[0] for line in out.splitlines()] == [
        "2027-01-15T08:01:00Z",
        "2027-01-15T08:00:00Z",
        "2027-01-15T07:00:00Z",  # the backfilled slot, recorded last
    ]
    # --limit keeps the newest due times, whatever order the ledger was written in,
    # also when the entries take several pages to read.
    monkeypatch.setattr("tickwork._daemon.web.joblist.PAGE", 2)
    _, out, _ = history(state, "backup", "--outcome", "ok", "--limit", "2")
    assert [line.split("  ")[0] for line in out.splitlines()] == [
        "2027-01-15T08:01:00Z",
        "2027-01-15T08:00:00Z",
    ]
    _, out, _ = history(state, "--json", "--limit", "3")
    due = [e["scheduled"] for e in json.loads(out) if e["kind"] == "slot"]
    assert due == sorted(due, reverse=True) and "2027-01-15T07:00:00.000Z" not in due


def test_an_unknown_job_is_an_error_that_suggests_names(state: Path, tmp_path: Path) -> None:
    code, out, err = history(state, "bakup")
    assert (code, out) == (1, "")
    assert err == (
        f"tickwork history: no job 'bakup' in the state ({state}); did you mean 'backup'?\n"
    )
    # A job declared in the file but not run yet exists: it has no entries, that is all.
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "fresh"\nevery = "1h"\ncommand = ["true"]\n')
    code, out, _ = history(state, "fresh", "-f", str(jobs), "--namespace", "jobs")
    assert (code, out) == (0, "no entries\n")
    code, _, err = history(state, "frsh", "-f", str(jobs), "--namespace", "jobs")
    assert code == 1 and "did you mean 'fresh'?" in err
    # A job that exists with a filter that matches nothing is not an error.
    code, out, _ = history(state, "report", "--outcome", "failed")
    assert (code, out) == (0, "no entries\n")


def test_history_through_the_command_line(state: Path) -> None:
    """The real CLI: due-time order, and an unknown job exits non-zero naming it."""
    backfilled(state)

    def tickwork(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tickwork", "history", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = tickwork("backup", "--state", str(state), "--outcome", "ok")
    assert done.returncode == 0, done.stderr
    assert [line.split("  ")[0] for line in done.stdout.splitlines()][-1] == (
        "2027-01-15T07:00:00Z"
    )
    done = tickwork("--state", str(state), "reprot")
    assert done.returncode == 1 and done.stdout == ""
    assert "no job 'reprot'" in done.stderr and "did you mean 'report'?" in done.stderr
    assert "due time" in tickwork("--help").stdout
