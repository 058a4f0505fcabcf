"""How a daemon's commands end when it stops, and what a killed daemon left behind.

`Stopping.shut_down` is a daemon's shutdown once no run starts any more: the runs
begun write their start lines, the runs are ended (`Stopping.end_runs`), the scheduler
stops and their ends are recorded, or the exit status says they could not be.
`Stopping.end_runs` ends the runs at a shutdown, one step after another: it waits up
to the shutdown grace for them to end by themselves; then sends SIGTERM to every
command's process group and waits the longest ``kill_grace`` (and `SETTLE` more); then
exits with what is still going (in-process calls cannot be ended). A second stop
signal during a wait SIGKILLs every group at once (a third cuts the wait after that
short). `end_left_behind` ends, before any run starts, the runs a killed daemon of the
same state left behind whose supervisor died with it (`find_survivors`, `end_survivors`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tickwork._core.text import iso
from tickwork._core.text import plain_seconds as _seconds_text
from tickwork._daemon.process.runner import MARKER_ENV, ProcessGroups
from tickwork.stores.contract import proc_stat, process_alive

if TYPE_CHECKING:
    from tickwork._durable.scheduler import DurableScheduler

__all__ = [
    "SETTLE",
    "STOP_SIGNALS",
    "Stopping",
    "Survivor",
    "end_left_behind",
    "end_survivors",
    "find_survivors",
]

_log = logging.getLogger("tickwork.daemon")

#: The signals that stop a daemon (SIGHUP reloads it).
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
#: After SIGTERM to the groups: seconds to wait beyond the longest ``kill_grace``.
SETTLE: Final = 5.0


class Stopping:
    """Ends a daemon's runs at its shutdown (built when the shutdown begins).

    Args:
        groups: The process groups of the daemon's commands.
        scheduler: The daemon's scheduler, already told to start no run
            (``stop(wait=False)``): what runs now, and what records their ends.
        wait: Sleeps up to the given seconds, or until a signal arrives.
        signals: The signals received and not yet handled (the daemon's list: a stop
            signal there cuts a wait short).
    """

    def __init__(
        self,
        groups: ProcessGroups,
        scheduler: DurableScheduler,
        wait: Callable[[float], None],
        signals: list[int],
    ) -> None:
        self._groups = groups
        self._scheduler = scheduler
        self._running: Callable[[], Mapping[str, int]] = scheduler.running
        self._wait = wait
        self._signals = signals

    def shut_down(
        self, why: str, announced: Callable[[], int], grace: float, kill_grace: float
    ) -> int:
        """Log ``why`` the daemon shuts down, end its runs and record them; the exit status.

        ``announced``: how many runs going on have logged their start. ``grace``: the
        shutdown grace (`end_runs`), also how long (at least 5 s) the ends of runs the
        store failed to record are retried. The status is 0, or 1 when some end is
        still unwritten (the log names each such job and slot).
        """
        # A run begun before the stop (its claim recorded it started) logs its start
        # before the line that says no run starts any more, however slow its thread.
        give_up = time.monotonic() + grace
        while sum(self._running().values()) > announced():
            if time.monotonic() >= give_up or self._signals:
                break
            self._wait(0.02)
        _log.info("%s: shutting down", why)
        running = sum(self._running().values())
        if running:
            _log.info(
                "waiting up to %s for %d running job(s); a second SIGTERM/SIGINT ends them at once",
                _seconds_text(grace),
                running,
            )
        self.end_runs(grace, kill_grace)
        self._scheduler.stop(wait=True, timeout=max(5.0, grace))
        unwritten = self._scheduler.unrecorded()
        if unwritten:
            _log.error(
                "stopped without recording the end of %d run(s): %s; exiting with status 1",
                len(unwritten),
                ", ".join(f"{job!r} (scheduled {iso(slot)})" for job, slot in unwritten),
            )
            return 1
        _log.info("stopped")
        return 0

    def end_runs(self, grace: float, kill_grace: float) -> None:
        """Wait up to ``grace`` for the runs; then SIGTERM, ``kill_grace``, exit.

        A stop signal during the grace or the ``kill_grace`` SIGKILLs every group at
        once and waits `SETTLE` seconds (a further signal cuts that short). Returns when
        no run goes on any more; exits the process (`os._exit`) when runs are left that
        could not be ended (in-process calls cannot be).
        """

        def names() -> str:  # the jobs running, by name: 'backup', 'report' (2 runs)
            return ", ".join(
                f"{jid.partition('/')[2]!r}" + (f" ({n} runs)" if n > 1 else "")
                for jid, n in sorted(self._running().items())
            )

        phase, deadline = "grace", time.monotonic() + grace
        while self._running():
            signalled = any(s in STOP_SIGNALS for s in self._signals)
            left = deadline - time.monotonic()
            if left > 0 and not signalled:
                self._wait(min(left, 0.05))
                continue
            if phase == "killed":  # its settle over, or cut short by another signal
                break
            if signalled:  # a second stop signal: SIGKILL every group now
                sig = signal.Signals(self._signals[-1]).name
                self._signals.clear()
                running = names()
                n = self._groups.kill_all()
                _log.warning(
                    "got %s during the shutdown: stopping now: killing the process group"
                    " of %d running command(s) (%s)",
                    sig,
                    n,
                    running,
                )
                if not n:
                    break
                phase, deadline = "killed", time.monotonic() + SETTLE
            elif phase == "grace":
                n = self._groups.terminate_all()
                _log.warning("shutdown grace over: terminating %d running command(s)", n)
                phase, deadline = "terminated", time.monotonic() + kill_grace + SETTLE
            else:  # SIGTERM's kill_grace is over too
                break
        else:
            return
        _log.error(
            "exiting with runs still going (in-process calls cannot be terminated): %s",
            names() or "none",
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)  # the pool's threads would keep the interpreter alive


def end_left_behind(state_key: str, kill_grace: Mapping[str, float]) -> int:
    """End the runs a killed daemon of this state left behind; return how many groups.

    A run's supervisor ends its group when its daemon dies; this catches the runs
    whose supervisor died too (a ``kill -9`` of the whole process tree, the OOM
    killer) or is still in its ``kill_grace``. Called before any run starts, so a
    job never runs beside a survivor of itself. Each group gets SIGTERM, then
    SIGKILL after the job's ``kill_grace`` (``kill_grace``: by job name; 10 s for a
    job not in the file).
    """
    found = find_survivors(state_key)
    if not found:
        return 0
    groups: dict[int, list[Survivor]] = {}
    for survivor in found:
        groups.setdefault(survivor.pgid, []).append(survivor)
    for pgid, members in sorted(groups.items()):
        first = members[0]
        _log.warning(
            "job %r: a run started by daemon pid %d, which is gone, is still going"
            " (process group %d, %d process(es)); ending it before any run starts",
            first.job,
            first.daemon_pid,
            pgid,
            len(members),
        )
    grace = max((kill_grace[s.job] for s in found if s.job in kill_grace), default=10.0)
    left = end_survivors(found, grace)
    if left:
        _log.error(
            "could not end %d process(es) of earlier runs: %s",
            len(left),
            ", ".join(f"pid {s.pid} (job {s.job!r})" for s in left),
        )
    return len(groups)


# -- runs that outlived their daemon --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Survivor:
    """A process of a run whose daemon is gone."""

    pid: int
    """The process."""
    started: int
    """Its start time (clock ticks since boot): with ``pid``, its identity."""
    pgid: int
    """Its process group (the run's)."""
    job: str
    """The job whose run it belongs to."""
    daemon_pid: int
    """The pid of the daemon that started the run (no longer running)."""


def find_survivors(key: str) -> list[Survivor]:
    """The processes of runs started by daemons of ``key`` that are no longer running.

    A process belongs to a run when its environment holds `MARKER_ENV` (inherited from
    the supervisor; a process that cleared its environment is not found). Linux only
    (it reads /proc); elsewhere the list is empty. Processes of other users and of
    daemons that still run are left alone.
    """
    if not os.path.isdir("/proc"):
        return []
    prefix = f"{MARKER_ENV}={key}:".encode()
    found: list[Survivor] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        marker = next((v for v in environ.split(b"\0") if v.startswith(prefix)), None)
        if marker is None:
            continue
        try:
            _, dpid, dstart, job = marker[len(MARKER_ENV) + 1 :].decode().split(":", 3)
            daemon = (int(dpid), int(dstart))
        except ValueError:
            continue
        if process_alive(*daemon):
            continue
        stat = proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        found.append(Survivor(pid, stat[2], stat[1], job, daemon[0]))
    return found


def end_survivors(
    survivors: Sequence[Survivor],
    grace: float,
    *,
    settle: float = 5.0,
    sleep: Callable[[float], object] = time.sleep,
) -> list[Survivor]:
    """End the process groups of ``survivors``: SIGTERM, then SIGKILL after ``grace``.

    A group is signalled only while one of its found processes is verified alive (same
    pid, same start time), so a recycled pid is never signalled.

    Returns:
        The survivors still alive ``settle`` seconds after the SIGKILL (normally none).
    """

    def signal_groups(sig: int) -> None:
        for pgid in {s.pgid for s in survivors if process_alive(s.pid, s.started)}:
            # Nothing left in the group (PermissionError: macOS, only a zombie left).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)

    def wait(seconds: float) -> list[Survivor]:
        give_up = time.monotonic() + seconds
        while True:
            left = [s for s in survivors if process_alive(s.pid, s.started)]
            if not left or time.monotonic() >= give_up:
                return left
            sleep(0.05)

    signal_groups(signal.SIGTERM)
    if not wait(grace):
        return []
    signal_groups(signal.SIGKILL)
    return wait(settle)
