"""Runtime control of the SQL stores: operators pause, resume, trigger, backfill, skip, cancel.

`ControlActions` is a part of `SQLStore`: it carries out the operations of
`tickwork.stores.RuntimeControl`, each in one transaction of its store (`SQLHost`) that
also records the action, and ends the pauses whose end has come. A slot an action gives
up goes to the store's slot ledger (`LedgerQueries`), in the same transaction.
"""

from __future__ import annotations

import bisect
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, Literal

from tickwork._core.text import iso
from tickwork.stores._errors import JobNotFoundError, JobPausedError

from ._checks import (
    check_actor,
    check_job_id,
    check_limit,
    check_note,
    check_optional_time,
    check_time,
)
from ._ledger import LedgerQueries, manual_skip_entry, newest_first
from ._records import ActionRecord, PauseNote
from ._sqlbase import C, SQLHost
from ._terms import ActionKind

__all__ = ["AUTO_ACTOR", "ControlActions", "cancelled_entries"]

#: Two due times closer than this (seconds) are one slot: a grid computed from another
#: anchor may differ in the last bits.
_SAME_SLOT: Final = 0.001

#: Who ends a pause whose ``until`` has come, in the actions it records.
AUTO_ACTOR: Final = "tickwork"


#: Waiting runs deleted per statement by `ControlActions.cancel_waiting` (SQLite's
#: limit on a statement's parameters is 999 in old versions).
_DELETE_CHUNK: Final = 500


def cancelled_entries(
    job_id: str,
    rows: Sequence[tuple[Any, ...]],
    following: Callable[[float], float | None] | None,
    at: float,
    why: str,
) -> list[tuple[Any, ...]]:
    """The ledger entries of cancelled waiting runs: ``rows`` of (token, slot, origin).

    Runs of one origin whose slots follow each other on the schedule (``following``
    gives the slot after one; ``None``: no grid, one entry per run) share one entry
    whose ``slots`` counts them, so cancelling a long backfill leaves the job's history
    readable instead of pushing its other entries out of the ledger's retention.
    """
    groups: list[list[Any]] = []  # [first slot, origin, count, last slot]
    for _, scheduled, origin in rows:
        if groups and following is not None:
            group = groups[-1]
            next_slot = following(group[3]) if group[1] == origin else None
            if next_slot is not None and abs(next_slot - scheduled) <= _SAME_SLOT:
                group[2:] = [group[2] + 1, scheduled]
                continue
        groups.append([scheduled, origin, 1, scheduled])
    return [_cancelled_entry(job_id, g[0], g[2], g[1], at, why) for g in groups]


def _cancelled_entry(
    job_id: str, scheduled: float, slots: int, origin: str, at: float, why: str
) -> tuple[Any, ...]:
    return (job_id, scheduled, "cancelled", slots, origin, None, None, at, "", 1, why, None,
            time.time())  # fmt: skip


def _cancel_detail(rows: Sequence[tuple[Any, ...]]) -> str:
    """The action's detail: how many runs of each origin were cancelled, first to last."""
    origins: dict[str, int] = {}
    for row in rows:
        origins[row[2]] = origins.get(row[2], 0) + 1
    each = ", ".join(f"{n} {origin}" for origin, n in sorted(origins.items()))
    span = iso(rows[0][1]) if len(rows) == 1 else f"{iso(rows[0][1])} to {iso(rows[-1][1])}"
    return f"{len(rows)} waiting run(s) cancelled ({each}), {span}"


def _near(times: Sequence[float], t: float) -> bool:
    """Whether sorted ``times`` holds one within `_SAME_SLOT` of ``t``."""
    i = bisect.bisect_left(times, t - _SAME_SLOT)
    return i < len(times) and times[i] <= t + _SAME_SLOT


