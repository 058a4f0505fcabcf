"""Runtime control against a live ``tickwork run`` in another process, on both stores.

Issue 14, point 5: pause while a run is claimed (it finishes, nothing new starts); two
triggers at once under ``overlap = "skip"`` (one run); a backfill while the job's own
slots come due (no slot twice). Issue 26: a backfill cancelled while a daemon runs it
(the run taken goes on, no other starts). The daemons run with ``--poll 60s``, so a control
command that takes effect within the tests' limits was seen through the store's change
announcement (PostgreSQL's NOTIFY, SQLite's change check), not the safety poll. Every
wait is for a condition, with generous limits for a loaded 2-core machine; nothing is
asserted on elapsed time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.test_daemon_e2e import LIMIT, Run, lines_of, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The store options of every command: a SQLite file, or a fresh database."""
    if request.param == "sqlite":
        return ["--state", str(tmp_path / "state.sqlite3")]
    return ["--database", request.getfixturevalue("fresh_database")]


@pytest.fixture
def daemons() -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for d in started:
        d.stop()


Start = Callable[[Path], Run]


@pytest.fixture
def start(where: list[str], daemons: list[Run]) -> Start:
    def start(jobs: Path) -> Run:
        daemon = Run(jobs, where, "--poll", "60s", "--log-format", "json")
        daemons.append(daemon)
        return daemon

    return start


def tickwork(*args: str) -> subprocess.CompletedProcess[str]:
    """A control command, in a process of its own (forked warm: tests/forked.py)."""
    return forked.tickwork(*args, timeout=60)


def write_jobs(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(text))
    return path


def history(jobs: Path, where: list[str], name: str) -> list[dict[str, Any]]:
    done = tickwork("history", name, "-f", str(jobs), *where, "--json", "--limit", "1000")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def missed_after(rows: list[dict[str, Any]], since: float, every: float) -> bool:
    """The ledger has slots (of a grid ``every`` seconds) given up as missed that reach
    a second past ``since``."""
    for r in rows:
        if r["kind"] == "slot" and r["outcome"] == "missed":
            first = datetime.fromisoformat(r["scheduled"]).timestamp()
            if first + (r["slots"] - 1) * every >= since + 1.0:
                return True
    return False


