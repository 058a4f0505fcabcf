"""``tickwork next``: print the next fire times of a cron expression.

Example::

    python -m tickwork next "0 9 * * 1-5" --tz Europe/Berlin -n 5 --after 2026-12-02T00:00Z

Exit status: 0 on success, 2 for a bad expression, zone or argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from tickwork._cli.options import count
from tickwork._core.cron import CronExpression
from tickwork._core.errors import CronError

__all__ = ["add_parser", "main", "run"]

_PROG = "tickwork next"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``next`` sub-command to an argparse ``subparsers`` object.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The new sub-parser; its ``func`` default is :func:`run`.

    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "next",
        help="print the next fire times of a cron expression",
        description="Print the next fire times of a cron expression (5 fields, or 6 with"
        " seconds first), in its "
        "time zone and in UTC.",
    )
    p.add_argument("expr", help='cron expression, e.g. "0 9 * * 1-5" or @daily')
    p.add_argument("--tz", default="UTC", help="IANA time zone or 'local' (default: UTC)")
    p.add_argument(
        "-n",
        "--count",
        type=count,
        default=5,
        help="how many fire times to print (default: 5)",
    )
    p.add_argument(
        "--after",
        metavar="ISO8601",
        help="start strictly after this instant (default: now); a time without an "
        "offset is read as wall time in --tz",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``tickwork next`` for parsed arguments.

    Args:
        args: Namespace with ``expr``, ``tz``, ``count`` and ``after``.
        out: Stream for results (default: ``sys.stdout``).
        err: Stream for errors (default: ``sys.stderr``).

    Returns:
        0 on success, 2 if the expression, zone or ``--after`` is invalid.

    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        cron = CronExpression(args.expr, args.tz)
    except CronError as exc:
        print(f"{_PROG}: error: {exc}", file=err)
        return 2
    if args.after is None:
        start = datetime.now(UTC)
    else:
        try:
            start = datetime.fromisoformat(args.after)
        except ValueError:
            print(
                f"{_PROG}: error: --after must be an ISO 8601 date-time, got {args.after!r}",
                file=err,
            )
            return 2
        if start.tzinfo is None:
            start = start.replace(tzinfo=cron.tz)
    print(f"# {args.expr}  (tz {cron.tz_name})", file=out)
    for fire in cron.next_n(start, args.count):
        utc = fire.astimezone(UTC)
        print(
            f"{fire.isoformat()}  {fire:%a} {fire.tzname()}  {utc:%Y-%m-%dT%H:%M:%SZ}",
            file=out,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``next`` arguments, without the sub-command) and run.

    Args:
        argv: Arguments after ``tickwork next``; defaults to ``sys.argv[1:]``.

    Returns:
        The exit status (argparse usage errors exit with status 2).

    """
    parser = argparse.ArgumentParser(prog="tickwork")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_parser(subparsers)
    args = parser.parse_args(["next", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
