"""The child process of ``isolation="process"``: ``python -m tickwork._durable.child``.

Argument: ``MODULE:FUNCTION``; on stdin, a JSON object ``{"args": [...], "kwargs": {...}}``
(not on the command line: every local user can read that). Reads stdin to its end, puts
``/dev/null`` in its place, imports the function, calls it (a coroutine it returns is
run to the end) and exits 0; an exception prints its traceback to stderr and exits 1
(Python's own handling).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Awaitable
from typing import Any

from tickwork.stores.contract import resolve_func


async def _wait(awaitable: Awaitable[Any]) -> None:
    await awaitable


def main(argv: list[str]) -> int:
    """Call the function ``argv[1]`` names with the arguments on stdin; the exit code."""
    if len(argv) != 2:
        usage = "usage: python -m tickwork._durable.child MODULE:FUNCTION < ARGS_JSON"
        print(usage, file=sys.stderr)
        return 2
    data = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)  # what the function reads, as a command's
    os.dup2(devnull, 0)
    os.close(devnull)
    fn = resolve_func(argv[1])
    result = fn(*data["args"], **data["kwargs"])
    if inspect.isawaitable(result):
        import asyncio

        asyncio.run(_wait(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
