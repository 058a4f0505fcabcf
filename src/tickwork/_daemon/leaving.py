"""Jobs gone from the jobs file: removed from the state, or once a run of theirs ended.

When an applied file no longer names a job of its namespace, `Leaving.remove_gone` removes
it from the state; a job with a run still going is paused instead, so nothing new
starts, and its run finishes and is recorded like any other. Each turn of the daemon's
loop, `Leaving.remove_ended` removes such a job once its last run has ended; one that
is back in the file before that is kept (`Leaving.keep_back`). `tickwork._daemon.filejobs`
applies the file and tells this which jobs left it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tickwork.stores import JobState

if TYPE_CHECKING:
    from tickwork._durable.scheduler import DurableScheduler

__all__ = ["Leaving"]

_log = logging.getLogger("tickwork.daemon")


class Leaving:
    """The ids of a file's jobs that left it while a run of theirs went on.

    Each call is given the daemon's scheduler: the state the jobs are removed from.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def __bool__(self) -> bool:
        """Whether a job waits for its run to end before it is removed."""
        return bool(self._ids)

    def remove_gone(
        self, scheduler: DurableScheduler, gone: Sequence[JobState], *, path: str
    ) -> None:
        """Remove the jobs gone from ``path``; one with a run going goes when that run ends.

        Such a job is paused meanwhile (noted: removed from ``path``), so nothing new
        starts, and the run finishes and is recorded like any other (`remove_ended`
        removes the job after that).
        """
        for state in gone:
            name = state.id.partition("/")[2]
            if state.id not in self._ids and any(c.started is not None for c in state.claims):
                with contextlib.suppress(Exception):
                    scheduler.pause(state.id, note=f"removed from {path}")
                self._ids.add(state.id)
                _log.info(
                    "job %r is gone from %s but a run of it goes on: it runs to its end"
                    " and is recorded, then the job is removed",
                    name,
                    path,
                )
                continue
            with contextlib.suppress(Exception):  # JobNotFoundError: another host did it
                scheduler.remove(state.id)

    def keep_back(self, scheduler: DurableScheduler, enabled: Mapping[str, bool]) -> None:
        """Keep the jobs back in the file before their run ended (``enabled``: by id).

        Each is no longer removed; an enabled one is resumed (a disabled one was
        declared paused: it stays so).
        """
        for jid in sorted(self._ids & enabled.keys()):
            self._ids.discard(jid)
            if enabled[jid]:
                with contextlib.suppress(Exception):
                    scheduler.resume(jid)

    def remove_ended(self, scheduler: DurableScheduler) -> None:
        """Remove the jobs gone from the file whose last run has ended (`remove_gone`)."""
        for jid in sorted(self._ids):
            try:
                state = scheduler.store.get(jid)
                if state is not None and any(c.started is not None for c in state.claims):
                    continue
                if state is not None:
                    scheduler.remove(jid)
            except Exception:  # the state is unreachable: the next turn tries again
                _log.debug("removing job %r failed", jid, exc_info=True)
                continue
            self._ids.discard(jid)
            _log.info("job %r removed: its last run has ended", jid.partition("/")[2])
