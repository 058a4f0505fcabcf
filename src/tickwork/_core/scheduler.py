"""The tick-driven core: `Scheduler`.

The core never sleeps, never starts a thread and never reads a clock except the ones it
is given. Something outside (a test, a thread driver, an asyncio task) calls
`Scheduler.run_pending` and it runs whatever is due. Its contract: docs/concepts.md#the-contract.

Data structure: a binary heap of entries ``[due, task_id, fn, rec]`` plus a dict
``task_id -> entry``. Heap order is ``(due, task_id)``, so equal due times run in the
order the tasks were scheduled. ``rec`` says what happens after a run: ``None`` for a
plain one-shot, a float for a plain fixed-rate interval (the two fast paths), or a
`_Plan` from `tickwork._core.schedules` for everything else (fixed-delay, jitter, cron,
wall-clock one-shots). ``cancel`` is O(1): it drops the dict entry and marks the heap
entry dead (``fn = None``); dead entries are discarded when they reach the top of the
heap, and the heap is rebuilt without them whenever they outnumber the live tasks by
more than `COMPACT_SLACK`.

`Scheduler` is the contract; it stands on `_Timeline` (the entries, the clocks, the
drivers' hooks), which stands on `_Reporting` (what runs tell: errors and events).
"""

from __future__ import annotations

import functools
import inspect
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from heapq import heapify, heappop, heappush
from types import (
    BuiltinFunctionType,
    FunctionType,
    MappingProxyType,
    MethodDescriptorType,
    MethodType,
    MethodWrapperType,
    WrapperDescriptorType,
)
from typing import TYPE_CHECKING, Any, Final

from tickwork._core.args import MAX_SECONDS
from tickwork._core.clocks import WALL_STEP
from tickwork._core.events import EventKind, Listener, RunEvent, _deliver
from tickwork._core.schedules import (
    Every,
    Once,
    Schedule,
    ScheduleDecorators,
    _DelayPlan,
    _IntervalPlan,
    _OncePlan,
    _Plan,
    _RatePlan,
    next_slot,
    seconds_arg,
)

if TYPE_CHECKING:
    import logging

__all__ = [
    "COMPACT_SLACK",
    "WALL_CHECK_INTERVAL",
    "Scheduler",
    "TaskInfo",
]


def _log() -> logging.Logger:
    """The ``tickwork`` logger, imported on first use.

    `logging` imports `threading`; the core must not, so that importing tickwork in a
    process that never logs a failure loads no thread machinery at all.
    """
    import logging

    return logging.getLogger("tickwork")


#: Dead (cancelled) heap entries may exceed the live tasks by at most this many before
#: the heap is rebuilt without them. Rebuilding costs O(heap) and only happens after at
#: least `COMPACT_SLACK` cancels since the last one, so cancel stays amortised O(1),
#: while memory held by cancelled tasks stays below ``live + COMPACT_SLACK`` entries
#: (a timeout-heavy workload never keeps more than half its heap dead, plus this).
COMPACT_SLACK: Final = 1024

#: Default bound on `Scheduler.errors`: a job that fails forever must not grow memory.
DEFAULT_MAX_ERRORS: Final = 1000

#: While wall-clock schedules (cron, `At`) exist, drivers wake at least this often
#: (`Scheduler.next_wakeup_in`), so a wall-clock step or a resume from suspend, which
#: the monotonic clock does not see, is noticed within this many seconds.
WALL_CHECK_INTERVAL: Final = 30.0


# Heap entry layout: [due, task_id, fn, rec]. A list (not a tuple) so cancel can mark
# it dead in place and a recurring task can be re-pushed without allocating; lists
# compare element-wise in C, and (due, task_id) is unique, so fn is never compared.
# The hot loops index with literals (a module constant would be a global lookup).
_DUE: Final = 0
_ID: Final = 1
_FN: Final = 2
_REC: Final = 3

Clock = Callable[[], float]
ErrorHook = Callable[[int, Exception], object]

_CO_COROUTINE: Final = inspect.CO_COROUTINE
#: Callables implemented in C: never coroutine functions (and they cannot be marked).
_NATIVE_CALLABLES: Final = frozenset(
    {BuiltinFunctionType, MethodWrapperType, WrapperDescriptorType, MethodDescriptorType}
)
#: Result types a job commonly returns, never awaitable: no `inspect.isawaitable` for them.
_PLAIN_RESULTS: Final = frozenset({bool, int, float, str, bytes, tuple, list, dict, set})


