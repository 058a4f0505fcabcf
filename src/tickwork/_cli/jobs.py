"""``tickwork jobs``: what the daemon's state says about each job.

A table by default (one line a job, as ``systemctl list-timers``), each job's details
with ``--long``, one JSON array with ``--json``; then, in the text forms, the one-offs
(delayed jobs) counted per function, when there are any. Examples::

    tickwork jobs examples/housekeeping.toml
    tickwork jobs examples/housekeeping.toml --long
    tickwork jobs --state /var/lib/tickwork/state.sqlite3 --json
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, TextIO

from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    open_state,
    state_named,
    take_file,
)
from tickwork._core.errors import ConfigError
from tickwork._core.text import local_and_utc as _when
from tickwork._core.text import local_time, relative_time, seconds_fixed
from tickwork._daemon import oneoffs
from tickwork._daemon.jobsfile.config import Config, JobConfig, load_config
from tickwork.stores.contract import (
    JOB_STATES,
    LATE_AFTER,
    MOST_PER_PAGE,
    JobQuery,
    schedule_and_after,
)

__all__ = ["add_parser", "run_jobs"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``jobs`` sub-command to an argparse ``subparsers`` object."""
    j: argparse.ArgumentParser = subparsers.add_parser(
        "jobs",
        help="show each job's next run, last run and outcome from the state",
        description="Show what the state of `tickwork run` says about each job: one line "
        "a job with its schedule, next run, last run, outcome and failure streak (times in "
        "local time), or each job's details with --long. Give the jobs file (to find its "
        "default state and list jobs not run yet), --state or --database, or both.",
    )
    add_file_argument(j, optional=True)
    add_store_options(j)
    form = j.add_mutually_exclusive_group()
    form.add_argument(
        "--long",
        action="store_true",
        help="each job's details: pause, waiting and running runs, times in local time and"
        " UTC, the last error",
    )
    form.add_argument("--json", action="store_true", help="one JSON array, for machines")
    j.add_argument(
        "--search", default="", metavar="TEXT", help="only jobs whose name contains TEXT (any case)"
    )
    j.add_argument(
        "--only",
        choices=JOB_STATES,
        help="only jobs in this state: failing (the last run that ended failed), paused,"
        f" late (a run due over {LATE_AFTER:.0f} s ago not started), running, waiting",
    )
    j.add_argument(
        "--limit",
        type=_count,
        default=LIMIT,
        metavar="N",
        help=f"at most N jobs, in name order (default {LIMIT}; 0: all, slow for thousands)",
    )
    j.add_argument("--offset", type=_count, default=0, metavar="N", help="skip the first N jobs")
    j.set_defaults(func=run_jobs)
    return j


#: Jobs listed unless ``--limit`` says otherwise.
LIMIT: Final = 100


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return int(text)


# -- tickwork jobs ---------------------------------------------------------------------


