"""``tickwork run`` in a process of its own whose state writes fail while a file exists.

For the tests of issue 26, point 1 where a full disk cannot be made (no permission to
mount a small tmpfs): every write transaction of the SQLite state fails with the error
a full disk gives while ``MARKER`` exists, as when the disk fills up and is freed.

    python tests/daemon_flaky_child.py MARKER -- ARGS OF tickwork...
"""

from __future__ import annotations

import runpy
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tickwork._daemon import start
from tickwork.stores import Store, StoreError
from tickwork.stores.sqlite import SQLiteStore


class FullDiskStore(SQLiteStore):
    """A SQLite store whose writes fail while its ``marker`` file exists."""

    marker = Path("/nonexistent")

    def _tx(self, what: str, *, write: bool = True) -> AbstractContextManager[Any]:
        if write and self.marker.exists():
            raise StoreError(f"cannot {what}: database or disk is full")
        return super()._tx(what, write=write)


def main(argv: list[str]) -> None:
    marker = Path(argv[1])
    assert argv[2] == "--"

    def open_store(
        *, state: str | None, database: str | None, within: float | None = None
    ) -> Store:
        assert state is not None and database is None
        store = FullDiskStore(state)
        store.marker = marker
        return store

    start.open_store = open_store  # type: ignore[assignment]  # run_daemon's
    sys.argv = ["tickwork", *argv[3:]]
    runpy.run_module("tickwork", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
