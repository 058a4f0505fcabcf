"""The store logic shared by the SQL stores, written once over a small SQL dialect.

`SQLStore` implements the `tickwork.stores.Store` operations (and the optional
`tickwork.stores.BatchRecorder`) as SQL statements on one transaction's cursor. A
database module subclasses it with what differs:

- ``_run``: runs one operation's body in a transaction (SQLite: one connection under a
  lock, ``BEGIN IMMEDIATE``; PostgreSQL: connection lanes, reconnection, and the
  ``resolve`` callback after a commit of unknown outcome);
- ``_WORDS`` and ``_PARAM``: the dialect the statements are written in (table names,
  placeholders, booleans, row locks), filled into the templates of this module once;
- a few hooks where the statements themselves differ (how due rows and retries are
  found and locked, how a claim is released, which claims recovery takes, which owners
  are gone) and ``_changed``, called inside every transaction that can make a run due
  sooner (PostgreSQL sends its ``NOTIFY`` there).

The store is composed of parts, each with its own state, which it holds and delegates
to: the slot ledger (`LedgerQueries`: retention, writes, history, pruning), the
operators' runtime control (`ControlActions`) and the recovery of claims
(`ClaimRecovery`: gone owners, ended leases); the public operations that only hand
to a part are mixins beside it (`ControlMixin`, `LedgerMixin` in ``_ledgerface``, the
reads of jobs in `ListingMixin`). Claims, starts and finishes, the hot path, stay
here. Schema creation, migrations, connections and the optional capabilities that
depend on the database (sessions, clocks, notifications) stay in the database modules.
"""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, Self, TypeVar

from tickwork.stores._errors import JobNotFoundError

from ._carry import CarriedFinishes, CarryMixin
from ._chains import ChainQueries
from ._checks import (
    check_claim,
    check_finish,
    check_job_id,
    check_limit,
    check_optional_time,
    check_outcome,
    check_owner,
    check_positive,
    check_start,
    check_time,
)
from ._control import ControlActions, ControlMixin
from ._holders import HoldersMixin
from ._jobspec import JobSpec
from ._ledger import LedgerQueries, given_up_entry
from ._ledgerface import LedgerMixin
from ._listing import ListingMixin
from ._oneoffs import OneOffMixin, is_oneoff
from ._pools import PoolQueries, PoolsMixin
from ._records import (
    KEEP,
    AdvanceFn,
    Claim,
    Finish,
    GiveUpFn,
    Keep,
    Recovered,
    Start,
    StartNowFn,
)
from ._recovery import LIVENESS_CHECK, ClaimRecovery
from ._rows import RowReader
from ._sqlbase import C, SQLCursor, SQLResult
from ._terms import Outcome
from ._upkeep import LookUpkeep
from ._upserts import DeclareMixin
from ._wakeup import WakeupMixin, WakeupQueries

__all__ = [
    "CLAIM_COLUMNS",
    "HISTORY_DAYS",
    "HISTORY_KEEP",
    "JOB_COLUMNS",
    "LEDGER_COLUMNS",
    "LEDGER_INSERT",
    "LIVENESS_CHECK",
    "LIVENESS_WAKE",
    "OPERATOR_GATE",
    "SQLCursor",
    "SQLResult",
    "SQLStore",
    "schema_news",
]


def schema_news(what: str, version: int, latest: int) -> str:
    """The one line an opening that created or migrated ``what`` logs (from ``version``)."""
    if version == 0:
        return f"created {what} at schema version {latest}"
    return f"migrated {what} from schema version {version} to {latest}"


#: The columns of a job row as `RowReader` reads them, in this order.
JOB_COLUMNS: Final = (
    "id, spec, paused, next_run, last_scheduled, last_started, last_ended, last_outcome,"
    " last_error, control, first_slot, pool_wait"
)
#: The columns of a claim row as `RowReader` reads them, in this order.
CLAIM_COLUMNS: Final = (
    "token, job_id, owner, scheduled, claimed_at, lease_until, started, retry, origin"
)

#: When a waiting run asked for by an operator (a claim ``c`` of job ``j`` with no owner
#: and an origin other than ``schedule``) may be taken: its job allows overlap, or no
#: other claim of the job is held or waits ahead of it. Backfilled slots of a job that
#: does not allow overlap so run one after another, in order. ``{claims}`` is the
#: dialect's claims table.
OPERATOR_GATE: Final = (
    "(c.origin = 'schedule' OR j.overlap = 'allow' OR NOT EXISTS (SELECT 1 FROM {claims} o"
    " WHERE o.job_id = c.job_id AND o.token <> c.token AND (o.owner <> ''"
    " OR o.scheduled < c.scheduled OR (o.scheduled = c.scheduled AND o.token < c.token))))"
)

