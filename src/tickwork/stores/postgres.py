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

import hashlib
import json
import logging
import secrets
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.stores._errors import SchemaVersionError, StoreError

from ._alerts import EPISODE_TABLE
from ._holders import DAEMONS_TABLE
from ._looks import LookBoard
from ._model import KEEP, Finish, Start, check_positive, check_time, hands_back
from ._oneoffs import ONEOFF_COLUMNS, ONEOFF_TOTALS, OneOffRow
from ._pgbatch import insert_declared, record_set
from ._sql import (
    CLAIM_COLUMNS,
    HISTORY_DAYS,
    HISTORY_KEEP,
    JOB_COLUMNS,
    LAST_RUN,
    LEDGER_INSERT,
    OPERATOR_GATE,
    SQLStore,
    schema_news,
)
from ._sql import LIVENESS_CHECK as LIVENESS_CHECK
from ._sql import LIVENESS_WAKE as LIVENESS_WAKE

__all__ = ["APPLICATION", "MIGRATIONS", "PostgresStore", "redact_dsn"]

_log = logging.getLogger("tickwork.stores")

T = TypeVar("T")
Cursor = psycopg.Cursor[Any]

#: The ``application`` value in ``tickwork_meta``: how a schema is recognised as ours.
APPLICATION: Final = "tickwork"

_MAX_IDENTIFIER: Final = 63  # PostgreSQL's NAMEDATALEN - 1, in bytes


def _create_v1(cur: Cursor) -> None:
    """Schema 1: jobs (declaration as JSON text + tracked state) and live claims."""
    cur.execute(
        """
        CREATE TABLE tickwork_jobs (
            id text PRIMARY KEY,
            spec text NOT NULL,
            schedule text NOT NULL,
            overlap text NOT NULL,
            paused boolean NOT NULL,
            next_run double precision,
            last_scheduled double precision,
            last_started double precision,
            last_ended double precision,
            last_outcome text,
            last_error text,
            last_token text
        )
        """
    )
    cur.execute(
        "CREATE INDEX tickwork_jobs_due ON tickwork_jobs (next_run, id)"
        " WHERE next_run IS NOT NULL AND NOT paused"
    )
    cur.execute(
        """
        CREATE TABLE tickwork_claims (
            token text PRIMARY KEY,
            job_id text NOT NULL REFERENCES tickwork_jobs (id) ON DELETE CASCADE,
            owner text NOT NULL,
            scheduled double precision NOT NULL,
            claimed_at double precision NOT NULL,
            lease_until double precision NOT NULL,
            started double precision
        )
        """
    )
    cur.execute("CREATE INDEX tickwork_claims_job ON tickwork_claims (job_id)")
    cur.execute("CREATE INDEX tickwork_claims_lease ON tickwork_claims (lease_until)")


def _retry_v2(cur: Cursor) -> None:
    """Schema 2: ``retry`` marks a claim that re-offers a recovered slot.

    A retry nobody has taken yet has ``owner = ''`` (and no start); the index finds them.
    """
    cur.execute("ALTER TABLE tickwork_claims ADD COLUMN retry boolean NOT NULL DEFAULT false")
    cur.execute(
        "CREATE INDEX tickwork_claims_pending ON tickwork_claims (scheduled) WHERE owner = ''"
    )


def _nodes_v3(cur: Cursor) -> None:
    """Schema 3: the owners that tagged their sessions (`PostgresStore.tag_sessions`).

    A claim of an owner listed here whose sessions have all ended is recovered at once;
    an owner never listed (a store used without `DurableScheduler`) keeps its lease.
    """
    cur.execute(
        "CREATE TABLE tickwork_nodes (owner text PRIMARY KEY, lock_key bigint NOT NULL,"
        " tagged_at double precision NOT NULL)"
    )


def _ledger_v4(cur: Cursor) -> None:
    """Schema 4: the slot ledger, one entry per ended slot (see `SQLStore.history`)."""
    cur.execute(
        """
        CREATE TABLE tickwork_ledger (
            seq bigserial PRIMARY KEY,
            job_id text NOT NULL,
            scheduled double precision NOT NULL,
            outcome text NOT NULL,
            slots integer NOT NULL DEFAULT 1,
            origin text NOT NULL DEFAULT 'schedule',
            claimed double precision,
            started double precision,
            ended double precision,
            node text NOT NULL DEFAULT '',
            attempt integer NOT NULL DEFAULT 1,
            error text,
            output text,
            recorded double precision NOT NULL
        )
        """
    )
    cur.execute("CREATE INDEX tickwork_ledger_job ON tickwork_ledger (job_id, seq)")


