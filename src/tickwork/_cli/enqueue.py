"""``tickwork enqueue``: add a one-off (a delayed job) to the state, or cancel one.

For producers outside the app (a shell script, a deploy step, another language's
program): ``tickwork enqueue --state s.sqlite3 myapp.mail:remind --args '[42]' --in 3d
--key remind:42`` prints the one-off's id. The function is not imported here (this
host may not have the app's code): its path is checked for form, and a node that
allows it (``allowed_modules``) runs it. ``--cancel ID_OR_KEY`` cancels a pending one.
The fields are those of ``POST /api/enqueue`` (`tickwork._daemon.oneoffs`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    duration,
    open_state,
    state_named,
    take_file,
)
from tickwork._core.schedules import parse_duration
from tickwork._daemon.oneoffs import EnqueueError, answer, cancel, enqueue, parse_at
from tickwork._durable.control import default_actor
from tickwork.stores import DELIVERIES, MISSED_POLICIES, StoreError

__all__ = ["add_parser", "run_enqueue"]

_HELP = "enqueue a one-off: run a function once, now, at a time or after a delay"
#: The run's options: (option, field, argparse type, metavar or choices, help).
_OPTIONS: tuple[tuple[str, str, Any, Any, str], ...] = (
    ("--retries", "retries", int, "N", "further attempts of a run that failed (0 to 100)"),
    ("--retry-backoff", "retry_backoff", duration("--retry-backoff"), "D",
     "before the first retry"),
    ("--retry-backoff-max", "retry_backoff_max", duration("--retry-backoff-max"), "D",
     "the cap on the doubled backoff"),
    ("--timeout", "timeout", duration("--timeout"), "D", "how long one attempt may take"),
    ("--kill-grace", "kill_grace", duration("--kill-grace"), "D",
     "with --isolation process: from SIGTERM to SIGKILL at the limit"),
    ("--isolation", "isolation", str, ("thread", "process"), "where the function is called"),
    ("--pool", "pool", str, "NAME", "the concurrency pool its run counts against"),
    ("--grace", "grace", duration("--grace"), "D", "how late it may start (else: missed)"),
    ("--missed", "missed", str, MISSED_POLICIES, "if no node ran it in time"),
    ("--delivery", "delivery", str, DELIVERIES, "if its runner dies after it started"),
)  # fmt: skip


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``enqueue`` to an argparse ``subparsers`` object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "enqueue",
        help=_HELP,
        description=f"{_HELP[0].upper()}{_HELP[1:]} (a delayed job), in the state of "
        "`tickwork run` (the jobs file, --state or --database), and print its id. The "
        "function is not imported here: it runs on a node that allows it "
        "(allowed_modules). With --cancel, cancel a pending one-off instead.",
    )
    add_file_argument(
        p,
        name="optional",
        optional=True,
        operand=("FUNC", "the function to run: an import path 'package.module:function'"),
    )
    add_store_options(p)
    p.add_argument("--args", metavar="JSON", help="its positional arguments: a JSON array")
    p.add_argument("--kwargs", metavar="JSON", help="its keyword arguments: a JSON object")
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--at",
        metavar="TIME",
        help="run it then: an ISO 8601 time (local time unless it has an offset or Z)",
    )
    when.add_argument("--in", dest="delay", metavar="D", help="run it after D (30s, 3d)")
    p.add_argument(
        "--key",
        metavar="KEY",
        help="idempotency key: while a one-off with it is pending or running, nothing is added",
    )
    for option, field, kind, shown, text in _OPTIONS:
        choices = shown if isinstance(shown, tuple) else None
        metavar = None if choices else shown
        p.add_argument(
            option, dest=f"opt_{field}", type=kind, choices=choices, metavar=metavar, help=text
        )
    p.add_argument("--json", action="store_true", help="print the answer as JSON, for machines")
    p.add_argument(
        "--cancel",
        metavar="ID_OR_KEY",
        help="cancel the pending one-off with this id (~...) or key, instead of enqueueing",
    )
    p.add_argument(
        "--by",
        metavar="WHO",
        help="with --cancel: who cancels, as recorded (default: user@host, here"
        f" {default_actor()})",
    )
    p.set_defaults(func=run_enqueue)
    return p


def run_enqueue(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Enqueue (or cancel) the one-off ``args`` describe; return the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    refused = take_file(args, "enqueue", err)
    if refused is None and args.name is None and _a_function(args.file):
        args.file, args.name = None, args.file  # `enqueue pkg.mod:f` and no state named
    if refused is None:
        refused = state_named(args, "enqueue", err)
    if refused is not None:
        return refused
    try:
        fields = _fields(args)
    except EnqueueError as exc:
        print(f"tickwork enqueue: {exc}", file=err)
        return 2
    store = open_state(args, "enqueue", err)
    if isinstance(store, int):
        return store
    try:
        if args.cancel is not None:
            by = default_actor() if args.by is None else args.by
            job_id = cancel(store, args.cancel, now=time.time(), by=by)
            if job_id is None:
                print(
                    f"tickwork enqueue: no one-off {args.cancel!r} is pending (it ended, never"
                    " was, or a node is running it)",
                    file=err,
                )
                return 1
            print(f"cancelled {job_id}", file=out)
            return 0
        done = enqueue(store, fields, now=time.time())
    except (ValueError, TypeError) as exc:  # EnqueueError, JobSpecError among them
        print(f"tickwork enqueue: {exc}", file=err)
        return 2
    except StoreError as exc:
        print(f"tickwork enqueue: {exc}", file=err)
        return 1
    finally:
        store.close()
    if args.json:
        print(json.dumps(answer(done)), file=out)
    else:
        print(done.id, file=out)
        if not done.created:
            print(f"tickwork enqueue: key {done.key!r} is pending already: nothing added", file=err)
    return 0


def _a_function(operand: str | None) -> bool:
    """Whether the lone operand is a function's path rather than a jobs file."""
    return operand is not None and ":" in operand and not Path(operand).exists()


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The request's fields from the command line (`tickwork._daemon.oneoffs.FIELDS`)."""
    if args.cancel is not None:
        if args.name is not None:
            raise EnqueueError(
                f"give --cancel or a function to enqueue, not both: got {args.name!r}"
            )
        return {}
    if args.name is None:
        raise EnqueueError(
            "give the function to run, 'package.module:function', after the jobs file,"
            " --state or --database"
        )
    fields: dict[str, Any] = {"func": args.name, "key": args.key}
    for option in ("args", "kwargs"):
        text = getattr(args, option)
        if text is not None:
            try:
                fields[option] = json.loads(text)
            except ValueError as exc:
                raise EnqueueError(f"--{option} must be JSON: {exc}, got {text!r}") from None
    if args.at is not None:
        try:
            fields["at"] = parse_at(args.at)
        except EnqueueError as exc:
            raise EnqueueError(f"--{exc}") from None
    if args.delay is not None:
        try:
            fields["delay"] = parse_duration(args.delay)
        except ValueError as exc:
            raise EnqueueError(f"--in: {exc}") from None
    fields["options"] = {
        field: getattr(args, f"opt_{field}")
        for _, field, _, _, _ in _OPTIONS
        if getattr(args, f"opt_{field}") is not None
    }
    return fields
