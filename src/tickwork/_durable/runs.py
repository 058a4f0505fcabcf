"""Running: a worker's part of a durable run, from its claim to its recorded end.

Part of `DurableScheduler` (see ``_durable_base``).
"""

from __future__ import annotations

import inspect
import logging
import math
import random
from collections.abc import Callable

from tickwork._core.errors import JobInterrupted
from tickwork._core.scheduler import EventKind, RunEvent, _check_result
from tickwork._core.schedules import Every
from tickwork._core.text import iso
from tickwork._durable.decide import within_until
from tickwork._durable.engine import (
    _current,
    _error_text,
    _outputs,
    _Run,
)
from tickwork._durable.recovery import _Recovery
from tickwork.stores._errors import JobSpecError
from tickwork.stores._model import (
    KEEP,
    Finish,
    JobSpec,
    Keep,
    Outcome,
    resolve_func,
)

_log = logging.getLogger("tickwork.durable")


class _Running(_Recovery):
    """Running: a worker's part of a durable run, from its claim to its recorded end."""

    def _execute(self, run: _Run) -> None:
        claim = run.claim
        spec = claim.spec
        store = self._store
        with self._lock:
            stopping = self._stopping
        if stopping and claim.started is None:
            self._release(run)
            return
        # A run recorded started by its claim (it came to an idle worker) runs even
        # when stop() came meanwhile: it can no longer be handed back.
        fn = self._resolve(spec)
        if isinstance(fn, Exception):
            self._failed(claim.job_id, fn, claim.scheduled)
            self._end(run, "failed", None, _error_text(fn), KEEP)
            return
        jitter: float = getattr(spec.schedule, "jitter", 0.0)
        if jitter and claim.started is None and self._halt.wait(random.uniform(0.0, jitter)):
            # Stopped while the run waited for its jitter: it has not started, so it is
            # handed back like any claimed run that did not start.
            self._release(run)
            return
        if claim.started is not None:
            started = claim.started
            # Picked up within the lease, as its start would have checked.
            ok = self._wall() < claim.lease_until
        else:
            started = self._wall()
            try:
                if self._recorder is not None:
                    ok = self._recorder.start(claim, started)
                else:
                    ok = store.start(claim, started=started)
            except Exception:
                _log.exception("cannot record the start of job %r; not running it", claim.job_id)
                ok = False
        if not ok:
            _log.warning(
                "job %r (scheduled %s): the claim is gone or expired; not running it",
                claim.job_id,
                iso(claim.scheduled, millis=True),
            )
            self._forget(run)
            return
        with self._lock:
            run.started = True
            self._in_job += 1
        if self._listeners:  # no event is built for nobody
            self._emit(
                RunEvent(
                    EventKind.STARTED,
                    0,
                    claim.scheduled,
                    started,
                    job_id=claim.job_id,
                    name=claim.job_id,
                )
            )
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1
        _current.claim = claim
        error: BaseException | None = None
        try:
            if (result := fn(*spec.args, **spec.kwargs)) is not None:
                if self._awaiter is not None and inspect.isawaitable(result):
                    self._awaiter(result, claim)  # the asyncio face: awaited on its loop
                else:
                    _check_result(fn, result)  # an awaitable: nothing would await it
        except BaseException as exc:
            # SystemExit and friends too: on a worker thread they reach no one, and a
            # claim must never be left unfinished: the run failed.
            error = exc
        finally:
            _current.claim = None
            local.depth -= 1
        ended = self._wall()
        if error is not None:
            failure = error if isinstance(error, Exception) else JobInterrupted.wrap(error)
            self._failed(claim.job_id, failure, claim.scheduled, started, ended - started)
        elif self._listeners:
            self._emit(
                RunEvent(
                    EventKind.FINISHED,
                    0,
                    claim.scheduled,
                    started,
                    ended - started,
                    job_id=claim.job_id,
                    name=claim.job_id,
                )
            )
        schedule = spec.schedule
        next_run: float | Keep | None = KEEP
        if isinstance(schedule, Every) and schedule.fixed_delay and claim.origin == "schedule":
            after = ended + schedule.interval
            if after <= ended:  # too small for the wall clock: still strictly later
                after = math.nextafter(ended, math.inf)
            next_run = within_until(schedule, after)
        text = None if error is None else _error_text(error)
        output = _outputs.pop(claim.token, None)
        outcome: Outcome = (
            "ok" if error is None else "timeout" if isinstance(error, TimeoutError) else "failed"
        )
        self._end(run, outcome, ended, text, next_run, output)

    def _resolve(self, spec: JobSpec) -> Callable[..., object] | Exception:
        """The job's function, or why it may not or cannot run (never imported then)."""
        func = spec.func
        if not self._allowed(func):
            return JobSpecError(
                f"job {spec.id!r}: func {func!r} is not allowed here: declare the job in this"
                " process or list its module in allowed_modules; it was not imported"
            )
        fn = self._funcs.get(func)
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
            self._funcs[func] = fn
        return fn

    def _allowed(self, func: str) -> bool:
        if func in self._declared:
            return True
        module = func.partition(":")[0]
        return any(p == "*" or module == p or module.startswith(p + ".") for p in self._prefixes)

    def _end(
        self,
        run: _Run,
        outcome: Outcome,
        ended: float | None,
        error: str | None,
        next_run: float | Keep | None,
        output: str | None = None,
    ) -> None:
        claim = run.claim
        finish = Finish(
            claim,
            outcome,
            self._wall() if ended is None else ended,
            error,
            next_run,
            output,
        )
        if self._recorder is not None:
            # Written with the next batch; `_ended` runs once it is committed. The
            # worker is free meanwhile: the timing thread may claim for it.
            with self._lock:
                if claim.token in self._runs:
                    run.ended = True
                    self._ending += 1
                    if run.started:
                        self._in_job -= 1
                    if len(self._runs) - self._ending < self._capacity:
                        self._wake = True  # room to claim again
                        self._cond.notify()
            self._recorder.finish(finish, lambda result: self._ended(run, finish, result))
            return
        result: bool | BaseException
        try:
            result = self._store.finish(
                claim,
                outcome=finish.outcome,
                ended=finish.ended,
                error=finish.error,
                next_run=finish.next_run,
            )
        except Exception as exc:
            result = exc
        self._ended(run, finish, result)

    def _ended(self, run: _Run, finish: Finish, result: bool | BaseException) -> None:
        """After a run's finish was written (or failed): log what went wrong, free it."""
        claim = run.claim
        if isinstance(result, BaseException):
            _log.error(
                "cannot record the end of job %r; its lease will expire",
                claim.job_id,
                exc_info=result,
            )
        elif not result:
            self._lost_claims += 1
            _log.warning(
                "job %r (scheduled %s) ended but its claim was gone (lease expired or job"
                " removed); the outcome %r was not recorded",
                claim.job_id,
                iso(claim.scheduled, millis=True),
                finish.outcome,
            )
        self._forget(run)

    def _release(self, run: _Run) -> None:
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
        self._forget(run)

    def _forget(self, run: _Run) -> None:
        with self._lock:
            if self._runs.pop(run.claim.token, None) is not None:
                if run.ended:
                    self._ending -= 1
                elif run.started:
                    self._in_job -= 1
            if len(self._runs) - self._ending < self._capacity:
                # Room to claim again (and the job itself may be claimable now).
                self._wake = True
                self._cond.notify()
            if self._stopping:
                self._idle.notify_all()

    def _failed(
        self,
        job_id: str,
        exc: Exception,
        scheduled: float | None,
        started: float | None = None,
        duration: float | None = None,
    ) -> None:
        with self._lock:
            self._errors.append(f"job {job_id}: {type(exc).__name__}: {exc}")
        _log.error("job %r failed: %s: %s", job_id, type(exc).__name__, exc, exc_info=exc)
        if self._on_error is not None:
            try:
                self._on_error(job_id, exc)
            except Exception:
                _log.exception("on_error hook failed for job %r", job_id)
        if scheduled is not None:
            self._emit(
                RunEvent(
                    EventKind.FAILED,
                    0,
                    scheduled,
                    started,
                    duration,
                    exc,
                    job_id=job_id,
                    name=job_id,
                )
            )
