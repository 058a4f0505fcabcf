"""The ``tickwork`` command line (also ``python -m tickwork``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="tickwork", description="Delayed and recurring jobs, and a cron replacement."
    )
    parser.add_argument("--version", action="version", version=f"tickwork {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="watch the scheduler schedule, run and cancel a few jobs (about 10 s)",
        description="A narrated tour of the library's Scheduler on a real clock: it "
        "schedules a backup, a log rotation and a repeating probe, cancels a job, and "
        "prints every call and every run as it happens. For the cron replacement, see "
        "`tickwork run --help`.",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=2.0,
        help="how many times faster than real time to play it (default 2)",
    )
    demo.set_defaults(func=_demo)

    from tickwork._cli.next import add_parser as add_next

    add_next(sub)

    from tickwork._cli.validate import add_parser as add_validate

    add_validate(sub)

    from tickwork._cli.run import add_parsers as add_daemon

    add_daemon(sub)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from tickwork._cli.demo import run_demo

    return run_demo(sys.stdout, speed=args.speed)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
