"""The slot ledger's face on `SQLStore`: history, retention, pruning, an attempt written.

Each operation is handed to the store's parts: the ledger itself (`LedgerQueries`),
and the chained runs (`ChainQueries`), which name the upstream slot of a chained run
in its history (`SlotRecord.cause`) and are pruned with the ledger.
"""

from __future__ import annotations

from typing import Any

from ._chains import ChainQueries
from ._ledger import LedgerQueries
from ._records import Claim, SlotRecord

__all__ = ["LedgerMixin"]


class LedgerMixin:
    """`SlotLedger`, `OutcomeRetention` and `AttemptLedger` for `SQLStore`."""

    _ledger: LedgerQueries[Any]
    _chains: ChainQueries[Any]

    def record_attempt(self, claim: Claim, **attempt: Any) -> bool:
        """Write one attempt of a held claim (`tickwork.stores.contract.AttemptLedger`)."""
        return self._ledger.record_attempt(claim, **attempt)

    def history(
        self,
        job_id: str | None = None,
        *,
        since: float | None = None,
        outcome: str | None = None,
        before: int | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[SlotRecord]:
        """The slot ledger, newest entry first (as `tickwork.stores.SlotLedger.history`)."""
        entries = self._ledger.history(job_id, since, outcome, before, limit, after)
        return self._chains.causes_of(entries)

    def set_job_retention(
        self, job_id: str, *, keep_ok: int | None = None, keep_failed: int | None = None
    ) -> None:
        """Per-outcome retention of ``job_id``'s ledger entries (`OutcomeRetention`)."""
        self._ledger.set_job_retention(job_id, keep_ok, keep_failed)

    def prune_history(self, now: float) -> int:
        """Trim the ledger to its retention; a bounded amount of work per call.

        Trims up to 64 jobs this store wrote entries for since its last call to their
        newest ``history_keep`` entries (and to their `set_job_retention` limits per
        outcome), and deletes up to 2,000 of the oldest entries
        recorded more than ``history_days`` before ``now`` (and as many of the oldest
        operators' actions taken before then). `DurableScheduler` calls it
        from its timing thread when a look at the store claimed nothing, at most every
        few seconds: never on the path of a due run. Returns how many entries went.
        """
        return self._chains.prune(now, self._ledger)  # the ledger's, then chains' causes
