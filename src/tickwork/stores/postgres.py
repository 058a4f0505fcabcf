"""`PostgresStore`: durable jobs in PostgreSQL, shared by schedulers on many hosts.

Import this module explicitly (``from tickwork.stores.postgres import PostgresStore``);
it needs psycopg 3 (``pip install 'tickwork[postgres]'``). ``import tickwork`` and
``import tickwork.stores`` never load psycopg.

Every state change is one READ COMMITTED transaction. Due jobs are claimed with
``SELECT ... FOR NO KEY UPDATE SKIP LOCKED`` and re-read under their row locks, so
several schedulers on one database take each due run exactly once. Every change that
can make a run due sooner is announced with ``NOTIFY`` and can be waited for with
`PostgresStore.wait_for_change`. A lost connection is re-opened with exponential
backoff; an operation is retried only when that cannot run anything twice (see
``docs/postgres.md``). The DSN's password is never logged nor shown in errors.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.stores._errors import StoreError

from ._checks import check_positive, check_time
from ._oneoffs import ONEOFF_COLUMNS, OneOffRow
from ._pgbatch import insert_declared, record_set
from ._pglisten import ListenMixin
from ._pgschema import APPLICATION as APPLICATION
from ._pgschema import MAX_IDENTIFIER, SchemaMixin
from ._pgschema import MIGRATIONS as MIGRATIONS
from ._records import KEEP, Finish, Start, hands_back
from ._sql import (
    CLAIM_COLUMNS,
    HISTORY_DAYS,
    HISTORY_KEEP,
    JOB_COLUMNS,
    LAST_RUN,
    LEDGER_INSERT,
    OPERATOR_GATE,
    SQLStore,
)
from ._sql import LIVENESS_CHECK as LIVENESS_CHECK
from ._sql import LIVENESS_WAKE as LIVENESS_WAKE

__all__ = ["APPLICATION", "MIGRATIONS", "PostgresStore", "redact_dsn"]

_log = logging.getLogger("tickwork.stores")

T = TypeVar("T")
Cursor = psycopg.Cursor[Any]

#: One ledger entry: 13 parameters in the order of ``_sql.LEDGER_INSERT``.
_LEDGER_ONE: Final = LEDGER_INSERT.format(ledger="tickwork_ledger").replace("?", "%s")
#: A batch of ledger entries in one parameter: a JSON array of entries, each an array in
#: the order of ``_sql.LEDGER_INSERT`` (`_ledger_json`). One small string for psycopg to
#: send, where one array per column cost more to adapt than the rows cost to insert.
#: Floats go as their shortest repr, which ``float8`` reads back exactly.
_LEDGER_JSON: Final = (
    "INSERT INTO tickwork_ledger (job_id, scheduled, outcome, slots, origin, claimed, started,"
    " ended, node, attempt, error, output, recorded) SELECT e->>0, (e->>1)::float8, e->>2,"
    " (e->>3)::int, e->>4, (e->>5)::float8, (e->>6)::float8, (e->>7)::float8, e->>8,"
    " (e->>9)::int, e->>10, e->>11, (e->>12)::float8 FROM jsonb_array_elements(%s::jsonb) AS e"
)


def _ledger_json(entries: list[tuple[Any, ...]]) -> str:
    """The parameter of `_LEDGER_JSON` (times are finite: `check_time`)."""
    return json.dumps(entries, ensure_ascii=False, allow_nan=False)


# A job is claimable when due, not paused and not claimed, unless it allows overlap. The
# overlap test is inside the NOT EXISTS (overlap is NOT NULL: the same rows as
# "overlap = 'allow' OR NOT EXISTS (...)"): outside it, in an OR, PostgreSQL ran the
# NOT EXISTS as a hashed subplan, a scan of every claim at every look (1.7-11.8 ms with
# 3,000 claims held, against 0.15-0.27 ms for this anti-join's index probe per job).
_CLAIMABLE: Final = (
    "j.next_run IS NOT NULL AND NOT j.paused AND NOT EXISTS (SELECT 1 FROM tickwork_claims c"
    " WHERE c.job_id = j.id AND j.overlap <> 'allow')"
)
# A job row j is a declared job's or a one-off's this node allows (stores/_oneoffs.py):
# parameters the allowed functions and the LIKE patterns of the allowed modules.
_RUNNABLE: Final = "(j.queue IS NULL OR j.queue = ANY(%s::text[]) OR j.queue LIKE ANY(%s::text[]))"
# Step 1 of a claim: lock due rows nobody else holds. Under READ COMMITTED the row a
# lock returns may be newer than the snapshot the filter saw, so step 2 re-reads the
# locked rows with a fresh statement (a new snapshot) before anything is decided.
_LOCK_DUE: Final = (
    f"SELECT j.id FROM tickwork_jobs j WHERE {_CLAIMABLE} AND j.next_run <= %s"
    f" AND j.id <> ALL(%s) AND {_RUNNABLE} ORDER BY j.next_run, j.id LIMIT %s"
    " FOR NO KEY UPDATE OF j SKIP LOCKED"
)
# Pending retries (recovered slots) of jobs not paused: lock their job rows as in step 1,
# then re-read the retries under the locks.
_LOCK_RETRIES: Final = (
    # By key from the waiting claims: never a scan of every job, even in a generic plan.
    "SELECT j.id FROM tickwork_jobs j WHERE j.id = ANY(ARRAY(SELECT c.job_id"
    " FROM tickwork_claims c WHERE c.owner = '' AND c.scheduled <= %s)) AND EXISTS"
    " (SELECT 1 FROM tickwork_claims c WHERE c.job_id = j.id AND c.owner = ''"
    " AND c.scheduled <= %s AND (NOT j.paused OR c.origin = 'manual'))"
    f" AND j.id <> ALL(%s) AND {_RUNNABLE}"
    " ORDER BY (SELECT min(c.scheduled) FROM tickwork_claims c WHERE c.job_id = j.id"
    " AND c.owner = ''), j.id LIMIT %s FOR NO KEY UPDATE OF j SKIP LOCKED"
)
# Both re-reads end with whether any pool limit exists (stores/_pools.py): a state
# without limits then reads no limit rows of its own in the claim.
_ANY_LIMIT: Final = "EXISTS (SELECT 1 FROM tickwork_pools)"
_REREAD_RETRIES: Final = (
    f"SELECT c.token, c.job_id, c.scheduled, j.spec, c.origin, {_ANY_LIMIT}"
    " FROM tickwork_claims c JOIN tickwork_jobs j ON j.id = c.job_id"
    " WHERE c.job_id = ANY(%s) AND c.owner = ''"
    " AND (NOT j.paused OR c.origin = 'manual') AND c.scheduled <= %s"
    f" AND {OPERATOR_GATE.replace('{claims}', 'tickwork_claims')}"
    " ORDER BY c.scheduled, c.token LIMIT %s"
)
_REREAD_DUE: Final = (
    f"SELECT {JOB_COLUMNS}, {_ANY_LIMIT} FROM tickwork_jobs j WHERE j.id = ANY(%s)"
    f" AND {_CLAIMABLE}"
    " AND j.next_run <= %s ORDER BY j.next_run, j.id LIMIT %s"
)

# A claim's batch in one statement: its claims inserted (owner, claim time and lease
# are the batch's) and its jobs' next runs moved. The insert is a data-modifying WITH:
# it runs to completion within the statement, whether or not the update reads it.
_WRITE_CLAIMS: Final = (
    "WITH taken AS (INSERT INTO tickwork_claims (token, job_id, scheduled, started, owner,"
    " claimed_at, lease_until, retry, origin)"
    " SELECT v.token, v.job_id, v.scheduled, v.started, %s::text, %s::float8, %s::float8,"
    " false, 'schedule'"
    " FROM unnest(%s::text[], %s::text[], %s::float8[], %s::float8[])"
    " AS v(token, job_id, scheduled, started))"
    # No join with the list: the generic plan of a prepared statement guesses a list's
    # length, and for a join it would scan the whole jobs table; by key it never does.
    " UPDATE tickwork_jobs SET next_run = (%s::float8[])[array_position(%s::text[], id)]"
    " WHERE id = ANY(%s)"
)


# A batch of one-offs in one statement: the rows that were new come back (a key pending
# already keeps its row). ``{t}``: the jobs table, qualified for an app's connection;
# ``{p}``: the arrays' placeholder, ``%b`` (binary) on the store's own connection.
_ENQUEUE: Final = (
    f"INSERT INTO {{t}} ({ONEOFF_COLUMNS}) SELECT v.id, v.spec, v.schedule, 'skip', false,"
    " v.run_at, v.run_at, v.queue FROM unnest({p}::text[], {p}::text[], {p}::text[],"
    " {p}::float8[], {p}::text[]) AS v(id, spec, schedule, run_at, queue)"
    " ON CONFLICT (id) DO NOTHING RETURNING id"
)


def _oneoff_params(rows: Sequence[OneOffRow]) -> list[Any]:
    """`_ENQUEUE`'s parameters: one array per column."""
    return [
        [r.id for r in rows],
        [r.spec for r in rows],
        [r.schedule for r in rows],
        [r.run_at for r in rows],
        [r.queue for r in rows],
    ]


