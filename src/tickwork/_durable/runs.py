"""Running: a worker's part of a durable run, from its claim to its recorded end."""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable

from tickwork._core.errors import JobInterrupted
from tickwork._core.events import EventKind, RunEvent
from tickwork._core.scheduler import _check_result
from tickwork._core.schedules import jitter_delay
from tickwork._core.text import iso
from tickwork._durable.attempts import Attempts, attempt_of, bounded, outcome_of
from tickwork._durable.decide import within_until
from tickwork._durable.engine import (
    _RETRY_MIN,
    RunTable,
    _current,
    _ends,
    _error_text,
    _outputs,
    _Run,
)
from tickwork._durable.events import Events
from tickwork._durable.recorder import Recorder
from tickwork.stores import Claim, JobSpec, JobSpecError, Outcome, Store, StoreError
from tickwork.stores.contract import (
    KEEP,
    BatchRecorder,
    ClaimWakeup,
    Finish,
    Keep,
    OneOffQueue,
    resolve_func,
)

_log = logging.getLogger("tickwork.durable")

#: Runs an awaitable a job returned to completion from the worker thread, raising what
#: it raised (set by `AsyncDurableScheduler`: awaited on the application's event loop).
Awaiter = Callable[[Awaitable[object], Claim], object]


class Functions:
    """Which job functions may run in this process, and those imported already.

    Only functions this process declared, or whose module ``prefixes`` allow, are ever
    imported: a job naming anything else (written into the store by someone else)
    fails with a clear error instead.

    A store that keeps one-offs is told the same (`OneOffQueue.claim_oneoffs_of`), so
    that this node never claims a one-off it may not run: the nodes that may run it.

    Args:
        prefixes: Module prefixes whose functions may run although not declared here
            (``"*"``: every module).
        store: The store whose claims follow these rules, if it keeps one-offs.

    """

    __slots__ = ("declared", "imported", "oneoffs", "prefixes")

    def __init__(self, prefixes: tuple[str, ...], store: object = None) -> None:
        self.prefixes = prefixes
        self.oneoffs = store if isinstance(store, OneOffQueue) else None
        if self.oneoffs is not None:
            self.oneoffs.claim_oneoffs_of(modules=prefixes)  # nothing more yet
        self.declared: set[str] = set()
        """Function paths this process declared (or added)."""
        self.imported: dict[str, Callable[..., object]] = {}
        """Function path -> the function, once imported by a run."""

    def allow(self, func: str) -> None:
        """Let the function named ``func`` run here (this process declared it)."""
        if func not in self.declared:
            self.declared.add(func)
            if self.oneoffs is not None:
                self.oneoffs.claim_oneoffs_of(functions=[func])

    def allowed(self, func: str) -> bool:
        """Whether the function named ``func`` may be imported and run here."""
        if func in self.declared:
            return True
        module = func.partition(":")[0]
        return any(p == "*" or module == p or module.startswith(p + ".") for p in self.prefixes)

    def resolve(self, spec: JobSpec) -> Callable[..., object] | Exception:
        """The job's function, or why it may not or cannot run (never imported then)."""
        func = spec.func
        if not self.allowed(func):
            return JobSpecError(
                f"job {spec.id!r}: func {func!r} is not allowed here: declare the job in this"
                " process or list its module in allowed_modules; it was not imported"
            )
        fn = self.imported.get(func)
        if fn is None:
            try:
                fn = resolve_func(func)
            except JobSpecError as exc:
                return exc
            except BaseException as exc:  # the import raised SystemExit, say
                # Not Exception (resolve_func wraps those): on this worker thread it
                # would only leave the claim unfinished.
                error = JobSpecError(
                    f"func {func!r} cannot be imported: {type(exc).__name__}: {exc}"
                )
                error.__cause__ = exc
                return error
            self.imported[func] = fn
        return fn


