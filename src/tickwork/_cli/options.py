"""What several verbs share: the jobs file, the state options, the store, argument types.

Every verb that takes a jobs file takes it the same two ways, as its first operand or
with ``-f/--file`` (`add_file_argument`, then `take_file`); every verb that reads or
changes the daemon's state takes the same ``--state``, ``--database`` and
``--namespace`` (`add_store_options`) and opens the store the same way (`open_state`);
durations and counts are parsed by one function each.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from tickwork._core.schedules import parse_duration
from tickwork.stores import Store

__all__ = [
    "VerbParser",
    "add_file_argument",
    "add_store_options",
    "count",
    "duration",
    "open_state",
    "positive_duration",
    "state_named",
    "take_file",
]


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


#: What follows the jobs file on a verb's command line: nothing, an optional job name
#: (``history``) or a job name (``pause``, ``resume``, ``trigger``, ...).
NameOperand = Literal["none", "optional", "required"]


class VerbParser(argparse.ArgumentParser):
    """A verb's parser whose operands (``FILE``, ``NAME``) may sit between its options.

    argparse fills positionals from the first run of them only, so ``tickwork pause
    jobs.toml --note why backup`` would leave ``backup`` over; here the operands left
    over are put back in place, in the order written, before `take_file` reads them.
    """

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse as argparse does, then place the operands written after an option."""
        ns, extras = super().parse_known_args(args, namespace)
        kind: NameOperand | None = getattr(ns, "name_operand", None)
        if kind is None:
            return ns, extras
        slots = ["file_operand"] if kind == "none" else ["file_operand", "name"]
        given = [getattr(ns, slot) for slot in slots if getattr(ns, slot) is not None]
        late = [e for e in extras if not e.startswith("-")]
        operands = given + late[: len(slots) - len(given)]
        if len(operands) == len(given):
            return ns, extras
        for e in operands[len(given) :]:
            extras.remove(e)
        if kind == "required" and len(operands) == 1:
            ns.file_operand, ns.name = None, operands[0]
        else:
            for slot, value in zip(slots, operands + [None] * len(slots), strict=False):
                setattr(ns, slot, value)
        return ns, extras


def add_file_argument(
    p: argparse.ArgumentParser,
    *,
    name: NameOperand = "none",
    optional: bool = False,
    operand: tuple[str, str] | None = None,
) -> None:
    """Add the jobs file to a verb's parser: ``FILE`` first, or ``-f/--file FILE``.

    With ``name``, a job name follows: ``[FILE] NAME`` (the one operand of ``pause
    backup`` is the name) or ``[FILE] [NAME]``. `take_file` sorts the operands out after
    parsing. ``optional``: the verb also works without a file (on ``--state`` /
    ``--database``); the help says so. ``operand``: the metavar and help of an operand
    that is not a job's name (``tickwork enqueue``'s function).
    """
    also = " (optional with --state/--database)" if optional else ""
    p.add_argument(
        "file_operand",
        nargs="?",
        metavar="FILE",
        help=f"the jobs file, e.g. jobs.toml, here or as -f FILE{also}",
    )
    if name != "none":
        p.add_argument(
            "name",
            nargs=None if name == "required" else "?",
            metavar="NAME" if operand is None else operand[0],
            help=(
                "the job's name in the jobs file"
                + ("" if name == "required" else " (default: every job)")
                if operand is None
                else operand[1]
            ),
        )
    p.add_argument(
        "-f",
        "--file",
        dest="file",
        metavar="FILE",
        help="the jobs file, as the FILE operand (give it one way, not both)",
    )
    p.set_defaults(name_operand=name)


def take_file(
    args: argparse.Namespace, command: str, err: TextIO, *, required: bool = False
) -> int | None:
    """Set ``args.file`` (and ``args.name``) from the operands and ``-f``; or an exit status.

    A lone operand of a verb whose job name is optional (``history``) is the name when
    ``-f``, ``--state`` or ``--database`` already names the state (unless, without
    ``-f``, it is an existing ``.toml`` file), else the jobs file. The file given both
    ways is refused (status 2), as is none when ``required``.
    """
    operand: str | None = getattr(args, "file_operand", None)
    args.file_operand = None
    if operand is None:
        pass
    elif hasattr(args, "name") and args.name is None and _names_state(args, operand):
        args.name = operand  # ``history backup -f jobs.toml``: the operand is the name
    elif args.file is not None:
        print(
            f"tickwork {command}: the jobs file is given twice, as {operand!r} and with -f"
            f" {args.file!r}: give it once, as FILE or with -f",
            file=err,
        )
        return 2
    else:
        args.file = operand
    name: str | None = getattr(args, "name", None)
    swapped = operand is not None and args.file == operand and name is not None
    if swapped and not Path(str(operand)).exists() and Path(str(name)).is_file():
        print(
            f"tickwork {command}: no file {operand!r}, but {name!r} is one: the jobs file"
            f" comes first (tickwork {command} FILE NAME), or give it with -f",
            file=err,
        )
        return 2
    if required and args.file is None:
        print(f"tickwork {command}: give the jobs file (FILE or -f FILE)", file=err)
        return 2
    return None


def state_named(args: argparse.Namespace, command: str, err: TextIO) -> int | None:
    """None when the jobs file, ``--state`` or ``--database`` says where the state is.

    Otherwise says so on ``err`` and returns the exit status 2 (a usage error).
    """
    if args.file is None and args.state is None and args.database is None:
        print(
            f"tickwork {command}: give the jobs file (FILE or -f FILE), --state PATH or"
            " --database DSN",
            file=err,
        )
        return 2
    return None


def _names_state(args: argparse.Namespace, operand: str) -> bool:
    """Whether the state is named without ``operand``, so that it is a job's name.

    ``-f`` names it; ``--state`` or ``--database`` do too, unless ``operand`` is an
    existing ``.toml`` file (``history jobs.toml --state s.sqlite3``).
    """
    if args.file is not None:
        return True
    if getattr(args, "state", None) is None and getattr(args, "database", None) is None:
        return False
    return not (operand.endswith(".toml") and Path(operand).is_file())


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
    from tickwork._daemon.start import DaemonConfig
    from tickwork._daemon.state import DaemonError, open_store

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