def _is_coroutine_function(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine.

    True for an ``async def`` function or method, a `functools.partial` of one, an object
    whose ``__call__`` is ``async def``, and (Python 3.12+) a function marked with
    `inspect.markcoroutinefunction`.
    """
    # The common cases, cheaply (``schedule`` is a hot path): a function implemented in
    # C, or a plain function (or a method of one) that carries no attributes, so no
    # coroutine mark either.
    kind = type(fn)
    if kind in _NATIVE_CALLABLES:
        return False
    func = fn.__func__ if isinstance(fn, MethodType) else fn
    if type(func) is FunctionType and not func.__dict__:
        return bool(func.__code__.co_flags & _CO_COROUTINE)
    if inspect.iscoroutinefunction(fn):
        return True
    # An instance whose class has an async ``__call__`` (calling a class makes an instance,
    # whatever its ``__call__``: look the method up on the type, as the call does).
    call = getattr(type(fn), "__call__", None)  # noqa: B004
    return call is not None and not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def _refuse_coroutine_function(name: str, fn: object, driver: str) -> None:
    """Raise `TypeError` if ``fn`` is a coroutine function: ``driver`` would never await it."""
    if _is_coroutine_function(fn):
        raise TypeError(
            f"{name} must not be a coroutine function (async def): {driver} calls jobs"
            f" without awaiting them; run it on tickwork.AsyncScheduler, got {fn!r}"
        )


def _refuse_interval(interval: float, due: float) -> None:
    """Raise `ValueError`: ``interval`` is below the clock's resolution at ``due``.

    Below ``math.ulp(due)``, adding it to ``due`` rounds: to another step than asked, or
    to none at all (``due + interval == due``: the task could never get past ``now``).
    """
    raise ValueError(
        f"interval must be at least {math.ulp(due)!r} s, the clock's resolution at the"
        f" first due time {due!r}, got {interval!r}"
    )


def _check_result(fn: object, result: object) -> None:
    """Raise `TypeError` if a job returned an awaitable, which nothing would await.

    A coroutine is closed first, so it does not warn "never awaited" when collected.
    Called only for a result that is not ``None``.
    """
    if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(
            f"fn must not return an awaitable: a plain job is called, never awaited (give"
            f" coroutine functions to tickwork.AsyncScheduler); {fn!r} returned {result!r}"
        )


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A read-only view of one live task, as returned by `Scheduler.tasks`."""

    task_id: int
    """The id `Scheduler.schedule` returned."""
    due: float
    """When the task is next due, on the scheduler's clock."""
    fn: Callable[[], object]
    """The job."""
    interval: float | None
    """Seconds between runs for an interval schedule, else ``None``."""
    fixed_delay: bool
    """Whether the interval is measured from the end of a run (else fixed-rate)."""
    name: str = field(default="", compare=False)
    """The name given when it was added, else the function's qualified name."""
    schedule: Schedule | None = field(default=None, compare=False)
    """The schedule value it runs on (`schedule(delay, fn, interval)` shows the
    equivalent `Once` or `Every`)."""
    next_run: datetime | None = field(default=None, compare=False)
    """When it is next due, as an aware UTC `datetime` (read off the wall clock)."""
    args: tuple[Any, ...] = field(default=(), compare=False)
    """The positional arguments the job is called with."""
    kwargs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The keyword arguments the job is called with."""
    paused: bool = field(default=False, compare=False)
    """Whether the task is paused (`ThreadScheduler.pause`, `AsyncScheduler.pause`): it
    does not come due until resumed. ``due`` and ``next_run`` then show the due time it
    had when it was paused (`resume` moves it on if it has passed meanwhile)."""
    note: str | None = field(default=None, compare=False)
    """The note given to ``pause``, while the task is paused; else ``None``."""


#: The keyword arguments of a job called without any (shared, read-only).
_NO_KWARGS: Final[Mapping[str, Any]] = MappingProxyType({})


class Shown:
    """What `tasks` shows of a task beyond its entry: its job as given, and its name.

    A plain class with slots (built once per added task, so kept cheap); ``name`` is
    ``None`` until asked when none was given (`tasks` reads `name_of` then).
    """

    __slots__ = ("args", "fn", "kwargs", "name", "schedule")

    def __init__(
        self,
        fn: Callable[..., object],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] = _NO_KWARGS,
        name: str | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.name = name
        self.schedule = schedule


def _label(entry: list[Any]) -> str:
    """The name `tasks` shows for a core entry (its given name, else its job's)."""
    if len(entry) > 4:
        shown: Shown = entry[4]
        return shown.name or name_of(shown.fn)
    return name_of(entry[2])


def name_of(fn: object) -> str:
    """A job's default name: its qualified name (a partial's function's), else repr."""
    inner = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(inner, "__qualname__", None)
    return name if isinstance(name, str) and name else repr(fn)


def _task_info(entry: list[Any], now: float, offset: float) -> TaskInfo:
    """What `Scheduler.tasks` shows of a live ``entry`` at ``now`` (wall = ``now + offset``)."""
    rec = entry[3]
    interval = rec if rec is None or type(rec) is float else rec.interval
    fixed_delay = type(rec) is _DelayPlan
    if len(entry) > 4:
        shown: Shown = entry[4]
        schedule = shown.schedule
    else:  # a plain schedule(delay, fn[, interval]): its equivalent as of now
        shown = Shown(entry[2])
        left = max(0.0, entry[0] - now)
        schedule = (
            Once(left) if interval is None else Every(interval, fixed_delay=fixed_delay, first=left)
        )
    try:
        next_run: datetime | None = datetime.fromtimestamp(entry[0] + offset, UTC)
    except (OverflowError, OSError, ValueError):  # a clock far from any date
        next_run = None
    return TaskInfo(
        entry[1],
        entry[0],
        shown.fn,
        interval,
        fixed_delay,
        name=shown.name or name_of(shown.fn),
        schedule=schedule,
        next_run=next_run,
        args=shown.args,
        kwargs=shown.kwargs,
    )


#: `misfit`'s answers by callable and call shape (how many positional arguments, which
#: names): a signature takes a call or not by its shape alone, and the same few
#: functions are added and enqueued with the same few shapes again and again. Bounded.
_FITS: dict[tuple[object, int, tuple[str, ...]], str | None] = {}
#: Signatures read by `_misfit` (reading one costs more than binding to it). Bounded.
_SIGNATURES: dict[object, inspect.Signature] = {}


def misfit(
    fn: Callable[..., object], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> str | None:
    """Why ``fn(*args, **kwargs)`` cannot work, from its signature; ``None`` if it can.

    A callable whose signature cannot be read (some built-ins) passes: its call tells.
    """
    shape = (fn, len(args), tuple(kwargs))
    try:
        return _FITS[shape]
    except KeyError:
        why = _misfit(fn, args, kwargs)
        if len(_FITS) >= 1024:
            _FITS.clear()
        _FITS[shape] = why
        return why
    except TypeError:  # an unhashable callable: not remembered
        return _misfit(fn, args, kwargs)


def _misfit(
    fn: Callable[..., object], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> str | None:
    try:
        signature = _SIGNATURES[fn]
    except (KeyError, TypeError):  # not read yet, or an unhashable callable
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            return None
        try:
            if len(_SIGNATURES) >= 1024:
                _SIGNATURES.clear()
            _SIGNATURES[fn] = signature
        except TypeError:
            pass
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def bind(
    fn: Callable[..., object],
    args: object,
    kwargs: object,
    name: object,
    *,
    schedule: Schedule | None = None,
) -> tuple[Callable[[], object], Shown]:
    """Check ``args``/``kwargs``/``name`` against ``fn``; return what to call and show.

    The arguments are bound to ``fn``'s signature now, so a job that could never be
    called with them fails here (`TypeError`) instead of at every run. A callable whose
    signature cannot be read (some built-ins) is not checked.

    Raises:
        TypeError: ``fn`` is not callable, ``args`` not a tuple or list, ``kwargs`` not
            a mapping with str keys, ``name`` not a non-empty str, or the arguments do
            not fit ``fn``'s signature.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    if not args and kwargs is None and name is None:  # the common case, kept cheap
        why = misfit(fn, (), _NO_KWARGS)
        if why is not None:
            raise TypeError(
                f"fn {name_of(fn)} cannot be called with args=() and kwargs={{}}: {why}"
            )
        return fn, Shown(fn, (), _NO_KWARGS, None, schedule)
    if not isinstance(args, tuple | list):
        raise TypeError(f"args must be a tuple or list, got {args!r}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise TypeError(f"kwargs must be a mapping with str keys or None, got {kwargs!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TypeError(f"name must be a non-empty str or None, got {name!r}")
    args = tuple(args)
    kwargs = dict(kwargs)
    why = misfit(fn, args, kwargs)
    if why is not None:
        raise TypeError(
            f"fn {name_of(fn)} cannot be called with args={args!r} and kwargs={kwargs!r}: {why}"
        )
    shown = Shown(fn, args, MappingProxyType(kwargs), name, schedule)
    call: Callable[[], object] = functools.partial(fn, *args, **kwargs) if args or kwargs else fn
    return call, shown


class _Reporting:
    """What a scheduler's runs tell: failures kept, logged and handed on, and events.

    A failed run is recorded in ``errors`` (the newest ``max_errors``), logged with its
    traceback and passed to the ``on_error`` hook; each listener hears a `RunEvent` for
    every run, timed on ``clock``. The `Scheduler` is built on it; drivers call its two
    halves of `_failed` apart (see there).
    """

    __slots__ = ("_clock", "_listeners", "_max_errors", "_on_error", "errors")

    def __init__(self, clock: Clock, max_errors: int | None, on_error: ErrorHook | None) -> None:
        if max_errors is not None and (
            isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0
        ):
            raise ValueError(f"max_errors must be an int >= 0 or None, got {max_errors!r}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable or None, got {on_error!r}")
        self._clock = clock
        self._max_errors = max_errors
        self._on_error = on_error
        self._listeners: list[Listener] = []
        self.errors: list[str] = []
        """``"task <id>: <message>"`` for each failed run, oldest first (bounded)."""

    def add_listener(self, listener: Listener) -> None:
        """Deliver a `RunEvent` to ``listener`` for every run from now on.

        Listeners are called synchronously, in the order they were added. One that
        raises is logged and skipped; it never breaks the scheduler. With at least one
        listener, `run_pending` also reads the clock around each job to time it.
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _failed(self, task_id: int, exc: Exception) -> None:
        """Record a failed run: `errors`, the log, then the ``on_error`` hook."""
        self._record_error(task_id, exc)
        self._report_error(task_id, exc)

    # Drivers split `_failed` in two: `_record_error` under their lock (``errors`` is
    # shared state), `_report_error` after releasing it (the hook is user code).

    def _record_error(self, task_id: int, exc: Exception) -> None:
        """Append ``"task <id>: <message>"`` to `errors`, keeping the newest `max_errors`."""
        errors = self.errors
        errors.append(f"task {task_id}: {exc}")
        limit = self._max_errors
        if limit is not None and len(errors) > limit:
            del errors[: len(errors) - limit]

    def _report_error(self, task_id: int, exc: Exception) -> None:
        """Log a failed run with its traceback, then call the ``on_error`` hook."""
        _log().error("task %d failed: %s", task_id, exc, exc_info=exc)
        if self._on_error is not None:
            try:
                self._on_error(task_id, exc)
            except Exception:
                _log().exception("on_error hook raised while handling task %d", task_id)

    def _emit(self, event: RunEvent) -> None:
        """Deliver ``event`` to every listener; a listener that raises is only logged."""
        _deliver(self._listeners, event)

    def _started(self, entry: list[Any]) -> tuple[str, float]:
        """Announce that ``entry``'s run starts; return its label and start time."""
        label = _label(entry)
        started = self._clock()
        self._emit(RunEvent(EventKind.STARTED, entry[1], entry[0], started, name=label))
        return label, started

    def _ended(
        self, task_id: int, due: float, started: float, label: str, exc: Exception | None
    ) -> None:
        """Announce that a run ended: `FINISHED`, or `FAILED` with ``exc``."""
        took = self._clock() - started
        kind = EventKind.FINISHED if exc is None else EventKind.FAILED
        self._emit(RunEvent(kind, task_id, due, started, took, exc, name=label))


class _Timeline(_Reporting):
    """The entries under a `Scheduler` and the clocks they are timed on.

    What the contract's calls share: placing, advancing and retiring heap entries,
    reading the clock (never backwards) and the wall clock (re-anchoring wall-clock
    tasks when it steps), compacting dead entries and checking it all (`_check`); and
    the hooks a driver uses to run a task elsewhere or pause it. The state is described
    in the module's docstring.
    """

    __slots__ = (
        "_current",
        "_dead",
        "_heap",
        "_held",
        "_last_now",
        "_next_id",
        "_offset",
        "_parked",
        "_paused",
        "_tasks",
        "_tick_now",
        "_wall",
        "_wall_clock",
        "_wall_read",
        "_wall_seen",
    )

    def __init__(
        self, clock: Clock, wall_clock: Clock, max_errors: int | None, on_error: ErrorHook | None
    ) -> None:
        _Reporting.__init__(self, clock, max_errors, on_error)
        self._wall_clock = wall_clock
        self._heap: list[list[Any]] = []
        self._tasks: dict[int, list[Any]] = {}
        self._dead = 0
        self._next_id = 1
        self._last_now = -math.inf
        # While run_pending runs: its ``now``; tasks scheduled by a job that are already
        # due at it wait in ``_held`` (not the heap) until the call ends.
        self._tick_now: float | None = None
        self._held: dict[int, list[Any]] = {}
        # The recurring entry being run right now: popped from the heap, still live.
        self._current: list[Any] | None = None
        # Recurring entries a driver took out of the schedule while their run goes on in
        # a worker pool (fixed-delay): live, in no heap, until `_unpark` puts them back.
        self._parked: dict[int, list[Any]] = {}
        # The parked tasks a driver paused (`_pause`): they stay parked until `_resume`,
        # even when a run of theirs ends meanwhile.
        self._paused: set[int] = set()
        # Live tasks on wall-clock schedules, and the wall-minus-monotonic offset their
        # due times were computed with (re-anchored when it jumps).
        self._wall: dict[int, list[Any]] = {}
        self._offset = 0.0
        # The last wall-clock reading, as its offset and its monotonic time: a jump is a
        # change between two readings (slow NTP drift never is one).
        self._wall_read = 0.0
        self._wall_seen = 0.0

    def _insert(
        self, due: float, fn: Callable[[], object], rec: float | _Plan | None, shown: Shown
    ) -> int:
        """Issue the next id and place a new entry (held if a running tick already passed it)."""
        task_id = self._next_id
        self._next_id = task_id + 1
        entry = [due, task_id, fn, rec, shown]
        self._tasks[task_id] = entry
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[task_id] = entry
        else:
            heappush(self._heap, entry)
        return task_id

    def _now(self, now: Any = None) -> float:
        """Read the clock (or check a reading); never let time go backwards for the schedule."""
        if now is None:
            now = self._clock()
        try:
            if now >= self._last_now and now == now and not isinstance(now, bool):
                self._last_now = now
                return float(now)
        except TypeError:
            pass
        if now != now or isinstance(now, bool) or not isinstance(now, (int, float)):
            # NaN compares false with everything: it would corrupt the heap order.
            raise ValueError(f"clock must return a number of seconds, got {now!r}")
        _log().warning(
            "clock went backwards by %.6f s; keeping the last reading %r",
            self._last_now - now,
            self._last_now,
        )
        return float(self._last_now)

    def _sync_wall(self, now: float) -> None:
        """Read the wall clock; when it has moved, re-anchor every wall-clock task.

        The offset the due times were computed with moves to the new one once it is
        more than `WALL_STEP` away. If the wall clock jumped since the
        previous reading (not slow drift), each plan also applies the clock-step rules
        (``docs/cron.md``): after a step back, a wildcard cron job follows real time
        from the last reading before the step instead of waiting for its old target.
        """
        offset = self._wall_clock() - now
        read, seen = self._wall_read, self._wall_seen
        self._wall_read, self._wall_seen = offset, now
        if not self._wall:
            self._offset = offset
            return
        moved = offset - self._offset
        if abs(moved) <= WALL_STEP:
            return
        jump = offset - read
        step = jump if abs(jump) > WALL_STEP else 0.0
        _log().info(
            "wall clock moved %+.3f s against the monotonic clock; re-anchoring %d task(s)",
            moved,
            len(self._wall),
        )
        self._offset = offset
        since = seen + offset
        # A jump is rare (an NTP step, a resume): fix the due times in place and rebuild
        # the heap, O(n) like a compaction, rather than leave moved copies behind. Every
        # plan hears of the step; the running and the parked entries get their due time
        # from the plan when their run ends (`_advance`).
        current, parked, paused = self._current, self._parked, self._paused
        for task_id, entry in self._wall.items():
            # A paused task is parked but not running: its due time follows the clock.
            running = entry is current or (task_id in parked and task_id not in paused)
            due = entry[3].reanchor(offset, step, since, running)
            if not running:
                entry[0] = due
        self._compact()

    def _advance(self, entry: list[Any], now: float) -> None:
        """Reschedule a recurring entry after its run (rule 4, or its plan)."""
        rec = entry[3]
        if type(rec) is float:
            due = entry[0] + rec
            if due <= now:
                if self._listeners:
                    missed = int((now - due) // rec) + 1
                    self._emit(
                        RunEvent(EventKind.MISSED, entry[1], due, missed=missed, name=_label(entry))
                    )
                due = now + rec
                if due <= now:  # too small for the clock at now: never loop on it
                    due = math.nextafter(now, math.inf)
        else:
            after = self._now() if rec.after_finish else now
            nxt = rec.next(entry[0], after, self._offset)
            if nxt is None:  # the plan is exhausted: the task is finished
                self._retire(entry)
                return
            if nxt <= after and isinstance(rec, _IntervalPlan):
                # An interval too small for the clock at ``after`` (plus no jitter):
                # the next run still comes strictly later, so it never loops.
                nxt = math.nextafter(after, math.inf)
            due = nxt
        entry[0] = due
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[entry[1]] = entry
        else:
            heappush(self._heap, entry)

    def _retire(self, entry: list[Any]) -> None:
        """The task of a popped or parked ``entry`` is finished: no longer live."""
        task_id = entry[1]
        del self._tasks[task_id]
        entry[2] = None
        if self._wall:
            self._wall.pop(task_id, None)

    # -- driver hooks: tickwork._core.runs runs fixed-delay tasks on a pool with these ----

    def _park_current(self) -> None:
        """Keep the recurring task being run out of the schedule until `_unpark`.

        Called from inside its job (a driver's dispatch function): when the job
        returns, the task is not rescheduled; it stays live (``cancel`` works, O(1))
        while the real run goes on elsewhere.
        """
        entry = self._current
        if entry is None:
            raise RuntimeError("_park_current() called outside a recurring task's run")
        self._parked[entry[1]] = entry

    def _unpark(self, task_id: int) -> float | None:
        """Put a parked task back after its run ended elsewhere; return its new due time.

        The plan decides the due time, as if the run had just ended here (fixed-delay:
        ``interval`` after now). Returns ``None`` if the task is not parked (it was
        cancelled meanwhile), is paused (it stays parked until `_resume`) or its
        schedule is exhausted.
        """
        if task_id in self._paused:  # paused meanwhile: it stays out until `_resume`
            return None
        entry = self._parked.pop(task_id, None)
        if entry is None:
            return None
        rec = entry[3]
        if rec is not None and type(rec) is not float and rec.wall:
            self._sync_wall(self._now())
        self._advance(entry, self._now())
        return entry[0] if entry[2] is not None else None

    def _park(self, task_id: int) -> list[Any]:
        """Take a live task out of the schedule until `_unpark` or `_resume`; return its entry.

        For a driver's pause and its trigger of a fixed-delay task. O(1), as `cancel`:
        the heap entry is left behind dead and a live copy of it is parked (and becomes
        the task's entry). A task parked already stays as it is.

        Raises:
            KeyError: ``task_id`` is not a live task.
            RuntimeError: It is the task being run right now.

        """
        parked = self._parked.get(task_id)
        if parked is not None:
            return parked
        entry = self._tasks[task_id]
        if entry is self._current:
            raise RuntimeError(f"_park() called for task {task_id} while it runs")
        if self._held and self._held.pop(task_id, None) is not None:
            live = entry  # in no heap yet
        else:
            live = entry[:]
            entry[2] = None
            # The dead entry keeps its place, but must not tie with its live copy when
            # that is pushed back at the same due time (lists would compare ``fn`` next):
            # ``id - 0.5`` sorts exactly where ``id`` did among the other (integer) ids.
            entry[1] = task_id - 0.5
            self._dead += 1
            self._tasks[task_id] = live
            if task_id in self._wall:
                self._wall[task_id] = live
            if self._dead > len(self._tasks) + COMPACT_SLACK:
                self._compact()
        self._parked[task_id] = live
        return live

    def _pause(self, task_id: int) -> list[Any]:
        """Park a live task until `_resume`, whatever runs of it end meanwhile; return its entry."""
        entry = self._park(task_id)
        self._paused.add(task_id)
        return entry

    def _resume(self, task_id: int, running: bool) -> float | None:
        """Put a paused task back on the schedule; return its due time.

        A due time still ahead is kept. One that passed while the task was paused is
        missed: a one-shot runs at once, a fixed-rate task goes to its next grid slot
        after now, a fixed-delay task to ``interval`` after now, a cron task to its next
        fire time after now. With ``running`` (a fixed-delay task whose run is going
        on) it stays parked, and the end of that run puts it back (`_unpark`).

        Returns ``None`` when it stays parked, or when its schedule ended while it was
        paused (its ``until`` passed): then the task is finished, no longer live.
        """
        self._paused.discard(task_id)
        if running:
            return None
        entry = self._parked.pop(task_id)
        now = self._now()
        rec = entry[3]
        if rec is not None and type(rec) is not float and rec.wall:
            self._sync_wall(now)  # its due time follows the wall clock as of now
        due: float = entry[0]
        if due <= now:
            if rec is None:
                due = now
            elif type(rec) is float:
                due = next_slot(due, rec, now)
            else:
                nxt = rec.resume(due, now, self._offset)
                if nxt is None:  # the schedule ended while it was paused
                    self._retire(entry)
                    return None
                due = nxt
        entry[0] = due
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[task_id] = entry
        else:
            heappush(self._heap, entry)
        return due

    def _compact(self) -> None:
        """Rebuild the heap without dead entries, in place (a running loop holds it)."""
        heap = self._heap
        heap[:] = [entry for entry in heap if entry[2] is not None]
        heapify(heap)
        self._dead = 0

    def _check(self) -> None:
        """Verify every internal invariant; raise AssertionError on the first broken one.

        For tests: O(n), never called by the scheduler itself.
        """
        heap = self._heap
        for i in range(1, len(heap)):
            parent = heap[(i - 1) // 2]
            assert parent[:2] <= heap[i][:2], f"heap order broken at {i}"
        dead = sum(1 for entry in heap if entry[2] is None)
        assert dead == self._dead, f"dead counter {self._dead} != {dead} dead entries"
        live = [entry for entry in heap if entry[2] is not None]
        assert len({id(e) for e in live}) == len(live), "a live entry is in the heap twice"
        expected = {id(e) for e in self._tasks.values()}
        parked = {id(e) for e in self._parked.values()}
        assert not parked & {id(e) for e in live}, "a parked entry is also in the heap"
        assert self._paused <= set(self._parked), "a paused task is not parked"
        for task_id, entry in self._parked.items():
            assert entry[1] == task_id, f"parked under the wrong id: {entry!r}"
        placed = {id(e) for e in live} | {id(e) for e in self._held.values()} | parked
        if self._current is not None:
            placed.add(id(self._current))
        assert placed == expected, "live tasks and heap entries disagree"
        for task_id, entry in self._tasks.items():
            assert entry[1] == task_id and entry[2] is not None, f"bad entry {entry!r}"
            assert task_id < self._next_id, f"task id {task_id} not yet issued"
            rec = entry[3]
            assert rec is None or type(rec) is float or isinstance(rec, _Plan), rec
            is_wall = isinstance(rec, _Plan) and rec.wall
            assert is_wall == (task_id in self._wall), f"wall registry wrong for {task_id}"
            assert not is_wall or self._wall[task_id] is entry, f"stale wall entry {task_id}"
        assert len(self._wall) <= len(self._tasks), "wall registry holds dead tasks"
        assert dead <= len(self._tasks) + COMPACT_SLACK, (
            f"{dead} dead entries exceed {len(self._tasks)} live + {COMPACT_SLACK}"
        )
        if self._max_errors is not None:
            assert len(self.errors) <= self._max_errors, "errors over its bound"


class Scheduler(ScheduleDecorators, _Timeline):
    """Delayed and recurring jobs on a tick-driven, single-threaded core.

    Call `run_pending` regularly (or let a driver do it): it reads the clock once
    and runs every task due at or before that instant, earliest first, equal due
    times in the order they were scheduled. The scheduler is not thread-safe; the
    drivers provide thread-safe and asyncio entry points on top of it.

    Args:
        clock: Zero-argument callable returning seconds as a number, read once per
            `run_pending` and once per `schedule`. Defaults to `time.monotonic`. If it
            ever goes backwards, the scheduler keeps using the largest reading so far
            (time never runs backwards for the schedule; a warning is logged).
        wall_clock: Zero-argument callable returning POSIX seconds, read only while
            wall-clock schedules (`Cron`, `At`) exist, at most once per tick. Defaults to
            ``clock.wall`` if the clock has one (`tickwork.testing.FakeClock` does),
            else `time.time`.
        max_errors: How many entries `errors` keeps (the newest); ``None`` for no bound.
        on_error: Called as ``on_error(task_id, exc)`` after each failed run. If the
            hook itself raises, that is logged and ignored.
        rng: The random source for jitter; pass a seeded `random.Random` for
            reproducible runs.
    """

    __slots__ = ("_rng",)

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        wall_clock: Clock | None = None,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: ErrorHook | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not callable(clock):
            raise TypeError(f"clock must be a zero-argument callable, got {clock!r}")
        if wall_clock is None:
            wall_clock = getattr(clock, "wall", time.time)
        if not callable(wall_clock):
            raise TypeError(f"wall_clock must be a zero-argument callable, got {wall_clock!r}")
        if rng is not None and not isinstance(rng, random.Random):
            raise TypeError(f"rng must be a random.Random or None, got {rng!r}")
        _Timeline.__init__(self, clock, wall_clock, max_errors, on_error)
        self._rng = rng if rng is not None else random.Random()

    # -- the contract ------------------------------------------------------------

    def schedule(
        self,
        delay: float,
        fn: Callable[..., object],
        interval: float | None = None,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
        *,
        fixed_delay: bool = False,
    ) -> int:
        """Schedule ``fn`` to run ``delay`` seconds from now; return its task id.

        The shorthand for `add` with `Once` or `Every`.

        Args:
            delay: Seconds from now until the first run (finite, >= 0).
            fn: The job, called as ``fn(*args, **kwargs)``.
            interval: For a recurring task, seconds between runs (finite, > 0, and at
                least the clock's resolution at the first due time, ``math.ulp(due)``).
            args: Positional arguments for ``fn`` (pass ``args``, ``kwargs`` and
                ``name`` by keyword; they are not keyword-only only because Python
                fills a keyword-only default slower, and this is the hot path).
            kwargs: Keyword arguments for ``fn``. With ``args``, checked against
                ``fn``'s signature now: a call that could never work is refused here.
            name: What `tasks` calls it (default: ``fn``'s qualified name).
            fixed_delay: Measure ``interval`` from the end of each run instead of
                from its due time (fixed-rate, the default, keeps a steady grid).

        Returns:
            The task id: 1, 2, 3, ... in scheduling order (failed calls use none).

        Raises:
            TypeError: ``fn`` is not callable or is a coroutine function (``async def``:
                use `tickwork.AsyncScheduler`), ``delay``/``interval`` is not a number,
                or ``args``/``kwargs`` do not fit ``fn`` (or ``name`` is not a str).
            ValueError: ``delay`` is negative or not finite, ``interval`` is not > 0
                and finite or is below the clock's resolution at the first due time,
                either is over 365,000 days (about 1,000 years), or ``fixed_delay`` is
                given without ``interval``.
        """
        # Plain floats skip the validation call: this is the hot path of timeouts.
        if type(delay) is float and 0.0 <= delay <= MAX_SECONDS:
            seconds = delay
        else:
            seconds = seconds_arg("delay", delay, positive=False)
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        _refuse_coroutine_function("fn", fn, "Scheduler")
        if args or kwargs or name is not None:  # off the hot path: plain calls skip it
            return self._schedule_shown(seconds, fn, interval, fixed_delay, args, kwargs, name)
        if interval is None and fixed_delay is False:  # one-shot timers skip the checks
            return self._insert_plain(seconds, fn, None, None)
        every, rec = self._recurrence(seconds, interval, fixed_delay)
        return self._insert_plain(seconds, fn, rec, every)

    def _insert_plain(
        self,
        seconds: float,
        fn: Callable[[], object],
        rec: float | _Plan | None,
        every: float | None,
    ) -> int:
        """Place a plain `schedule` call's entry ``seconds`` from now; return its id.

        `_insert` for the hot path of timers and timeouts: the clock's fast path read
        here, and an entry with no fifth slot (`tasks` derives what it shows).
        """
        now = self._clock()
        if type(now) is float and now >= self._last_now:
            self._last_now = now
        else:
            now = self._now(now)
        due = now + seconds
        if every is not None and every < math.ulp(due):
            _refuse_interval(every, due)
        task_id = self._next_id
        self._next_id = task_id + 1
        entry = [due, task_id, fn, rec]
        self._tasks[task_id] = entry
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[task_id] = entry
        else:
            heappush(self._heap, entry)
        return task_id

    def _recurrence(
        self, seconds: float, interval: float | None, fixed_delay: bool
    ) -> tuple[float | None, float | _Plan]:
        """`schedule`'s checked ``interval``, and the recurrence its entry holds.

        The recurrence is the interval itself (fixed rate) or, with ``fixed_delay``, a
        plan that measures it from the end of each run.
        """
        every: float | None = None
        if interval is not None:
            if type(interval) is float and 0.0 < interval <= MAX_SECONDS:
                every = interval
            else:
                every = seconds_arg("interval", interval, positive=True)
        if fixed_delay is False and every is not None:
            return every, every
        if fixed_delay is not True:
            raise TypeError(f"fixed_delay must be a bool, got {fixed_delay!r}")
        if every is None:
            raise ValueError("fixed_delay=True needs an interval, got interval=None")
        return every, _DelayPlan(seconds, every, 0.0, self._rng)

    def _schedule_shown(
        self,
        seconds: float,
        fn: Callable[..., object],
        interval: float | None,
        fixed_delay: bool,
        args: tuple[Any, ...] | list[Any],
        kwargs: Mapping[str, Any] | None,
        name: str | None,
    ) -> int:
        """`schedule` with arguments or a name: bound, then given its fifth slot."""
        bound, shown = bind(fn, args, kwargs, name)
        task_id = self.schedule(seconds, bound, interval, fixed_delay=fixed_delay)
        # Valid now (schedule checked it): the equivalent schedule value, for tasks().
        value = (
            Once(seconds)
            if interval is None
            else Every(interval, fixed_delay=fixed_delay is True, first=seconds)
        )
        # The entry sorts by (due, id) and ids are unique: a fifth slot never reorders it.
        self._tasks[task_id].append(Shown(shown.fn, shown.args, shown.kwargs, shown.name, value))
        return task_id

    def add(
        self,
        schedule: Schedule,
        fn: Callable[..., object],
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Run ``fn`` on ``schedule`` (`Once`, `At`, `Every` or `Cron`); return its task id.

        ``fn`` is called as ``fn(*args, **kwargs)``; the arguments are checked against its
        signature here. ``name`` is what `tasks` calls it (default: its qualified name).

        Raises:
            TypeError: ``schedule`` is not a schedule value, ``fn`` is not callable or
                is a coroutine function, or ``args``/``kwargs`` do not fit it.
            ValueError: An interval schedule's interval is below the clock's resolution
                at the first due time.
        """
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a Once, At, Every or Cron value, got {schedule!r}")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        _refuse_coroutine_function("fn", fn, "Scheduler")
        schedule = schedule._seeded(name)  # H and a stable jitter hash the task's name
        fn, shown = bind(fn, args, kwargs, name, schedule=schedule)
        plan = schedule._plan(self._rng)
        now = self._now()
        if plan.wall:
            self._sync_wall(now)
        due = plan.first(now, self._offset)
        if plan.over:  # its until came before its first slot: a task with no runs
            task_id = self._next_id
            self._next_id = task_id + 1
            return task_id
        every = plan.interval
        if every is not None and every < math.ulp(due):
            _refuse_interval(every, due)
        rec: float | _Plan | None = plan
        if type(plan) is _OncePlan:
            rec = None
        elif isinstance(plan, _RatePlan) and not plan.jitter and plan.until is None:
            rec = plan.every
        task_id = self._insert(due, fn, rec, shown)
        if plan.wall:
            self._wall[task_id] = self._tasks[task_id]
        return task_id

    def cancel(self, task_id: int) -> bool:
        """Cancel a task in O(1); return whether a live task was cancelled.

        Returns ``False`` for an unknown id, an already cancelled task and a one-shot
        task that has run (or is running). A task may cancel itself or any other task
        while it runs; a recurring task that cancels itself is not rescheduled.
        """
        entry = self._tasks.pop(task_id, None)
        if entry is None:
            return False
        entry[2] = None  # dead; also frees the callable (and what it holds) now
        if self._wall:
            self._wall.pop(task_id, None)
        if self._held and self._held.pop(task_id, None) is not None:
            return True
        if self._parked and self._parked.pop(task_id, None) is not None:
            self._paused.discard(task_id)
            return True
        if entry is not self._current:
            self._dead += 1
            if self._dead > len(self._tasks) + COMPACT_SLACK:
                self._compact()
        return True

    def run_pending(self) -> int:
        """Run every task due now; return how many ran (failed runs count).

        Reads the clock once, at the start (``now``), and runs what is due at or
        before ``now``: earliest due time first, equal due times in scheduling order.
        Tasks that a job schedules during the call wait for the next call, even if
        already due, so a job that re-schedules itself with delay 0 cannot make one
        call run forever. A recurring task goes to ``due + interval``, or to
        ``now + interval`` if that is not in the future (missed runs are skipped, not
        replayed); with ``fixed_delay`` it goes to ``interval`` after the job returns.

        A job's `Exception` is recorded in `errors`, logged and passed to ``on_error``;
        the call goes on with the rest. A job that returns an awaitable (a plain
        callable wrapping an ``async def``) failed too: the awaitable is never awaited
        (a coroutine is closed) and a `TypeError` saying so is recorded.
        `BaseException`s that are not `Exception` (`KeyboardInterrupt`, `SystemExit`)
        propagate; the scheduler stays consistent (the interrupted task counts as run)
        and the next call runs the rest.

        Raises:
            RuntimeError: Called from inside a job of the same scheduler.
        """
        if self._tick_now is not None:
            raise RuntimeError("run_pending() called from inside a job of the same scheduler")
        now = self._clock()
        if type(now) is float and now >= self._last_now:
            self._last_now = now
        else:
            now = self._now(now)
        if self._wall:
            self._sync_wall(now)
        heap = self._heap
        if not heap or heap[0][0] > now:
            return 0
        self._tick_now = now
        try:
            return self._run_due(heap, now)
        finally:
            self._end_tick()

    def _run_due(self, heap: list[list[Any]], now: float) -> int:
        """Pop and run every entry due at ``now``; return how many ran (`run_pending`).

        The fast paths are here, inline: a plain one-shot, and a plain fixed-rate task
        whose next slot does not depend on its run, so its entry goes back before the
        call (a self-cancel marks it dead there). The rest go to `_run_slow`.
        """
        tasks = self._tasks
        observed = bool(self._listeners)
        ran = 0
        while heap and heap[0][0] <= now:
            entry = heappop(heap)
            fn = entry[2]
            if fn is None:
                self._dead -= 1
                continue
            ran += 1
            rec = entry[3]
            if observed or (rec is not None and type(rec) is not float):
                self._run_slow(entry, now)
                continue
            if rec is None:
                del tasks[entry[1]]
            else:
                due = entry[0] + rec
                if due <= now:
                    due = now + rec
                    if due <= now:  # too small for the clock at now: never loop on it
                        due = math.nextafter(now, math.inf)
                entry[0] = due
                heappush(heap, entry)
            try:
                if (result := fn()) is not None:
                    _check_result(fn, result)
            except Exception as exc:
                self._failed(entry[1], exc)
        return ran

    def _end_tick(self) -> None:
        """End a `run_pending` call: the held entries join the heap, dead ones may go."""
        self._tick_now = None
        if self._held:
            heap = self._heap
            for held in self._held.values():
                heappush(heap, held)
            self._held.clear()
        if self._dead > len(self._tasks) + COMPACT_SLACK:
            self._compact()

    def next_run_in(self) -> float | None:
        """Seconds until the next task is due: 0.0 if overdue, ``None`` if none."""
        heap = self._heap
        while heap and heap[0][2] is None:
            heappop(heap)
            self._dead -= 1
        if self._held:
            return 0.0
        if not heap:
            return None
        now = self._clock()
        if type(now) is float and now >= self._last_now:
            self._last_now = now
        else:
            now = self._now(now)
        wait: float = heap[0][0] - now
        return wait if wait > 0.0 else 0.0

    def next_wakeup_in(self) -> float | None:
        """How long a driver may wait before the next `run_pending`; ``None``: until told.

        `next_run_in`, capped at `WALL_CHECK_INTERVAL` while wall-clock schedules exist,
        so that a wall-clock step or a resume from suspend is noticed in time.
        """
        wait = self.next_run_in()
        if self._wall and (wait is None or wait > WALL_CHECK_INTERVAL):
            return WALL_CHECK_INTERVAL
        return wait

    # -- introspection -----------------------------------------------------------

    def __len__(self) -> int:
        """The number of live tasks (scheduled, not cancelled, not finished)."""
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a live task."""
        return task_id in self._tasks

    def tasks(self) -> list[TaskInfo]:
        """The live tasks with their next due time, in the order they will run.

        Each shows its name, the schedule value it runs on, its next run as an aware
        UTC `datetime` and the arguments its job is called with.
        """
        now = self._now()
        offset = self._wall_clock() - now
        entries = sorted(self._tasks.values(), key=lambda e: (e[0], e[1]))
        return [_task_info(e, now, offset) for e in entries]

    def _run_slow(self, entry: list[Any], now: float) -> None:
        """Run one entry off the fast path: with listeners, or with a `_Plan`."""
        task_id, due, fn, rec = entry[1], entry[0], entry[2], entry[3]
        if rec is not None and type(rec) is not float and rec.over:
            # A wall-clock step moved its slot past the schedule's until: it ends here.
            self._retire(entry)
            return
        repeats = rec is not None and (type(rec) is float or rec.repeats)
        if repeats:
            self._current = entry
        else:
            self._retire(entry)
        observed = bool(self._listeners)
        label, started = self._started(entry) if observed else ("", 0.0)
        try:
            if (result := fn()) is not None:
                _check_result(fn, result)
        except Exception as exc:
            self._failed(task_id, exc)
            if observed:
                self._ended(task_id, due, started, label, exc)
        else:
            if observed:
                self._ended(task_id, due, started, label, None)
        finally:
            if repeats:
                self._current = None
                if entry[2] is not None and not (self._parked and task_id in self._parked):
                    self._advance(entry, now)
