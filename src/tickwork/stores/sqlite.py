"""`SQLiteStore`: durable jobs in one SQLite file (stdlib `sqlite3`), the embedded default.

Import this module explicitly (``from tickwork.stores.sqlite import SQLiteStore``);
``import tickwork`` never loads `sqlite3`.

The file is in WAL mode and every state change is one ``BEGIN IMMEDIATE`` transaction,
so several processes on one host may share a file (each due run is claimed by exactly
one of them). A file this module did not create is inspected read-only first: a
non-SQLite, corrupt or foreign database, or one written by a newer tickwork, is refused
with an error and never modified.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Final, TypeVar

from tickwork.stores._errors import SchemaVersionError, StoreError
from tickwork.stores._procs import own_identity, process_alive, process_scope

from ._alerts import EPISODE_TABLE
from ._checks import check_positive, check_time
from ._holders import DAEMONS_TABLE
from ._oneoffs import ONEOFF_COLUMNS, ONEOFF_TOTALS, OneOffRow
from ._records import Finish, hands_back
from ._sql import (
    CLAIM_COLUMNS,
    HISTORY_DAYS,
    HISTORY_KEEP,
    JOB_COLUMNS,
    OPERATOR_GATE,
    SQLStore,
    schema_news,
)
from ._sql import LIVENESS_CHECK as LIVENESS_CHECK
from ._sql import LIVENESS_WAKE as LIVENESS_WAKE

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SQLiteStore"]

_log = logging.getLogger("tickwork.stores")

T = TypeVar("T")

#: ``PRAGMA application_id`` of a tickwork database (ASCII "tick"): how a file is
#: recognised as ours, and anything else as foreign.
APPLICATION_ID: Final = 0x7469636B

_MAGIC: Final = b"SQLite format 3\x00"

#: What a damaged file's refusal adds: that it is untouched, and the ways back.
_DAMAGED: Final = (
    "; refusing to use it, the file was not modified: if it is the state, restore it from"
    " a backup (or try `sqlite3 FILE .recover`), or move it aside to start a new state"
    " (the jobs file declares the jobs again; their history, pauses and next runs stay in"
    " the old file)"
)

#: Seconds between two looks of `SQLiteStore.wait_for_change` at the database.
CHANGE_CHECK: Final = 0.2


def _create_v1(conn: sqlite3.Connection) -> None:
    """Schema 1: jobs (declaration as JSON text + tracked state) and live claims."""
    conn.execute(
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY NOT NULL,
            spec TEXT NOT NULL CHECK (typeof(spec) = 'text'),
            schedule TEXT NOT NULL CHECK (typeof(schedule) = 'text'),
            overlap TEXT NOT NULL,
            paused INTEGER NOT NULL,
            next_run REAL,
            last_scheduled REAL,
            last_started REAL,
            last_ended REAL,
            last_outcome TEXT,
            last_error TEXT
        )
        """
    )
    conn.execute(
        "CREATE INDEX jobs_due ON jobs (next_run) WHERE next_run IS NOT NULL AND paused = 0"
    )
    conn.execute(
        """
        CREATE TABLE claims (
            token TEXT PRIMARY KEY NOT NULL,
            job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            scheduled REAL NOT NULL,
            claimed_at REAL NOT NULL,
            lease_until REAL NOT NULL,
            started REAL
        )
        """
    )
    conn.execute("CREATE INDEX claims_job ON claims (job_id)")
    conn.execute("CREATE INDEX claims_lease ON claims (lease_until)")


def _retry_v2(conn: sqlite3.Connection) -> None:
    """Schema 2: ``retry`` marks a claim that re-offers a recovered slot.

    A retry nobody has taken yet has ``owner = ''`` (and no start); the index finds them.
    """
    conn.execute("ALTER TABLE claims ADD COLUMN retry INTEGER NOT NULL DEFAULT 0")
    conn.execute("CREATE INDEX claims_pending ON claims (scheduled) WHERE owner = ''")


def _nodes_v3(conn: sqlite3.Connection) -> None:
    """Schema 3: owners that listed their process (`SQLiteStore.tag_sessions`).

    ``scope`` says where ``pid`` and ``started`` (its start time in clock ticks) can be
    judged: the host, its boot and the pid namespace (`tickwork.stores._procs.process_scope`).
    """
    conn.execute(
        "CREATE TABLE nodes (owner TEXT PRIMARY KEY NOT NULL, scope TEXT NOT NULL,"
        " pid INTEGER NOT NULL, started INTEGER NOT NULL, tagged_at REAL NOT NULL)"
    )


