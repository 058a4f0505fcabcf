"""The tick-driven core: `Scheduler`.

The core never sleeps, never starts a thread and never reads a clock except the one it
is given. Something outside (a test, a thread driver, an asyncio task) calls
`Scheduler.run_pending` and it runs whatever is due. The contract is ``SPEC.md``.

Data structure: a binary heap of entries ``[due, task_id, fn, interval, fixed_delay]``
plus a dict ``task_id -> entry``. Heap order is ``(due, task_id)``, so equal due
times run in the order the tasks were scheduled. ``cancel`` is O(1): it drops the
dict entry and marks the heap entry dead (``fn = None``); dead entries are discarded
when they reach the top of the heap, and the heap is compacted whenever dead entries
outnumber live ones by more than `COMPACT_SLACK` (see `Scheduler._maybe_compact`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from heapq import heapify, heappop, heappush
from numbers import Real
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import logging

__all__ = ["COMPACT_SLACK", "EventKind", "RunEvent", "Scheduler", "TaskInfo"]


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

# Heap entry layout. A list (not a tuple) so cancel can mark it dead in place and a
# recurring task can be re-pushed without allocating; lists compare element-wise in C,
# and ``(due, task_id)`` is unique, so ``fn`` is never compared.
_DUE: Final = 0
_ID: Final = 1
_FN: Final = 2
_INTERVAL: Final = 3
_FIXED_DELAY: Final = 4

Clock = Callable[[], float]
ErrorHook = Callable[[int, Exception], object]


class EventKind(Enum):
    """What happened to a run, as reported to listeners."""

    STARTED = "started"
    """The job is about to be called."""
    FINISHED = "finished"
    """The job returned normally."""
    FAILED = "failed"
    """The job raised an `Exception` (see `RunEvent.error`)."""
    SKIPPED = "skipped"
    """A due run was not started because the previous run was still going (drivers)."""
    MISSED = "missed"
    """Fixed-rate slots were skipped because the scheduler ran late (`RunEvent.missed`)."""


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One event in the life of a run, delivered to every listener.

    Times are readings of the scheduler's clock (seconds, the same scale as the due
    times). ``started`` and ``duration`` are ``None`` where they do not apply (a
    skipped or missed run never started; a started run has no duration yet).
    """

    kind: EventKind
    """What happened."""
    task_id: int
    """The task the run belongs to."""
    scheduled: float
    """The due time of the run."""
    started: float | None = None
    """When the job was called."""
    duration: float | None = None
    """How long the job ran, for FINISHED and FAILED."""
    error: Exception | None = None
    """The exception, for FAILED."""
    missed: int = 0
    """How many fixed-rate slots were skipped, for MISSED."""


Listener = Callable[[RunEvent], object]


def _deliver(listeners: tuple[Listener, ...] | list[Listener], event: RunEvent) -> None:
    """Call every listener with ``event``; one that raises is logged and skipped.

    Shared by the core (`Scheduler._emit`) and the drivers (``tickwork._policy``), so
    every event source contains a failing listener the same way.
    """
    for listener in tuple(listeners):
        try:
            listener(event)
        except Exception:
            _log().exception("event listener %r raised on %s", listener, event)


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
    """Seconds between runs, or ``None`` for a one-shot task."""
    fixed_delay: bool
    """Whether the interval is measured from the end of a run (else fixed-rate)."""


def _seconds(name: str, value: object, *, positive: bool) -> float:
    """Validate a duration argument and return it as a float."""
    if type(value) is float or type(value) is int:
        seconds = float(value)
    elif isinstance(value, bool) or not isinstance(value, Real):
        # bool is an int, but ``schedule(True, fn)`` is a bug, not a one-second delay.
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    else:
        seconds = float(value)
    if positive:
        if not (seconds > 0.0 and seconds != math.inf):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    elif not (seconds >= 0.0 and seconds != math.inf):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return seconds


