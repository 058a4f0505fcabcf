"""``kill -9`` of daemons sharing one state: no run is handed on while the dead one's runs live.

Daemons run one jobs file on one state (SQLite on this host, or PostgreSQL). Three
jobs in a pool of 2, each run a shell that ignores SIGTERM (and so does its child) and
takes a lock: its job's, and one of the pool's two slots. The locks are the kernel's
(`flock`): held while any process of the run holds the file open, whoever started it,
and released only when the last one is gone. A run that finds its job's lock taken, or
both slots, writes why to ``over``: that is the concurrency the promise forbids.

Three daemons. Again and again one that has a command running, while another is up, is
killed (every other time with its supervisors: the whole tree but the commands) and
started again at once; the others take its claims over. ``over`` must stay empty.

Each daemon is ``tickwork run`` forked from a warm parent (tests/forked.py): a real
process of its own, as ``python -m tickwork run`` would be, without the ~0.35 s of CPU
its imports cost at each of the loop's 33 starts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import forked
from tests.test_daemon_e2e import lines_of, stopped, wait_until

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.slow,
]

KILLS = 30

# $1: the job's name. Ignores SIGTERM, and so does the sleep it starts (and waits for).
RUN = r"""
trap '' TERM
echo "$TICKWORK_SUPERVISED" >> starts
exec 7>> "lock-$1"
flock -n 7 || echo "job $1 ran beside itself" >> over
exec 8>> slot-0
if ! flock -n 8; then
  exec 8>> slot-1
  flock -n 8 || echo "job $1 ran with both pool slots taken" >> over
fi
sleep 2 & wait
"""


class Daemon:
    """One ``tickwork run`` forked warm; its log lines (stderr) read from its own file.

    Answers what the test asks of `tests.test_daemon_e2e.Run`: ``proc``, ``lines``,
    ``text()``, ``signal()``, ``kill()`` and ``stop()``.
    """

    def __init__(self, jobs: Path, args: list[str], log: Path) -> None:
        self.log = log
        self.proc = forked.start("tickwork", ["run", str(jobs), *args], log, stdout=False)

    @property
    def lines(self) -> list[str]:
        return lines_of(self.log)

    def text(self) -> str:
        return "\n".join(self.lines)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM and wait for the orderly stop (SIGKILL after 30 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        self.kill()


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``.

    Read from each of its threads' ``children`` file (the daemon starts its commands
    from worker threads): the test asks this every 20 ms while it waits for a victim,
    and reading every process's ``stat`` instead took a tenth of a core.
    """
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it has ended
        return found
    for task in tasks:
        try:
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:
            continue
    return found


def running_commands(run: Daemon) -> list[int]:
    """The supervisors of ``run`` whose command has started (it has a child)."""
    if run.proc.poll() is not None:
        return []
    return [s for s in children(run.proc.pid) if children(s)]


def up(run: Daemon) -> bool:
    """``run`` has declared its jobs and goes on."""
    return run.proc.poll() is None and any("tickwork: running" in line for line in run.lines)


def victim_among(nodes: list[Daemon]) -> Daemon | None:
    """A daemon that has a command running while another one is up to take over."""
    for node in nodes:
        if up(node) and running_commands(node) and any(up(n) for n in nodes if n is not node):
            return node
    return None


@pytest.fixture(params=["sqlite", "postgres"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        return ["--state", str(tmp_path / "state" / "s.sqlite3")]
    return ["--database", request.getfixturevalue("fresh_database")]


def test_a_killed_daemons_commands_never_run_beside_their_takeover(
    tmp_path: Path, state: list[str]
) -> None:
    (tmp_path / "run.sh").write_text(RUN)
    jobs = tmp_path / "jobs.toml"
    text = f'[defaults]\ncwd = "{tmp_path}"\nkill_grace = "10s"\n\n[pool.p]\nlimit = 2\n'
    for name in "abc":
        text += textwrap.dedent(
            f"""
            [[job]]
            name = "{name}"
            every = "1s"
            pool = "p"
            command = ["sh", "run.sh", "{name}"]
            """
        )
    jobs.write_text(text)
    args = [*state, "--poll", "1s", "--lease", "30s", "--shutdown-grace", "1s"]
    started = iter(range(10**6))

    def start() -> Daemon:
        return Daemon(jobs, args, tmp_path / f"daemon-{next(started)}.log")

    nodes = [start() for _ in range(3)]
    began = time.monotonic()
    try:
        for kill in range(KILLS):
            victim = wait_until("a daemon to kill", lambda: victim_among(nodes), limit=60.0)
            supervisors = running_commands(victim)
            if kill % 2:  # the whole tree but the commands, at once: freeze the daemon first
                victim.signal(signal.SIGSTOP)
                wait_until("the daemon to be stopped", lambda p=victim.proc.pid: stopped(p))
                for pid in supervisors:
                    with contextlib.suppress(ProcessLookupError):  # its command just ended
                        os.kill(pid, signal.SIGKILL)
            victim.kill()
            nodes[nodes.index(victim)] = start()
        # The last kill's takeover: runs go on beside what the last victim left.
        runs = len(lines_of(tmp_path / "starts"))
        wait_until("more runs", lambda: len(lines_of(tmp_path / "starts")) >= runs + 4, 60.0)
    finally:
        for node in nodes:
            node.stop()
    took = time.monotonic() - began
    print(f"{KILLS} kills in {took:.1f} s, {len(lines_of(tmp_path / 'starts'))} runs")
    assert lines_of(tmp_path / "over") == [], "\n".join(n.text() for n in nodes)
