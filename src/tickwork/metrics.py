"""Prometheus metrics for tickwork's schedulers, through ``prometheus_client``.

Needs the ``metrics`` extra (``pip install 'tickwork[metrics]'``); ``import tickwork``
never loads it. One `SchedulerMetrics` holds the instruments on a registry you pass (or
a new one) and watches any number of schedulers::

    from prometheus_client import CollectorRegistry, generate_latest
    from tickwork import ThreadScheduler
    from tickwork.metrics import SchedulerMetrics

    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    scheduler = ThreadScheduler()
    metrics.watch(scheduler)  # a listener, and a next-run reading at scrape time
    print(generate_latest(registry).decode())

Labels are job names only (a task's name, or a durable job's id, or what ``job_label``
makes of it), so their number stays that of your jobs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tickwork._core.events import EventKind, Listener, RunEvent

__all__ = ["DEFAULT_BUCKETS", "SchedulerMetrics"]

#: Histogram buckets (seconds) for durations and lateness: a millisecond to an hour.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)


class _Watched(Protocol):
    def add_listener(self, listener: Listener) -> None: ...


class SchedulerMetrics:
    """The standard instruments for scheduled jobs, fed by scheduler events.

    Instruments (``job`` is the job's name, see ``job_label``):

    - ``tickwork_runs_total{job,outcome}``: runs that ended, ``outcome`` ``ok``,
      ``failed`` or ``timeout`` (the job raised a `TimeoutError`, as ``tickwork run``'s
      timeouts do);
    - ``tickwork_run_duration_seconds{job}`` and ``tickwork_run_lateness_seconds{job}``
      (start minus due time): histograms;
    - ``tickwork_slots_skipped_total{job,reason}``: slots not run, ``reason``
      ``overlap`` (the previous run was going) or ``missed`` (the scheduler was late or
      down, by the missed-run policy);
    - ``tickwork_last_success_timestamp_seconds{job}``: when its last ``ok`` run ended;
    - ``tickwork_running{job}``: runs going now;
    - ``tickwork_next_run_timestamp_seconds{job}``: read from the watched schedulers at
      each scrape (the soonest, if several tasks share a name);
    - ``tickwork_store_errors_total`` and ``tickwork_lost_leases_total``: from each
      watched `DurableScheduler`'s `health` (store steps that failed; runs whose claim
      it lost), summed.

    Args:
        registry: Where to register (default: a new `CollectorRegistry`, see
            `registry`); pass ``prometheus_client.REGISTRY`` to join the default one.
        job_label: Turns an event's name into the ``job`` label (default: as is).
        buckets: Histogram buckets, in seconds.
        wall_clock: For the success timestamp of non-durable schedulers, whose event
            times are readings of their own clock (default: `time.time`).

    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        job_label: Callable[[str], str] | None = None,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if registry is not None and not isinstance(registry, CollectorRegistry):
            raise TypeError(f"registry must be a CollectorRegistry or None, got {registry!r}")
        if job_label is not None and not callable(job_label):
            raise TypeError(f"job_label must be callable or None, got {job_label!r}")
        self.registry = CollectorRegistry() if registry is None else registry
        """The registry the instruments are on."""
        self._label = job_label or str
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._watched: list[Any] = []
        r = self.registry
        self._runs = Counter(
            "tickwork_runs", "Runs that ended, by outcome.", ["job", "outcome"], registry=r
        )
        self._duration = Histogram(
            "tickwork_run_duration_seconds",
            "How long runs took.",
            ["job"],
            buckets=buckets,
            registry=r,
        )
        self._lateness = Histogram(
            "tickwork_run_lateness_seconds",
            "Start minus due time of runs.",
            ["job"],
            buckets=buckets,
            registry=r,
        )
        self._skipped = Counter(
            "tickwork_slots_skipped",
            "Slots not run: overlap (the previous run was going) or missed.",
            ["job", "reason"],
            registry=r,
        )
        self._success = Gauge(
            "tickwork_last_success_timestamp_seconds",
            "When the last ok run ended (POSIX seconds).",
            ["job"],
            registry=r,
        )
        self._running = Gauge("tickwork_running", "Runs going now.", ["job"], registry=r)
        r.register(_Readings(self))

    def watch(self, scheduler: _Watched) -> None:
        """Feed the instruments from ``scheduler``'s events and read its next runs.

        Works with `tickwork.Scheduler`, `tickwork.ThreadScheduler`,
        `tickwork.AsyncScheduler` and `tickwork.DurableScheduler` (anything with
        ``add_listener`` and ``tasks()`` or ``jobs()``).
        """
        if not callable(getattr(scheduler, "add_listener", None)):
            raise TypeError(f"scheduler must have add_listener(), got {scheduler!r}")
        scheduler.add_listener(self.observe)
        with self._lock:
            self._watched.append(scheduler)

    def observe(self, event: RunEvent) -> None:
        """The listener `watch` adds: count one `RunEvent`."""
        job = self._label(event.name or event.job_id or f"task-{event.task_id}")
        kind = event.kind
        if kind is EventKind.STARTED:
            self._running.labels(job).inc()
            if event.started is not None:
                self._lateness.labels(job).observe(max(0.0, event.started - event.scheduled))
        elif kind is EventKind.FINISHED or kind is EventKind.FAILED:
            self._running.labels(job).dec()
            outcome = (
                "ok"
                if kind is EventKind.FINISHED
                else "timeout"
                if isinstance(event.error, TimeoutError)
                else "failed"
            )
            self._runs.labels(job, outcome).inc()
            if event.duration is not None:
                self._duration.labels(job).observe(event.duration)
            if kind is EventKind.FINISHED:
                if event.job_id is not None and event.started is not None:
                    ended = event.started + (event.duration or 0.0)  # wall-clock times
                else:
                    ended = self._wall()
                self._success.labels(job).set(ended)
        elif kind is EventKind.SKIPPED:
            self._skipped.labels(job, "overlap").inc(max(1, event.missed))
        elif kind is EventKind.MISSED:
            self._skipped.labels(job, "missed").inc(max(1, event.missed))

    def _next_runs(self) -> dict[str, float]:
        soonest: dict[str, float] = {}
        with self._lock:
            watched = list(self._watched)
        for scheduler in watched:
            for job, when in _next_runs_of(scheduler):
                label = self._label(job)
                if label not in soonest or when < soonest[label]:
                    soonest[label] = when
        return soonest

    def _durable_counts(self) -> tuple[int, int]:
        errors = lost = 0
        with self._lock:
            watched = list(self._watched)
        for scheduler in watched:
            health = getattr(scheduler, "health", None)
            if callable(health):
                h = health()
                errors += h.store_errors
                lost += h.lost_claims
        return errors, lost


