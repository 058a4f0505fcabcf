"""Operators' actions on one job, shared by the ``tickwork`` verbs and the HTTP API.

Each function carries one action out on a store (`tickwork.stores.RuntimeControl`),
recorded with who took it, and returns what happened in words (the lines ``tickwork
pause`` and its siblings print) with the figures a program wants. What an action
refuses it refuses the same way for both: the store's errors (`JobNotFoundError`,
`JobPausedError`, `BackfillError`, `ValueError`) and `Refused`, with one message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

from tickwork._core.text import iso, iso_due
from tickwork._durable.control import BackfillWindow, following_slot, run_backfill
from tickwork.stores import Claim, JobNotFoundError, JobState, RuntimeControl

__all__ = [
    "CONFIRM_ABOVE",
    "Done",
    "Refused",
    "backfill",
    "backfill_lines",
    "cancel_waiting",
    "named",
    "over_max",
    "pause",
    "resume",
    "skip_next",
    "trigger",
    "waiting_lines",
]

#: A backfill of more runs than this is confirmed first (``--max`` / ``max`` changes it).
CONFIRM_ABOVE: Final = 1000


class Refused(Exception):
    """An action refused for a reason of its own (not the store's): the message says why.

    ``status`` is what ``tickwork`` exits with (2: the request, 1: the state).
    """

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Done:
    """What an action did: its lines for people, its figures for programs."""

    lines: list[str]
    result: dict[str, Any] = field(default_factory=dict)


def named(exc: Exception, job_id: str | None, name: str) -> str:
    """The error with the job's stored id replaced by the name the operator typed."""
    text = str(exc)
    return text.replace(repr(job_id), repr(name)) if job_id else text


def _state(store: Any, job_id: str) -> JobState:
    state: JobState | None = store.get(job_id)
    if state is None:
        raise JobNotFoundError(f"no job with id {job_id!r}")
    return state


def pause(
    control: RuntimeControl,
    job_id: str,
    name: str,
    *,
    by: str,
    note: str | None,
    until: float | None,
) -> Done:
    """Pause the job (until ``until``, if given)."""
    control.pause_job(job_id, by=by, at=time.time(), note=note, until=until)
    words = "" if until is None else f" until {iso(until)}"
    return Done([f"paused {name}{words}"], {"paused": True, "until": _iso(until)})


def resume(control: RuntimeControl, job_id: str, name: str, *, by: str, note: str | None) -> Done:
    """Resume the job; nothing done if it was not paused."""
    if control.resume_job(job_id, by=by, at=time.time(), note=note):
        return Done([f"resumed {name}"], {"resumed": True})
    return Done([f"{name} was not paused; nothing done"], {"resumed": False})


def trigger(control: RuntimeControl, job_id: str, name: str, *, by: str, note: str | None) -> Done:
    """Queue one run now, under the job's overlap policy."""
    if control.trigger_job(job_id, by=by, at=time.time(), note=note) == "queued":
        line = f"triggered {name}: it runs now (on the next daemon to look)"
        return Done([line], {"result": "queued"})
    line = (
        f"skipped: a run of {name} is going or waiting and its overlap policy is"
        " 'skip' (recorded in the ledger)"
    )
    return Done([line], {"result": "skipped"})


def skip_next(control: Any, job_id: str, name: str, *, by: str, note: str | None) -> Done:
    """Give up the job's next slot."""
    state = _state(control, job_id)
    done = control.skip_next_job(job_id, following_slot(state), by=by, at=time.time(), note=note)
    if done is None:
        return Done([f"{name} has no next run to skip"], {"skipped": None, "next_run": None})
    after = "none" if done[1] is None else iso(done[1])
    line = f"skipped the run of {name} due {iso(done[0])}; next run {after}"
    return Done([line], {"skipped": _iso(done[0]), "next_run": _iso(done[1])})


def backfill(
    control: Any,
    job_id: str,
    name: str,
    start: float,
    end: float,
    *,
    by: str,
    note: str | None,
    dry_run: bool,
    most: int | None,
) -> Done:
    """Backfill the job's slots in ``[start, end]`` (or with ``dry_run`` say what it would).

    ``most``: refuse (`Refused`, nothing queued) to queue more runs than this; ``None``:
    however many (up to the library's cap, `tickwork._durable.control.BACKFILL_MAX`).
    """
    state = _state(control, job_id)

    def run(dry: bool) -> tuple[BackfillWindow, list[float]]:
        return run_backfill(
            control, state, start, end, force=True, dry_run=dry, by=by, at=time.time(), note=note
        )

    window, queued = run(True)
    if not dry_run:
        if most is not None and len(queued) > most:
            raise Refused(over_max(name, queued, most))
        window, queued = run(False)
    result = {
        "dry_run": dry_run,
        "queued": len(queued),
        "first": _iso(queued[0]) if queued else None,
        "last": _iso(queued[-1]) if queued else None,
        "before_first_slot": window.early,
        "left_out": len(window.slots) - len(queued),
    }
    return Done(backfill_lines(name, window, queued, dry=dry_run), result)


def over_max(name: str, queued: list[float], most: int) -> str:
    """Why a backfill of more than ``most`` runs was refused, and what to do instead."""
    return (
        f"this would queue {_runs(name, queued)}: more than --max {most:,}."
        f" Nothing was queued. See them with --dry-run, then run again with --yes"
        f" (or --max {len(queued)})"
    )


def _runs(name: str, queued: list[float]) -> str:
    return f"{len(queued):,} runs of {name}, {iso(queued[0])} to {iso(queued[-1])}"


def backfill_lines(
    name: str, window: BackfillWindow, queued: list[float], *, dry: bool
) -> list[str]:
    """What a backfill queued (or would), and what it left out and why."""
    verb = "would queue" if dry else "queued"
    if queued:
        lines = [f"{verb} {len(queued)} slot(s) of {name}, {iso(queued[0])} to {iso(queued[-1])}"]
    else:
        lines = [f"no slot of {name} to backfill in that window"]
    if window.early:
        lines.append(f"left out {window.early_text()}")
    elif window.first_slot is None:
        lines.append(
            f"note: when {name} was first declared is not recorded (it was stored by an"
            " older tickwork): slots from before it are not left out"
        )
    left = len(window.slots) - len(queued)
    if left:
        lines.append(
            f"left out {left:,} slot(s): ran or waiting already, or not before now and the next run"
        )
    if dry:
        lines.append("dry run: nothing was queued")
    return lines


def waiting_lines(name: str, waiting: tuple[Claim, ...], limit: int) -> list[str]:
    """The job's waiting runs, for people: how many by origin, then one a line."""
    if not waiting:
        return [f"{name} has no waiting run"]
    origins: dict[str, int] = {}
    for c in waiting:
        origins[c.origin] = origins.get(c.origin, 0) + 1
    each = ", ".join(f"{n} {origin}" for origin, n in sorted(origins.items()))
    lines = [
        f"{name}: {len(waiting)} waiting run(s) ({each}),"
        f" {iso_due(waiting[0].scheduled)} to {iso_due(waiting[-1].scheduled)}"
    ]
    for c in waiting[:limit]:
        lines.append(f"  {iso_due(c.scheduled)}  {waiting_why(c)}")
    if len(waiting) > limit:
        lines.append(f"  ... and {len(waiting) - limit} more (--limit to show more)")
    return lines


def waiting_why(c: Claim) -> str:
    """Why a waiting run runs: its origin, or ``re-offered`` for a recovered slot."""
    return "re-offered" if c.retry and c.origin == "schedule" else c.origin


def cancel_waiting(
    control: Any, job_id: str, name: str, *, slot: float | None, by: str, note: str | None
) -> Done:
    """Cancel the job's waiting runs (all, or the one due at ``slot``).

    Raises:
        Refused: ``slot`` names no waiting run (status 1).

    """
    state = _state(control, job_id)
    cancelled = control.cancel_waiting_runs(
        job_id, following_slot(state), slot=slot, by=by, at=time.time(), note=note
    )
    result = {"cancelled": len(cancelled), "slots": [iso_due(t) for t in cancelled]}
    if cancelled:
        span = iso_due(cancelled[0])
        if len(cancelled) > 1:
            span += f" to {iso_due(cancelled[-1])}"
        line = (
            f"cancelled {len(cancelled)} waiting run(s) of {name}, {span}"
            " (recorded 'cancelled' in the ledger)"
        )
        return Done([line], result)
    if slot is None:
        return Done([f"{name} has no waiting run; nothing done"], result)
    raise Refused(
        f"{name} has no waiting run due {iso(slot, millis=True)}"
        f" (`tickwork cancel {name} --list` shows them); nothing done",
        status=1,
    )


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso(ts, millis=True)