# The store's own enqueue: the new rows' ids, each with the transaction's id (`_xact`),
# and the channel notified once (an uncorrelated subquery: evaluated at the first row).
_ENQUEUE_OWN: Final = (
    f"WITH t AS ({_ENQUEUE.format(t='tickwork_jobs', p='%b')}) SELECT t.id, txid_current(),"
    " (SELECT pg_notify(%s, 'enqueued')) FROM t"
)


def _insert_oneoffs(store: PostgresStore, cur: Cursor, rows: Sequence[OneOffRow]) -> set[str]:
    """`PostgresStore._insert_oneoffs`: the batch in one statement.

    The statement also announces the new rows and reads its transaction's id, kept for
    `_xact` with the cursor (one transaction's): neither costs a round trip of its own.
    """
    got = cur.execute(_ENQUEUE_OWN, [*_oneoff_params(rows), store.channel]).fetchall()
    store._enqueue_xact = (cur, int(got[0][1])) if got else None
    if got:
        store._wakeups.changed()  # as `_changed`: a run ending here looks again
    return {r[0] for r in got}


def _xact(store: PostgresStore, cur: Cursor) -> int:
    """`PostgresStore._xact`: the transaction's id, whose fate outlives a cut connection."""
    known, store._enqueue_xact = store._enqueue_xact, None
    if known is not None and known[0] is cur:  # read by this transaction's enqueue
        return known[1]
    row = cur.execute("SELECT txid_current()").fetchone()
    assert row is not None
    return int(row[0])


def _xact_committed(store: PostgresStore, cur: Cursor, xact: int) -> bool:
    """`PostgresStore._xact_committed`: asked of the server; in doubt, asked again later."""
    row = cur.execute("SELECT txid_status(%s)", (xact,)).fetchone()
    status = None if row is None else row[0]
    if status not in ("committed", "aborted"):  # its session has not ended yet
        raise psycopg.OperationalError(f"transaction {xact} is {status or 'unknown'}")
    return bool(status == "committed")


