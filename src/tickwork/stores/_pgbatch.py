"""PostgreSQL's batch recording: a batch's starts and finishes in three statements.

`SQLStore.record` records each start and each finish on its own (a finish is three or
four round trips: lock the job row, delete the claim, set the last run with the ledger
entry). On PostgreSQL, where each round trip costs the node and the server far more
than the row work, `record_set` does the common batch set-based instead:

1. the starts: one ``UPDATE ... FROM`` over a JSON array (skipped when there are none);
2. the finishes' job rows, locked ``FOR NO KEY UPDATE`` in the order every finish locks
   them (the ids' code point order: ``COLLATE "C"``), reading whether each job holds
   back its next run while claimed (to wake the other nodes when it is freed) and
   whether it has downstream jobs (chains);
3. one statement of data-modifying ``WITH`` parts: delete the claims still held (token
   and owner), write a ledger entry for each of them and set its job's last run, and
   notify the channel for the jobs freed; a one-off's row is deleted instead and its
   end counted in its function's totals. The parts see one snapshot and each runs to
   completion, all inside the batch's transaction.

The jobs a program declares new go in the same way (`insert_declared`): one ``INSERT
... SELECT FROM unnest(...)`` for the batch, not a statement per job.

Only a plain batch of at least `SET_BASED_FROM` finishes goes this way: finishes
whose claims are first attempts (no ledger count to read), that neither hand a slot
back (``cancelled`` before a start) nor set a next run nor were recorded already nor
end a retry (whose entry has its own start), of
distinct jobs, with distinct start tokens. Anything else, and the check after a commit
of unknown outcome, goes the per-item way (`SQLStore.record`), which stays the
reference for what each item does; the store contract tests run both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, Final, Protocol

import psycopg

from ._chains import ChainQueries
from ._ledger import LedgerQueries
from ._records import KEEP, Finish, Start
from ._upserts import NEW_COLUMNS
from ._wakeup import WakeupQueries

__all__ = ["SET_BASED_FROM", "BatchHost", "insert_declared", "record_set"]

#: Batches with fewer finishes than this go item by item: their short prepared
#: statements cost the server and the node less than the set-based ones (measured at
#: 500 runs/s, where batches hold one or two runs: 7-12% less CPU per run).
SET_BASED_FROM: Final = 4

Cursor = psycopg.Cursor[Any]


class BatchHost(Protocol):
    """What `record_set` uses of its `PostgresStore` (its parts and its channel)."""

    _ledger: LedgerQueries[Cursor]
    _chains: ChainQueries[Cursor]
    _wakeups: WakeupQueries[Cursor]

    def _q(self, template: str) -> str:
        """``template`` in the store's dialect (here: its ``{add_up}``)."""
        ...

    @property
    def channel(self) -> str:
        """The channel the store's changes are announced on (``pg_notify``)."""
        ...


_STARTS: Final = (
    "UPDATE tickwork_claims c SET started = v.started FROM (SELECT e->>0 AS token,"
    " e->>1 AS owner, (e->>2)::float8 AS started FROM jsonb_array_elements(%s::jsonb) AS e) v"
    " WHERE c.token = v.token AND c.owner = v.owner AND c.started IS NULL"
    " AND c.lease_until > v.started RETURNING c.token"
)
# The job rows of the finishes, locked in the order of every other finish (see above):
# their ids, whether a freed claim should wake other nodes, whether chains start here.
_LOCK_JOBS: Final = (
    "SELECT id, overlap <> 'allow' AND next_run IS NOT NULL, EXISTS (SELECT 1 FROM"
    " tickwork_chains c WHERE c.upstream = tickwork_jobs.id) FROM tickwork_jobs"
    ' WHERE id = ANY(%s) ORDER BY id COLLATE "C" FOR NO KEY UPDATE'
)
# One finish per element: [token, owner, job id, scheduled, outcome, origin, claimed,
# ended, attempt, error, output, recorded, wake].
_FINISHED: Final = (
    "v AS (SELECT e->>0 AS token, e->>1 AS owner, e->>2 AS job_id, (e->>3)::float8 AS"
    " scheduled, e->>4 AS outcome, e->>5 AS origin, (e->>6)::float8 AS claimed,"
    " (e->>7)::float8 AS ended, (e->>8)::int AS attempt, e->>9 AS error, e->>10 AS output,"
    " (e->>11)::float8 AS recorded, (e->>12)::boolean AS wake"
    " FROM jsonb_array_elements(%s::jsonb) AS e),"
    " d AS (DELETE FROM tickwork_claims c USING v WHERE c.token = v.token"
    " AND c.owner = v.owner RETURNING c.token, c.started),"
    " u AS (UPDATE tickwork_jobs j SET last_scheduled = v.scheduled, last_started = d.started,"
    " last_ended = v.ended, last_outcome = v.outcome, last_error = v.error, last_token = v.token"
    " FROM v JOIN d USING (token) WHERE j.id = v.job_id AND j.queue IS NULL RETURNING j.id),"
    " n AS (SELECT pg_notify(%s, v.job_id) FROM v JOIN d USING (token) WHERE v.wake),"
    # One-offs (stores/_oneoffs.py): the row of one whose slot ended goes instead of
    # being updated, and the end is added to its function's totals.
    # By key, as every statement here (never a scan of the jobs table).
    " x AS (DELETE FROM tickwork_jobs j WHERE j.id = ANY(ARRAY(SELECT v.job_id FROM v"
    " JOIN d USING (token))) AND j.queue IS NOT NULL AND j.next_run IS NULL AND NOT EXISTS"
    " (SELECT 1 FROM tickwork_claims o WHERE o.job_id = j.id AND o.token NOT IN"
    " (SELECT token FROM d)) RETURNING j.queue, (SELECT v.outcome FROM v WHERE"
    " v.job_id = j.id) AS outcome),"
    " t AS (INSERT INTO tickwork_queues (queue, done, failed, dropped) SELECT queue,"
    " count(*) FILTER (WHERE outcome = 'ok'),"
    " count(*) FILTER (WHERE outcome IN ('failed', 'timeout', 'abandoned')),"
    " count(*) FILTER (WHERE outcome NOT IN ('ok', 'failed', 'timeout', 'abandoned'))"
    " FROM x GROUP BY queue{add_up} RETURNING 1)"
)
_LEDGER: Final = (
    ", l AS (INSERT INTO tickwork_ledger (job_id, scheduled, outcome, slots, origin, claimed,"
    " started, ended, node, attempt, error, output, recorded) SELECT v.job_id, v.scheduled,"
    " v.outcome, 1, v.origin, v.claimed, d.started, v.ended, v.owner, v.attempt, v.error,"
    " v.output, v.recorded FROM v JOIN d USING (token) RETURNING 1)"
)
# Every part is referenced, so each runs; the counts come once (uncorrelated).
_RELEASED: Final = (
    " SELECT d.token, (SELECT count(*) FROM u), (SELECT count(*) FROM n),"
    " (SELECT count(*) FROM t){ledger} FROM d"
)
#: The finish statement with a ledger entry per finish, and without (``history_keep=0``).
_FINISH_WITH_LEDGER: Final = (
    "WITH " + _FINISHED + _LEDGER + _RELEASED.format(ledger=", (SELECT count(*) FROM l)")
)
_FINISH_NO_LEDGER: Final = "WITH " + _FINISHED + _RELEASED.format(ledger="")


