"""Claiming: the timing thread's look at the store, and the dispatch of what it claimed.

What the store can do is decided once, by `claimer_for`: a `Claimer` that claims the
way that store can (starts folded into the claim, given-up slots written to the slot
ledger, or neither) and does what a quiet look leaves time for (pruning the ledger).
The timing thread's `Claiming.step` then never asks the store what it is again.

The words look, claim, carry, cover, defer, owed, vanished time mean what
docs/architecture.md, "Glossary", says.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

from tickwork._core.events import EventKind, RunEvent
from tickwork._core.text import iso
from tickwork._durable.decide import Decision, decide
from tickwork._durable.engine import _HELD_MAX, _HELD_MIN, RunTable, _Run
from tickwork._durable.events import Events
from tickwork._durable.recovery import Recovery
from tickwork._durable.runs import Running
from tickwork._durable.storetime import StoreTime
from tickwork.stores import Claim, JobSpecError, JobState, Outcome, SlotLedger, Store, StoreError
from tickwork.stores.contract import (
    KEEP,
    AdvanceFn,
    BatchRecorder,
    CarryingClaim,
    ClaimAhead,
    ClaimWakeup,
    Finish,
    GivenUp,
    GiveUpFn,
    LookCover,
    LookNotices,
    StartNowFn,
)

_log = logging.getLogger("tickwork.durable")

#: Seconds between two prunings of the slot ledger, at most (only in quiet looks).
_PRUNE_EVERY = 10.0
#: Another scheduler announced a look that took runs (`LookNotices`): this one gives it
#: this many seconds past its look, or past the next wake-up it found, before looking
#: itself. Several nodes then take turns at a due time instead of all looking at it.
DEFER = 0.025
#: ...but it looks at least this often while it hears others (their claims' liveness,
#: its own upkeep), and counts another scheduler as taking runs this long after its
#: latest announcement.
LOOK_AT_LEAST = 1.0
#: A finish waits for the next look, which records it with its claim, only while that
#: look is due within this many seconds (`Recorder.carry_when`); the look after a
#: finish was carried comes within it too.
CARRY_FOR = 0.05

#: A look claims up to this many runs per worker, less those held, unless the store
#: says otherwise (`ClaimAhead`): one, so every run claimed goes to an idle worker at
#: once and its claim records it started (no start of its own to write, no worker
#: waiting for one). In a backlog each run's end then brings on the look that claims
#: the next (`RunTable.refill`), and that look records the finishes in its own
#: transaction: on SQLite a burst of quick jobs runs 1.47x as fast as two pools deep,
#: where a third of the runs waited for a start transaction (and behind this node's
#: slow jobs, while another node's workers may have been free). With the default pool
#: of 32 this holds on PostgreSQL too (`PostgresStore.claim_ahead` is 0).
PREFETCH = 1

#: While runs come due faster than this (seconds apart), a look that took some comes
#: this long after the last instead of at the next due time: at 100 runs a second a look
#: then takes two, at 500 about ten, for one transaction, and a run starts at most this
#: much later (within the 50 ms a start may be late; 5 ms took one run per look at 100
#: runs a second). A backlog is not held back (a full batch looks again at once).
LOOK_GAP = 0.02

#: What a claim decided for each job it advanced, by job id.
Decisions = dict[str, Decision]
#: Vanished wall time (from, to) after a big forward clock step, or None (see `decide`).
Vanished = tuple[float, float] | None


class Claimer(Protocol):
    """How one store is asked for due runs: chosen once, by `claimer_for`."""

    carries: bool
    """Whether `claim` can record finishes in its transaction (`CarryingClaim`)."""

    def claim(
        self, now: float, limit: int, idle: int, vanished: Vanished, finishes: Sequence[Finish]
    ) -> tuple[list[Claim], Decisions, list[bool]]:
        """Claim up to ``limit`` due runs; ``idle`` workers can start theirs at once.

        ``finishes`` (only where `carries`) are recorded first, in the same transaction.
        Returns the claims, the `Decision` made for each job advanced (by job id), and
        per finish whether it was recorded (`BatchRecorder.record`'s answer).
        """
        ...

    def quiet(self, now: float) -> None:
        """A look claimed nothing: do the store's bounded upkeep, if it has any."""
        ...


def claimer_for(
    store: Store, *, owner: str, lease: float, imported: Mapping[str, object]
) -> Claimer:
    """The `Claimer` for what ``store`` can do, decided here once.

    An isinstance against a runtime protocol costs microseconds, too much for every
    step of the timing loop; and a reader sees the three ways in one place.

    Args:
        store: Where the jobs live.
        owner: This scheduler's name in its claims.
        lease: Seconds a claim's lease lasts.
        imported: The functions imported here, by path (`Functions.imported`, read
            live): only their runs have their start folded into the claim.

    """
    batch = store if isinstance(store, BatchRecorder) else None
    ledger = store if isinstance(store, SlotLedger) else None
    carry = store if batch is not None and isinstance(store, CarryingClaim) else None
    if ledger is not None:  # a ledger store takes ``start`` too
        fold = _starter if batch is not None else _no_starter
        return _LedgerClaimer(ledger, owner, lease, imported, fold, carry)
    if batch is not None:
        return _BatchClaimer(batch, owner, lease, imported, carry)
    return _PlainClaimer(store, owner, lease)


def _claim_ahead(store: Store) -> int:
    """The store's `ClaimAhead.claim_ahead` (0 without it), checked."""
    if not isinstance(store, ClaimAhead):
        return 0
    ahead = store.claim_ahead
    if isinstance(ahead, bool) or not isinstance(ahead, int) or not 0 <= ahead <= 8:
        raise ValueError(
            f"{type(store).__name__}.claim_ahead must be an int from 0 to 8, got {ahead!r}"
        )
    return ahead


def _advancer(decisions: Decisions, vanished: Vanished) -> AdvanceFn:
    """The claim's ``advance``: the run policy (`decide`), each decision kept."""

    def advance(state: JobState, at: float) -> float | None:
        decision = decide(state, at, vanished=vanished)
        decisions[state.id] = decision
        return decision.next_run

    return advance


def _starter(decisions: Decisions, idle: int, imported: Mapping[str, object]) -> StartNowFn:
    """The claim's ``start``: fold the start of up to ``idle`` runs into the claim."""
    folded = 0

    def start_now(state: JobState) -> bool:
        # Runs that go straight to an idle worker are recorded started by the claim
        # itself: one commit instead of two before they begin. Only functions already
        # imported here (and so allowed): a job that cannot run is recorded as never
        # started.
        nonlocal folded
        if (
            folded >= idle
            or decisions[state.id].action != "run"
            or state.spec.func not in imported
            or getattr(state.spec.schedule, "jitter", 0.0) > 0.0  # waits first
        ):
            return False
        folded += 1
        return True

    return start_now


def _no_starter(decisions: Decisions, idle: int, imported: Mapping[str, object]) -> None:
    """No ``start``: the store cannot fold starts into its claims."""
    return None


def _giver_up(decisions: Decisions) -> GiveUpFn:
    """The claim's ``given_up``: the slots each decision gives up, for the ledger."""

    def given_up(state: JobState) -> GivenUp | None:
        return decisions[state.id].given_up

    return given_up


class _PlainClaimer:
    """A store that only claims (`Store.claim_due`): each start is a commit of its own."""

    __slots__ = ("_lease", "_owner", "_store")
    carries = False

    def __init__(self, store: Store, owner: str, lease: float) -> None:
        self._store = store
        self._owner = owner
        self._lease = lease

    def claim(
        self, now: float, limit: int, idle: int, vanished: Vanished, finishes: Sequence[Finish]
    ) -> tuple[list[Claim], Decisions, list[bool]]:
        assert not finishes  # it carries none
        decisions: Decisions = {}
        claims = self._store.claim_due(
            now,
            owner=self._owner,
            lease_seconds=self._lease,
            limit=limit,
            advance=_advancer(decisions, vanished),
        )
        return claims, decisions, []

    def quiet(self, now: float) -> None:
        pass


class _BatchClaimer:
    """A `BatchRecorder`: the starts of runs for idle workers are folded into the claim."""

    __slots__ = ("_batch", "_carry", "_imported", "_lease", "_owner", "carries")

    def __init__(
        self,
        batch: BatchRecorder,
        owner: str,
        lease: float,
        imported: Mapping[str, object],
        carry: CarryingClaim | None,
    ) -> None:
        self._batch = batch
        self._owner = owner
        self._lease = lease
        self._imported = imported
        self._carry = carry
        self.carries = carry is not None

    def claim(
        self, now: float, limit: int, idle: int, vanished: Vanished, finishes: Sequence[Finish]
    ) -> tuple[list[Claim], Decisions, list[bool]]:
        decisions: Decisions = {}
        advance = _advancer(decisions, vanished)
        start = _starter(decisions, idle, self._imported)
        owner, lease = self._owner, self._lease
        if finishes and self._carry is not None:
            ended, claims = self._carry.claim_due_carrying(
                finishes, now, owner=owner, lease_seconds=lease, limit=limit, advance=advance,
                start=start,
            )  # fmt: skip
            return claims, decisions, ended
        claims = self._batch.claim_due(
            now, owner=owner, lease_seconds=lease, limit=limit, advance=advance, start=start
        )
        return claims, decisions, []

    def quiet(self, now: float) -> None:
        pass


class _LedgerClaimer:
    """A `SlotLedger`: given-up slots are written with the claim; quiet looks prune."""

    __slots__ = (
        "_carry", "_fold", "_imported", "_lease", "_ledger", "_owner", "_pruned", "carries"
    )  # fmt: skip

    def __init__(
        self,
        ledger: SlotLedger,
        owner: str,
        lease: float,
        imported: Mapping[str, object],
        fold: Callable[[Decisions, int, Mapping[str, object]], StartNowFn | None],
        carry: CarryingClaim | None,
    ) -> None:
        self._ledger = ledger
        self._owner = owner
        self._lease = lease
        self._imported = imported
        self._fold = fold  # `_starter` when the store is a `BatchRecorder` too
        self._carry = carry
        self.carries = carry is not None
        self._pruned = -math.inf  # wall time of the last pruning

    def claim(
        self, now: float, limit: int, idle: int, vanished: Vanished, finishes: Sequence[Finish]
    ) -> tuple[list[Claim], Decisions, list[bool]]:
        decisions: Decisions = {}
        advance = _advancer(decisions, vanished)
        start = self._fold(decisions, idle, self._imported)
        given_up = _giver_up(decisions)
        owner, lease = self._owner, self._lease
        if finishes and self._carry is not None:
            ended, claims = self._carry.claim_due_carrying(
                finishes, now, owner=owner, lease_seconds=lease, limit=limit, advance=advance,
                start=start, given_up=given_up,
            )  # fmt: skip
            return claims, decisions, ended
        claims = self._ledger.claim_due(
            now, owner=owner, lease_seconds=lease, limit=limit, advance=advance, start=start,
            given_up=given_up,
        )  # fmt: skip
        return claims, decisions, []

    def quiet(self, now: float) -> None:
        if now - self._pruned >= _PRUNE_EVERY:
            self._pruned = now  # a quiet look: trim the ledger (bounded work)
            try:
                self._ledger.prune_history(now)
            except Exception:
                _log.exception("cannot prune the slot ledger; trying again later")


class Claiming:
    """The timing thread's look at the store: renew, claim, dispatch, and when to look again.

    Used by the timing thread only (or by `DurableScheduler.step` in its stead).

    Args:
        store: Where the jobs live.
        table: The runs held here: claims are added, free workers counted.
        recovery: Clock steps, lease renewals and re-offered slots, at each look.
        running: Where a claimed run goes (on the executor), or is handed back.
        events: Where slots given up by policy are reported.
        claimer: How this store is claimed from (`claimer_for`).
        executor: Where runs go.
        owner: This scheduler's name, for the log.
        lease: Seconds a claim's lease lasts.
        poll: The safety poll: the longest wait between two looks.
        wall: The wall clock every stored time comes from.
        store_time: The store's clock, refreshed at each look (``None``: not used).

    """

    def __init__(
        self,
        store: Store,
        table: RunTable,
        recovery: Recovery,
        running: Running,
        events: Events,
        claimer: Claimer,
        *,
        executor: Executor,
        lease: float,
        poll: float,
        wall: Callable[[], float],
        store_time: StoreTime | None,
    ) -> None:
        self._store = store
        self._table = table
        self._recovery = recovery
        self._running = running
        self._execute = running.execute  # bound once, not per dispatched run
        self._events = events
        self._claimer = claimer
        self._executor = executor
        self._lease = lease
        self._poll = poll
        self._wall = wall
        self._refresh: Callable[[], None] = _nothing if store_time is None else store_time.refresh
        self._last_recover = -math.inf  # wall time of the last recovery of expired leases
        # A store that notes the next wake-up in its claim saves a transaction per look.
        self._after_claim = store.wakeup_after_claim if isinstance(store, ClaimWakeup) else None
        self._freed = False  # this look released a claim it took (a slot given up)
        # Finishes may wait for a look that records them with its claim (`_carry.py`).
        # Looks other schedulers announced (`LookNotices`): sleep on while they take runs.
        self._notices = store.look_elsewhere if isinstance(store, LookNotices) else None
        self._heard = 0  # announcements heard when this scheduler last looked
        # One scheduler may promise to look at every due time (`LookCover`).
        self._cover = store if isinstance(store, LookCover) else None
        self._covering = False  # this one's promise held at its last look
        self._looked = -math.inf  # time.monotonic() of its last look
        self._depth = PREFETCH + _claim_ahead(store)  # pools a look claims
        self._recorder = running.recorder if claimer.carries else None
        self.carries = self._recorder is not None
        """Whether finishes may wait for a look, which records them with its claim."""
        self.held = 0
        """Looks in a row that found work due and claimed none."""

    def step(self) -> float:
        """One look at the store: renew, claim, dispatch; return seconds to the next look.

        Finishes carried to this look (`Recorder.carry_when`) are recorded by its claim;
        finishes carried meanwhile bring the next look within `CARRY_FOR` seconds.
        """
        return self.carry_wait(self._look())

    def carry_wait(self, timeout: float) -> float:
        """``timeout``, or `CARRY_FOR` if sooner and finishes wait for the next look."""
        recorder = self._recorder
        if recorder is not None and recorder.carrying:
            return min(timeout, CARRY_FOR)
        return timeout

    def deferred(self, *, heard: bool = False) -> float | None:
        """Seconds to sleep on instead of looking now; None: look now.

        Another scheduler promised to look at every due time (`LookCover`), and the
        promise holds: this one sleeps on while it does. Or another scheduler announced
        a look that took runs after this one's last look (`LookNotices`): while it keeps
        taking them (its latest look within `DEFER` seconds), or the next wake-up it
        found is ahead, this one sleeps on to `DEFER` past either, and looks when the
        other stops. Either way it looks for its own work (a lease to renew, finishes
        waiting or owed) and at least every `LOOK_AT_LEAST` seconds (the others' claims
        are recovered if they die, and a job only this one can run is not left out).
        One whose own promise holds never sleeps on.

        ``heard``: a change another process announced woke this one (an enqueue, a
        trigger). It sleeps on then only while a promise of a scheduler that runs the
        same work holds (``LookCover.covered(alike=True)``): that one heard the change
        too, and looks for it.
        """
        if self._covering:
            return None  # it promised to look at every due time itself
        now = self._wall()
        until = 0.0 if self._cover is None else self._cover.covered(alike=heard)
        if until <= 0.0 and not heard:
            news = None if self._notices is None else self._notices()
            if news is None or news[0] == self._heard:
                return None
            _, age, wake = news
            until = DEFER - age
            if wake is not None:
                until = max(until, wake - now + DEFER)
        since = time.monotonic() - self._looked
        table = self._table
        with table.lock:
            renew = min((r.renew_at for r in table.runs.values()), default=math.inf)
        recorder = self._recorder
        if until <= 0 or (recorder is not None and recorder.carrying) or self._running.owed():
            return None
        left = min(until, renew - now, LOOK_AT_LEAST - since)
        return left if left > 0 else None

    def _others_taking(self) -> bool:
        """Whether another scheduler announced a look that took runs within `LOOK_AT_LEAST`."""
        heard = None if self._notices is None else self._notices()
        return heard is not None and heard[1] < LOOK_AT_LEAST

    def _look(self) -> float:
        if self._notices is not None:
            heard = self._notices()
            self._heard = 0 if heard is None else heard[0]
        self._looked = time.monotonic()
        self._refresh()
        self._freed = False
        now = self._wall()
        recovery = self._recovery
        recovery.clock_step(now)
        recovery.renew_due(now)
        # Finishes the store failed to record, before anything new is claimed (a
        # StoreError here fails the look: the loop backs off and tries again).
        self._running.retry_owed()
        table = self._table
        capacity = table.capacity
        with table.lock:
            # Runs whose finish is only waiting for its commit hold no worker.
            busy = len(table.runs) - table.ending
        free = self._depth * capacity - busy
        claims: list[Claim] = []
        carried = [] if self._recorder is None else self._recorder.take_carried()
        if busy < capacity:
            # Idle workers (with nothing to do) start the runs they are given at once.
            claims, decisions = self._claim(now, free, capacity - busy, carried)
            self._last_recover = now
            for claim in claims:
                self._take(claim, decisions, now)
        else:
            if carried and self._recorder is not None:
                self._recorder.write_now(carried)  # no claim now: written on their own
            if now - self._last_recover >= self._lease / 2:
                self._store.recover_expired(now)  # claim_due is not called while it is full
                self._last_recover = now
        if self._cover is not None:
            # A worker was free at this look: it may promise to look at every due time
            # (with its next announced look); none was: it withdraws a promise now.
            self._covering = self._cover.cover(busy < capacity)
        if claims and len(claims) == free and self._room():
            return 0.0  # a full batch and workers still free: more may be due
        now = self._wall()
        if not claims:
            self._claimer.quiet(now)
        return self._next_look(now, bool(claims))

    def _claim(
        self, now: float, limit: int, idle: int, carried: list[Any]
    ) -> tuple[list[Claim], Decisions]:
        """The claim, recording the ``carried`` finishes (`Recorder` ops) in its transaction."""
        vanished = self._recovery.vanished
        if not carried:
            claims, decisions, _ = self._claimer.claim(now, limit, idle, vanished, ())
            return claims, decisions
        recorder = self._recorder
        assert recorder is not None  # carried ops come from it
        try:
            claims, decisions, ended = self._claimer.claim(
                now, limit, idle, vanished, [op.item for op in carried]
            )
        except StoreError as exc:  # the database failed: the finishes are owed
            recorder.settle(carried, exc)
            raise
        except Exception:  # the claim failed (a bug): the finishes go on their own
            recorder.write_now(carried)
            raise
        recorder.settle(carried, ended)
        return claims, decisions

    def _room(self) -> bool:
        """Whether a worker is free to take a run (else a run's end wakes this thread)."""
        table = self._table
        with table.lock:
            return len(table.runs) - table.ending < table.capacity

    def _take(self, claim: Claim, decisions: Decisions, now: float) -> None:
        """Decide and dispatch one claim; a failure is logged, the others still go."""
        try:
            if claim.origin != "schedule":
                # Asked for by an operator: it runs (the store let it through the
                # overlap policy); no missed-run rule applies, the grid is not moved.
                decision = Decision("run", None)
            elif claim.retry:
                decision = self._recovery.decide_retry(claim, now)
            else:
                decision = decisions[claim.job_id]
            self._dispatch(claim, decision, now)
        except Exception:  # this one is recovered after its lease
            _log.exception(
                "cannot record the given-up run of job %r (scheduled %s); it is decided"
                " again when its lease ends",
                claim.job_id,
                iso(claim.scheduled, millis=True),
            )

    def _next_look(self, now: float, claimed: bool) -> float:
        """Seconds until the next look: a run due, a lease to renew, the poll, or soon."""
        table = self._table
        with table.lock:
            renew = min((r.renew_at for r in table.runs.values()), default=math.inf)
            full = len(table.runs) - table.ending >= table.capacity
        covered = 0.0 if self._cover is None else self._cover.covered()
        if covered > 0.0:
            # Another scheduler promised to look at every due time: the next look is for
            # this one's own work (or when the promise lapses). Not at its next due time:
            # a finish would wait for that look and bring it on, which takes runs again.
            self.held = 0
            return max(0.0, min(self._poll, covered, renew - now))
        # With every worker busy nothing can be claimed: a run ending wakes this thread
        # (`RunTable.forget`), so the store need not be asked when something is due;
        # unless it promised to look at every due time: it looks, to withdraw it.
        due = not full or self._covering
        wake = self._next_wakeup() if due else None
        timeout = self._poll
        held = False
        if wake is not None and due:
            if wake > now:
                # A node that took nothing while another takes runs leaves it the due time.
                later = DEFER if not claimed and self._others_taking() else 0.0
                timeout = min(timeout, wake - now + later)
                if claimed:
                    # Runs due faster than one per LOOK_GAP share a look.
                    timeout = max(timeout, LOOK_GAP - (time.monotonic() - self._looked))
            elif claimed:
                timeout = 0.0  # progress was made and more is due (a replay, say)
            else:
                # Due, yet nothing was claimed: another node's claim transaction holds
                # the rows (the claim skips locked rows), and once it commits they are
                # no longer due here, or a row cannot be read. Its commit sends no
                # notification, so look again soon, backing off (never a spin).
                held = True
                timeout = min(timeout, _HELD_MAX, _HELD_MIN * 2.0 ** min(self.held, 30))
        self.held = self.held + 1 if held else 0
        return max(0.0, min(timeout, renew - now))

    def _next_wakeup(self) -> float | None:
        """The store's next wake-up: as this look's claim found it, else asked for."""
        if self._after_claim is not None:
            known, wake = self._after_claim()
            if known and not self._freed:
                return wake
        return self._store.next_wakeup()

    def _dispatch(self, claim: Claim, decision: Decision, now: float) -> None:
        """Hand a claimed slot to the pool, or record it as given up (timing thread)."""
        job_id = claim.job_id
        if decision.missed or decision.skipped:
            self._report_given_up(claim, decision)
        if decision.action != "run":
            outcome: Outcome = "failed" if decision.action == "failed" else decision.action
            if decision.action == "failed":
                error = JobSpecError(f"job {job_id!r}: {decision.error}")
                self._events.failed(job_id, error, None)
            self._store.finish(claim, outcome=outcome, ended=now, error=decision.error)
            self._freed = True  # after this look's claim: the wake-up it found may be late
            return
        run = _Run(claim, decision, claim.claimed_at + self._lease / 3)
        self._table.hold(run)
        try:
            self._executor.submit(self._execute, run)
        except RuntimeError as exc:  # the executor was shut down by its owner
            _log.warning("executor refused the run of job %r: %s", job_id, exc)
            if claim.started is None:
                self._running.release(run)
            else:  # recorded started by its claim: it cannot be handed back
                self._running.end(
                    run, "failed", None, f"not run: the executor refused it ({exc})", KEEP
                )
        if decision.next_run is not None and claim.token not in self._table.runs:
            # It ended already (an inline executor) and its job runs again: the wake-up
            # this look's claim found could not see that next run (a replay due now, or
            # its next slot). A one-shot has none, so its look asks no second question.
            self._freed = True

    def _report_given_up(self, claim: Claim, decision: Decision) -> None:
        """Log and emit the slots the decision gives up (missed, skipped)."""
        job_id = claim.job_id
        if decision.missed:
            _log.info(
                "job %r: %d run(s) missed (policy %r)", job_id, decision.missed, claim.spec.missed
            )
            self._events.emit(
                RunEvent(
                    EventKind.MISSED,
                    0,
                    claim.scheduled,
                    missed=decision.missed,
                    job_id=job_id,
                    name=job_id,
                    func=claim.spec.func,
                )
            )
        if decision.skipped:
            why = "its run waited for its pool" if decision.pool_wait else "a run was going"
            _log.debug("job %r: %d run(s) skipped, %s", job_id, decision.skipped, why)
            given_up = decision.given_up
            # A run decision runs the claimed slot: the first skipped is the one after it.
            first = given_up.scheduled if decision.action == "run" and given_up else None
            self._events.emit(
                RunEvent(
                    EventKind.SKIPPED,
                    0,
                    claim.scheduled if first is None else first,
                    missed=decision.skipped,
                    pool_wait=decision.pool_wait,
                    job_id=job_id,
                    name=job_id,
                    func=claim.spec.func,
                )
            )


def _nothing() -> None:
    """The store keeps no clock of its own: nothing to refresh."""
