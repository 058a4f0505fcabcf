"""Calendars, ``H`` and stable jitter end to end: real ``tickwork run`` processes.

One jobs file, run at the same time on a SQLite file and on a fresh PostgreSQL database
(the two daemons side by side keep the file fast), then both daemons restarted:

- a job every second whose ``[calendar.NAME]`` excludes today and tomorrow (by weekday,
  and by a date range on a per-second cron) never runs, while one whose calendar excludes
  nothing near runs again and again; ``tickwork jobs`` and ``tickwork next --file F --job
  NAME`` show the next run at midnight on the day after tomorrow (two excluded days, so a
  test that crosses midnight expects the same day);
- two jobs on ``H/3 * * * * *`` run only on their own second of minute mod 3, the one
  ``tickwork next`` and the library print for their names, before and after the restart;
- a job with ``stable_jitter = true`` waits the same hashed offset after every claim.

Only lower bounds on times (a loaded machine makes runs late, never early).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.test_daemon_e2e import Run, wait_until
from tickwork import Cron
from tickwork._core.spread import stable_fraction
from tickwork.stores import SlotRecord, Store
from tickwork.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 90.0  # generous: both daemons share two loaded cores

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SPREAD = ("spread-a", "spread-b")
JITTER = 0.6
PULSE = "pulse"  # hashes high into [0, jitter): a fresh random draw would fall below it
SLACK = 0.05  # clock readings' rounding (a fresh draw passes a run with chance 0.11)

JOBS = """\
[calendar.closed]
weekdays = ["{day0}", "{day1}"]

[calendar.shutdown]
dates = ["{date0}..{date1}"]

[calendar.far]
dates = ["2001-01-01"]

[[job]]
name = "closed-every"
command = ["true"]
every = "1s"
timezone = "UTC"
calendar = "closed"

[[job]]
name = "closed-cron"
command = ["true"]
cron = "* * * * * *"
timezone = "UTC"
calendar = "shutdown"

[[job]]
name = "open"
command = ["true"]
every = "1s"
timezone = "UTC"
calendar = "far"

[[job]]
name = "spread-a"
command = ["true"]
cron = "H/3 * * * * *"
timezone = "UTC"

[[job]]
name = "spread-b"
command = ["true"]
cron = "H/3 * * * * *"
timezone = "UTC"

[[job]]
name = "pulse"
command = ["true"]
every = "1s"
jitter = "600ms"
stable_jitter = true
"""


def _cli(*args: str) -> str:
    done = forked.tickwork(*args, timeout=60, cwd=ROOT)  # forked warm (tests/forked.py)
    assert done.returncode == 0, f"tickwork {' '.join(args)}: {done.stderr}"
    return done.stdout


def _next_slots(jobs: Path, name: str) -> list[datetime]:
    """What ``tickwork next --file F --job NAME`` prints, as instants."""
    out = _cli("next", "--file", str(jobs), "--job", name)
    return [datetime.fromisoformat(line.split()[0]) for line in out.splitlines() if line[:1] != "#"]


def _by_job(store: Store) -> dict[str, list[SlotRecord]]:
    """Each job's ledger entries, oldest first."""
    out: dict[str, list[SlotRecord]] = {}
    for e in reversed(store.history(limit=1000)):  # type: ignore[attr-defined]
        out.setdefault(e.job_id.rpartition("/")[2], []).append(e)
    return out


def _ran(entries: list[SlotRecord]) -> list[SlotRecord]:
    return [e for e in entries if e.started is not None]


def _ran_after(entries: list[SlotRecord], when: float) -> bool:
    """Some entry started after ``when`` (by the daemon started after that stop)."""
    return any(e.started is not None and e.started > when for e in entries)


