"""``tickwork backfill``: queue a job's past slots, after saying how many.

The window is clipped at the job's first slot (the job did not exist before it);
``--dry-run`` says what would be queued and changes nothing; a backfill of more than
``--max`` runs (1,000 unless given) asks on a terminal and is refused elsewhere unless
``--yes``. Run by `tickwork._cli.control.run_control`, which opens the state and finds
the job.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from tickwork._cli.options import count
from tickwork._daemon import actions
from tickwork._daemon.actions import CONFIRM_ABOVE
from tickwork._daemon.when import parse_time
from tickwork._durable.control import BACKFILL_MAX

__all__ = ["CONFIRM_ABOVE", "act", "add_arguments", "parse_time"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the window, ``--dry-run``, ``--max`` and ``--yes`` to the verb's parser."""
    p.add_argument(
        "--from",
        dest="start",
        type=parse_time,
        required=True,
        metavar="T",
        help="the window's start: an ISO 8601 time (local time unless it has an "
        "offset or Z) or a duration back from now (90m, 2h, 7d); slots before the job's "
        "first slot (when it was declared) are left out",
    )
    p.add_argument(
        "--to",
        dest="end",
        type=parse_time,
        required=True,
        metavar="T",
        help="the window's end, as --from, or 'now' (inclusive; slots from the "
        "next run on are the schedule's own)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say how many runs it would queue, first and last, and change nothing",
    )
    p.add_argument(
        "--max",
        type=count,
        default=CONFIRM_ABOVE,
        metavar="N",
        help=f"ask before queuing more than N runs (default: {CONFIRM_ABOVE:,}); without "
        "a terminal, refuse unless --yes",
    )
    p.add_argument(
        "--yes",
        "-y",
        "--force",
        dest="yes",
        action="store_true",
        help=f"queue however many runs without asking (up to {BACKFILL_MAX:,}); --force "
        "is its old name",
    )
    p.set_defaults(act=act)


def act(
    store: Any, job_id: str, args: argparse.Namespace, by: str, out: TextIO, err: TextIO
) -> int:
    """Backfill the window of ``args`` (after a dry run, and a question if it is large)."""
    name = args.name

    def backfill(dry_run: bool, most: int | None) -> actions.Done:
        return actions.backfill(
            store, job_id, name, args.start, args.end, by=by, note=args.note,
            dry_run=dry_run, most=most,
        )  # fmt: skip

    most = None if args.yes else args.max
    if args.dry_run:
        done = backfill(True, None)
    elif most is not None and sys.stdin.isatty():
        counted = backfill(True, None)
        if counted.result["queued"] > most:
            status = _confirm(name, counted.result, most, err)
            if status:
                return status
        done = backfill(False, None)
    else:
        done = backfill(False, most)
    for line in done.lines:
        print(line, file=out)
    return 0


def _confirm(name: str, counted: dict[str, Any], most: int, err: TextIO) -> int:
    """0 if the operator agrees at the terminal to queue what the dry run counted."""
    what = f"{counted['queued']:,} runs of {name}, {counted['first']} to {counted['last']}"
    print(f"queue {what}? (more than --max {most:,}) [y/N] ", end="", file=err, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return 0
    print("tickwork backfill: nothing queued", file=err)
    return 1
