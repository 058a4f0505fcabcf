"""Chains in the SQL stores: a job's ``after`` edges, and the runs an upstream's end queues.

`ChainQueries` is a part of `SQLStore`. It keeps two tables, added by one schema step
(``chains`` in `tickwork.stores.sqlite` and `tickwork.stores.postgres`):

- ``chains``: one row per declared edge (the downstream job, its upstream job, and
  ``on``: ``ok`` or ``any``), written when a job is stored and dropped with it;
- ``chain_runs``: one row per downstream run an upstream slot queued: the downstream's
  slot, the upstream job and slot that caused it, when. Its unique key (downstream,
  upstream, upstream slot) is what makes a slot's end queue each downstream job once.

`ended` runs inside the transaction of the upstream's finish (`SQLStore._finish`):
the finish, its ledger entry and the downstream's waiting run (an unowned claim with
origin ``after``, as a trigger's is) commit together or not at all, so a node that dies
between "A finished" and "B queued" cannot exist. Any node then takes B's run.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Final, Generic

from tickwork._core.text import iso

from ._after import TRIGGERS
from ._jobspec import JobSpec
from ._ledger import LedgerQueries
from ._records import Claim, SlotRecord
from ._sqlbase import C, SQLHost

__all__ = ["ChainQueries", "cause_text"]

#: Attempts at a free slot for a downstream run whose due time another chained run of
#: the same job already has (two upstreams ending at the same instant).
_SLOT_TRIES: Final = 64
#: ``chain_runs`` rows deleted per `ChainQueries.prune` call, at most.
_PRUNE_ROWS: Final = 2000


def cause_text(upstream: str, slot: float) -> str:
    """How a chained run's cause reads: ``"<job id>@<slot, ISO 8601 UTC>"``."""
    return f"{upstream}@{iso(slot, millis=round(slot, 3) % 1 != 0)}"