def _runnable(store: PostgresStore) -> tuple[Any, ...]:
    """`PostgresStore._runnable`: the allowed functions and the modules' LIKE patterns."""
    allowed = store._oneoff_filter  # one reading: it is replaced whole
    return sorted(allowed.functions), allowed.likes()


def _oneoff_statement(store: PostgresStore, rows: Sequence[OneOffRow]) -> tuple[str, list[Any]]:
    """`PostgresStore.oneoff_statement`: insert and announce at the app's commit.

    The table is named in the store's schema, or left to the connection's
    ``search_path`` when the store has none. Each new row notifies the channel with one
    payload, which PostgreSQL delivers once per transaction.
    """
    schema = store.schema
    table = (
        "tickwork_jobs" if schema is None else '"' + schema.replace('"', '""') + '".tickwork_jobs'
    )
    insert = _ENQUEUE.format(t=table, p="%s")  # %b is psycopg 3's alone
    query = f"WITH t AS ({insert}) SELECT t.id, pg_notify(%s, 'enqueued') FROM t"
    return query, [*_oneoff_params(rows), store.channel]


def redact_dsn(dsn: str) -> str:
    """The connection string with its password replaced by ``***``, for logs and errors.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.

    Returns:
        The same connection parameters in key=value form, password masked. A string
        libpq cannot parse is not echoed at all.

    """
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparsable connection string>"
    if params.get("password"):
        params["password"] = "***"
    return make_conninfo("", **params)


# Every statement a store runs is planned once per connection, not at each execution.
# psycopg prepares a statement run five times; the server then keeps planning it for
# each execution (a custom plan) whenever the plan for any parameters (the generic
# plan) looks dearer, which for a list parameter (``= ANY(%s)``) it always does: it
# guesses the list longer than the one or two items of a look at sparse rates. The
# re-read of a look's rows, the claims' write and a batch's lock were planned at
# every execution: at 100 runs/s, about a sixth of the server's CPU (issue 25).
# Every statement's generic plan reaches the jobs by key (tests/test_store_postgres.py
# counts the server's scans of the jobs table over claims, recoveries and finishes).
# And no JIT compilation: a generic plan guesses a range parameter (``next_run <= %s``)
# to match a third of the table, so with a million pending one-offs a look's estimated
# cost passed ``jit_above_cost`` and the server compiled it at every execution (13.7
# ms; the plan's own work 0.08 ms; pickup p99 at 200 runs/s 13 -> 277 ms). Every
# statement here reads a few rows by index: compiling never pays.
#
# A transaction of the store's left idle is ended by the server after
# `IDLE_IN_TRANSACTION` seconds, its locks released: a node frozen mid-transaction (a
# paused VM) would otherwise hold its job, claim and pool rows until it woke, and one
# whose host vanished until TCP gave up (hours; the keepalives below make that about
# 25 s). Every other node's claim skips locked job rows, but waits for pool rows. The
# store never leaves a transaction idle for long: a node cut off that way reconnects
# and resolves its last commit as after any lost connection.
_SESSION_SQL: Final = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false),"
    " set_config('jit', 'off', false),"
    " set_config('idle_in_transaction_session_timeout', %s, false),"
    " set_config('tcp_keepalives_idle', '10', false),"
    " set_config('tcp_keepalives_interval', '5', false),"
    " set_config('tcp_keepalives_count', '3', false)"
)
#: Seconds a transaction of the store's may stay idle before the server ends it.
IDLE_IN_TRANSACTION = 60.0
#: Marks a session as an owner's (`PostgresStore.tag_sessions`): a shared lock, so the
#: owner's connections (and a new one while an old one lingers) never wait on each other.
_TAG_SQL: Final = "SELECT pg_advisory_lock_shared(%s::integer, %s::integer)"
#: ... and lists the owner as one whose claims die with its sessions (in the same session,
#: after the lock: whoever sees the row while the owner lives sees the lock too).
_NODE_SQL: Final = (
    "INSERT INTO tickwork_nodes (owner, lock_key, tagged_at) VALUES (%s, %s, %s)"
    " ON CONFLICT (owner) DO UPDATE SET lock_key = excluded.lock_key"
)
#: Listed owners none of whose sessions holds its lock: (owner, holds claims). One
#: statement, one snapshot of pg_locks; the caller recovers the claims of the first kind
#: and forgets the others.
_GONE_SQL: Final = (
    "SELECT n.owner, EXISTS (SELECT 1 FROM tickwork_claims c WHERE c.owner = n.owner)"
    " FROM tickwork_nodes n WHERE NOT EXISTS (SELECT 1 FROM pg_locks l"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
    " AND l.classid = %s::bigint::oid AND l.objid::bigint = n.lock_key AND l.database ="
    " (SELECT oid FROM pg_database WHERE datname = current_database()))"
)
#: An owner counts as gone once it has had no session for this long, seen by two checks:
#: a live node whose connections were cut marks its new ones within milliseconds (its
#: listener reconnects at once), and must not lose its claims for that.
LIVENESS_GRACE: Final = 0.5
#: While other listed owners hold claims, `next_wakeup` is at most `LIVENESS_WAKE` past
#: the last check (`LIVENESS_GRACE` while an owner without sessions waits for its second
#: look), so a dead node's claims are recovered within about 1.5 s even on idle nodes.


@dataclass
class _Retry(Exception):
    """Internal: the connection failed; ``unknown`` if it failed while committing."""

    cause: BaseException
    unknown: bool


def _transient(exc: BaseException, conn: psycopg.Connection[Any] | None) -> bool:
    """Whether ``exc`` means "the connection or this transaction failed, try again"."""
    if conn is not None and (conn.closed or conn.broken):
        return True
    return isinstance(exc, psycopg.OperationalError | psycopg.errors.TransactionRollback)


