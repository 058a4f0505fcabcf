"""A second Ctrl-C (or SIGTERM) ends a process whose job is stuck, saying what it abandoned.

Real processes and real signals: a ``with ThreadScheduler():`` program whose job blocks
forever, and ``tickwork run`` with a command that ignores SIGTERM. Each waits for the
log line that proves the first signal was taken before sending the second, and for
the exit with a generous limit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_daemon_e2e import wait_until as e2e_wait_until
from tests.waiting import DEADLINE

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


LIMIT = DEADLINE  # only a real hang reaches it (tests/waiting.py)


def wait_until(what: str, check: Callable[[], object], limit: float = LIMIT) -> Any:
    return e2e_wait_until(what, check, limit)


class Proc:
    """A child process whose stderr lines are collected as they come."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        # Ctrl-C as from a terminal, even when this test runs in a background job
        # (a non-interactive shell starts those with SIGINT ignored, and so its children).
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, needle: str) -> str:
        def find() -> str | None:
            return next((line for line in self.lines if needle in line), None)

        found: str = wait_until(f"{needle!r} in:\n{self.text()}", find)
        return found

    def exit_code(self) -> int:
        try:
            code = self.proc.wait(LIMIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {LIMIT}s:\n{self.text()}") from None
        self.close()
        return code

    def close(self) -> None:
        self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(10)
        p.close()


STUCK_PROGRAM = """\
import logging, sys, threading, time
from tickwork import ThreadScheduler

def stuck():
    print("stuck job started", file=sys.stderr, flush=True)
    threading.Event().wait()

with ThreadScheduler() as s:
    s.schedule(0, stuck)
    time.sleep(3600)
"""


def test_second_ctrl_c_ends_a_thread_scheduler_with_a_stuck_job(
    tmp_path: Path, procs: list[Proc]
) -> None:
    (tmp_path / "prog.py").write_text(STUCK_PROGRAM)
    p = Proc([sys.executable, "prog.py"], tmp_path)
    procs.append(p)
    p.wait_line("stuck job started")
    p.proc.send_signal(signal.SIGINT)
    p.wait_line("interrupted: waiting for 1 running job(s) to finish: stuck (task 1)")
    assert p.proc.poll() is None  # the first Ctrl-C waits for the job, as before
    p.proc.send_signal(signal.SIGINT)
    assert p.exit_code() == 130, p.text()
    assert "abandoning stuck (task 1)" in p.text()
    assert "KeyboardInterrupt" in p.text()  # the interrupt went on up to the program


def test_a_job_that_ends_after_one_ctrl_c_exits_as_usual(tmp_path: Path, procs: list[Proc]) -> None:
    (tmp_path / "prog.py").write_text(
        STUCK_PROGRAM.replace("threading.Event().wait()", "time.sleep(0.5)")
    )
    p = Proc([sys.executable, "prog.py"], tmp_path)
    procs.append(p)
    p.wait_line("stuck job started")
    p.proc.send_signal(signal.SIGINT)
    code = p.exit_code()
    assert code == -signal.SIGINT, p.text()  # Python's own exit on an uncaught Ctrl-C
    assert "abandoning" not in p.text()


STUCK_JOBS = """\
[[job]]
name = "stuck"
command = ["sh", "-c", "echo $$ > {pid}; trap '' TERM INT; while :; do sleep 1; done"]
every = "1h"
first = 0
kill_grace = "5m"
"""


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # only zombies left (macOS)
        return True
    return False


def start_stuck(tmp_path: Path, procs: list[Proc], jobs_text: str, grace: str) -> tuple[Proc, int]:
    """A daemon running ``jobs_text`` (`STUCK_JOBS`' form) with ``grace``; it and its job's pid."""
    pid_file = tmp_path / "pid"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(textwrap.dedent(jobs_text.format(pid=pid_file)))
    p = Proc(
        [sys.executable, "-m", "tickwork", "run", str(jobs), "--state", str(tmp_path / "s.db"),
         "--shutdown-grace", grace],
        tmp_path,
    )  # fmt: skip
    procs.append(p)
    p.wait_line("stuck started")
    pid = int(wait_until("the job's pid", lambda: pid_file.exists() and pid_file.read_text()))
    return p, pid


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_second_stop_signal_kills_a_stuck_command_and_exits(
    tmp_path: Path, procs: list[Proc], second: signal.Signals
) -> None:
    p, pid = start_stuck(tmp_path, procs, STUCK_JOBS, grace="5m")
    pgid = os.getpgid(pid)
    p.proc.send_signal(signal.SIGTERM)
    p.wait_line("waiting up to 300s for 1 running job(s)")
    assert p.proc.poll() is None  # the grace: the job may finish
    p.proc.send_signal(second)
    assert p.exit_code() == 0, p.text()
    line = p.wait_line("stopping now")
    assert f"got {second.name} during the shutdown" in line
    assert "killing the process group of 1 running command(s) ('stuck')" in line
    assert "stuck failed cancelled" in p.text()
    wait_until(f"process group {pgid} to be gone", lambda: group_gone(pgid))


def test_a_sighup_during_the_shutdown_is_no_second_stop_signal(
    tmp_path: Path, procs: list[Proc]
) -> None:
    # A reload asked for while the daemon stops changes nothing: at the end of the grace
    # the command gets SIGTERM, as without it (it once counted as a second stop signal,
    # and every group got SIGKILL instead).
    obliging = STUCK_JOBS.replace(
        "trap '' TERM INT; while :; do sleep 1; done",
        "trap 'exit 0' TERM; while :; do sleep 0.1; done",
    )
    p, _ = start_stuck(tmp_path, procs, obliging, grace="2s")
    p.proc.send_signal(signal.SIGTERM)
    p.wait_line("waiting up to 2s for 1 running job(s)")
    p.proc.send_signal(signal.SIGHUP)
    assert p.exit_code() == 0, p.text()
    assert "shutdown grace over: terminating 1 running command(s)" in p.text()
    assert "stopping now" not in p.text() and "SIGKILL" not in p.text()
