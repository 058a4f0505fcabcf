"""Events: who hears about a durable scheduler's runs (listeners, error list, ``on_error``)."""

from __future__ import annotations

import logging
import threading
from collections import deque

from tickwork._core.events import EventKind, Listener, RunEvent, _deliver
from tickwork._durable.engine import DurableErrorHook

_log = logging.getLogger("tickwork.durable")

#: The attribute set (true) on the log record of a failed run that is also sent as a
#: FAILED event: a daemon's run log says it, so its log handler leaves the record out.
RUN_FAILED = "tickwork_run_failed"


class Events:
    """The listeners of one scheduler, its bounded list of failed runs, its error hook.

    Its own lock guards the listeners and the error list; it is never held while a
    listener or the hook runs, so both may call back into the scheduler.

    Args:
        max_errors: How many entries `errors` keeps (the newest); ``None``: no bound.
        on_error: Called as ``on_error(job_id, exc)`` after each failed run.

    """

    __slots__ = ("_errors", "_lock", "listeners", "on_error")

    def __init__(self, max_errors: int | None, on_error: DurableErrorHook | None) -> None:
        self._lock = threading.Lock()
        self._errors: deque[str] = deque(maxlen=max_errors)
        self.on_error = on_error
        #: Replaced, never changed in place: a delivery reads it without the lock, and
        #: callers test it before building an event nobody would get.
        self.listeners: list[Listener] = []

    def errors(self) -> list[str]:
        """``"job <id>: <error>"`` for each failed run, oldest first."""
        with self._lock:
            return list(self._errors)

    def add(self, listener: Listener) -> None:
        """Deliver every event to ``listener`` too."""
        with self._lock:
            self.listeners = [*self.listeners, listener]

    def remove(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored."""
        with self._lock:
            if listener in self.listeners:
                listeners = list(self.listeners)
                listeners.remove(listener)
                self.listeners = listeners

    def emit(self, event: RunEvent) -> None:
        """Deliver ``event`` to every listener (one that raises is logged and skipped)."""
        listeners = self.listeners
        if listeners:
            _deliver(listeners, event)

    def failed(
        self,
        job_id: str,
        exc: Exception,
        scheduled: float | None,
        started: float | None = None,
        duration: float | None = None,
        *,
        func: str | None = None,
    ) -> None:
        """A run failed: log it, keep it in the error list, call the hook, emit FAILED.

        Without ``scheduled`` (a slot given up as failed by the claim) no event is sent.
        """
        with self._lock:
            self._errors.append(f"job {job_id}: {type(exc).__name__}: {exc}")
        _log.error(
            "job %r failed: %s: %s",
            job_id,
            type(exc).__name__,
            exc,
            exc_info=exc,
            extra={RUN_FAILED: scheduled is not None},
        )
        if self.on_error is not None:
            try:
                self.on_error(job_id, exc)
            except Exception:
                _log.exception("on_error hook failed for job %r", job_id)
        if scheduled is not None:
            self.emit(
                RunEvent(
                    EventKind.FAILED,
                    0,
                    scheduled,
                    started,
                    duration,
                    exc,
                    job_id=job_id,
                    name=job_id,
                    func=func,
                )
            )
