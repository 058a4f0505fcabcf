"""The slot ledger of the SQL stores: its retention, its writes, its reads and pruning.

`LedgerQueries` is a part of `SQLStore`: it holds the ledger's retention (entries kept per
job, and their age) and the jobs written to since the last prune, and runs its statements
through its store's transactions and dialect (`SQLHost`). The functions here build the
entries that an operator's action or a claim gives up, as tuples in the column order of
``LEDGER_INSERT`` (``_sql``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, Final, Generic, Protocol

from ._checks import (
    check_claim,
    check_job_id,
    check_limit,
    check_outcome,
    check_positive,
    check_time,
)
from ._records import Claim, GivenUp, SlotRecord
from ._sqlbase import C, SQLHost
from ._streak import FAILED_OUTCOMES

__all__ = ["LedgerHost", "LedgerQueries", "given_up_entry", "manual_skip_entry", "newest_first"]

#: Most jobs trimmed, and most entries deleted by age, per `LedgerQueries.prune`.
_PRUNE_JOBS: Final = 64
_PRUNE_ROWS: Final = 2000
_FAILED: Final = tuple(sorted(FAILED_OUTCOMES))


def given_up_entry(job_id: str, gave: GivenUp, owner: str, now: float) -> tuple[Any, ...]:
    """The ledger entry of the slots a claim gives up beyond its own (``given_up``)."""
    if not isinstance(gave, GivenUp):
        raise TypeError(f"given_up() must return a GivenUp or None, got {gave!r}")
    return (
        job_id,
        gave.scheduled,
        gave.outcome,
        gave.slots,
        "schedule",
        now,
        None,
        now,
        owner,
        1,
        None,
        None,
        time.time(),
    )


def manual_skip_entry(job_id: str, scheduled: float, at: float, why: str) -> tuple[Any, ...]:
    """The ledger entry of a slot an operator's action gave up (origin ``manual``)."""
    return (job_id, scheduled, "skipped", 1, "manual", None, None, at, "", 1, why, None,
            time.time())  # fmt: skip


def newest_first(
    q: Callable[[str], str],
    select: str,
    filters: Sequence[tuple[str, Any]],
    limit: int,
    *,
    oldest: bool = False,
) -> tuple[str, list[Any]]:
    """``select`` with each filter whose value is not None, newest (largest seq) first.

    ``q`` translates the statement into the store's dialect. ``oldest``: the rows come
    oldest first instead, so the ``limit`` keeps the oldest (the caller reverses them).
    """
    used = [(condition, value) for condition, value in filters if value is not None]
    where = " WHERE " + " AND ".join(c for c, _ in used) if used else ""
    order = "ASC" if oldest else "DESC"
    return q(f"{select}{where} ORDER BY seq {order} LIMIT ?"), [*(v for _, v in used), limit]


class LedgerHost(SQLHost[C], Protocol[C]):
    """A store as its ledger sees it: `SQLHost`, and how it inserts entries."""

    def _insert_ledger(self, cur: C, entries: list[tuple[Any, ...]]) -> None:
        """The insert itself (see `SQLStore._insert_ledger`)."""
        ...

    def _attempt_no(self, cur: C, job_id: str, scheduled: float, retry: bool) -> int:
        """The attempt number of a slot's first run here (see `SQLStore._attempt_no`)."""
        ...


