"""A job's failure streak, read from a slot ledger: for ``tickwork jobs``, the page, metrics.

`failure_streak` counts the failed runs since the newest ``ok`` one. It reads any object
with the ledger's ``history`` (a `tickwork.stores.SlotLedger` store or a
`tickwork.DurableScheduler`), so every surface counts the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from ._records import SlotRecord
from ._sqlbase import C, SQLHost

__all__ = [
    "FAILED_OUTCOMES",
    "NEWEST_CHUNK",
    "STREAK_DEPTH",
    "LedgerReader",
    "failure_streak",
    "newest_entries",
]

#: Ledger entries read per job for its failure streak: a longer streak shows as this.
STREAK_DEPTH: Final = 200

#: Jobs whose newest ledger entries one statement of `newest_entries` reads.
NEWEST_CHUNK: Final = 500

#: The outcomes of a run that failed. Given-up slots (missed, skipped, cancelled) neither
#: break nor extend a streak.
FAILED_OUTCOMES: Final = frozenset({"failed", "timeout", "abandoned"})


class LedgerReader(Protocol):
    """What `failure_streak` reads: the slot ledger's ``history``, newest first."""

    def history(
        self, job_id: str | None = None, *, outcome: str | None = None, limit: int = 100
    ) -> Sequence[SlotRecord]: ...


def failure_streak(
    ledger: LedgerReader, job_id: str, *, excluding: float | None = None
) -> tuple[int, SlotRecord | None]:
    """``(failed runs since the newest ok one, that ok entry)`` of ``job_id``.

    Counted over the newest `STREAK_DEPTH` entries; the ok entry is ``None`` when none
    is among them (look further with ``history(job_id, outcome="ok", limit=1)``). The
    failed attempts of one run (its ``retries``: consecutive entries of one slot) count
    once. ``excluding``: a slot whose entries are left out (the run still going, whose
    retried attempts are in the ledger already).

    Raises:
        StoreError: The ledger cannot be read.

    """
    failures = 0
    counted: float | None = None  # the slot of the failed run counted last
    for entry in ledger.history(job_id, limit=STREAK_DEPTH):
        if entry.scheduled == excluding:
            continue
        if entry.outcome == "ok":
            return failures, entry
        if entry.outcome in FAILED_OUTCOMES and entry.scheduled != counted:
            failures += 1
            counted = entry.scheduled
    return failures, None


def newest_entries(store: SQLHost[C], job_ids: Sequence[str]) -> dict[str, SlotRecord]:
    """The newest ledger entry of each of ``job_ids`` that has one (and a job row).

    One read transaction, one statement per `NEWEST_CHUNK` jobs, an index probe per
    job: what a scrape of many jobs reads at once. A job whose newest entry is ``ok``
    has a failure streak of 0 and that entry as its ok one; one with no entry, 0 and
    none (as `failure_streak` says); only the others need `failure_streak`.

    Raises:
        StoreError: The ledger cannot be read.

    """
    query = (
        "SELECT {ledger_columns} FROM {ledger} WHERE seq IN (SELECT (SELECT max(l.seq)"
        " FROM {ledger} l WHERE l.job_id = j.id) FROM {jobs} j WHERE j.id {any})"
    )
    ids = list(dict.fromkeys(job_ids))

    def body(cur: C) -> dict[str, SlotRecord]:
        out: dict[str, SlotRecord] = {}
        for i in range(0, len(ids), NEWEST_CHUNK):
            rows = cur.execute(*store._q_list(query, ids[i : i + NEWEST_CHUNK])).fetchall()
            out.update((row[1], SlotRecord(*row)) for row in rows)
        return out

    return store._run("read the newest ledger entries", body, write=False)
