"""What the state says about a daemon's jobs, as rows and lists for programs.

``tickwork jobs --json`` and ``tickwork history --json`` print these, and the HTTP API
(`tickwork._daemon.web.api`) answers with them: one reading, one shape.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import replace
from typing import Any, Final

from tickwork._core.text import iso
from tickwork._daemon.declare import owner_label
from tickwork._daemon.jobsfile.pools import pool_waits
from tickwork._daemon.web.status_page import failure_summary, pid_running
from tickwork.stores import ActionRecord, Claim, JobState, SlotLedger, SlotRecord, Store
from tickwork.stores.contract import (
    JobQuery,
    JobsPage,
    SessionLiveness,
    StoreClock,
    list_jobs,
    schedule_and_after,
)

__all__ = [
    "PAGE",
    "history_item",
    "job_id_of",
    "job_name",
    "lost_because",
    "merged_history",
    "newest_due",
    "read_jobs",
    "state_row",
]

#: Ledger entries read per query while looking for the newest due times.
PAGE: Final = 1000


def lost_because(claim: Claim, now: float, host: str, live: set[str] | None = None) -> str | None:
    """Why the owner of a claim is gone (the claim will be recovered), or None if alive.

    Gone: its lease has run out (nobody renewed it), it names a process on this host
    that is not running, or (``live``: the owners with an open database session, where
    the store can tell) none of its database sessions is open any more. Otherwise a claim
    that names another host is believed while its lease holds.
    """
    if claim.lease_until <= now:
        return f"its lease ran out at {_iso(claim.lease_until)}"
    owner_host, _, rest = claim.owner.partition(":")
    pid_text = rest.partition(":")[0]
    if owner_host == host and pid_text.isdigit() and not pid_running(int(pid_text)):
        return (
            "not running on this host; its lease runs out at"
            f" {_iso(claim.lease_until)}, then the run is recorded abandoned"
        )
    if live is not None and claim.owner not in live:
        return (
            "its database session or process is gone; a running scheduler on the store"
            " recovers its run within seconds, at the latest when its lease runs out at"
            f" {_iso(claim.lease_until)}"
        )
    return None


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso(ts, millis=True)


def read_jobs(
    store: Store, namespace: str | None, query: JobQuery | None = None
) -> tuple[list[JobState], set[str] | None, float, dict[str, dict[str, Any]], JobsPage]:
    """What ``tickwork jobs`` reads from the open store (the caller closes it).

    The jobs of the namespace that ``query`` asks for (``None``: all of them; its prefix
    is the namespace's unless it names a longer one in it), the owners with a live
    session (None: the store cannot tell), now by the store's clock, each job's failure
    summary, and the page as listed (its total and counts per state). Only the page's
    jobs are read in full.
    """
    from tickwork._daemon.declare import owned

    # Leases are judged by the store's clock where it has one, as the daemons do.
    now = store.read_clock(time.time)[0] if isinstance(store, StoreClock) else time.time()
    query = query or JobQuery(limit=None)
    prefix = "" if namespace is None else namespace + "/"
    if not query.prefix.startswith(prefix):
        query = replace(query, prefix=prefix)
    listed = list_jobs(store, query, now=now)
    states = [s for s in listed.jobs if namespace is None or owned(s, namespace)]
    # Owners whose database sessions are all gone (PostgreSQL): lost at once, not
    # only when their lease runs out. None: the store cannot tell.
    live: set[str] | None = None
    if isinstance(store, SessionLiveness):
        live = store.live_owners(c.owner for s in states for c in s.claims if c.owner)
    summaries = {s.id: failure_summary(store, s.id) for s in states}
    waits = pool_waits(store, states, now)  # concurrency pools: who waits for a slot
    for s in states:
        summaries[s.id] |= {"pool": s.spec.pool, "waiting_for": waits.get(s.id)}
    return states, live, now, summaries, listed


def state_row(
    s: JobState, now: float, host: str, live: set[str] | None, summary: dict[str, Any]
) -> dict[str, Any]:
    """One job's row as the state has it (keys starting with ``_``: for text only)."""
    name = s.spec.kwargs.get("job", s.id) if s.spec.kwargs else s.id
    last = s.last_run
    running: list[dict[str, Any]] = []
    lost: list[dict[str, Any]] = []
    waiting: dict[str, int] = {}
    for c in s.claims:
        if not c.owner:  # waiting: a recovered slot or an operator's run, not taken yet
            if c.origin != "schedule":
                waiting[c.origin] = waiting.get(c.origin, 0) + 1
            continue
        why = lost_because(c, now, host, live)
        entry = {
            "owner": owner_label(c.owner),
            "scheduled": _iso(c.scheduled),
            "started": _iso(c.started),
            "lease_until": _iso(c.lease_until),
        }
        if why is None:
            running.append(entry)
        else:
            since = c.lease_until if c.lease_until <= now else None
            lost.append(entry | {"since": _iso(since), "why": why})
    return {
        "job": name,
        "id": s.id,
        # Chains: with the jobs it runs after (a daemon's names, without the namespace).
        "schedule": schedule_and_after(
            s.spec.schedule, s.spec.after, prefix=s.id.rpartition("/")[0] + "/"
        ),
        "paused": s.paused,
        "pause": None if s.pause is None else s.pause.to_dict(),
        "waiting": waiting,
        "waiting_runs": s.waiting_runs,
        "running": len(running),
        "lost": lost,
        "next_run": _iso(s.next_run),
        "last_scheduled": _iso(last.scheduled) if last else None,
        "last_started": _iso(last.started) if last else None,
        "last_ended": _iso(last.ended) if last else None,
        "outcome": last.outcome if last else None,
        "error": last.error if last else None,
        **summary,
        "_next": s.next_run,
        "_last": last,
        "_running": running,
    }


def job_name(job_id: str) -> str:
    """A daemon job's name: its id without the ``namespace/`` prefix."""
    return job_id.partition("/")[2] or job_id


def job_id_of(store: Store, name: str | None, namespace: str | None) -> str | None:
    """The stored id of the job ``name``: under the namespace, else the id that matches."""
    if name is None:
        return None
    if namespace is not None:
        return f"{namespace}/{name}"
    ids = {s.id for s in store.jobs()}
    if name in ids:
        return name
    matches = sorted(i for i in ids if job_name(i) == name)
    return matches[0] if len(matches) == 1 else name


def newest_due(
    store: SlotLedger,
    job_id: str | None,
    *,
    since: float | None,
    outcome: str | None,
    limit: int,
    namespace: str | None,
) -> list[SlotRecord]:
    """The ``limit`` entries with the latest due times that pass the filters.

    The ledger comes back in the order it was written, and a slot is not always written
    in the order it was due (a backfill, slots given up late, several nodes), so every
    entry that passes the filters is read, a page at a time, keeping the newest due
    times; the ledger's retention bounds the reading.
    """
    best: list[tuple[float, int, SlotRecord]] = []
    before: int | None = None
    while True:
        page = store.history(job_id, since=since, outcome=outcome, before=before, limit=PAGE)
        for e in page:
            if namespace is None or e.job_id.startswith(namespace + "/"):
                item = (e.scheduled, e.seq, e)
                if len(best) < limit:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    heapq.heapreplace(best, item)
        if len(page) < PAGE:
            break
        before = page[-1].seq
    return [e for _, _, e in sorted(best, reverse=True)]


def history_item(item: SlotRecord | ActionRecord) -> dict[str, Any]:
    """A ledger entry or an action as JSON (``tickwork history --json``, the HTTP API)."""
    kind = "slot" if isinstance(item, SlotRecord) else "action"
    return {"kind": kind} | item.to_dict() | {"job": job_name(item.job_id), "id": item.job_id}


def merged_history(
    entries: list[SlotRecord], actions: list[ActionRecord], limit: int
) -> list[SlotRecord | ActionRecord]:
    """One list, newest first: slots by when they were due, actions by when taken."""
    merged: list[SlotRecord | ActionRecord] = [*entries, *actions]
    merged.sort(key=lambda i: i.at if isinstance(i, ActionRecord) else i.scheduled, reverse=True)
    return merged[:limit]
