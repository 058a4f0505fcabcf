"""What happens when a run is due and when it finishes, for drivers that use a pool.

Shared by every driver (thread now, asyncio next), so this module imports neither
`threading` nor `asyncio`. The driver owns the mutual exclusion and the hand-off:

- Methods marked *locked* must be called with the driver's lock held (thread driver) or
  from the one task that owns the core (asyncio driver). They never call user code.
- Methods marked *unlocked* call user code (the job, listeners, ``on_error``) and must be
  called without that lock, so a job, a listener or a hook may call back into the
  driver from any thread without deadlocking.

The life of a run:

1. The core finds a task due and calls its `_Task.dispatch` (*locked*, inside
   ``Scheduler.run_pending``). Dispatch applies the overlap policy and, if the run may
   go, appends a `Run` to `Policy.ready` (the driver submits it after unlocking).
2. A worker calls `Policy.begin` (*locked*): a run of a cancelled task or of a stopped
   driver is dropped here, so no run starts after ``cancel`` returned True or after
   ``stop``.
3. The worker calls `Policy.call` (*unlocked*): STARTED, the job, the timing. A
   driver that awaits coroutine jobs uses `Policy.call_async`, the same step awaited.
4. The worker calls `Policy.end` (*locked*): the running set, errors, the next run of a
   fixed-delay task, a queued run; then `Policy.report` (*unlocked*): the log, the
   ``on_error`` hook, FINISHED or FAILED.

Events produced while locked (SKIPPED, MISSED) wait in `Policy.outbox`; the driver
delivers them with `Policy.deliver` after unlocking.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from tickwork._core.args import Bound, seconds
from tickwork._core.errors import JobInterrupted
from tickwork._core.events import EventKind, Listener, RunEvent, _deliver
from tickwork._core.scheduler import _DUE, _REC, Scheduler, Shown, TaskInfo, _check_result, name_of
from tickwork._core.schedules import Schedule, _DelayPlan, _Plan
from tickwork._core.vocabulary import OVERLAP_POLICIES, Overlap, overlap_problem

__all__ = ["OVERLAP_POLICIES", "Overlap", "Policy", "Run", "Triggered", "seconds_or_none"]


_log = logging.getLogger("tickwork")


def seconds_or_none(name: str, value: object, *, positive: bool) -> float | None:
    """Check a driver's optional timeout argument: ``None`` or a finite number of seconds.

    Raises:
        ValueError: ``value`` is not ``None`` or a finite number ``>= 0`` (``> 0`` with
            ``positive``); the message names ``name`` and shows the value.

    """
    bound: Bound = "> 0" if positive else ">= 0"
    return seconds(name, value, bound=bound, optional=True, type_error=ValueError)


class _Task:
    """A driver's view of one task: its job, overlap policy and run state."""

    __slots__ = (
        "cancelled",
        "driver",
        "entry",
        "fixed_delay",
        "fn",
        "max_running",
        "note",
        "overlap",
        "paused",
        "policy",
        "queued",
        "repeats",
        "running",
        "shown",
        "skipped",
        "task_id",
    )

    def __init__(
        self,
        policy: Policy,
        fn: Callable[[], object],
        overlap: Overlap,
        max_running: int | None,
    ) -> None:
        self.policy = policy
        self.fn = fn
        self.shown: Shown | None = None  # the job as given, with arguments and name
        # Set from the core's entry once the task is in the core (see Policy._attach).
        self.repeats = False
        self.fixed_delay = False
        self.overlap = overlap
        self.max_running = max_running
        self.task_id = 0
        # The core's heap entry; only its due time (slot _DUE) is read, for event
        # timestamps and for deciding whether the driver must wake up early.
        self.entry: list[Any] = []
        self.running = 0  # runs handed to the pool and not yet finished
        self.queued: float | None = None  # due time of the one run waiting (queue)
        self.skipped = 0
        self.cancelled = False
        self.paused = False  # no run of it starts but triggered ones (`Policy.pause`)
        self.note: str | None = None
        # What the driver needs to know to run it (the asyncio driver: how to call fn
        # and its timeout); never read by the policy.
        self.driver: Any = None

    def name(self) -> str:
        """The task's name as `tasks` shows it: given, else its job's qualified name."""
        shown = self.shown
        if shown is None:
            return name_of(self.fn)
        return shown.name or name_of(shown.fn)

    def dispatch(self) -> None:
        """The function the core runs when this task is due (*locked*)."""
        self.policy._due(self)


