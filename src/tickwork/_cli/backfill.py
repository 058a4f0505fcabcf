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
import time
from typing import Any, Final, TextIO

from tickwork._cli.history import parse_since
from tickwork._cli.options import count
from tickwork._core.text import iso
from tickwork._durable.control import BACKFILL_MAX, BackfillWindow, run_backfill
from tickwork.stores._errors import JobNotFoundError

__all__ = ["CONFIRM_ABOVE", "act", "add_arguments", "parse_time"]

#: A backfill of more runs than this asks first (``--max`` changes it).
CONFIRM_ABOVE: Final = 1000


def parse_time(text: str) -> float:
    """``--from`` / ``--to``: ``now``, an ISO 8601 time, or a duration back from now."""
    if text.strip().lower() == "now":
        return time.time()
    return parse_since(text)


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
    state = store.get(job_id)
    if state is None:
        raise JobNotFoundError(f"no job with id {job_id!r}")

    def backfill(dry_run: bool) -> tuple[BackfillWindow, list[float]]:
        return run_backfill(
            store,
            state,
            args.start,
            args.end,
            force=True,  # the question above --max stands for the library's cap
            dry_run=dry_run,
            by=by,
            at=time.time(),
            note=args.note,
        )

    window, queued = backfill(True)
    if args.dry_run:
        _report(name, window, queued, out, dry=True)
        return 0
    if len(queued) > args.max and not args.yes:
        status = _confirm(name, queued, args.max, err)
        if status:
            return status
    window, queued = backfill(False)
    _report(name, window, queued, out, dry=False)
    return 0


def _confirm(name: str, queued: list[float], most: int, err: TextIO) -> int:
    """0 if the operator agrees to queue ``queued`` at the terminal; else the exit status."""
    what = f"{len(queued):,} runs of {name}, {iso(queued[0])} to {iso(queued[-1])}"
    if not sys.stdin.isatty():
        print(
            f"tickwork backfill: this would queue {what}: more than --max {most:,}."
            f" Nothing was queued. See them with --dry-run, then run again with --yes"
            f" (or --max {len(queued)})",
            file=err,
        )
        return 2
    print(f"queue {what}? (more than --max {most:,}) [y/N] ", end="", file=err, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return 0
    print("tickwork backfill: nothing queued", file=err)
    return 1


def _report(
    name: str, window: BackfillWindow, queued: list[float], out: TextIO, *, dry: bool
) -> None:
    """What the backfill queued (or would), and what it left out and why."""
    verb = "would queue" if dry else "queued"
    if queued:
        print(
            f"{verb} {len(queued)} slot(s) of {name}, {iso(queued[0])} to {iso(queued[-1])}",
            file=out,
        )
    else:
        print(f"no slot of {name} to backfill in that window", file=out)
    if window.early:
        print(f"left out {window.early_text()}", file=out)
    elif window.first_slot is None:
        print(
            f"note: when {name} was first declared is not recorded (it was stored by an"
            " older tickwork): slots from before it are not left out",
            file=out,
        )
    left = len(window.slots) - len(queued)
    if left:
        print(
            f"left out {left:,} slot(s): ran or waiting already, or not before now and the"
            " next run",
            file=out,
        )
    if dry:
        print("dry run: nothing was queued", file=out)