class LedgerQueries(Generic[C]):
    """The slot ledger of one store: retention, writes, `history` and `prune`.

    Args:
        store: The store whose transactions and dialect the statements use.
        keep: Entries kept per job, an int >= 0, or ``None`` for no count limit; 0
            writes no entries at all.
        days: Age in days beyond which entries are pruned, or ``None``.

    """

    def __init__(self, store: LedgerHost[C], keep: int | None, days: float | None) -> None:
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise ValueError(f"history_keep must be an int >= 0 or None, got {keep!r}")
        if days is not None:
            days = check_positive("history_days", days)
        self._store = store
        #: Entries kept per job (None: no count limit; 0: none written).
        self.keep = keep
        #: Age in days of the entries pruned (None: no age limit).
        self.days = days
        # The jobs with ledger entries since their last prune, the longest waiting first
        # (a dict keeps the order jobs were first noted in; noting one again keeps its place).
        self._written: dict[str, None] = {}
        self._written_lock = threading.Lock()  # batches may commit on their own threads
        #: Per job: ``(keep_ok, keep_failed)`` (see `set_job_retention`).
        self.by_outcome: dict[str, tuple[int | None, int | None]] = {}

    def set_job_retention(self, job_id: str, keep_ok: int | None, keep_failed: int | None) -> None:
        """Per-outcome limits for one job (see `SQLStore.set_job_retention`)."""
        job_id = check_job_id(job_id)
        for name, value in (("keep_ok", keep_ok), ("keep_failed", keep_failed)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"{name} must be an int >= 0 or None, got {value!r}")
        with self._written_lock:
            if keep_ok is None and keep_failed is None:
                self.by_outcome.pop(job_id, None)
            else:
                self.by_outcome[job_id] = (keep_ok, keep_failed)

    def write(self, cur: C, entries: list[tuple[Any, ...]]) -> None:
        """Insert ledger entries (tuples in `LEDGER_INSERT`'s column order)."""
        if self.keep == 0:  # no history kept: nothing written
            return
        self._store._insert_ledger(cur, entries)
        self.note_written(entries)

    def record_attempt(
        self,
        claim: Claim,
        *,
        outcome: str,
        started: float,
        ended: float,
        attempt: int,
        error: str | None = None,
        output: str | None = None,
    ) -> bool:
        """Write the ledger entry of one attempt of a held claim; False if it is not held.

        For a job's ``retries`` (and a thread's time limit, recorded when it passes):
        the claim stays held, its finish later frees it. ``attempt`` counts the claim's
        attempts from 1; the entry's number follows any abandoned attempts of the slot.
        """
        claim = check_claim(claim)
        outcome = check_outcome(outcome)
        started = check_time("started", started)
        ended = check_time("ended", ended)
        store = self._store

        def body(cur: C) -> bool:
            held = cur.execute(
                store._q("SELECT 1 FROM {claims} WHERE token = ? AND owner = ?"),
                (claim.token, claim.owner),
            ).fetchone()
            if held is None:
                return False
            first = store._attempt_no(cur, claim.job_id, claim.scheduled, claim.retry)
            entry = (claim.job_id, claim.scheduled, outcome, 1, claim.origin, claim.claimed_at,
                     started, ended, claim.owner, first + attempt - 1, error, output,
                     time.time())  # fmt: skip
            self.write(cur, [entry])
            return True

        return store._run(f"record attempt {attempt} of job {claim.job_id!r}", body)

    def note_written(self, entries: list[tuple[Any, ...]]) -> None:
        """Remember the jobs of ledger entries written, for `prune`."""
        with self._written_lock:
            for entry in entries:
                if not entry[0].startswith("~"):  # a one-off has one entry: days prune it
                    self._written.setdefault(entry[0], None)

    def history(
        self,
        job_id: str | None,
        since: float | None,
        outcome: str | None,
        before: int | None,
        limit: int,
        after: int | None = None,
    ) -> list[SlotRecord]:
        """The ledger, newest entry first (see `SQLStore.history`).

        With ``after``, the ``limit`` entries right after it: read oldest first through
        the same index, then turned round.
        """
        if job_id is not None:
            job_id = check_job_id(job_id)
        if since is not None:
            since = check_time("since", since)
        if outcome is not None:
            outcome = check_outcome(outcome)
        for name, seq in (("before", before), ("after", after)):
            if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
                raise TypeError(f"{name} must be an int (a seq) or None, got {seq!r}")
        query, params = newest_first(
            self._store._q,
            "SELECT {ledger_columns} FROM {ledger}",
            [("job_id = ?", job_id), ("outcome = ?", outcome), ("scheduled >= ?", since),
             ("seq < ?", before), ("seq > ?", after)],
            check_limit(limit),
            oldest=after is not None,
        )  # fmt: skip

        def body(cur: C) -> list[SlotRecord]:
            rows = [SlotRecord(*row) for row in cur.execute(query, params).fetchall()]
            return rows[::-1] if after is not None else rows

        return self._store._run("read the slot ledger", body, write=False)

    def prune(self, now: float) -> int:
        """Trim the ledger to its retention, bounded work (see `SQLStore.prune_history`)."""
        now = check_time("now", now)
        keep, days = self.keep, self.days
        with self._written_lock:
            # The longest waiting first: every job noted is trimmed within a bounded
            # number of prunes, however many others keep being written.
            jobs = list(islice(self._written, _PRUNE_JOBS)) if keep or self.by_outcome else []
            limits = {job: self.by_outcome[job] for job in jobs if job in self.by_outcome}
        if not jobs and days is None:
            return 0
        q = self._store._q

        def body(cur: C) -> int:
            gone = 0
            for job_id in jobs:
                if job_id in limits:
                    gone += self._trim_outcomes(cur, job_id, *limits[job_id])
                if not keep:
                    continue
                row = cur.execute(
                    q(
                        "SELECT seq FROM {ledger} WHERE job_id = ? ORDER BY seq DESC"
                        " LIMIT 1 OFFSET ?"
                    ),
                    (job_id, keep),
                ).fetchone()
                if row is not None:
                    gone += cur.execute(
                        q("DELETE FROM {ledger} WHERE job_id = ? AND seq <= ?"), (job_id, row[0])
                    ).rowcount
            if days is not None:
                gone += cur.execute(
                    q(
                        "DELETE FROM {ledger} WHERE seq IN"
                        " (SELECT seq FROM {ledger} ORDER BY seq LIMIT ?) AND recorded < ?"
                    ),
                    (_PRUNE_ROWS, now - days * 86400.0),
                ).rowcount
                # Operators' actions are kept as long (not counted in the result).
                cur.execute(
                    q(
                        "DELETE FROM {actions} WHERE seq IN"
                        " (SELECT seq FROM {actions} ORDER BY seq LIMIT ?) AND at < ?"
                    ),
                    (_PRUNE_ROWS, now - days * 86400.0),
                )
            return gone

        gone: int = self._store._run("prune the slot ledger", body)
        with self._written_lock:
            for job_id in jobs:
                self._written.pop(job_id, None)
        return gone

    def _trim_outcomes(
        self, cur: C, job_id: str, keep_ok: int | None, keep_failed: int | None
    ) -> int:
        """Delete ``job_id``'s ok entries past ``keep_ok`` and failed ones past ``keep_failed``."""
        q = self._store._q
        gone = 0
        for keep, outcomes in ((keep_ok, ("ok",)), (keep_failed, _FAILED)):
            if keep is None:
                continue
            among = f"outcome IN ({', '.join('?' for _ in outcomes)})"
            row = cur.execute(
                q(
                    f"SELECT seq FROM {{ledger}} WHERE job_id = ? AND {among}"
                    " ORDER BY seq DESC LIMIT 1 OFFSET ?"
                ),
                (job_id, *outcomes, keep),
            ).fetchone()
            if row is not None:
                gone += cur.execute(
                    q(f"DELETE FROM {{ledger}} WHERE job_id = ? AND {among} AND seq <= ?"),
                    (job_id, *outcomes, row[0]),
                ).rowcount
        return gone