class Scheduler:
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
        max_errors: How many entries `errors` keeps (the newest); ``None`` for no bound.
        on_error: Called as ``on_error(task_id, exc)`` after each failed run. If the
            hook itself raises, that is logged and ignored.

    """

    __slots__ = (
        "_clock",
        "_current",
        "_dead",
        "_heap",
        "_held",
        "_last_now",
        "_listeners",
        "_max_errors",
        "_next_id",
        "_on_error",
        "_parked",
        "_tasks",
        "_tick_now",
        "errors",
    )

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: ErrorHook | None = None,
    ) -> None:
        if not callable(clock):
            raise TypeError(f"clock must be a zero-argument callable, got {clock!r}")
        if max_errors is not None and (
            isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0
        ):
            raise ValueError(f"max_errors must be an int >= 0 or None, got {max_errors!r}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable or None, got {on_error!r}")
        self._clock = clock
        self._max_errors = max_errors
        self._on_error = on_error
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
        self._listeners: list[Listener] = []
        self.errors: list[str] = []
        """``"task <id>: <message>"`` for each failed run, oldest first (bounded)."""

    # -- the contract ------------------------------------------------------------

    def schedule(
        self,
        delay: float,
        fn: Callable[[], object],
        interval: float | None = None,
        *,
        fixed_delay: bool = False,
    ) -> int:
        """Schedule ``fn`` to run ``delay`` seconds from now; return its task id.

        Args:
            delay: Seconds from now until the first run (finite, >= 0).
            fn: Zero-argument callable.
            interval: For a recurring task, seconds between runs (finite, > 0).
            fixed_delay: Measure ``interval`` from the end of each run instead of
                from its due time (fixed-rate, the default, keeps a steady grid).

        Returns:
            The task id: 1, 2, 3, ... in scheduling order (failed calls use none).

        Raises:
            TypeError: ``fn`` is not callable, or ``delay``/``interval`` is not a number.
            ValueError: ``delay`` is negative or not finite, ``interval`` is not > 0
                and finite, or ``fixed_delay`` is given without ``interval``.

        """
        seconds = _seconds("delay", delay, positive=False)
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        every = None if interval is None else _seconds("interval", interval, positive=True)
        if fixed_delay is not False:
            if fixed_delay is not True:
                raise TypeError(f"fixed_delay must be a bool, got {fixed_delay!r}")
            if every is None:
                raise ValueError("fixed_delay=True needs an interval, got interval=None")
        due = self._now() + seconds
        task_id = self._next_id
        self._next_id = task_id + 1
        entry = [due, task_id, fn, every, fixed_delay]
        self._tasks[task_id] = entry
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[task_id] = entry
        else:
            heappush(self._heap, entry)
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
        entry[_FN] = None  # dead; also frees the callable (and what it holds) now
        if self._held and self._held.pop(task_id, None) is not None:
            return True
        if self._parked and self._parked.pop(task_id, None) is not None:
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
        the call goes on with the rest. `BaseException`s that are not `Exception`
        (`KeyboardInterrupt`, `SystemExit`) propagate; the scheduler stays consistent
        (the interrupted task counts as run) and the next call runs the rest.

        Raises:
            RuntimeError: Called from inside a job of the same scheduler.

        """
        if self._tick_now is not None:
            raise RuntimeError("run_pending() called from inside a job of the same scheduler")
        now = self._now()
        heap = self._heap
        if not heap or heap[0][_DUE] > now:
            return 0
        if self._listeners:
            return self._run_observed(now)
        tasks = self._tasks
        ran = 0
        self._tick_now = now
        try:
            while heap and heap[0][_DUE] <= now:
                entry = heappop(heap)
                fn = entry[_FN]
                if fn is None:
                    self._dead -= 1
                    continue
                ran += 1
                every = entry[_INTERVAL]
                if every is None:
                    del tasks[entry[_ID]]
                    entry[_FN] = None
                    try:
                        fn()
                    except Exception as exc:
                        self._failed(entry[_ID], exc)
                    continue
                self._current = entry
                try:
                    fn()
                except Exception as exc:
                    self._failed(entry[_ID], exc)
                finally:
                    self._current = None
                    if entry[_FN] is not None and not (self._parked and entry[_ID] in self._parked):
                        self._reschedule(entry, now, every)
        finally:
            self._tick_now = None
            if self._held:
                for held in self._held.values():
                    heappush(heap, held)
                self._held.clear()
            if self._dead > len(tasks) + COMPACT_SLACK:
                self._compact()
        return ran

    def next_run_in(self) -> float | None:
        """Seconds until the next task is due: 0.0 if overdue, ``None`` if none."""
        heap = self._heap
        while heap and heap[0][_FN] is None:
            heappop(heap)
            self._dead -= 1
        if self._held:
            return 0.0
        if not heap:
            return None
        wait = heap[0][_DUE] - self._now()
        return float(wait) if wait > 0.0 else 0.0

    # -- introspection -----------------------------------------------------------

    def __len__(self) -> int:
        """The number of live tasks (scheduled, not cancelled, not finished)."""
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a live task."""
        return task_id in self._tasks

    def tasks(self) -> list[TaskInfo]:
        """The live tasks with their next due time, in the order they will run."""
        entries = sorted(self._tasks.values(), key=lambda e: (e[_DUE], e[_ID]))
        return [TaskInfo(e[_ID], e[_DUE], e[_FN], e[_INTERVAL], e[_FIXED_DELAY]) for e in entries]

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

    # -- internals ---------------------------------------------------------------

    def _now(self) -> float:
        """Read the clock; never let the schedule see time go backwards."""
        now = self._clock()
        try:
            if now >= self._last_now:
                self._last_now = now
                return now
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
        return self._last_now

    def _reschedule(self, entry: list[Any], now: float, every: float) -> None:
        """Put a recurring entry that just ran back on the heap (rule 4 / fixed-delay)."""
        if entry[_FIXED_DELAY]:
            due = self._now() + every  # never below ``now``: _now() does not go back
        else:
            due = entry[_DUE] + every
            if due <= now:
                if self._listeners:
                    self._emit(
                        RunEvent(
                            EventKind.MISSED,
                            entry[_ID],
                            due,
                            missed=int((now - due) // every) + 1,
                        )
                    )
                due = now + every
        entry[_DUE] = due
        heappush(self._heap, entry)

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

    def _run_observed(self, now: float) -> int:
        """`run_pending` with listeners: the same loop, timing each job and emitting events."""
        heap = self._heap
        tasks = self._tasks
        clock = self._clock
        ran = 0
        self._tick_now = now
        try:
            while heap and heap[0][_DUE] <= now:
                entry = heappop(heap)
                fn = entry[_FN]
                if fn is None:
                    self._dead -= 1
                    continue
                ran += 1
                task_id, due, every = entry[_ID], entry[_DUE], entry[_INTERVAL]
                if every is None:
                    del tasks[task_id]
                    entry[_FN] = None
                else:
                    self._current = entry
                started = clock()
                self._emit(RunEvent(EventKind.STARTED, task_id, due, started))
                try:
                    fn()
                except Exception as exc:
                    self._failed(task_id, exc)
                    self._emit(
                        RunEvent(EventKind.FAILED, task_id, due, started, clock() - started, exc)
                    )
                else:
                    self._emit(
                        RunEvent(EventKind.FINISHED, task_id, due, started, clock() - started)
                    )
                finally:
                    if every is not None:
                        self._current = None
                        if entry[_FN] is not None and not (
                            self._parked and entry[_ID] in self._parked
                        ):
                            self._reschedule(entry, now, every)
        finally:
            self._tick_now = None
            if self._held:
                for held in self._held.values():
                    heappush(heap, held)
                self._held.clear()
            if self._dead > len(tasks) + COMPACT_SLACK:
                self._compact()
        return ran

    def _emit(self, event: RunEvent) -> None:
        """Deliver ``event`` to every listener; a listener that raises is only logged."""
        _deliver(self._listeners, event)

    # -- driver hooks: tickwork._policy runs fixed-delay tasks on a pool with these ----

    def _park_current(self) -> None:
        """Keep the recurring task being run out of the schedule until `_unpark`.

        Called from inside its job (a driver's dispatch function): when the job
        returns, the task is not rescheduled; it stays live (``cancel`` works, O(1))
        while the real run goes on elsewhere.
        """
        entry = self._current
        if entry is None:
            raise RuntimeError("_park_current() called outside a recurring task's run")
        self._parked[entry[_ID]] = entry

    def _unpark(self, task_id: int, delay: float) -> float | None:
        """Put a parked task back, due ``delay`` seconds from now; return that due time.

        Returns ``None`` if the task is not parked (it was cancelled meanwhile).
        """
        entry = self._parked.pop(task_id, None)
        if entry is None:
            return None
        due = self._now() + delay
        entry[_DUE] = due
        tick_now = self._tick_now
        if tick_now is not None and due <= tick_now:
            self._held[task_id] = entry
        else:
            heappush(self._heap, entry)
        return due

    def _compact(self) -> None:
        """Rebuild the heap without dead entries, in place (a running loop holds it)."""
        heap = self._heap
        heap[:] = [entry for entry in heap if entry[_FN] is not None]
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
        dead = sum(1 for entry in heap if entry[_FN] is None)
        assert dead == self._dead, f"dead counter {self._dead} != {dead} dead entries"
        live = [entry for entry in heap if entry[_FN] is not None]
        assert len({id(e) for e in live}) == len(live), "a live entry is in the heap twice"
        expected = {id(e) for e in self._tasks.values()}
        parked = {id(e) for e in self._parked.values()}
        assert not parked & {id(e) for e in live}, "a parked entry is also in the heap"
        for task_id, entry in self._parked.items():
            assert entry[_ID] == task_id, f"parked under the wrong id: {entry!r}"
        placed = {id(e) for e in live} | {id(e) for e in self._held.values()} | parked
        if self._current is not None:
            placed.add(id(self._current))
        assert placed == expected, "live tasks and heap entries disagree"
        for task_id, entry in self._tasks.items():
            assert entry[_ID] == task_id and entry[_FN] is not None, f"bad entry {entry!r}"
            assert task_id < self._next_id, f"task id {task_id} not yet issued"
        assert dead <= len(self._tasks) + COMPACT_SLACK, (
            f"{dead} dead entries exceed {len(self._tasks)} live + {COMPACT_SLACK}"
        )
        if self._max_errors is not None:
            assert len(self.errors) <= self._max_errors, "errors over its bound"
