"""How a daemon's commands end when it stops, and what a killed daemon left behind.

`Stopping.end_runs` ends the runs at a shutdown, one step after another: it waits up
to the shutdown grace for them to end by themselves; then sends SIGTERM to every
command's process group and waits the longest ``kill_grace`` (and `SETTLE` more); then
exits with what is still going (in-process calls cannot be ended). A second stop
signal during a wait SIGKILLs every group at once (a third cuts the wait after that
short). `Stopping.end_survivors` ends, before any run starts, the runs a killed daemon
of the same state left behind whose supervisor died with it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Final

from tickwork._daemon.process.runner import (
    ProcessGroups,
    Survivor,
    end_survivors,
    find_survivors,
)

__all__ = ["SETTLE", "STOP_SIGNALS", "Stopping"]

_log = logging.getLogger("tickwork.daemon")

#: The signals that stop a daemon (SIGHUP reloads it).
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
#: After SIGTERM to the groups: seconds to wait beyond the longest ``kill_grace``.
SETTLE: Final = 5.0


class Stopping:
    """Ends a daemon's runs at its shutdown, and a killed daemon's at its start.

    Args:
        groups: The process groups of the daemon's commands.
        running: How many runs of each job go on now (`DurableScheduler.running`).
        wait: Sleeps up to the given seconds, or until a signal arrives.
        signals: The signals received and not yet handled (the daemon's list: a stop
            signal there cuts a wait short).
    """

    def __init__(
        self,
        groups: ProcessGroups,
        running: Callable[[], Mapping[str, int]],
        wait: Callable[[float], None],
        signals: list[int],
    ) -> None:
        self._groups = groups
        self._running = running
        self._wait = wait
        self._signals = signals

    def end_runs(self, grace: float, kill_grace: float) -> None:
        """Wait up to ``grace`` for the runs; then SIGTERM, ``kill_grace``, exit.

        A stop signal during the grace or the ``kill_grace`` SIGKILLs every group at
        once and waits `SETTLE` seconds (a further signal cuts that short). Returns when
        no run goes on any more; exits the process (`os._exit`) when runs are left that
        could not be ended (in-process calls cannot be).
        """
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
                names = _names(self._running())
                n = self._groups.kill_all()
                _log.warning(
                    "got %s during the shutdown: stopping now: killing the process group"
                    " of %d running command(s) (%s)",
                    sig,
                    n,
                    names,
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
            _names(self._running()) or "none",
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)  # the pool's threads would keep the interpreter alive

    def end_survivors(self, state_key: str, kill_grace: Mapping[str, float]) -> int:
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


def _names(running: Mapping[str, int]) -> str:
    """The jobs running, by name: ``'backup', 'report' (2 runs)``."""
    return ", ".join(
        f"{jid.partition('/')[2]!r}" + (f" ({n} runs)" if n > 1 else "")
        for jid, n in sorted(running.items())
    )
