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

Schema creation, migrations, connections and the optional capabilities that depend on
the database (sessions, clocks, notifications) stay in the database modules.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, Protocol, Self, TypeVar

from ._model import JobSpec, JobState, check_job_id
from ._rows import RowReader

__all__ = ["CLAIM_COLUMNS", "JOB_COLUMNS", "SQLCursor", "SQLResult", "SQLStore"]

#: The columns of a job row as `RowReader` reads them, in this order.
JOB_COLUMNS: Final = (
    "id, spec, paused, next_run, last_scheduled, last_started, last_ended, last_outcome, last_error"
)
#: The columns of a claim row as `RowReader` reads them, in this order.
CLAIM_COLUMNS: Final = "token, job_id, owner, scheduled, claimed_at, lease_until, started, retry"

T = TypeVar("T")


class SQLResult(Protocol):
    """What an executed statement offers: its rows and the count of rows it changed."""

    @property
    def rowcount(self) -> int:
        """Rows changed by the statement."""
        ...

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...


class SQLCursor(Protocol):
    """A DB-API cursor (or `sqlite3.Connection`): what the shared logic executes on."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> SQLResult:
        """Run one statement."""
        ...

    def executemany(self, query: str, params: Iterable[Sequence[Any]], /) -> object:
        """Run one statement for each parameter row."""
        ...


C = TypeVar("C", bound=SQLCursor)


class SQLStore(RowReader, ABC, Generic[C]):
    """The `Store` logic over SQL, once; subclasses supply transactions and dialect.

    Subclasses set `_WORDS` (the dialect's words for the ``{name}`` fields of the
    statement templates, see `_q`) and `_PARAM` (the placeholder), implement `_run`
    and the hooks, and call `_init_core` from their constructor.
    """

    #: The placeholder of the driver; templates are written with ``?``.
    _PARAM: ClassVar[str] = "?"
    #: The dialect's words for the templates' ``{fields}``: ``jobs``, ``claims`` and
    #: ``nodes`` (table names), ``by_id`` (ordering by id, byte-wise), ``any`` (a column
    #: is in a list given as the statement's only parameter, see `_q_list`), and
    #: ``snapshot`` (a statement making a read transaction one snapshot, or ``""``).
    _WORDS: ClassVar[Mapping[str, str]]
    _queries: ClassVar[dict[str, str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._queries = {}  # each dialect translates the templates once

    def _init_core(self) -> None:
        """The shared state: decoded specs and the warnings given for unreadable rows."""
        self._warned: set[tuple[str, str]] = set()
        self._specs: dict[str, JobSpec] = {}

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
            words = {"job_columns": JOB_COLUMNS, "claim_columns": CLAIM_COLUMNS, **self._WORDS}
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

    def get(self, job_id: str) -> JobState | None:
        """The job's state, or ``None`` (see `tickwork.stores.Store.get`).

        Raises:
            StoreError: The stored declaration cannot be read.

        """
        job_id = check_job_id(job_id)

        def body(cur: C) -> JobState | None:
            row = cur.execute(
                self._q("SELECT {job_columns} FROM {jobs} WHERE id = ?"), (job_id,)
            ).fetchone()
            if row is None:
                return None
            spec = self._decode(job_id, row[1], strict=True)
            assert spec is not None  # strict decoding raises instead
            return self._state(row, spec, self._claims_by_job(cur, [job_id]).get(job_id, []))

        return self._run(f"get job {job_id!r}", body, write=False)

    def jobs(self) -> list[JobState]:
        """Every job, ordered by id.

        A job whose stored declaration cannot be read is skipped, with a warning logged
        on ``tickwork.stores``.
        """

        def body(cur: C) -> list[JobState]:
            snapshot = self._WORDS["snapshot"]
            if snapshot:  # one snapshot for both reads, so claims and jobs agree
                cur.execute(snapshot)
            claims: dict[str, list[Sequence[Any]]] = {}
            for c in cur.execute(
                self._q("SELECT {claim_columns} FROM {claims} ORDER BY scheduled, token")
            ).fetchall():
                claims.setdefault(c[1], []).append(c)
            out = []
            for row in cur.execute(
                self._q("SELECT {job_columns} FROM {jobs} ORDER BY {by_id}")
            ).fetchall():
                spec = self._decode(row[0], row[1], strict=False)
                if spec is not None:
                    out.append(self._state(row, spec, claims.get(row[0], [])))
            return out

        return self._run("list jobs", body, write=False)
