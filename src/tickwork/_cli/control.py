"""``tickwork pause | resume | trigger | backfill | skip-next | cancel``: act on the state.

Each command opens the state that ``tickwork run`` uses (the jobs file's default, or
``--state`` / ``--database``), carries out one action in one transaction, records who
took it, and exits. A running daemon on that state acts within a second: PostgreSQL
announces the change with ``NOTIFY``, and on SQLite the daemon's change check sees it.
The daemon need not be running: the action waits in the state for the next one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from tickwork._cli import backfill
from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    open_state,
    state_named,
    take_file,
)
from tickwork._core.errors import ConfigError
from tickwork._daemon import actions
from tickwork._daemon.jobsfile.config import load_config
from tickwork._daemon.web.joblist import job_id_of as _job_id
from tickwork._daemon.when import parse_future
from tickwork._durable.control import BackfillError, default_actor
from tickwork.stores import JobNotFoundError, JobPausedError, RuntimeControl, StoreError

__all__ = ["add_common_arguments", "add_parsers", "describe", "run_control"]

_HELP = {
    "pause": "pause a job: no new run starts until resumed (a run going goes on)",
    "resume": "resume a paused job",
    "trigger": "run a job once now, outside its schedule, under its overlap policy",
    "backfill": "run a job's slots in a past window, oldest first",
    "skip-next": "give up a job's next slot",
}


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The job's name, the jobs file, the state options, ``--note`` and ``--by``."""
    add_file_argument(p, name="required", optional=True)
    add_store_options(p)
    p.add_argument("--note", metavar="TEXT", help="why, recorded with the action")
    p.add_argument(
        "--by",
        metavar="WHO",
        help=f"who acts, as recorded (default: user@host, here {default_actor()})",
    )


def describe(help_text: str) -> str:
    """A control verb's description: its help, then where it acts and what is recorded."""
    return (
        f"{help_text[0].upper()}{help_text[1:]}. Acts on the state of "
        "`tickwork run` (give the jobs file, as FILE before NAME or with -f, or --state / "
        "--database); a "
        "running daemon on it acts within a second, a stopped one when it starts. "
        "The action is recorded with who took it (see `tickwork history`)."
    )


def add_parsers(subparsers: Any) -> None:
    """Add the control commands to an argparse ``subparsers`` object."""
    for command, help_text in _HELP.items():
        p: argparse.ArgumentParser = subparsers.add_parser(
            command, help=help_text, description=describe(help_text)
        )
        add_common_arguments(p)
        if command == "pause":
            p.add_argument(
                "--until",
                type=parse_future,
                metavar="TIME",
                help="resume by itself then: a duration from now (30m, 2h) or an ISO "
                "8601 time (local time unless it has an offset or Z)",
            )
        p.set_defaults(func=run_control, command=command, act=None)
        if command == "backfill":
            backfill.add_arguments(p)


def run_control(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one control command for parsed arguments; return the exit status."""
    from tickwork._daemon.state import default_namespace

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    command: str = args.command
    refused = take_file(args, command, err)
    if refused is not None:
        return refused
    missing = state_named(args, command, err)
    if missing is not None:
        return missing
    if args.file is not None:
        try:
            config = load_config(args.file, check_host=False)
        except ConfigError as exc:
            for issue in exc.errors:
                print(issue, file=err)
            return 2
        if args.name not in {job.name for job in config.jobs}:
            print(
                f"tickwork {command}: no job {args.name!r} in {args.file} (a job removed"
                " from the file cannot be acted on)",
                file=err,
            )
            return 1
    store = open_state(args, command, err)
    if isinstance(store, int):
        return store
    namespace = args.namespace or (default_namespace(args.file) if args.file else None)
    by = default_actor() if args.by is None else args.by
    try:
        if not isinstance(store, RuntimeControl):
            print(f"tickwork {command}: the store {store!r} has no runtime control", file=err)
            return 1
        job_id = _job_id(store, args.name, namespace)
        assert job_id is not None
        if args.act is not None:  # a verb with a module of its own
            status: int = args.act(store, job_id, args, by, out, err)
            return status
        return _act(store, command, job_id, args, by, out)
    except (JobNotFoundError, JobPausedError) as exc:
        print(f"tickwork {command}: {_named(exc, job_id, args.name)}", file=err)
        return 1
    except actions.Refused as exc:
        print(f"tickwork {command}: {exc}", file=err)
        return exc.status
    except (BackfillError, ValueError, TypeError) as exc:
        print(f"tickwork {command}: {exc}", file=err)
        return 2
    except StoreError as exc:
        print(f"tickwork {command}: {exc}", file=err)
        return 1
    finally:
        store.close()


def _named(exc: Exception, job_id: str | None, name: str) -> str:
    """The error with the job's stored id replaced by the name the operator typed."""
    return actions.named(exc, job_id, name)


def _act(
    store: Any, command: str, job_id: str, args: argparse.Namespace, by: str, out: TextIO
) -> int:
    name, note = args.name, args.note
    if command == "pause":
        done = actions.pause(store, job_id, name, by=by, note=note, until=args.until)
    elif command == "resume":
        done = actions.resume(store, job_id, name, by=by, note=note)
    elif command == "trigger":
        done = actions.trigger(store, job_id, name, by=by, note=note)
    else:
        done = actions.skip_next(store, job_id, name, by=by, note=note)
    for line in done.lines:
        print(line, file=out)
    return 0
