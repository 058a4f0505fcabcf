"""The store contract: what the durable scheduler needs from a database.

Every method is one transaction: it either does everything it says or raises and changes
nothing. The store methods never read a clock (the caller passes ``now``, ``started``,
``ended``; a store may offer its own clock to callers through `StoreClock`) and never
import job functions. ``tests/store_contract.py`` is the executable form of
this contract; every store runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

from ._jobspec import JobSpec
from ._records import (
    ActionRecord,
    AdvanceFn,
    Claim,
    Finish,
    GiveUpFn,
    JobState,
    Keep,
    Recovered,
    SlotRecord,
    Start,
    StartNowFn,
    Upsert,
)
from ._terms import Outcome

__all__ = [
    "AttemptLedger",
    "BatchRecorder",
    "ChangeNotifier",
    "RuntimeControl",
    "SessionLiveness",
    "SlotLedger",
    "Store",
    "StoreClock",
]


@runtime_checkable
class Store(Protocol):
    """A durable, shareable home for jobs: the scheduler's source of truth.

    Times are UTC POSIX seconds (wall clock). Several schedulers (threads, processes,
    or hosts, as the store allows) may share one store: `claim_due` hands each due run
    to exactly one of them under a lease.
    """

    def upsert(self, spec: JobSpec, next_run: float | None) -> Upsert:
        """Declare a job, idempotently by id.

        New id: stored with ``next_run``. Same declaration as stored: nothing changes.
        Changed schedule: the declaration and ``next_run`` are stored. Other changes:
        the declaration is stored and the next run kept. A changed ``paused`` in the
        declaration is applied; an unchanged one leaves a pause made at run time alone.

        Args:
            spec: The declaration.
            next_run: The first due time computed by the caller for this schedule
                (``None``: nothing planned). Used only if the job is new or its
                schedule changed.

        Returns:
            What happened.

        """
        ...

    def remove(self, job_id: str) -> None:
        """Delete a job and any claims on it (their `finish` then returns False).

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def get(self, job_id: str) -> JobState | None:
        """The job's state, or ``None`` if there is no such job."""
        ...

    def jobs(self) -> list[JobState]:
        """Every job, ordered by id."""
        ...

    def set_paused(self, job_id: str, paused: bool) -> None:
        """Pause or resume a job; its next run is kept (the caller may reset it).

        A claim already made is not affected.

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def set_next_run(self, job_id: str, next_run: float | None) -> None:
        """Set a job's next due time (``None``: nothing planned).

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def claim_due(
        self, now: float, *, owner: str, lease_seconds: float, limit: int, advance: AdvanceFn
    ) -> list[Claim]:
        """Take up to ``limit`` due runs, earliest first, and advance their jobs.

        In one transaction: first recover every expired lease (as `recover_expired`);
        then hand out pending retries of jobs that are not paused, oldest slot first,
        as claims with ``retry=True`` (a new token, this owner, a lease until ``now +
        lease_seconds``, the same scheduled time), without calling ``advance`` and
        without touching the job's next run; then, up to ``limit`` claims in all, take
        jobs with ``next_run <= now`` that are not paused and not claimed (unless
        ``overlap="allow"``; a pending retry counts as a claim): for each, record a
        claim (the scheduled time = the old next run) and set the job's next run to
        ``advance(state, now)``. If ``advance`` raises, the transaction rolls back and
        the error propagates.

        Returns:
            The claims: retries first, then due runs in due order. The caller must
            `start` each before running it. A retry is not passed to ``advance``; the
            caller decides it again (it may give it up with `finish`, as ``"missed"``).

        """
        ...

    def start(self, claim: Claim, *, started: float) -> bool:
        """Record that the claimed run starts now: call right before running the job.

        Returns:
            False if the run must not start: the claim is gone (recovered, removed) or
            its lease expired at ``started``, or it was started already. Nothing is
            changed then.

        """
        ...

    def renew(self, claim: Claim, *, now: float, lease_seconds: float) -> bool:
        """Extend the claim's lease to ``now + lease_seconds`` while the run goes on.

        Returns:
            False if the claim is no longer held (nothing is changed then).

        """
        ...

    def finish(
        self,
        claim: Claim,
        *,
        outcome: Outcome,
        ended: float,
        error: str | None = None,
        next_run: float | Keep | None = ...,
    ) -> bool:
        """Record how the claimed run ended and release the claim.

        A claim that never started, finished ``"cancelled"`` (a scheduler stopping
        hands it back), is not released but becomes an unowned retry of its slot, as
        `recover_expired` does with a released claim: `claim_due` re-offers exactly that
        slot, and the job's next run is not set back for it (later slots of an
        ``overlap="allow"`` job may be taken already).

        Args:
            claim: The claim from `claim_due`.
            outcome: How the run went (``"missed"``/``"skipped"`` for a claim given
                up by policy without starting).
            ended: When it ended.
            error: Error text for a failure.
            next_run: A new next run to store with it (a fixed-delay schedule knows
                it only now); `KEEP` (the default) leaves the stored one.

        Returns:
            False if the claim is no longer held (its lease expired and was recovered,
            or the job was removed); nothing is recorded then.

        """
        ...

    def recover_expired(self, now: float) -> list[Recovered]:
        """Release every claim whose lease ended by ``now``, per delivery semantics.

        Not started (``"released"``), or started and ``at_least_once``
        (``"requeued"``, the last run records ``"abandoned"``): the claim becomes an
        unowned retry of the same scheduled time (``owner=""``, a new token, so the old
        owner's `start`, `renew` and `finish` return False), which `claim_due` re-offers
        exactly once. The job's next run is never set back: an ``overlap="allow"`` job
        may have had later slots claimed or run since, and they must not run again.
        Started and ``at_most_once`` (``"abandoned"``): the last run records it and the
        run is not repeated.

        Returns:
            What was recovered.

        """
        ...

    def next_wakeup(self) -> float | None:
        """The earliest time something needs doing: a due time, lease end or retry.

        That is a claimable job's next run, a lease end, or the scheduled time of a
        pending retry of a job that is not paused (in the past: due now). Lease ends
        count, so a schedule held by a dead node is recovered on time even when nothing
        else is due.
        """
        ...

    def close(self) -> None:
        """Release the store's resources; later calls raise `StoreError`. Idempotent."""
        ...