def _shown(text: str) -> str:
    """An ISO 8601 time written by `_iso`, in local time and UTC, for the text form.

    A text that is not a time says what is wrong with the stored value already (see
    `tickwork._core.text.out_of_range`) and is shown as it is.
    """
    try:
        return _when(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return text


def run_jobs(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``tickwork jobs`` for parsed arguments; return the exit status."""
    from tickwork._daemon.state import default_namespace
    from tickwork._daemon.web.joblist import read_jobs, state_row

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    asked = _asked(args, err)
    if isinstance(asked, int):
        return asked
    config, query = asked
    store = open_state(args, "jobs", err)
    if isinstance(store, int):
        return store
    try:
        namespace = args.namespace or (default_namespace(args.file) if args.file else None)
        states, live, now, summaries, listed = read_jobs(store, namespace, query)
        queues = [] if args.json else oneoffs.counts(store)
    finally:
        store.close()
    host = socket.gethostname()
    rows = [state_row(s, now, host, live, summaries[s.id]) for s in states]
    # The file's jobs not in the state yet, when every stored job that matches is here.
    if config is not None and query.state is None and len(states) >= listed.total:
        rows += _undeclared_rows(config, query, {str(row["job"]) for row in rows})
    shown = query.offset + len(states)
    if shown < listed.total:
        print(
            f"{len(states):,} of {listed.total:,} jobs listed; --offset {shown} for the next,"
            " --limit N (0: all) for more, --search or --only to narrow",
            file=err,
        )
    _print_jobs(args, rows, queues, now, out)
    return 0


def _asked(args: argparse.Namespace, err: TextIO) -> tuple[Config | None, JobQuery] | int:
    """The jobs file (if given) and the listing asked for; an exit status if refused."""
    status = take_file(args, "jobs", err)
    if status is not None:
        return status
    missing = state_named(args, "jobs", err)
    if missing is not None:
        return missing
    config: Config | None = None
    if args.file is not None:
        try:
            config = load_config(args.file, check_host=False)
        except ConfigError as exc:
            for issue in exc.errors:
                print(issue, file=err)
            return 2
    if args.limit > MOST_PER_PAGE:
        print(
            f"tickwork jobs: --limit must be at most {MOST_PER_PAGE:,} (0: all), got {args.limit}",
            file=err,
        )
        return 2
    query = JobQuery(
        search=args.search, state=args.only, offset=args.offset, limit=args.limit or None
    )
    return config, query


def _undeclared_rows(config: Config, query: JobQuery, seen: set[str]) -> list[dict[str, Any]]:
    """The rows of the file's jobs that match ``query`` and are not among ``seen``."""
    wanted = query.search.lower()
    return [
        _undeclared_row(job)
        for job in config.jobs
        if job.name not in seen and wanted in job.name.lower() and not query.offset
    ]


def _print_jobs(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    queues: Sequence[Any],
    now: float,
    out: TextIO,
) -> None:
    """The rows in the form asked for (JSON, ``--long`` or the table), then the one-offs."""
    if args.json:
        json.dump(
            [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows],
            out,
            indent=2,
        )
        out.write("\n")
        return
    if not rows:
        print("no jobs in the state", file=out)
    elif args.long:
        for row in rows:
            _print_row(row, out)
    else:
        _print_table(rows, now, out)
    if queues:  # one-offs are counted per function, not listed
        print(file=out)
        _print_aligned(oneoffs.counts_table(queues), out)


def _undeclared_row(job: JobConfig) -> dict[str, Any]:
    """The row of a job the file declares that the state does not hold yet."""
    return {
        "job": job.name,
        "id": None,
        "schedule": None,
        "paused": not job.enabled,
        "pause": None,
        "waiting": {},
        "waiting_runs": 0,
        "running": 0,
        "lost": [],
        "next_run": None,
        "last_scheduled": None,
        "last_started": None,
        "last_ended": None,
        "outcome": "not in the state yet",
        "error": None,
        "last_success": None,
        "consecutive_failures": None,
        "_next": None,
        "_last": None,
        "_running": [],
        "_schedule": schedule_and_after(job.schedule, job.after),
    }


def _print_row(row: dict[str, Any], out: TextIO) -> None:
    """One job's details (``--long``): its flags, what holds it, its runs."""
    flags = []
    if row["paused"]:
        flags.append("paused")
    if row["running"]:
        flags.append("running now")
    if row["lost"]:
        flags.append("lost")
    flag = f" [{', '.join(flags)}]" if flags else ""
    print(f"{row['job']}{flag}", file=out)
    if row["schedule"]:
        print(f"  schedule  {row['schedule']}", file=out)
    _print_pause(row, out)
    _print_runs(row, out)
    held = ", held while paused" if row["paused"] and row["_next"] is not None else ""
    print(f"  next run  {_when(row['_next'])}{held}", file=out)
    _print_last(row, out)


def _print_pause(row: dict[str, Any], out: TextIO) -> None:
    """Why the job is paused, if it is."""
    pause = row["pause"]
    if pause is not None:
        until = "" if pause["until"] is None else f", until {_shown(pause['until'])}"
        note = "" if not pause["note"] else f": {pause['note']}"
        print(f"  paused    by {pause['by']} at {_shown(pause['at'])}{until}{note}", file=out)
    elif row["paused"]:
        print("  paused    in the jobs file (enabled = false)", file=out)


def _print_runs(row: dict[str, Any], out: TextIO) -> None:
    """The job's runs waiting, running and lost."""
    for origin, count in sorted(row["waiting"].items()):
        print(f"  waiting   {count} {origin} run(s), to start in order", file=out)
    if row.get("waiting_for"):
        print(f"  waiting   for a slot: {row['waiting_for']} is full", file=out)
    recovered = row["waiting_runs"] - sum(row["waiting"].values())
    if recovered > 0:
        print(f"  waiting   {recovered} recovered run(s), to run again", file=out)
    for claim in row["_running"]:
        started = f", started {claim['started']}" if claim["started"] else ", not started yet"
        print(
            f"  running   the run due {claim['scheduled']}{started}, by {claim['owner']}",
            file=out,
        )
    for claim in row["lost"]:
        started = f", started {claim['started']}" if claim["started"] else ""
        print(
            f"  lost      the run due {claim['scheduled']}{started}: its owner"
            f" {claim['owner']} is gone ({claim['why']})",
            file=out,
        )


def _print_last(row: dict[str, Any], out: TextIO) -> None:
    """The job's last run: when, how long, its outcome and error, its failure streak."""
    last = row["_last"]
    if last is None:
        print(f"  last run  - ({row['outcome'] or 'never ran'})", file=out)
        return
    took = ""
    if last.started is not None and last.ended is not None:
        took = f", took {seconds_fixed(last.ended - last.started, 2)}s"
    started = "" if last.started is None else f", started {_when(last.started)}"
    print(f"  last run  {_when(last.scheduled)}{started}{took}", file=out)
    print(f"  outcome   {last.outcome}", file=out)
    if last.error:
        lines = last.error.strip().splitlines()
        tail = lines[-5:]
        if len(lines) > 5:
            tail.insert(0, "...")
        for i, line in enumerate(tail):
            print(f"  {'error' if i == 0 else '':<8}  {line}", file=out)
    if row["last_success"] is not None or row["consecutive_failures"]:
        success = row["last_success"]
        shown = "never" if success is None else _shown(success)
        print(f"  last ok   {shown}", file=out)
    if row["consecutive_failures"]:
        print(f"  failing   {row['consecutive_failures']} run(s) in a row", file=out)


# -- the table ---------------------------------------------------------------------------

#: The table's columns, as ``systemctl list-timers`` lays out its timers.
_COLUMNS = ("JOB", "SCHEDULE", "NEXT", "LEFT", "LAST", "PASSED", "OUTCOME", "STREAK", "NOTES")


def _table_cells(row: dict[str, Any], now: float) -> tuple[str, ...]:
    """One job's line of the table: its cells in the order of `_COLUMNS`."""
    nxt: float | None = row["_next"]
    left = relative_time(now, nxt) or "-"
    if row["paused"]:
        left = "held while paused"
    last = row["_last"]
    ran: float | None = None
    if last is not None:
        ran = last.started if last.started is not None else last.scheduled
    failures = row["consecutive_failures"]
    notes = []
    if row["id"] is None:
        notes.append("not in the state yet")
    if row["paused"]:
        notes.append("paused")
    if row["running"]:
        notes.append("running")
    if row["lost"]:
        notes.append("lost")
    if row["waiting_runs"]:
        notes.append(f"{row['waiting_runs']} waiting")
    if row.get("waiting_for"):
        notes.append(f"waiting for {row['waiting_for']}")
    return (
        str(row["job"]),
        row["schedule"] or row.get("_schedule") or "-",
        local_time(nxt),
        left,
        local_time(ran),
        relative_time(now, ran) or "-",
        last.outcome if last is not None else "-",
        f"{failures} failed" if failures else "-",
        ", ".join(notes) or "-",
    )


def _print_table(rows: list[dict[str, Any]], now: float, out: TextIO) -> None:
    """The jobs as a table, one line a job, each column as wide as its widest cell."""
    _print_aligned([_COLUMNS, *(_table_cells(row, now) for row in rows)], out)
    count = len(rows)
    print(f"\n{count} job{'s' if count != 1 else ''} listed; --long for details.", file=out)


def _print_aligned(lines: Sequence[Sequence[str]], out: TextIO) -> None:
    """Lines of cells, each column as wide as its widest cell."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip(),
            file=out,
        )
