"""Open an old state with the current code, and hang inside its migration (tests/test_upgrade.py).

    python tests/upgrade_child.py MARKER STEP sqlite PATH
    python tests/upgrade_child.py MARKER STEP postgres DSN SCHEMA

A test-only hook, installed from outside the product code: ``MIGRATIONS[STEP]`` of the
store is wrapped so that, once the step has run (the steps before it have run too, all
inside the opening transaction), the process writes MARKER and sleeps. The test then
kills it with SIGKILL and looks at what the state holds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    marker, at, kind, *target = argv
    if kind == "sqlite":
        from tickwork.stores import sqlite as mod
    else:
        from tickwork.stores import postgres as mod  # type: ignore[no-redef]
    index = int(at)
    step = mod.MIGRATIONS[index]

    def hang(cur: Any) -> None:
        step(cur)
        Path(marker).write_text(f"step {index + 1} ran\n")
        time.sleep(600)  # killed long before

    mod.MIGRATIONS[index] = hang
    if kind == "sqlite":
        mod.SQLiteStore(target[0])
    else:
        mod.PostgresStore(target[0], schema=target[1])
    print("the migration finished: the hook did not hang it", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
