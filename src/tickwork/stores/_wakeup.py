"""The next wake-up of the SQL stores, and the one a claim finds in passing.

`Store.next_wakeup` is the earliest time anything could be claimed: a job due, a lease
ending, a waiting run (a trigger, a re-offered slot), a pause ending, and, while other
listed owners hold claims, the next look for owners that are gone. A scheduler asks
for it after each look at the store, and on its own that is a transaction: at sparse
rates, one more per run than the claim itself.

So the claim asks it too, at the end of its own transaction, whenever it took fewer
runs than it was allowed (a full batch means more may be due, and the scheduler looks
again at once without asking). `ClaimWakeup.wakeup_after_claim` hands that answer to
the scheduler's next question, once. It is the state as the claim committed it; a
change after that wakes the scheduler anyway (a run it holds ending, a change another
process or thread announces), and its next look asks afresh.

A run ending here used to wake the scheduler for one more look every time, in case the
finish made something claimable that the last look could not see. That look is a
transaction of its own: at sparse rates a third one per run. `ClaimWakeup.look_after_finish`
says when it is needed: only when this store announced a change since it was last asked
(a chain run queued, a slot handed back, a next run set, a job that allows no overlap
freed by its claim's end) or the last wake-up read found waiting runs (triggers,
re-offered slots, queued chain runs), which a running claim of their job holds back.

The words wake-up, look, waiting run, hand back mean what docs/architecture.md,
"Glossary", says.
"""

from __future__ import annotations

import threading
from typing import Any, Final, Generic, Protocol, runtime_checkable

from ._sqlbase import C, SQLHost

__all__ = [
    "NEXT_WAKEUP",
    "ClaimWakeup",
    "LookCover",
    "LookNotices",
    "WakeupMixin",
    "WakeupQueries",
]

#: The earliest claimable due time, lease end, waiting run and pause end, and whether
#: other listed owners hold claims (``?{watched}``: see `SQLStore._watched`). The first is
#: ``ORDER BY ... LIMIT 1``, not ``min()``: a claimable test that is a join (PostgreSQL's
#: anti-join) would make ``min()`` read every job, where the order walks the due index.
NEXT_WAKEUP: Final = (
    "SELECT (SELECT j.next_run FROM {jobs} j WHERE {claimable} AND {runnable}"
    " ORDER BY j.next_run LIMIT 1),"
    " (SELECT min(lease_until) FROM {claims} WHERE owner <> ''),"
    " (SELECT min(c.scheduled) FROM {claims} c"
    " JOIN {jobs} j ON j.id = c.job_id WHERE c.owner = '' AND {unpaused}"
    " AND {gate} AND {runnable}),"
    " (SELECT min(paused_until) FROM {jobs} WHERE paused_until IS NOT NULL),"
    " EXISTS (SELECT 1 FROM {claims} c JOIN {nodes} n"
    " ON n.owner = c.owner WHERE c.owner <> ?{watched}),"
    " EXISTS (SELECT 1 FROM {claims} WHERE owner = '')"
)


@runtime_checkable
class ClaimWakeup(Protocol):
    """Optional store capability: the next wake-up, as the last claim found it.

    Both SQL stores implement it. `DurableScheduler` asks it before `Store.next_wakeup`
    after a look that claimed fewer runs than it asked for; where it answers, the look
    costs one transaction instead of two.
    """

    def wakeup_after_claim(self) -> tuple[bool, float | None]:
        """``(True, next_wakeup)`` as the last `Store.claim_due` committed it, once.

        ``(False, None)`` when the last claim did not find it (it took a full batch)
        or it was handed out already: ask `Store.next_wakeup` then.
        """
        ...

    def look_after_finish(self) -> bool:
        """Whether a run's recorded end calls for one more look at the store.

        True when a transaction of this store announced a change since the last call
        (the announcements are taken), when the last wake-up read found waiting runs
        (which a running claim of their job may hold back), or before any was read.
        A scheduler asks after recording a finish; where it answers False, the finish
        made nothing claimable that the last look's wake-up does not already cover.
        """
        ...


@runtime_checkable
class LookNotices(Protocol):
    """Optional store capability: the looks other schedulers on the store announced.

    A claim that took runs announces itself and the next wake-up it found; the other
    schedulers hear it (`PostgresStore`: on its listening connection, while
    `ChangeNotifier.wait_for_change` runs). A scheduler that hears another one taking
    the runs sleeps on instead of looking at every due time itself: several nodes
    sharing a store then cost about one look per due time, not one each.
    """

    def look_elsewhere(self) -> tuple[int, float, float | None] | None:
        """The latest look another scheduler announced, or None (none heard yet).

        ``(count, age, wake)``: how many were heard so far (it grows with each), the
        seconds since the latest was heard, and the next wake-up that look found (a
        POSIX time, or None: nothing due).
        """
        ...


