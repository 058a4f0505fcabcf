"""The durable scheduler's run policy: what a claimed slot does, and the job's next run.

`decide` is pure (no clock, no I/O, no store): given a job's stored state and ``now``
(UTC POSIX seconds) it returns a `Decision`: run the claimed slot, or give it up as
``"missed"`` / ``"skipped"`` (or ``"failed"`` when no run time can be computed), and
the job's next run. The durable scheduler calls it as the ``advance`` of
`Store.claim_due`, inside the claim transaction, so the slot taken and the schedule
moved past it are always one atomic step.

Terms (see ``docs/durability.md``, "Missed runs"): the claimed slot ``s`` is the job's
stored next run. The *passed slots* are the schedule's slots from ``s`` up to ``now``.
The job is **on time** when ``s`` is the only passed slot and, if the job has a
``grace``, ``now - s <= grace``. Otherwise it is **behind** and every passed slot
counts as missed; the job's ``missed`` policy says what happens to them. A slot that
waited for its concurrency pool (`JobState.pool_wait`) is judged by ``grace`` alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Final, Literal

from tickwork._core.schedules import Grid
from tickwork._core.schedules import Schedule as AnySchedule
from tickwork._core.text import iso
from tickwork.stores import JobSpec, JobState
from tickwork.stores.contract import GivenUp

__all__ = [
    "CORRECTION",
    "COUNT_LIMIT",
    "Decision",
    "after_clock_step",
    "decide",
    "decide_retry",
    "first_run",
    "planned_slots",
]

_log = logging.getLogger("tickwork.durable")

#: Missed slots are counted (for events and logs) up to this many; beyond it the count
#: says "at least this many". Counting a per-minute cron across a year of downtime
#: would otherwise walk half a million slots.
COUNT_LIMIT: Final = 10_000

#: A wall-clock step of at least this many seconds is a clock *correction*, not a DST
#: shift (docs/cron.md, after Vixie cron): slots of the time it vanished (forward) are
#: not run as on time, and fixed-time cron jobs run again in a repeated stretch (back).
CORRECTION: Final = 3 * 3600.0

Action = Literal["run", "missed", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one claimed slot, and where the job's schedule goes next."""

    action: Action
    """``"run"`` the claimed slot; give it up as ``"missed"`` (missed-run policy) or
    ``"skipped"`` (overlap policy) without running it; or ``"failed"``: no run time
    could be computed (see ``error``)."""
    next_run: float | None
    """The job's new next run (``None``: nothing further is planned)."""
    missed: int = 0
    """Slots given up by the missed-run policy in this decision (the claimed one
    included when ``action`` is ``"missed"``); at most `COUNT_LIMIT`."""
    skipped: int = 0
    """Slots given up by the overlap policy in this decision."""
    capped: bool = False
    """``missed="all"`` found more missed slots than ``missed_cap`` and dropped the
    oldest (a warning is logged)."""
    error: str | None = None
    """Why no run time could be computed, for ``"failed"``."""
    given_up: GivenUp | None = None
    """The slots after the claimed one that this decision gives up (written to the slot
    ledger by the claim); the claimed slot's own end is recorded when it finishes."""
    pool_wait: bool = False
    """The claimed slot waited for its pool: the slots given up came due meanwhile."""


def first_run(schedule: AnySchedule, now: float) -> float | None:
    """The first due time of a newly declared schedule: UTC POSIX seconds.

    `At` is due at its instant (already past: due at once, as late); `Once` its delay
    after ``now``; `Every` its ``first`` delay (default: one interval) after ``now``;
    `Cron` at its first fire time after ``now``. ``None`` when that is after the
    schedule's ``until``: it has ended.

    Raises:
        CronError: The cron expression or its zone is invalid here.

    """
    return schedule.first_run(now)


