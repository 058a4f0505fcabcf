"""``tickwork cancel``: list, or cancel, a job's runs waiting to be taken.

Waiting runs are backfilled and triggered runs, and recovered slots re-offered, that no
daemon has taken yet: a mistaken backfill is undone here. ``--list`` shows them;
``--all-waiting`` cancels them all and ``--slot T`` the one due at T, each recorded
``cancelled`` in the slot ledger, and the action with who took it. A run already taken
goes on. Run by `tickwork._cli.control.run_control`, which opens the state and finds
the job.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from tickwork._cli.control import add_common_arguments, describe, run_control
from tickwork._cli.history import parse_since
from tickwork._cli.options import count
from tickwork._core.text import iso, iso_due
from tickwork._durable.control import following_slot
from tickwork.stores._errors import JobNotFoundError
from tickwork.stores._model import Claim

__all__ = ["act", "add_parser"]

_HELP = "list or cancel a job's runs waiting to be taken (backfilled, triggered, re-offered)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``cancel`` to an argparse ``subparsers`` object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "cancel", help=_HELP, description=describe(_HELP)
    )
    add_common_arguments(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--list", action="store_true", help="show the waiting runs and change nothing"
    )
    which.add_argument(
        "--all-waiting", action="store_true", help="cancel every run of the job that waits"
    )
    which.add_argument(
        "--slot",
        type=parse_since,
        metavar="T",
        help="cancel the waiting run due at T: an ISO 8601 time as --list shows it "
        "(local time unless it has an offset or Z)",
    )
    p.add_argument(
        "--limit",
        type=count,
        default=50,
        metavar="N",
        help="with --list, most runs shown (default: 50; the count is always whole)",
    )
    p.set_defaults(func=run_control, command="cancel", act=act)
    return p


def act(
    store: Any, job_id: str, args: argparse.Namespace, by: str, out: TextIO, err: TextIO
) -> int:
    """List or cancel the job's waiting runs, as ``args`` asks."""
    name = args.name
    state = store.get(job_id)
    if state is None:
        raise JobNotFoundError(f"no job with id {job_id!r}")
    if args.list:
        _list(name, state.waiting, args.limit, out)
        return 0
    cancelled = store.cancel_waiting_runs(
        job_id, following_slot(state), slot=args.slot, by=by, at=time.time(), note=args.note
    )
    if cancelled:
        span = iso_due(cancelled[0])
        if len(cancelled) > 1:
            span += f" to {iso_due(cancelled[-1])}"
        print(
            f"cancelled {len(cancelled)} waiting run(s) of {name}, {span}"
            " (recorded 'cancelled' in the ledger)",
            file=out,
        )
        return 0
    if args.slot is None:
        print(f"{name} has no waiting run; nothing done", file=out)
        return 0
    print(
        f"tickwork cancel: {name} has no waiting run due {iso(args.slot, millis=True)}"
        f" (`tickwork cancel {name} --list` shows them); nothing done",
        file=err,
    )
    return 1


def _list(name: str, waiting: tuple[Claim, ...], limit: int, out: TextIO) -> None:
    if not waiting:
        print(f"{name} has no waiting run", file=out)
        return
    origins: dict[str, int] = {}
    for c in waiting:
        origins[c.origin] = origins.get(c.origin, 0) + 1
    each = ", ".join(f"{n} {origin}" for origin, n in sorted(origins.items()))
    print(
        f"{name}: {len(waiting)} waiting run(s) ({each}),"
        f" {iso_due(waiting[0].scheduled)} to {iso_due(waiting[-1].scheduled)}",
        file=out,
    )
    for c in waiting[:limit]:
        why = "re-offered" if c.retry and c.origin == "schedule" else c.origin
        print(f"  {iso_due(c.scheduled)}  {why}", file=out)
    if len(waiting) > limit:
        print(f"  ... and {len(waiting) - limit} more (--limit to show more)", file=out)
