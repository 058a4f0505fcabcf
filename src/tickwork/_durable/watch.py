"""Dead-man alerts: conditions judged from the shared state, one sender per episode.

`AlertWatch` watches durable jobs by their `AlertRules`: no successful run within a
span, a slot missed or skipped, a run starting later than a bound (or a due slot no
node has started), a run still going past a bound. It reads the facts from the store
(`tickwork.stores._alerts`), not from the runs of its own process, so any node can
watch a job whose runner is down. Every watching node judges the same facts; the
store's conditional insert and updates pick the one that sends each alert and each
recovery, once per episode. The sender's callback is ``on_alert``; the daemon passes
one that runs the job's ``on_failure``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from tickwork._core.text import human_duration, iso
from tickwork._durable.scheduler import DurableScheduler
from tickwork.stores.contract import AlertEpisodes, Episode, EpisodeState, JobFacts, SQLStore

__all__ = ["ALERT_KINDS", "AlertHook", "AlertKind", "AlertRules", "AlertWatch", "WatchAlert"]

_log = logging.getLogger("tickwork.alerts")

AlertKind: TypeAlias = Literal["no_success", "missed", "late", "running"]
#: The conditions, in the order they are judged.
ALERT_KINDS: Final[tuple[AlertKind, ...]] = ("no_success", "missed", "late", "running")

#: Outcomes of the ledger's newest entry that make ``missed`` hold.
_GIVEN_UP: Final = frozenset({"missed", "skipped"})
#: Seconds between two looks of `AlertWatch`'s thread, at least and at most.
_INTERVAL: Final = (0.5, 30.0)


def _bound(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds > 0 or None, got {value!r}")
    if not 0 < value < math.inf:
        raise ValueError(f"{name} must be a number of seconds > 0 or None, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class AlertRules:
    """When to alert about one job. Each condition is off unless given.

    Args:
        no_success: Seconds: alert when no run has ended ok for this long (counted
            from the newest ok run's end, or, before any, from the job's first slot).
        missed: Alert when the job's newest slot was given up (``missed`` or
            ``skipped`` in the ledger); it clears when a later slot runs.
        late: Seconds: alert when a run started more than this after its slot, or a
            due slot has not started this long after it (no node took it); a
            schedule's ``jitter`` is added to it. A slot an ``overlap="skip"`` job
            skips for its running run is not late (``missed`` is about it).
        running: Seconds: alert when a run is still going this long after it started.

    Raises:
        TypeError: A value of the wrong kind.
        ValueError: A bound that is not a finite number > 0.

    """

    no_success: float | None = None
    missed: bool = False
    late: float | None = None
    running: float | None = None

    def __post_init__(self) -> None:
        for name in ("no_success", "late", "running"):
            object.__setattr__(self, name, _bound(name, getattr(self, name)))
        if not isinstance(self.missed, bool):
            raise TypeError(f"missed must be a bool, got {self.missed!r}")

    @property
    def any(self) -> bool:
        """Whether any condition is on."""
        return self.missed or any(b is not None for b in (self.no_success, self.late, self.running))

    def shortest(self) -> float | None:
        """The smallest bound given (``None``: only ``missed``, or nothing)."""
        bounds = [b for b in (self.no_success, self.late, self.running) if b is not None]
        return min(bounds) if bounds else None


@dataclass(frozen=True, slots=True)
class WatchAlert:
    """One message of a dead-man alert episode, as `AlertWatch` hands it to ``on_alert``."""

    job_id: str
    """The job watched."""
    kind: AlertKind
    """The condition: ``"no_success"``, ``"missed"``, ``"late"`` or ``"running"``."""
    event: Literal["alert", "recovered"]
    """``"alert"`` when the episode opens, ``"recovered"`` when it clears."""
    detail: str
    """What was seen, in words."""
    since: float
    """When the episode opened (UTC POSIX seconds)."""
    at: float
    """When this message was decided (UTC POSIX seconds)."""
    node: str
    """The watching node that sends it."""

    def to_dict(self) -> dict[str, Any]:
        """The message as JSON-ready values (times in ISO 8601)."""
        return {
            "job": self.job_id,
            "kind": self.kind,
            "event": self.event,
            "detail": self.detail,
            "since": iso(self.since, millis=True),
            "time": iso(self.at, millis=True),
            "node": self.node,
        }


#: ``on_alert(alert)``: deliver one message; raise if it could not be delivered (it is
#: then sent again, by any node, once its lease ends).
AlertHook: TypeAlias = Callable[[WatchAlert], object]


def conditions(
    rules: AlertRules, facts: JobFacts, now: float, first_seen: float
) -> Iterator[tuple[AlertKind, str | None]]:
    """``(kind, what holds)`` for each condition ``rules`` turns on; ``None``: it does not hold.

    ``first_seen``: when this watcher first saw the job (the start of ``no_success``'s
    span when the job has neither an ok run nor a first slot on record).
    """
    if rules.no_success is not None:
        ref = facts.last_ok if facts.last_ok is not None else facts.first_slot
        ref = first_seen if ref is None else ref
        words: str | None = None
        if now - ref > rules.no_success:
            since = "yet" if facts.last_ok is None else f"since {iso(ref)}"
            words = f"no successful run {since} (alert after {human_duration(rules.no_success)})"
        yield "no_success", words
    if rules.missed:
        entry = facts.last_entry
        given_up = entry is not None and entry[0] in _GIVEN_UP
        yield "missed", f"slot {iso(entry[1])} {entry[0]}" if given_up and entry else None
    if rules.late is not None:
        yield "late", _late(rules.late, facts, now)
    if rules.running is not None:
        stuck = [st for _, st in facts.claims if st is not None and now - st > rules.running]
        words = None
        if stuck:
            words = (
                f"a run started {iso(min(stuck))} is still going after"
                f" {human_duration(now - min(stuck))} (alert after {human_duration(rules.running)})"
            )
        yield "running", words


def _late(late: float, facts: JobFacts, now: float) -> str | None:
    after = f"(alert after {human_duration(late)})"
    bound = late + facts.jitter  # a jittered run may start that much after its slot
    # With overlap "skip", a slot due while the job's run goes on (or went on: the
    # next look skips it) waits only to be skipped (`missed` is the rule for that).
    ran, due = facts.last_run, facts.next_run
    during = ran is not None and due is not None and ran[0] <= due < ran[1]
    going = any(st is not None for _, st in facts.claims)
    held_back = facts.overlap == "skip" and (going or during)
    if facts.next_run is not None and now - facts.next_run > bound and not held_back:
        return f"slot {iso(facts.next_run)} has not been started by any node {after}"
    for scheduled, started in facts.claims:
        if started is None and now - scheduled > bound:
            return f"slot {iso(scheduled)} is claimed but not started {after}"
        if started is not None and started - scheduled > bound:
            return (
                f"slot {iso(scheduled)} started {human_duration(started - scheduled)} late {after}"
            )
    entry = facts.last_entry
    if (
        entry is not None
        and entry[0] not in _GIVEN_UP
        and entry[2] is not None
        and entry[2] - entry[1] > bound
    ):
        return f"slot {iso(entry[1])} started {human_duration(entry[2] - entry[1])} late {after}"
    return None


class AlertWatch:
    """Watches durable jobs for dead-man conditions; sends each episode once, cluster-wide.

    Give it the scheduler (its store, name and clock are used) or a store, the callback
    that delivers a message, and the rules per job id::

        watch = AlertWatch(scheduler, on_alert=page_someone)
        watch.watch("report", AlertRules(no_success=26 * 3600, running=3600))
        watch.start()

    Each look reads the facts of every watched job from the store and, for each
    condition, opens an episode when it starts to hold (``on_alert`` gets an
    ``"alert"``), sends nothing more while it holds, and closes it when it clears
    (``on_alert`` gets a ``"recovered"``). With several nodes watching the same jobs
    (several `AlertWatch`, in one process or many, on one store), exactly one node
    sends each message: the store decides. A message whose sender died or whose
    ``on_alert`` raised is sent again by any watching node once ``lease`` seconds
    have passed. Paused jobs are not judged (their episodes stay as they are).

    Args:
        source: A `DurableScheduler` (or `AsyncDurableScheduler`), or an SQL store
            (`tickwork.stores.sqlite.SQLiteStore`, `tickwork.stores.postgres.PostgresStore`).
        on_alert: Called as ``on_alert(alert)`` with a `WatchAlert`, on the watching
            thread (or in `check`'s caller); raise to have the message sent again.
        owner: This node's name in the episodes and the actions log (default: the
            scheduler's owner; with a store, required).
        wall_clock: UTC POSIX seconds (default: the scheduler's clock; with a store,
            `time.time`).
        lease: Seconds after which another node takes over an unsent message.
        interval: Seconds between the thread's looks (default: a quarter of the
            shortest bound watched, from 0.5 to 30 s).

    Raises:
        TypeError: A source that is neither, or a callback that is not callable.
        ValueError: A bad ``owner``, ``lease`` or ``interval``.

    """

    def __init__(
        self,
        source: object,
        *,
        on_alert: AlertHook,
        owner: str | None = None,
        wall_clock: Callable[[], float] | None = None,
        lease: float = 300.0,
        interval: float | None = None,
    ) -> None:
        engine = getattr(source, "engine", source)  # AsyncDurableScheduler's engine
        store: object = source
        if isinstance(engine, DurableScheduler):
            store = engine.store
            owner = owner or engine.owner
            wall_clock = wall_clock or engine.now
        if not isinstance(store, SQLStore):
            raise TypeError(
                "source must be a DurableScheduler, an AsyncDurableScheduler or an SQL store"
                f" (SQLite, PostgreSQL), got {source!r}"
            )
        if not callable(on_alert):
            raise TypeError(f"on_alert must be callable, got {on_alert!r}")
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty string, got {owner!r}")
        if (
            isinstance(lease, bool)
            or not isinstance(lease, int | float)
            or not 0 < lease < math.inf
        ):
            raise ValueError(f"lease must be a number of seconds > 0, got {lease!r}")
        self._lease = float(lease)
        self._interval = _bound("interval", interval)
        self._db: AlertEpisodes[Any] = AlertEpisodes(store)
        self._on_alert = on_alert
        self._owner = owner
        self._wall: Callable[[], float] = wall_clock or time.time
        self._rules: dict[str, AlertRules] = {}
        self._first_seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def owner(self) -> str:
        """This node's name in the episodes it sends."""
        return self._owner

    def watch(self, job_id: str, rules: AlertRules) -> None:
        """Watch ``job_id`` by ``rules``, replacing its rules (nothing on: stop watching)."""
        if not isinstance(rules, AlertRules):
            raise TypeError(f"rules must be an AlertRules, got {rules!r}")
        with self._lock:
            if rules.any:
                self._rules[job_id] = rules
            else:
                self._rules.pop(job_id, None)

    def unwatch(self, job_id: str) -> None:
        """Stop watching ``job_id`` (its open episodes stay in the store)."""
        with self._lock:
            self._rules.pop(job_id, None)

    def watched(self) -> dict[str, AlertRules]:
        """The rules per job id."""
        with self._lock:
            return dict(self._rules)

    def check(self) -> list[WatchAlert]:
        """Look once now, in the calling thread; return the messages this node sent.

        Raises:
            StoreError: The store could not be read or written.

        """
        rules = self.watched()
        if not rules:
            return []
        now = self._wall()
        facts = self._db.facts(sorted(rules))
        episodes = self._db.episodes()
        sent: list[WatchAlert] = []
        for job_id, job_rules in sorted(rules.items()):
            job_facts = facts.get(job_id)
            if job_facts is None or job_facts.paused:
                continue
            first_seen = self._first_seen.setdefault(job_id, now)
            for kind, words in conditions(job_rules, job_facts, now, first_seen):
                message = self._step(job_id, kind, words, episodes.get((job_id, kind)), now)
                if message is not None:
                    sent.append(message)
        return sent

    def _step(
        self, job_id: str, kind: AlertKind, words: str | None, ep: Episode | None, now: float
    ) -> WatchAlert | None:
        """Move one (job, condition) on; the message sent, if this node sent one."""
        db, me, lease = self._db, self._owner, self._lease
        expired = ep is not None and ep.lease_until < now
        if ep is None:
            if words is not None and db.open(
                job_id, kind, owner=me, now=now, lease=lease, detail=words
            ):
                return self._send(job_id, kind, "opening", now, words, now)
            return None
        if ep.state == "open":
            if words is None and db.close(
                job_id, kind, owner=me, now=now, lease=lease, detail=ep.detail or ""
            ):
                return self._send(job_id, kind, "closing", ep.since, ep.detail or "", now)
            return None
        if not expired:
            return None
        if ep.state == "opening" and words is None:
            db.discard(job_id, kind, now=now)  # never sent, and no longer true
            return None
        if db.take_over(job_id, kind, ep.state, owner=me, now=now, lease=lease):
            return self._send(job_id, kind, ep.state, ep.since, ep.detail or "", now)
        return None

    def _send(
        self,
        job_id: str,
        kind: AlertKind,
        state: EpisodeState,
        since: float,
        detail: str,
        now: float,
    ) -> WatchAlert | None:
        event: Literal["alert", "recovered"] = "alert" if state == "opening" else "recovered"
        message = WatchAlert(job_id, kind, event, detail, since, now, self._owner)
        try:
            self._on_alert(message)
        except Exception:
            _log.exception(
                "dead-man %s %s of job %r not delivered; sent again after %s",
                kind,
                event,
                job_id,
                human_duration(self._lease),
            )
            return None
        self._db.sent(job_id, kind, state, owner=self._owner)
        return message

    # -- the thread ---------------------------------------------------------------------

    def interval(self) -> float:
        """Seconds between two looks of the thread."""
        if self._interval is not None:
            return self._interval
        bounds = [b for r in self.watched().values() if (b := r.shortest()) is not None]
        low, high = _INTERVAL
        return min(high, max(low, min(bounds) / 4)) if bounds else high

    def start(self) -> None:
        """Start looking every `interval` seconds on a thread of its own."""
        if self._thread is not None:
            raise RuntimeError("start() on an AlertWatch that is already running")
        self._halt.clear()
        self._thread = threading.Thread(target=self._loop, name="tickwork-alert-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the thread (a message being delivered is finished first)."""
        self._halt.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                self.check()
            except Exception:  # a store outage: look again next time
                _log.warning("dead-man alert watch: look failed", exc_info=True)
            self._halt.wait(self.interval())
