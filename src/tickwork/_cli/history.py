"""``tickwork history``: the slot ledger of the daemon's state, newest due time first.

Slots are listed by when they were due (a slot backfilled or given up today for last
week sits under last week), operators' actions by when they were taken.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any, TextIO

from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    count,
    open_state,
    state_named,
    take_file,
)
from tickwork._core.errors import ConfigError
from tickwork._core.text import iso, seconds_fixed
from tickwork._daemon.jobsfile.config import load_config
from tickwork._daemon.web.joblist import (
    history_item,
    merged_history,
    newest_due,
)
from tickwork._daemon.web.joblist import (
    job_id_of as _job_id,
)
from tickwork._daemon.web.joblist import (
    job_name as _name,
)
from tickwork._daemon.when import in_calendar_or_refuse, parse_since
from tickwork.stores import OUTCOMES, ActionRecord, RuntimeControl, SlotLedger, SlotRecord, Store

__all__ = ["add_parser", "in_calendar_or_refuse", "parse_since", "run_history"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``history`` to an argparse ``subparsers`` object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "history",
        help="show the slot ledger: how each run ended, newest due time first",
        description="Show the slot ledger of the state of `tickwork run`: for each slot "
        "of each job, how it ended (ok, failed, missed, skipped, abandoned), when it was "
        "due, started and ended, how late, on which node; newest due time first (a slot "
        "backfilled today for last week is listed under last week), operators' actions "
        "by when they were taken. Give the jobs file (FILE or -f FILE), --state or "
        "--database. A job name that is neither in the state, the ledger nor the jobs "
        "file is an error (status 1).",
    )
    add_file_argument(p, name="optional", optional=True)
    add_store_options(p)
    p.add_argument(
        "--since",
        type=parse_since,
        metavar="T",
        help="only slots due since T: a duration back from now (90m, 2h, 7d) or an ISO "
        "8601 date-time (local time unless it has an offset or Z)",
    )
    p.add_argument("--outcome", choices=OUTCOMES, help="only entries with this outcome")
    p.add_argument(
        "--limit", type=count, default=50, metavar="N", help="most entries (default: 50)"
    )
    p.add_argument("--json", action="store_true", help="one JSON array, for machines")
    p.set_defaults(func=run_history)
    return p


def run_history(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``tickwork history`` for parsed arguments; return the exit status."""
    from tickwork._daemon.state import default_namespace

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    status = take_file(args, "history", err)
    if status is not None:
        return status
    missing = state_named(args, "history", err)
    if missing is not None:
        return missing
    store = open_state(args, "history", err)
    if isinstance(store, int):
        return store
    namespace = args.namespace or (default_namespace(args.file) if args.file else None)
    try:
        if not isinstance(store, SlotLedger):
            print(f"tickwork history: the store {store!r} keeps no slot ledger", file=err)
            return 1
        job_id = _job_id(store, args.name, namespace)
        entries = newest_due(
            store,
            job_id,
            since=args.since,
            outcome=args.outcome,
            limit=args.limit,
            namespace=namespace if job_id is None else None,
        )
        actions: list[ActionRecord] = []
        if args.outcome is None and isinstance(store, RuntimeControl):
            actions = store.actions(job_id, since=args.since, limit=args.limit)
        if job_id is not None and not entries and not actions:
            unknown = _unknown_job(store, args, job_id, namespace)
            if unknown is not None:
                print(f"tickwork history: {unknown}", file=err)
                return 1
    finally:
        store.close()
    if namespace is not None and job_id is None:
        actions = [a for a in actions if a.job_id.startswith(namespace + "/")]
    merged = merged_history(entries, actions, args.limit)
    if args.json:
        json.dump([history_item(item) for item in merged], out, indent=2)
        out.write("\n")
        return 0
    if not merged:
        print("no entries", file=out)
        return 0
    for item in merged:
        print(_line(item) if isinstance(item, SlotRecord) else _action_line(item), file=out)
    return 0


def _unknown_job(
    store: Store, args: argparse.Namespace, job_id: str, namespace: str | None
) -> str | None:
    """Why ``args.name`` names no job (with the nearest names), or None if it does.

    A job exists when the state holds it or the jobs file declares it; one removed from
    both but still in the ledger has entries, and so is not asked about.
    """
    states = store.jobs()
    if any(s.id == job_id for s in states):
        return None
    known = {_name(s.id) for s in states if namespace is None or s.id.startswith(namespace + "/")}
    if args.file is None:
        text = f"no job {args.name!r} in the state ({args.state or 'the database'})"
    else:
        try:
            declared = {job.name for job in load_config(args.file, check_host=False).jobs}
        except ConfigError:
            declared = set()
        if args.name in declared:
            return None
        known |= declared
        text = f"no job {args.name!r} in {args.file} or its state"
    close = difflib.get_close_matches(args.name, sorted(known), n=3, cutoff=0.6)
    if close:
        text += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return text


def _action_line(a: ActionRecord) -> str:
    line = f"{iso(a.at)}  {_name(a.job_id)}  [{a.action}]  by {a.actor}"
    if a.detail:
        line += f"  {a.detail}"
    if a.note:
        line += f"\n    note: {a.note}"
    return line


def _line(e: SlotRecord) -> str:
    parts = [iso(e.scheduled), _name(e.job_id), e.outcome]
    if e.slots > 1:
        parts.append(f"x{e.slots} slots")
    if e.lateness is not None:
        parts.append(f"late {seconds_fixed(e.lateness, 3)}s")
    if e.duration is not None:
        parts.append(f"took {seconds_fixed(e.duration, 3)}s")
    if e.node:
        host, _, rest = e.node.partition(":")
        pid = rest.partition(":")[0]
        parts.append(f"on {host}:{pid}" if pid else f"on {e.node}")
    if e.attempt > 1:
        parts.append(f"attempt {e.attempt}")
    if e.cause is not None:  # chains: the upstream slot whose end queued this run
        upstream, _, slot = e.cause.rpartition("@")
        parts.append(f"(after {_name(upstream)}@{slot})")
    elif e.origin != "schedule":
        parts.append(f"({e.origin})")
    line = "  ".join(parts)
    if e.error:
        line += "\n    " + e.error.strip().splitlines()[-1]
    return line
