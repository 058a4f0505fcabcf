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

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tickwork._core.errors import JobCancelled
from tickwork._core.events import EventKind, Listener, RunEvent
from tickwork.stores.contract import ONEOFF_MARK, is_oneoff

__all__ = ["DEFAULT_BUCKETS", "SchedulerMetrics"]

_log = logging.getLogger("tickwork.metrics")

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

    - ``tickwork_runs_total{job,outcome}``: runs (and retried attempts) that ended,
      ``outcome`` as the slot ledger records it: ``ok``, ``failed``, ``timeout`` (the job
      raised a `TimeoutError`, as ``tickwork run``'s timeouts do) or ``cancelled`` (it
      was stopped on purpose, as a run ended by ``overlap = "replace"`` is);
    - ``tickwork_run_duration_seconds{job}`` and ``tickwork_run_lateness_seconds{job}``
      (start minus due time): histograms;
    - ``tickwork_slots_skipped_total{job,reason}``: slots not run, ``reason``
      ``overlap`` (the previous run was going) or ``missed`` (the scheduler was late or
      down, by the missed-run policy);
    - ``tickwork_last_success_timestamp_seconds{job}``: when its last ``ok`` run ended;
    - ``tickwork_running{job}``: runs going now;
    - ``tickwork_next_run_timestamp_seconds{job}``: read from the watched schedulers at
      each scrape (the soonest, if several tasks share a name); a paused job has none;
    - ``tickwork_paused{job}``: 1 while the job is paused, else 0 (read at each scrape);
    - ``tickwork_failure_streak{job}``: failed runs since its last ok one (``failed``,
      ``timeout``, and for durable jobs ``abandoned``; given-up slots do not count).
      For a durable job it is read from the slot ledger at each scrape (the newest 200
      entries), so it survives restarts; for a task, counted from events since `watch`;
    - ``tickwork_state_last_success_timestamp_seconds{job}``: when a durable job's
      newest ``ok`` run ended, as the shared state's slot ledger has it (on any node,
      across restarts; read at each scrape, among the newest 200 entries): the reading a
      dead-man alert rule wants (docs/observability.md);
    - ``tickwork_waiting_runs{job}``: runs of a durable job waiting for a node to take
      them (queued by a trigger or a backfill, or recovered to be run again);
    - ``tickwork_pool_limit{pool}``, ``tickwork_pool_running{pool}`` and
      ``tickwork_pool_waiting{pool}``: each concurrency pool of a watched durable
      scheduler's store, its limit, the runs holding a slot and the due runs not taken
      yet, read at each scrape (``pool="*"``: the store's ``max_running``);
    - ``tickwork_oneoffs{queue,state}``: a watched durable scheduler's one-offs (delayed
      jobs) per function (``queue``, its import path) now, ``state`` ``pending`` or
      ``running``; ``tickwork_oneoffs_ended_total{queue,outcome}``: those that ended
      ``done``, ``failed`` or ``dropped`` (cancelled, missed), since the state was
      created; read at each scrape. A one-off's runs count in the instruments above under
      its function's path as ``job`` (its id is one a run);
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
        self._streaks: dict[str, int] = {}  # tasks' failure streaks, from their events
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
        name = event.name or event.job_id or f"task-{event.task_id}"
        if event.job_id is not None and is_oneoff(event.job_id):
            name = event.func or ONEOFF_MARK  # one id a run: labelled by its function
        job = self._label(name)
        kind = event.kind
        if kind is EventKind.STARTED:
            self._running.labels(job).inc()
            if event.started is not None:
                self._lateness.labels(job).observe(max(0.0, event.started - event.scheduled))
        elif kind is EventKind.FINISHED or kind is EventKind.FAILED:
            self._running.labels(job).dec()
            outcome = _outcome(event)
            self._runs.labels(job, outcome).inc()
            if event.job_id is None and outcome != "cancelled":  # durable: from the ledger
                with self._lock:
                    failed = self._streaks.get(job, 0) + 1
                    self._streaks[job] = 0 if kind is EventKind.FINISHED else failed
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

    def _job_readings(self) -> dict[str, _Reading]:
        """Each job's next run, pause, failure streak and waiting runs, read now."""
        readings: dict[str, _Reading] = {}
        with self._lock:
            watched = list(self._watched)
            streaks = dict(self._streaks)
        for scheduler in watched:
            for job, now in _readings_of(scheduler, streaks, self._label):
                label = self._label(job)
                readings[label] = now if label not in readings else readings[label].join(now)
        return readings

    def _pools(self) -> dict[str, Any]:
        """The concurrency pools of the watched durable schedulers' stores, by name."""
        from tickwork.stores import PoolLimits

        with self._lock:
            watched = list(self._watched)
        pools: dict[str, Any] = {}
        for scheduler in watched:
            store = getattr(scheduler, "store", None)
            if isinstance(store, PoolLimits):
                try:
                    pools.update((p.name, p) for p in store.pools(scheduler.now()))
                except Exception as exc:  # a scrape shows what it can
                    _log.debug("metrics: cannot read the pools: %s", exc)
        return pools

    def _oneoffs(self) -> dict[str, Any]:
        """The one-offs of the watched durable schedulers' stores, by function."""
        with self._lock:
            watched = list(self._watched)
        counts: dict[str, Any] = {}
        for scheduler in watched:
            oneoffs = getattr(scheduler, "oneoffs", None)
            if callable(oneoffs):
                try:
                    counts.update((c.queue, c) for c in oneoffs())
                except Exception as exc:  # a scrape shows what it can
                    _log.debug("metrics: cannot count the one-offs: %s", exc)
        return counts

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


