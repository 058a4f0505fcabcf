"""A durable job's attempts: its ``retries``, their backoff, its ``timeout`` and isolation.

`Attempts` runs one claimed slot as up to ``1 + retries`` attempts, for a job whose
`tickwork.stores.JobSpec` asks for retries, a time limit or ``isolation="process"``
(a plain job never comes here). Each attempt that fails is written to the slot ledger
at its end (`record_attempt`), the claim held meanwhile; the run's finish writes the
last one, numbered after them (`attempt_of`). The daemon records the attempts of its
commands and calls through the same two functions (`begin_attempt`, `record_attempt`).
Each attempt is a STARTED event and a FAILED (or the run's FINISHED) one, as each has
its own ledger entry: `begin_attempt` announces a retry.

Time limits, by how the function runs:

- a coroutine (`AsyncDurableScheduler`) is cancelled at the limit (`asyncio.wait_for`);
- ``isolation="process"`` runs it in a child process whose group is killed at the limit
  (`tickwork._durable.isolation`);
- a plain function in a thread cannot be killed. At the limit the attempt is recorded
  ``"timeout"`` (ledger entry, FAILED event, error list) and the thread goes on; the
  slot stays claimed until it returns, so the overlap gate holds, and a retry starts
  only after it (`call_bounded`).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tickwork._core.attempts import backoff_delay
from tickwork._core.errors import JobCancelled, JobInterrupted, JobTimedOut
from tickwork._core.events import EventKind, RunEvent
from tickwork._durable.engine import _current, _error_text, _outputs, current_async_claim
from tickwork._durable.events import Events
from tickwork._durable.isolation import run_in_child
from tickwork.stores import Claim, Outcome, Store, StoreError
from tickwork.stores.contract import AttemptLedger

__all__ = [
    "Attempts",
    "attempt_of",
    "begin_attempt",
    "bounded",
    "call_bounded",
    "outcome_of",
    "record_attempt",
]

_log = logging.getLogger("tickwork.durable")

T = TypeVar("T")

#: Per claim token: (attempts written to the ledger, whether the latest attempt is one
#: of them, when the latest attempt started). Set by `begin_attempt` / `record_attempt`,
#: taken by the run's finish.
_attempted: dict[str, tuple[int, bool, float | None]] = {}


def outcome_of(error: BaseException | None) -> Outcome:
    """The ledger outcome of an attempt that raised ``error`` (None: it succeeded)."""
    if error is None:
        return "ok"
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, JobCancelled):
        return "cancelled"
    return "failed"


def _claim() -> Claim | None:
    claim: Claim | None = getattr(_current, "claim", None)
    return claim if claim is not None else current_async_claim.get()


def begin_attempt(
    claim: Claim | None = None, *, started: float | None = None, events: Events | None = None
) -> None:
    """Inside a running durable job: another attempt starts (its end is not yet written).

    ``started``: when it starts, for its ledger entry should the run's finish write it.
    A retry (an attempt after one that ended) is a STARTED event to ``events`` (default:
    the running job's scheduler's), so each attempt's end has its start.
    """
    claim = claim if claim is not None else _claim()
    if claim is not None and claim.token in _attempted:
        _attempted[claim.token] = (_attempted[claim.token][0], False, started)
        events = events if events is not None else getattr(_current, "events", None)
        if events is not None and events.listeners:
            events.emit(
                RunEvent(EventKind.STARTED, 0, claim.scheduled, started, job_id=claim.job_id,
                         name=claim.job_id, origin=claim.origin, func=claim.spec.func)
            )  # fmt: skip


def record_attempt(
    outcome: Outcome,
    *,
    started: float,
    ended: float,
    error: str | None = None,
    output: str | None = None,
    store: Store | None = None,
    claim: Claim | None = None,
    report: Exception | None = None,
) -> bool:
    """Inside a running durable job: write the ledger entry of the attempt that just ended.

    The claim stays held; if the run then ends without another attempt, its finish
    writes no second entry (nor event). False if nothing was written (no ledger here,
    the claim is gone, the store failed: logged); the run's finish then writes that
    attempt. ``report``: once written, the attempt's failure as the running job's
    scheduler reports one (a FAILED event, the error list, the hook).
    """
    claim = claim if claim is not None else _claim()
    store = store if store is not None else getattr(_current, "store", None)
    if claim is None:
        raise RuntimeError("record_attempt() is only for a running durable job")
    count = _attempted.get(claim.token, (0, False, None))[0]
    written = False
    if isinstance(store, AttemptLedger):
        try:
            written = store.record_attempt(
                claim,
                outcome=outcome,
                started=started,
                ended=max(started, ended),
                attempt=count + 1,
                error=error,
                output=output,
            )
        except (StoreError, ValueError, TypeError) as exc:
            _log.error("job %r: cannot record attempt %d: %s", claim.job_id, count + 1, exc)
    _attempted[claim.token] = (count + 1, True, None) if written else (count, False, None)
    events = getattr(_current, "events", None)
    if written and report is not None and isinstance(events, Events):
        took = max(0.0, ended - started)
        events.failed(claim.job_id, report, claim.scheduled, started, took, func=claim.spec.func)
    return written


def attempt_of(token: str, failed: bool) -> tuple[int, bool, float | None]:
    """For a run's finish: (its attempt number, whether it is written, when it started).

    The start is None for a first attempt: the run's own start.
    """
    count, last, started = _attempted.pop(token, (0, False, None))
    if failed and last:
        return count, True, None
    return count + 1, False, started


async def bounded(awaitable: Awaitable[T], timeout: float) -> T:
    """``awaitable``, cancelled after ``timeout`` seconds (then `TimeoutError`)."""
    import asyncio  # only for a coroutine job with a time limit

    return await asyncio.wait_for(awaitable, timeout)


def call_bounded(
    call: Callable[[], T], timeout: float, on_bound: Callable[[], object]
) -> tuple[T, bool]:
    """``call()`` in a thread of its own: (its result, whether it passed ``timeout``).

    At the bound ``on_bound()`` is called, then the thread is waited for anyway: a
    thread cannot be stopped, and what it does must end before its slot is let go.
    The thread sees the caller's current claim (`DurableScheduler.current_claim`).
    """
    inherited = dict(vars(_current))
    box: list[T] = []

    def body() -> None:
        vars(_current).update(inherited)
        box.append(call())

    thread = threading.Thread(target=body, name="tickwork-bounded-call", daemon=True)
    thread.start()
    thread.join(timeout)
    late = thread.is_alive()
    if late:
        on_bound()
        thread.join()
    return box[0], late


class Attempts:
    """Runs a claimed slot's attempts, as its job's policy says (see the module doc).

    Args:
        store: Where the ledger entries of the attempts go.
        events: Where each failed attempt is reported.
        wall: The wall clock attempts are timed by.
        halt: Set by `DurableScheduler.stop`: a backoff ends at once, no retry starts.
        call: Calls the job once in the calling thread (`Running._call`), with a
            coroutine's time limit.
        awaits: Whether coroutine functions are awaited (`AsyncDurableScheduler`).

    """

    def __init__(
        self,
        store: Store,
        events: Events,
        *,
        wall: Callable[[], float],
        halt: threading.Event,
        call: Callable[[Callable[..., object], Claim, float | None], BaseException | None],
        awaits: Callable[[], bool],
    ) -> None:
        self._store = store
        self._events = events
        self._wall = wall
        self._halt = halt
        self._call = call
        self._awaits = awaits

    def run(
        self, fn: Callable[..., object], claim: Claim, started: float
    ) -> tuple[BaseException | None, str | None, bool]:
        """Run the attempts: (the last one's error, its output, whether it was reported)."""
        spec = claim.spec
        n = 1
        while True:
            begin_attempt(claim, started=started, events=self._events)
            error, output, reported = self._once(fn, claim, started)
            if error is None or isinstance(error, JobCancelled) or n > spec.retries:
                return error, output, reported
            if not reported:
                self._fail(claim, error, started)
                self._record(claim, error, started, output)
            if self._halt.wait(
                backoff_delay(n, base=spec.retry_backoff, cap=spec.retry_backoff_max)
            ):
                return error, output, True  # stopping: no further attempt
            n += 1
            started = self._wall()

    def _once(
        self, fn: Callable[..., object], claim: Claim, started: float
    ) -> tuple[BaseException | None, str | None, bool]:
        """One attempt: (its error, its output, whether it was reported and recorded)."""
        spec = claim.spec
        if spec.isolation == "process":
            child = run_in_child(
                spec.func, spec.args, spec.kwargs, timeout=spec.timeout, kill_grace=spec.kill_grace
            )
            return child.error, child.output or None, False
        timeout = spec.timeout
        if timeout is None or (self._awaits() and inspect.iscoroutinefunction(fn)):
            error = self._call(fn, claim, timeout)
            return error, _outputs.pop(claim.token, None), False
        bound = JobTimedOut(
            f"timed out after {timeout:g} s; a thread cannot be stopped: it went on,"
            " its slot held until it returned"
        )

        def at_bound() -> None:
            self._fail(claim, bound, started)
            self._record(claim, bound, started, _outputs.get(claim.token))

        error, late = call_bounded(lambda: self._call(fn, claim, None), timeout, at_bound)
        output = _outputs.pop(claim.token, None)
        if late:
            return bound, output, True
        return error, output, False

    def _fail(self, claim: Claim, error: BaseException, started: float) -> None:
        failure = error if isinstance(error, Exception) else JobInterrupted.wrap(error)
        ended = self._wall()
        self._events.failed(
            claim.job_id, failure, claim.scheduled, started, ended - started, func=claim.spec.func
        )

    def _record(
        self, claim: Claim, error: BaseException, started: float, output: str | None
    ) -> None:
        record_attempt(
            outcome_of(error),
            started=started,
            ended=self._wall(),
            error=_error_text(error),
            output=output,
            store=self._store,
            claim=claim,
        )