def _check_schema(schema: str | None) -> str | None:
    """``schema`` if it can name a PostgreSQL schema (or is None); else `ValueError`."""
    if schema is not None and (
        not isinstance(schema, str)
        or not schema
        or not schema.isprintable()
        or len(schema.encode()) > MAX_IDENTIFIER
    ):
        raise ValueError(
            f"schema must be a non-empty printable name of at most 63 bytes or None, got {schema!r}"
        )
    return schema


def _dsn_params(dsn: object) -> dict[str, Any]:
    """The parameters of connection string ``dsn``, else `TypeError` / `ValueError`."""
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a str, got {type(dsn).__name__}")
    try:
        return conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ValueError(f"dsn is not a valid connection string: {exc}") from None


def _backoff_args(
    reconnect_timeout: object, backoff_min: object, backoff_max: object
) -> tuple[float, float, float]:
    """The reconnection's limit and its first and longest waits, checked."""
    limit = check_time("reconnect_timeout", reconnect_timeout)
    if limit < 0:
        raise ValueError(
            f"reconnect_timeout must be a finite number >= 0, got {reconnect_timeout!r}"
        )
    low = check_positive("backoff_min", backoff_min)
    high = check_positive("backoff_max", backoff_max)
    if high < low:
        raise ValueError(
            f"backoff_max must be >= backoff_min ({backoff_min!r}), got {backoff_max!r}"
        )
    return limit, low, high


def _connect_kwargs(params: Mapping[str, Any], connect_timeout: float) -> dict[str, Any]:
    """What `psycopg.connect` gets besides the DSN: the defaults the DSN does not set."""
    kwargs: dict[str, Any] = {"autocommit": False}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = max(1, round(connect_timeout))
    if "application_name" not in params:
        kwargs["application_name"] = "tickwork"
    # A server gone silent (its host lost) is noticed in about 25 s, not when TCP gives up.
    for key, value in (("keepalives", 1), ("keepalives_idle", 10), ("keepalives_interval", 5),
                       ("keepalives_count", 3)):  # fmt: skip
        if key not in params:
            kwargs[key] = value
    return kwargs