def _control_v5(cur: Cursor) -> None:
    """Schema 5: runtime control (issue 14): a pause's note and end, manual runs, actions.

    As SQLite's schema 6 (`tickwork.stores.sqlite`), without its change counter:
    changes are announced with ``NOTIFY``.
    """
    cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN control text")
    cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN paused_until double precision")
    cur.execute(
        "CREATE INDEX tickwork_jobs_paused_until ON tickwork_jobs (paused_until)"
        " WHERE paused_until IS NOT NULL"
    )
    cur.execute("ALTER TABLE tickwork_claims ADD COLUMN origin text NOT NULL DEFAULT 'schedule'")
    cur.execute(
        "CREATE TABLE tickwork_actions (seq bigserial PRIMARY KEY, job_id text NOT NULL,"
        " action text NOT NULL, actor text NOT NULL, at double precision NOT NULL,"
        " note text, detail text)"
    )
    cur.execute("CREATE INDEX tickwork_actions_job ON tickwork_actions (job_id, seq)")


def _first_slot_v6(cur: Cursor) -> None:
    """Schema 6: ``first_slot``, the job's first planned slot: as SQLite's schema 7."""
    cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN first_slot double precision")


def _alert_episodes_v7(cur: Cursor) -> None:
    """Schema 7: open dead-man alert episodes: as SQLite's schema 8."""
    cur.execute(
        EPISODE_TABLE.format(t="tickwork_alert_episodes", text="text", real="double precision")
    )


def _chains_v8(cur: Cursor) -> None:
    """Schema 8: chains (``after``): the declared edges and the runs a finish queued.

    As SQLite's schema 9 (`tickwork.stores.sqlite`).
    """
    cur.execute(
        "CREATE TABLE IF NOT EXISTS tickwork_chains (job_id text NOT NULL REFERENCES"
        " tickwork_jobs (id) ON DELETE CASCADE, upstream text NOT NULL,"
        " on_outcome text NOT NULL, PRIMARY KEY (upstream, job_id))"
    )
    cur.execute("CREATE INDEX IF NOT EXISTS tickwork_chains_job ON tickwork_chains (job_id)")
    cur.execute(
        "CREATE TABLE IF NOT EXISTS tickwork_chain_runs (job_id text NOT NULL,"
        " scheduled double precision NOT NULL, upstream text NOT NULL,"
        " upstream_slot double precision NOT NULL, queued double precision NOT NULL,"
        " PRIMARY KEY (job_id, scheduled), UNIQUE (job_id, upstream, upstream_slot))"
    )
    cur.execute(
        "CREATE INDEX IF NOT EXISTS tickwork_chain_runs_queued ON tickwork_chain_runs (queued)"
    )


def _pools_v9(cur: Cursor) -> None:
    """Schema 9: concurrency pools: as SQLite's ``_pools_v10``. Safe to run again."""
    cur.execute(
        "CREATE TABLE IF NOT EXISTS tickwork_pools (name text PRIMARY KEY,"
        " lim integer NOT NULL CHECK (lim >= 1))"
    )


def _pool_wait_v10(cur: Cursor) -> None:
    """Schema 10: ``pool_wait``, the due slot held back for its pool: as SQLite's 11."""
    cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN pool_wait double precision")


def _daemons_v11(cur: Cursor) -> None:
    """Schema 11: the live daemons of each namespace: as SQLite's ``_daemons_v12``."""
    cur.execute(DAEMONS_TABLE.format(t="tickwork_daemons", text="text", real="double precision"))


def _oneoffs_v12(cur: Cursor) -> None:
    """Schema 12: one-offs: ``queue`` and their totals, as SQLite's ``_oneoffs_v13``."""
    cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN queue text")
    cur.execute("CREATE INDEX tickwork_jobs_declared ON tickwork_jobs (id) WHERE queue IS NULL")
    cur.execute("CREATE INDEX tickwork_jobs_queue ON tickwork_jobs (queue) WHERE queue IS NOT NULL")
    cur.execute(ONEOFF_TOTALS.format(t="tickwork_queues", text="text"))


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


