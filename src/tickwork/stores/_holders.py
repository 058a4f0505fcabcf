"""Which jobs file each live daemon of a namespace runs: the daemons table (issue 39).

A daemon of ``tickwork run`` holds its namespace while it runs, with what names its jobs
file (its ``holder`` text: the daemon's business, never read here). Before it declares
anything it asks `NamespaceHolders.hold_namespace`, which in one transaction forgets the
holders whose owner is gone, asks the daemon which of the live ones clash with it, and
records it only if none does. Concurrent holders take turns (SQLite: ``BEGIN
IMMEDIATE``; PostgreSQL: the table locked against other holds, not against readers),
so two daemons started together with clashing files never both pass.

An owner is live as the store's `SessionLiveness` judges it, inside the transaction
(`HoldersMixin._live_holders`): PostgreSQL, by its sessions' locks; SQLite, by the
process an owner listed in its own host and pid namespace (an owner elsewhere cannot be
judged there and clashes with nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from ._checks import check_owner

__all__ = ["DAEMONS_TABLE", "HoldersMixin", "NamespaceHolders"]

#: The table, as each dialect creates it (``{t}``: its name; ``{text}``, ``{real}``: types).
DAEMONS_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS {t} (namespace {text} NOT NULL, owner {text} NOT NULL,"
    " holder {text} NOT NULL, since {real} NOT NULL, PRIMARY KEY (namespace, owner))"
)


@runtime_checkable
class NamespaceHolders(Protocol):
    """Optional store capability: the live daemons of a namespace, and what each runs."""

    def hold_namespace(
        self, namespace: str, owner: str, holder: str, clash: Callable[[str], bool]
    ) -> list[tuple[str, str]]:
        """Record ``owner`` holding ``namespace`` with ``holder``, unless a live one clashes.

        In one transaction: the holders of the namespace whose owner is gone are
        forgotten; ``clash`` is asked about each live one's holder text (other than
        ``owner``'s own); if none clashes, ``owner`` is recorded with ``holder``.

        Returns:
            The clashing ``(owner, holder)`` pairs; empty when ``owner`` now holds it.

        Raises:
            StoreError: The database cannot be reached.

        """
        ...

    def release_namespace(self, namespace: str, owner: str) -> None:
        """Forget that ``owner`` holds ``namespace`` (its daemon stops)."""
        ...


class HoldersMixin:
    """`NamespaceHolders` for `SQLStore` (kept out of its body)."""

    _q: Callable[[str], str]
    _run: Callable[..., Any]

    def _live_holders(self, cur: Any, owners: Sequence[str]) -> set[str]:
        """Those of ``owners`` the store can tell are live, inside a transaction."""
        raise NotImplementedError

    def hold_namespace(
        self, namespace: str, owner: str, holder: str, clash: Callable[[str], bool]
    ) -> list[tuple[str, str]]:
        """See `NamespaceHolders.hold_namespace`."""
        owner = check_owner(owner)
        if not isinstance(namespace, str) or not isinstance(holder, str):
            raise TypeError(f"namespace and holder must be str, got {namespace!r}, {holder!r}")

        def body(cur: Any) -> list[tuple[str, str]]:
            if lock := self._q("{lock_daemons}"):
                cur.execute(lock)
            rows = cur.execute(
                self._q("SELECT owner, holder FROM {daemons} WHERE namespace = ? AND owner <> ?"),
                (namespace, owner),
            ).fetchall()
            live = self._live_holders(cur, [row[0] for row in rows])
            gone = [(namespace, row[0]) for row in rows if row[0] not in live]
            forget = self._q("DELETE FROM {daemons} WHERE namespace = ? AND owner = ?")
            cur.executemany(forget, [*gone, (namespace, owner)])
            clashes = [(o, h) for o, h in rows if o in live and clash(h)]
            if not clashes:
                cur.execute(
                    self._q("INSERT INTO {daemons} VALUES (?, ?, ?, ?)"),
                    (namespace, owner, holder, time.time()),
                )
            return clashes

        result: list[tuple[str, str]] = self._run(f"hold namespace {namespace!r}", body)
        return result

    def release_namespace(self, namespace: str, owner: str) -> None:
        """See `NamespaceHolders.release_namespace`."""
        self._run(
            f"release namespace {namespace!r}",
            lambda cur: cur.execute(
                self._q("DELETE FROM {daemons} WHERE namespace = ? AND owner = ?"),
                (namespace, owner),
            ),
        )
