"""``tickwork run`` stopped with SIGSTOP past its lease, then continued (issue 26, point 6).

A single daemon on SQLite runs a 1-s command every 4 s with a 3-s lease. It is stopped
right after a run starts and continued 15 s later. The command ended during the stop
(its supervisor is another process and noted when): the run is recorded as taking about
a second, not the whole stop; the slots that passed after it ended are ``missed``, not
``skipped`` as if they overlapped it; the daemon says it stalled; and it does not claim
that its lease was "recovered elsewhere" (there is no elsewhere).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_daemon_e2e import Run, runs, start, stopped, wait_until

__all__ = ["runs", "start"]  # the fixtures, used here

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

STALL = 15.0  # seconds stopped: several leases and slots


def test_a_stopped_daemon_records_what_really_happened(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    jobs = tmp_path / "jobs.toml"
    began = tmp_path / "began"
    jobs.write_text(
        f'[[job]]\nname = "tick"\nevery = "4s"\ncommand = ["sh", "-c", "touch {began}; sleep 1"]\n'
    )
    run = start("--lease", "3s", "--poll", "1s", jobs=jobs)
    run.wait_line("tick started", limit=60)
    # Stop the daemon only once the command really runs: on a loaded machine the
    # daemon can log "started" and be stopped before its supervisor spawned the
    # command, which then runs after the stop and rightly takes the stop's length.
    wait_until("the command to begin", began.exists)
    run.signal(signal.SIGSTOP)
    try:
        wait_until("the daemon to stop", lambda: stopped(run.proc.pid))
        stopped_at = len(run.lines)
        time.sleep(STALL)  # the stimulus: the command ends, slots pass, the lease ends
    finally:
        run.signal(signal.SIGCONT)
    run.wait_line("the timing loop woke", limit=60)
    run.wait_line("tick finished ok", limit=60)
    at = next(i for i in range(stopped_at, len(run.lines)) if "tick finished ok" in run.lines[i])
    finished = run.lines[at]
    took = float(finished.rsplit(" in ", 1)[1].removesuffix("s"))
    assert took < STALL - 3, finished  # its real length, not the stop's
    # The next slot runs again after the stall (a start after that end: the slots passed
    # meanwhile were given up, on record, when it was claimed).
    run.wait_line("tick started", after=at + 1, limit=60)
    run.stop()
    assert run.proc.returncode == 0, run.text()
    text = run.text()
    assert "lost the claim" not in text and "elsewhere" not in text, text
    history = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tickwork",
                "history",
                "-f",
                str(jobs),
                "--state",
                str(tmp_path / "state" / "s.sqlite3"),
                "--json",
                "--limit",
                "100",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )
    slots = sorted((e for e in history if e["kind"] == "slot"), key=lambda e: e["scheduled"])
    first = slots[0]  # the run the daemon was stopped in
    assert first["outcome"] == "ok" and first["duration_seconds"] < STALL - 3, first
    after = [e for e in slots if e["scheduled"] > first["scheduled"]]
    outcomes = [e["outcome"] for e in after]
    assert "missed" in outcomes, history
    assert "skipped" not in outcomes, history
    assert "abandoned" not in [e["outcome"] for e in slots], history