#: ``MIGRATIONS[i]`` takes a schema from version ``i`` to ``i + 1`` inside the opening
#: transaction (under an advisory lock, so concurrent openers migrate once); the
#: current version is ``len(MIGRATIONS)``. Append only: a released step is never edited.
MIGRATIONS: list[Callable[[Cursor], None]] = [
    _create_v1,
    _retry_v2,
    _nodes_v3,
    _ledger_v4,
    _control_v5,
    _first_slot_v6,
    _alert_episodes_v7,
    _chains_v8,
    _pools_v9,
    _pool_wait_v10,
    _daemons_v11,
    _oneoffs_v12,
]

_TABLES: Final = ("tickwork_meta", "tickwork_jobs", "tickwork_claims")
# A job is claimable when due, not paused and not claimed, unless it allows overlap.
_CLAIMABLE: Final = (
    "j.next_run IS NOT NULL AND NOT j.paused AND (j.overlap = 'allow'"
    " OR NOT EXISTS (SELECT 1 FROM tickwork_claims c WHERE c.job_id = j.id))"
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
# already keeps its row). ``{t}``: the jobs table, qualified for an app's connection.
_ENQUEUE: Final = (
    f"INSERT INTO {{t}} ({ONEOFF_COLUMNS}) SELECT v.id, v.spec, v.schedule, 'skip', false,"
    " v.run_at, v.run_at, v.queue FROM unnest(%s::text[], %s::text[], %s::text[],"
    " %s::float8[], %s::text[]) AS v(id, spec, schedule, run_at, queue)"
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
    f"WITH t AS ({_ENQUEUE.format(t='tickwork_jobs')}) SELECT t.id, txid_current(),"
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
    query = f"WITH t AS ({_ENQUEUE.format(t=table)}) SELECT t.id, pg_notify(%s, 'enqueued') FROM t"
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
_SESSION_SQL: Final = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false)"
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
        or len(schema.encode()) > _MAX_IDENTIFIER
    ):
        raise ValueError(
            f"schema must be a non-empty printable name of at most 63 bytes or None, got {schema!r}"
        )
    return schema


def _connect_kwargs(params: Mapping[str, Any], connect_timeout: float) -> dict[str, Any]:
    """What `psycopg.connect` gets besides the DSN: the defaults the DSN does not set."""
    kwargs: dict[str, Any] = {"autocommit": False}
    if "connect_timeout" not in params:
        kwargs["connect_timeout"] = max(1, round(connect_timeout))
    if "application_name" not in params:
        kwargs["application_name"] = "tickwork"
    return kwargs