class Run:
    """One run of a task on the pool: what a driver submits to its executor."""

    __slots__ = ("duration", "error", "scheduled", "started", "task")

    #: A run asked for by `Policy.trigger` (`Triggered`): it starts even if its task is
    #: paused. A class attribute, so an ordinary run pays nothing for it.
    forced: ClassVar[bool] = False

    def __init__(self, task: _Task, scheduled: float) -> None:
        self.task = task
        self.scheduled = scheduled
        self.started: float | None = None
        self.duration = 0.0
        self.error: Exception | None = None


class Triggered(Run):
    """A run asked for by `Policy.trigger`, outside the task's schedule."""

    __slots__ = ()
    forced = True


def _task_id_arg(task_id: object) -> int:
    """Check a task id argument: an int (a `bool` is refused)."""
    if isinstance(task_id, bool) or not isinstance(task_id, int):
        raise TypeError(f"task_id must be an int, got {task_id!r}")
    return task_id


class Policy:
    """Overlap, fixed-delay, the running set, counters and events for a pooled driver.

    Args:
        core: The core scheduler the driver owns (its clock, errors and hooks are used).
        clock: The same clock as the core's, read to time runs.

    """

    def __init__(self, core: Scheduler, clock: Callable[[], float]) -> None:
        self.core = core
        self.clock = clock
        self.tasks: dict[int, _Task] = {}
        self.running: dict[int, int] = {}
        self.in_progress = 0  # runs whose job has been called and has not returned
        self.skipped_total = 0
        self.stopped = False
        self.ready: list[Run] = []
        self.outbox: list[RunEvent] = []
        self.listeners: list[Listener] = []
        # The driver sets ``deadline`` to the clock time it sleeps until (-inf while it
        # is awake and will look again anyway). Anything that becomes due before it
        # sets ``wake``, and the driver wakes its timer.
        self.deadline = -math.inf
        self.wake = False

    # -- locked: the driver's entry points --------------------------------------

    def schedule(
        self,
        delay: float,
        fn: Callable[[], object],
        interval: float | None,
        fixed_delay: bool,
        overlap: Overlap,
        max_running: int | None,
        driver: object = None,
        shown: Shown | None = None,
    ) -> int:
        """Schedule a task on the core with the shorthand arguments (*locked*).

        ``driver`` is kept on the task for the driver (`_Task.driver`); ``shown`` is
        what `infos` shows of the job (from `tickwork._core.scheduler.bind`).
        """
        task = self._new_task(fn, overlap, max_running, driver)
        task.shown = shown
        return self._attach(
            task, self.core.schedule(delay, task.dispatch, interval, fixed_delay=fixed_delay)
        )

    def add(
        self,
        schedule: Schedule,
        fn: Callable[[], object],
        overlap: Overlap,
        max_running: int | None,
        driver: object = None,
        shown: Shown | None = None,
    ) -> int:
        """Schedule a task on the core with a schedule value (*locked*); the rest as above."""
        task = self._new_task(fn, overlap, max_running, driver)
        task.shown = shown
        return self._attach(task, self.core.add(schedule, task.dispatch))

    def _new_task(
        self, fn: Callable[[], object], overlap: Overlap, max_running: int | None, driver: object
    ) -> _Task:
        """Validate the driver's options and make the task (nothing is scheduled yet)."""
        if (problem := overlap_problem(overlap)) is not None:
            raise ValueError(problem)
        if max_running is not None:
            if isinstance(max_running, bool) or not isinstance(max_running, int):
                raise TypeError(f"max_running must be an int or None, got {max_running!r}")
            if max_running < 1:
                raise ValueError(f"max_running must be >= 1, got {max_running!r}")
            if overlap != "allow":
                raise ValueError(f"max_running needs overlap='allow', got overlap={overlap!r}")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        task = _Task(self, fn, overlap, max_running)
        task.driver = driver
        return task

    def _attach(self, task: _Task, task_id: int) -> int:
        """Bind a task to the core entry that now runs its dispatch; wake if it is sooner."""
        entry = self.core._tasks[task_id]
        rec = entry[_REC]
        task.task_id = task_id
        task.entry = entry
        task.repeats = rec is not None and (not isinstance(rec, _Plan) or rec.repeats)
        task.fixed_delay = type(rec) is _DelayPlan
        self.tasks[task_id] = task
        if entry[_DUE] < self.deadline:
            self.wake = True
        return task_id

    def cancel(self, task_id: int) -> bool:
        """Cancel a task; no run of it starts after this returns True (*locked*)."""
        if not self.core.cancel(task_id):
            return False
        task = self.tasks.pop(task_id)
        task.cancelled = True
        task.queued = None
        return True

    def pause(self, task_id: int, note: str | None) -> bool:
        """Pause a task: no run of it starts until `resume`, but triggered ones (*locked*).

        Its heap entry is parked in the core, so it is never due; a run handed over
        but not started is dropped by `begin`, and a queued run is forgotten. Returns
        False for an unknown id (as `cancel`) and for a task paused already (which
        keeps its note).

        Raises:
            TypeError: ``task_id`` is not an int, or ``note`` is not a str or None.

        """
        _task_id_arg(task_id)
        if note is not None and not isinstance(note, str):
            raise TypeError(f"note must be a str or None, got {note!r}")
        task = self.tasks.get(task_id)
        if task is None or task.paused:
            return False
        task.entry = self.core._pause(task_id)
        task.paused = True
        task.note = note
        task.queued = None
        return True

    def resume(self, task_id: int) -> bool:
        """Resume a paused task at its next slot after now (*locked*); see `Scheduler._resume`.

        Returns False for an unknown id and for a task that is not paused. A task whose
        schedule ended while it was paused (an ``until`` in the past) ends here.

        Raises:
            TypeError: ``task_id`` is not an int.

        """
        _task_id_arg(task_id)
        task = self.tasks.get(task_id)
        if task is None or not task.paused:
            return False
        task.paused = False
        task.note = None
        core = self.core
        due = core._resume(task_id, task.fixed_delay and task.running > 0)
        entry = core._tasks.get(task_id)
        if entry is None:  # finished: its until passed while it was paused
            del self.tasks[task_id]
            return True
        task.entry = entry
        if due is not None and due < self.deadline:
            self.wake = True
        return True

    def trigger(self, task_id: int) -> bool:
        """One run of a task now, outside its schedule, under its overlap policy (*locked*).

        A recurring task keeps its schedule (a fixed-rate grid does not move); a
        fixed-delay task counts the run as one of its own: it is off the schedule while
        the run goes on and due ``interval`` after it ends, so it still never overlaps
        itself. A one-shot task runs now instead of at its due time (it is then
        finished). A paused task runs too and stays paused. While a run of the task is
        going on, the overlap policy decides as for a due run: ``"skip"`` (and any
        fixed-delay task) skips it, counted and reported as SKIPPED; ``"queue"`` queues
        it if nothing waits; ``"allow"`` runs it alongside, up to ``max_running``.

        Returns:
            Whether a run was made ready (the driver submits it, `take`) or queued:
            False for an unknown id and for a run the overlap policy skipped.

        Raises:
            TypeError: ``task_id`` is not an int.

        """
        _task_id_arg(task_id)
        task = self.tasks.get(task_id)
        if task is None:
            return False
        core = self.core
        now = core._now()
        if not task.repeats:
            core.cancel(task_id)  # its run is this one: retired as at its due time
            del self.tasks[task_id]
        elif task.running:
            overlap = task.overlap
            if not task.fixed_delay and overlap == "queue" and task.queued is None:
                task.queued = now
                return True
            if (
                task.fixed_delay
                or overlap != "allow"
                or (task.max_running is not None and task.running >= task.max_running)
            ):
                self._skip(task, now)
                return False
        elif task.fixed_delay:
            task.entry = core._park(task_id)  # off the schedule until the run ends
        self._add_run(task, now, Triggered)
        return True

    def take(self) -> tuple[list[Run], list[RunEvent]]:
        """Hand over the runs to submit and the events to deliver (*locked*).

        The lists returned are the caller's alone, even when empty: the caller reads
        them after unlocking, while another thread may dispatch into ``ready`` and
        ``outbox``. Handing out those lists themselves would let a run added meanwhile
        be submitted by both that thread and the caller, so it would run twice.
        """
        ready, outbox = self.ready, self.outbox
        if ready:
            self.ready = []
        else:
            ready = []
        if outbox:
            self.outbox = []
        else:
            outbox = []
        return ready, outbox

    def add_listener(self, listener: Listener) -> None:
        """Deliver every run's events to ``listener`` from now on (*locked*)."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        if not self.listeners:
            self.core.add_listener(self.watch_missed)
        # Copy on write: unlocked readers iterate whichever list they picked up.
        self.listeners = [*self.listeners, listener]

    def remove_listener(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored (*locked*)."""
        if listener in self.listeners:
            listeners = list(self.listeners)
            listeners.remove(listener)
            self.listeners = listeners
            if not listeners:
                self.core.remove_listener(self.watch_missed)

    def watch_missed(self, event: RunEvent) -> None:
        """Core listener: keep the core's MISSED events for `deliver` (*locked*).

        The core only computes MISSED events while it has a listener, so the driver
        registers this one only while it has listeners of its own. The core's other
        events describe `_Task.dispatch`, not the job, and are dropped.
        """
        if event.kind is EventKind.MISSED:
            task = self.tasks.get(event.task_id)  # the core named it after dispatch
            name = task.name() if task is not None else None
            self.outbox.append(dataclasses.replace(event, name=name))

    def _due(self, task: _Task) -> None:
        """A task is due: start a run, queue one, or skip it (*locked*)."""
        scheduled = task.entry[_DUE]
        if not task.repeats:
            # The core has retired a one-shot task's id as it calls dispatch.
            del self.tasks[task.task_id]
        elif task.fixed_delay:
            # Off the heap until the run ends, so it can never overlap itself.
            self.core._park_current()
        elif task.running:
            overlap = task.overlap
            if overlap == "queue" and task.queued is None:
                task.queued = scheduled
                return
            if overlap != "allow" or (
                task.max_running is not None and task.running >= task.max_running
            ):
                self._skip(task, scheduled)
                return
        self._add_run(task, scheduled)

    def _skip(self, task: _Task, scheduled: float) -> None:
        """Skip a run because of overlap: count, log and report it (*locked*)."""
        task.skipped += 1
        self.skipped_total += 1
        _log.debug(
            "task %d: run due at %r skipped, %d still running",
            task.task_id,
            scheduled,
            task.running,
        )
        if self.listeners:
            self.outbox.append(
                RunEvent(EventKind.SKIPPED, task.task_id, scheduled, name=task.name())
            )

    def _add_run(self, task: _Task, scheduled: float, kind: type[Run] = Run) -> None:
        task.running += 1
        task_id = task.task_id
        running = self.running
        running[task_id] = running.get(task_id, 0) + 1
        self.ready.append(kind(task, scheduled))

    # -- the worker's steps ------------------------------------------------------

    def begin(self, run: Run) -> bool:
        """Whether the run may start; if not, it is dropped here (*locked*).

        Dropped: any run once the driver stopped or the task was cancelled, and a run
        that is not a triggered one while the task is paused.
        """
        task = run.task
        if self.stopped or task.cancelled or (task.paused and not run.forced):
            self.abandon(run)
            return False
        self.in_progress += 1
        return True

    def call(
        self,
        run: Run,
        announce: Callable[[RunEvent], object] | None = None,
        *,
        worker: bool = False,
    ) -> None:
        """Run the job: STARTED, the call, its duration and `Exception` (*unlocked*).

        A job that returns an awaitable failed (`_check_result`: nothing awaits it). A
        `BaseException` that is not an `Exception` propagates, unless ``worker``; the
        driver must still call `end` (in a ``finally``).

        Args:
            run: The run, after `begin` said it may start.
            announce: How the STARTED event reaches the listeners. Default: delivered
                here, on the calling thread. A driver whose listeners run elsewhere (the
                asyncio driver, on its loop) passes a hand-off.
            worker: The job runs on a pool's worker thread, where a `SystemExit` or
                `KeyboardInterrupt` cannot reach anyone who could act on it: it fails
                the run (`JobInterrupted`) instead of propagating.

        """
        if not self.listeners:
            # Times only feed events: with no listener, skip the two clock reads.
            self._invoke(run, worker)
            return
        clock = self.clock
        started = self._started(run, announce)
        try:
            self._invoke(run, worker)
        finally:
            run.duration = clock() - started

    @staticmethod
    def _invoke(run: Run, worker: bool) -> None:
        """Call the job; keep what failed it in ``run.error`` (*unlocked*)."""
        fn = run.task.fn
        try:
            if (result := fn()) is not None:
                _check_result(fn, result)
        except Exception as exc:
            run.error = exc
        except BaseException as exc:
            if not worker:
                raise
            run.error = JobInterrupted.wrap(exc)

    async def call_async(self, run: Run, job: Callable[[], Awaitable[object]]) -> None:
        """`call` for a coroutine job: ``await job()`` in place of ``fn()`` (*unlocked*).

        For a driver whose owner task is the lock: it runs on that loop, so STARTED is
        delivered here. ``job`` is the task's function, or a wrapper of it (a timeout).
        A `BaseException` that is not an `Exception` (``CancelledError`` included)
        propagates; the driver must still call `end`.
        """
        if not self.listeners:
            try:
                await job()
            except Exception as exc:
                run.error = exc
            return
        clock = self.clock
        started = self._started(run, None)
        try:
            await job()
        except Exception as exc:
            run.error = exc
        finally:
            run.duration = clock() - started

    def _started(self, run: Run, announce: Callable[[RunEvent], object] | None) -> float:
        """Read the start time and announce STARTED (there is at least one listener)."""
        started = run.started = self.clock()
        event = RunEvent(
            EventKind.STARTED, run.task.task_id, run.scheduled, started, name=run.task.name()
        )
        if announce is None:
            _deliver(self.listeners, event)
        else:
            announce(event)
        return started

    def end(self, run: Run) -> None:
        """Book a finished run: errors, running set, next fixed-delay run, queue (*locked*)."""
        self.in_progress -= 1
        task = run.task
        if run.error is not None:
            self.core._record_error(task.task_id, run.error)
        self._release(run)
        if task.cancelled or self.stopped:
            return
        if not task.repeats:
            return
        if task.fixed_delay:
            due = self.core._unpark(task.task_id)
            if task.task_id not in self.core._tasks:  # its schedule ended with this run
                del self.tasks[task.task_id]
            elif due is not None and due < self.deadline:
                self.wake = True
        elif task.queued is not None:
            scheduled, task.queued = task.queued, None
            # Pausing forgets a queued run: one queued while paused is a trigger's.
            self._add_run(task, scheduled, Triggered if task.paused else Run)

    def abandon(self, run: Run) -> None:
        """Forget a run that never started: dropped or refused by the executor (*locked*).

        A fixed-delay task whose run is dropped this way stays parked; that only happens
        when it was cancelled or the driver stopped.
        """
        self._release(run)

    def drop(self, run: Run) -> None:
        """Forget a run that `begin` let through but whose job was never called (*locked*).

        For a driver that calls `begin` when it hands the run over and checks again
        where the job would start (the asyncio driver's executor runs), or whose
        executor refused the run. Like `abandon`, a fixed-delay task stays parked.
        """
        self.in_progress -= 1
        self._release(run)

    def _release(self, run: Run) -> None:
        task = run.task
        task.running -= 1
        task_id = task.task_id
        running = self.running
        left = running[task_id] - 1
        if left:
            running[task_id] = left
        else:
            del running[task_id]

    def report(self, run: Run) -> None:
        """Log and hook a failure, then emit FINISHED or FAILED (*unlocked*)."""
        error = run.error
        task_id = run.task.task_id
        if error is not None:
            self.core._report_error(task_id, error)
        if self.listeners:
            kind = EventKind.FINISHED if error is None else EventKind.FAILED
            _deliver(
                self.listeners,
                RunEvent(
                    kind,
                    task_id,
                    run.scheduled,
                    run.started,
                    run.duration,
                    error,
                    name=run.task.name(),
                ),
            )

    def deliver(self, events: list[RunEvent]) -> None:
        """Deliver events taken from the outbox (*unlocked*)."""
        listeners = self.listeners
        for event in events:
            _deliver(listeners, event)

    # -- introspection (locked) ---------------------------------------------------

    def skipped(self, task_id: int | None) -> int:
        """Runs skipped by overlap: for one live task, or in total."""
        if task_id is None:
            return self.skipped_total
        task = self.tasks.get(task_id)
        return 0 if task is None else task.skipped

    def infos(self) -> list[TaskInfo]:
        """The live tasks in run order, each with the user's job (not the dispatch).

        A fixed-delay task whose run is going on shows the due time of that run.
        """
        jobs = self.tasks
        infos = []
        for t in self.core.tasks():
            task = jobs[t.task_id]
            shown = task.shown or Shown(task.fn)
            infos.append(
                TaskInfo(
                    t.task_id,
                    t.due,
                    shown.fn,
                    t.interval,
                    t.fixed_delay,
                    name=shown.name or name_of(shown.fn),
                    schedule=t.schedule,
                    next_run=t.next_run,
                    args=shown.args,
                    kwargs=shown.kwargs,
                    paused=task.paused,
                    note=task.note,
                )
            )
        return infos

    def check(self) -> None:
        """Verify the policy's invariants and the core's; for tests (O(n))."""
        core = self.core
        core._check()
        assert set(self.tasks) == set(core._tasks), "driver and core tasks disagree"
        for task_id, task in self.tasks.items():
            assert task.task_id == task_id and not task.cancelled, f"bad task {task_id}"
            assert task.entry is core._tasks[task_id], f"task {task_id}: stale entry"
            assert task.paused == (task_id in core._paused), f"task {task_id}: paused"
            assert task.paused or task.note is None, f"task {task_id}: note kept"
            assert task.running == self.running.get(task_id, 0), f"task {task_id} count"
        assert all(n > 0 for n in self.running.values()), "zero count kept in running"
        assert 0 <= self.in_progress <= sum(self.running.values()), "in_progress"
