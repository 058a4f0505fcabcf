"""The ``tickwork`` parser: one sub-command per verb module of this folder."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tickwork._cli.options import VerbParser
from tickwork._core.version import __version__

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    from tickwork._cli import (
        cancel,
        control,
        demo,
        enqueue,
        history,
        import_crontab,
        jobs,
        next,
        run,
        validate,
    )

    parser = argparse.ArgumentParser(
        prog="tickwork", description="Delayed and recurring jobs, and a cron replacement."
    )
    parser.add_argument("--version", action="version", version=f"tickwork {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=VerbParser
    )
    demo.add_parser(sub)
    next.add_parser(sub)
    validate.add_parser(sub)
    run.add_parser(sub)
    jobs.add_parser(sub)
    history.add_parser(sub)
    control.add_parsers(sub)
    cancel.add_parser(sub)
    enqueue.add_parser(sub)
    import_crontab.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`tickwork jobs --json | head`): stop quietly, the way a
        # command killed by SIGPIPE does, instead of a traceback. Point stdout at
        # /dev/null so that the interpreter's own flush at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return status


#: The status of a verb whose reader closed the pipe: 128 + SIGPIPE, as a shell reports
#: a command that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141