class PostgresStore(SQLStore[Cursor]):
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
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, got {type(dsn).__name__}")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ValueError(f"dsn is not a valid connection string: {exc}") from None
        self._password = str(params.get("password") or "")
        self._redacted = redact_dsn(dsn)
        self._schema = _check_schema(schema)
        self._reconnect_timeout = check_time("reconnect_timeout", reconnect_timeout)
        if self._reconnect_timeout < 0:
            raise ValueError(
                f"reconnect_timeout must be a finite number >= 0, got {reconnect_timeout!r}"
            )
        self._backoff_min = check_positive("backoff_min", backoff_min)
        self._backoff_max = check_positive("backoff_max", backoff_max)
        if self._backoff_max < self._backoff_min:
            raise ValueError(
                f"backoff_max must be >= backoff_min ({backoff_min!r}), got {backoff_max!r}"
            )
        connect_timeout = check_positive("connect_timeout", connect_timeout)
        if sleep is not None and not callable(sleep):
            raise TypeError(f"sleep must be callable as sleep(seconds), got {sleep!r}")
        self._closing = threading.Event()
        self._sleep: Callable[[float], object] = sleep or self._closing.wait
        self._dsn = dsn
        self._connect_kwargs = _connect_kwargs(params, connect_timeout)
        self._init_core(history_keep, history_days)
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
        self._board = LookBoard()  # the others' looks heard, and our announcements
        # tag_sessions: the advisory-lock key marking this store's sessions as an owner's,
        # and the key the listening connection holds (it is tagged by its own thread).
        self._owner_key: tuple[int, int] | None = None
        self._listen_key: tuple[int, int] | None = None
        # Owners whose sessions ended (checked at most every LIVENESS_CHECK seconds):
        self._gone_seen: dict[str, float] = {}  # owner -> when first seen without sessions
        # The listener: its own connection, and a socket pair to interrupt its wait.
        self._listen_lock = threading.Lock()
        self._listen_conn: psycopg.Connection[Any] | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        try:
            self._open_schema()
        except BaseException:
            self._closed = True
            self._drop()
            self._wake_r.close()
            self._wake_w.close()
            raise

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
            if self._schema is None:
                conn.execute(_SESSION_SQL)
            else:
                conn.execute(
                    sql.SQL(_SESSION_SQL + ", set_config('search_path', {}, false)").format(
                        sql.Literal(sql.Identifier(self._schema).as_string(conn))
                    )
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

    # -- the schema ---------------------------------------------------------------------

    def _inspect(self, cur: Cursor) -> int:
        """The schema version of our tables (0: none yet); refuses foreign tables."""
        # One statement, one snapshot: looked up one by one, a schema another opener
        # committed between two look-ups showed its tables without tickwork_meta, and
        # was refused as foreign.
        row = cur.execute(
            "SELECT " + ", ".join(["to_regclass(%s)"] * len(_TABLES)), _TABLES
        ).fetchone()
        found = [name for name, oid in zip(_TABLES, row or (), strict=True) if oid is not None]
        where = self._schema if self._schema is not None else "the search_path"
        if "tickwork_meta" not in found:
            if found:
                raise StoreError(
                    f"schema {where!r} has tables {found} but no tickwork_meta: they are not"
                    " tickwork's; refusing to use them (nothing was modified)"
                )
            return 0
        rows = dict(cur.execute("SELECT key, value FROM tickwork_meta").fetchall())
        if rows.get("application") != APPLICATION:
            raise StoreError(
                f"tickwork_meta in {where!r} belongs to another application"
                f" ({rows.get('application')!r}); refusing to use it (nothing was modified)"
            )
        try:
            version = int(rows["schema_version"])
        except (KeyError, ValueError):
            raise StoreError(
                f"tickwork_meta in {where!r} has no valid schema_version"
                f" ({rows.get('schema_version')!r})"
            ) from None
        if version > len(MIGRATIONS):
            raise SchemaVersionError(
                f"schema {where!r} has tickwork schema version {version}; this tickwork"
                f" supports up to {len(MIGRATIONS)}: it was written by a newer tickwork;"
                " upgrade tickwork (pip install --upgrade tickwork) to open it (nothing was"
                " modified)"
            )
        return version

    def _open_schema(self) -> None:
        """Check the tables; create or migrate them if needed, once across processes.

        Creation is serialised by a session-level advisory lock taken in a transaction
        of its own, and the tables are inspected again in a transaction that starts
        after the lock is held. Inspecting again inside the transaction that waited
        for the lock is not enough: PostgreSQL reads relation names through a per-
        backend catalog cache that is refreshed when a transaction starts, so a table
        another opener committed meanwhile may still look absent there, and creating
        it fails with "already exists".
        """
        if self._run("open the store", self._needs_migration, write=False):
            key = f"tickwork:{self._schema or ''}"
            self._run("lock the schema", lambda cur: self._advisory(cur, "lock", key))
            try:
                self._run("prepare the schema", self._prepare, write=False)
            finally:
                self._run("unlock the schema", lambda cur: self._advisory(cur, "unlock", key))
        self._run("open the store", self._learn_channel, write=False)

    @staticmethod
    def _advisory(cur: Cursor, what: str, key: str) -> None:
        cur.execute(
            sql.SQL("SELECT {}(hashtextextended(%s, 0))").format(
                sql.Identifier(f"pg_advisory_{what}")
            ),
            (key,),
        )

    def _needs_migration(self, cur: Cursor) -> bool:
        """Whether the schema or its tables are missing or older than this tickwork."""
        if self._schema is not None:
            exists = cur.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)
            ).fetchone()
            if exists is None:
                return True
        return self._inspect(cur) < len(MIGRATIONS)

    def _prepare(self, cur: Cursor) -> None:
        """Create or migrate the tables; the caller holds the schema's advisory lock."""
        name = self._schema if self._schema is not None else ""
        if self._schema is not None:
            cur.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
            )
        version = self._inspect(cur)  # another process may have done it meanwhile
        if version == 0:
            cur.execute("CREATE TABLE tickwork_meta (key text PRIMARY KEY, value text NOT NULL)")
            cur.execute("INSERT INTO tickwork_meta VALUES ('application', %s)", (APPLICATION,))
        for step in range(version, len(MIGRATIONS)):
            MIGRATIONS[step](cur)
        if version < len(MIGRATIONS):
            _log.info("%s", schema_news(f"tickwork schema in {name!r}", version, len(MIGRATIONS)))
        cur.execute(
            "INSERT INTO tickwork_meta VALUES ('schema_version', %s) ON CONFLICT (key)"
            " DO UPDATE SET value = excluded.value",
            (str(len(MIGRATIONS)),),
        )

    def _learn_channel(self, cur: Cursor) -> None:
        """Name the NOTIFY channel after the schema the tables live in."""
        row = cur.execute("SELECT current_schema()").fetchone()
        current = str(row[0]) if row is not None else ""
        channel = f"tickwork:{current}"
        if len(channel.encode()) > _MAX_IDENTIFIER:
            channel = "tickwork:" + hashlib.sha256(current.encode()).hexdigest()[:32]
        self._channel = channel
        # Looks that took runs (`LookNotices`): a channel of their own, not a change.
        self._looks_channel = "tickwork-looks:" + hashlib.sha256(channel.encode()).hexdigest()[:32]

    # -- the dialect --------------------------------------------------------------------

    #: A look claims for its idle workers only (`ClaimAhead`). With pools of six it
    #: paid to claim a pool ahead (a look's round trips and row locks cost more than
    #: the starts of runs claimed ahead); with the default pool of 32 it does not: a
    #: burst on one node ran 1.08x as fast at 0.91x the CPU per run without it, on
    #: three 0.95-1.03x at 0.95-1.01x (bench/postgres.py, twice).
    claim_ahead: ClassVar[int] = 0
    _PARAM: ClassVar[str] = "%s"
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
        generic plan of a prepared statement.
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
            " AND (c.lease_until <= %s OR c.owner = ANY(%s))",
            (ids, now, gone),
        ).fetchall()

    def _liveness_wait(self) -> float:
        return LIVENESS_GRACE if self._gone_seen else LIVENESS_WAKE

    # -- ChangeNotifier -----------------------------------------------------------------

    def wait_for_change(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change announced on `channel`.

        See `tickwork.stores.ChangeNotifier.wait_for_change`. The first call opens a
        second connection that ``LISTEN``s and returns True at once (changes before it
        were not watched). A lost listening connection is reopened by the next call,
        which then returns True; while the database is unreachable, a call waits out its
        timeout (retrying with backoff) and returns False. Calls from several threads
        take turns.

        Raises:
            StoreError: The store is closed.
            ValueError: ``timeout`` is negative or not finite.

        """
        timeout = check_time("timeout", timeout)
        if timeout < 0:
            raise ValueError(f"timeout must be a finite number >= 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        with self._listen_lock:
            if self._closed:
                raise StoreError("cannot wait for changes: the store is closed")
            if self._take_wakeup():
                return True
            if self._listen_conn is None:
                return self._start_listening(deadline)
            conn = self._listen_conn
            try:
                key = self._owner_key
                if key is not None and key != self._listen_key:  # tagged since it connected
                    conn.execute(_TAG_SQL, key)
                    self._listen_key = key
                if self._heard(conn):
                    return True
                while True:
                    remaining = deadline - time.monotonic()
                    ready, _, _ = select.select(
                        [conn.fileno(), self._wake_r.fileno()], [], [], max(0.0, remaining)
                    )
                    if self._wake_r.fileno() in ready:
                        self._take_wakeup()
                        return True
                    if ready and self._heard(conn):
                        return True
                    if remaining <= 0:
                        return False
            except (psycopg.Error, OSError, ValueError) as exc:
                if self._closed:
                    raise StoreError("cannot wait for changes: the store is closed") from None
                _log.warning(
                    "lost the listening connection to %r (%s); reconnecting",
                    self._redacted,
                    self._scrub(f"{type(exc).__name__}: {exc}"),
                )
                self._drop_listener()
                return True

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

    def _start_listening(self, deadline: float) -> bool:
        """Open the listening connection (called with the listen lock held)."""
        delay = self._backoff_min
        while True:
            try:
                conn = psycopg.connect(self._dsn, **{**self._connect_kwargs, "autocommit": True})
            except psycopg.Error as exc:
                remaining = deadline - time.monotonic()
                _log.warning(
                    "cannot listen for changes on %r (%s); retrying in %.2f s",
                    self._redacted,
                    self._scrub(f"{type(exc).__name__}: {exc}"),
                    min(delay, max(remaining, 0.0)),
                )
                if remaining <= 0:
                    return False
                ready, _, _ = select.select([self._wake_r], [], [], min(delay, remaining))
                if ready or self._closed:
                    self._take_wakeup()
                    return True
                delay = min(delay * 2, self._backoff_max)
                continue
            key = self._owner_key
            try:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._looks_channel)))
                if key is not None:
                    conn.execute(_TAG_SQL, key)
            except psycopg.Error:
                conn.close()
                return True  # the next call tries again
            self._listen_conn = conn
            self._listen_key = key
            return True

    def _heard(self, conn: psycopg.Connection[Any]) -> bool:
        """Take the notifications that arrived: whether any announced a change.

        A look another scheduler announced (`LookNotices`) is noted, not a change; the
        withdrawal of a promise this store deferred to (`LookCover`) is one.
        """
        changed = False
        for note in conn.notifies(timeout=0):
            if note.channel != self._looks_channel or self._board.heard(self._owner, note.payload):
                changed = True
        return changed

    def look_elsewhere(self) -> tuple[int, float, float | None] | None:
        """The latest look another scheduler announced (`LookNotices`), or None."""
        return self._board.latest()

    def _announce_look(self, cur: Cursor, owner: str, wake: float | None) -> None:
        """Tell the other schedulers' listeners that ``owner`` took runs (on commit).

        Each announcement costs every listening session a short transaction, so they
        are spaced, and carry this scheduler's promise when it makes one (`LookBoard`).
        """
        payload = self._board.announcement(owner, wake)
        if payload is not None:
            cur.execute("SELECT pg_notify(%s, %s)", (self._looks_channel, payload))

    def cover(self, able: bool) -> bool:
        """Whether this scheduler can look at every due time; whether it promises it.

        See `tickwork.stores.contract.LookCover`. A withdrawal is announced at once, in
        a transaction of its own; if that fails, the promise lapses on its own within
        `COVER_FOR` seconds.
        """
        owner = self._owner
        if owner is None:
            return False
        if self._board.cover(owner, able):
            payload = self._board.withdrawal(owner)

            def body(cur: Cursor) -> None:
                cur.execute("SELECT pg_notify(%s, %s)", (self._looks_channel, payload))

            try:
                self._run("withdraw a promise to look", body)
            except StoreError as exc:
                _log.debug("could not withdraw the promise to look: %s", exc)
        return self._board.covering()

    def covered(self) -> float:
        """Seconds left of another scheduler's promise this one defers to (`LookCover`)."""
        return self._board.covered(self._owner)

    def _drop_listener(self) -> None:
        self._board.forget()  # a withdrawal may be missed until the next connection
        conn, self._listen_conn = self._listen_conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken
                _log.debug("closing the listening connection failed", exc_info=True)

    def _take_wakeup(self) -> bool:
        """Consume pending `interrupt_wait` calls; whether there were any."""
        woken = False
        with suppress(OSError):  # BlockingIOError: drained
            while self._wake_r.recv(4096):
                woken = True
        return woken

    def interrupt_wait(self) -> None:
        """Make the current (or next) `wait_for_change` return True promptly; any thread."""
        # Fails only when a wake-up is pending already, or the store is closed.
        with suppress(OSError):
            self._wake_w.send(b"\0")

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