@runtime_checkable
class ClaimAhead(Protocol):
    """Optional store hint: a look claims runs for more than the idle workers.

    By default a look claims as many due runs as there are idle workers, and its claim
    records them started: no run needs a start of its own. Where a look costs much
    more than a start (network round trips, row locks, several statements) and pools
    are small, a look that also claims ``claim_ahead`` pools of runs beyond the idle
    workers may cost less per run in a backlog: those wait in the executor and record
    their start as each begins (the claim's lease is renewed meanwhile).
    """

    #: Pools of runs a look claims beyond the idle workers (0: none).
    claim_ahead: int


@runtime_checkable
class LookCover(Protocol):
    """Optional store capability: one scheduler promises to look at every due time.

    With `LookNotices` alone, a scheduler that hears another taking runs still looks at
    each due time after it (the other's next announcement may be a second away). Here
    the one taking runs, while a worker of its own is free, also promises to look at
    every due time for a short while, renewed with its announcements and withdrawn the
    moment its workers are all busy; the others sleep on while a promise holds (they
    still look for their own work, and at least once a second), and leave it the
    changes they hear when it runs what they run. `PostgresStore` implements it (see
    ``stores/_looks.py``).
    """

    def cover(self, able: bool) -> bool:
        """Say whether this scheduler can look at every due time; whether it promises it.

        Called at each look: ``able`` is True when a worker of this scheduler was free
        (it may then promise, with its next announced look). False withdraws a promise
        at once, as does another promise made at the same moment that this one defers
        to. Returns whether a promise of this scheduler holds now.
        """
        ...

    def covered(self, *, alike: bool = False) -> float:
        """Seconds left of another scheduler's promise that this one defers to (0.0: none).

        ``alike``: only a promise of a scheduler that runs what this one runs (the same
        functions and modules allowed) counts: it looks for the changes this one hears
        (an enqueue, a trigger) as well, so this one may leave them to it.
        """
        ...


class _Host(SQLHost[C], Protocol[C]):
    _recovery: Any

    def _announce_look(self, cur: C, owner: str, wake: float | None) -> None: ...

    def _watched(self) -> tuple[Any, ...]: ...

    def _runnable(self) -> tuple[Any, ...]: ...

    def _liveness_wait(self) -> float: ...


class WakeupQueries(Generic[C]):
    """The wake-up part of `SQLStore`: the query, and the answer a claim left."""

    def __init__(self, host: _Host[C]) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._left: tuple[bool, float | None] = (False, None)
        self._changes = False  # announced since `look_after_finish` last asked
        self._waiting = True  # the last read found waiting runs (unknown: assume so)

    def find(self, cur: C) -> float | None:
        """The next wake-up (see `Store.next_wakeup`), read in ``cur``'s transaction."""
        host = self._host
        runnable = host._runnable()  # the one-offs this node claims (stores/_oneoffs.py)
        params = (*runnable, *runnable, *host._watched())
        row = cur.execute(host._q(NEXT_WAKEUP), params).fetchone()
        self._waiting = bool(row[5])
        times = [t for t in row[:4] if t is not None]
        seen = host._recovery.now_seen
        if row[4] and seen is not None:
            times.append(seen + host._liveness_wait())
        return min(times) if times else None

    def found_by_claim(self, cur: C, owner: str | None) -> float | None:
        """`find`, at the end of a claim; announced to the others if ``owner`` took runs."""
        value = self.find(cur)
        if owner is not None:
            self._host._announce_look(cur, owner, value)
        return value

    def changed(self) -> None:
        """A transaction of this store may make a run claimable sooner (it announced so)."""
        with self._lock:
            self._changes = True

    def look_after_finish(self) -> bool:
        """See `ClaimWakeup.look_after_finish`: the announcements taken, or waiting runs."""
        with self._lock:
            changes, self._changes = self._changes, False
        return changes or self._waiting

    def leave(self, value: float | None) -> None:
        """A claim found ``value``; it is handed out after the claim's commit."""
        with self._lock:
            self._left = (True, value)

    def forget(self) -> None:
        """The claim found none (a full batch), or did not commit."""
        with self._lock:
            self._left = (False, None)

    def take(self) -> tuple[bool, float | None]:
        """What the last claim left, once (see `ClaimWakeup.wakeup_after_claim`)."""
        with self._lock:
            left, self._left = self._left, (False, None)
        return left


class WakeupMixin:
    """`ClaimWakeup` for a store that holds its `WakeupQueries` part as ``_wakeups``."""

    _wakeups: WakeupQueries[Any]

    def wakeup_after_claim(self) -> tuple[bool, float | None]:
        """`Store.next_wakeup` as the last claim committed it, once (`ClaimWakeup`)."""
        return self._wakeups.take()

    def look_after_finish(self) -> bool:
        """Whether a recorded finish calls for one more look (`ClaimWakeup`)."""
        return self._wakeups.look_after_finish()

    def _announce_look(self, cur: Any, owner: str, wake: float | None) -> None:
        """Tell other schedulers that ``owner`` took runs (`LookNotices`); no-op here."""
