"""What several verbs share: the state options, the store they name, argument types.

Every verb that reads or changes the daemon's state takes the same ``--state``,
``--database`` and ``--namespace`` (`add_store_options`) and opens the store the same
way (`open_state`); durations and counts are parsed by one function each.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from tickwork._core.schedules import parse_duration
from tickwork.stores._protocol import Store

__all__ = ["add_store_options", "count", "duration", "open_state", "positive_duration"]


def count(text: str) -> int:
    """An integer >= 1, for argparse (a bad one is a usage error that shows it)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def duration(option: str) -> Any:
    """An argparse type: a duration such as ``30s`` or ``1h30m``, named ``option`` in errors."""

    def parse(text: str) -> float:
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{option}: {exc}") from None

    return parse


def positive_duration(option: str) -> Any:
    """Like `duration`, and above zero."""
    base = duration(option)

    def parse(text: str) -> float:
        value: float = base(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{option} must be a duration > 0, got {text!r}")
        return value

    return parse


def add_store_options(p: argparse.ArgumentParser) -> None:
    """Add ``--state``, ``--database`` and ``--namespace`` to a verb's parser."""
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--state",
        metavar="PATH",
        help="SQLite file for the state (default: $XDG_STATE_HOME/tickwork/"
        "<file-stem>-<hash>.sqlite3, i.e. under ~/.local/state; its directory is created 0700)",
    )
    where.add_argument(
        "--database",
        metavar="DSN",
        help="a postgresql:// URL: keep the state in PostgreSQL so that several hosts "
        "run one schedule, each run once",
    )
    p.add_argument(
        "--namespace",
        metavar="NAME",
        help="id prefix of this file's jobs in the state (default: the file's stem)",
    )


def open_state(args: argparse.Namespace, command: str, err: TextIO) -> Store | int:
    """The store ``--state``/``--database``/the jobs file name, or an exit status (said why).

    Shared by ``tickwork jobs`` and ``tickwork history``: a state file that does not
    exist is not created (status 1), and a store that cannot be opened says why.
    """
    from tickwork._daemon.daemon import DaemonConfig
    from tickwork._daemon.declare import DaemonError, open_store

    state, database = DaemonConfig(
        args.file, state=args.state, database=args.database
    ).store_location()
    if state is not None and not Path(state).expanduser().exists():
        print(
            f"tickwork {command}: no state at {state} (has `tickwork run` run with it?)", file=err
        )
        return 1
    try:
        return open_store(state=state, database=database)
    except DaemonError as exc:
        print(f"tickwork {command}: {exc}", file=err)
        return 1