class ControlActions(Generic[C]):
    """The operators' actions on one store's jobs (see `SQLStore.pause_job` and on).

    Args:
        store: The store whose transactions and dialect the statements use.
        ledger: The store's slot ledger, which records the slots an action gives up.

    """

    def __init__(self, store: SQLHost[C], ledger: LedgerQueries[C]) -> None:
        self._store = store
        self._ledger = ledger

    def _lock_job(self, cur: C, job_id: str) -> Sequence[Any]:
        """``(paused, next_run, overlap, first_slot)`` of the job, row locked; or not found."""
        row = cur.execute(
            self._store._q(
                "SELECT paused, next_run, overlap, first_slot FROM {jobs} WHERE id = ?{lock}"
            ),
            (job_id,),
        ).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        return tuple(row)

    def _act(
        self,
        cur: C,
        job_id: str,
        action: ActionKind,
        by: str,
        at: float,
        note: str | None,
        detail: str | None,
    ) -> None:
        """Record an operator's action, in the transaction that carries it out."""
        cur.execute(
            self._store._q(
                "INSERT INTO {actions} (job_id, action, actor, at, note, detail)"
                " VALUES (?, ?, ?, ?, ?, ?)"
            ),
            (job_id, action, by, at, note, detail),
        )

    def pause(self, job_id: str, by: str, at: float, note: str | None, until: float | None) -> None:
        """Pause a job at run time (see `SQLStore.pause_job`)."""
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)
        until = check_optional_time("until", until)
        if until is not None and until <= at:
            raise ValueError(f"until must be later than now ({iso(at)}), got {iso(until)}")
        control = PauseNote(by, at, note, until).to_json()
        store = self._store

        def body(cur: C) -> None:
            self._lock_job(cur, job_id)
            cur.execute(
                store._q(
                    "UPDATE {jobs} SET paused = {true}, control = ?, paused_until = ? WHERE id = ?"
                ),
                (control, until, job_id),
            )
            detail = None if until is None else f"until {iso(until)}"
            self._act(cur, job_id, "pause", by, at, note, detail)
            store._changed(cur, job_id)

        store._run(f"pause job {job_id!r}", body)

    def resume(self, job_id: str, by: str, at: float, note: str | None) -> bool:
        """Resume a paused job (see `SQLStore.resume_job`)."""
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)
        store = self._store

        def body(cur: C) -> bool:
            if not self._lock_job(cur, job_id)[0]:
                return False
            cur.execute(
                store._q(
                    "UPDATE {jobs} SET paused = {false}, control = NULL, paused_until = NULL"
                    " WHERE id = ?"
                ),
                (job_id,),
            )
            self._act(cur, job_id, "resume", by, at, note, None)
            store._changed(cur, job_id)
            return True

        return store._run(f"resume job {job_id!r}", body)

    def resume_ended(self, cur: C, now: float) -> None:
        """End the pauses whose ``until`` has come (in the claim's transaction).

        Each is ended only if it still ends by ``now`` as committed when its row is
        written (PostgreSQL checks an UPDATE's condition again on a row another
        transaction changed meanwhile): a pause set again, or ended by another node,
        since the read is left as it is, and no "resume" is recorded for it.
        """
        q = self._store._q
        rows = cur.execute(
            q("SELECT id, paused_until FROM {jobs} WHERE paused_until <= ? ORDER BY id"), (now,)
        ).fetchall()
        for job_id, until in rows:
            ended = cur.execute(
                q(
                    "UPDATE {jobs} SET paused = {false}, control = NULL, paused_until = NULL"
                    " WHERE id = ? AND paused_until <= ?"
                ),
                (job_id, now),
            ).rowcount
            if ended != 1:
                continue
            self._act(
                cur, job_id, "resume", AUTO_ACTOR, now, None, f"the pause until {iso(until)} ended"
            )
            self._store._changed(cur, job_id)

    def trigger(
        self, job_id: str, by: str, at: float, note: str | None
    ) -> Literal["queued", "skipped"]:
        """Ask for one run of a job now (see `SQLStore.trigger_job`)."""
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)

        def body(cur: C) -> Literal["queued", "skipped"]:
            _, _, overlap, _ = self._lock_job(cur, job_id)
            busy = cur.execute(
                self._store._q("SELECT count(*) FROM {claims} WHERE job_id = ?"), (job_id,)
            ).fetchone()[0]
            if busy and overlap == "skip":
                why = (
                    f"skipped: a run of the job is going or waiting (overlap 'skip'),"
                    f" triggered by {by}"
                )
                self._ledger.write(cur, [manual_skip_entry(job_id, at, at, why)])
                self._act(cur, job_id, "trigger", by, at, note, "skipped: a run is going")
                return "skipped"
            self._queue(cur, job_id, at, "manual")
            self._act(cur, job_id, "trigger", by, at, note, None)
            return "queued"

        return self._store._run(f"trigger job {job_id!r}", body)

    def _queue(self, cur: C, job_id: str, scheduled: float, origin: str) -> None:
        """A run waiting for any node to take it (an unowned claim, as a retry is)."""
        cur.execute(
            self._store._q(
                "INSERT INTO {claims} ({claim_columns}) VALUES (?, ?, '', ?, ?, ?, NULL, {true}, ?)"
            ),
            (secrets.token_hex(16), job_id, scheduled, scheduled, scheduled, origin),
        )
        self._store._changed(cur, job_id)

    def backfill(
        self,
        job_id: str,
        slots: Sequence[float],
        by: str,
        at: float,
        note: str | None,
        dry_run: bool = False,
    ) -> list[float]:
        """Queue past slots of a job to run, in order (see `SQLStore.backfill_job`).

        ``dry_run``: find the slots it would queue, and change and record nothing.
        """
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)
        wanted = sorted({check_time("slots", t) for t in slots})
        if not isinstance(dry_run, bool):
            raise TypeError(f"dry_run must be a bool, got {dry_run!r}")

        def body(cur: C) -> list[float]:
            paused, next_run, _, first_slot = self._lock_job(cur, job_id)
            if paused:
                raise JobPausedError(
                    f"job {job_id!r} is paused, and a paused job is not backfilled (its"
                    " slots would wait for the resume): resume it first, then backfill"
                )
            limit = at if next_run is None else min(at, next_run)
            early = [] if first_slot is None else [t for t in wanted if t < first_slot - _SAME_SLOT]
            candidates = [t for t in wanted[len(early) :] if t < limit]
            taken = self._taken(cur, job_id, candidates) if candidates else []
            queued = [t for t in candidates if not _near(taken, t)]
            if dry_run:
                return queued
            for t in queued:
                self._queue(cur, job_id, t, "backfill")
            detail = f"{len(queued)} slot(s) queued"
            if queued:
                detail += f", {iso(queued[0])} to {iso(queued[-1])}"
            if early:
                detail += f"; {len(early)} before the job's first slot {iso(first_slot)} left out"
            left = len(wanted) - len(queued) - len(early)
            if left:
                detail += f"; {left} left out (ran or waiting already, or not before the next run)"
            self._act(cur, job_id, "backfill", by, at, note, detail)
            return queued

        what = f"{'count the slots to' if dry_run else ''} backfill job {job_id!r}".lstrip()
        return self._store._run(what, body, write=not dry_run)

    def cancel_waiting(
        self,
        job_id: str,
        following: Callable[[float], float | None] | None,
        slot: float | None,
        by: str,
        at: float,
        note: str | None,
    ) -> list[float]:
        """Cancel the job's waiting runs, or the one due at ``slot`` (`SQLStore.cancel_waiting`)."""
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)
        slot = check_optional_time("slot", slot)
        if following is not None and not callable(following):
            raise TypeError(
                f"following must be callable as following(slot) or None, got {following!r}"
            )
        store = self._store
        select = "SELECT token, scheduled, origin FROM {claims} WHERE job_id = ? AND owner = ''"
        params: tuple[Any, ...] = (job_id,)
        if slot is not None:
            select += " AND scheduled >= ? AND scheduled <= ?"
            params += (slot - _SAME_SLOT, slot + _SAME_SLOT)
        select = store._q(select + " ORDER BY scheduled, token{lock}")

        found: list[list[float]] = []  # what the first attempt cancelled

        def body(cur: C) -> list[float]:
            self._lock_job(cur, job_id)
            rows = [tuple(r) for r in cur.execute(select, params).fetchall()]
            if not rows:
                return []
            found.append([r[1] for r in rows])
            tokens = [r[0] for r in rows]
            for i in range(0, len(tokens), _DELETE_CHUNK):
                query, values = store._q_list(
                    "DELETE FROM {claims} WHERE token {any}", tokens[i : i + _DELETE_CHUNK]
                )
                cur.execute(query, values)
            why = f"cancelled by {by} while waiting" + (f": {note}" if note else "")
            self._ledger.write(cur, cancelled_entries(job_id, rows, following, at, why))
            self._act(cur, job_id, "cancel", by, at, note, _cancel_detail(rows))
            store._changed(cur, job_id)  # its schedule may be claimable again
            return found[-1]

        def resolve(cur: C) -> list[float]:
            # The first attempt's commit may have gone through: then nothing waits now.
            result = body(cur)
            return found[0] if not result and found else result

        what = f"cancel the waiting runs of job {job_id!r}"
        return store._run(what, body, resolve=resolve)

    def _taken(self, cur: C, job_id: str, candidates: list[float]) -> list[float]:
        """The slots of ``job_id`` around ``candidates`` that are not queued again, sorted.

        Slots held or waiting now, and slots the ledger records as run (started: ok,
        failed, timeout, abandoned).
        """
        q = self._store._q
        taken = [
            row[0]
            for row in cur.execute(
                q("SELECT scheduled FROM {claims} WHERE job_id = ?"), (job_id,)
            ).fetchall()
        ]
        taken += [
            row[0]
            for row in cur.execute(
                q(
                    "SELECT scheduled FROM {ledger} WHERE job_id = ? AND scheduled >= ?"
                    " AND scheduled <= ? AND started IS NOT NULL"
                ),
                (job_id, candidates[0] - _SAME_SLOT, candidates[-1] + _SAME_SLOT),
            ).fetchall()
        ]
        taken.sort()
        return taken

    def skip_next(
        self,
        job_id: str,
        following: Callable[[float], float | None],
        by: str,
        at: float,
        note: str | None,
    ) -> tuple[float, float | None] | None:
        """Give up the job's next slot (see `SQLStore.skip_next_job`)."""
        job_id = check_job_id(job_id)
        by, at, note = check_actor(by), check_time("at", at), check_note(note)
        if not callable(following):
            raise TypeError(f"following must be callable as following(slot), got {following!r}")
        store = self._store

        def body(cur: C) -> tuple[float, float | None] | None:
            _, next_run, _, _ = self._lock_job(cur, job_id)
            if next_run is None:
                return None
            next_slot = check_optional_time("following() result", following(next_run))
            cur.execute(
                store._q("UPDATE {jobs} SET next_run = ? WHERE id = ?"), (next_slot, job_id)
            )
            why = f"skipped by {by}" + (f": {note}" if note else "")
            self._ledger.write(cur, [manual_skip_entry(job_id, next_run, at, why)])
            detail = f"skipped {iso(next_run)}; next run " + (
                "none" if next_slot is None else iso(next_slot)
            )
            self._act(cur, job_id, "skip-next", by, at, note, detail)
            store._changed(cur, job_id)
            return next_run, next_slot

        return store._run(f"skip the next run of job {job_id!r}", body)

    def actions(self, job_id: str | None, since: float | None, limit: int) -> list[ActionRecord]:
        """Operators' actions, newest first (see `SQLStore.actions`)."""
        if job_id is not None:
            job_id = check_job_id(job_id)
        if since is not None:
            since = check_time("since", since)
        query, params = newest_first(
            self._store._q,
            "SELECT seq, job_id, action, actor, at, note, detail FROM {actions}",
            [("job_id = ?", job_id), ("at >= ?", since)],
            check_limit(limit),
        )

        def body(cur: C) -> list[ActionRecord]:
            return [ActionRecord(*row) for row in cur.execute(query, params).fetchall()]

        return self._store._run("read the actions", body, write=False)