class Side:
    """One store: its daemon (restarted once) and the test's own connection to it."""

    def __init__(self, label: str, state: list[str], open_store: Callable[[], Store]) -> None:
        self.label, self.state, self.open_store = label, state, open_store
        self.run: Run | None = None
        self.store: Any = None
        self.stops: list[float] = []  # when each daemon had stopped
        self.logs: list[str] = []

    def start(self, jobs: Path) -> None:
        self.run = Run(jobs, self.state, "--poll", "200ms")

    def stop(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.stop()
            self.logs.append(run.text())
            assert run.proc.returncode == 0, f"{self.label}: {run.text()}"
        self.stops.append(time.time())

    def entries(self) -> dict[str, list[SlotRecord]]:
        if self.store is None:
            if self.run is None or not any(" open started" in x for x in self.run.lines):
                return {}  # opened once the daemon has made the state and run a job
            self.store = self.open_store()
        return _by_job(self.store)

    def warmed_up(self) -> bool:
        got = self.entries()
        ok = [e for e in got.get("open", []) if e.outcome == "ok"]
        return (
            len(ok) >= 4
            and all(len(_ran(got.get(name, []))) >= 2 for name in SPREAD)
            and len(_ran(got.get(PULSE, []))) >= 3
        )

    def restarted(self) -> bool:
        got = self.entries()
        return all(_ran_after(got.get(n, []), self.stops[0]) for n in SPREAD)


@pytest.fixture
def sides(tmp_path: Path, fresh_database: str) -> Any:
    from tickwork.stores.postgres import PostgresStore

    db = tmp_path / "state.db"
    both = [
        Side("sqlite", ["--state", str(db)], lambda: SQLiteStore(db)),
        Side("postgres", ["--database", fresh_database], lambda: PostgresStore(fresh_database)),
    ]
    yield both
    for side in both:
        if side.run is not None:
            side.run.kill()
        if side.store is not None:
            side.store.close()


def test_calendars_h_and_stable_jitter_through_the_daemon_on_both_stores(
    sides: list[Side], tmp_path: Path
) -> None:
    today = datetime.now(UTC).date()
    after = today + timedelta(days=2)  # the first day neither calendar excludes
    days = [(today + timedelta(days=i)).strftime("%a").lower() for i in (0, 1)]
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        JOBS.format(day0=days[0], day1=days[1], date0=today, date1=today + timedelta(days=1))
    )
    for side in sides:
        side.start(jobs)
    # Meanwhile: what tickwork next shows, and the library's hash of the same names.
    (first, *_) = _next_slots(jobs, "closed-cron")
    assert first == datetime.combine(after, datetime.min.time(), UTC)
    residue = {}
    for name in SPREAD:
        shown = _next_slots(jobs, name)
        assert len({t.second % 3 for t in shown}) == 1, shown
        residue[name] = shown[0].second % 3
        lib = Cron("H/3 * * * * *", tz="UTC", seed=name).expression
        assert lib.next_after(shown[0] - timedelta(seconds=3)) == shown[0]
    assert residue["spread-a"] != residue["spread-b"]  # the names hash apart

    wait_until("each daemon to run its jobs", lambda: all(s.warmed_up() for s in sides), LIMIT)
    for side in sides:  # a new process (a new node): the same hashes
        side.stop()
        side.start(jobs)
    wait_until("the restarted daemons to run H", lambda: all(s.restarted() for s in sides), LIMIT)
    for side in sides:
        side.stop()

    for side in sides:
        got = side.entries()
        where = f"{side.label}:\n" + "\n".join(side.logs)
        assert "closed-every" not in got and "closed-cron" not in got, where  # not even skips
        assert len([e for e in got["open"] if e.outcome == "ok"]) >= 4, where
        for name in SPREAD:
            assert _ran_after(got[name], side.stops[0]), where
            slots = [e.scheduled for e in got[name]]  # those run and any given up
            assert all(s == int(s) and int(s) % 60 % 3 == residue[name] for s in slots), (
                name, slots, residue[name], where,
            )  # fmt: skip
        offset = stable_fraction(PULSE) * JITTER
        assert offset > 0.9 * JITTER  # the name was chosen so
        pulses = _ran(got[PULSE])
        assert len(pulses) >= 3, where
        for e in pulses:  # started after the claim by at least the stable offset
            assert e.claimed is not None and e.started is not None
            assert e.started - e.claimed >= offset - SLACK, (e, offset, where)
            assert e.started - e.scheduled >= offset - SLACK, (e, offset, where)
        listed = _cli("jobs", str(jobs), *side.state)
        rows = {line.split()[0]: line for line in listed.splitlines() if line.strip()}
        for name in ("closed-every", "closed-cron"):
            assert f"{after.isoformat()} 00:00:00 UTC" in rows[name], listed
