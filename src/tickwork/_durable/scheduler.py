"""`DurableScheduler`: durable jobs kept in a `Store`, run on a worker pool.

The store is the source of truth. One timing thread sleeps on a `threading.Condition`
until the earliest of: the store's next wake-up (a due run or a lease end), the next
lease renewal of a run it holds, and a safety poll (another process may change the
store). A store that is a `ChangeNotifier` (PostgreSQL) also gets a listener thread that
wakes the timing thread when another process changes the jobs; the safety poll is then
slower. A failing store call is logged and retried with backoff. The timing thread
claims due runs with `Store.claim_due`, whose ``advance`` is the pure policy of
``tickwork._durable.decide`` (missed runs, overlap, next run), hands the runs to the pool and
sleeps again. A worker records each run with `Store.start` right before
calling the job and `Store.finish` after it. See ``docs/durability.md``.

This module holds the public API (its declarations, one-offs and operators' verbs are
the faces `Declaring`, `Enqueuing` and `Operating`, one module each), the life cycle and
the timing loop. The engine's other parts are objects the scheduler builds and holds,
one module each: claiming (``claims``), running (``runs``), recovery (``recovery``) and
events (``events``), sharing one `RunTable` (``engine``, which maps them).

Locking: the run table's lock guards the runs in flight and their counts; the events'
own lock guards listeners and errors. Neither is held while a job, a listener or the
``on_error`` hook runs, nor during store calls, so all of them may call back into the
scheduler from any thread.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from types import TracebackType

from tickwork._core.args import seconds
from tickwork._core.clocks import watch_clock
from tickwork._core.events import Listener
from tickwork._core.scheduler import DEFAULT_MAX_ERRORS
from tickwork._core.schedules import ScheduleDecorators
from tickwork._core.text import iso
from tickwork._durable.claims import Claiming, claimer_for
from tickwork._durable.declaring import Declaring
from tickwork._durable.engine import (
    _RETRY_MIN,
    OUTPUT_LIMIT,
    RunTable,
    _current,
    _ends,
    _outputs,
)
from tickwork._durable.engine import DEFAULT_NOTIFIED_POLL as DEFAULT_NOTIFIED_POLL
from tickwork._durable.engine import DEFAULT_POLL as DEFAULT_POLL
from tickwork._durable.engine import DEFAULT_WORKERS as DEFAULT_WORKERS
from tickwork._durable.engine import DurableErrorHook as DurableErrorHook
from tickwork._durable.engine import current_async_claim as current_async_claim
from tickwork._durable.events import Events
from tickwork._durable.oneoffs import Combiner, Enqueuing
from tickwork._durable.operating import Operating
from tickwork._durable.pools import Pools
from tickwork._durable.recorder import Recorder
from tickwork._durable.recovery import Recovery
from tickwork._durable.runs import Awaiter, Functions, Running
from tickwork._durable.storetime import StoreTime
from tickwork._durable.timing import TimingLoop
from tickwork.stores import (
    Claim,
    JobNotFoundError,
    JobState,
    RuntimeControl,
    Schedule,
    SlotLedger,
    SlotRecord,
    Store,
)
from tickwork.stores.contract import (
    BatchRecorder,
    ChangeNotifier,
    SessionLiveness,
    StoreClock,
    check_job_id,
)

__all__ = ["DurableScheduler"]

_log = logging.getLogger("tickwork.durable")


def _real_time() -> float:
    """Seconds of real time, suspends included where the system can tell (Linux)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _owner_name(owner: object) -> str:
    """``owner`` checked, or a new scheduler's own name: ``host:pid:random``."""
    if owner is None:
        return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"owner must be a non-empty string or None, got {owner!r}")
    return owner