@runtime_checkable
class ChangeNotifier(Protocol):
    """Optional store capability: block until another process changes the jobs.

    A scheduler detects it with ``isinstance(store, ChangeNotifier)`` and, where it is
    missing, sleeps until `Store.next_wakeup` (or its safety poll) instead. A store that
    has it announces every committed change that can make a run due sooner: a new or
    changed job (`Store.upsert` unless unchanged), `Store.set_next_run`,
    `Store.set_paused`, `Store.remove`, a `Store.finish` that stores a next run, and a
    recovery that makes a run due again. Changes made through any store object on the
    same database count, this one's included.

    Use::

        while running:
            ...claim and run what is due...
            wakeup = store.next_wakeup()
            timeout = poll if wakeup is None else min(poll, max(0.0, wakeup - now()))
            store.wait_for_change(timeout)
    """

    def wait_for_change(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change; never raises for a lost connection.

        Returns:
            True when the caller should read the store again: a change was announced,
            `interrupt_wait` was called, or the notifications may have been missed (the
            first call, which starts listening, and the first call after the listening
            connection was lost return True at once). False when the timeout passed with
            nothing announced. Spurious True results are allowed; a missed change is not
            (once a call has returned, every later committed change makes a later call
            return True).

        Raises:
            StoreError: The store is closed.

        """
        ...

    def interrupt_wait(self) -> None:
        """Make the current (or else the next) `wait_for_change` return True promptly.

        Safe to call from any thread, e.g. by a scheduler that is stopping.
        """
        ...


@runtime_checkable
class SessionLiveness(Protocol):
    """Optional store capability: tell whether a claim's owner still has a live session.

    A lease says an owner is gone only once it runs out; a database that ends a dead
    client's sessions (PostgreSQL does, within seconds of the process dying or its
    connection being cut) can tell at once. `DurableScheduler` calls `tag_sessions` with
    its owner when it starts; `tickwork jobs` asks `live_owners` to show a claim whose
    owner's sessions are all gone as lost rather than running. The stores also use the
    same liveness when recovering claims, so a dead owner's runs come back in seconds
    rather than when its lease runs out.

    SQLite has no sessions: `SQLiteStore` records each owner's process (pid, its start
    time, and the host and pid namespace it runs in) and judges only owners of its own
    host and namespace; an owner it cannot judge counts as live, left to its lease.
    """

    def tag_sessions(self, owner: str) -> None:
        """Mark this store's database sessions, now and after reconnects, as ``owner``'s.

        Never raises for an unreachable database: the mark is applied when it connects.
        """
        ...

    def live_owners(self, owners: Iterable[str]) -> set[str]:
        """Those of ``owners`` that some open session of this database is marked with.

        Raises:
            StoreError: The database cannot be reached (nothing can be said then).

        """
        ...


@runtime_checkable
class StoreClock(Protocol):
    """Optional store capability: a clock every process sharing the store agrees on.

    Processes on several hosts judge due times and lease ends; if each used its own
    clock, a node whose clock runs 30 s ahead would run jobs 30 s early and take over
    live leases. A store with a clock of its own (PostgreSQL: the database server's)
    offers it here, and `DurableScheduler` then judges every time by it: it reads the
    store's clock now and then and carries it forward on its monotonic clock.
    """

    def read_clock(self, local: Callable[[], float]) -> tuple[float, float, float]:
        """Read the store's clock, bracketed by two calls of ``local``.

        Returns:
            ``(store_time, local_midpoint, uncertainty)``: the store's UTC POSIX seconds,
            the mean of the two ``local`` readings taken just before and after, and half
            their difference (the most the reading can be off from the midpoint).

        Raises:
            StoreError: The store cannot be reached.

        """
        ...


@runtime_checkable
class BatchRecorder(Protocol):
    """Optional store capability: record many starts and finishes in one transaction.

    Every run costs a start and a finish, each a committed (fsynced) transaction when
    made one at a time. `DurableScheduler` gathers the starts and finishes its workers
    make at about the same moment and hands them to `record` together: one commit for
    all of them, as durable as each would have been alone. A store without it gets the
    single calls.
    """

    def claim_due(
        self,
        now: float,
        *,
        owner: str,
        lease_seconds: float,
        limit: int,
        advance: AdvanceFn,
        start: StartNowFn | None = None,
    ) -> list[Claim]:
        """`Store.claim_due`, and ``start`` folds the start of chosen claims into it.

        ``start(state)`` is called after ``advance`` for each newly claimed job (never
        for a retry); True records that claim as started at ``now`` in the claim's own
        transaction (its `Claim.started` is ``now``), exactly as a `Store.start` right
        after the commit would. A scheduler passes True only for runs it hands to an
        idle worker at once, so one commit covers the claim and the start.
        """
        ...

    def record(
        self, starts: Sequence[Start], finishes: Sequence[Finish]
    ) -> tuple[list[bool], list[bool]]:
        """Apply ``starts``, then ``finishes``, in one transaction.

        Each item has exactly the effect and the result that `Store.start` or
        `Store.finish` with its fields would have at that point of the transaction.

        Returns:
            The results of the starts and of the finishes, in their order.

        Raises:
            TypeError, ValueError: An item is malformed (nothing is recorded).
            StoreError: The transaction failed (nothing is recorded).

        """
        ...


@runtime_checkable
class AttemptLedger(Protocol):
    """Optional store capability: write one attempt of a held claim to the slot ledger.

    For a job's ``retries`` and a thread's time limit: each failed attempt gets its entry
    when it ends, the claim still held; the claim's finish writes the last attempt. A
    store without it writes only that last one.
    """

    def record_attempt(
        self,
        claim: Claim,
        *,
        outcome: str,
        started: float,
        ended: float,
        attempt: int,
        error: str | None = None,
        output: str | None = None,
    ) -> bool:
        """Write attempt ``attempt`` (from 1) of ``claim``; False if it is no longer held."""
        ...


@runtime_checkable
class OutcomeRetention(Protocol):
    """Optional store capability: per job, how many ledger entries of each outcome to keep.

    Like Kubernetes' ``successfulJobsHistoryLimit`` and ``failedJobsHistoryLimit``. The
    limits are this store object's (not stored): whoever writes a job's entries trims
    them, in `SlotLedger.prune_history`'s bounded batches, never on a run's own write.
    The store's overall count (``history_keep``) and age limits still apply. Both
    bundled stores have it.
    """

    def set_job_retention(
        self, job_id: str, *, keep_ok: int | None = None, keep_failed: int | None = None
    ) -> None:
        """Keep at most ``keep_ok`` ``ok`` entries and ``keep_failed`` failed ones.

        Failed means ``failed``, ``timeout`` and ``abandoned``; other outcomes (given-up
        slots) are left to the overall limits. ``None`` lifts a limit; both ``None``
        forget the job.

        Raises:
            ValueError: A limit is not an int >= 0 or None.
        """
        ...


@runtime_checkable
class SlotLedger(Protocol):
    """Optional store capability: the slot ledger, one entry per ended slot.

    A ledger store writes an entry (a `SlotRecord`) in the transaction that records
    how a slot ended: `Store.finish` (and each finish of a `BatchRecorder.record`),
    the recovery of a started claim (``"abandoned"``), and ``claim_due`` for the slots a
    claim gives up beyond its own (``given_up``). No commit is added for it. Both
    bundled stores are ledger stores.
    """

    def claim_due(
        self,
        now: float,
        *,
        owner: str,
        lease_seconds: float,
        limit: int,
        advance: AdvanceFn,
        start: StartNowFn | None = None,
        given_up: GiveUpFn | None = None,
    ) -> list[Claim]:
        """`BatchRecorder.claim_due`, and ``given_up`` names the slots each claim gives up.

        ``given_up(state)`` is called after ``advance`` for each newly claimed job; a
        `GivenUp` it returns is written to the ledger in the claim's transaction.
        """
        ...

    def history(
        self,
        job_id: str | None = None,
        *,
        since: float | None = None,
        outcome: str | None = None,
        before: int | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[SlotRecord]:
        """Ledger entries, newest first; at most ``limit``.

        Filtered by job, due time (``since``), outcome, and ``seq``: ``before`` (older
        than it, for paging back) and ``after`` (newer than it, for paging forward).
        Without ``after`` the ``limit`` keeps the newest entries that pass; with it,
        the oldest (the ones right after ``after``), still returned newest first.
        """
        ...

    def prune_history(self, now: float) -> int:
        """Trim the ledger to the store's retention; the number of entries deleted.

        A bounded amount of work per call.
        """
        ...


@runtime_checkable
class RuntimeControl(Protocol):
    """Optional store capability: operators' control of jobs at run time, recorded.

    Every call is one transaction that carries out the action and records it (an
    `ActionRecord`: who, when, the note) together; the slots it ends go to the slot
    ledger in the same transaction. Both bundled stores have it. Times are UTC POSIX
    seconds; ``by`` names who acts (``user@host``).
    """

    def pause_job(
        self,
        job_id: str,
        *,
        by: str,
        at: float,
        note: str | None = None,
        until: float | None = None,
    ) -> None:
        """Pause the job (a run already claimed goes on); it ends by itself at ``until``.

        The pause and its note survive restarts and re-declarations of the job, until
        `resume_job`, ``until``, or a declaration whose own ``paused`` changes.

        Raises:
            JobNotFoundError: No such job.
            ValueError: ``until`` is not later than ``at``.

        """
        ...

    def resume_job(self, job_id: str, *, by: str, at: float, note: str | None = None) -> bool:
        """Resume the job; False (nothing recorded) if it was not paused.

        The slots that came due while it was paused are decided by its missed-run
        policy when it is next claimed.

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def trigger_job(
        self, job_id: str, *, by: str, at: float, note: str | None = None
    ) -> Literal["queued", "skipped"]:
        """Ask for one run now (``scheduled`` = ``at``, origin ``"manual"``), off the grid.

        The job's next run is not moved, and a paused job stays paused (the triggered
        run is the one that starts: a way to test a fix while the schedule is held).
        Under ``overlap="skip"``, while a run of the
        job is going or waiting, the trigger is given up: a ``"skipped"`` ledger entry,
        and ``"skipped"`` returned. Otherwise the run waits for a scheduler to take it
        (``"queued"``); with ``"queue"`` it starts after the runs ahead of it.

        Raises:
            JobNotFoundError: No such job.

        """
        ...

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
        """Queue the given slots to run (origin ``"backfill"``); the slots queued, in order.

        Only slots before both ``at`` and the job's next run are queued (the later ones
        belong to the grid), none before the job's first slot (`JobState.first_slot`:
        the job did not exist then), and none that is held or waiting, or that the
        slot ledger records as run (started), so no slot runs twice. Slots given up
        (missed, skipped, cancelled) are queued: filling them is what a backfill is
        for. Unless the job allows overlap, they run one after another, oldest first.
        With ``dry_run`` the slots it would queue are returned, and nothing is changed
        or recorded.

        Raises:
            JobNotFoundError: No such job.
            JobPausedError: The job is paused.

        """
        ...

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
        """Cancel runs of the job that wait to be taken; the slots cancelled, oldest first.

        A waiting run is a claim with no owner (`JobState.claims`): a backfilled or
        triggered run, or a recovered slot re-offered, not yet taken by a scheduler. A
        run already taken goes on. With ``slot``, only the waiting run due then
        (within a millisecond). Each cancelled slot gets a ``"cancelled"`` ledger entry
        with its origin; runs of one origin that follow each other on the schedule
        (``following(slot)`` gives the next slot, as for `skip_next_job`) share one
        entry. Nothing is recorded when nothing waits (returns ``[]``).

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def skip_next_job(
        self,
        job_id: str,
        following: Callable[[float], float | None],
        *,
        by: str,
        at: float,
        note: str | None = None,
    ) -> tuple[float, float | None] | None:
        """Give up the job's next slot: ``(that slot, the new next run)``, or None if none.

        ``following(slot)`` gives the slot after it (``None``: the schedule ends); it is
        called inside the transaction, with the job's row locked. The slot gets a
        ``"skipped"`` ledger entry with origin ``"manual"``.

        Raises:
            JobNotFoundError: No such job.

        """
        ...

    def actions(
        self, job_id: str | None = None, *, since: float | None = None, limit: int = 100
    ) -> list[ActionRecord]:
        """Recorded actions, newest first: of one job or all, since a time, at most ``limit``."""
        ...
