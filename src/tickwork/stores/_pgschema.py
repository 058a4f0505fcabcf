"""`PostgresStore`'s schema: its migrations, and the opening that checks and applies them.

A schema is recognised as tickwork's by ``tickwork_meta``; one written by a newer
tickwork, or tables of our names without it, are refused untouched. Creation and
migration happen once across processes, under an advisory lock (`SchemaMixin`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, ClassVar, Final

import psycopg
from psycopg import sql

from tickwork.stores._errors import SchemaVersionError, StoreError

from ._alerts import EPISODE_TABLE
from ._holders import DAEMONS_TABLE
from ._oneoffs import ONEOFF_TOTALS
from ._sql import schema_news

__all__ = ["APPLICATION", "MAX_IDENTIFIER", "MIGRATIONS", "SchemaMixin"]

_log = logging.getLogger("tickwork.stores")

Cursor = psycopg.Cursor[Any]

#: The ``application`` value in ``tickwork_meta``: how a schema is recognised as ours.
APPLICATION: Final = "tickwork"

MAX_IDENTIFIER: Final = 63  # PostgreSQL's NAMEDATALEN - 1, in bytes


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


class SchemaMixin:
    """The opening of `PostgresStore`: the tables checked, created or migrated once."""

    _schema: str | None
    _channel: str
    _looks_channel: str
    _run: Callable[..., Any]
    #: The statement that writes ``schema_version`` (the dialect's upsert).
    _SET_VERSION: ClassVar[str]

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
        cur.execute(self._SET_VERSION, (str(len(MIGRATIONS)),))

    def _learn_channel(self, cur: Cursor) -> None:
        """Name the NOTIFY channel after the schema the tables live in."""
        row = cur.execute("SELECT current_schema()").fetchone()
        current = str(row[0]) if row is not None else ""
        channel = f"tickwork:{current}"
        if len(channel.encode()) > MAX_IDENTIFIER:
            channel = "tickwork:" + hashlib.sha256(current.encode()).hexdigest()[:32]
        self._channel = channel
        # Looks that took runs (`LookNotices`): a channel of their own, not a change.
        self._looks_channel = "tickwork-looks:" + hashlib.sha256(channel.encode()).hexdigest()[:32]