# New jobs' rows (`NEW_COLUMNS`, one array per column); the ids that went in (one
# declared by another transaction since the caller's read stays as it is).
_DECLARE_NEW: Final = (
    f"INSERT INTO tickwork_jobs ({NEW_COLUMNS}) SELECT * FROM unnest(%s::text[], %s::text[],"
    " %s::text[], %s::text[], %s::boolean[], %s::float8[], %s::float8[])"
    "{if_absent} RETURNING id"
)


def insert_declared(store: BatchHost, cur: Cursor, rows: Sequence[tuple[Any, ...]]) -> set[str]:
    """`PostgresStore._insert_declared`: new jobs' rows in one statement."""
    columns = [list(c) for c in zip(*rows, strict=True)]
    return {r[0] for r in cur.execute(store._q(_DECLARE_NEW), columns).fetchall()}


def _plain(starts: Sequence[Start], finishes: Sequence[Finish]) -> bool:
    """Whether the batch can go set-based (see the module's docstring)."""
    if len({s.claim.token for s in starts}) != len(starts):
        return False
    if len({f.claim.job_id for f in finishes}) != len(finishes):
        return False
    return all(
        not f.claim.retry
        and f.outcome != "cancelled"
        and f.next_run is KEEP
        and not f.recorded
        and f.started is None  # a retry's own start: written row by row
        for f in finishes
    )


def record_set(
    store: BatchHost, cur: Cursor, starts: Sequence[Start], finishes: Sequence[Finish]
) -> tuple[list[bool], list[bool]] | None:
    """Record a plain batch in one transaction set-based; None if it is not plain.

    The results are those of `SQLStore.record`: per start, whether it was recorded; per
    finish, whether its claim was held (and so released, with its ledger entry).
    """
    if len(finishes) < SET_BASED_FROM or not _plain(starts, finishes):
        return None
    started = [True] * len(starts)
    if starts:
        doc = [[s.claim.token, s.claim.owner, s.started] for s in starts]
        done = {r[0] for r in cur.execute(_STARTS, (json.dumps(doc),)).fetchall()}
        started = [s.claim.token in done for s in starts]
    if not finishes:
        return started, []
    jobs = {
        row[0]: (bool(row[1]), bool(row[2]))
        for row in cur.execute(_LOCK_JOBS, ([f.claim.job_id for f in finishes],)).fetchall()
    }
    now = time.time()
    doc = []
    for f in finishes:
        c = f.claim
        wake = jobs.get(c.job_id, (False, False))[0]
        doc.append(
            [
                c.token, c.owner, c.job_id, c.scheduled, f.outcome, c.origin, c.claimed_at,
                f.ended, f.attempt, f.error, f.output, now, wake,
            ]
        )  # fmt: skip
    ledger = store._ledger.keep != 0
    query = _FINISH_WITH_LEDGER if ledger else _FINISH_NO_LEDGER
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False)
    if any(d[-1] for d in doc):  # a freed job is announced: this node looks again too
        store._wakeups.changed()
    released = {r[0] for r in cur.execute(store._q(query), (text, store.channel)).fetchall()}
    ended = [f.claim.token in released for f in finishes]
    freed = [f for f in finishes if f.claim.token in released]
    for f in freed:
        if jobs.get(f.claim.job_id, (False, False))[1]:
            store._chains.ended(cur, f.claim, f.outcome, f.ended)  # chains: in this tx
    if ledger:
        store._ledger.note_written([(f.claim.job_id,) for f in freed])
    return started, ended
