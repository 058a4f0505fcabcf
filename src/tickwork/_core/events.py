"""Events: what happened to a run (`RunEvent`, `EventKind`), and how listeners hear it.

Every scheduler (the core, the drivers, the durable engine) reports the life of its
runs as `RunEvent` values to its listeners; one that raises is logged and skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["EventKind", "Listener", "RunEvent"]


def _log() -> logging.Logger:
    """The ``tickwork`` logger, imported on first use (`logging` imports `threading`)."""
    import logging

    return logging.getLogger("tickwork")


class EventKind(Enum):
    """What happened to a run, as reported to listeners."""

    STARTED = "started"
    """The job is about to be called."""
    FINISHED = "finished"
    """The job returned normally."""
    FAILED = "failed"
    """The job raised an `Exception` (see `RunEvent.error`)."""
    SKIPPED = "skipped"
    """A due run was not started because the previous run was still going (drivers)."""
    MISSED = "missed"
    """Fixed-rate slots were skipped because the scheduler ran late (`RunEvent.missed`)."""


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event in the life of a run, delivered to every listener.

    Times are readings of the scheduler's clock (seconds, the same scale as the due
    times). ``started`` and ``duration`` are ``None`` where they do not apply (a
    skipped or missed run never started; a started run has no duration yet).
    """

    kind: EventKind
    """What happened."""
    task_id: int
    """The task the run belongs to."""
    scheduled: float
    """The due time of the run."""
    started: float | None = None
    """When the job was called."""
    duration: float | None = None
    """How long the job ran, for FINISHED and FAILED."""
    error: Exception | None = None
    """The exception, for FAILED."""
    missed: int = 0
    """How many fixed-rate slots were skipped, for MISSED (and, from the durable
    scheduler, how many slots a SKIPPED event gave up)."""
    pool_wait: bool = False
    """For SKIPPED from `DurableScheduler`: the slots came due while the job's run
    waited for its concurrency pool (not during a run); that run starts now."""
    job_id: str | None = None
    """The durable job's id, for events of `DurableScheduler` (its ``task_id`` is 0
    and its times are wall-clock POSIX seconds); ``None`` for the other schedulers."""
    name: str | None = field(default=None, compare=False)
    """The task's name as `tasks` shows it (given, or the function's qualified name);
    the job id for `DurableScheduler`. A low-cardinality label for metrics."""
    origin: str | None = field(default=None, compare=False)
    """For STARTED from `DurableScheduler`: what made the run, as the slot ledger says
    it (``"schedule"``, ``"manual"``, ``"backfill"``, ``"after"``: a chain); else ``None``."""
    func: str | None = field(default=None, compare=False)
    """For the events of `DurableScheduler`: the job's function, ``"module:function"``
    (a one-off's runs are counted under it: their ids are one a run)."""


Listener = Callable[[RunEvent], object]


def _deliver(listeners: tuple[Listener, ...] | list[Listener], event: RunEvent) -> None:
    """Call every listener with ``event``; one that raises is logged and skipped.

    Shared by the core (`Scheduler._emit`) and the drivers (``tickwork._core.runs``), so
    every event source contains a failing listener the same way.
    """
    for listener in tuple(listeners):
        try:
            listener(event)
        except Exception:
            _log().exception("event listener %r raised on %s", listener, event)