def planned_slots(schedule: AnySchedule, now: float, n: int) -> list[float]:
    """The first ``n`` due times of ``schedule`` if it were declared at ``now`` (pure).

    What ``tickwork next --file F --job NAME`` prints for a job of any schedule: the
    first run as `first_run` gives it, then the slots of its grid (an interval's
    calendar and a cron expression's walk included), fewer when it ends (``until``,
    or a one-shot).
    """
    first = first_run(schedule, now)
    if first is None:
        return []
    out = [first]
    grid = schedule.grid(first) if schedule.repeats else None
    if grid is not None:
        while len(out) < n:
            t = within_until(schedule, grid.after(out[-1]))
            if t is None:
                break
            out.append(t)
    return out[:n]


def within_until(schedule: AnySchedule | None, t: float | None) -> float | None:
    """``t``, or ``None`` when it lies after the schedule's ``until`` (it has ended)."""
    until = getattr(schedule, "until", None)
    if t is None or until is None or t <= until:
        return t
    return None


def decide(state: JobState, now: float, *, vanished: tuple[float, float] | None = None) -> Decision:
    """Apply the job's overlap and missed-run policy to its due slot (pure).

    Args:
        state: The job as stored, with ``next_run <= now`` (the slot being claimed).
        now: The claim time, UTC POSIX seconds.
        vanished: ``(a, b)``: the wall clock jumped forward from ``a`` to ``b`` by at
            least `CORRECTION` seconds. A fixed-rate or cron slot in ``(a, b]`` never
            counts as on time (no real time passed for it), so the ``missed`` policy
            decides it: with ``"skip"`` nothing runs for the vanished time.

    Returns:
        The decision; never raises for a bad schedule (``"failed"`` instead, with no
        next run, so one broken job cannot block a claim of the others).

    """
    try:
        decision = _decide(state, now, vanished)
    except Exception as exc:  # a cron zone missing on this host, say
        return Decision("failed", None, error=f"cannot compute run times: {exc}")
    nxt = within_until(state.spec.schedule, decision.next_run)
    return decision if nxt == decision.next_run else replace(decision, next_run=nxt)


def _decide(state: JobState, now: float, vanished: tuple[float, float] | None) -> Decision:
    spec = state.spec
    s = state.next_run
    if s is None:  # stores only claim jobs with a next run; be total anyway
        return Decision("skipped", None)
    schedule = spec.schedule
    grace = spec.grace
    late = grace is not None and now - s > grace
    if schedule is None or not schedule.repeats:  # None: runs only after others
        if late and spec.missed == "skip":
            return Decision("missed", None, missed=1)
        return Decision("run", None, missed=int(late))
    if within_until(schedule, s) is None:  # stored before its until was set: not a slot
        return Decision("skipped", None)
    grid = schedule.grid(s)
    if grid is None:  # fixed-delay: the next run is set when the run ends
        return _fixed_delay(state, schedule.next_after(now), late)
    if vanished is not None and vanished[0] < s <= vanished[1]:
        late = True
    overlapped = _overlapped(state, grid, now)
    if overlapped is not None:
        return overlapped
    if state.pool_wait == s and not late:
        return _waited(spec, grid, now)
    return _on_grid(spec, grid, now, late)


def _waited(spec: JobSpec, grid: Grid, now: float) -> Decision:
    """A slot that waited for its pool and is within ``grace``: it runs, late or not.

    Its own lateness judges it, not the slots that came due while it waited: those go
    as slots due during a run go (``overlap="allow"`` or ``missed="all"``: each waits
    its own turn; otherwise skipped), so a busy pool never drops a slot as missed.
    """
    following = grid.after(grid.s)
    if following > now or spec.overlap == "allow" or spec.missed == "all":
        return Decision("run", following)
    others = grid.passed(now, COUNT_LIMIT) - 1
    given_up = _others(grid, "skipped", others)
    return Decision("run", grid.after(now), skipped=others, given_up=given_up, pool_wait=True)