#: The columns of a ledger entry as `SQLStore.history` reads them, in this order.
LEDGER_COLUMNS: Final = (
    "seq, job_id, scheduled, outcome, slots, origin, claimed, started, ended, node, attempt,"
    " error, output"
)
#: The insert of one ledger entry; `SQLStore._insert_ledger` gets tuples in its order.
LEDGER_INSERT: Final = (
    "INSERT INTO {ledger} (job_id, scheduled, outcome, slots, origin, claimed, started, ended,"
    " node, attempt, error, output, recorded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: What a finished run sets on its job row (`SQLStore._last_run`).
LAST_RUN: Final = (
    "UPDATE {jobs} SET last_scheduled = ?, last_started = ?, last_ended = ?, last_outcome = ?,"
    " last_error = ?{last_token} WHERE id = ?"
)
#: Default retention of the slot ledger: entries kept per job, and their age in days.
HISTORY_KEEP: Final = 1000
HISTORY_DAYS: Final = 30.0
#: While other listed owners hold claims, `SQLStore.next_wakeup` is at most this far past
#: the last look, so a dead owner's claims are recovered within about this long even on
#: an idle node.
LIVENESS_WAKE: Final = 1.0

_log = logging.getLogger("tickwork.stores")

T = TypeVar("T")


def _checked_claim(
    now: float,
    owner: str,
    lease_seconds: float,
    limit: int,
    callables: tuple[AdvanceFn, StartNowFn | None, GiveUpFn | None],
) -> tuple[float, str, float, int]:
    """`SQLStore.claim_due`'s arguments, checked: ``(now, owner, lease, limit)``.

    Raises:
        ValueError, TypeError: One of them is not what `Store.claim_due` takes.

    """
    now = check_time("now", now)
    owner = check_owner(owner)
    lease = check_positive("lease_seconds", lease_seconds)
    limit = check_limit(limit)
    _check_claim_callables(*callables)
    return now, owner, lease, limit


def _entry(f: Finish, started: float | None, attempt: int) -> tuple[Any, ...]:
    """The ledger entry of ``f``'s slot (its claim released, started at ``started``)."""
    c = f.claim
    return (
        c.job_id, c.scheduled, f.outcome, 1, c.origin, c.claimed_at,
        started if f.started is None else f.started, f.ended, c.owner, attempt, f.error,
        f.output, time.time(),
    )  # fmt: skip


def _check_claim_callables(
    advance: AdvanceFn, start: StartNowFn | None, given_up: GiveUpFn | None
) -> None:
    """The callables `SQLStore.claim_due` is given are callable (or None where allowed)."""
    if not callable(advance):
        raise TypeError(f"advance must be callable as advance(state, now), got {advance!r}")
    if start is not None and not callable(start):
        raise TypeError(f"start must be callable as start(state) or None, got {start!r}")
    if given_up is not None and not callable(given_up):
        raise TypeError(f"given_up must be callable as given_up(state) or None, got {given_up!r}")


# fmt: off
class SQLStore(
    RowReader, DeclareMixin, PoolsMixin, HoldersMixin, ListingMixin, ControlMixin, LedgerMixin,
    OneOffMixin, CarryMixin, WakeupMixin, ABC, Generic[C],
):
    # fmt: on
    """The `Store` logic over SQL, once; subclasses supply transactions and dialect.

    Subclasses set `_WORDS` (the dialect's words for the ``{name}`` fields of the
    statement templates, see `_q`) and `_PARAM` (the placeholder), implement `_run`
    and the hooks, and call `_init_core` from their constructor.

    The store holds three parts and delegates to them: ``_ledger`` (`LedgerQueries`),
    ``_control`` (`ControlActions`) and ``_recovery`` (`ClaimRecovery`); they run their
    statements through the store's `_run` and `_q` (`SQLHost`).
    """

    #: The placeholder of the driver; templates are written with ``?``.
    _PARAM: ClassVar[str] = "?"
    #: The dialect's words for the templates' ``{fields}``: ``jobs``, ``claims`` and
    #: ``nodes`` (table names), ``by_id`` (ordering by id, byte-wise), ``any`` (a column
    #: is in a list given as the statement's only parameter, see `_q_list`),
    #: ``snapshot`` (a statement making a read transaction one snapshot, or ``""``),
    #: ``lock`` (after a select of one job row: lock it for this transaction, or ``""``
    #: where a write transaction excludes the others), ``if_absent`` (after an
    #: insert of a job: do nothing if the id exists, or ``""`` where it cannot),
    #: ``greatest`` (the larger of two numbers), ``true`` and ``false`` (booleans),
    #: ``claimable`` (a job ``j`` is due, not paused and not held unless it allows
    #: overlap), ``unpaused`` (a waiting claim ``c`` of job ``j`` may be taken as far
    #: as pausing goes: ``j`` is not paused, or ``c`` is a trigger), and ``watched``
    #: (more conditions on the listed owners ``n`` whose claims `next_wakeup` watches,
    #: see `_watched`); ``queued_once``, ``set_limit`` and ``episode_once`` (after an
    #: insert of a chained run, a pool's limit, an alert episode: what happens when the
    #: row exists), so the shared parts write no dialect of their own.
    _WORDS: ClassVar[Mapping[str, str]]
    #: Whether the jobs table has ``last_token``: the claim of the run recorded last,
    #: by which a finish whose commit was cut off is found out (`_finish_again`).
    _LAST_TOKEN: ClassVar[bool] = False
    #: Why a claim recovered before its lease ended was lost, for the log.
    _LOST: ClassVar[str]
    _queries: ClassVar[dict[str, str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._queries = {}  # each dialect translates the templates once

    def _init_core(
        self, history_keep: int | None = HISTORY_KEEP, history_days: float | None = HISTORY_DAYS
    ) -> None:
        """The shared state: the parts, decoded specs, warnings given, our owner."""
        self._ledger: LedgerQueries[C] = LedgerQueries(self, history_keep, history_days)
        self._control: ControlActions[C] = ControlActions(self, self._ledger)
        self._recovery: ClaimRecovery[C] = ClaimRecovery(self, self._ledger, self._LOST)
        self._chains: ChainQueries[C] = ChainQueries(self)  # after=: edges, queued runs
        self._pools: PoolQueries[C] = PoolQueries(self)  # the limits the claim keeps to
        self._wakeups: WakeupQueries[C] = WakeupQueries(self)  # next_wakeup, also at claims
        self._upkeep: LookUpkeep[C] = LookUpkeep(self)  # which chores a claim has to do
        self._carried = CarriedFinishes(self)  # finishes a claim records first (_carry.py)
        self._warned: set[tuple[str, str]] = set()
        self._specs: dict[str, JobSpec] = {}
        self._owner: str | None = None  # tag_sessions: this store's owner

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release the store's resources; later calls raise `StoreError`. Idempotent."""

    # -- the dialect ------------------------------------------------------------------

    def _q(self, template: str) -> str:
        """``template`` in this store's dialect (translated once, then remembered)."""
        query = self._queries.get(template)
        if query is None:
            words = {
                "job_columns": JOB_COLUMNS,
                "claim_columns": CLAIM_COLUMNS,
                "ledger_columns": LEDGER_COLUMNS,
                "gate": OPERATOR_GATE.replace("{claims}", self._WORDS["claims"]),
                "last_token": ", last_token = ?" if self._LAST_TOKEN else "",
                **self._WORDS,
            }
            query = template.format_map(words)
            if self._PARAM != "?":
                query = query.replace("?", self._PARAM)
            self._queries[template] = query
        return query

    @abstractmethod
    def _q_list(self, template: str, values: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        """A statement whose only parameter is the list ``values`` (``{any}`` in it)."""

    # -- transactions -----------------------------------------------------------------

    @abstractmethod
    def _run(
        self,
        what: str,
        fn: Callable[[C], T],
        *,
        write: bool = True,
        resolve: Callable[[C], T] | None = None,
        batch: bool = False,
    ) -> T:
        """Run ``fn`` in one transaction and commit; raise `StoreError` saying ``what``.

        ``resolve`` replaces ``fn`` when a commit's outcome is unknown (the connection
        broke during it) and the store retries: it finds out what the first attempt
        did and finishes the job (default: ``fn``, for bodies that are safe to repeat).
        ``batch``: a `record` batch, which a store may run on a connection of its own.
        """

    def _changed(self, cur: C, job_id: str) -> None:
        """Called in a transaction that may make a run of ``job_id`` due sooner."""

    # -- reading ----------------------------------------------------------------------

    def _claims_by_job(self, cur: C, job_ids: Sequence[str]) -> dict[str, list[Sequence[Any]]]:
        """The claims held on each of ``job_ids``, oldest slot first: one query."""
        query, params = self._q_list(
            "SELECT {claim_columns} FROM {claims} WHERE job_id {any} ORDER BY scheduled, token",
            job_ids,
        )
        held: dict[str, list[Sequence[Any]]] = {}
        for row in cur.execute(query, params).fetchall():
            held.setdefault(row[1], []).append(row)
        return held

    # -- the Store protocol -----------------------------------------------------------

    def remove(self, job_id: str) -> None:
        """Delete a job and its claims (see `tickwork.stores.Store.remove`)."""
        job_id = check_job_id(job_id)

        def body(cur: C) -> None:
            # Its claims go with it (ON DELETE CASCADE): the job row is locked first.
            if cur.execute(self._q("DELETE FROM {jobs} WHERE id = ?"), (job_id,)).rowcount == 0:
                raise JobNotFoundError(f"no job with id {job_id!r}")
            self._changed(cur, job_id)

        def resolve(cur: C) -> None:
            # The first attempt found the job and reached its commit: "not found" now
            # means that commit went through.
            try:
                body(cur)
            except JobNotFoundError:
                return

        self._run(f"remove job {job_id!r}", body, resolve=resolve)

    def set_paused(self, job_id: str, paused: bool) -> None:
        """Pause or resume a job (see `tickwork.stores.Store.set_paused`)."""
        job_id = check_job_id(job_id)
        if not isinstance(paused, bool):
            raise TypeError(f"paused must be a bool, got {paused!r}")
        self._run(
            f"pause job {job_id!r}",
            lambda cur: self._set_job(
                cur,
                job_id,
                "UPDATE {jobs} SET paused = ?, control = NULL, paused_until = NULL WHERE id = ?",
                paused,
            ),
        )

    def set_next_run(self, job_id: str, next_run: float | None) -> None:
        """Set a job's next due time (see `tickwork.stores.Store.set_next_run`)."""
        job_id = check_job_id(job_id)
        next_run = check_optional_time("next_run", next_run)
        self._run(
            f"set next run of job {job_id!r}",
            lambda cur: self._set_job(
                cur, job_id, "UPDATE {jobs} SET next_run = ? WHERE id = ?", next_run
            ),
        )

    def _set_job(self, cur: C, job_id: str, template: str, value: object) -> None:
        """One column of a job's row; `JobNotFoundError` if there is no such job."""
        if cur.execute(self._q(template), (value, job_id)).rowcount == 0:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        self._changed(cur, job_id)

    def claim_due(
        self,
        now: float,
        *,
        owner: str,
        lease_seconds: float,
        limit: int,
        advance: AdvanceFn,
        start: StartNowFn | None = None,
        given_up: GiveUpFn | None = None,
    ) -> list[Claim]:
        """Take due runs under a lease and advance their jobs, atomically.

        See `tickwork.stores.Store.claim_due`, `tickwork.stores.BatchRecorder` for
        ``start``, and `tickwork.stores.SlotLedger` for ``given_up`` (the slots each
        claim gives up beyond its own, written to the ledger in the same transaction).
        Jobs whose stored declaration cannot be read are skipped (and logged
        once); they never block the others. On PostgreSQL, rows are locked with ``FOR NO
        KEY UPDATE SKIP LOCKED``, so concurrent schedulers never wait for each other's
        claims and never take the same run; if the connection breaks while committing,
        the store reconnects and returns exactly the claims that committed (found by
        their tokens, which this process generated), so none is lost or run twice.

        Raises:
            ValueError: ``advance`` returned something other than a finite number or
                ``None`` (nothing is claimed then).

        """
        now, owner, lease, limit = _checked_claim(
            now, owner, lease_seconds, limit, (advance, start, given_up)
        )
        pending: list[Claim] = []
        found: list[float | None] = []  # the next wakeup, when this claim took no full batch

        def body(cur: C) -> list[Claim]:
            pending.clear()
            found.clear()
            self._carried.record(cur, again=False)  # finishes it carries (claim_due_carrying)
            self._pools.begin()  # concurrency pools: each row taken below is admitted
            self._chores(cur, now, owner, lease, limit, pending)
            self._take_due(
                cur, now, limit, pending,
                lambda rows: self._claim_rows(
                    cur, rows, now, owner, lease, advance, start, given_up, pending
                ),
            )  # fmt: skip
            self._pools.mark(cur)  # the slots held back for their pool, first seen now
            if len(pending) < limit:  # nothing more is due: when is the next look?
                found.append(self._wakeups.found_by_claim(cur, owner if pending else None))
            return list(pending)

        def resolve(cur: C) -> list[Claim]:
            found.clear()  # of an attempt whose commit may have failed
            return self._committed_claims(cur, pending)

        self._wakeups.forget()
        claims = self._run("claim due jobs", body, resolve=resolve)
        if found:
            self._wakeups.leave(found[0])
        return claims

    def _chores(
        self, cur: C, now: float, owner: str, lease: float, limit: int, pending: list[Claim]
    ) -> None:
        """A claim's chores first: ended pauses, ended leases, runs waiting (to ``pending``).

        One read says which of them can find anything (`LookUpkeep`).
        """
        chores = self._upkeep.due(cur, now)
        if chores.pauses:
            self._control.resume_ended(cur, now)
        if self._recovery.recover(cur, now, expired=chores.expired) or chores.waiting:
            self._upkeep.take_waiting(cur, now, owner, lease, limit, pending)

    def _take_due(
        self,
        cur: C,
        now: float,
        limit: int,
        pending: list[Claim],
        take: Callable[[list[Sequence[Any]]], None],
    ) -> None:
        """Hand due rows to ``take``, a batch at a time, until ``limit`` claims are pending.

        Stops early when a batch looked at fewer rows than asked for: none are left.
        """
        seen: list[str] = []  # taken or unreadable this call: never looked at twice
        while len(pending) < limit:
            asked, before = limit - len(pending), len(seen)
            rows = self._candidates(cur, now, seen, asked, retries=False)
            if rows is None:
                return
            take(rows)
            if len(seen) - before < asked:
                return

    def _claim_rows(
        self,
        cur: C,
        rows: list[Sequence[Any]],
        now: float,
        owner: str,
        lease: float,
        advance: AdvanceFn,
        start: StartNowFn | None,
        given_up: GiveUpFn | None,
        pending: list[Claim],
    ) -> None:
        """Claim one batch of due job ``rows``; their claims join ``pending``.

        One call per batch of `_candidates`, and one statement each for the batch's claims,
        next runs and ledger entries.
        """
        specs = [self._decode(row[0], row[1], strict=False) for row in rows]
        # Only a job that allows overlap can be claimable while it holds claims.
        pairs = list(zip(rows, specs, strict=True))
        allow = [row[0] for row, spec in pairs if spec and spec.overlap == "allow"]
        held = self._claims_by_job(cur, allow) if allow else {}
        inserts: list[tuple[Any, ...]] = []
        moves: list[tuple[float | None, str]] = []
        ledger: list[tuple[Any, ...]] = []
        for row, spec in pairs:
            job_id = row[0]
            if not self._pools.admit(spec, cur):  # unreadable, or its pool is full
                if spec is not None:
                    self._pools.hold(row)  # it waits for its pool from this slot on
                continue
            state = self._state(row, spec, held.get(job_id, ()))
            result = advance(state, now)
            try:
                new_next = check_optional_time("advance() result", result)
            except (TypeError, ValueError):
                raise ValueError(
                    "advance() must return a finite number of seconds or None,"
                    f" got {result!r} for job {job_id!r}"
                ) from None
            token = os.urandom(16).hex()
            scheduled = row[3]
            started = now if start is not None and start(state) else None
            if given_up is not None:
                gave = given_up(state)
                if gave is not None:
                    ledger.append(given_up_entry(job_id, gave, owner, now))
            inserts.append((token, job_id, owner, scheduled, now, now + lease, started))
            moves.append((new_next, job_id))
            pending.append(Claim(token, job_id, owner, scheduled, now, now + lease, started, spec))
        if inserts:
            self._write_claims(cur, inserts, moves)
        if ledger:
            self._ledger.write(cur, ledger)

    def _write_claims(
        self, cur: C, inserts: list[tuple[Any, ...]], moves: list[tuple[float | None, str]]
    ) -> None:
        """Insert a batch's claims and move its jobs' next runs (a dialect may merge them).

        The rows are distinct jobs, so no claim made here changes what another row of
        the batch decides: one statement each for the whole batch.
        """
        cur.executemany(
            self._q(
                "INSERT INTO {claims} ({claim_columns})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, {false}, 'schedule')"
            ),
            inserts,
        )
        cur.executemany(self._q("UPDATE {jobs} SET next_run = ? WHERE id = ?"), moves)

    def _committed_claims(self, cur: C, pending: list[Claim]) -> list[Claim]:
        """After a claim commit of unknown outcome: the ``pending`` claims that committed.

        The finishes the claim carried are found out first (`CarriedFinishes`).
        """
        self._carried.record(cur, again=True)
        # The commit was cut off: the claims are ours exactly if their tokens exist.
        if not pending:
            return []
        query, params = self._q_list(
            "SELECT token FROM {claims} WHERE token {any}", [c.token for c in pending]
        )
        committed = {r[0] for r in cur.execute(query, params).fetchall()}
        _log.warning(
            "claim commit outcome was unknown: %d of %d claims had committed",
            len(committed),
            len(pending),
        )
        return [c for c in pending if c.token in committed]

    @abstractmethod
    def _candidates(
        self, cur: C, now: float, seen: list[str], n: int, *, retries: bool
    ) -> list[Sequence[Any]] | None:
        """Up to ``n`` rows to claim, in claim order; None when there are none left.

        Due jobs (``retries`` false): job rows (`JOB_COLUMNS`) that are claimable with
        ``next_run <= now``, earliest first. Pending retries: ``(token, job id,
        scheduled, spec, origin)`` of unowned claims of jobs not paused with ``scheduled
        <= now``, oldest slot first. Either may carry more columns after those (PostgreSQL
        ends them with whether any pool limit exists, for `PoolQueries.hint`). Rows whose
        key (the first column, or the job id where the store locks job rows) is in
        ``seen`` are left out; the keys looked at are added to it. A store may lock what
        it returns and skip what others hold.
        """

    def start(self, claim: Claim, *, started: float) -> bool:
        """Record the claimed run as started (see `tickwork.stores.Store.start`).

        If the connection breaks while committing (PostgreSQL), the claim is read back
        after reconnecting: True if it holds this start time, else the start is tried
        again.
        """
        s = Start(check_claim(claim), check_time("started", started))
        return self._run(
            f"start a run of job {claim.job_id!r}",
            lambda cur: self._start(cur, s),
            resolve=lambda cur: self._start_again(cur, s),
        )

    def _start(self, cur: C, s: Start) -> bool:
        query = self._q(
            "UPDATE {claims} SET started = ? WHERE token = ? AND owner = ?"
            " AND started IS NULL AND lease_until > ?"
        )
        return (
            cur.execute(query, (s.started, s.claim.token, s.claim.owner, s.started)).rowcount == 1
        )

    def _start_again(self, cur: C, s: Start) -> bool:
        """After a commit of unknown outcome: True if the start is recorded, else retry."""
        row = cur.execute(
            self._q("SELECT started FROM {claims} WHERE token = ? AND owner = ?"),
            (s.claim.token, s.claim.owner),
        ).fetchone()
        if row is None:
            return False
        if row[0] is None:
            return self._start(cur, s)
        return bool(row[0] == s.started)

    def renew(self, claim: Claim, *, now: float, lease_seconds: float) -> bool:
        """Extend the claim's lease (see `tickwork.stores.Store.renew`); never shortens it."""
        claim = check_claim(claim)
        now = check_time("now", now)
        lease = check_positive("lease_seconds", lease_seconds)
        query = self._q(
            "UPDATE {claims} SET lease_until = {greatest}(lease_until, ?)"
            " WHERE token = ? AND owner = ?"
        )
        return self._run(
            f"renew the lease on job {claim.job_id!r}",
            lambda cur: cur.execute(query, (now + lease, claim.token, claim.owner)).rowcount == 1,
        )

    def finish(
        self,
        claim: Claim,
        *,
        outcome: Outcome,
        ended: float,
        error: str | None = None,
        next_run: float | Keep | None = KEEP,
    ) -> bool:
        """Record the run's end and release the claim (see `tickwork.stores.Store.finish`).

        If the connection breaks while committing (PostgreSQL), the job row is read back
        after reconnecting: the finish counts as done only if the row records this
        claim's token and end, and is tried again if the claim is still held.
        """
        claim = check_claim(claim)
        outcome = check_outcome(outcome)
        ended = check_time("ended", ended)
        if error is not None and not isinstance(error, str):
            raise TypeError(f"error must be a str or None, got {error!r}")
        if next_run is not KEEP:
            next_run = check_optional_time("next_run", next_run)
        f = Finish(claim, outcome, ended, error, next_run)
        return self._run(
            f"finish a run of job {claim.job_id!r}",
            lambda cur: self._finish(cur, f),
            resolve=lambda cur: self._finish_again(cur, f),
        )

    @abstractmethod
    def _release(self, cur: C, f: Finish) -> tuple[float | None, bool] | None:
        """Release ``f``'s claim: ``(its start, whether handed back)``; None if not held.

        The claim is held if its token and owner match. It is handed back (see
        `hands_back`: it becomes an unowned retry of its slot, under a new token, with
        its lease ending at ``f.ended``) or deleted. A store whose writers run
        concurrently locks the job row first (the lock order everywhere: the job row,
        then its claims).
        """

    def _finish(
        self, cur: C, f: Finish, ledger: list[tuple[Any, ...]] | None = None, *, last: bool = True
    ) -> bool:
        """Record ``f``; True if its claim was held.

        Its ledger entry joins ``ledger``, the batch's entries not yet written (None: a
        lone finish). The batch's ``last`` finish writes them all with the statement that
        records its job's last run (`_last_run`) and empties ``ledger``; a finish whose
        claim is not held writes nothing, and the caller writes what is left. A one-off
        whose slot ended leaves instead (`_oneoffs_ended`): its row is not updated first.
        """
        claim = f.claim
        released = self._release(cur, f)
        if released is None:
            return False
        started, handed_back = released
        pending = [] if ledger is None else ledger
        if handed_back:
            self._changed(cur, claim.job_id)
        elif not f.recorded:  # the slot ended: one ledger entry
            tries = self._attempt_no(cur, claim.job_id, claim.scheduled, claim.retry)
            pending.append(_entry(f, started, tries + f.attempt - 1))
            self._chains.ended(cur, claim, f.outcome, f.ended)  # chains: queued in this tx
        ended = not handed_back and is_oneoff(claim.job_id)
        if ended and f.next_run is KEEP and self._oneoffs_ended(cur, [(claim.job_id, f.outcome)]):
            if last and pending:  # its row left with its end: no last run to record on it
                self._ledger.write(cur, pending)
                pending.clear()
            return True
        last_run = (claim.scheduled, started, f.ended, f.outcome, f.error)
        self._last_run(
            cur, (*last_run, *self._token(claim.token), claim.job_id), pending if last else []
        )
        if last:
            pending.clear()
        if f.next_run is not KEEP:
            cur.execute(
                self._q("UPDATE {jobs} SET next_run = ? WHERE id = ?"), (f.next_run, claim.job_id)
            )
            self._changed(cur, claim.job_id)
        if ended and f.next_run is not KEEP:  # set a next run: its row may stay
            self._oneoffs_ended(cur, [(claim.job_id, f.outcome)])
        return True

    def _last_run(self, cur: C, params: tuple[Any, ...], entries: list[tuple[Any, ...]]) -> None:
        """Record a finished run on its job row and write ``entries`` to the ledger.

        ``params``: those of `LAST_RUN`, in its order. A store may do both in one statement.
        """
        cur.execute(self._q(LAST_RUN), params)
        if entries:
            self._ledger.write(cur, entries)

    def _token(self, token: str) -> tuple[str, ...]:
        """The parameter for ``{last_token}``: the claim's token where it is kept."""
        return (token,) if self._LAST_TOKEN else ()

    def _finish_again(self, cur: C, f: Finish) -> bool:
        """After a commit of unknown outcome: True if the finish is recorded, else retry.

        Only a store whose commits can be cut off resolves them; it keeps ``last_token``.
        """
        claim = f.claim
        held = cur.execute(
            self._q("SELECT 1 FROM {claims} WHERE token = ? AND owner = ?"),
            (claim.token, claim.owner),
        ).fetchone()
        if held is not None:
            return self._finish(cur, f)
        row = cur.execute(
            self._q("SELECT last_token, last_ended, last_outcome FROM {jobs} WHERE id = ?"),
            (claim.job_id,),
        ).fetchone()
        if row is None:  # a one-off's finish deletes its row; a removed job has no claim
            return is_oneoff(claim.job_id) and self._oneoff_finished(cur, f)
        return tuple(row) == (claim.token, f.ended, f.outcome)

    def record(
        self, starts: Sequence[Start], finishes: Sequence[Finish]
    ) -> tuple[list[bool], list[bool]]:
        """Starts, then finishes, in one transaction: one commit for all of them.

        See `tickwork.stores.BatchRecorder`; each item does what `start` or `finish`
        would, including the check after a commit of unknown outcome (PostgreSQL).
        There, a finish whose claim is gone counts as recorded only if the job's row
        names its claim: of two finishes of one ``overlap="allow"`` job in one batch,
        the earlier then reads as not recorded (and is logged so by the scheduler),
        never the reverse.
        """
        starts = [check_start(s) for s in starts]
        finishes = [check_finish(f) for f in finishes]
        if not starts and not finishes:
            return [], []

        what = f"record {len(starts)} start(s) and {len(finishes)} finish(es)"
        return self._run(
            what,
            lambda cur: self._recorded(cur, starts, finishes, False),
            resolve=lambda cur: self._recorded(cur, starts, finishes, True),
            batch=True,
        )

    def _recorded(
        self, cur: C, starts: Sequence[Start], finishes: Sequence[Finish], again: bool
    ) -> tuple[list[bool], list[bool]]:
        """`record` in ``cur``'s transaction (``again``: after a commit of unknown outcome)."""
        if not again:
            done = self._record_set(cur, list(starts), list(finishes))
            if done is not None:
                return done
        started = [(self._start_again if again else self._start)(cur, s) for s in starts]
        ended = [False] * len(finishes)
        # The finishes lock job rows in id order, so that two nodes' batches never wait
        # for each other in a cycle (claims and recovery skip locked job rows). The
        # batch's ledger entries are written by its last finish (a store may fold them
        # into that finish's own statement), or after it if it wrote none.
        order = sorted(range(len(finishes)), key=lambda i: finishes[i].claim.job_id)
        ledger: list[tuple[Any, ...]] = []
        for i in order:
            if again:
                ended[i] = self._finish_again(cur, finishes[i])
            else:
                ended[i] = self._finish(cur, finishes[i], ledger, last=i == order[-1])
        if ledger:
            self._ledger.write(cur, ledger)
        return started, ended

    def _record_set(
        self, cur: C, starts: list[Start], finishes: list[Finish]
    ) -> tuple[list[bool], list[bool]] | None:
        """A store's set-based `record` of a batch, or None to record item by item."""
        return None

    def recover_expired(self, now: float) -> list[Recovered]:
        """Release expired claims per delivery semantics (see the protocol).

        On PostgreSQL, a job whose row another transaction holds right now (a `finish`
        in flight) is left for the next call: ``next_wakeup`` still reports its lease end.
        """
        now = check_time("now", now)
        return self._run("recover expired claims", lambda cur: self._recovery.recover(cur, now))

    @abstractmethod
    def _owners_gone(self, cur: C, mono: float) -> list[tuple[str, bool]]:
        """Listed owners this store can tell are gone, each with whether it holds claims.

        ``mono``: the monotonic time of this look.
        """

    @abstractmethod
    def _expired(self, cur: C, now: float, gone: list[str]) -> list[Sequence[Any]]:
        """The held claims to recover, each row the claim's columns and its job's spec.

        Those whose lease ended by ``now`` and those of the owners in ``gone``, in any
        order. A store may leave out claims it cannot take now (a locked job row).
        """

    # -- the slot ledger (tickwork.stores.SlotLedger): the ``_ledger`` part ------------

    def _insert_ledger(self, cur: C, entries: list[tuple[Any, ...]]) -> None:
        """The insert itself; a store may do it in fewer round trips than one per entry."""
        cur.executemany(self._q(LEDGER_INSERT), entries)

    def _attempt_no(self, cur: C, job_id: str, scheduled: float, retry: bool) -> int:
        """1, or for a re-offered slot 1 + its abandoned attempts in the ledger."""
        if not retry:
            return 1
        row = cur.execute(
            self._q(
                "SELECT COUNT(*) FROM {ledger} WHERE job_id = ? AND scheduled = ?"
                " AND outcome = 'abandoned'"
            ),
            (job_id, scheduled),
        ).fetchone()
        return 1 + int(row[0])

    def next_wakeup(self) -> float | None:
        """The earliest claimable due time or lease end (see the protocol).

        While other owners listed by ``tag_sessions`` (SQLite: in this process's scope)
        hold claims, also no later than `LIVENESS_WAKE` seconds after the last look for
        owners that are gone (in the ``now`` of the call that made it), so a dead
        owner's claims are recovered within about a second even on an idle node.
        """
        return self._run("find the next wakeup", self._wakeups.find, write=False)

    def _watched(self) -> tuple[Any, ...]:
        """The parameters of ``?{watched}``: the listed owners judged, other than ours."""
        return (self._owner or "",)

    def _liveness_wait(self) -> float:
        """How long after a look for gone owners the next one is due, while one may be."""
        return LIVENESS_WAKE