def _clocks(
    store: Store,
    owner: str,
    wall_clock: Callable[[], float] | None,
    monotonic_clock: Callable[[], float] | None,
) -> tuple[Callable[[], float], Callable[[], float], StoreTime | None]:
    """The wall clock a scheduler judges by, its monotonic clock, and its store clock.

    The wall clock given, else the store's (`StoreTime`, also returned) when the store
    has one, else `time.time`; the monotonic clock given, else real time (suspends
    included where the system tells).

    Raises:
        TypeError: A clock given is not callable.
    """
    if wall_clock is not None and not callable(wall_clock):
        raise TypeError(f"wall_clock must be callable or None, got {wall_clock!r}")
    if monotonic_clock is None:
        monotonic_clock = _real_time if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic
    elif not callable(monotonic_clock):
        raise TypeError(f"monotonic_clock must be callable or None, got {monotonic_clock!r}")
    if wall_clock is not None:
        return wall_clock, monotonic_clock, None
    if isinstance(store, StoreClock):
        store_time = StoreTime(store, monotonic_clock, owner=owner)
        return store_time, monotonic_clock, store_time
    return time.time, monotonic_clock, None


def _positive(name: str, value: object) -> float:
    return seconds(name, value, bound="> 0")


def _check_count(name: str, value: object, minimum: int) -> None:
    """``value`` is None or an int >= ``minimum`` (a bool is not a count)."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < minimum
    ):
        raise ValueError(f"{name} must be an int >= {minimum} or None, got {value!r}")


def _prefixes(allowed_modules: Iterable[str] | None) -> tuple[str, ...]:
    """The checked module prefixes of ``allowed_modules`` (none: ``()``)."""
    if allowed_modules is None:
        return ()
    if isinstance(allowed_modules, str):
        raise TypeError(
            f"allowed_modules must be a list of module prefixes, got {allowed_modules!r}"
        )
    prefixes = tuple(allowed_modules)
    for p in prefixes:
        if not isinstance(p, str) or not p or p != p.strip() or ":" in p:
            raise ValueError(
                f"allowed_modules entries must be module names like 'myapp.jobs' or '*', got {p!r}"
            )
    return prefixes


def _pool(executor: Executor | None, max_workers: int | None) -> tuple[Executor, int]:
    """Where runs go, and how many may be there at once (the workers)."""
    if executor is None:
        size = max_workers or DEFAULT_WORKERS
        return ThreadPoolExecutor(size, thread_name_prefix="tickwork-durable"), size
    if max_workers:
        return executor, max_workers
    # A standard thread pool tells its size: a look then claims no run that would wait in
    # the executor's queue with its start already recorded.
    told = getattr(executor, "_max_workers", None)
    if isinstance(told, int) and not isinstance(told, bool) and told >= 1:
        return executor, told
    return executor, DEFAULT_WORKERS


def _settle(
    running: Running,
    recovery: Recovery,
    table: RunTable,
    wall: Callable[[], float],
    poll: float,
    give_up: float,
) -> list[Claim]:
    """Write the run ends owed, retrying until ``give_up`` (monotonic); those left unwritten.

    For `DurableScheduler.stop`, once the timing thread is gone: leases are renewed as it
    would, so that no lease runs out while an end is owed.
    """
    delay = _RETRY_MIN
    while True:
        try:
            recovery.renew_due(wall())
            running.retry_owed()
        except Exception as exc:
            _log.debug("writing the ends owed failed: %s", exc)
        with table.lock:
            pending = [r.claim for r in table.runs.values() if r.ended]
            left = give_up - time.monotonic()
            if not pending or left <= 0:
                return pending
            # A batch being committed ends in `forget`, which notifies `idle`.
            table.idle.wait(min(delay, left))
        delay = min(poll, delay * 2.0)


def _report_unwritten(owner: str, claims: list[Claim]) -> None:
    """Say loudly which run ends could not be written before stopping."""
    for claim in claims:
        _log.error(
            "durable scheduler %r: stopping without having recorded the end of job %r"
            " (scheduled %s): the store still fails; its claim stays until its lease"
            " expires, then the slot is recovered by the job's delivery rule"
            " (at_most_once: recorded abandoned; at_least_once: run again)",
            owner,
            claim.job_id,
            iso(claim.scheduled, millis=True),
        )


@dataclass(frozen=True, slots=True)
class Health:
    """What `DurableScheduler.health` reports."""

    ok: bool
    """Whether the scheduler is doing its work (``reason`` is None)."""
    reason: str | None
    """Why not: not started, stopping, the timing thread died, the store is failing,
    or the loop has stalled."""
    store_failures: int
    """Store steps failed in a row now (0 while the store works)."""
    store_errors: int
    """Store steps failed since the scheduler was built."""
    lost_claims: int
    """Runs whose claim this scheduler lost (its lease ran out and another scheduler
    recovered the slot) since it was built."""
    last_look_age: float | None
    """Seconds since the timing loop last looked at the store (``None``: never)."""
    store_waiting: float | None = None
    """Seconds the look in progress has waited for the store (``None``: not looking)."""


class DurableScheduler(Declaring, ScheduleDecorators, Enqueuing, Operating):
    """Durable jobs: declared by id, kept in a `Store`, run by a thread on a pool.

    Jobs are `JobSpec` values naming their function by import path with JSON
    arguments; they survive the process in the store. Declare them at start-up (an
    upsert by id: restarting with the same declarations changes nothing), then
    `start`::

        store = SQLiteStore("jobs.db")
        with DurableScheduler(store) as s:
            s.declare(JobSpec("report", "myapp.jobs:report", Cron("0 3 * * *")))
            ...

    Every method is safe to call from any thread, including from inside a job. Adding,
    removing, pausing, resuming and rescheduling go through the store, so several
    schedulers sharing one store see them (at once when the store is a
    `ChangeNotifier`, such as PostgreSQL; otherwise within ``poll`` seconds).

    Only functions this process allows are ever imported: the functions of the jobs
    it declared or added itself, plus the modules named in ``allowed_modules``. A job
    naming anything else (written into the database by someone else) fails with a
    clear error and its function is never imported.

    Args:
        store: Where the jobs live; the scheduler does not close it.
        owner: This scheduler's name in claims (default ``host:pid:random``); unique
            per running scheduler.
        lease: Seconds a claimed run stays reserved for this scheduler; renewed every
            third of it while the run goes on. A crashed scheduler's runs are
            recovered after at most this long.
        poll: The safety poll: the longest the timing thread sleeps without looking
            at the store. Default ``DEFAULT_POLL`` (1 s), or ``DEFAULT_NOTIFIED_POLL``
            (10 s) when the store is a `ChangeNotifier`: then a listener thread wakes
            the scheduler as soon as another process changes the jobs, and the poll
            only bounds how late a missed wake-up or a wall-clock step is noticed.
            Also the longest wait between retries of a failing store call.
        executor: Where runs go (any `concurrent.futures.Executor`); not shut down by
            the scheduler. Default: its own `ThreadPoolExecutor`, shut down by `stop`.
        max_workers: Size of the default pool; with an ``executor``, how many runs may
            be in it at once. Default ``DEFAULT_WORKERS`` (32), whatever the number of
            cores: durable runs mostly wait, and the threads start only as runs need
            them. With an ``executor`` that tells its size (a `ThreadPoolExecutor`),
            that size; else 32. A look claims as many due runs as there are idle
            workers (and, for a store that asks, `tickwork.stores.contract.ClaimAhead`
            pools more).
        wall_clock: Zero-argument callable returning UTC POSIX seconds; every time
            stored or compared with the store comes from it. Default: the store's
            clock when it has one (`tickwork.stores.StoreClock`; PostgreSQL: the
            database server's), so that nodes whose clocks disagree still agree on
            due times and leases (see `clock_skew`); else `time.time`. A callable
            given here is used as it is, store clock or not (tests pass a fake).
        monotonic_clock: Zero-argument callable returning seconds of real time that
            never step (default: ``CLOCK_BOOTTIME`` where it exists, which counts a
            suspend as time passed, else `time.monotonic`). Comparing the two clocks is
            how a wall-clock step is told from real time passing: after a step back,
            next runs computed on the old clock are moved earlier (a job never stalls
            for the step's length); after a step forward, slots of the vanished time
            are decided by the ``missed`` policy (see ``docs/durability.md``).
        max_errors: How many entries `errors` keeps (the newest); ``None``: no bound.
        on_error: Called as ``on_error(job_id, exc)`` after each failed run, on the
            worker thread, without any scheduler lock held.
        allowed_modules: Module prefixes whose functions may run although this
            process did not declare them (``"myapp.jobs"`` allows ``myapp.jobs`` and
            ``myapp.jobs.*``); ``"*"`` allows every module (unsafe if others can write
            the database).
        pools: Concurrency pools: ``{"db-heavy": 2}`` lets at most 2 runs of the jobs
            whose ``pool`` is ``"db-heavy"`` go at once, over every node sharing the
            store (not the same as ``max_workers``, this process's threads). Written to
            the store, where the last declaration wins; see ``docs/durability.md``.
        max_running: At most this many runs of all the store's jobs at once, likewise.
        health_after: Seconds without an answer from the store after which `health`
            says so: a look that has waited this long, or no look for ``poll`` plus this.

    Raises:
        TypeError: An argument of the wrong kind (``store`` not a `Store`, ...).
        ValueError: A bad value; the message names the argument and shows it.

    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        lease: float = 30.0,
        poll: float | None = None,
        executor: Executor | None = None,
        max_workers: int | None = None,
        wall_clock: Callable[[], float] | None = None,
        monotonic_clock: Callable[[], float] | None = None,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: DurableErrorHook | None = None,
        allowed_modules: Iterable[str] | None = None,
        pools: Mapping[str, int] | None = None,
        max_running: int | None = None,
        health_after: float = 5.0,
    ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"store must implement tickwork.stores.Store, got {store!r}")
        owner = _owner_name(owner)
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor or None, got {executor!r}"
            )
        _check_count("max_workers", max_workers, 1)
        clocks = _clocks(store, owner, wall_clock, monotonic_clock)
        self._wall, self._mono, self._store_time = clocks
        _check_count("max_errors", max_errors, 0)
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable or None, got {on_error!r}")
        prefixes = _prefixes(allowed_modules)
        self._store = store
        self._pools = Pools(store, pools, max_running)  # declared to the store now
        self._owner = owner
        self._lease = _positive("lease", lease)
        # What the store can do is checked once, here: an isinstance against a runtime
        # protocol costs microseconds, too much for every step of the timing loop.
        self._ledger = store if isinstance(store, SlotLedger) else None
        self._notifier = store if isinstance(store, ChangeNotifier) else None
        self._control = store if isinstance(store, RuntimeControl) else None
        if poll is None:
            poll = DEFAULT_POLL if self._notifier is None else DEFAULT_NOTIFIED_POLL
        self._poll = _positive("poll", poll)
        self._health_after = _positive("health_after", health_after)
        self._own_executor = executor is None
        self._executor, capacity = _pool(executor, max_workers)
        self._build(capacity, max_errors, on_error, prefixes)
        self._thread: threading.Thread | None = None
        self._listener: threading.Thread | None = None
        self._looked: float | None = None  # monotonic time the last look ended
        self._asking: float | None = None  # monotonic time the look in progress began
        # A test's FakeClock wakes the timing thread when it is moved (tickwork.testing).
        watch_clock(self._wall, self._poke)
        watch_clock(self._mono, self._poke)

    def _build(
        self,
        capacity: int,
        max_errors: int | None,
        on_error: DurableErrorHook | None,
        prefixes: tuple[str, ...],
    ) -> None:
        """Build the engine's parts and wire them together (see ``engine``)."""
        store, owner, lease, wall = self._store, self._owner, self._lease, self._wall
        self._table = RunTable(capacity)
        self._halt = threading.Event()  # set by stop(): cuts the listener's back-off
        self._events = Events(max_errors, on_error)
        self._functions = Functions(prefixes, store)  # and its claims' one-offs
        self._enqueues = Combiner()  # the enqueues of concurrent callers, committed together
        self._recovery = Recovery(
            store, self._table, owner=owner, lease=lease, poll=self._poll, mono=self._mono
        )
        # Starts and finishes of concurrent workers share transactions where the store
        # can batch them (both shipped stores can).
        batch = store if isinstance(store, BatchRecorder) else None
        self._running = Running(
            store,
            self._table,
            self._events,
            self._functions,
            wall=wall,
            recorder=None if batch is None else Recorder(batch),
            halt=self._halt,
            retry_max=self._poll,
        )
        self._claiming = Claiming(
            store,
            self._table,
            self._recovery,
            self._running,
            self._events,
            claimer_for(store, owner=owner, lease=lease, imported=self._functions.imported),
            executor=self._executor,
            lease=lease,
            poll=self._poll,
            wall=wall,
            store_time=self._store_time,
        )
        self._timing = TimingLoop(
            self._table,
            self._recovery,
            self._claiming,
            step=self._step,
            mono=self._mono,
        )

    def __repr__(self) -> str:
        return f"DurableScheduler({self._store!r}, owner={self._owner!r})"

    # -- jobs ----------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store the jobs live in."""
        return self._store

    @property
    def owner(self) -> str:
        """This scheduler's name in the claims it makes."""
        return self._owner

    @property
    def health_after(self) -> float:
        """Seconds a look may wait on the store before `health` reports it (the argument)."""
        return self._health_after

    def now(self) -> float:
        """The wall time this scheduler judges by, in UTC POSIX seconds.

        The store's clock when the scheduler uses it (see ``wall_clock``), else its
        wall clock. Reading the store's clock for the first time may raise
        `tickwork.stores.StoreError`.
        """
        return self._wall()

    @property
    def clock_skew(self) -> float | None:
        """This node's wall clock minus the store's clock, in seconds, at the last read.

        ``None`` when the scheduler does not use a store clock, or has not read it
        yet. It is read when the scheduler first needs the time and every 30 s after;
        a skew of 1 s or more is logged as a warning (and again when it moves by half
        a second), a smaller one at INFO level.
        """
        return None if self._store_time is None else self._store_time.skew

    def remove(self, job_id: str) -> None:
        """Delete a job. A run of it already going completes but is not recorded.

        Raises:
            JobNotFoundError: No such job.

        """
        self._store.remove(check_job_id(job_id))

    def reschedule(self, job_id: str, schedule: Schedule) -> None:
        """Give a job a new schedule; its next run is computed afresh from now.

        A later `declare` with the program's original declaration sets it back (the
        declaration at start-up wins).

        Raises:
            JobNotFoundError: No such job.
            JobSpecError: ``schedule`` is not a schedule value, or an invalid cron
                expression or zone (nothing is changed).

        """
        state = self._store.get(check_job_id(job_id))
        if state is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        spec, first = self._prepare(replace(state.spec, schedule=schedule))
        self._store.upsert(spec, first)
        self._poke()

    def get(self, job_id: str) -> JobState | None:
        """The job's stored state (next run, last run, live claims), or ``None``."""
        return self._store.get(check_job_id(job_id))

    def jobs(self) -> list[JobState]:
        """Every stored job, ordered by id; finished one-shots stay with their last run."""
        return self._store.jobs()

    def health(self) -> Health:
        """Whether this scheduler is doing its work: for liveness probes and dashboards.

        Healthy while started, its timing thread alive, its last look at the store
        successful, the look in progress (if any) waiting less than ``health_after``
        seconds, and the last one no older than ``poll + health_after`` (the loop
        looks at least every ``poll`` seconds). Cheap: it reads counters, never the
        store. ``tickwork run --http`` answers ``/healthz`` from it.
        """
        thread = self._thread
        looked, asking, now = self._looked, self._asking, self._mono()
        age = None if looked is None else max(0.0, now - looked)
        waiting = None if asking is None else max(0.0, now - asking)
        reason: str | None = None
        failures = self._recovery.failures
        if thread is None or self._table.stopping:
            reason = "not started" if thread is None else "stopping"
        elif not thread.is_alive():
            reason = "the timing thread died (see the log); no run starts"
        elif failures:
            reason = f"the store failed {failures} time(s) in a row: {self._recovery.last_error}"
        elif waiting is not None and waiting >= self._health_after:
            reason = f"the store has not answered for {waiting:.0f} s (a look at the due runs)"
        elif age is not None and age > self._poll + self._health_after:
            reason = f"the timing loop has not looked at the store for {age:.0f} s"
        return Health(
            ok=reason is None,
            reason=reason,
            store_failures=failures,
            store_errors=self._recovery.store_errors,
            lost_claims=self._table.lost_claims,
            last_look_age=age,
            store_waiting=waiting,
        )

    def history(
        self,
        job_id: str | None = None,
        *,
        since: float | datetime | None = None,
        outcome: str | None = None,
        before: int | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[SlotRecord]:
        """The slot ledger, newest entry first: how each slot of each job ended.

        Every slot ends in exactly one entry (``ok``, ``failed``, ``missed``,
        ``skipped``, ``abandoned``; slots given up together share one entry with its
        ``slots`` count). See `tickwork.stores.SlotLedger` and docs/observability.md.

        Args:
            job_id: Only this job (``None``: all, removed jobs included until pruned).
            since: Only slots due at or after this time (an aware datetime or POSIX
                seconds).
            outcome: Only entries with this outcome.
            before: Only entries older than this ``seq`` (to page back).
            after: Only the ``limit`` entries right after this ``seq`` (to page forward).
            limit: Most entries returned.

        Raises:
            TypeError: The store keeps no slot ledger.

        """
        if self._ledger is None:
            raise TypeError(f"the store {self._store!r} keeps no slot ledger (no history())")
        if isinstance(since, datetime):
            if since.tzinfo is None:
                raise ValueError(f"since must be an aware datetime or POSIX seconds, got {since!r}")
            since = since.timestamp()
        return self._ledger.history(
            job_id, since=since, outcome=outcome, before=before, after=after, limit=limit
        )

    @staticmethod
    def record_output(text: str) -> None:
        """Inside a running durable job: keep ``text`` as the run's output.

        Its end (the last 4,000 characters) goes into the run's slot-ledger entry
        (`SlotRecord.output`), whether the run then succeeds or fails; a later call
        replaces an earlier one. ``tickwork run`` records a command's output tail so.

        Raises:
            TypeError: ``text`` is not a str.
            RuntimeError: Called outside a running durable job.

        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        claim = DurableScheduler.current_claim()
        if claim is None:
            raise RuntimeError("record_output() is only for a running durable job")
        _outputs[claim.token] = text[-OUTPUT_LIMIT:]

    @staticmethod
    def record_end(at: float) -> None:
        """Inside a running durable job: its work ended at ``at``, a `time.monotonic` reading.

        The run's end (its slot-ledger entry, ``last_run.ended``, the duration) is then
        recorded at that moment rather than when the job returns. ``tickwork run``
        passes the time a command's process ended, which its supervisor noted: when
        the daemon itself was stopped (SIGSTOP) or starved meanwhile, the run is not
        recorded as lasting until the daemon looked again. A time after now counts as
        now; one before the run's start, as its start.

        Raises:
            TypeError: ``at`` is not a number.
            ValueError: ``at`` is not finite.
            RuntimeError: Called outside a running durable job.

        """
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise TypeError(f"at must be a time.monotonic() reading, got {at!r}")
        if not math.isfinite(at):
            raise ValueError(f"at must be a finite time.monotonic() reading, got {at!r}")
        claim = DurableScheduler.current_claim()
        if claim is None:
            raise RuntimeError("record_end() is only for a running durable job")
        _ends[claim.token] = float(at)

    @staticmethod
    def current_claim() -> Claim | None:
        """Inside a running durable job: its `Claim` (``job_id``, ``scheduled``, ...).

        ``(claim.job_id, claim.scheduled)`` identifies the run across restarts, which
        makes it the natural idempotency key of an ``at_least_once`` job. ``None``
        outside a durable job.
        """
        claim: Claim | None = getattr(_current, "claim", None)
        return claim if claim is not None else current_async_claim.get()

    def _allow(self, func: str) -> None:
        self._functions.allow(func)

    @property
    def _awaits(self) -> bool:
        """Whether coroutine jobs are awaited here (`AsyncDurableScheduler`)."""
        return self._running.awaiter is not None

    def _poke(self) -> None:
        """Make the timing thread look at the store again now."""
        self._table.poke()

    def _await_with(self, awaiter: Awaiter) -> None:
        """Await what coroutine jobs return with ``awaiter`` (`AsyncDurableScheduler`)."""
        self._running.awaiter = awaiter

    def step(self) -> float:
        """Look at the store once now, in the calling thread; return seconds to the next look.

        Renews leases, claims the due runs and hands them to the executor, as the timing
        thread does on each wake-up. Meant for tests on a `tickwork.testing.FakeClock`
        (``wall_clock=clock.wall, monotonic_clock=clock``): move the clock, call
        ``step()``; with a `tickwork.testing.InlineExecutor` the due jobs have run (and
        their ends are recorded) when it returns. Started or not.
        """
        return self._step()

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start the timing thread; missed runs found now follow each job's policy.

        Raises:
            RuntimeError: Already started, or stopped (a scheduler does not restart).

        """
        with self._table.lock:
            if self._table.stopping:
                raise RuntimeError("start() on a stopped DurableScheduler (it does not restart)")
            if self._thread is not None:
                raise RuntimeError("start() on a DurableScheduler that is already running")
            if isinstance(self._store, SessionLiveness):
                # Its claims read as live while its sessions are (`tickwork jobs`).
                self._store.tag_sessions(self._owner)
            self._thread = threading.Thread(
                target=self._timing.run, name="tickwork-durable-timer", daemon=True
            )
            recorder = self._running.recorder
            if recorder is not None and self._claiming.carries:
                # A finish may wait for a look due within milliseconds (`_carry.py`).
                recorder.carry_when(self._timing.look_near)
            self._thread.start()
            if self._notifier is not None:
                self._listener = threading.Thread(
                    target=self._listen,
                    args=(self._notifier,),
                    name="tickwork-durable-listener",
                    daemon=True,
                )
                self._listener.start()

    def stop(self, wait: bool = True, timeout: float | None = None) -> bool:
        """Stop: no run starts after this returns; optionally wait for running jobs.

        Runs claimed but not started are handed back to the store at once (recorded
        ``"cancelled"``, their slot re-offered as a retry), so another scheduler or the
        next start runs them without waiting for the lease. A run its claim recorded as
        started (one handed straight to an idle worker) is already begun and still
        runs. The store is not closed.

        With ``wait``, the ends of the runs that ended are written before this returns:
        a finish the store failed to record (a full disk, a dropped connection) is
        tried again, with back-off and the lease kept renewed, until ``timeout`` (with
        no ``timeout``: for up to ``lease`` seconds). What still cannot be written is
        logged as an error naming each job and slot, and `unrecorded` lists it.
        Without ``wait``, such finishes are tried once more.

        Args:
            wait: Wait for the running jobs to finish (and their outcome recorded).
            timeout: With ``wait``, give up after this many seconds; ``None``: no limit
                for the jobs (``lease`` seconds for their records).

        Returns:
            Whether no job (other than the caller's own) is still running, and the
            end of every run that ended is recorded.

        Raises:
            ValueError: ``timeout`` is not ``None`` or a finite number >= 0.

        """
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 <= timeout < math.inf
        ):
            raise ValueError(f"timeout must be None or a finite number >= 0, got {timeout!r}")
        give_up = None if timeout is None else time.monotonic() + timeout
        self._end_threads(give_up)
        recorder = self._running.recorder
        if recorder is not None:  # no look is coming: finishes waiting for one go now
            recorder.write_now(recorder.carry_when(None))
        finished = self._jobs_ended(wait, give_up)
        if not wait:
            settle_by = time.monotonic()
        elif give_up is None:
            settle_by = time.monotonic() + self._lease
        else:
            settle_by = give_up
        table, wall = self._table, self._wall
        unwritten = _settle(self._running, self._recovery, table, wall, self._poll, settle_by)
        if unwritten and wait:
            _report_unwritten(self._owner, unwritten)
        if self._own_executor:
            self._executor.shutdown(wait=False)
        return finished and not unwritten

    def _end_threads(self, give_up: float | None) -> None:
        """`stop`'s first step: no look from now on; the timing and listener threads end.

        Each is joined until ``give_up`` (monotonic; ``None``: for as long as it takes),
        unless it is the calling thread.
        """
        table = self._table
        with table.lock:
            table.stopping = True
            table.cond.notify_all()
            thread, listener = self._thread, self._listener
        self._halt.set()
        if listener is not None and self._notifier is not None:
            try:
                self._notifier.interrupt_wait()
            except Exception:  # a closed store, say: the listener ends on its own
                _log.debug("interrupt_wait failed while stopping", exc_info=True)
        for t in (thread, listener):
            if t is not None and t is not threading.current_thread():
                t.join(None if give_up is None else max(0.0, give_up - time.monotonic()))

    def _jobs_ended(self, wait: bool, give_up: float | None) -> bool:
        """Whether no job but the caller's own still runs: with ``wait``, until ``give_up``."""
        table = self._table
        own = self._running.depth()
        with table.lock:
            if not wait:
                return table.in_job <= own
            left = None if give_up is None else max(0.0, give_up - time.monotonic())
            return table.idle.wait_for(lambda: len(table.runs) - table.ending <= own, left)

    def unrecorded(self) -> list[tuple[str, float]]:
        """``(job id, slot)`` of each run that ended here but whose end is not yet recorded.

        Empty while the store works. A finish the store failed to record is retried at
        each look of the timing thread and by `stop`; what `stop` could not write
        stays listed here.
        """
        with self._table.lock:
            return [
                (r.claim.job_id, r.claim.scheduled) for r in self._table.runs.values() if r.ended
            ]

    def __enter__(self) -> DurableScheduler:
        """Start the scheduler; return it."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the scheduler and wait for running jobs."""
        self.stop()

    # -- introspection and events ----------------------------------------------------

    @property
    def errors(self) -> list[str]:
        """``"job <id>: <error>"`` for each failed run of this scheduler, oldest first."""
        return self._events.errors()

    def running(self) -> dict[str, int]:
        """Job id -> how many of its runs this scheduler holds (claimed or running).

        A run that ended is not counted while its end is being written (see
        `unrecorded`).
        """
        with self._table.lock:
            out: dict[str, int] = {}
            for run in self._table.runs.values():
                if not run.ended:
                    out[run.claim.job_id] = out.get(run.claim.job_id, 0) + 1
            return out

    def add_listener(self, listener: Listener) -> None:
        """Deliver a `RunEvent` (with ``job_id`` set) to ``listener`` for every run.

        STARTED, FINISHED and FAILED come from the worker thread; MISSED and SKIPPED
        (slots given up by policy, ``missed`` = how many) from the timing thread. Times
        are wall-clock POSIX seconds. A listener that raises is logged and skipped.
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        self._events.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored."""
        self._events.remove(listener)

    # -- the timing thread -----------------------------------------------------------

    def _step(self) -> float:
        """One look at the store: renew, claim, dispatch; return seconds to sleep."""
        with self._table.lock:
            if self._table.stopping:
                return 0.0
        self._asking = self._mono()
        try:
            timeout = self._claiming.step()
        except Exception as exc:
            # A busy or unreachable database: try again later, keep the thread alive.
            self._looked, self._asking = self._mono(), None
            return self._recovery.store_failed(exc)
        self._looked, self._asking = self._mono(), None
        self._recovery.store_works()
        return timeout

    def _listen(self, notifier: ChangeNotifier) -> None:
        """The listener thread: wake the timing thread when the store announces a change."""
        _listen_for_changes(notifier, self._halt, self._poll, self._owner, self._table.hear)


def _listen_for_changes(
    notifier: ChangeNotifier,
    halt: threading.Event,
    poll: float,
    owner: str,
    hear: Callable[[], None],
) -> None:
    """The listener thread: wake the timing thread when the store announces a change.

    Waits in ``notifier.wait_for_change`` (on its own connection, for PostgreSQL),
    ``poll`` seconds at a time; `stop` ends the wait with ``interrupt_wait``. A True
    result (a change, or possibly missed notifications) makes the timing thread look
    at the store at once (`RunTable.hear`), unless another scheduler that runs the
    same work promised to look at every due time. An error is logged and retried with
    backoff.
    """
    failures = 0
    while not halt.is_set():
        try:
            changed = notifier.wait_for_change(poll)
        except Exception as exc:
            if halt.is_set():
                return
            failures += 1
            delay = min(poll, _RETRY_MIN * 2.0 ** min(failures - 1, 60))
            # Once per streak: a closed store would otherwise log every poll.
            _log.log(
                logging.WARNING if failures == 1 else logging.DEBUG,
                "durable scheduler %r: waiting for store changes failed (%s: %s);"
                " retrying in %.2f s (the safety poll goes on meanwhile)",
                owner,
                type(exc).__name__,
                exc,
                delay,
            )
            halt.wait(delay)
            continue
        failures = 0
        if changed and not halt.is_set():
            hear()
