"""The thread driver: `ThreadScheduler`, a real background loop around the core.

One timing thread waits on a `threading.Condition` until the next task is due (forever
when none is), runs the core's tick, and hands each due run to an executor; it never
runs job code itself. What happens when a run is due or finishes (overlap, fixed-delay,
counters, events, errors) lives in ``tickwork._core.runs``, shared with the other drivers.

Locking: one lock (`ThreadScheduler._lock`, an `RLock`) guards the core and the policy
state. It is never held while user code runs: jobs, listeners and the ``on_error`` hook
are called after it is released, so any of them may call back into the scheduler from
any thread. The only user code called under it is the clock.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from types import TracebackType
from typing import Any

from tickwork._core.clocks import watch_clock
from tickwork._core.events import Listener, RunEvent
from tickwork._core.runs import Overlap, Policy, Run, seconds_or_none
from tickwork._core.scheduler import (
    DEFAULT_MAX_ERRORS,
    Clock,
    ErrorHook,
    Scheduler,
    TaskInfo,
    _log,
    _refuse_coroutine_function,
    bind,
)
from tickwork._core.schedules import Schedule, ScheduleDecorators

__all__ = ["ThreadScheduler"]


class ThreadScheduler(ScheduleDecorators):
    """Delayed and recurring jobs run by a background thread on a worker pool.

    The same contract as `Scheduler` (due times, fixed-rate rescheduling, ``errors``),
    driven by a timing thread instead of calls to ``run_pending``. Every method is
    safe to call from any thread, including from inside a job, a listener or the
    ``on_error`` hook. Use it as a context manager, or call `start` and `stop`::

        with ThreadScheduler() as s:
            s.schedule(3, probe, interval=3)
            ...

    Tasks may be scheduled before `start`; their delays count from when they were
    scheduled. The timing thread is a daemon thread, so a process that never calls
    `stop` can still exit (see ``docs/drivers.md``).

    Args:
        clock: Zero-argument callable returning seconds, the same scale the timing
            thread waits in (default `time.monotonic`).
        executor: Where runs go: any `concurrent.futures.Executor`. The scheduler
            does not shut down an executor it was given. Default: its own
            `ThreadPoolExecutor`, shut down by `stop`.
        max_workers: Size of the default pool (default: the standard library's,
            ``min(32, cpu_count + 4)``). Not allowed together with ``executor``.
        max_errors: How many entries `errors` keeps (the newest); ``None`` for no bound.
        on_error: Called as ``on_error(task_id, exc)`` after each failed run, on the
            worker thread that ran the job, without any scheduler lock held.

    Raises:
        TypeError: ``clock``, ``executor`` or ``on_error`` is of the wrong kind.
        ValueError: ``max_workers`` is not an int >= 1, or is given with ``executor``.

    """

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        executor: Executor | None = None,
        max_workers: int | None = None,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: ErrorHook | None = None,
        wall_clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor or None, got {executor!r}"
            )
        if max_workers is not None:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int):
                raise TypeError(f"max_workers must be an int or None, got {max_workers!r}")
            if max_workers < 1:
                raise ValueError(f"max_workers must be >= 1, got {max_workers!r}")
            if executor is not None:
                raise ValueError(
                    f"max_workers sizes the default pool; with an executor, got {max_workers!r}"
                )
        self._core = Scheduler(
            clock, wall_clock=wall_clock, max_errors=max_errors, on_error=on_error, rng=rng
        )
        self._clock = clock
        self._policy = Policy(self._core, clock)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)  # the timing thread waits here
        self._idle = threading.Condition(self._lock)  # stop() waits here for running jobs
        self._own_executor = executor is None
        pool = ThreadPoolExecutor(max_workers, thread_name_prefix="tickwork-worker")
        self._executor: Executor = executor or pool
        # With its own pool the driver knows the pool's size: runs wait in ``_backlog``
        # and at most that many pool items ("drainers") drain it, so a burst costs one
        # deque append per run instead of a Future per run. A drainer is added only
        # when every drainer is inside a job (`_need_drainer`): a slow job holds one
        # and the next run gets another at once, so a run waits only while every
        # worker is busy, exactly as with one pool item per run; but a burst of quick
        # jobs is drained by few threads instead of all of them fighting for the lock.
        self._backlog: deque[Run] = deque()
        self._drainers = 0
        self._max_drainers = pool._max_workers if executor is None else 0  # its real size
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._local = threading.local()  # .depth: how many jobs this thread is inside
        # (worker thread id, depth) -> the run it is calling; depth: an inline executor
        # runs a run inside another on the same thread.
        self._calling: dict[tuple[int, int], Run] = {}
        # A test's FakeClock wakes the timing thread when it is moved (tickwork.testing).
        watch_clock(clock, self._clock_moved)
        watch_clock(wall_clock, self._clock_moved)

    # -- the core's contract -----------------------------------------------------

    def schedule(
        self,
        delay: float,
        fn: Callable[..., object],
        interval: float | None = None,
        *,
        fixed_delay: bool = False,
        overlap: Overlap = "skip",
        max_running: int | None = None,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Schedule ``fn`` to run ``delay`` seconds from now; return its task id.

        Args:
            delay: Seconds from now until the first run (finite, >= 0).
            fn: The job, called as ``fn(*args, **kwargs)`` on the executor.
            interval: For a recurring task, seconds between runs (finite, > 0).
            fixed_delay: Measure ``interval`` from the end of each run instead of from
                its due time. Such a task can never overlap itself.
            overlap: What a fixed-rate recurring task does when a run is due while
                its previous run is still going: ``"skip"`` the run (the default),
                ``"queue"`` one run to start right after the current one ends, or
                ``"allow"`` runs side by side.
            max_running: With ``overlap="allow"``, at most this many runs at once;
                due runs over the cap are skipped. ``None``: no cap.
            args: Positional arguments for ``fn``.
            kwargs: Keyword arguments for ``fn``; with ``args``, checked against its
                signature now (a call that could never work is refused here).
            name: What `tasks` calls it (default: ``fn``'s qualified name).

        Returns:
            The task id: 1, 2, 3, ... in scheduling order (failed calls use none).

        Raises:
            TypeError: A bad argument type (see `Scheduler.schedule`: a coroutine
                function is refused, use `tickwork.AsyncScheduler`), or ``max_running``
                is not an int.
            ValueError: A bad value (see `Scheduler.schedule`), an unknown
                ``overlap``, or ``max_running`` < 1 or without ``overlap="allow"``.
            RuntimeError: The scheduler has been stopped.

        """
        _refuse_coroutine_function("fn", fn, "ThreadScheduler")
        shown = None
        if args or kwargs or name is not None:
            fn, shown = bind(fn, args, kwargs, name)
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"schedule() on a stopped ThreadScheduler, got fn={fn!r}")
            policy = self._policy
            task_id = policy.schedule(
                delay, fn, interval, fixed_delay, overlap, max_running, shown=shown
            )
            if policy.wake:
                policy.wake = False
                self._cond.notify()
            return task_id

    def add(
        self,
        schedule: Schedule,
        fn: Callable[..., object],
        *,
        overlap: Overlap = "skip",
        max_running: int | None = None,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Run ``fn`` on ``schedule`` (`Once`, `At`, `Every` or `Cron`); return its task id.

        The keyword options are as for `schedule`; ``args`` and ``kwargs`` are always
        checked against ``fn``'s signature here.

        Raises:
            TypeError: ``schedule`` is not a schedule value, or ``fn`` is not callable or
                is a coroutine function.
            ValueError: An unknown ``overlap`` or a bad ``max_running``.
            RuntimeError: The scheduler has been stopped.
        """
        _refuse_coroutine_function("fn", fn, "ThreadScheduler")
        fn, shown = bind(fn, args, kwargs, name, schedule=schedule)
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"add() on a stopped ThreadScheduler, got fn={fn!r}")
            policy = self._policy
            task_id = policy.add(schedule, fn, overlap, max_running, shown=shown)
            if policy.wake:
                policy.wake = False
                self._cond.notify()
            return task_id

    def cancel(self, task_id: int) -> bool:
        """Cancel a task; return whether a live task was cancelled.

        After it returns True, no run of the task starts (a run already going is not
        interrupted). Returns False for an unknown id, a cancelled task, and a one-shot
        task that is due and handed to the pool, running or done.
        """
        with self._lock:
            policy = self._policy
            entry = self._core._tasks.get(task_id)
            if not policy.cancel(task_id):
                return False
            # The timing thread sleeps until the head's due time: if it sleeps for this
            # task, wake it to re-arm for the next one rather than wake later for nothing.
            if entry is not None and entry[0] <= policy.deadline + 1e-6:
                self._cond.notify()
            return True

    def pause(self, task_id: int, note: str | None = None) -> bool:
        """Pause a task: it stops coming due until `resume`; return whether it was paused.

        After it returns True, no run of the task starts but the ones `trigger` asks
        for: a run already going finishes, a run handed to the pool and not started is
        dropped, a queued run (``overlap="queue"``) is forgotten. The task stays live
        (``in``, `len`, `cancel` work) and `tasks` shows it paused, with ``note``.

        Args:
            task_id: The id `schedule` or `add` returned.
            note: Why it is paused, shown by `tasks` (``TaskInfo.note``) until resumed.

        Returns:
            False, and nothing changes, for an unknown id (as `cancel`: a cancelled
            task, a one-shot task already due) and for a task paused already (it keeps
            its first note).

        Raises:
            TypeError: ``task_id`` is not an int, or ``note`` is not a str or ``None``.

        """
        with self._lock:
            policy = self._policy
            entry = self._core._tasks.get(task_id) if type(task_id) is int else None
            if not policy.pause(task_id, note):
                return False
            # As for cancel: if the timing thread sleeps for this task, re-arm it.
            if entry is not None and entry[0] <= policy.deadline + 1e-6:
                self._cond.notify()
            return True

    def resume(self, task_id: int) -> bool:
        """Resume a paused task; the runs that came due while it was paused are missed.

        A due time still ahead is kept (a pause shorter than the wait changes
        nothing). One that passed while the task was paused is not run: a fixed-rate
        task comes due at the next slot of its own grid after now, a fixed-delay task
        ``interval`` after now, a cron task at its next fire time after now; a one-shot
        task runs at once. A task whose ``until`` passed while it was paused ends. The
        timing thread is woken if the task is due before it would wake.

        Returns:
            Whether a paused task was resumed: False for an unknown id and for a task
            that is not paused.

        Raises:
            TypeError: ``task_id`` is not an int.

        """
        with self._lock:
            policy = self._policy
            if not policy.resume(task_id):
                return False
            if policy.wake:
                policy.wake = False
                self._cond.notify()
            return True

    def trigger(self, task_id: int) -> bool:
        """Run a task once now, outside its schedule, under its overlap policy.

        The run is handed to the executor by this call (never run on the timing
        thread), started or not; its events are those of any run, with ``scheduled``
        the clock time of the trigger. A fixed-rate task stays on its grid. A
        fixed-delay task counts it as one of its runs: its next run is due
        ``interval`` after this one ends, and it never overlaps itself. A one-shot task
        runs now instead of at its due time (it is then finished). A paused task runs
        too, and stays paused.

        While a run of the task is going on, the overlap policy decides as for a due
        run: with ``"skip"`` (and for any fixed-delay task) the trigger is skipped,
        counted in `skipped_runs` and reported as a SKIPPED event (on this thread);
        ``"queue"`` starts it when the current run ends, unless a run waits already;
        ``"allow"`` runs it alongside, up to ``max_running``.

        Returns:
            Whether a run was handed over or queued: False for an unknown id (as
            `cancel`) and for a trigger the overlap policy skipped.

        Raises:
            TypeError: ``task_id`` is not an int.
            RuntimeError: The scheduler has been stopped.

        """
        with self._lock:
            if self._stopping:
                raise RuntimeError(
                    f"trigger() on a stopped ThreadScheduler, got task_id={task_id!r}"
                )
            policy = self._policy
            entry = self._core._tasks.get(task_id) if type(task_id) is int else None
            done = policy.trigger(task_id)
            # A one-shot or fixed-delay task left the schedule: re-arm as cancel does.
            if entry is not None and entry[2] is None and entry[0] <= policy.deadline + 1e-6:
                self._cond.notify()
            ready, events = policy.take()
        if events:
            policy.deliver(events)
        if ready:
            self._submit(ready)
        return done

    def next_run_in(self) -> float | None:
        """Seconds until the next task is due: 0.0 if overdue, ``None`` if none."""
        with self._lock:
            return self._core.next_run_in()

    @property
    def errors(self) -> list[str]:
        """``"task <id>: <message>"`` for each failed run, oldest first (bounded)."""
        return self._core.errors

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the timing thread.

        Raises:
            RuntimeError: Already started, or stopped (a scheduler does not restart).

        """
        with self._lock:
            if self._stopping:
                raise RuntimeError("start() on a stopped ThreadScheduler (it does not restart)")
            if self._thread is not None:
                raise RuntimeError("start() on a ThreadScheduler that is already running")
            self._thread = threading.Thread(target=self._loop, name="tickwork-timer", daemon=True)
            self._thread.start()

    def stop(self, wait: bool = True, timeout: float | None = None) -> bool:
        """Stop: no run starts after this returns; optionally wait for running jobs.

        Runs already handed to the pool but not started are dropped. Calling it again
        is harmless (it waits again if asked). It may be called from inside a job or
        a listener: the calling job is not waited for.

        Args:
            wait: Wait for the jobs that are running to finish.
            timeout: With ``wait``, give up after this many seconds (real time);
                ``None`` waits as long as it takes.

        Returns:
            Whether no job (other than the caller's own) is still running.

        Raises:
            ValueError: ``timeout`` is not ``None`` or a finite number >= 0.

        """
        timeout = seconds_or_none("timeout", timeout, positive=False)
        give_up = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._stopping = True
            self._policy.stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(None if give_up is None else max(0.0, give_up - time.monotonic()))
        own = getattr(self._local, "depth", 0)
        policy = self._policy
        try:
            with self._lock:
                if wait:
                    left = None if give_up is None else max(0.0, give_up - time.monotonic())
                    finished = self._idle.wait_for(lambda: policy.in_progress <= own, left)
                else:
                    finished = policy.in_progress <= own
        except (KeyboardInterrupt, SystemExit) as exc:  # a second Ctrl-C, a SIGTERM handler
            self._abandon(own, exc)
            raise
        if self._own_executor:
            # Runs still queued in the pool are dropped by Policy.begin as they come up.
            self._executor.shutdown(wait=False)
        return finished

    def __enter__(self) -> ThreadScheduler:
        """Start the scheduler; return it."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the scheduler and wait for running jobs.

        Left by a `KeyboardInterrupt` (Ctrl-C) while jobs run, it says it waits for
        them; a second Ctrl-C abandons them (see `stop`).
        """
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            with self._lock:
                busy = self._busy(getattr(self._local, "depth", 0))
            if busy:
                _log().warning(
                    "interrupted: waiting for %d running job(s) to finish: %s; interrupt"
                    " again to abandon them",
                    len(busy),
                    ", ".join(busy),
                )
        self.stop()

    def _busy(self, own: int) -> list[str]:
        """The jobs being called now, as ``name (task N)``, but the caller's own."""
        if self._policy.in_progress <= own:
            return []
        me = threading.get_ident()
        runs = [run for (ident, _), run in list(self._calling.items()) if ident != me]
        return sorted(f"{run.task.name()} (task {run.task.task_id})" for run in runs)

    def _abandon(self, own: int, exc: BaseException) -> None:
        """`stop`'s wait was interrupted: say which jobs are abandoned, let the process end.

        The interrupt goes on up to the caller. A Python thread cannot be killed, and
        the interpreter joins pool threads at exit, so a stuck job would keep the
        process alive: once the main thread has finished, if an abandoned job is still
        running, the process ends at once (status 130 for Ctrl-C, else the exit code).
        """
        with self._lock:
            busy = self._busy(own)
        if self._own_executor:
            self._executor.shutdown(wait=False)
        if not busy:
            return
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else "exiting"
        _log().warning(
            "%s while waiting for %d running job(s): abandoning %s; the process will not"
            " wait for them at exit",
            what,
            len(busy),
            ", ".join(busy),
        )
        status = 130 if isinstance(exc, KeyboardInterrupt) else _exit_status(exc)
        policy = self._policy
        _end_at_exit(lambda: policy.in_progress > own, status)

    # -- introspection and events ------------------------------------------------

    def __len__(self) -> int:
        """The number of live tasks (scheduled, not cancelled, not finished)."""
        with self._lock:
            return len(self._core)

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a live task."""
        with self._lock:
            return task_id in self._core

    def tasks(self) -> list[TaskInfo]:
        """The live tasks with their next due time, in the order they will run.

        A fixed-delay task whose run is going on shows the due time of that run.
        """
        with self._lock:
            return self._policy.infos()

    def running(self) -> dict[int, int]:
        """Task id -> how many of its runs are in the pool right now (started or about to)."""
        with self._lock:
            return dict(self._policy.running)

    def skipped_runs(self, task_id: int | None = None) -> int:
        """How many due runs the overlap policy skipped: of one live task, or in total."""
        with self._lock:
            return self._policy.skipped(task_id)

    def add_listener(self, listener: Listener) -> None:
        """Deliver a `RunEvent` to ``listener`` for every run from now on.

        STARTED, FINISHED and FAILED are delivered on the worker thread that runs the
        job; SKIPPED and MISSED on the timing thread. Listeners are called without any
        scheduler lock held and should be quick; one that raises is logged and skipped.
        """
        with self._lock:
            self._policy.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored."""
        with self._lock:
            self._policy.remove_listener(listener)

    def step(self) -> float | None:
        """Run one tick now, in the calling thread; return seconds until the next run.

        Hands every run due on the clock to the executor and delivers pending events,
        as the timing thread does on each wake-up. Meant for tests on a
        `tickwork.testing.FakeClock`: move the clock, call ``step()``; with a
        `tickwork.testing.InlineExecutor` the due jobs have run when it returns. It may
        be called whether or not the scheduler is started. ``None``: nothing is planned.
        """
        self._step()
        with self._lock:
            return self._core.next_run_in()

    # -- internals ---------------------------------------------------------------

    def _clock_moved(self) -> None:
        """The test's fake clock moved: look at the schedule again now."""
        with self._cond:
            self._cond.notify()

    def _loop(self) -> None:
        """The timing thread: tick, then wait until the next due time or a notify."""
        cond, core, policy, clock = self._cond, self._core, self._policy, self._clock
        try:
            while True:
                self._step()
                with cond:
                    if self._stopping:
                        return
                    # Capped while calendar tasks exist, to notice wall-clock jumps.
                    timeout = core.next_wakeup_in()
                    if timeout == 0.0:
                        continue
                    policy.deadline = math.inf if timeout is None else clock() + timeout
                    policy.wake = False
                    self._wait(timeout)
                    policy.deadline = -math.inf
        except BaseException:
            _log().critical("tickwork timing thread died; no more runs start", exc_info=True)
            raise

    def _wait(self, timeout: float | None) -> None:
        """Wait for a notify or ``timeout`` seconds, with the lock held (tests replace it)."""
        self._cond.wait(None if timeout is None else min(timeout, threading.TIMEOUT_MAX))

    def _step(self) -> None:
        """One tick: hand every due run to the executor and deliver pending events."""
        policy = self._policy
        with self._lock:
            if self._stopping:
                return
            self._core.run_pending()
            ready, events = policy.take()
        if events:
            policy.deliver(events)
        if ready:
            self._submit(ready)

    def _submit(self, runs: list[Run]) -> None:
        """Hand runs to the executor (without the lock: it may run them inline)."""
        if self._max_drainers:
            with self._lock:
                self._backlog.extend(runs)
                more = 1 if self._need_drainer() else 0
                self._drainers += more
            for submitted in range(more):
                try:
                    self._executor.submit(self._drain)
                except RuntimeError as exc:
                    with self._lock:
                        self._drainers -= more - submitted
                        dropped = list(self._backlog)
                        self._backlog.clear()
                        for run in dropped:
                            self._policy.abandon(run)
                    level = logging.DEBUG if "interpreter shutdown" in str(exc) else logging.WARNING
                    _log().log(level, "executor refused %d run(s): %s", len(dropped), exc)
                    return
            return
        submit, execute = self._executor.submit, self._execute
        for i, run in enumerate(runs):
            try:
                submit(execute, run)
            except RuntimeError as exc:
                # The executor was shut down (by its owner, or at interpreter exit).
                with self._lock:
                    for lost in runs[i:]:
                        self._policy.abandon(lost)
                # At interpreter exit (a scheduler nobody stopped) this is expected.
                level = logging.DEBUG if "interpreter shutdown" in str(exc) else logging.WARNING
                _log().log(level, "executor refused %d run(s): %s", len(runs) - i, exc)
                return

    def _drain(self) -> None:
        """A pool item of the driver's own pool: run backlog runs until none is left.

        One lock hold books the run that just ended and begins the next one, so a burst
        costs one lock round trip per run instead of two: with ten workers contending
        for the lock, that is what bounds burst throughput.
        """
        backlog, lock, policy, local = self._backlog, self._lock, self._policy, self._local
        calling, ident = self._calling, threading.get_ident()
        done: Run | None = None
        while True:
            ready: list[Run] = []
            events: list[RunEvent] = []
            run: Run | None = None
            with lock:
                if done is not None:
                    policy.end(done)
                    self._after_end()
                    ready, events = policy.take()
                while backlog:
                    candidate = backlog.popleft()
                    if policy.begin(candidate):
                        run = candidate
                        break
                if run is None:
                    self._drainers -= 1
                helper = self._need_drainer()
                if helper:
                    self._drainers += 1
            if helper:
                self._add_drainer()
            if done is not None:
                policy.report(done)
                if events:
                    policy.deliver(events)
                if ready:
                    self._submit(ready)
            if run is None:
                return
            local.depth = depth = getattr(local, "depth", 0) + 1
            calling[ident, depth] = run
            try:
                policy.call(run, worker=True)
            except BaseException:
                # A job's SystemExit fails its run (worker=True); this is a listener's or
                # the clock's: this pool item ends, another takes over.
                del calling[ident, depth]
                local.depth -= 1
                with lock:
                    policy.end(run)
                    self._after_end()
                    self._drainers -= 1
                self._submit([])
                raise
            del calling[ident, depth]
            local.depth -= 1
            done = run

    def _need_drainer(self) -> bool:
        """Whether runs wait while every drainer is inside a job (lock held)."""
        drainers = self._drainers
        return (
            bool(self._backlog)
            and drainers < self._max_drainers
            and self._policy.in_progress >= drainers
        )

    def _add_drainer(self) -> None:
        """Start one more drainer, counted already (lock not held: submit may block)."""
        try:
            self._executor.submit(self._drain)
        except RuntimeError:
            with self._lock:
                self._drainers -= 1
            self._submit([])  # the refusal path: abandons the backlog and logs why

    def _execute(self, run: Run) -> None:
        """A worker's part of a run: start check, the job, bookkeeping, reports."""
        policy, lock = self._policy, self._lock
        with lock:
            if not policy.begin(run):
                return
        local, key = self._local, threading.get_ident()
        local.depth = depth = getattr(local, "depth", 0) + 1
        self._calling[key, depth] = run
        try:
            policy.call(run, worker=True)
        except BaseException:
            del self._calling[key, depth]
            local.depth -= 1
            with lock:
                policy.end(run)
                self._after_end()
            raise
        del self._calling[key, depth]
        local.depth -= 1
        with lock:
            policy.end(run)
            self._after_end()
            ready, events = policy.take()
        policy.report(run)
        if events:
            policy.deliver(events)
        if ready:
            self._submit(ready)

    def _after_end(self) -> None:
        """Wake whoever waits on a finished run (lock held)."""
        policy = self._policy
        if policy.wake:
            policy.wake = False
            self._cond.notify()
        if self._stopping:
            self._idle.notify_all()

    def _check(self) -> None:
        """Verify the driver's invariants and the core's; for tests (lock taken)."""
        with self._lock:
            self._policy.check()


def _exit_status(exc: BaseException) -> int:
    """The exit status a `SystemExit` asks for (as the interpreter reads its code)."""
    code = exc.code if isinstance(exc, SystemExit) else 1
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _end_at_exit(busy: Callable[[], bool], status: int) -> None:
    """When the interpreter exits, end the process at once if abandoned jobs still run.

    The interpreter joins every pool thread at exit (``concurrent.futures`` registers
    that join with ``threading``'s exit hooks), which a stuck job makes wait forever. A
    hook registered after that one runs before it: if jobs are still running then,
    the process ends with ``status``; if they ended, the exit goes on as usual.
    """

    def hook() -> None:
        if not busy():
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)

    register = getattr(threading, "_register_atexit", None)  # CPython 3.9+
    if register is not None:
        with contextlib.suppress(RuntimeError):  # the interpreter is exiting already
            register(hook)
            return

    def watch() -> None:  # elsewhere: the main thread ending is the sign
        threading.main_thread().join()
        hook()

    threading.Thread(target=watch, name="tickwork-exit", daemon=True).start()
