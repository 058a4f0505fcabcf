"""Dead-man alert episodes in an SQL store: which node sends, read from the shared state.

`AlertEpisodes` is what `tickwork.AlertWatch` (``_durable/watch.py``) needs from an SQL
store: the facts its conditions are judged on (`JobFacts`, read in one transaction for
every watched job) and one row per open episode of a (job, condition), whose state
moves only by conditional statements, so that of many nodes watching the same jobs
exactly one wins the right to send each message:

- ``open``: an insert that does nothing when the row exists; the node whose insert
  made the row sends the alert (state ``opening``, then ``open`` once sent);
- ``close``: an update from ``open`` to ``closing``; its node sends the recovery, then
  deletes the row;
- a message not marked sent when its lease ends (the node died, or its delivery
  failed) is taken over by whichever node updates the row first, and sent again.

Each open and close is recorded as an action (``alert``, ``alert-cleared``) in the
transaction that wins it, so ``tickwork history --actions`` shows them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeAlias

from ._sqlbase import C, SQLHost

__all__ = ["EPISODE_TABLE", "AlertEpisodes", "Episode", "EpisodeState", "JobFacts"]

#: The episode table's columns, for the migration steps of both stores (``{t}``: its name).
EPISODE_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS {t} (job_id {text} NOT NULL, kind {text} NOT NULL,"
    " state {text} NOT NULL, since {real} NOT NULL, detail {text}, owner {text} NOT NULL,"
    " lease_until {real} NOT NULL, PRIMARY KEY (job_id, kind))"
)

EpisodeState: TypeAlias = Literal["opening", "open", "closing"]

#: Watched jobs whose facts one pair of statements reads (a list parameter each).
FACTS_CHUNK: Final = 500
#: The outcomes of a run that ran (its start and end are the job's last run).
_RAN: Final = frozenset({"ok", "failed", "timeout", "cancelled"})


@dataclass(frozen=True, slots=True)
class Episode:
    """One open episode of a job's condition, as stored."""

    job_id: str
    kind: str
    state: EpisodeState
    since: float
    """When the condition was first seen holding (the alert's time)."""
    detail: str | None
    owner: str
    """The node sending its current message."""
    lease_until: float
    """When another node may take the message over if it is still not sent."""


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the shared state says about one job, for judging its alert conditions."""

    paused: bool
    next_run: float | None
    first_slot: float | None
    last_ok: float | None
    """When the newest ok run ended (ledger, or the job's last run); ``None``: never."""
    last_entry: tuple[str, float, float | None] | None
    """``(outcome, scheduled, started)`` of the newest ledger entry."""
    claims: tuple[tuple[float, float | None], ...]
    """``(scheduled, started)`` of each claim held or waiting."""
    jitter: float = 0.0
    """The schedule's jitter: a run may start up to this long after its slot."""
    overlap: str = "allow"
    """The job's overlap policy as stored (``replace`` is stored as ``queue``)."""
    last_run: tuple[float, float] | None = None
    """``(started, ended)`` of the job's last run that ran, if it is the last one."""


def _jitter(schedule: str) -> float:
    """The ``jitter`` of a stored schedule (0 when it has none, or cannot be read)."""
    try:
        value = json.loads(schedule).get("jitter", 0.0)
    except (ValueError, AttributeError):
        return 0.0
    return float(value) if isinstance(value, int | float) else 0.0


def _facts(row: Sequence[Any], claims: Sequence[tuple[float, float | None]]) -> JobFacts:
    """One job's facts from its row of `AlertEpisodes.facts` and its claims."""
    _, paused, next_run, first_slot, last_outcome, last_ended, schedule, ok = row[:8]
    outcome, scheduled, started, overlap, last_started = row[8:13]
    ends = (ok, last_ended if last_outcome == "ok" else None)
    ran = last_outcome in _RAN and last_started is not None and last_ended is not None
    known = [float(e) for e in ends if e is not None]
    return JobFacts(
        paused=bool(paused),
        next_run=next_run,
        first_slot=first_slot,
        last_ok=max(known) if known else None,
        last_entry=None if outcome is None else (str(outcome), scheduled, started),
        claims=tuple(claims),
        jitter=_jitter(schedule),
        overlap=str(overlap),
        last_run=(last_started, last_ended) if ran else None,
    )


class AlertEpisodes(Generic[C]):
    """The alert episodes and facts of one SQL store (see the module's docstring).

    Args:
        store: The store whose transactions and dialect the statements use.

    """

    def __init__(self, store: SQLHost[C]) -> None:
        self._store = store

    # -- facts --------------------------------------------------------------------------

    def facts(self, job_ids: Sequence[str]) -> dict[str, JobFacts]:
        """The facts of each of ``job_ids`` that exists, read in one transaction.

        Two statements per `FACTS_CHUNK` jobs (their rows with their newest ledger
        entries, and their claims), each an indexed look per job: a look costs the
        same whatever else the state holds.
        """
        jobs_q = (
            "SELECT j.id, j.paused, j.next_run, j.first_slot, j.last_outcome, j.last_ended,"
            " j.schedule,"
            " (SELECT l.ended FROM {ledger} l WHERE l.job_id = j.id AND l.outcome = 'ok'"
            " ORDER BY l.seq DESC LIMIT 1),"
            + ",".join(
                f" (SELECT l.{column} FROM {{ledger}} l WHERE l.job_id = j.id"
                " ORDER BY l.seq DESC LIMIT 1)"
                for column in ("outcome", "scheduled", "started")
            )
            + ", j.overlap, j.last_started FROM {jobs} j WHERE j.id {any}"
        )
        claims_q = (
            "SELECT job_id, scheduled, started FROM {claims} WHERE job_id {any}"
            " ORDER BY scheduled, token"
        )
        ids = list(dict.fromkeys(job_ids))

        def body(cur: C) -> dict[str, JobFacts]:
            out: dict[str, JobFacts] = {}
            for i in range(0, len(ids), FACTS_CHUNK):
                chunk = ids[i : i + FACTS_CHUNK]
                rows = cur.execute(*self._store._q_list(jobs_q, chunk)).fetchall()
                claims: dict[str, list[tuple[float, float | None]]] = {}
                for job_id, scheduled, started in cur.execute(
                    *self._store._q_list(claims_q, chunk)
                ).fetchall():
                    claims.setdefault(job_id, []).append((scheduled, started))
                for row in rows:
                    out[row[0]] = _facts(row, claims.get(row[0], ()))
            return {job_id: out[job_id] for job_id in job_ids if job_id in out}

        return self._store._run("read the facts of the watched jobs", body, write=False)

    # -- episodes -----------------------------------------------------------------------

    def episodes(self) -> dict[tuple[str, str], Episode]:
        """Every open episode, by ``(job id, kind)``."""
        query = self._store._q(
            "SELECT job_id, kind, state, since, detail, owner, lease_until FROM {alerts}"
        )

        def body(cur: C) -> dict[tuple[str, str], Episode]:
            rows = cur.execute(query, ()).fetchall()
            return {(r[0], r[1]): Episode(*r) for r in rows}

        return self._store._run("read the alert episodes", body, write=False)

    def open(
        self, job_id: str, kind: str, *, owner: str, now: float, lease: float, detail: str
    ) -> bool:
        """Open an episode unless one is open; whether this call opened it (then send it)."""
        insert = self._store._q(
            "INSERT INTO {alerts} (job_id, kind, state, since, detail, owner, lease_until)"
            " VALUES (?, ?, 'opening', ?, ?, ?, ?){episode_once}"
        )

        def body(cur: C) -> bool:
            won = cur.execute(insert, (job_id, kind, now, detail, owner, now + lease)).rowcount
            if won == 1:
                self._act(cur, job_id, "alert", owner, now, f"{kind}: {detail}")
            return won == 1

        def resolve(cur: C) -> bool:  # the commit's outcome is unknown: read it back
            return self._owns(cur, job_id, kind, owner, "opening")

        return self._store._run(f"open an alert episode of job {job_id!r}", body, resolve=resolve)

    def close(
        self, job_id: str, kind: str, *, owner: str, now: float, lease: float, detail: str
    ) -> bool:
        """Close an open, sent episode; whether this call did (then send the recovery)."""
        update = self._store._q(
            "UPDATE {alerts} SET state = 'closing', owner = ?, lease_until = ?, detail = ?"
            " WHERE job_id = ? AND kind = ? AND state = 'open'"
        )

        def body(cur: C) -> bool:
            won = cur.execute(update, (owner, now + lease, detail, job_id, kind)).rowcount
            if won == 1:
                self._act(cur, job_id, "alert-cleared", owner, now, f"{kind}: {detail}")
            return won == 1

        def resolve(cur: C) -> bool:
            return self._owns(cur, job_id, kind, owner, "closing")

        return self._store._run(f"close an alert episode of job {job_id!r}", body, resolve=resolve)

    def take_over(
        self, job_id: str, kind: str, state: EpisodeState, *, owner: str, now: float, lease: float
    ) -> bool:
        """Take over an unsent message whose lease ended; whether this call did (send it).

        ``state``: the message's, ``opening`` (the alert) or ``closing`` (the recovery).
        """
        update = self._store._q(
            "UPDATE {alerts} SET owner = ?, lease_until = ?"
            " WHERE job_id = ? AND kind = ? AND state = ? AND lease_until < ?"
        )

        def body(cur: C) -> bool:
            n = cur.execute(update, (owner, now + lease, job_id, kind, state, now)).rowcount
            return n == 1

        def resolve(cur: C) -> bool:
            return self._owns(cur, job_id, kind, owner, state)

        return self._store._run(f"take over an alert of job {job_id!r}", body, resolve=resolve)

    def sent(self, job_id: str, kind: str, state: EpisodeState, *, owner: str) -> None:
        """The message of ``state`` went out: an opening episode is open, a closing one gone."""
        if state == "opening":
            template = (
                "UPDATE {alerts} SET state = 'open' WHERE job_id = ? AND kind = ?"
                " AND state = 'opening' AND owner = ?"
            )
        else:
            template = (
                "DELETE FROM {alerts} WHERE job_id = ? AND kind = ? AND state = ? AND owner = ?"
            )
        params: tuple[Any, ...] = (job_id, kind, owner)
        if state != "opening":
            params = (job_id, kind, state, owner)
        query = self._store._q(template)

        def body(cur: C) -> None:
            cur.execute(query, params)

        self._store._run(f"mark an alert of job {job_id!r} sent", body)

    def discard(self, job_id: str, kind: str, *, now: float) -> bool:
        """Drop an episode whose alert was never sent and whose condition has cleared."""
        query = self._store._q(
            "DELETE FROM {alerts} WHERE job_id = ? AND kind = ? AND state = 'opening'"
            " AND lease_until < ?"
        )

        def body(cur: C) -> bool:
            return cur.execute(query, (job_id, kind, now)).rowcount == 1

        return self._store._run(f"drop an unsent alert of job {job_id!r}", body)

    # -- helpers ------------------------------------------------------------------------

    def _owns(self, cur: C, job_id: str, kind: str, owner: str, state: str) -> bool:
        row = cur.execute(
            self._store._q("SELECT owner, state FROM {alerts} WHERE job_id = ? AND kind = ?"),
            (job_id, kind),
        ).fetchone()
        return row is not None and row[0] == owner and row[1] == state

    def _act(self, cur: C, job_id: str, action: str, actor: str, at: float, note: str) -> None:
        cur.execute(
            self._store._q(
                "INSERT INTO {actions} (job_id, action, actor, at, note, detail)"
                " VALUES (?, ?, ?, ?, NULL, ?)"
            ),
            (job_id, action, actor, at, note),
        )