def _outcome(event: RunEvent) -> str:
    """The outcome of an ended run's event, the word its ledger entry has."""
    if event.kind is EventKind.FINISHED:
        return "ok"
    if isinstance(event.error, TimeoutError):
        return "timeout"
    return "cancelled" if isinstance(event.error, JobCancelled) else "failed"


@dataclass(frozen=True, slots=True)
class _Reading:
    """What a scrape reads of one job (``None``: not known for this kind of job)."""

    next_run: float | None
    paused: bool
    streak: int | None
    waiting: int | None
    last_ok: float | None = None

    def join(self, other: _Reading) -> _Reading:
        """Two tasks that share a name: the soonest next run, the worst of the rest."""
        runs = [t for t in (self.next_run, other.next_run) if t is not None]
        return _Reading(
            min(runs) if runs else None,
            self.paused or other.paused,
            _most(self.streak, other.streak),
            None if self.waiting is None and other.waiting is None
            else (self.waiting or 0) + (other.waiting or 0),
            _latest(self.last_ok, other.last_ok),
        )  # fmt: skip


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _pool_families(pools: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
    """The three gauges of the concurrency pools (`SchedulerMetrics._pools`)."""
    families = (
        ("limit", "Runs a concurrency pool lets go at once (pool * is max_running)."),
        ("running", "Runs holding a slot of a concurrency pool now."),
        ("waiting", "Due runs of a concurrency pool not taken yet."),
    )
    for field, text in families:
        family = GaugeMetricFamily(f"tickwork_pool_{field}", text, labels=["pool"])
        for name, pool in sorted(pools.items()):
            family.add_metric([name], getattr(pool, field))
        yield family


def _oneoff_families(counts: dict[str, Any]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The one-offs per function: pending and running now, and how many ended how."""
    now = GaugeMetricFamily(
        "tickwork_oneoffs",
        "One-offs (delayed jobs) now, per function: pending (due or not) or running.",
        labels=["queue", "state"],
    )
    ended = CounterMetricFamily(
        "tickwork_oneoffs_ended",
        "One-offs that ended, per function: done (ok), failed, or dropped (cancelled, missed).",
        labels=["queue", "outcome"],
    )
    for queue, c in sorted(counts.items()):
        for state in ("pending", "running"):
            now.add_metric([queue, state], getattr(c, state))
        for outcome in ("done", "failed", "dropped"):
            ended.add_metric([queue, outcome], getattr(c, outcome))
    yield from (now, ended)


def _most(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _readings_of(
    scheduler: Any, streaks: dict[str, int], label: Callable[[str], str]
) -> Iterator[tuple[str, _Reading]]:
    """(job name, its reading) of each task or durable job of ``scheduler``.

    ``streaks`` holds the tasks' failure streaks by label (from their events); a
    durable job's is read from its scheduler's slot ledger.
    """
    jobs = getattr(scheduler, "jobs", None)
    if callable(jobs) and hasattr(scheduler, "store"):  # a DurableScheduler
        states = jobs()
        newest = _newest_entries(scheduler.store, [state.id for state in states])
        for state in states:
            planned = None if state.paused else state.next_run
            streak: int | None
            last_ok: float | None
            entry = None if newest is None else newest.get(state.id)
            if newest is not None and (entry is None or entry.outcome == "ok"):
                streak, last_ok = 0, None if entry is None else entry.ended
            else:  # a failure or a given-up slot last: count back (or no batch read)
                streak, last_ok = _ledger_streak(scheduler, state.id)
            yield state.id, _Reading(planned, state.paused, streak, state.waiting_runs, last_ok)
        return
    for info in scheduler.tasks():
        planned = None if info.paused or info.next_run is None else info.next_run.timestamp()
        yield info.name, _Reading(planned, info.paused, streaks.get(label(info.name), 0), None)


def _newest_entries(store: object, job_ids: list[str]) -> dict[str, Any] | None:
    """Each job's newest ledger entry, read at once from an SQL store; None: not so.

    Most jobs' newest entry is ``ok`` (streak 0) or there is none: a scrape of many
    jobs then costs a statement per 500 of them, not a transaction per job.
    """
    from tickwork.stores.contract import SQLStore, newest_entries

    if not isinstance(store, SQLStore):
        return None
    try:
        return newest_entries(store, job_ids)
    except Exception as exc:  # each job's own read then says what it can
        _log.debug("metrics: cannot read the newest ledger entries: %s", exc)
        return None


def _ledger_streak(scheduler: Any, job_id: str) -> tuple[int | None, float | None]:
    """A durable job's failure streak and newest ok end from the ledger; None: unknown."""
    from tickwork.stores.contract import failure_streak

    try:
        streak, ok = failure_streak(scheduler, job_id)
    except TypeError:  # the store keeps no slot ledger
        return None, None
    except Exception as exc:  # a scrape shows what it can: the store's errors count it
        _log.debug("metrics: cannot read the failure streak of %r: %s", job_id, exc)
        return None, None
    return streak, None if ok is None else ok.ended


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
        paused = GaugeMetricFamily(
            "tickwork_paused", "1 while the job is paused, else 0.", labels=["job"]
        )
        streak = GaugeMetricFamily(
            "tickwork_failure_streak", "Failed runs since the last ok one.", labels=["job"]
        )
        waiting = GaugeMetricFamily(
            "tickwork_waiting_runs",
            "Runs waiting for a node to take them (queued, backfilled, recovered).",
            labels=["job"],
        )
        last_ok = GaugeMetricFamily(
            "tickwork_state_last_success_timestamp_seconds",
            "When the newest ok run ended, as the shared state records it (POSIX seconds).",
            labels=["job"],
        )
        for job, now in sorted(self._metrics._job_readings().items()):
            if now.next_run is not None:
                nxt.add_metric([job], now.next_run)
            paused.add_metric([job], 1.0 if now.paused else 0.0)
            if now.streak is not None:
                streak.add_metric([job], now.streak)
            if now.waiting is not None:
                waiting.add_metric([job], now.waiting)
            if now.last_ok is not None:
                last_ok.add_metric([job], now.last_ok)
        yield from (nxt, paused, streak, waiting, last_ok)
        yield from _pool_families(self._metrics._pools())
        yield from _oneoff_families(self._metrics._oneoffs())
        errors, lost = self._metrics._durable_counts()
        yield CounterMetricFamily(
            "tickwork_store_errors", "Durable store steps that failed.", value=errors
        )
        yield CounterMetricFamily(
            "tickwork_lost_leases", "Runs whose claim was lost to another node.", value=lost
        )
