"""``tickwork validate``: check a jobs file without running anything.

Example::

    python -m tickwork validate examples/housekeeping.toml

Prints ``ok: N jobs`` and exits 0, or prints every problem as ``file:line: ...`` to
stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from tickwork._cli.options import add_file_argument, take_file
from tickwork._core.errors import ConfigError
from tickwork._daemon.jobsfile.config import load_config

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``validate`` sub-command to an argparse ``subparsers`` object.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The new sub-parser; its ``func`` default is :func:`run`.
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "validate",
        help="check a jobs file and report every problem with its line",
        description="Check a jobs TOML file (see docs/daemon.md) without running it. "
        "Exit status: 0 if valid, 2 otherwise.",
    )
    add_file_argument(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``tickwork validate`` for parsed arguments.

    Args:
        args: Namespace with ``file``.
        out: Stream for the summary (default: ``sys.stdout``).
        err: Stream for problems (default: ``sys.stderr``).

    Returns:
        0 if the file is valid, 2 otherwise.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    status = take_file(args, "validate", err, required=True)
    if status is not None:
        return status
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        for issue in exc.errors:
            print(issue, file=err)
        n = len(exc.errors)
        print(f"tickwork validate: {n} problem{'s' if n != 1 else ''} found", file=err)
        return 2
    jobs = len(config.jobs)
    disabled = sum(not job.enabled for job in config.jobs)
    note = f" ({disabled} disabled)" if disabled else ""
    print(f"ok: {jobs} job{'s' if jobs != 1 else ''}{note}", file=out)
    return 0