class ChainQueries(Generic[C]):
    """The chains of one store: edges kept with each job, runs queued by a finish.

    Args:
        store: The store whose transactions and dialect the statements use.

    """

    def __init__(self, store: SQLHost[C]) -> None:
        self._store = store
        #: Claim token -> whether its job has downstream jobs, where the store's release
        #: of the claim already looked (PostgreSQL, in the statement that locks the job
        #: row): the finish then asks nothing more (`hint`, `ended`).
        self._hints: dict[str, bool] = {}
        jobs = store._q("{jobs}")  # "jobs" or "tickwork_jobs": the same prefix for ours
        self._names = {"chains": jobs[:-4] + "chains", "chain_runs": jobs[:-4] + "chain_runs"}

    def _t(self, template: str) -> str:
        """``template`` with this part's table names in, the store's words still to fill."""
        for word, name in self._names.items():
            template = template.replace("{" + word + "}", name)
        return template

    def _q(self, template: str) -> str:
        return self._store._q(self._t(template))

    def declared(self, cur: C, spec: JobSpec) -> None:
        """Store ``spec``'s edges (in the transaction that stores ``spec``)."""
        cur.execute(self._q("DELETE FROM {chains} WHERE job_id = ?"), (spec.id,))
        if spec.after:
            cur.executemany(
                self._q("INSERT INTO {chains} (job_id, upstream, on_outcome) VALUES (?, ?, ?)"),
                [(spec.id, upstream, on) for upstream, on in spec.after],
            )

    def ended(self, cur: C, claim: Claim, outcome: str, ended: float) -> None:
        """Queue the runs that ``claim``'s slot ending ``outcome`` at ``ended`` causes.

        Called by the finish that writes the slot's ledger entry, in its transaction.
        """
        if not self._hints.pop(claim.token, True):
            return  # the release saw no downstream job: a finish pays no extra statement
        rows = cur.execute(
            self._q("SELECT job_id, on_outcome FROM {chains} WHERE upstream = ?"),
            (claim.job_id,),
        ).fetchall()
        for job_id, on in rows:
            if outcome in TRIGGERS.get(on, ()):
                self._queue(cur, job_id, claim.job_id, claim.scheduled, ended)

    def _queue(self, cur: C, job_id: str, upstream: str, slot: float, ended: float) -> None:
        """One waiting run of ``job_id``, due at ``ended``, unless that slot queued it."""
        seen = cur.execute(
            self._q(
                "SELECT 1 FROM {chain_runs} WHERE job_id = ? AND upstream = ? AND upstream_slot = ?"
            ),
            (job_id, upstream, slot),
        ).fetchone()
        if seen is not None:  # this upstream slot ended before (a repeated finish)
            return
        insert = self._q(
            "INSERT INTO {chain_runs} (job_id, scheduled, upstream, upstream_slot, queued)"
            " VALUES (?, ?, ?, ?, ?){queued_once}"
        )
        due = ended
        for _ in range(_SLOT_TRIES):
            if cur.execute(insert, (job_id, due, upstream, slot, time.time())).rowcount == 1:
                break
            due = math.nextafter(due, math.inf)  # the next instant: its own slot
        else:  # pragma: no cover - 64 upstreams ending at one instant
            raise RuntimeError(f"no free slot for a chained run of job {job_id!r}")
        cur.execute(
            self._q(
                "INSERT INTO {claims} ({claim_columns})"
                " VALUES (?, ?, '', ?, ?, ?, NULL, {true}, 'after')"
            ),
            (secrets.token_hex(16), job_id, due, due, due),
        )
        self._store._changed(cur, job_id)

    def hint(self, token: str, chained: bool) -> None:
        """Note whether the job of the claim ``token`` has downstream jobs (see `ended`).

        Called in the finish's transaction, just before `ended` (a failed attempt leaves
        its note to the finish tried again, which writes it anew).
        """
        self._hints[token] = chained

    def causes(self, cur: C, records: Sequence[SlotRecord]) -> list[SlotRecord]:
        """``records`` with the cause of each chained entry (origin ``after``) filled in."""
        wanted = sorted({r.job_id for r in records if r.origin == "after"})
        if not wanted:
            return list(records)
        query, params = self._store._q_list(
            self._t("SELECT job_id, scheduled, upstream, upstream_slot FROM {chain_runs}"
                    " WHERE job_id {any}"),
            wanted,
        )  # fmt: skip
        found = {
            (r[0], r[1]): cause_text(r[2], r[3]) for r in cur.execute(query, params).fetchall()
        }
        return [
            replace(r, cause=found.get((r.job_id, r.scheduled))) if r.origin == "after" else r
            for r in records
        ]

    def causes_of(self, records: list[SlotRecord]) -> list[SlotRecord]:
        """`causes` in a read transaction of its own; no read when none is chained."""
        if not any(r.origin == "after" for r in records):
            return records
        return self._store._run(
            "read the causes of chained runs", lambda cur: self.causes(cur, records), write=False
        )

    def prune(self, now: float, ledger: LedgerQueries[C]) -> int:
        """Prune ``ledger`` (its count is returned), then the causes of chained runs.

        Causes go when queued more than the ledger's ``days`` ago (bounded work), unless
        their run still waits.
        """
        gone = ledger.prune(now)
        days = ledger.days
        if days is None:
            return gone
        query = self._q(
            "DELETE FROM {chain_runs} WHERE (job_id, scheduled) IN"
            " (SELECT r.job_id, r.scheduled FROM {chain_runs} r"
            " WHERE r.queued < ? AND NOT EXISTS (SELECT 1 FROM {claims} c"
            " WHERE c.job_id = r.job_id AND c.scheduled = r.scheduled) LIMIT ?)"
        )
        self._store._run(
            "prune the causes of chained runs",
            lambda cur: cur.execute(query, (now - days * 86400.0, _PRUNE_ROWS)).rowcount,
        )
        return gone
