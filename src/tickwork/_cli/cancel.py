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
from typing import Any, TextIO

from tickwork._cli.control import add_common_arguments, describe, run_control
from tickwork._cli.history import parse_since
from tickwork._cli.options import count
from tickwork._daemon import actions
from tickwork.stores import JobNotFoundError

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
    if args.list:
        state = store.get(job_id)
        if state is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        lines = actions.waiting_lines(name, state.waiting, args.limit)
    else:
        done = actions.cancel_waiting(store, job_id, name, slot=args.slot, by=by, note=args.note)
        lines = done.lines
    for line in lines:
        print(line, file=out)
    return 0
