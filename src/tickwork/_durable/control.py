"""Runtime control of durable jobs: who acts, and the slot arithmetic of backfill and skip.

The store carries each action out and records it in one transaction
(`tickwork.stores.RuntimeControl`); what is computed from a job's schedule (the slots
of a backfill window, the slot after the next one) is computed here, from the stored
declaration, so `DurableScheduler` and the ``tickwork`` commands agree.
"""

from __future__ import annotations

import getpass
import math
import socket
from collections.abc import Callable
from typing import Final

from tickwork._core.schedules import At, Cron, Every, Once
from tickwork._core.text import iso
from tickwork._durable.decide import within_until
from tickwork.stores._model import JobState

__all__ = [
    "BACKFILL_CAP",
    "BACKFILL_MAX",
    "BackfillError",
    "backfill_slots",
    "default_actor",
    "following_slot",
]

#: Most slots a backfill queues unless forced.
BACKFILL_CAP: Final = 1000
#: Most slots a backfill queues even when forced (the work stays bounded).
BACKFILL_MAX: Final = 100_000


class BackfillError(ValueError):
    """A backfill that cannot be done as asked: the message says why and what to do."""


def default_actor() -> str:
    """``user@host`` of this process, for the record of who acted."""
    try:
        user = getpass.getuser()
    except Exception:  # no name for this uid (a container): say so, don't fail
        user = "unknown"
    return f"{user}@{socket.gethostname() or 'localhost'}"


def following_slot(state: JobState) -> Callable[[float], float | None]:
    """The slot after a given one on the job's schedule (``None``: the schedule ends).

    One-shots have no later slot; a fixed-delay job's next run is one interval later.
    """
    schedule = state.spec.schedule

    def following(slot: float) -> float | None:
        if isinstance(schedule, At | Once):
            return None
        if isinstance(schedule, Every):
            return within_until(schedule, slot + schedule.interval)
        assert isinstance(schedule, Cron)
        return within_until(schedule, schedule.expression.next_after_timestamp(slot))

    return following


def backfill_slots(
    state: JobState, start: float, end: float, *, force: bool = False
) -> list[float]:
    """The job's slots in ``[start, end]``, oldest first.

    Fixed-rate jobs keep their grid (anchored on the next run, else the last slot);
    cron jobs their expression in their zone; `At` its instant. Fixed-delay jobs and
    `Once` have no grid to replay.

    Raises:
        BackfillError: ``end`` before ``start``; a job without a grid; more than
            `BACKFILL_CAP` slots (unless ``force``) or `BACKFILL_MAX` slots.

    """
    if not (math.isfinite(start) and math.isfinite(end)):
        raise BackfillError(f"the window must be finite, got {start!r} to {end!r}")
    if end < start:
        raise BackfillError(f"the window ends ({iso(end)}) before it starts ({iso(start)})")
    schedule = state.spec.schedule
    cap = BACKFILL_MAX if force else BACKFILL_CAP
    job = state.spec.id

    def too_many() -> BackfillError:
        hint = " (--force to allow more)" if not force else ""
        return BackfillError(
            f"job {job!r} has more than {cap:,} slots between {iso(start)} and {iso(end)};"
            f" refusing{hint}: backfill a shorter window"
        )

    if isinstance(schedule, At):
        return [schedule.when] if start <= schedule.when <= end else []
    if isinstance(schedule, Once) or (isinstance(schedule, Every) and schedule.fixed_delay):
        kind = "a one-shot Once" if isinstance(schedule, Once) else "a fixed-delay job"
        raise BackfillError(
            f"job {job!r} is {kind}: it has no grid of slots to backfill (trigger it instead)"
        )
    until = getattr(schedule, "until", None)
    if until is not None:
        end = min(end, until)
    if isinstance(schedule, Every):
        anchor = state.next_run
        if anchor is None and state.last_run is not None:
            anchor = state.last_run.scheduled
        if anchor is None:
            raise BackfillError(f"job {job!r} has no slot yet to anchor its grid on")
        step = schedule.interval
        first = math.ceil((start - anchor) / step)
        last = math.floor((end - anchor) / step)
        if last - first + 1 > cap:
            raise too_many()
        slots = [anchor + k * step for k in range(first, last + 1)]
        return [t for t in slots if start <= t <= end]
    assert isinstance(schedule, Cron)
    slots = []
    t = schedule.expression.next_after_timestamp(math.nextafter(start, -math.inf))
    while t <= end:
        if len(slots) >= cap:
            raise too_many()
        slots.append(t)
        t = schedule.expression.next_after_timestamp(t)
    return slots
