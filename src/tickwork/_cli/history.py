"""``tickwork history``: the slot ledger of the daemon's state, newest due time first.

Slots are listed by when they were due (a slot backfilled or given up today for last
week sits under last week), operators' actions by when they were taken.
"""

from __future__ import annotations

import argparse
import difflib
import heapq
import json
import math
import sys
import time
from datetime import datetime
from typing import Any, Final, TextIO

from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    count,
    open_state,
    state_named,
    take_file,
)
from tickwork._core.args import in_calendar
from tickwork._core.errors import ConfigError
from tickwork._core.schedules import DurationTooLong, parse_duration
from tickwork._core.text import iso, seconds_fixed
from tickwork._daemon.config import load_config
from tickwork.stores._model import OUTCOMES, ActionRecord, SlotRecord
from tickwork.stores._protocol import RuntimeControl, SlotLedger, Store

__all__ = ["add_parser", "in_calendar_or_refuse", "parse_since", "run_history"]

#: Ledger entries read per query while looking for the newest due times.
_PAGE: Final = 1000


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: a duration back from now (``90m``, ``2h``, ``7d``) or an ISO 8601 time.

    A date-time without an offset is read in local time, as a person at this terminal
    means it. The time must fall in the years 1 to 9999 (UTC).

    Raises:
        argparse.ArgumentTypeError: Neither, or out of that range; the message shows
            the text.

    """
    try:
        ago = parse_duration(text)
    except DurationTooLong as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except (ValueError, TypeError):
        pass
    else:
        return in_calendar_or_refuse((time.time() if now is None else now) - ago, text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a duration back from now (90m, 2h, 7d) or an ISO 8601 date-time"
            f" (2026-12-04T09:00, 2026-12-04T08:00Z), got {text!r}"
        ) from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time
        ts = moment.timestamp()
    except (OverflowError, OSError, ValueError):
        ts = math.nan
    return in_calendar_or_refuse(ts, text)


def in_calendar_or_refuse(ts: float, text: str) -> float:
    """``ts``, the time ``text`` names, if it falls in the years 1 to 9999 (UTC).

    Raises:
        argparse.ArgumentTypeError: It does not; the message shows the text.

    """
    if not in_calendar(ts):
        raise argparse.ArgumentTypeError(f"must fall in the years 1 to 9999 (UTC), got {text!r}")
    return ts


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


def _name(job_id: str) -> str:
    """A daemon job's name: its id without the ``namespace/`` prefix."""
    return job_id.partition("/")[2] or job_id


def run_history(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``tickwork history`` for parsed arguments; return the exit status."""
    from tickwork._daemon.declare import default_namespace

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
        entries = _newest_due(store, job_id, args, namespace if job_id is None else None)
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
    # One list, newest first: slots by when they were due, actions by when taken.
    merged: list[SlotRecord | ActionRecord] = [*entries, *actions]
    merged.sort(key=_when, reverse=True)
    del merged[args.limit :]
    if args.json:
        json.dump([_json(item) for item in merged], out, indent=2)
        out.write("\n")
        return 0
    if not merged:
        print("no entries", file=out)
        return 0
    for item in merged:
        print(_line(item) if isinstance(item, SlotRecord) else _action_line(item), file=out)
    return 0


def _when(item: SlotRecord | ActionRecord) -> float:
    """Where an item sits in the list: a slot's due time, an action's time."""
    return item.at if isinstance(item, ActionRecord) else item.scheduled


def _newest_due(
    store: SlotLedger, job_id: str | None, args: argparse.Namespace, namespace: str | None
) -> list[SlotRecord]:
    """The ``--limit`` entries with the latest due times that pass the filters.

    The ledger comes back in the order it was written, and a slot is not always written
    in the order it was due (a backfill, slots given up late, several nodes), so every
    entry that passes the filters is read, a page at a time, keeping the newest due
    times; the ledger's retention bounds the reading.
    """
    best: list[tuple[float, int, SlotRecord]] = []
    before: int | None = None
    while True:
        page = store.history(
            job_id, since=args.since, outcome=args.outcome, before=before, limit=_PAGE
        )
        for e in page:
            if namespace is None or e.job_id.startswith(namespace + "/"):
                item = (e.scheduled, e.seq, e)
                if len(best) < args.limit:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    heapq.heapreplace(best, item)
        if len(page) < _PAGE:
            break
        before = page[-1].seq
    return [e for _, _, e in sorted(best, reverse=True)]


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
            declared = {job.name for job in load_config(args.file).jobs}
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


def _json(item: SlotRecord | ActionRecord) -> dict[str, Any]:
    kind = "slot" if isinstance(item, SlotRecord) else "action"
    return {"kind": kind} | item.to_dict() | {"job": _name(item.job_id), "id": item.job_id}


def _action_line(a: ActionRecord) -> str:
    line = f"{iso(a.at)}  {_name(a.job_id)}  [{a.action}]  by {a.actor}"
    if a.detail:
        line += f"  {a.detail}"
    if a.note:
        line += f"\n    note: {a.note}"
    return line


def _job_id(store: Store, name: str | None, namespace: str | None) -> str | None:
    """The stored id of the job ``name``: under the namespace, else the id that matches."""
    if name is None:
        return None
    if namespace is not None:
        return f"{namespace}/{name}"
    ids = {s.id for s in store.jobs()}
    if name in ids:
        return name
    matches = sorted(i for i in ids if _name(i) == name)
    return matches[0] if len(matches) == 1 else name


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
