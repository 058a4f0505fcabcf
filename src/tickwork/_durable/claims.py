"""Claiming: the timing thread's look at the store, and the dispatch of what it claimed.

Part of `DurableScheduler` (see ``_durable_base``).
"""

from __future__ import annotations

import logging
import math

from tickwork._core.scheduler import EventKind, RunEvent
from tickwork._core.text import iso
from tickwork._durable.decide import Decision, decide
from tickwork._durable.engine import (
    _HELD_MAX,
    _HELD_MIN,
    _Run,
)
from tickwork._durable.runs import _Running
from tickwork.stores._errors import JobSpecError
from tickwork.stores._model import (
    KEEP,
    Claim,
    GivenUp,
    JobState,
    Outcome,
    StartNowFn,
)

_log = logging.getLogger("tickwork.durable")

#: Seconds between two prunings of the slot ledger, at most (only in quiet looks).
_PRUNE_EVERY = 10.0


class _Claiming(_Running):
    """Claiming: the timing thread's look at the store, and the dispatch of what it claimed."""

    def _step_store(self) -> float:
        store, lease = self._store, self._lease
        if self._store_time is not None:
            self._store_time.refresh()
        now = self._wall()
        self._clock_step(now)
        self._renew_due(now)
        with self._lock:
            # Runs whose finish is only waiting for its commit hold no worker.
            busy = len(self._runs) - self._ending
            free = 2 * self._capacity - busy
            can_claim = busy < self._capacity
            idle = self._capacity - busy  # workers with nothing to do: they start at once
        claims: list[Claim] = []
        decisions: dict[str, Decision] = {}
        if can_claim:
            vanished = self._vanished

            def advance(state: JobState, at: float) -> float | None:
                decision = decide(state, at, vanished=vanished)
                decisions[state.id] = decision
                return decision.next_run

            def given_up(state: JobState) -> GivenUp | None:
                return decisions[state.id].given_up

            batch = self._batch
            start_now: StartNowFn | None = None
            if batch is not None:
                folded = 0

                def start_now(state: JobState) -> bool:
                    # Runs that go straight to an idle worker are recorded started by
                    # the claim itself: one commit instead of two before they begin.
                    # Only functions already imported here (and so allowed): a job
                    # that cannot run is recorded as never started.
                    nonlocal folded
                    if (
                        folded >= idle
                        or decisions[state.id].action != "run"
                        or state.spec.func not in self._funcs
                        or getattr(state.spec.schedule, "jitter", 0.0) > 0.0  # waits first
                    ):
                        return False
                    folded += 1
                    return True

            if self._ledger is not None:  # a ledger store takes ``start`` too
                claims = self._ledger.claim_due(
                    now,
                    owner=self._owner,
                    lease_seconds=lease,
                    limit=free,
                    advance=advance,
                    start=start_now,
                    given_up=given_up,
                )
            elif batch is not None:
                claims = batch.claim_due(
                    now,
                    owner=self._owner,
                    lease_seconds=lease,
                    limit=free,
                    advance=advance,
                    start=start_now,
                )
            else:
                claims = store.claim_due(
                    now, owner=self._owner, lease_seconds=lease, limit=free, advance=advance
                )
            self._last_recover = now
        elif now - self._last_recover >= lease / 2:
            store.recover_expired(now)  # claim_due is not called while the pool is full
            self._last_recover = now
        for claim in claims:
            try:
                if claim.origin != "schedule":
                    # Asked for by an operator: it runs (the store let it through the
                    # overlap policy); no missed-run rule applies, the grid is not moved.
                    decision = Decision("run", None)
                elif claim.retry:
                    decision = self._decide_retry(claim, now)
                else:
                    decision = decisions[claim.job_id]
                self._dispatch(claim, decision, now)
            except Exception:  # the others still go; this one is recovered after its lease
                _log.exception(
                    "cannot record the given-up run of job %r (scheduled %s); it is decided"
                    " again when its lease ends",
                    claim.job_id,
                    iso(claim.scheduled, millis=True),
                )
        if claims and len(claims) == free:
            return 0.0  # a full batch: more may be due
        now = self._wall()
        if not claims and self._ledger is not None and now - self._pruned >= _PRUNE_EVERY:
            self._pruned = now  # a quiet look: trim the ledger (bounded work)
            try:
                self._ledger.prune_history(now)
            except Exception:
                _log.exception("cannot prune the slot ledger; trying again later")
        with self._lock:
            renew = min((r.renew_at for r in self._runs.values()), default=math.inf)
            full = len(self._runs) - self._ending >= self._capacity
        # With every worker busy nothing can be claimed: a run ending wakes this thread
        # (`_forget`), so the store need not be asked when something is due.
        wake = None if full else store.next_wakeup()
        timeout = self._poll
        held = False
        if wake is not None and not full:
            if wake > now:
                timeout = min(timeout, wake - now)
            elif claims:
                timeout = 0.0  # progress was made and more is due (a replay, say)
            else:
                # Due, yet nothing was claimed: another node's claim transaction holds
                # the rows (the claim skips locked rows), and once it commits they are
                # no longer due here, or a row cannot be read. Its commit sends no
                # notification, so look again soon, backing off (never a spin).
                held = True
                timeout = min(timeout, _HELD_MAX, _HELD_MIN * 2.0 ** min(self._held, 30))
        self._held = self._held + 1 if held else 0
        return max(0.0, min(timeout, renew - now))

    def _dispatch(self, claim: Claim, decision: Decision, now: float) -> None:
        """Hand a claimed slot to the pool, or record it as given up (timing thread)."""
        job_id = claim.job_id
        if decision.missed:
            _log.info(
                "job %r: %d run(s) missed (policy %r)", job_id, decision.missed, claim.spec.missed
            )
            self._emit(
                RunEvent(
                    EventKind.MISSED,
                    0,
                    claim.scheduled,
                    missed=decision.missed,
                    job_id=job_id,
                    name=job_id,
                )
            )
        if decision.skipped:
            _log.debug(
                "job %r: %d run(s) skipped, the previous run was going", job_id, decision.skipped
            )
            self._emit(
                RunEvent(
                    EventKind.SKIPPED,
                    0,
                    claim.scheduled,
                    missed=decision.skipped,
                    job_id=job_id,
                    name=job_id,
                )
            )
        if decision.action != "run":
            outcome: Outcome = "failed" if decision.action == "failed" else decision.action
            if decision.action == "failed":
                self._failed(job_id, JobSpecError(f"job {job_id!r}: {decision.error}"), None)
            self._store.finish(claim, outcome=outcome, ended=now, error=decision.error)
            return
        run = _Run(claim, decision, claim.claimed_at + self._lease / 3)
        with self._lock:
            self._runs[claim.token] = run
        try:
            self._executor.submit(self._execute, run)
        except RuntimeError as exc:  # the executor was shut down by its owner
            _log.warning("executor refused the run of job %r: %s", job_id, exc)
            if claim.started is None:
                self._release(run)
            else:  # recorded started by its claim: it cannot be handed back
                self._end(run, "failed", None, f"not run: the executor refused it ({exc})", KEEP)
