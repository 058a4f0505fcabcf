"""OpenTelemetry spans for tickwork's runs, through ``opentelemetry-api``.

Needs the ``otel`` extra (``pip install 'tickwork[otel]'``, or any ``opentelemetry-api``
1.x) and a tracer provider configured by your application (the SDK, an exporter);
``import tickwork`` never loads it. Opt in per scheduler::

    from tickwork import ThreadScheduler
    from tickwork.tracing import RunTracer

    scheduler = ThreadScheduler()
    RunTracer().watch(scheduler)  # the global tracer provider, or tracer_provider=...

Each run becomes one span named ``run <job>`` (kind ``INTERNAL``), from the run's
start to its end, with the attributes ``tickwork.job``, ``tickwork.slot`` (the due
time: ISO 8601 UTC for a durable job, else the scheduler clock's reading),
``tickwork.attempt``, ``tickwork.outcome`` (``ok``, ``failed``, ``timeout``,
``cancelled``) and ``tickwork.lateness_s`` (start minus due time, seconds). A failed
run's span has status ``ERROR`` and the exception recorded on it. While a job runs on a
worker thread its span is the current one, so spans the job makes are its children and
log records it writes carry its trace id.

``tickwork run`` traces its jobs by itself when a tracer provider is set before it
starts (``opentelemetry-instrument tickwork run jobs.toml``): see `tracer_configured`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tickwork._core.errors import JobCancelled
from tickwork._core.events import EventKind, Listener, RunEvent
from tickwork._core.text import iso
from tickwork._core.version import __version__
from tickwork._durable.runnote import take_attempt

__all__ = ["RunTracer", "command_traceparent", "tracer_configured"]

#: The function ``tickwork run`` declares its jobs with: their command is what they run.
_DAEMON_ENTRY = "tickwork._daemon:run_configured_job"


class _Watched(Protocol):
    def add_listener(self, listener: Listener) -> None: ...


class _Open:
    """A span begun at a run's start, waiting for the run's end."""

    __slots__ = ("span", "start_ns", "thread", "token")

    def __init__(self, span: Span, start_ns: int, token: object | None) -> None:
        self.span = span
        self.start_ns = start_ns
        self.thread = threading.get_ident()
        self.token = token


def tracer_configured() -> bool:
    """Whether an application set a global tracer provider (``trace.set_tracer_provider``).

    The API's default provider makes no spans; ``tickwork run`` traces its jobs only
    when this is true, and never imports OpenTelemetry unless something else did.
    """
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class RunTracer:
    """Turns a scheduler's runs into OpenTelemetry spans, fed by its events.

    Works with `tickwork.Scheduler`, `tickwork.ThreadScheduler`,
    `tickwork.AsyncScheduler`, `tickwork.DurableScheduler` and
    `tickwork.AsyncDurableScheduler` (anything with ``add_listener``).

    Args:
        tracer_provider: Where the spans go (default: the global one, as set by
            ``opentelemetry.trace.set_tracer_provider``, looked up at each span).
        job_label: Turns an event's name (a task's name, a durable job's id) into the
            ``tickwork.job`` attribute and the span name (default: as is).

    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        job_label: Callable[[str], str] | None = None,
    ) -> None:
        if tracer_provider is not None and not callable(
            getattr(tracer_provider, "get_tracer", None)
        ):
            raise TypeError(
                "tracer_provider must be an OpenTelemetry TracerProvider or None,"
                f" got {tracer_provider!r}"
            )
        if job_label is not None and not callable(job_label):
            raise TypeError(f"job_label must be callable or None, got {job_label!r}")
        self._tracer = trace.get_tracer("tickwork", __version__, tracer_provider)
        self._label = job_label or str
        self._lock = threading.Lock()
        self._open: dict[tuple[int, str | None, float], list[_Open]] = {}

    def watch(self, scheduler: _Watched) -> None:
        """Make a span of each run of ``scheduler`` (it gets `observe` as a listener)."""
        if not callable(getattr(scheduler, "add_listener", None)):
            raise TypeError(f"scheduler must have add_listener(), got {scheduler!r}")
        scheduler.add_listener(self.observe)

    def observe(self, event: RunEvent) -> None:
        """The listener `watch` adds: begin a span at a start, end it at the run's end."""
        kind = event.kind
        if kind is EventKind.STARTED:
            self._begin(event)
        elif kind is EventKind.FINISHED or kind is EventKind.FAILED:
            self._end(event)

    def _begin(self, event: RunEvent) -> None:
        take_attempt()  # a note left by an earlier run on this thread is not this one's
        job = self._label(event.name or event.job_id or f"task-{event.task_id}")
        durable = event.job_id is not None
        started = event.scheduled if event.started is None else event.started
        start_ns = int(started * 1e9) if durable else time.time_ns()
        slot: str | float = iso(event.scheduled, millis=True) if durable else event.scheduled
        attributes: dict[str, str | float] = {
            "tickwork.job": job,
            "tickwork.slot": slot,
            "tickwork.lateness_s": max(0.0, started - event.scheduled),
        }
        if event.origin is not None:
            attributes["tickwork.origin"] = event.origin
        if event.func is not None and event.func != _DAEMON_ENTRY:  # a command says its own
            attributes["tickwork.function"] = event.func
        span = self._tracer.start_span(
            f"run {job}", kind=SpanKind.INTERNAL, start_time=start_ns, attributes=attributes
        )
        token = None if _in_event_loop() else context.attach(trace.set_span_in_context(span))
        with self._lock:
            self._open.setdefault(_key(event), []).append(_Open(span, start_ns, token))

    def _end(self, event: RunEvent) -> None:
        opened = self._take(event)
        if opened is None:
            return  # started before `watch`
        if opened.token is not None and opened.thread == threading.get_ident():
            context.detach(opened.token)  # type: ignore[arg-type]
        span = opened.span
        error = event.error
        outcome = (
            "ok"
            if event.kind is EventKind.FINISHED
            else "timeout"
            if isinstance(error, TimeoutError)
            else "cancelled"
            if isinstance(error, JobCancelled)
            else "failed"
        )
        span.set_attribute("tickwork.outcome", outcome)
        span.set_attribute("tickwork.attempt", take_attempt() or 1)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        duration = event.duration
        if duration is None:
            span.end()
        else:
            span.end(end_time=opened.start_ns + int(max(0.0, duration) * 1e9))

    def _take(self, event: RunEvent) -> _Open | None:
        """The span begun for ``event``'s run (the one on this thread, if several)."""
        key = _key(event)
        me = threading.get_ident()
        with self._lock:
            waiting = self._open.get(key)
            if not waiting:
                return None
            opened = next((o for o in waiting if o.thread == me), waiting[0])
            waiting.remove(opened)
            if not waiting:
                del self._open[key]
        return opened


def command_traceparent(command: str) -> str | None:
    """Name ``command`` on the current run's span; its W3C ``traceparent``, or ``None``.

    ``tickwork run`` calls it on the run's thread and gives the result to the command
    as ``TRACEPARENT``, so that spans the command makes join the run's trace.
    """
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return None
    span.set_attribute("tickwork.command", command)
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def _key(event: RunEvent) -> tuple[int, str | None, float]:
    return (event.task_id, event.job_id, event.scheduled)


def _in_event_loop() -> bool:
    """Whether this thread runs an asyncio loop.

    There no context is attached: the run's end may come from another task, whose
    context the attach is not in.
    """
    import sys

    aio = sys.modules.get("asyncio")
    return aio is not None and aio._get_running_loop() is not None
