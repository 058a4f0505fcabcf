"""What `SQLStore` and the parts it is composed of share: cursors and the store's face.

`SQLStore` (``_sql``) holds parts, each with its own state, that run their statements
through it: the slot ledger (``_ledger``), the operators' runtime control (``_control``)
and the recovery of claims whose owner is gone or whose lease ended (``_recovery``).
They reach their store through `SQLHost`, not through ``_sql`` itself, so that the store
can import them and they never import it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["C", "SQLCursor", "SQLHost", "SQLResult"]

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


class SQLHost(Protocol[C]):
    """What a part of `SQLStore` uses of its store: dialect, transactions, change signal.

    Each is the `SQLStore` method of the same name; see there.
    """

    def _q(self, template: str) -> str:
        """``template`` in the store's dialect."""
        ...

    def _q_list(self, template: str, values: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        """A statement whose only parameter is the list ``values`` (``{any}`` in it)."""
        ...

    def _run(
        self,
        what: str,
        fn: Callable[[C], T],
        *,
        write: bool = True,
        resolve: Callable[[C], T] | None = None,
        batch: bool = False,
    ) -> T:
        """Run ``fn`` in one transaction and commit; raise `StoreError` saying ``what``."""
        ...

    def _changed(self, cur: C, job_id: str) -> None:
        """Called in a transaction that may make a run of ``job_id`` due sooner."""
        ...