class Running:
    """A worker's part of a durable run: record its start, call the job, record its end.

    How starts and finishes are written is chosen once: through the group-committing
    `Recorder` when the store can batch them, else one store call each.

    Args:
        store: Where the jobs live.
        table: The runs held here.
        events: Where run events and failures go.
        functions: Which functions may run, and those imported.
        wall: The wall clock runs are timed by.
        recorder: Writes starts and finishes in shared transactions (``None``: the
            store cannot batch them).
        halt: Set by `DurableScheduler.stop`: cuts a run's jitter wait short, and
            ends the retries of a start that cannot be recorded.
        retry_max: The longest wait between two tries of a start the store failed
            to record (the safety poll).

    A start or a finish the store fails to record (`StoreError`: a full disk, a
    dropped connection) is tried again until it is written: a start by its worker,
    with back-off, before the job is called; a finish by the timing thread at each
    look (`retry_owed`), in the order the runs ended. Until then the run stays held
    here, so its lease is renewed and nobody recovers a run that ended as abandoned.

    """

    def __init__(
        self,
        store: Store,
        table: RunTable,
        events: Events,
        functions: Functions,
        *,
        wall: Callable[[], float],
        recorder: Recorder | None,
        halt: threading.Event,
        retry_max: float = 1.0,
    ) -> None:
        self._store = store
        self._retry_max = retry_max
        # Finishes the store failed to record, oldest first, by claim token; guarded
        # by the table's lock. Retried by `retry_owed` (the timing thread, `stop`).
        self._owed: dict[str, tuple[_Run, Finish]] = {}
        self._table = table
        self._events = events
        self._functions = functions
        self._wall = wall
        self._halt = halt
        self.recorder = recorder
        """The group commit of starts and finishes (``None``: single store calls)."""
        self._after_finish = store.look_after_finish if isinstance(store, ClaimWakeup) else None
        self.awaiter: Awaiter | None = None
        """Set by `AsyncDurableScheduler`; ``None``: a job returning an awaitable has
        failed (nothing would await it)."""
        self._local = threading.local()  # .depth: jobs this thread is inside
        self.attempts = Attempts(
            store,
            events,
            wall=wall,
            halt=halt,
            call=self._call,
            awaits=lambda: self.awaiter is not None,
        )
        """Runs the attempts of a job with retries, a time limit or isolation."""
        self._record_start: Callable[[Claim, float], bool]
        self._record_finish: Callable[[_Run, Finish], None]
        if recorder is not None:
            self._record_start = recorder.start
            self._record_finish = self._finish_batched
        else:
            self._record_start = self._start_alone
            self._record_finish = self._finish_alone

    def depth(self) -> int:
        """How many jobs the calling thread is inside (0: it is not a job's thread)."""
        depth: int = getattr(self._local, "depth", 0)
        return depth

    def execute(self, run: _Run) -> None:
        """Run a claimed slot on this worker thread, from its start to its recorded end."""
        claim = run.claim
        table = self._table
        with table.lock:
            stopping = table.stopping
        if stopping and claim.started is None:
            self.release(run)
            return
        # A run recorded started by its claim (it came to an idle worker) runs even
        # when stop() came meanwhile: it can no longer be handed back.
        fn = self._functions.resolve(claim.spec)
        if isinstance(fn, Exception):
            self._events.failed(claim.job_id, fn, claim.scheduled, func=claim.spec.func)
            self.end(run, "failed", None, _error_text(fn), KEEP)
            return
        jitter = jitter_delay(claim.spec.schedule)
        if jitter and claim.started is None and self._halt.wait(jitter):
            # Stopped while the run waited for its jitter: it has not started, so it is
            # handed back like any claimed run that did not start.
            self.release(run)
            return
        started = self._begin(run)
        if started is None:
            return
        spec, output, reported = claim.spec, None, False
        if spec.retries or spec.timeout is not None or spec.isolation != "thread":
            error, output, reported = self.attempts.run(fn, claim, started)
        else:
            error = self._call(fn, claim)
        ended = self._wall()
        ended_at = _ends.pop(claim.token, None)
        if ended_at is not None:  # the job said when its work really ended
            ended = max(started, ended - max(0.0, time.monotonic() - ended_at))
        attempt, recorded, began = attempt_of(claim.token, error is not None)
        if not (reported or recorded):  # a retry's events have its own start, not the run's
            self._report(claim, started if began is None else began, ended, error)
        text = None if error is None else _error_text(error)
        output = _outputs.pop(claim.token, output)
        self.end(run, outcome_of(error), ended, text, _next_run(claim, ended), output,
                 attempt=attempt, recorded=recorded, started=began)  # fmt: skip

    def _begin(self, run: _Run) -> float | None:
        """Record the run's start (unless its claim did); its start time, or None: not run."""
        claim = run.claim
        if claim.started is not None:
            started = claim.started
            # Picked up within the lease, as its start would have checked.
            ok = self._wall() < claim.lease_until
        else:
            started, ok = self._start_recorded(claim)
        if not ok:
            _log.warning(
                "job %r (scheduled %s): the claim is gone or expired; not running it",
                claim.job_id,
                iso(claim.scheduled, millis=True),
            )
            self._table.forget(run)
            return None
        self._table.started(run)
        events = self._events
        if events.listeners:  # no event is built for nobody
            events.emit(
                RunEvent(
                    EventKind.STARTED,
                    0,
                    claim.scheduled,
                    started,
                    job_id=claim.job_id,
                    name=claim.job_id,
                    origin=claim.origin,
                    func=claim.spec.func,
                )
            )
        return started

    def _start_recorded(self, claim: Claim) -> tuple[float, bool]:
        """Record the run's start, trying again while the store fails: (start time, ok).

        A `StoreError` is retried with back-off (doubling up to the safety poll) until
        the start is written, the claim is found gone, or `DurableScheduler.stop` is
        called (then the run is not started: its claim is handed back or, if that
        fails too, recovered as a retry when its lease ends). The lease is renewed
        meanwhile by the timing thread. Any other error means the store refuses the
        record: the run is not started.
        """
        delay = _RETRY_MIN
        attempt = 1
        while True:
            started = self._wall()
            try:
                return started, self._record_start(claim, started)
            except StoreError as exc:
                _log.log(
                    logging.ERROR if attempt == 1 else logging.DEBUG,
                    "cannot record the start of job %r (scheduled %s) yet (attempt %d: %s);"
                    " trying again in %.2f s, the job waits",
                    claim.job_id,
                    iso(claim.scheduled, millis=True),
                    attempt,
                    exc,
                    delay,
                )
            except Exception:
                _log.exception("cannot record the start of job %r; not running it", claim.job_id)
                return started, False
            if self._halt.wait(delay):
                _log.warning(
                    "job %r (scheduled %s): stopping before its start could be recorded;"
                    " not running it",
                    claim.job_id,
                    iso(claim.scheduled, millis=True),
                )
                return started, False
            attempt += 1
            delay = min(self._retry_max, delay * 2.0)

    def _call(
        self, fn: Callable[..., object], claim: Claim, timeout: float | None = None
    ) -> BaseException | None:
        """Call the job (await what it returns, on the asyncio face); what it raised.

        ``timeout``: a coroutine's time limit (it is cancelled then).
        """
        spec = claim.spec
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1
        _current.claim = claim
        _current.store = self._store
        _current.events = self._events  # the attempts a job records are reported here
        try:
            if (result := fn(*spec.args, **spec.kwargs)) is not None:
                if self.awaiter is not None and inspect.isawaitable(result):
                    if timeout is not None:
                        result = bounded(result, timeout)
                    self.awaiter(result, claim)  # the asyncio face: awaited on its loop
                else:
                    _check_result(fn, result)  # an awaitable: nothing would await it
        except BaseException as exc:
            # SystemExit and friends too: on a worker thread they reach no one, and a
            # claim must never be left unfinished: the run failed.
            return exc
        finally:
            _current.claim = None
            local.depth -= 1
        return None

    def _report(
        self, claim: Claim, started: float, ended: float, error: BaseException | None
    ) -> None:
        """Tell the listeners (and on a failure the error list and hook) how it went."""
        events = self._events
        if error is not None:
            failure = error if isinstance(error, Exception) else JobInterrupted.wrap(error)
            events.failed(
                claim.job_id,
                failure,
                claim.scheduled,
                started,
                ended - started,
                func=claim.spec.func,
            )
        elif events.listeners:
            events.emit(
                RunEvent(
                    EventKind.FINISHED,
                    0,
                    claim.scheduled,
                    started,
                    ended - started,
                    job_id=claim.job_id,
                    name=claim.job_id,
                    func=claim.spec.func,
                )
            )

    def end(
        self,
        run: _Run,
        outcome: Outcome,
        ended: float | None,
        error: str | None,
        next_run: float | Keep | None,
        output: str | None = None,
        *,
        attempt: int = 1,
        recorded: bool = False,
        started: float | None = None,
    ) -> None:
        """Record how the run ended (``ended`` None: now), then let it go.

        ``attempt``: which attempt ended it; ``recorded``: its ledger entry is written;
        ``started``: when that attempt started, if not at the run's start.
        """
        finish = Finish(
            run.claim,
            outcome,
            self._wall() if ended is None else ended,
            error,
            next_run,
            output,
            attempt,
            recorded,
            started,
        )
        self._record_finish(run, finish)

    def _start_alone(self, claim: Claim, started: float) -> bool:
        """`Store.start` in a transaction of its own (the store cannot batch)."""
        return self._store.start(claim, started=started)

    def _finish_batched(self, run: _Run, finish: Finish) -> None:
        # Written with the next batch; `_ended` runs once it is committed. The worker
        # is free meanwhile: the timing thread may claim for it.
        self._table.done_on_worker(run)
        if self._owe_after_others(run, finish):
            return
        recorder = self.recorder
        assert recorder is not None  # chosen so in __init__
        recorder.finish(finish, lambda result: self._ended(run, finish, result))

    def _finish_alone(self, run: _Run, finish: Finish) -> None:
        self._table.done_on_worker(run)  # its end is being written (see renew_due)
        if self._owe_after_others(run, finish):
            return
        result: bool | BaseException
        try:
            result = self._store.finish(
                finish.claim,
                outcome=finish.outcome,
                ended=finish.ended,
                error=finish.error,
                next_run=finish.next_run,
            )
        except Exception as exc:
            result = exc
        self._ended(run, finish, result)

    def _ended(self, run: _Run, finish: Finish, result: bool | BaseException) -> None:
        """After a run's finish was written (or failed): log what went wrong, free it.

        A `StoreError` (the database failed) keeps the finish owed: it is tried again
        at each look of the timing thread, the run held (and its lease renewed) until
        it is written.
        """
        claim = run.claim
        if isinstance(result, StoreError):
            _log.error(
                "cannot record the end of job %r (scheduled %s, %s) yet: %s; trying again"
                " until the store works, its lease kept renewed meanwhile",
                claim.job_id,
                iso(claim.scheduled, millis=True),
                finish.outcome,
                result,
            )
            self._owe(run, finish)
            return
        if isinstance(result, BaseException):
            _log.error(
                "cannot record the end of job %r: the store refused it; its lease will expire",
                claim.job_id,
                exc_info=result,
            )
        elif not result:
            self._table.lost_claims += 1
            _log.warning(
                "job %r (scheduled %s) ended but its claim was gone (lease expired or job"
                " removed); the outcome %r was not recorded",
                claim.job_id,
                iso(claim.scheduled, millis=True),
                finish.outcome,
            )
        self._table.forget(run, look=result is not True or self._looks_after(run, finish))

    def _looks_after(self, run: _Run, finish: Finish) -> bool:
        """Whether the recorded end of ``run`` calls for one more look at the store.

        The last look's wake-up covers every run claimable then, save what this run's
        claim held back: a pool slot, a next run of a job that allows no overlap, a
        run an operator or recovery queued for its job, one a chain queued at its end.
        Those call for a look; a plain scheduled run of a job that allows overlap, or
        that has no next run, does not, unless the store says otherwise
        (`ClaimWakeup.look_after_finish`). One transaction a run less at sparse rates.
        """
        after = self._after_finish
        if after is None:
            return True  # the store cannot say: look, as always
        claim = run.claim
        spec = claim.spec
        return (
            claim.origin != "schedule"
            or claim.retry
            or finish.next_run is not KEEP
            or spec.pool is not None
            or (spec.overlap != "allow" and run.decision.next_run is not None)
            or after()
        )

    def _owe(self, run: _Run, finish: Finish) -> None:
        """Keep ``finish`` to be written later; the run stays held (its lease renewed)."""
        table = self._table
        table.done_on_worker(run)  # no worker is busy with it any more
        with table.lock:
            self._owed[run.claim.token] = (run, finish)
        table.poke()

    def _owe_after_others(self, run: _Run, finish: Finish) -> bool:
        """Queue ``finish`` behind the finishes owed already, if any (their order kept)."""
        with self._table.lock:
            if not self._owed:
                return False
        self._owe(run, finish)
        return True

    def owed(self) -> list[Claim]:
        """The claims whose finish is owed (the store failed to record it), oldest first."""
        with self._table.lock:
            return [run.claim for run, _ in self._owed.values()]

    def retry_owed(self) -> int:
        """Write the finishes owed, oldest first; return how many are left (0: none).

        Raises:
            StoreError: The store still fails; the finish tried and those after it
                stay owed, in order.

        """
        table = self._table
        while True:
            with table.lock:
                if not self._owed:
                    return 0
                token, (run, finish) = next(iter(self._owed.items()))
            try:
                result: bool | BaseException = self._write_finish(finish)
            except StoreError:
                raise
            except Exception as exc:
                result = exc
            with table.lock:
                del self._owed[token]
            if result is True:
                _log.warning(
                    "recorded the end of job %r (scheduled %s, %s) now that the store works",
                    run.claim.job_id,
                    iso(run.claim.scheduled, millis=True),
                    finish.outcome,
                )
            self._ended(run, finish, result)

    def _write_finish(self, finish: Finish) -> bool:
        """One finish in a transaction of its own, as the batch would write it.

        Through `BatchRecorder.record` where the store has it, which keeps the finish's
        attempt number and whether its ledger entry is written already (`Attempts`).
        """
        if self.recorder is not None and isinstance(self._store, BatchRecorder):
            return self._store.record([], [finish])[1][0]
        return self._store.finish(
            finish.claim,
            outcome=finish.outcome,
            ended=finish.ended,
            error=finish.error,
            next_run=finish.next_run,
        )

    def release(self, run: _Run) -> None:
        """Hand an unstarted claim back: recorded ``"cancelled"``, its slot re-offered.

        The store keeps it as a retry of the same slot; the job's next run is not set
        back (later slots of an ``overlap="allow"`` job may have been taken meanwhile).
        """
        claim = run.claim
        try:
            self._store.finish(claim, outcome="cancelled", ended=self._wall())
        except Exception:
            _log.exception(
                "cannot hand back the claim on job %r; its lease will expire", claim.job_id
            )
        self._table.forget(run)


def _next_run(claim: Claim, ended: float) -> float | Keep | None:
    """The job's next run as its finish sets it: after a fixed delay, else kept."""
    schedule = claim.spec.schedule
    if schedule is not None and schedule.after_finish and claim.origin == "schedule":
        try:
            after = schedule.next_after(ended)
        except ValueError:  # a calendar with no allowed day left: the schedule ends
            _log.exception("job %r: no next run", claim.job_id)
            return None
        if after is not None and after <= ended:  # too small for the wall clock: later
            after = within_until(schedule, math.nextafter(ended, math.inf))
        return after
    return KEEP
