"""``overlap = "replace"``: end a job's running command when its next run comes due.

The store holds such a job with ``overlap = "queue"``: a slot that comes due while a
run goes on stays unclaimed until that run ends, and is then run at once (other slots
that passed meanwhile are skipped). What makes it a replacement is this module: the
daemon's main loop calls `Replacing.check` a few times a second; for each run of a
``replace`` job that this daemon holds, when the job's next slot is due, it ends the
run as a timeout would (`ProcessGroups.replace`: SIGTERM to its process group, SIGKILL
after the job's ``kill_grace``). No further attempt of that run starts (its retries
and backoff end too). The run is recorded ``cancelled`` with an error that names the
slot it made way for; the queued slot then starts.

Each daemon ends only the runs it holds, so with several daemons on one PostgreSQL
state the daemon running the job replaces it, whichever daemon then claims the new run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tickwork._core.text import iso_due
from tickwork._daemon.process.runner import ProcessGroups
from tickwork.stores import JobState

__all__ = ["Replacing"]

_log = logging.getLogger("tickwork.daemon")


@dataclass(slots=True)
class _Active:
    job_id: str
    scheduled: float
    halt: threading.Event = field(default_factory=threading.Event)
    replaced_for: float | None = None  # the slot it is being ended for


class Replacing:
    """The runs of ``overlap = "replace"`` jobs going on in this daemon.

    Args:
        groups: The daemon's running commands (`ProcessGroups.replace` ends one).
        stop: Set at shutdown: every run's halt is set with it (see `begin`).
    """

    def __init__(self, groups: ProcessGroups, stop: threading.Event) -> None:
        self._groups = groups
        self._stop = stop
        self._lock = threading.Lock()
        self._runs: dict[object, _Active] = {}
        self._ended: dict[object, float] = {}  # ended runs' slots, until asked

    def begin(self, tag: object, job_id: str, scheduled: float) -> threading.Event:
        """A run of a ``replace`` job starts: its halt, set when it must stop.

        Pass the halt as the run's ``stop`` (`run_job`): no further attempt starts once
        it is set, and a backoff ends at once. It is set at shutdown too (`halt_all`).
        """
        active = _Active(job_id, scheduled)
        with self._lock:
            self._runs[tag] = active
        if self._stop.is_set():
            active.halt.set()
        return active.halt

    def end(self, tag: object) -> None:
        """The run is over (`replaced_for` still answers for it, once)."""
        with self._lock:
            active = self._runs.pop(tag, None)
            if active is not None and active.replaced_for is not None:
                self._ended[tag] = active.replaced_for
        self._groups.forget(tag)

    def replaced_for(self, tag: object, *, ended: bool = False) -> float | None:
        """The slot the run ``tag`` was ended for, or None if it was not.

        Args:
            tag: The run.
            ended: Ask about a run `end` was called for (answered once, then forgotten).
        """
        with self._lock:
            if ended:
                return self._ended.pop(tag, None)
            active = self._runs.get(tag)
            return None if active is None else active.replaced_for

    def halt_all(self) -> None:
        """Shutdown: no run of a ``replace`` job starts another attempt."""
        with self._lock:
            runs = list(self._runs.values())
        for active in runs:
            active.halt.set()

    def check(self, state_of: Callable[[str], JobState | None], now: float) -> int:
        """End each run whose job has its next slot due; return how many were ended now.

        Args:
            state_of: Reads a job's stored state (`Store.get`).
            now: The scheduler's time (UTC POSIX seconds).
        """
        with self._lock:
            waiting = [(tag, a) for tag, a in self._runs.items() if a.replaced_for is None]
        ended = 0
        for tag, active in waiting:
            state = state_of(active.job_id)
            # A paused job's next slot does not start: it replaces nothing.
            due = None if state is None or state.paused else state.next_run
            if due is None or due > now or due <= active.scheduled:
                continue
            with self._lock:
                if self._runs.get(tag) is not active or active.replaced_for is not None:
                    continue  # it ended meanwhile
                active.replaced_for = due
            _log.info(
                "job %r: the run due %s is due while the run due %s goes on: ending that"
                ' run (overlap = "replace")',
                active.job_id.partition("/")[2],
                iso_due(due),
                iso_due(active.scheduled),
            )
            active.halt.set()
            self._groups.replace(tag)
            ended += 1
        return ended