def _next_runs_of(scheduler: Any) -> Iterator[tuple[str, float]]:
    """(job name, next run as POSIX seconds) of each task or durable job."""
    jobs = getattr(scheduler, "jobs", None)
    if callable(jobs) and hasattr(scheduler, "store"):  # a DurableScheduler
        for state in jobs():
            if state.next_run is not None and not state.paused:
                yield state.id, state.next_run
        return
    for info in scheduler.tasks():
        if info.next_run is not None and not info.paused:  # a paused task is not planned
            yield info.name, info.next_run.timestamp()


class _Readings(Collector):
    """What is read at scrape time: next runs, and the durable schedulers' counters."""

    def __init__(self, metrics: SchedulerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        nxt = GaugeMetricFamily(
            "tickwork_next_run_timestamp_seconds",
            "When the job runs next (POSIX seconds).",
            labels=["job"],
        )
        for job, when in sorted(self._metrics._next_runs().items()):
            nxt.add_metric([job], when)
        yield nxt
        errors, lost = self._metrics._durable_counts()
        yield CounterMetricFamily(
            "tickwork_store_errors", "Durable store steps that failed.", value=errors
        )
        yield CounterMetricFamily(
            "tickwork_lost_leases", "Runs whose claim was lost to another node.", value=lost
        )