def _due_order_v4(conn: sqlite3.Connection) -> None:
    """Schema 4: the due index also orders by id, as the claim does.

    With only ``next_run`` in it, every claim sorted all the jobs due at the same
    instant by id (a temporary B-tree): 10,000 one-shots due at once cost 11 ms per
    claim of 12, growing with the backlog. Ordered by ``(next_run, id)``, the claim
    reads the first rows of the index.
    """
    conn.execute("DROP INDEX jobs_due")
    conn.execute(
        "CREATE INDEX jobs_due ON jobs (next_run, id) WHERE next_run IS NOT NULL AND paused = 0"
    )


def _ledger_v5(conn: sqlite3.Connection) -> None:
    """Schema 5: the slot ledger, one entry per ended slot (see `SQLStore.history`).

    ``slots`` > 1: consecutive slots given up together; ``recorded``: when the entry was
    written (wall clock), for pruning by age. Entries outlive their job's removal until
    pruned, so the history of a job that is gone can still be read.
    """
    conn.execute(
        """
        CREATE TABLE ledger (
            seq INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            scheduled REAL NOT NULL,
            outcome TEXT NOT NULL,
            slots INTEGER NOT NULL DEFAULT 1,
            origin TEXT NOT NULL DEFAULT 'schedule',
            claimed REAL,
            started REAL,
            ended REAL,
            node TEXT NOT NULL DEFAULT '',
            attempt INTEGER NOT NULL DEFAULT 1,
            error TEXT,
            output TEXT,
            recorded REAL NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX ledger_job ON ledger (job_id, seq)")


def _control_v6(conn: sqlite3.Connection) -> None:
    """Schema 6: runtime control (issue 14): a pause's note and end, manual runs, actions.

    ``jobs.control``: the pause made at run time, as JSON (who, when, note), or NULL;
    ``jobs.paused_until``: when that pause ends by itself. ``claims.origin``: why the
    slot runs (``schedule``, ``manual`` for a trigger, ``backfill``). ``actions``: every
    control action, who took it and when. ``changes``: a counter bumped by every change
    that can make a run due sooner, which other processes' schedulers watch
    (`SQLiteStore.wait_for_change`).
    """
    conn.execute("ALTER TABLE jobs ADD COLUMN control TEXT")
    conn.execute("ALTER TABLE jobs ADD COLUMN paused_until REAL")
    conn.execute(
        "CREATE INDEX jobs_paused_until ON jobs (paused_until) WHERE paused_until IS NOT NULL"
    )
    conn.execute("ALTER TABLE claims ADD COLUMN origin TEXT NOT NULL DEFAULT 'schedule'")
    conn.execute(
        "CREATE TABLE actions (seq INTEGER PRIMARY KEY, job_id TEXT NOT NULL,"
        " action TEXT NOT NULL, actor TEXT NOT NULL, at REAL NOT NULL, note TEXT,"
        " detail TEXT)"
    )
    conn.execute("CREATE INDEX actions_job ON actions (job_id, seq)")
    conn.execute("CREATE TABLE changes (n INTEGER NOT NULL)")
    conn.execute("INSERT INTO changes (n) VALUES (0)")


def _first_slot_v7(conn: sqlite3.Connection) -> None:
    """Schema 7: ``jobs.first_slot``, the job's first planned slot (issue 26).

    Set when the job is first stored (its next run then) and never changed after, so a
    backfill can leave out the slots from before the job existed. Jobs stored before
    have NULL: when they were first declared is not known.
    """
    conn.execute("ALTER TABLE jobs ADD COLUMN first_slot REAL")


def _alert_episodes_v8(conn: sqlite3.Connection) -> None:
    """Schema 8: open dead-man alert episodes, one row per (job, condition).

    See `tickwork.stores._alerts`: the conditional insert and updates on this table
    decide which of the nodes watching a job sends each alert and recovery.
    """
    conn.execute(EPISODE_TABLE.format(t="alert_episodes", text="TEXT", real="REAL"))


def _chains_v9(conn: sqlite3.Connection) -> None:
    """Schema 9: chains (``after``): the declared edges, and the runs a finish queued.

    ``chains``: one row per edge (``job_id`` runs after ``upstream``, on its ``ok`` or
    ``any`` outcome), dropped with the job. ``chain_runs``: one row per chained run
    queued, naming the upstream slot that caused it; its unique key lets each upstream
    slot queue each downstream job once. Kept like the ledger (past the job's removal,
    pruned by age), so a chained entry's cause can still be read.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS chains (job_id TEXT NOT NULL REFERENCES jobs (id)"
        " ON DELETE CASCADE, upstream TEXT NOT NULL, on_outcome TEXT NOT NULL,"
        " PRIMARY KEY (upstream, job_id))"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS chains_job ON chains (job_id)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS chain_runs (job_id TEXT NOT NULL, scheduled REAL NOT NULL,"
        " upstream TEXT NOT NULL, upstream_slot REAL NOT NULL, queued REAL NOT NULL,"
        " PRIMARY KEY (job_id, scheduled), UNIQUE (job_id, upstream, upstream_slot))"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS chain_runs_queued ON chain_runs (queued)")


def _pools_v10(conn: sqlite3.Connection) -> None:
    """Schema 10: concurrency pools: each pool's limit, and ``*`` for ``max_running``.

    A job's pool is in its stored declaration; the claim counts the claims held per
    pool against these rows (`tickwork.stores._pools`). Safe to run again.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS pools (name TEXT PRIMARY KEY NOT NULL,"
        " lim INTEGER NOT NULL CHECK (lim >= 1))"
    )


def _pool_wait_v11(conn: sqlite3.Connection) -> None:
    """Schema 11: ``jobs.pool_wait``, the due slot a claim held back for its pool (issue 39).

    Written when the claim refuses the slot (its pool or ``max_running`` is full) and
    meaningful only while it equals ``next_run``: moving the job on needs no write.
    """
    conn.execute("ALTER TABLE jobs ADD COLUMN pool_wait REAL")


def _daemons_v12(conn: sqlite3.Connection) -> None:
    """Schema 12: the live daemons of each namespace and their jobs files (`_holders`)."""
    conn.execute(DAEMONS_TABLE.format(t="daemons", text="TEXT", real="REAL"))


def _oneoffs_v13(conn: sqlite3.Connection) -> None:
    """Schema 13: one-offs (`tickwork.stores._oneoffs`): ``jobs.queue`` and their totals.

    ``queue`` is NULL for declared jobs (a partial index lists them alone, however many
    one-offs wait) and a one-off's function otherwise; ``queues`` counts how they ended.
    """
    conn.execute("ALTER TABLE jobs ADD COLUMN queue TEXT")
    conn.execute("CREATE INDEX jobs_declared ON jobs (id) WHERE queue IS NULL")
    conn.execute("CREATE INDEX jobs_queue ON jobs (queue) WHERE queue IS NOT NULL")
    conn.execute(ONEOFF_TOTALS.format(t="queues", text="TEXT"))


_ENQUEUE: Final = (
    f"INSERT INTO jobs ({ONEOFF_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO NOTHING"
)


def _insert_oneoffs(
    store: SQLiteStore, cur: sqlite3.Connection, rows: Sequence[OneOffRow]
) -> set[str]:
    """`SQLiteStore._insert_oneoffs`: the rows in one ``executemany``, then announced.

    Only a keyed id can exist already (the others are random): those are looked up
    first, and a batch that names one id twice inserts its first row.
    """
    keyed = [r.id for r in rows if r.id.startswith("~key:")]
    there = set()
    for i in range(0, len(keyed), 500):
        part = keyed[i : i + 500]
        there |= {
            row[0]
            for row in cur.execute(
                f"SELECT id FROM jobs WHERE id IN ({','.join('?' * len(part))})", part
            ).fetchall()
        }
    new: dict[str, OneOffRow] = {}
    for r in rows:
        if r.id not in there:
            new.setdefault(r.id, r)
    cur.executemany(_ENQUEUE, [r.values() for r in new.values()])
    if new:
        store._changed(cur, rows[0].id)  # one announcement for the batch
    return set(new)


def _oneoff_statement(store: SQLiteStore, rows: Sequence[OneOffRow]) -> tuple[str, list[Any]]:
    """`SQLiteStore.oneoff_statement`: not offered; SQLite one-offs go through the store.

    Raises:
        ValueError: Always: an app's connection cannot write a SQLite store's state.

    """
    raise ValueError(
        f"connection must be None on a SQLite store ({store._path!r}): its state is written"
        " by the store's own connection only (enqueue without connection=; enqueueing"
        " in the app's own transaction needs PostgreSQL)"
    )


#: ``MIGRATIONS[i]`` takes a database from schema version ``i`` to ``i + 1`` inside the
#: opening transaction; the current version is ``len(MIGRATIONS)``. Append only: a
#: released step is never edited.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _create_v1,
    _retry_v2,
    _nodes_v3,
    _due_order_v4,
    _ledger_v5,
    _control_v6,
    _first_slot_v7,
    _alert_episodes_v8,
    _chains_v9,
    _pools_v10,
    _pool_wait_v11,
    _daemons_v12,
    _oneoffs_v13,
]

# A job is claimable when due, not paused and not claimed, unless it allows overlap.
_CLAIMABLE: Final = (
    "next_run IS NOT NULL AND paused = 0"
    " AND (overlap = 'allow' OR NOT EXISTS (SELECT 1 FROM claims c WHERE c.job_id = j.id))"
)
# A job row j is a declared job's or a one-off's this process allows (stores/_oneoffs.py),
# asked of the store's filter (a function of the connection).
_RUNNABLE: Final = "(j.queue IS NULL OR tickwork_runnable(j.queue))"
# Due jobs and pending retries (recovered slots) of jobs not paused, in claim order;
# ``{seen}`` holds a mark for each key already looked at by this claim.
# Both candidate reads end with whether any pool limit exists (stores/_pools.py): a
# state without limits then reads no limit rows of its own in the claim.
_DUE: Final = (
    f"SELECT {JOB_COLUMNS}, EXISTS (SELECT 1 FROM pools) FROM jobs j WHERE {_CLAIMABLE}"
    " AND next_run <= ?"
    f" AND id NOT IN ({{seen}}) AND {_RUNNABLE} ORDER BY next_run, id LIMIT ?"
)
_RETRIES: Final = (
    "SELECT c.token, c.job_id, c.scheduled, j.spec, c.origin, EXISTS (SELECT 1 FROM pools)"
    " FROM claims c"
    " JOIN jobs j ON j.id = c.job_id WHERE c.owner = ''"
    " AND (j.paused = 0 OR c.origin = 'manual')"
    f" AND c.scheduled <= ? AND c.token NOT IN ({{seen}}) AND {_RUNNABLE}"
    f" AND {OPERATOR_GATE.replace('{claims}', 'claims')}"
    " ORDER BY c.scheduled, c.token LIMIT ?"
)


def _check_header(path: str) -> None:
    """Refuse a non-empty file that is not SQLite, by its header only (nothing opened)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read database file {path!r}: {exc}") from exc
    if head and head != _MAGIC:
        raise StoreError(
            f"{path!r} is not a SQLite database (it starts with {head[:16]!r}){_DAMAGED}"
        )


def _journal_wal(conn: sqlite3.Connection, busy_timeout: float) -> str:
    """Switch the file to WAL mode (a no-op once it is); return the mode it is in.

    The switch needs the file to itself. While another process holds a write lock on
    it (creating the tables of a new file: workers started together), SQLite returns
    "database is locked" at once instead of waiting (it would deadlock), so the switch
    is tried again until ``busy_timeout`` has passed, as any other statement waits.
    """
    give_up = time.monotonic() + busy_timeout
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= give_up:
                raise
            time.sleep(0.01)


#: SQLite has ``RETURNING`` (added in 3.35.0; its first patch releases fixed bugs in it).
#: Without it a run's release takes two statements instead of one.
_RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35, 5)
#: A run's release (`SQLiteStore._release`): the claim deleted if held, its start,
#: whether its job has downstream jobs (the finish then asks `chains` nothing more), and
#: whether the claim held back the job's next run (overlap not allowed).
_RELEASE: Final = (
    "DELETE FROM claims WHERE token = ? AND owner = ?"
    " RETURNING started, EXISTS (SELECT 1 FROM chains WHERE upstream = claims.job_id),"
    " (SELECT j.overlap <> 'allow' AND j.next_run IS NOT NULL FROM jobs j"
    " WHERE j.id = claims.job_id)"
)

#: Whether a released claim held back its job's next run (SQLite without RETURNING).
_HELD_BACK: Final = "SELECT overlap <> 'allow' AND next_run IS NOT NULL FROM jobs WHERE id = ?"


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """Durable jobs in one SQLite file; implements the `tickwork.stores.Store` protocol.

    A new file is created with owner-only permissions (0600; SQLite gives its ``-wal``
    and ``-shm`` files the same mode). An existing file must be a tickwork database
    of this or an older schema version (older ones are migrated in one transaction).

    Thread-safety: one store object may be shared by threads; it holds one connection
    and runs one operation at a time. Processes each open their own store on the same
    file. Do not carry an open store across ``fork()``.

    Args:
        path: The database file (``":memory:"`` for a private, non-durable store).
        busy_timeout: Seconds to wait for another process's transaction before
            failing with `StoreError`.
        history_keep: Slot-ledger entries kept per job (`SQLStore.history`), an int
            >= 0, or ``None`` for no count limit; 0 writes no entries at all.
        history_days: Age in days beyond which ledger entries are pruned, or
            ``None`` for no age limit. Pruning is bounded work done by `DurableScheduler`
            while idle (see `SQLStore.prune_history`).

    Raises:
        StoreError: The file cannot be created or read, or is not a tickwork
            database (non-SQLite, corrupt, or another application's). It is not
            modified.
        SchemaVersionError: The file was written by a newer tickwork.

    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        history_keep: int | None = HISTORY_KEEP,
        history_days: float | None = HISTORY_DAYS,
    ) -> None:
        self._path = os.fspath(path)
        if not isinstance(self._path, str):
            raise TypeError(f"path must be a str or os.PathLike[str], got {path!r}")
        busy_timeout = check_positive("busy_timeout", busy_timeout)
        self._init_core(history_keep, history_days)
        self._lock = threading.RLock()
        self._busy = False
        self._watch_lock = threading.Lock()  # wait_for_change: one caller at a time
        self._watch: sqlite3.Connection | None = None
        self._watch_version: int | None = None
        self._watch_seen = -1
        self._interrupt = threading.Event()
        self._conn: sqlite3.Connection | None = None
        self._scope = process_scope()
        memory = self._path == ":memory:"
        if not memory:
            self._prepare_file()
        try:
            conn = sqlite3.connect(
                self._path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self._path!r}: {exc}") from exc
        try:
            self._open(conn, memory=memory, busy_timeout=busy_timeout)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    # -- opening ----------------------------------------------------------------------

    def _prepare_file(self) -> None:
        """Create the file 0600 if absent (no umask race); check an existing one's header."""
        path = self._path
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            self._check_existing()
            return
        except OSError as exc:
            raise StoreError(f"cannot create database file {path!r}: {exc}") from exc
        try:
            # The umask may have removed bits from 0o600, never added: make it exact.
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _check_existing(self) -> None:
        path = self._path
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise StoreError(f"cannot stat database file {path!r}: {exc}") from exc
        if not stat.S_ISREG(mode):
            raise StoreError(f"database path {path!r} is not a regular file")
        _check_header(path)
        if mode & 0o077:
            _log.warning(
                "database file %r is accessible to other users (mode %o); job"
                " functions and arguments are read from it",
                path,
                stat.S_IMODE(mode),
            )

    def _inspect(self, conn: sqlite3.Connection) -> int:
        """Read-only: the schema version if the database is ours (0 if empty), else raise."""
        try:
            # One statement, so one snapshot: read one by one, a process creating the
            # database between two reads looked like "another application's" file.
            app_id, version, objects = conn.execute(
                "SELECT (SELECT application_id FROM pragma_application_id),"
                " (SELECT user_version FROM pragma_user_version),"
                " (SELECT count(*) FROM sqlite_master)"
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self._path!r} is not a usable SQLite database ({exc}){_DAMAGED}"
            ) from exc
        latest = len(MIGRATIONS)
        if app_id == 0 and version == 0 and objects == 0:
            return 0
        if app_id != APPLICATION_ID:
            raise StoreError(
                f"{self._path!r} is a SQLite database of another application"
                f" (application_id {app_id:#x}, {objects} schema objects); refusing to use"
                " it, the file was not modified"
            )
        if version > latest:
            raise SchemaVersionError(
                f"{self._path!r} has tickwork schema version {version}; this tickwork"
                f" supports up to {latest}: it was written by a newer tickwork; upgrade"
                " tickwork (pip install --upgrade tickwork) to open it (the file was not"
                " modified)"
            )
        if version < 1:
            raise StoreError(f"{self._path!r} is a tickwork database without a schema version")
        return int(version)

    def _check_pages(self, conn: sqlite3.Connection) -> None:
        """Refuse a damaged file: ``PRAGMA quick_check`` (read-only) must find nothing."""
        try:
            found = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            found = str(exc)
        if found != "ok":
            lines = [line for line in str(found).splitlines() if not line.startswith("***")]
            raise StoreError(f"{self._path!r} is damaged ({'; '.join(lines)}){_DAMAGED}")

    def _open(self, conn: sqlite3.Connection, *, memory: bool, busy_timeout: float) -> None:
        version = self._inspect(conn)
        if version:
            self._check_pages(conn)
        try:
            mode = _journal_wal(conn, busy_timeout)
            if not memory and str(mode).lower() != "wal":
                _log.warning("database %r could not use WAL mode (got %r)", self._path, mode)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.create_function("tickwork_runnable", 1, self._runs_oneoff)
            if version == len(MIGRATIONS):
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Another process may have created or migrated it since the first look.
                version = self._inspect(conn)
                for step in range(version, len(MIGRATIONS)):
                    MIGRATIONS[step](conn)
                conn.execute(f"PRAGMA application_id={APPLICATION_ID:d}")
                conn.execute(f"PRAGMA user_version={len(MIGRATIONS):d}")
                conn.execute("COMMIT")
                latest = len(MIGRATIONS)
                if version < latest:  # another opener may have done it meanwhile
                    _log.info("%s", schema_news(f"database {self._path!r}", version, latest))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot prepare database {self._path!r}: {exc}") from exc

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def _tx(self, what: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction: commit if the body returns, roll back if it raises."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"cannot {what}: the store is closed")
            if self._busy:
                raise StoreError(f"cannot {what} from inside another store call (advance?)")
            self._busy = True
            try:
                try:
                    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                except sqlite3.Error as exc:
                    raise StoreError(f"cannot {what}: {exc}") from exc
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException as exc:
                    # SQLite may have rolled back already; the original error matters.
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.Error):
                        raise StoreError(f"cannot {what}: {exc}") from exc
                    raise
            finally:
                self._busy = False

    def _run(
        self,
        what: str,
        fn: Callable[[sqlite3.Connection], T],
        *,
        write: bool = True,
        resolve: Callable[[sqlite3.Connection], T] | None = None,
        batch: bool = False,
    ) -> T:
        """``fn`` in one transaction (a commit never has an unknown outcome here)."""
        with self._tx(what, write=write) as conn:
            return fn(conn)

    # -- the dialect ------------------------------------------------------------------

    _WORDS: ClassVar[Mapping[str, str]] = {
        "jobs": "jobs",
        "claims": "claims",
        "nodes": "nodes",
        "ledger": "ledger",
        "actions": "actions",
        "alerts": "alert_episodes",
        "by_id": "id",
        "any": "IN ({marks})",
        "snapshot": "",  # a read transaction is one snapshot already
        "lock": "",  # BEGIN IMMEDIATE: no other writer until the commit
        "if_absent": "",
        # What an insert does when its row exists (a dialect's upsert clauses):
        "queued_once": " ON CONFLICT DO NOTHING",  # a chained run (stores/_chains.py)
        "set_limit": " ON CONFLICT (name) DO UPDATE SET lim = excluded.lim",  # _pools.py
        "episode_once": " ON CONFLICT (job_id, kind) DO NOTHING",  # stores/_alerts.py
        "greatest": "max",
        "true": "1",
        "false": "0",
        "claimable": _CLAIMABLE,
        "runnable": _RUNNABLE,
        "unpaused": "(j.paused = 0 OR c.origin = 'manual')",
        "watched": " AND n.scope = ?",  # only owners of this scope can be judged
        "pools": "pools",  # concurrency pools (stores/_pools.py)
        "lock_pools": "",  # BEGIN IMMEDIATE: the claim is the only writer
        "pool_of": "json_extract(j.spec, '$.pool')",
        "daemons": "daemons",  # the live daemons of each namespace (stores/_holders.py)
        "lock_daemons": "",  # BEGIN IMMEDIATE: one hold at a time
        "queues": "queues",  # the one-offs' totals per function (stores/_oneoffs.py)
        "add_up": " ON CONFLICT (queue) DO UPDATE SET done = queues.done + excluded.done,"
        " failed = queues.failed + excluded.failed, dropped = queues.dropped + excluded.dropped",
    }

    _insert_oneoffs = _insert_oneoffs  # one-offs (stores/_oneoffs.py)
    oneoff_statement = _oneoff_statement

    @property
    def _returns(self) -> bool:
        return _RETURNING

    def _q_list(self, template: str, values: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        return self._q(template).replace("{marks}", ",".join("?" * len(values))), values

    _LOST: ClassVar[str] = "the owner's process ended"

    # -- where the statements differ (the hooks of SQLStore) --------------------------

    def _candidates(
        self, cur: sqlite3.Connection, now: float, seen: list[str], n: int, *, retries: bool
    ) -> list[Sequence[Any]] | None:
        marks = ",".join("?" * len(seen))
        query = (_RETRIES if retries else _DUE).replace("{seen}", marks)
        rows = cur.execute(query, (now, *seen, n)).fetchall()
        if not rows:
            return None
        seen.extend(row[0] for row in rows)
        self._pools.hint(bool(rows[0][-1]))  # the last column: any pool limit at all
        return rows

    def _release(self, cur: sqlite3.Connection, f: Finish) -> tuple[float | None, bool] | None:
        token = f.claim.token
        if _RETURNING and not hands_back(f.outcome, None):
            # Released whenever it is held (never handed back): one statement frees it,
            # reads its start and whether its job has downstream jobs (chains).
            # fetchall: the statement runs to its end (and is reset) before the commit.
            found = cur.execute(_RELEASE, (token, f.claim.owner)).fetchall()
            if not found:
                return None
            started, chained, held_back = found[0]
            if not f.recorded:  # only then does the finish ask (`ChainQueries.ended`)
                self._chains.hint(token, bool(chained))
            if held_back:  # its next run is claimable now: the scheduler looks again
                self._wakeups.changed()
            return started, False
        row = cur.execute(
            "SELECT started FROM claims WHERE token = ? AND owner = ?", (token, f.claim.owner)
        ).fetchone()
        if row is None:
            return None
        if hands_back(f.outcome, row[0]):
            cur.execute(
                "UPDATE claims SET token = ?, owner = '', lease_until = ?, retry = 1"
                " WHERE token = ?",
                (secrets.token_hex(16), f.ended, token),
            )
            return None, True
        cur.execute("DELETE FROM claims WHERE token = ?", (token,))
        held_back = cur.execute(_HELD_BACK, (f.claim.job_id,)).fetchone()
        if held_back is not None and held_back[0]:  # as `_RELEASE` reports it
            self._wakeups.changed()
        return row[0], False

    def _owners_gone(self, cur: sqlite3.Connection, mono: float) -> list[tuple[str, bool]]:
        """Owners listed in this scope whose process has ended."""
        if self._scope is None:
            return []
        rows = cur.execute(
            "SELECT owner, pid, started, EXISTS (SELECT 1 FROM claims c WHERE c.owner ="
            " nodes.owner) FROM nodes WHERE scope = ?",
            (self._scope,),
        ).fetchall()
        return [
            (owner, bool(holds))
            for owner, pid, started, holds in rows
            if not process_alive(pid, started)
        ]

    def _expired(self, cur: sqlite3.Connection, now: float, gone: list[str]) -> list[Sequence[Any]]:
        held = (
            f"SELECT {CLAIM_COLUMNS}, j.spec FROM claims c JOIN jobs j ON j.id = c.job_id"
            " WHERE c.owner <> '' AND "
        )
        rows = cur.execute(held + "c.lease_until <= ?", (now,)).fetchall()
        if gone:
            marks = ", ".join("?" * len(gone))
            rows += cur.execute(
                held + f"c.owner IN ({marks}) AND c.lease_until > ?", (*gone, now)
            ).fetchall()
        return rows

    def _watched(self) -> tuple[Any, ...]:
        return (self._owner or "", self._scope or "")

    def _runs_oneoff(self, queue: str) -> bool:
        """``tickwork_runnable(queue)``: a one-off of function ``queue`` is claimed here."""
        return self._oneoff_filter.allows(queue)

    # -- SessionLiveness ----------------------------------------------------------------

    def tag_sessions(self, owner: str) -> None:
        """List ``owner`` as this process, so that its claims die with it.

        See `tickwork.stores.SessionLiveness`. The owner is recorded with this process's
        pid, start time and scope (host, boot, pid namespace). From then on, a store on
        the same file in the same scope recovers the owner's claims as soon as the
        process has ended (looked for at most every `LIVENESS_CHECK` seconds by the claim
        and recovery calls), not when their leases run out. Where there is no /proc, it
        does nothing (the leases decide). Never raises for a busy database: a failed
        write is logged and the leases decide.
        """
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty string, got {owner!r}")
        me = own_identity()
        if self._scope is None or me is None:
            return
        self._owner = owner
        try:
            with self._tx("list this process's owner") as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO nodes (owner, scope, pid, started, tagged_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (owner, self._scope, me[0], me[1], time.time()),
                )
        except StoreError:
            _log.warning(
                "cannot list owner %r in %r; its claims are recovered when their leases run out",
                owner,
                self._path,
                exc_info=True,
            )

    def live_owners(self, owners: Iterable[str]) -> set[str]:
        """Those of ``owners`` not known to be gone.

        See `tickwork.stores.SessionLiveness`. An owner listed by `tag_sessions` in this
        process's scope is gone when its process has ended; any other owner (another
        host or pid namespace, or never listed) cannot be judged here and is returned.

        Raises:
            StoreError: The database cannot be read.

        """
        wanted = {owner for owner in owners if owner}
        if not wanted or self._scope is None:
            return wanted
        with self._tx("read the listed owners", write=False) as conn:
            rows = conn.execute(
                "SELECT owner, pid, started FROM nodes WHERE scope = ?", (self._scope,)
            ).fetchall()
        dead = {owner for owner, pid, started in rows if not process_alive(pid, started)}
        return wanted - dead

    def _live_holders(self, cur: sqlite3.Connection, owners: Sequence[str]) -> set[str]:
        """Those of ``owners`` listed in this scope whose process is alive (`_holders`)."""
        if not owners or self._scope is None:
            return set()
        rows = cur.execute(
            f"SELECT owner, pid, started FROM nodes WHERE scope = ? AND owner IN"
            f" ({','.join('?' * len(owners))})",
            (self._scope, *owners),
        ).fetchall()
        return {owner for owner, pid, started in rows if process_alive(pid, started)}

    # -- ChangeNotifier -----------------------------------------------------------------

    def _changed(self, cur: sqlite3.Connection, job_id: str) -> None:
        """Count the change: other processes' `wait_for_change` see the counter move."""
        self._wakeups.changed()  # and a run ending here looks again (`look_after_finish`)
        cur.execute("UPDATE changes SET n = n + 1")

    def wait_for_change(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change to the jobs by any process.

        See `tickwork.stores.ChangeNotifier.wait_for_change`. SQLite cannot announce a
        commit, so a second connection of this store looks every `CHANGE_CHECK` seconds
        at ``PRAGMA data_version`` (which moves when another connection has committed:
        read from shared memory, no disk access and no lock) and, only when it moved, at
        the change counter that every change that can make a run due sooner bumps in its
        own transaction. The first call returns True at once. Calls from several
        threads take turns.

        Raises:
            StoreError: The store is closed.
            ValueError: ``timeout`` is negative or not finite.

        """
        timeout = check_time("timeout", timeout)
        if timeout < 0:
            raise ValueError(f"timeout must be a finite number >= 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        with self._watch_lock:
            if self._conn is None:
                raise StoreError("cannot wait for changes: the store is closed")
            if self._path == ":memory:":  # private to this store: no one else changes it
                if self._interrupt.wait(timeout):
                    self._interrupt.clear()
                    return True
                return False
            if self._watch is None:
                return self._open_watch(timeout)
            return self._watch_until(self._watch, deadline)

    def _open_watch(self, timeout: float) -> bool:
        """Open the watching connection; True (changes before it were not watched).

        False after ``timeout`` if the file cannot be opened.
        """
        try:
            self._watch = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            self._watch_seen = self._read_changes(self._watch)
        except sqlite3.Error as exc:
            _log.warning("cannot watch %r for changes: %s", self._path, exc)
            self._close_watch()
            self._interrupt.wait(timeout)
            return False
        return True

    def _watch_until(self, watch: sqlite3.Connection, deadline: float) -> bool:
        """Look every `CHANGE_CHECK` seconds until a change, an interrupt or ``deadline``."""
        while True:
            if self._interrupt.is_set():
                self._interrupt.clear()
                return True
            try:
                if self._moved(watch):
                    return True
            except sqlite3.Error as exc:
                _log.warning("lost the watch on %r: %s", self._path, exc)
                self._close_watch()
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._interrupt.wait(min(CHANGE_CHECK, left))

    def _moved(self, watch: sqlite3.Connection) -> bool:
        """Whether the change counter moved: read only when another connection committed."""
        version = watch.execute("PRAGMA data_version").fetchone()[0]
        if version == self._watch_version:
            return False
        self._watch_version = version
        seen = self._read_changes(watch)
        if seen == self._watch_seen:
            return False
        self._watch_seen = seen
        return True

    @staticmethod
    def _read_changes(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT n FROM changes").fetchone()
        return -1 if row is None else int(row[0])

    def _close_watch(self) -> None:
        if self._watch is not None:
            with suppress(sqlite3.Error):
                self._watch.close()
            self._watch = None

    def interrupt_wait(self) -> None:
        """Make the current (or else the next) `wait_for_change` return True promptly."""
        self._interrupt.set()

    def close(self) -> None:
        """Close the connection; later calls raise `StoreError`. Idempotent."""
        self._interrupt.set()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._watch_lock:
            self._close_watch()
