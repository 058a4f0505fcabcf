"""Skips logged as they pass: the slots of ``overlap = "skip"`` jobs held by a running run.

The durable layer decides such a slot only when the blocking run ends (it stays
unclaimed until then); `HeldSlots` logs the slots as they pass, at most one line per job
per second with a count (a *stretch*, see docs/architecture.md), and when the decision
comes it logs only what is left.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tickwork._core.events import EventKind, RunEvent
from tickwork._daemon.jobsfile.config import JobConfig
from tickwork._daemon.runlog import RunLog
from tickwork._durable.scheduler import DurableScheduler
from tickwork.stores import JobState, Schedule, Store

__all__ = ["SKIP_CHECK", "HeldSlots"]

SKIP_CHECK: Final = 0.2  # how often to look for slots passing while a run is held
_SKIP_LINE_EVERY: Final = 1.0  # at most one skip line per job per this many seconds
_SKIP_COUNT_LIMIT: Final = 100_000  # slots counted per look (a tiny interval, a long hang)


def _first_unseen(schedule: Schedule, first: float, lo: float | None) -> float | None:
    """The first slot of ``schedule``'s grid through ``first`` after ``lo``.

    ``lo=None``: ``first`` itself. ``None`` for a schedule without a grid.
    """
    grid = schedule.grid(first) if schedule.repeats else None
    if grid is None:
        return None
    return first if lo is None or lo < first else grid.after(lo)


def _slots_between(
    schedule: Schedule, first: float, lo: float | None, hi: float
) -> tuple[int, float | None, float | None]:
    """Slots of ``schedule``'s grid through ``first`` that lie in ``(lo, hi]``.

    ``lo=None`` counts from ``first`` itself. Only fixed-rate and cron schedules have
    a grid; for the others the answer is none. A calendar's excluded days have none.

    Returns:
        ``(count, first slot, last slot)``, counting at most `_SKIP_COUNT_LIMIT`.
    """
    start = _first_unseen(schedule, first, lo)
    grid = schedule.grid(first)
    if start is None or grid is None:
        return 0, None, None
    return grid.span(start, hi, _SKIP_COUNT_LIMIT)


@dataclass(slots=True)
class _Stretch:
    """The slots of one job that have passed while one of its runs was held here."""

    first: float
    """The job's stored next run when the stretch was seen: its first blocked slot."""
    schedule: Schedule
    seen_until: float | None = None
    """Slots up to here have been counted (None: none yet)."""
    logged: int = 0
    """How many of them have been logged."""
    pending: int = 0
    """Counted but not logged yet (rate limit)."""
    pending_first: float = 0.0
    pending_last: float = 0.0
    last_line: float = -math.inf
    """When (monotonic) the last skip line of this stretch was written."""


class HeldSlots:
    """The stretches of one daemon's jobs: counted by `check`, closed by `on_event`.

    Args:
        scheduler: The daemon's scheduler (what runs, its owner, its wall clock).
        store: Where the jobs' next runs and claims are read.
        log: Where the skip lines go.
        namespace: The daemon's namespace; other jobs are not looked at.
        job: The running file's job of a name (None: not in the file).
    """

    def __init__(
        self,
        scheduler: DurableScheduler,
        store: Store,
        log: RunLog,
        *,
        namespace: str,
        job: Callable[[str], JobConfig | None],
    ) -> None:
        self._scheduler = scheduler
        self._store = store
        self._log = log
        self._namespace = namespace
        self._job = job
        self._stretches: dict[str, _Stretch] = {}  # job id -> slots passing while held
        self._lock = threading.Lock()

    def on_event(self, event: RunEvent, name: str) -> None:
        """A run of job ``name`` started (its stretch is over) or slots were decided."""
        assert event.job_id is not None
        if event.kind is EventKind.STARTED:  # a new run: any stretch before it is over
            with self._lock:
                stretch = self._stretches.pop(event.job_id, None)
            if stretch is not None and stretch.pending:
                self._log_pending(name, stretch)
            return
        if event.kind not in (EventKind.SKIPPED, EventKind.MISSED):
            return
        reason = "missed" if event.kind is EventKind.MISSED else "overlap"
        reason = "pool" if event.pool_wait else reason
        count = max(1, event.missed)
        with self._lock:
            stretch = self._stretches.get(event.job_id)
            if stretch is not None and stretch.first == event.scheduled:
                del self._stretches[event.job_id]
            else:
                stretch = None
        if stretch is None:
            self._log.skipped(name, event.scheduled, reason=reason, count=count)
            return
        # The durable layer decided the slots this stretch has been logging as they
        # passed: log only the ones not logged yet.
        left = count - stretch.logged
        if left <= 0:
            return
        if stretch.pending:
            start = stretch.pending_first
        else:
            after = _first_unseen(stretch.schedule, stretch.first, stretch.seen_until)
            start = event.scheduled if after is None else after
        self._log.skipped(name, start, reason=reason, count=left)

    def check(self) -> None:
        """Log the slots of ``overlap = "skip"`` jobs that pass while their run goes on.

        Lines are rate-limited: at most one per job per second, with a count. Called
        every `SKIP_CHECK` seconds by the daemon's main loop while runs go on.
        """
        for jid in self._scheduler.running():
            namespace, _, name = jid.partition("/")
            job = self._job(name)
            if namespace != self._namespace or job is None or job.overlap != "skip":
                continue
            now = self._scheduler.now()
            state = self._store.get(jid)
            if state is None or state.next_run is None or state.next_run > now:
                continue
            if state.spec.schedule is None:  # chains: runs only after others, no grid
                continue
            starts = self._starts(state)
            if not starts:
                continue  # claimed, not started yet: nothing overlaps it so far
            if jid not in self._scheduler.running():
                continue  # it ended meanwhile: the durable layer decides the slot
            # Held from before the slot to `now` and after: every slot up to `now`
            # came while it ran.
            self._count(name, jid, state.next_run, state.spec.schedule, min(starts), now)

    def _starts(self, state: JobState) -> list[float]:
        """When this daemon's runs of the job started (its claims held here)."""
        owner = self._scheduler.owner
        return [c.started for c in state.claims if c.owner == owner and c.started is not None]

    def _count(
        self, name: str, jid: str, next_run: float, schedule: Schedule, start: float, now: float
    ) -> None:
        """Count the stretch's slots up to ``now``; log them when a line is due."""
        with self._lock:
            stretch = self._stretches.get(jid)
            if stretch is None or stretch.first != next_run:
                stretch = _Stretch(next_run, schedule)
                self._stretches[jid] = stretch
            lo = stretch.seen_until
            if lo is None and stretch.first < start:
                # Its first slot came before the run started (the pool was busy):
                # the durable layer decides that one; count those during the run.
                lo = start - 1e-6
            count, first, last = _slots_between(stretch.schedule, stretch.first, lo, now)
            stretch.seen_until = now
            if count:
                if not stretch.pending:
                    stretch.pending_first = first or now
                stretch.pending += count
                stretch.pending_last = last or now
            due = stretch.pending and time.monotonic() - stretch.last_line >= _SKIP_LINE_EVERY
            if due:
                self._log_pending(name, stretch)

    def _log_pending(self, name: str, stretch: _Stretch) -> None:
        self._log.skipped(
            name,
            stretch.pending_first,
            reason="overlap",
            count=stretch.pending,
            last=stretch.pending_last,
        )
        stretch.logged += stretch.pending
        stretch.pending = 0
        stretch.last_line = time.monotonic()
