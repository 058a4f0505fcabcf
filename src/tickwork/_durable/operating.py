"""The operators' verbs of durable jobs: `Operating`, a part of `DurableScheduler`.

Pause, resume, trigger, backfill, cancel the waiting runs, skip the next slot, and the
actions recorded. The store carries each out and records it with who acted, in one
transaction (`tickwork.stores.RuntimeControl`); the slots are computed by
``tickwork._durable.control``, as for the ``tickwork`` commands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Literal, Protocol

from tickwork._durable.control import default_actor, following_slot, run_backfill
from tickwork._durable.oneoffs import instant
from tickwork.stores import ActionRecord, JobNotFoundError, JobState, RuntimeControl, Store
from tickwork.stores.contract import check_job_id

__all__ = ["Operating"]

_log = logging.getLogger("tickwork.durable")


def _actor(by: str | None) -> str:
    """Who acts: ``by`` as given (checked by the store), else ``user@host``."""
    return default_actor() if by is None else by


class _Host(Protocol):
    """What `Operating` uses of its `DurableScheduler`."""

    @property
    def _store(self) -> Store: ...
    @property
    def _control(self) -> RuntimeControl | None: ...
    @property
    def _wall(self) -> Callable[[], float]: ...
    def _poke(self) -> None: ...
    def _state_of(self, job_id: str) -> JobState: ...
    def _require_control(self, verb: str) -> RuntimeControl: ...


class Operating:
    """`DurableScheduler`'s operators' verbs (see the module's docstring)."""

    def pause(
        self: _Host,
        job_id: str,
        *,
        note: str | None = None,
        until: float | datetime | None = None,
        by: str | None = None,
    ) -> None:
        """Stop starting runs of a job until `resume` (a run already claimed goes on).

        The pause is recorded with who took it (``by``, default ``user@host``), when,
        and the ``note``; with ``until`` it ends by itself then. It survives restarts
        and re-declarations, until resumed or until a declaration's own ``paused``
        changes (see docs/daemon.md, "Who wins"). Pausing a paused job replaces its
        note and end.

        Raises:
            JobNotFoundError: No such job.
            ValueError: ``until`` is not in the future, or a naive datetime.

        """
        job_id = check_job_id(job_id)
        end = None if until is None else instant("until", until)
        control = self._control
        if control is None:
            if note is not None or end is not None or by is not None:
                raise TypeError(f"the store {self._store!r} keeps no notes (no RuntimeControl)")
            self._store.set_paused(job_id, True)
            return
        control.pause_job(job_id, by=_actor(by), at=self._wall(), note=note, until=end)
        self._poke()

    def resume(self: _Host, job_id: str, *, by: str | None = None, note: str | None = None) -> bool:
        """Resume a paused job; False if it was not paused (nothing is recorded then).

        The slots that came due while it was paused are decided by the job's ``missed``
        policy: skipped, one run now, or replayed.

        Raises:
            JobNotFoundError: No such job.

        """
        job_id = check_job_id(job_id)
        control = self._control
        if control is None:
            state = self._store.get(job_id)
            if state is None:
                raise JobNotFoundError(f"no job with id {job_id!r}")
            self._store.set_paused(job_id, False)
            self._poke()
            return state.paused
        resumed = control.resume_job(job_id, by=_actor(by), at=self._wall(), note=note)
        self._poke()
        return resumed

    def trigger(
        self: _Host, job_id: str, *, by: str | None = None, note: str | None = None
    ) -> Literal["queued", "skipped"]:
        """Run a job once now, outside its schedule, under its overlap policy.

        The run is queued in the store (any scheduler on it may take it; the ledger
        records its origin ``manual``); the job's next run does not move. With
        ``overlap="skip"``, a trigger while a run of the job is going or waiting is
        given up and recorded ``skipped`` (returns ``"skipped"``); with ``"queue"`` it
        runs after the runs ahead of it; with ``"allow"`` alongside them. A paused job
        runs the triggered run and stays paused (as `ThreadScheduler.trigger` does).

        Raises:
            JobNotFoundError: No such job.

        """
        control = self._require_control("trigger")
        done = control.trigger_job(check_job_id(job_id), by=_actor(by), at=self._wall(), note=note)
        self._poke()
        return done

    def backfill(
        self: _Host,
        job_id: str,
        start: float | datetime,
        end: float | datetime,
        *,
        force: bool = False,
        dry_run: bool = False,
        by: str | None = None,
        note: str | None = None,
    ) -> list[float]:
        """Run the job's slots between ``start`` and ``end`` (inclusive), oldest first.

        Only slots before now and before the job's next run are queued (the later ones
        are the schedule's own), none before the job's first slot (`JobState.first_slot`:
        the job did not exist then; the window is clipped there, and the clip logged),
        and none held, waiting, or recorded as run in the slot ledger: no slot runs
        twice. Given-up slots (missed, skipped, cancelled) are filled. Unless the job
        allows overlap they run one after another. The ledger records their origin
        ``backfill``. Returns the slots queued (UTC POSIX seconds); `cancel_waiting`
        takes them back while they wait.

        Args:
            job_id: The job.
            start: The window's start (an aware datetime or POSIX seconds).
            end: Its end.
            force: Allow more than `tickwork._durable.control.BACKFILL_CAP` (1,000) slots, up
                to 100,000.
            dry_run: Return the slots it would queue, and change and record nothing.
            by: Who acts (default ``user@host``).
            note: Why, recorded with the action.

        Raises:
            JobNotFoundError: No such job.
            JobPausedError: The job is paused.
            BackfillError: The window is reversed, too long, or the job has no grid
                (fixed-delay, `Once`).

        """
        control = self._require_control("backfill")
        job_id = check_job_id(job_id)
        window, queued = run_backfill(
            control,
            self._state_of(job_id),
            instant("start", start),
            instant("end", end),
            force=force,
            dry_run=dry_run,
            by=_actor(by),
            at=self._wall(),
            note=note,
        )
        if window.early:
            _log.info("backfill of job %r left out %s", job_id, window.early_text())
        if not dry_run:
            self._poke()
        return queued

    def cancel_waiting(
        self: _Host,
        job_id: str,
        *,
        slot: float | datetime | None = None,
        by: str | None = None,
        note: str | None = None,
    ) -> list[float]:
        """Cancel the job's runs that wait to be taken; the slots cancelled, oldest first.

        Waiting runs (`JobState.waiting`) are backfilled and triggered runs, and
        recovered slots re-offered, that no scheduler has taken yet; a run taken goes
        on. With ``slot``, only the one due then. Each is recorded ``cancelled`` in the
        slot ledger, and the action with who took it; nothing is recorded when nothing
        waits (returns ``[]``).

        Raises:
            JobNotFoundError: No such job.

        """
        control = self._require_control("cancel_waiting")
        job_id = check_job_id(job_id)
        at = None if slot is None else instant("slot", slot)
        done = control.cancel_waiting_runs(
            job_id,
            following_slot(self._state_of(job_id)),
            slot=at,
            by=_actor(by),
            at=self._wall(),
            note=note,
        )
        self._poke()
        return done

    def _state_of(self: _Host, job_id: str) -> JobState:
        state = self._store.get(job_id)
        if state is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        return state

    def skip_next(
        self: _Host, job_id: str, *, by: str | None = None, note: str | None = None
    ) -> tuple[float, float | None] | None:
        """Give up the job's next slot: ``(that slot, the new next run)``; None if none.

        The slot is recorded ``skipped`` (origin ``manual``) in the ledger. A slot
        already claimed is not the next one: its run goes on.

        Raises:
            JobNotFoundError: No such job.

        """
        control = self._require_control("skip_next")
        job_id = check_job_id(job_id)
        done = control.skip_next_job(
            job_id,
            following_slot(self._state_of(job_id)),
            by=_actor(by),
            at=self._wall(),
            note=note,
        )
        self._poke()
        return done

    def actions(
        self: _Host, job_id: str | None = None, *, since: float | None = None, limit: int = 100
    ) -> list[ActionRecord]:
        """Operators' recorded actions, newest first (pause, resume, trigger, ..., cancel).

        Raises:
            TypeError: The store keeps no actions.

        """
        return self._require_control("actions").actions(job_id, since=since, limit=limit)

    def _require_control(self: _Host, verb: str) -> RuntimeControl:
        if self._control is None:
            raise TypeError(f"the store {self._store!r} has no runtime control (no {verb}())")
        return self._control