class PostgresStore(SchemaMixin, ListenMixin, SQLStore[Cursor]):
    """Durable jobs in PostgreSQL; implements `tickwork.stores.Store` and `ChangeNotifier`.

    Tables ``tickwork_meta``, ``tickwork_jobs`` and ``tickwork_claims`` are created (or
    migrated) on first use in ``schema`` or, without one, in the first schema of the
    connection's ``search_path``. A schema holding tables of those names without our
    metadata, or written by a newer tickwork, is refused and left untouched.

    Connection loss: each operation re-opens the connection with exponential backoff
    (``backoff_min`` doubling up to ``backoff_max``) for up to ``reconnect_timeout``
    seconds, then raises `StoreError`; a scheduler treats that as "try again later".
    A transaction that failed before its commit is simply retried. One whose commit was
    cut off is checked instead of repeated: `claim_due` looks for its own claim tokens
    (generated by this process) and returns exactly the claims that committed; `start`
    and `finish` look at their claim. So a lost connection never makes a run happen twice.

    Thread-safety: one store object may be shared by threads; it runs one operation at a
    time on its connection (`wait_for_change` uses a second one, opened on first use).
    Processes and hosts each open their own store.

    Args:
        dsn: libpq connection string or URL (``"postgresql://user@host/db"``). Its
            password never appears in logs, ``repr`` or error messages.
        schema: Schema for the tables, created if missing; ``None`` uses the
            ``search_path``. Lets several independent schedules share a database.
        reconnect_timeout: Seconds an operation keeps reconnecting before it fails.
        backoff_min: First wait between reconnection attempts, in seconds.
        backoff_max: Longest wait between attempts.
        connect_timeout: libpq's ``connect_timeout`` for each attempt, unless the DSN
            sets one.
        sleep: How to wait between attempts (tests inject a fake); the default wait is
            cut short by `close`.
        history_keep: Slot-ledger entries kept per job (`SQLStore.history`), an int
            >= 0, or ``None`` for no count limit; 0 writes no entries at all.
        history_days: Age in days beyond which ledger entries are pruned, or
            ``None`` for no age limit. Pruning is bounded work done by `DurableScheduler`
            while idle (see `SQLStore.prune_history`).

    Raises:
        StoreError: The database cannot be reached within ``reconnect_timeout``, the
            schema cannot be prepared, or it holds tables that are not tickwork's.
        SchemaVersionError: The schema was written by a newer tickwork.

    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        reconnect_timeout: float = 30.0,
        backoff_min: float = 0.05,
        backoff_max: float = 5.0,
        connect_timeout: float = 10.0,
        sleep: Callable[[float], object] | None = None,
        history_keep: int | None = HISTORY_KEEP,
        history_days: float | None = HISTORY_DAYS,
    ) -> None:
        params = _dsn_params(dsn)
        self._dsn = dsn
        self._password = str(params.get("password") or "")
        self._redacted = redact_dsn(dsn)
        self._schema = _check_schema(schema)
        retry = _backoff_args(reconnect_timeout, backoff_min, backoff_max)
        self._reconnect_timeout, self._backoff_min, self._backoff_max = retry
        connect_timeout = check_positive("connect_timeout", connect_timeout)
        if sleep is not None and not callable(sleep):
            raise TypeError(f"sleep must be callable as sleep(seconds), got {sleep!r}")
        self._closing = threading.Event()
        self._sleep: Callable[[float], object] = sleep or self._closing.wait
        self._connect_kwargs = _connect_kwargs(params, connect_timeout)
        self._init_core(history_keep, history_days)
        self._init_lanes()
        self._init_listener()
        try:
            self._open_schema()
        except BaseException:
            self._closed = True
            self._drop()
            self._wake_r.close()
            self._wake_w.close()
            raise

    def _init_lanes(self) -> None:
        """The connections' state: the main lane, `record`'s, the owner's session tag."""
        self._lock = threading.RLock()
        self._busy = False
        self._closed = False
        self._conn: psycopg.Connection[Any] | None = None
        # `record` has a connection of its own, so that the workers' group commits and
        # the timing thread's claims do not wait for each other (claims skip locked rows;
        # a finish waits only for the row it records).
        self._rec_lock = threading.RLock()
        self._rec_busy = False
        self._rec_conn: psycopg.Connection[Any] | None = None
        self._channel = ""
        self._looks_channel = ""
        # tag_sessions: the advisory-lock key marking this store's sessions as an owner's.
        self._owner_key: tuple[int, int] | None = None
        # Owners whose sessions ended (checked at most every LIVENESS_CHECK seconds):
        self._gone_seen: dict[str, float] = {}  # owner -> when first seen without sessions

    def __repr__(self) -> str:
        schema = "" if self._schema is None else f", schema={self._schema!r}"
        return f"PostgresStore({self._redacted!r}{schema})"

    @property
    def schema(self) -> str | None:
        """The schema given to the constructor (``None``: the ``search_path``)."""
        return self._schema

    @property
    def channel(self) -> str:
        """The ``LISTEN``/``NOTIFY`` channel on which this store's changes are announced."""
        return self._channel

    # -- connections --------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        """``text`` with the password masked, in case a driver message ever quotes it."""
        return text.replace(self._password, "***") if self._password else text

    def _connect(self) -> psycopg.Connection[Any]:
        """A new connection with its session's settings (raises psycopg errors).

        Generic plans (`_SESSION_SQL`), the search path where a schema is named, and an
        owner's liveness lock and listing where the store has an owner.
        """
        conn = psycopg.connect(self._dsn, **self._connect_kwargs)
        try:
            # One round trip for the session's settings: generic plans (see
            # `_SESSION_SQL`), and the schema where one is named.
            idle = (f"{round(IDLE_IN_TRANSACTION * 1000)}ms",)
            if self._schema is None:
                conn.execute(_SESSION_SQL, idle)
            else:
                conn.execute(
                    sql.SQL(_SESSION_SQL + ", set_config('search_path', {}, false)").format(
                        sql.Literal(sql.Identifier(self._schema).as_string(conn))
                    ),
                    idle,
                )
            if self._owner_key is not None and self._owner is not None:
                conn.execute(_TAG_SQL, self._owner_key)
                conn.execute(_NODE_SQL, (self._owner, self._owner_key[1], time.time()))
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop(self, lane: str = "_conn") -> None:
        """Forget a connection (it is broken, or the store is closing).

        ``lane``: ``"_conn"`` (the main one) or ``"_rec_conn"`` (`record`'s).
        """
        conn = getattr(self, lane)
        setattr(self, lane, None)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a broken connection may fail to close; it is gone anyway
                _log.debug("closing a broken connection failed", exc_info=True)

    def _commit(self, conn: psycopg.Connection[Any]) -> None:
        """Commit (a seam for tests that cut the connection during the commit)."""
        conn.commit()

    def _attempt(self, what: str, fn: Callable[[Cursor], T], lane: str = "_conn") -> T:
        """Run ``fn`` in one transaction on the lane's connection; raise `_Retry` if it broke."""
        conn: psycopg.Connection[Any] | None = getattr(self, lane)
        if conn is None:
            try:
                conn = self._connect()
            except psycopg.Error as exc:
                raise _Retry(exc, unknown=False) from exc
            setattr(self, lane, conn)
        try:
            with conn.cursor() as cur:
                result = fn(cur)
        except BaseException as exc:
            try:
                conn.rollback()
            except psycopg.Error:
                self._drop(lane)
            if isinstance(exc, psycopg.Error):
                if _transient(exc, conn):
                    if conn.closed or conn.broken:
                        self._drop(lane)
                    raise _Retry(exc, unknown=False) from exc
                raise StoreError(f"cannot {what}: {self._scrub(str(exc))}") from exc
            raise
        try:
            self._commit(conn)
        except psycopg.Error as exc:
            if (
                conn.closed
                or conn.broken
                or (
                    isinstance(exc, psycopg.OperationalError)
                    and not isinstance(exc, psycopg.errors.TransactionRollback)
                )
            ):
                self._drop(lane)
                raise _Retry(exc, unknown=True) from exc
            try:
                conn.rollback()
            except psycopg.Error:
                self._drop(lane)
            if isinstance(exc, psycopg.errors.TransactionRollback):
                raise _Retry(exc, unknown=False) from exc
            raise StoreError(f"cannot {what}: {self._scrub(str(exc))}") from exc
        return result

    def _run(
        self,
        what: str,
        fn: Callable[[Cursor], T],
        *,
        write: bool = True,
        resolve: Callable[[Cursor], T] | None = None,
        batch: bool = False,
    ) -> T:
        """One operation: a transaction, retried across reconnections where that is safe.

        A failure before the commit changed nothing, so ``fn`` runs again. A failure
        during the commit leaves the outcome unknown; then ``resolve`` (default: ``fn``,
        for operations whose repetition is harmless) runs instead, in a new transaction.
        ``batch``: a `record` batch, run on its own connection (``"_rec_conn"``).
        """
        main = not batch
        lane = "_rec_conn" if batch else "_conn"
        with self._lock if main else self._rec_lock:
            if self._closed:
                raise StoreError(f"cannot {what}: the store is closed")
            if self._busy if main else self._rec_busy:
                raise StoreError(f"cannot {what} from inside another store call (advance?)")
            if main:
                self._busy = True
            else:
                self._rec_busy = True
            try:
                return self._retrying(what, fn, resolve if resolve is not None else fn, write, lane)
            finally:
                if main:
                    self._busy = False
                else:
                    self._rec_busy = False

    def _retrying(
        self,
        what: str,
        fn: Callable[[Cursor], T],
        resolve: Callable[[Cursor], T],
        write: bool,
        lane: str = "_conn",
    ) -> T:
        began = time.monotonic()
        delay = self._backoff_min
        slept = 0.0  # counted too, so an injected sleep that returns at once still ends
        unknown = False
        while True:
            try:
                return self._attempt(what, resolve if unknown else fn, lane)
            except _Retry as retry:
                unknown = unknown or (retry.unknown and write)
                error = self._scrub(f"{type(retry.cause).__name__}: {retry.cause}".strip())
                waited = max(time.monotonic() - began, slept)
                if self._closed:
                    raise StoreError(f"cannot {what}: the store is closed") from retry.cause
                if waited + delay > self._reconnect_timeout:
                    raise StoreError(
                        f"cannot {what}: database {self._redacted!r} unreachable for"
                        f" {waited:.1f} s (reconnect_timeout={self._reconnect_timeout!r}):"
                        f" {error}"
                    ) from retry.cause
                _log.warning(
                    "cannot %s (%s)%s; reconnecting to %r in %.2f s",
                    what,
                    error,
                    ", commit outcome unknown: will check it" if unknown else "",
                    self._redacted,
                    delay,
                )
                self._sleep(delay)
                slept += delay
                delay = min(delay * 2, self._backoff_max)
                if self._closed:
                    raise StoreError(f"cannot {what}: the store is closed") from retry.cause

    # -- the dialect --------------------------------------------------------------------

    #: A look claims for its idle workers only (`ClaimAhead`). With pools of six it
    #: paid to claim a pool ahead (a look's round trips and row locks cost more than
    #: the starts of runs claimed ahead); with the default pool of 32 it does not: a
    #: burst on one node ran 1.08x as fast at 0.91x the CPU per run without it, on
    #: three 0.95-1.03x at 0.95-1.01x (bench/postgres.py, twice).
    claim_ahead: ClassVar[int] = 0
    _PARAM: ClassVar[str] = "%s"
    _SET_VERSION: ClassVar[str] = (
        "INSERT INTO tickwork_meta VALUES ('schema_version', %s) ON CONFLICT (key)"
        " DO UPDATE SET value = excluded.value"
    )
    _LAST_TOKEN: ClassVar[bool] = True
    _LOST: ClassVar[str] = "the owner's database sessions ended"
    _WORDS: ClassVar[Mapping[str, str]] = {
        "jobs": "tickwork_jobs",
        "claims": "tickwork_claims",
        "nodes": "tickwork_nodes",
        "ledger": "tickwork_ledger",
        "actions": "tickwork_actions",
        "alerts": "tickwork_alert_episodes",
        "by_id": 'id COLLATE "C"',
        "any": "= ANY(%s)",
        "snapshot": "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY",
        "lock": " FOR NO KEY UPDATE",
        "if_absent": " ON CONFLICT (id) DO NOTHING",
        # What an insert does when its row exists (a dialect's upsert clauses):
        "queued_once": " ON CONFLICT DO NOTHING",  # a chained run (stores/_chains.py)
        "set_limit": " ON CONFLICT (name) DO UPDATE SET lim = excluded.lim",  # _pools.py
        "episode_once": " ON CONFLICT (job_id, kind) DO NOTHING",  # stores/_alerts.py
        "greatest": "greatest",
        "true": "true",
        "false": "false",
        "claimable": _CLAIMABLE,
        "runnable": _RUNNABLE,
        "unpaused": "(NOT j.paused OR c.origin = 'manual')",
        "watched": "",
        "pools": "tickwork_pools",  # concurrency pools (stores/_pools.py)
        "lock_pools": " FOR UPDATE",  # the claims that involve a limit take turns
        "pool_of": "(j.spec::jsonb ->> 'pool')",
        "daemons": "tickwork_daemons",  # the live daemons of each namespace (_holders.py)
        "lock_daemons": "LOCK TABLE tickwork_daemons IN SHARE ROW EXCLUSIVE MODE",
        "queues": "tickwork_queues",  # the one-offs' totals per function (_oneoffs.py)
        "add_up": " ON CONFLICT (queue) DO UPDATE SET done = tickwork_queues.done"
        " + excluded.done, failed = tickwork_queues.failed + excluded.failed,"
        " dropped = tickwork_queues.dropped + excluded.dropped",
    }

    _insert_declared = insert_declared  # new jobs of a batch (stores/_upserts.py)
    _insert_oneoffs = _insert_oneoffs  # one-offs (stores/_oneoffs.py)
    _runnable = _runnable  # the one-offs this node claims
    oneoff_statement = _oneoff_statement
    _enqueue_xact: tuple[Cursor, int] | None = None  # an enqueue's transaction, for _xact
    _xact = _xact
    _xact_committed = _xact_committed

    def _q_list(self, template: str, values: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        return self._q(template), (list(values),)

    def _changed(self, cur: Cursor, job_id: str) -> None:
        """Announce a change; PostgreSQL delivers it only if the transaction commits."""
        self._wakeups.changed()  # and a run ending here looks again (`look_after_finish`)
        cur.execute("SELECT pg_notify(%s, %s)", (self._channel, job_id))

    # -- where the statements differ (the hooks of SQLStore) ----------------------------

    def _candidates(
        self, cur: Cursor, now: float, seen: list[str], n: int, *, retries: bool
    ) -> list[Sequence[Any]] | None:
        """Lock job rows nobody else holds (``SKIP LOCKED``), then re-read them."""
        params: tuple[Any, ...]
        runnable = self._runnable()
        if retries:
            lock, reread, params = _LOCK_RETRIES, _REREAD_RETRIES, (now, now, seen, *runnable, n)
        else:
            lock, reread, params = _LOCK_DUE, _REREAD_DUE, (now, seen, *runnable, n)
        locked = [r[0] for r in cur.execute(lock, params).fetchall()]
        if not locked:
            return None
        seen.extend(locked)
        rows = cur.execute(reread, (locked, now, n)).fetchall()
        if rows:
            self._pools.hint(bool(rows[0][-1]))  # the last column: any pool limit at all
        return rows

    def _write_claims(
        self,
        cur: Cursor,
        inserts: list[tuple[Any, ...]],
        moves: list[tuple[float | None, str]],
    ) -> None:
        """A batch's claims and its jobs' next runs in one set-based statement."""
        tokens, jobs, owners, scheduled, claimed, leases, started = zip(*inserts, strict=True)
        next_runs = [m[0] for m in moves]
        ids = [m[1] for m in moves]
        cur.execute(
            _WRITE_CLAIMS,
            (
                owners[0], claimed[0], leases[0],
                list(tokens), list(jobs), list(scheduled), list(started),
                next_runs, ids, ids,
            ),
        )  # fmt: skip

    def _ledger_insert(self, entries: list[tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
        """One statement for ``entries`` (at least one) and its parameters."""
        if len(entries) == 1:
            return _LEDGER_ONE, entries[0]
        return _LEDGER_JSON, (_ledger_json(entries),)

    def _insert_ledger(self, cur: Cursor, entries: list[tuple[Any, ...]]) -> None:
        cur.execute(*self._ledger_insert(entries))

    def _last_run(
        self, cur: Cursor, params: tuple[Any, ...], entries: list[tuple[Any, ...]]
    ) -> None:
        """The job row's update and the ledger's insert in one statement: one round trip.

        The insert is a data-modifying ``WITH``: it runs to completion within the
        statement, whether or not the update reads it, so in the same transaction.
        """
        if not entries or self._ledger.keep == 0:
            super()._last_run(cur, params, entries)
            return
        insert, values = self._ledger_insert(entries)
        cur.execute(f"WITH ledger AS ({insert}) {self._q(LAST_RUN)}", (*values, *params))
        self._ledger.note_written(entries)

    def _release(self, cur: Cursor, f: Finish) -> tuple[float | None, bool] | None:
        claim = f.claim
        job = cur.execute(
            "SELECT overlap, next_run, EXISTS (SELECT 1 FROM tickwork_chains c"  # chains:
            " WHERE c.upstream = tickwork_jobs.id) FROM tickwork_jobs"  # in the same trip
            " WHERE id = %s FOR NO KEY UPDATE",
            (claim.job_id,),
        ).fetchone()
        if job is None:
            return None
        if hands_back(f.outcome, None):
            # A cancelled claim is handed back if it never started: the UPDATE checks
            # that on the claim row itself (start does not lock the job row).
            handed = cur.execute(
                "UPDATE tickwork_claims SET token = %s, owner = '', lease_until = %s,"
                " retry = true WHERE token = %s AND owner = %s AND started IS NULL"
                " RETURNING started",
                (secrets.token_hex(16), f.ended, claim.token, claim.owner),
            ).fetchone()
            if handed is not None:
                return None, True
        row = cur.execute(
            "DELETE FROM tickwork_claims WHERE token = %s AND owner = %s RETURNING started",
            (claim.token, claim.owner),
        ).fetchone()
        if row is None:
            return None
        if f.next_run is KEEP and job[0] != "allow" and job[1] is not None:
            # The released claim held back a job that allows no overlap: its next run,
            # which other nodes leave out of their wake-ups while it is held, can be
            # claimed now. Tell them rather than let them wait for a poll.
            self._changed(cur, claim.job_id)
        if not f.recorded:  # the finish writes the slot's entry: it asks about chains
            self._chains.hint(claim.token, bool(job[2]))  # no second look if none
        return row[0], False

    def _record_set(
        self, cur: Cursor, starts: list[Start], finishes: list[Finish]
    ) -> tuple[list[bool], list[bool]] | None:
        """A plain batch in three statements (`stores._pgbatch`), else None."""
        return record_set(self, cur, starts, finishes)

    def _owners_gone(self, cur: Cursor, mono: float) -> list[tuple[str, bool]]:
        """Listed owners none of whose sessions is left, seen so for `LIVENESS_GRACE`."""
        rows = cur.execute(_GONE_SQL, (self._owner_lock_key("")[0],)).fetchall()
        self._gone_seen = seen = {owner: self._gone_seen.get(owner, mono) for owner, _ in rows}
        return [(owner, holds) for owner, holds in rows if mono - seen[owner] >= LIVENESS_GRACE]

    def _expired(self, cur: Cursor, now: float, gone: list[str]) -> list[Sequence[Any]]:
        """Lock the job rows first, skipping those another transaction holds.

        By key from the claims to recover: never a scan of every job, even in the
        generic plan of a prepared statement. The claim rows are locked too, so they
        are acted on as committed: an owner alive past its lease may be starting or
        renewing its run (an UPDATE of the claim row alone, which never waits for the
        job row), and a start that committed must be seen (recorded ``abandoned``, never
        re-offered as not started). A claim row another transaction holds is skipped
        until the next look: waiting for it would stall this node's lane behind a
        stalled owner, and deadlock with a batch that locks its starts' claim rows
        before its finishes' job rows.
        """
        ids = [
            r[0]
            for r in cur.execute(
                "SELECT j.id FROM tickwork_jobs j WHERE j.id = ANY(ARRAY(SELECT c.job_id"
                " FROM tickwork_claims c WHERE c.owner <> ''"
                " AND (c.lease_until <= %s OR c.owner = ANY(%s))))"
                " FOR NO KEY UPDATE OF j SKIP LOCKED",
                (now, gone),
            ).fetchall()
        ]
        if not ids:
            return []
        return cur.execute(
            f"SELECT {CLAIM_COLUMNS}, j.spec FROM tickwork_claims c JOIN tickwork_jobs j"
            " ON j.id = c.job_id WHERE c.job_id = ANY(%s) AND c.owner <> ''"
            " AND (c.lease_until <= %s OR c.owner = ANY(%s)) FOR UPDATE OF c SKIP LOCKED",
            (ids, now, gone),
        ).fetchall()

    def _liveness_wait(self) -> float:
        return LIVENESS_GRACE if self._gone_seen else LIVENESS_WAKE

    def _tag(self, conn: psycopg.Connection[Any], key: tuple[int, int]) -> None:
        conn.execute(_TAG_SQL, key)

    def _owner_lock_key(self, owner: str) -> tuple[int, int]:
        """The two-part advisory-lock key of ``owner`` in this store's schema."""
        space = zlib.crc32(f"tickwork-owner:{self._schema or ''}".encode()) & 0x7FFFFFFF
        return space, zlib.crc32(owner.encode()) & 0x7FFFFFFF

    def tag_sessions(self, owner: str) -> None:
        """Mark this store's sessions, now and after reconnects, as ``owner``'s.

        See `tickwork.stores.SessionLiveness`. Each connection holds a shared session-level
        advisory lock keyed by the owner: PostgreSQL releases it when the session ends
        (the process died, its connection was cut or terminated), so `live_owners` on any
        node sees the owner gone within seconds, not after its lease. The owner is also
        listed in ``tickwork_nodes``: from then on, every store on the database recovers
        the owner's claims as soon as none of its sessions is left (checked at most every
        `LIVENESS_CHECK` seconds, by the claim and recovery calls), not when their leases
        run out. Never raises for an unreachable database: a connection made later is
        marked when it opens.
        """
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty string, got {owner!r}")
        key = self._owner_lock_key(owner)
        with self._lock:
            self._owner_key = key
            self._owner = owner
            conn = self._conn
            if conn is None or self._closed:
                return
            try:
                conn.execute(_TAG_SQL, key)
                conn.execute(_NODE_SQL, (owner, key[1], time.time()))
                conn.commit()
            except psycopg.Error:
                self._drop()  # the next call reconnects, and marks the new session
        with self._rec_lock:
            self._drop("_rec_conn")  # reopened when next needed: marked then
        self.interrupt_wait()  # the listening connection marks itself on its next turn

    def live_owners(self, owners: Iterable[str]) -> set[str]:
        """Those of ``owners`` that an open session of this database is marked with.

        See `tickwork.stores.SessionLiveness`: an owner whose scheduler called
        `tag_sessions` and whose sessions have all ended is absent.

        Raises:
            StoreError: The database cannot be reached.

        """
        wanted = [owner for owner in set(owners) if owner]
        if not wanted:
            return set()
        live: set[str] = self._run(
            "read the live sessions", lambda cur: self._live_holders(cur, wanted), write=False
        )
        return live

    def _live_holders(self, cur: Cursor, owners: Sequence[str]) -> set[str]:
        """Those of ``owners`` whose session lock some session holds (`live_owners`)."""
        wanted = {owner: self._owner_lock_key(owner) for owner in owners}
        if not wanted:
            return set()
        cur.execute(
            "SELECT DISTINCT objid::bigint FROM pg_locks WHERE locktype = 'advisory'"
            " AND granted AND objsubid = 2 AND classid = %s::bigint::oid AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())",
            (next(iter(wanted.values()))[0],),
        )
        held = {int(row[0]) for row in cur.fetchall()}
        return {owner for owner, key in wanted.items() if key[1] in held}

    def read_clock(self, local: Callable[[], float]) -> tuple[float, float, float]:
        """Read the database server's clock, bracketed by two calls of ``local``.

        See `tickwork.stores.StoreClock`: ``(server time, local midpoint, uncertainty)``.
        The brackets are taken around the statement alone, not the wait for the store's
        lock or a reconnection, so the uncertainty is one round trip's half.

        Raises:
            StoreError: The database cannot be reached.

        """

        def body(cur: Cursor) -> tuple[float, float, float]:
            before = local()
            cur.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
            row = cur.fetchone()
            after = local()
            assert row is not None
            return float(row[0]), (before + after) / 2.0, (after - before) / 2.0

        return self._run("read the database clock", body, write=False)

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections; later calls raise `StoreError`. Idempotent.

        A reconnection wait in another thread is cut short, and a `wait_for_change`
        in another thread returns (then raises on its next call).
        """
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self.interrupt_wait()
        with self._lock:
            self._drop()
        with self._rec_lock:
            self._drop("_rec_conn")
        with self._listen_lock:
            self._drop_listener()
            self._wake_r.close()
            self._wake_w.close()
