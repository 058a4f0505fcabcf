"""A claim's upkeep in one read: which of its three chores can find anything this time.

Before it takes due runs, every claim ends the pauses whose time has come
(`ControlActions.resume_ended`), recovers the claims whose lease ended
(`ClaimRecovery.recover`) and hands out the runs waiting unowned (retries, triggers,
queued chain runs: `LookUpkeep.take_waiting`). Each of these reads almost always finds
nothing, yet at sparse rates, where a claim takes one run, they were three of the
thirteen statements a run cost. `LookUpkeep` asks the three questions in one statement,
and the claim makes only the reads that can find something. The answers are the same
conditions the chores filter on, or looser (a waiting run of a paused job still says
"look"), so nothing a chore would have found is skipped.

The words upkeep, waiting run, lease mean what docs/architecture.md, "Glossary", says.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Generic, NamedTuple, Protocol

from ._jobspec import JobSpec
from ._pools import PoolQueries
from ._records import Claim
from ._sqlbase import C, SQLHost

__all__ = ["LookUpkeep", "Upkeep", "UpkeepHost"]

# Each the earliest of its kind, read from its index, compared with now: whatever the
# plan (a prepared statement's generic plan included), never a scan of every job.
_DUE = (
    "SELECT (SELECT min(paused_until) FROM {jobs} WHERE paused_until IS NOT NULL) <= ?,"
    " (SELECT min(lease_until) FROM {claims} WHERE owner <> '') <= ?,"
    " (SELECT min(scheduled) FROM {claims} WHERE owner = '') <= ?"
)


class Upkeep(NamedTuple):
    """Which of a claim's chores can find something now."""

    pauses: bool
    """A pause with an end time has ended (`ControlActions.resume_ended`)."""
    expired: bool
    """A held claim's lease has ended (`ClaimRecovery.recover`)."""
    waiting: bool
    """An unowned run is waiting to be taken (`LookUpkeep.take_waiting`)."""


class UpkeepHost(SQLHost[C], Protocol[C]):
    """A store as its claim's upkeep sees it: the `SQLStore` attributes it uses."""

    _pools: PoolQueries[C]

    def _candidates(
        self, cur: C, now: float, seen: list[str], n: int, *, retries: bool
    ) -> list[Sequence[Any]] | None:
        """Up to ``n`` rows to claim, in claim order; None when there are none left."""
        ...

    def _decode(self, job_id: str, text: str, *, strict: bool) -> JobSpec | None:
        """Decode a stored spec."""
        ...


class LookUpkeep(Generic[C]):
    """The one read that tells a claim which chores to do, and the waiting runs it takes.

    A part of `SQLStore`.

    Args:
        store: The store whose dialect, candidates and pools the claim uses.

    """

    def __init__(self, store: UpkeepHost[C]) -> None:
        self._store = store
        self._query = store._q(_DUE)
        self._retake = store._q(
            "UPDATE {claims} SET token = ?, owner = ?, claimed_at = ?,"
            " lease_until = ?, started = NULL WHERE token = ?"
        )

    def due(self, cur: C, now: float) -> Upkeep:
        """Which chores can find something at ``now``, in the claim's transaction ``cur``."""
        pauses, expired, waiting = cur.execute(self._query, (now, now, now)).fetchone()
        return Upkeep(bool(pauses), bool(expired), bool(waiting))

    def take_waiting(
        self, cur: C, now: float, owner: str, lease: float, limit: int, pending: list[Claim]
    ) -> None:
        """Hand out waiting runs (oldest slot first) as fresh claims, up to ``limit``.

        Retries of recovered slots, runs asked for by an operator, queued chain runs.
        The job's next run is left alone and ``advance`` is not called (later slots may
        have been taken since); the caller decides the retry again (``DurableScheduler``:
        `decide_retry`).
        """
        store = self._store
        seen: list[str] = []  # looked at this call: never looked at twice
        while len(pending) < limit:
            asked, before = limit - len(pending), len(seen)
            rows = store._candidates(cur, now, seen, asked, retries=True)
            if rows is None:
                return
            taken: list[tuple[str, str, float, float, str]] = []
            for old, job_id, scheduled, text, origin, *_ in rows:
                spec = store._decode(job_id, text, strict=False)
                if not store._pools.admit(spec, cur):  # unreadable, or its pool is full
                    continue
                token = secrets.token_hex(16)
                taken.append((token, owner, now, now + lease, old))
                pending.append(
                    Claim(
                        token, job_id, owner, scheduled, now, now + lease, None, spec, True, origin
                    )
                )
            if taken:
                cur.executemany(self._retake, taken)
            if len(seen) - before < asked:  # fewer looked at than asked: none are left
                return
