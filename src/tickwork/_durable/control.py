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
from dataclasses import dataclass
from typing import Final

from tickwork._core.text import iso
from tickwork.stores import JobState, RuntimeControl

__all__ = [
    "BACKFILL_CAP",
    "BACKFILL_MAX",
    "SAME_SLOT",
    "BackfillError",
    "BackfillWindow",
    "backfill_slots",
    "backfill_window",
    "default_actor",
    "following_slot",
    "run_backfill",
]

#: Most slots a backfill queues unless forced.
BACKFILL_CAP: Final = 1000
#: Most slots a backfill queues even when forced (the work stays bounded).
BACKFILL_MAX: Final = 100_000
#: Two due times closer than this (seconds) are one slot, as the stores judge them.
SAME_SLOT: Final = 0.001


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
        return None if schedule is None else schedule.next_after(slot)  # None: only after

    return following


@dataclass(frozen=True, slots=True)
class BackfillWindow:
    """The slots of a job in a backfill window, from the job's first slot on."""

    slots: list[float]
    """The job's slots in the window at or after its first slot, oldest first."""
    early: int
    """How many slots of the window lie before the job's first slot, left out (they
    are from before the job existed); at most `BACKFILL_MAX` + 1 are counted."""
    first_slot: float | None
    """The job's first slot (`JobState.first_slot`); ``None``: not known (a job stored
    before tickwork recorded it), and nothing is left out for it."""

    def early_text(self) -> str:
        """``"N slot(s) before the job's first slot T"``, for people; empty if none."""
        if not self.early or self.first_slot is None:
            return ""
        many = f"more than {BACKFILL_MAX:,}" if self.early > BACKFILL_MAX else f"{self.early:,}"
        return (
            f"{many} slot(s) before the job's first slot {iso(self.first_slot)}, the first"
            " after it was declared: they are from before it existed"
        )


def backfill_window(
    state: JobState, start: float, end: float, *, force: bool = False
) -> BackfillWindow:
    """The job's slots in ``[start, end]``, oldest first, and those left out before it existed.

    Slots before the job's first slot (`JobState.first_slot`) are left out and counted:
    a window reaching back before the job was declared is clipped, never refused. The
    cap applies to the slots kept.

    Raises:
        BackfillError: As `backfill_slots`.

    """
    _check_window(start, end)
    first_slot = state.first_slot
    if first_slot is None or first_slot <= start:
        return BackfillWindow(backfill_slots(state, start, end, force=force), 0, first_slot)
    kept = (
        backfill_slots(state, min(first_slot, end), end, force=force) if first_slot <= end else []
    )
    early = len(_grid(state, start, min(end, first_slot - SAME_SLOT), BACKFILL_MAX))
    return BackfillWindow([t for t in kept if t >= first_slot - SAME_SLOT], early, first_slot)


def run_backfill(
    control: RuntimeControl,
    state: JobState,
    start: float,
    end: float,
    *,
    force: bool,
    dry_run: bool,
    by: str,
    at: float,
    note: str | None,
) -> tuple[BackfillWindow, list[float]]:
    """Backfill (or with ``dry_run`` count) the job's slots in a window: the window, queued.

    The window is clipped at the job's first slot (`backfill_window`); the store
    queues, in one transaction, those not run or waiting already
    (`RuntimeControl.backfill_job`).
    """
    window = backfill_window(state, start, end, force=force)
    queued = control.backfill_job(state.id, window.slots, by=by, at=at, note=note, dry_run=dry_run)
    return window, queued


def backfill_slots(
    state: JobState, start: float, end: float, *, force: bool = False
) -> list[float]:
    """The job's slots in ``[start, end]``, oldest first.

    Fixed-rate jobs keep their grid (anchored on the next run, else the last slot);
    cron jobs their expression in their zone; `At` its instant. Fixed-delay jobs and
    `Once` have no grid to replay. The job's first slot is not looked at here
    (`backfill_window` clips at it).

    Raises:
        BackfillError: ``end`` before ``start``; a job without a grid; more than
            `BACKFILL_CAP` slots (unless ``force``) or `BACKFILL_MAX` slots.

    """
    _check_window(start, end)
    cap = BACKFILL_MAX if force else BACKFILL_CAP
    slots = _grid(state, start, end, cap)
    if len(slots) > cap:
        hint = " (--force to allow more)" if not force else ""
        raise BackfillError(
            f"job {state.spec.id!r} has more than {cap:,} slots between {iso(start)} and"
            f" {iso(end)}; refusing{hint}: backfill a shorter window"
        )
    return slots


def _check_window(start: float, end: float) -> None:
    if not (math.isfinite(start) and math.isfinite(end)):
        raise BackfillError(f"the window must be finite, got {start!r} to {end!r}")
    if end < start:
        raise BackfillError(f"the window ends ({iso(end)}) before it starts ({iso(start)})")


def _grid(state: JobState, start: float, end: float, cap: int) -> list[float]:
    """The job's slots in ``[start, end]``, oldest first; ``cap + 1`` of them at most.

    Raises:
        BackfillError: A job without a grid (fixed-delay, `Once`), or a fixed-rate one
            with no slot yet to anchor it on.

    """
    schedule = state.spec.schedule
    job = state.spec.id
    if schedule is None:  # chains: no grid; each run is queued by an upstream's end
        raise BackfillError(
            f"job {job!r} has no schedule of its own (it runs only after other jobs): it"
            " has no grid of slots to backfill (backfill its upstream job, or trigger it)"
        )
    anchor = state.next_run
    if anchor is None and state.last_run is not None:
        anchor = state.last_run.scheduled
    grid = schedule.grid(start if anchor is None else anchor)
    if grid is None:
        kind = "a fixed-delay job" if schedule.after_finish else "a one-shot Once"
        raise BackfillError(
            f"job {job!r} is {kind}: it has no grid of slots to backfill (trigger it instead)"
        )
    if end < start:
        return []
    if anchor is None and grid.anchored:
        raise BackfillError(f"job {job!r} has no slot yet to anchor its grid on")
    until = getattr(schedule, "until", None)
    if until is not None:
        end = min(end, until)
    return grid.slots(start, end, cap + 1)