class ControlMixin:
    """`RuntimeControl` for `SQLStore`: each action handed to its ``_control`` part."""

    _control: ControlActions[Any]

    def pause_job(
        self,
        job_id: str,
        *,
        by: str,
        at: float,
        note: str | None = None,
        until: float | None = None,
    ) -> None:
        """Pause a job at run time, with who, when, why and until when (recorded).

        See `tickwork.stores.RuntimeControl.pause_job`. Pausing a paused job replaces
        its note and end.
        """
        self._control.pause(job_id, by, at, note, until)

    def resume_job(self, job_id: str, *, by: str, at: float, note: str | None = None) -> bool:
        """Resume a paused job (recorded); False, and nothing recorded, if it was not paused.

        See `tickwork.stores.RuntimeControl.resume_job`.
        """
        return self._control.resume(job_id, by, at, note)

    def trigger_job(
        self, job_id: str, *, by: str, at: float, note: str | None = None
    ) -> Literal["queued", "skipped"]:
        """Ask for one run of a job now, outside its grid (recorded).

        See `tickwork.stores.RuntimeControl.trigger_job`.
        """
        return self._control.trigger(job_id, by, at, note)

    def backfill_job(
        self,
        job_id: str,
        slots: Sequence[float],
        *,
        by: str,
        at: float,
        note: str | None = None,
        dry_run: bool = False,
    ) -> list[float]:
        """Queue past slots of a job to run, in order (recorded); the slots queued.

        See `tickwork.stores.RuntimeControl.backfill_job`.
        """
        return self._control.backfill(job_id, slots, by, at, note, dry_run)

    def cancel_waiting_runs(
        self,
        job_id: str,
        following: Callable[[float], float | None] | None = None,
        *,
        slot: float | None = None,
        by: str,
        at: float,
        note: str | None = None,
    ) -> list[float]:
        """Cancel the job's waiting runs (recorded); the slots cancelled, oldest first.

        See `tickwork.stores.RuntimeControl.cancel_waiting_runs`.
        """
        return self._control.cancel_waiting(job_id, following, slot, by, at, note)

    def skip_next_job(
        self,
        job_id: str,
        following: Callable[[float], float | None],
        *,
        by: str,
        at: float,
        note: str | None = None,
    ) -> tuple[float, float | None] | None:
        """Give up the job's next slot (recorded); ``(that slot, the next run now)``.

        See `tickwork.stores.RuntimeControl.skip_next_job`.
        """
        return self._control.skip_next(job_id, following, by, at, note)

    def actions(
        self, job_id: str | None = None, *, since: float | None = None, limit: int = 100
    ) -> list[ActionRecord]:
        """Operators' actions, newest first (see `tickwork.stores.RuntimeControl.actions`)."""
        return self._control.actions(job_id, since, limit)