def _fixed_delay(state: JobState, provisional: float | None, late: bool) -> Decision:
    """A fixed-delay job's slot; ``provisional`` is its next run until the run ends.

    The real next run is set when the run ends (end + interval); if the runner dies,
    the provisional one keeps the job alive.
    """
    if state.claims:  # overlap="allow": a fixed-delay job still never overlaps
        return Decision("skipped", provisional, skipped=1)
    if late and state.spec.missed == "skip":
        return Decision("missed", provisional, missed=1)
    return Decision("run", provisional, missed=int(late))


def _overlapped(state: JobState, grid: Grid, now: float) -> Decision | None:
    """The overlap policy's decision if the slot came due during the last run, else None."""
    spec = state.spec
    s = grid.s
    last = state.last_run
    if not (
        spec.overlap != "allow"
        and last is not None
        and last.started is not None
        and last.ended is not None
        and last.outcome in ("ok", "failed", "timeout", "cancelled")
        and last.started <= s < last.ended
    ):
        return None
    # The slot came due while the previous run of this job was going (the store kept
    # it unclaimed until that run ended).
    if spec.overlap == "skip":
        during = grid.passed(min(last.ended, now), COUNT_LIMIT)
        return Decision(
            "skipped",
            grid.after(last.ended),
            skipped=during,
            given_up=_others(grid, "skipped", during - 1),
        )
    # queue: this one slot runs now; others that passed meanwhile are skipped.
    upto = grid.after(now)
    others = grid.passed(now, COUNT_LIMIT) - 1
    return Decision("run", upto, skipped=others, given_up=_others(grid, "skipped", others))


def _on_grid(spec: JobSpec, grid: Grid, now: float, late: bool) -> Decision:
    """A fixed-rate or cron slot: on time, or behind and given to the missed-run policy."""
    following = grid.after(grid.s)
    if following > now and not late:
        return Decision("run", following)  # on time
    passed = grid.passed(now, COUNT_LIMIT)
    if spec.missed == "skip":
        return Decision(
            "missed", grid.after(now), missed=passed, given_up=_others(grid, "missed", passed - 1)
        )
    if spec.missed == "once":
        return Decision(
            "run", grid.after(now), missed=passed - 1, given_up=_others(grid, "missed", passed - 1)
        )
    cap = spec.missed_cap
    if passed > cap:
        return _over_cap(spec, grid, now, passed)
    return Decision("run", following if following <= now else grid.after(now))


def _over_cap(spec: JobSpec, grid: Grid, now: float, passed: int) -> Decision:
    """``missed="all"`` with more than ``missed_cap`` passed slots: replay the newest only."""
    cap = spec.missed_cap
    # Never stop the job (K8s's >100 rule did).
    _log.warning(
        "job %r is %s%d runs behind, more than missed_cap=%d: the oldest are dropped,"
        " the last %d replayed",
        spec.id,
        "at least " if passed >= COUNT_LIMIT else "",
        passed,
        cap,
        cap,
    )
    return Decision(
        "missed",
        grid.tail(now, cap),
        missed=passed - cap,
        capped=True,
        given_up=_others(grid, "missed", passed - cap - 1),
    )


def _others(grid: Grid, outcome: Literal["missed", "skipped"], n: int) -> GivenUp | None:
    """The ``n`` slots after the claimed one, given up as ``outcome`` (None if none)."""
    return GivenUp(outcome, grid.after(grid.s), n) if n > 0 else None