def events(daemon: Run, kind: str) -> list[dict[str, Any]]:
    out = []
    for line in list(daemon.lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == kind:
            out.append(event)
    return out


def gated(log: Path, gate: Path) -> str:
    """A shell command that notes its start, waits for the gate file, notes its end."""
    return f"echo start >> {log}; while [ ! -e {gate} ]; do sleep 0.02; done; echo end >> {log}"


def test_pause_while_a_run_is_claimed_lets_it_finish_and_starts_nothing(
    tmp_path: Path, where: list[str], start: Start
) -> None:
    log, gate = tmp_path / "runs.log", tmp_path / "gate"
    jobs = write_jobs(
        tmp_path,
        f"""\
        [[job]]
        name = "slow"
        command = ["sh", "-c", "{gated(log, gate)}"]
        every = "1s"
        """,
    )
    daemon = start(jobs)
    wait_until("the first run to start", lambda: lines_of(log) == ["start"])
    paused = tickwork("pause", "slow", "-f", str(jobs), *where, "--note", "race test")
    assert paused.returncode == 0, paused.stderr
    gate.touch()  # the claimed run goes on to its end
    wait_until("the claimed run to end", lambda: lines_of(log) == ["start", "end"])
    wait_until("its finish to be logged", lambda: events(daemon, "finished"))
    # Slots keep coming due every second; none may start while paused. Let several pass
    # (seen by the wall clock: a loaded machine only makes this window longer).
    due_by = time.time() + 3.0
    wait_until("three slots to pass", lambda: time.time() > due_by)
    assert lines_of(log) == ["start", "end"], daemon.text()
    assert len(events(daemon, "started")) == 1
    # Still alive and looking: a resume (seen through the change announcement, the
    # poll is 60 s) starts runs again.
    resumed = tickwork("resume", "slow", "-f", str(jobs), *where)
    assert resumed.returncode == 0, resumed.stderr
    wait_until("a run after the resume", lambda: len(lines_of(log)) >= 3, limit=LIMIT)
    actions = [r for r in history(jobs, where, "slow") if r["kind"] == "action"]
    assert [a["action"] for a in actions[::-1]] == ["pause", "resume"]
    assert actions[-1]["note"] == "race test"


def test_two_triggers_at_once_under_skip_make_one_run(
    tmp_path: Path, where: list[str], start: Start
) -> None:
    log, gate = tmp_path / "runs.log", tmp_path / "gate"
    jobs = write_jobs(
        tmp_path,
        f"""\
        [[job]]
        name = "once"
        command = ["sh", "-c", "{gated(log, gate)}"]
        every = "1h"
        overlap = "skip"
        """,
    )
    daemon = start(jobs)
    wait_until("the daemon to declare its job", lambda: any(
        "running 1 job" in line for line in daemon.lines))  # fmt: skip
    argv = [sys.executable, "-m", "tickwork", "trigger", "once", "-f", str(jobs), *where]
    both = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]  # fmt: skip
    outputs = [p.communicate(timeout=60) for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    said = sorted(out.split(":")[0].split(" ")[0] for out, _ in outputs)
    assert said == ["skipped", "triggered"], outputs
    wait_until("the triggered run to start", lambda: lines_of(log) == ["start"])
    gate.touch()
    wait_until("it to end", lambda: lines_of(log) == ["start", "end"])
    wait_until("its ledger entry", lambda: any(
        r.get("outcome") == "ok" for r in history(jobs, where, "once")))  # fmt: skip
    slots = [r for r in history(jobs, where, "once") if r["kind"] == "slot"]
    assert sorted((r["outcome"], r["origin"]) for r in slots) == [
        ("ok", "manual"),
        ("skipped", "manual"),
    ]
    assert lines_of(log) == ["start", "end"]  # one run in all


def test_a_backfill_while_the_grid_comes_due_runs_no_slot_twice(
    tmp_path: Path, where: list[str], start: Start
) -> None:
    log = tmp_path / "runs.log"
    jobs = write_jobs(
        tmp_path,
        f"""\
        [[job]]
        name = "grid"
        command = ["sh", "-c", "echo run >> {log}"]
        every = "500ms"
        overlap = "allow"
        missed = "skip"
        """,
    )
    began = time.time()
    daemon = start(jobs)
    wait_until("a few runs of the grid", lambda: len(lines_of(log)) >= 3)
    # Slots none ran: those that come due while the job is paused for 3 s (given up
    # "missed" when it resumes), however long a loaded machine takes around them.
    held = tickwork("pause", "grid", "-f", str(jobs), *where)
    assert held.returncode == 0, held.stderr
    paused_at = time.time()
    wait_until("3 s of paused slots", lambda: time.time() > paused_at + 3.0)
    again = tickwork("resume", "grid", "-f", str(jobs), *where)
    assert again.returncode == 0, again.stderr
    # The daemon gives the paused slots up ("missed") once it has seen the resume, and
    # the backfill is for those: wait for them in the ledger. (A backfill sent at once
    # found them still waiting and left them out: a race the python -m start-up hid.)
    wait_until(
        "the paused slots given up",
        lambda: missed_after(history(jobs, where, "grid"), paused_at, 0.5),
    )
    # The window starts 20 s before the daemon did (before the job existed: left out,
    # and said so) and ends 20 s ahead: the slots the grid ran already, and those from
    # its next run on, are left to it.
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    back, ahead = (time.strftime(stamp, time.gmtime(t)) for t in (began - 20, time.time() + 20))
    done = tickwork("backfill", "grid", "-f", str(jobs), *where, "--from", back, "--to", ahead)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("queued "), done.stdout
    queued = int(done.stdout.split()[1])
    assert queued >= 5  # at least the 3 s of paused slots, every 500 ms
    assert "before the job's first slot" in done.stdout  # the 20 s before the daemon
    assert "left out" in done.stdout  # those the grid ran already, and its own from now on

    def settled() -> list[dict[str, Any]] | None:
        slots = [r for r in history(jobs, where, "grid") if r["kind"] == "slot"]
        back = [r for r in slots if r["origin"] == "backfill"]
        return slots if len(back) == queued else None

    slots = wait_until("every backfilled slot to end", settled, limit=60.0)
    # Each slot that ran, once (a given-up slot that a backfill ran has its "missed"
    # entry too).
    stamps = [(r["scheduled"], r["attempt"]) for r in slots if r["started"] is not None]
    assert len(stamps) == len(set(stamps)), "a slot ran twice"
    assert all(r["outcome"] == "ok" for r in slots if r["origin"] == "backfill")
    daemon.stop()
    ran = [r for r in history(jobs, where, "grid") if r["kind"] == "slot" and r["outcome"] == "ok"]
    assert len(lines_of(log)) == len(ran)  # each recorded run executed once


def test_runtime_state_survives_reload_and_restart_and_the_file_decides_what_exists(
    tmp_path: Path, where: list[str], start: Start
) -> None:
    log = tmp_path / "runs.log"
    keep = f"""\
        [[job]]
        name = "keep"
        command = ["sh", "-c", "echo {{}} >> {log}"]
        every = "1h"
        """
    drop = """
        [[job]]
        name = "drop"
        command = ["true"]
        every = "1h"
        """
    jobs = write_jobs(tmp_path, keep.format("keep") + drop)
    daemon = start(jobs)
    wait_until("the daemon to start", lambda: any("running 2 jobs" in x for x in daemon.lines))
    done = tickwork("pause", "keep", "-f", str(jobs), *where, "--note", "hold", "--by", "ops@x")
    assert done.returncode == 0, done.stderr

    def pause_of(name: str) -> dict[str, Any]:
        shown = tickwork("jobs", str(jobs), *where, "--json")
        assert shown.returncode == 0, shown.stderr
        row = next(r for r in json.loads(shown.stdout) if r["job"] == name)
        return row["pause"] or {}  # type: ignore[no-any-return]

    paused = pause_of("keep")
    assert (paused["by"], paused["note"], paused["until"]) == ("ops@x", "hold", None)
    # A reload with the job's command changed (not its `enabled`): the pause stays, and
    # the job gone from the file is gone from the state.
    write_jobs(tmp_path, keep.format("kept"))
    daemon.proc.send_signal(signal.SIGHUP)
    wait_until("the reload", lambda: any("reloaded " in x for x in daemon.lines))
    assert pause_of("keep") == paused
    gone = tickwork("trigger", "drop", *where, "--namespace", "jobs")
    assert gone.returncode == 1 and "no job" in gone.stderr, gone.stderr
    refused = tickwork("trigger", "drop", "-f", str(jobs), *where)
    assert refused.returncode == 1 and "no job 'drop' in" in refused.stderr
    daemon.stop()
    again = start(jobs)  # a restart: still paused, with its note
    wait_until("the restart", lambda: any("running 1 job" in x for x in again.lines))
    assert pause_of("keep") == paused
    shown = tickwork("history", "keep", "-f", str(jobs), *where)
    assert "[pause]  by ops@x" in shown.stdout and "note: hold" in shown.stdout
    assert lines_of(log) == []  # paused all along


def test_a_backfill_cancelled_while_a_daemon_runs_it_starts_no_more(
    tmp_path: Path, where: list[str], start: Start
) -> None:
    # Issue 26: a mistaken backfill is taken back while the daemon works through it;
    # the run it has taken goes on, no other backfilled run starts, the grid runs on.
    log, hold, gate = tmp_path / "runs.log", tmp_path / "hold", tmp_path / "gate"
    held = f"while [ -e {hold} ] && [ ! -e {gate} ]; do sleep 0.02; done"
    jobs = write_jobs(
        tmp_path,
        f"""\
        [[job]]
        name = "grid"
        command = ["sh", "-c", "echo start >> {log}; {held}; echo end >> {log}"]
        every = "500ms"
        missed = "skip"
        """,
    )
    start(jobs)
    wait_until("a run of the grid", lambda: "end" in lines_of(log))
    assert tickwork("pause", "grid", "-f", str(jobs), *where).returncode == 0

    def idle() -> bool:
        shown = tickwork("jobs", str(jobs), *where, "--json")
        row = next(r for r in json.loads(shown.stdout) if r["job"] == "grid")
        return row["running"] == 0 and lines_of(log)[-1] == "end"

    wait_until("no run going", idle)
    hold.touch()  # from now on a run waits for the gate
    paused_at = time.time()
    wait_until("3 s of paused slots", lambda: time.time() > paused_at + 3.0)
    assert tickwork("resume", "grid", "-f", str(jobs), *where).returncode == 0
    wait_until("the first run after the pause to hold", lambda: lines_of(log)[-1] == "start")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    done = tickwork("backfill", "grid", "-f", str(jobs), *where, "--from", "1h", "--to", now)
    assert done.returncode == 0, done.stderr
    queued = int(done.stdout.split()[1])
    assert queued >= 5, done.stdout  # the paused slots wait behind the held run
    listed = tickwork("cancel", "grid", "-f", str(jobs), *where, "--list")
    assert listed.returncode == 0, listed.stderr
    assert f"grid: {queued} waiting run(s) ({queued} backfill)" in listed.stdout
    cancel = ("cancel", "grid", "-f", str(jobs), *where)
    undone = tickwork(*cancel, "--all-waiting", "--by", "ops@x", "--note", "wrong window")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.startswith(f"cancelled {queued} waiting run(s) of grid"), undone.stdout
    starts = lines_of(log).count("start")
    gate.touch()  # the held run ends; the grid goes on
    wait_until("two more runs of the grid", lambda: lines_of(log).count("start") >= starts + 2)
    rows = history(jobs, where, "grid")
    slots = [r for r in rows if r["kind"] == "slot"]
    assert [r for r in slots if r["origin"] == "backfill" and r["started"] is not None] == []
    cancelled = [r for r in slots if r["outcome"] == "cancelled"]
    assert {r["origin"] for r in cancelled} == {"backfill"}
    assert sum(r["slots"] for r in cancelled) == queued
    (act,) = [r for r in rows if r["kind"] == "action" and r["action"] == "cancel"]
    assert (act["actor"], act["note"]) == ("ops@x", "wrong window")
    assert tickwork(*cancel, "--list").stdout == "grid has no waiting run\n"
