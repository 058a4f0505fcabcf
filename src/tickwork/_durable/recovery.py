"""Recovery: failed store steps, wall-clock steps, lease renewals, re-offered slots."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from tickwork._core.clocks import WALL_STEP
from tickwork._core.text import iso
from tickwork._durable.decide import CORRECTION, Decision, after_clock_step, decide_retry
from tickwork._durable.engine import _RETRY_MIN, RunTable
from tickwork.stores import Claim, Store, StoreError

_log = logging.getLogger("tickwork.durable")


class Recovery:
    """What keeps held work and the schedule sound when the store or the clock fails.

    Used by the timing thread only (its counters are read by `DurableScheduler.health`).

    Args:
        store: Where the jobs live.
        table: The runs held here (their lease renewals).
        owner: This scheduler's name, for the log.
        lease: Seconds a claim's lease lasts (renewed every third of it).
        poll: The safety poll: the longest back-off after failed store steps.
        mono: The monotonic clock a wall-clock step is measured against.

    """

    def __init__(
        self,
        store: Store,
        table: RunTable,
        *,
        owner: str,
        lease: float,
        poll: float,
        mono: Callable[[], float],
    ) -> None:
        self._store = store
        self._table = table
        self._owner = owner
        self._lease = lease
        self._poll = poll
        self._mono = mono
        self._offset: float | None = None  # wall - monotonic at the last look
        self._seen_mono = 0.0  # the monotonic reading of the last look
        self.vanished: tuple[float, float] | None = None
        """The last big forward step of the wall clock (from, to), for `decide`."""
        self.failures = 0
        """Store steps failed in a row now."""
        self.store_errors = 0
        """Store steps failed since construction."""
        self.last_error: str | None = None
        """The last failed store step's error (``Type: message``)."""

    def store_failed(self, exc: Exception) -> float:
        """Count and log a failed step; return how long to back off (doubling, capped at ``poll``).

        Retrying is safe: a store call that raised changed nothing it did not report
        (a claim that committed unseen stays unstarted, is recovered when its lease
        ends and then runs once), and a run held here goes on and is renewed later.
        """
        self.store_errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self.failures += 1
        delay = min(self._poll, _RETRY_MIN * 2.0 ** min(self.failures - 1, 60))
        if isinstance(exc, StoreError):
            # The store has retried already (PostgresStore: for reconnect_timeout); its
            # message names the operation and never shows a password.
            _log.error(
                "durable scheduler %r: store call failed (attempt %d): %s; retrying in %.2f s",
                self._owner,
                self.failures,
                exc,
                delay,
                exc_info=exc if self.failures == 1 else None,
            )
        else:
            _log.exception(
                "durable scheduler %r: unexpected error in a store step (attempt %d);"
                " retrying in %.2f s",
                self._owner,
                self.failures,
                delay,
            )
        return delay

    def store_works(self) -> None:
        """A step succeeded: end a streak of failures (logged once)."""
        if self.failures:
            _log.warning(
                "durable scheduler %r: the store works again after %d failed attempt(s)",
                self._owner,
                self.failures,
            )
            self.failures = 0

    def clock_step(self, now: float) -> float:
        """How far the wall clock stepped since the last look (0.0: no step).

        Compares the wall clock with the monotonic one; a difference of `WALL_STEP`
        or more is a step. After a step back, next runs computed on the old clock are
        moved earlier (`after_clock_step`, from the last look's time on the stepped
        clock, as the in-memory scheduler does: a slot the stepped clock passed before
        this look is due now) and lease renewals held here are brought forward; a step
        forward of `CORRECTION` or more is remembered as vanished time for `decide`.
        """
        mono = self._mono()
        offset = now - mono
        last, self._offset = self._offset, offset
        seen_mono, self._seen_mono = self._seen_mono, mono
        if last is None:
            return 0.0
        step = offset - last
        if abs(step) < WALL_STEP:
            return 0.0
        _log.warning(
            "durable scheduler %r: the wall clock stepped %s by %.1f s",
            self._owner,
            "back" if step < 0 else "forward",
            abs(step),
        )
        if step >= CORRECTION:
            self.vanished = (now - step, now)
        elif step < 0.0:
            with self._table.lock:
                for run in self._table.runs.values():
                    run.renew_at = min(run.renew_at, now)
            # The last look's time read on the stepped clock: from there the schedule
            # follows real time (a slot after it is due now if it is before ``now``).
            self._rebase(min(now, now - (mono - seen_mono)), step)
        return step

    def _rebase(self, seen: float, step: float) -> None:
        """After a step back: move next runs computed on the old clock earlier."""
        for state in self._store.jobs():  # paused ones too: they must not stall on resume
            try:
                new = after_clock_step(state, seen, step)
            except ValueError:  # a cron zone missing here: its claim records the failure
                continue
            if new is not None:
                _log.info(
                    "job %r: next run moved from %s to %s after the wall clock stepped back",
                    state.id,
                    "-" if state.next_run is None else iso(state.next_run, millis=True),
                    iso(new, millis=True),
                )
                self._store.set_next_run(state.id, new)

    def renew_due(self, now: float) -> None:
        """Renew the leases due for renewal; a lease lost meanwhile is counted and logged."""
        with self._table.lock:
            due = [r for r in self._table.runs.values() if r.renew_at <= now]
        for run in due:
            if self._store.renew(run.claim, now=now, lease_seconds=self._lease):
                run.renew_at = now + self._lease / 3
                continue
            run.renew_at = math.inf
            with self._table.lock:
                if run.ended or run.claim.token not in self._table.runs:
                    # Its end is being written (or was, just now): the finish says
                    # whether the claim was still held.
                    continue
            self._table.lost_claims += 1
            self._lost(run.claim)

    def _lost(self, claim: Claim) -> None:
        """Log a claim found gone while its run goes on here: who holds its slot now."""
        try:
            state = self._store.get(claim.job_id)
        except Exception:  # the log line matters more than the detail
            state = None
        holders = (
            []
            if state is None
            else [c.owner for c in state.claims if c.scheduled == claim.scheduled]
        )
        others = [h for h in holders if h and h != self._owner]
        if others:
            _log.warning(
                "lost the claim on job %r (scheduled %s): its lease expired and %s recovered"
                " it; this run's end will not be recorded",
                claim.job_id,
                iso(claim.scheduled, millis=True),
                others[0],
            )
        else:
            _log.warning(
                "lost the claim on job %r (scheduled %s): its lease expired before this"
                " scheduler renewed it (was this process stalled?) and the store released"
                " it (no other scheduler holds the slot); this run's end will not be"
                " recorded",
                claim.job_id,
                iso(claim.scheduled, millis=True),
            )

    def stalled(self, late: float, meant: float) -> None:
        """The timing loop woke ``late`` seconds after it meant to (it slept ``meant``)."""
        _log.warning(
            "durable scheduler %r: the timing loop woke %.1f s late (it meant to sleep"
            " %.1f s): this process was stalled (stopped with SIGSTOP, a debugger,"
            " swapping, a starved host or a suspend); leases of %.0f s may have run out"
            " meanwhile",
            self._owner,
            late,
            meant,
            self._lease,
        )

    def decide_retry(self, claim: Claim, now: float) -> Decision:
        """A re-offered slot, decided by the missed-run rules as of its new claim.

        The job's state is read after the claim: the retry is this scheduler's now,
        so with ``overlap="skip"`` or ``"queue"`` nothing else moves the job meanwhile;
        with ``"allow"`` a later read only knows more taken slots, never fewer.
        """
        state = self._store.get(claim.job_id)
        if state is None:  # removed meanwhile: finish() will find no claim
            return Decision("missed", None, missed=1)
        return decide_retry(state, claim.scheduled, now)