def decide_retry(state: JobState, slot: float, now: float) -> Decision:
    """Decide a re-offered slot (a retry) when it is claimed again (pure).

    A retry is a slot whose earlier claim was lost (its owner died or stalled past its
    lease, before or, for ``at_least_once``, during the run) or handed back. It is
    decided by the same ``missed`` / ``grace`` rules as any claim, as of ``now``:

    - on time (no later slot has come and within ``grace``): ``"run"``;
    - behind, ``missed="skip"``: ``"missed"`` (given up, recorded);
    - behind, ``"once"``: ``"run"`` as the one catch-up of the missed window, unless a
      later slot is due or was taken already (it is the catch-up then): ``"missed"``;
    - behind, ``"all"``: ``"run"`` (replayed; the store re-offers retries before the
      job's later slots, so in order), unless more than ``missed_cap`` slots have
      passed since it: ``"missed"``, ``capped``.

    One-shots and fixed-delay jobs have no later slot: they run unless later than
    ``grace`` with ``"skip"``. The overlap policy is not applied again (the slot was
    let through it when first claimed). The job's next run is never moved for a retry:
    ``next_run`` of the decision is the stored one.

    Args:
        state: The job as stored now (its ``next_run`` is the job's own next slot,
            after ``slot``; its ``claims`` include this retry).
        slot: The retry's scheduled time.
        now: The claim time, UTC POSIX seconds.

    Returns:
        The decision; ``"failed"`` (never an exception) if no run time can be computed.

    """
    try:
        return _decide_retry(state, slot, now)
    except Exception as exc:
        return Decision("failed", state.next_run, error=f"cannot compute run times: {exc}")


def _decide_retry(state: JobState, slot: float, now: float) -> Decision:
    spec = state.spec
    keep = state.next_run
    schedule = spec.schedule
    late = spec.grace is not None and now - slot > spec.grace
    # chains (no schedule), one-shots and fixed-delay jobs have no grid
    grid = schedule.grid(slot) if schedule is not None and schedule.repeats else None
    if grid is None:
        if late and spec.missed == "skip":
            return Decision("missed", keep, missed=1)
        return Decision("run", keep, missed=int(late))
    if grid.after(slot) > now and not late:
        return Decision("run", keep)
    if spec.missed == "skip":
        return Decision("missed", keep, missed=1)
    if spec.missed == "once":
        last = state.last_run
        taken = (
            (keep is not None and keep <= now)
            or any(c.scheduled > slot for c in state.claims)
            or (last is not None and last.scheduled is not None and last.scheduled > slot)
        )
        return Decision("missed", keep, missed=1) if taken else Decision("run", keep)
    passed = grid.passed(now, COUNT_LIMIT)
    if passed > spec.missed_cap:
        _log.warning(
            "job %r: the re-offered slot %s is %s%d slots behind, more than missed_cap=%d: dropped",
            spec.id,
            iso(slot, millis=True),
            "at least " if passed >= COUNT_LIMIT else "",
            passed,
            spec.missed_cap,
        )
        return Decision("missed", keep, missed=1, capped=True)
    return Decision("run", keep)


def after_clock_step(state: JobState, now: float, step: float) -> float | None:
    """The job's next run after the wall clock stepped back, or ``None`` to keep it (pure).

    ``step`` is how far the wall clock jumped against real time (negative: back). A
    stored next run was computed on the old clock; after a step back it lies further
    ahead than the schedule allows, and left alone the job would stall for the step's
    length. Moved earlier, never later:

    - fixed-rate interval: the slot of its grid in ``(now, now + seconds]``;
    - fixed-delay interval: ``now + seconds``, if the stored one is further away;
    - wildcard cron (minute or hour field ``*...``): its next fire time after ``now``
      (it runs in both passes of a repeated stretch, following real time);
    - fixed-time cron: the same when the step is at least `CORRECTION` (a clock
      correction); a shorter step keeps it (it ran in the first pass, once);
    - one-shots, jobs with no next run, and forward steps (the ``missed`` policy
      decides those as due slots): ``None``.

    Raises:
        CronError: The job's cron expression or zone is invalid here.

    """
    n = state.next_run
    schedule = state.spec.schedule
    if step >= 0.0 or n is None or n <= now or schedule is None or not schedule.repeats:
        return None
    if schedule.fixed_time and -step < CORRECTION:
        return None
    grid = schedule.grid(n)  # fixed-rate: the slot of its grid in (now, now + interval]
    new = grid.after(now) if grid is not None else schedule.next_after(now)
    return new if new is not None and new < n else None
