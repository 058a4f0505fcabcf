"""The asyncio driver: `AsyncScheduler`, one owner task on the running loop.

The Python form of "one owner, no lock" (docs/concepts.md): the core and the policy state
belong to the event loop's thread. The owner task sleeps until the next due time on a
future with a `loop.call_later` timer, wakes early when a sooner task arrives (or the
task it sleeps for is cancelled), runs the core's tick and hands each due run over:
coroutine functions as tasks on the loop, plain callables to an executor (or inline on
the loop, when asked). Nothing polls; an idle scheduler does not wake up.

The policy's *locked* steps (``tickwork._core.runs``) run only on the loop thread: in the
owner task, in job tasks, or in callbacks on the loop. Other threads never touch the
state: their calls are handed to the loop with `loop.call_soon_threadsafe` and they
block on a `concurrent.futures.Future` for the result. Calls made on the loop's thread
act directly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import random
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from types import TracebackType
from typing import Any, Final, TypeVar

from tickwork._core.clocks import watch_clock
from tickwork._core.events import Listener, RunEvent
from tickwork._core.runs import Overlap, Policy, Run, seconds_or_none
from tickwork._core.scheduler import (
    _DUE,
    DEFAULT_MAX_ERRORS,
    Clock,
    ErrorHook,
    Scheduler,
    TaskInfo,
    _is_coroutine_function,
    _log,
    bind,
)
from tickwork._core.schedules import Schedule, ScheduleDecorators

__all__ = ["AsyncScheduler"]

_T = TypeVar("_T")

# How a task's job runs: the first item of `_Task.driver`, ``(how, timeout)``.
_AWAIT: Final = 0  # a coroutine function: awaited in a task on the loop
_POOL: Final = 1  # a plain callable: on the executor
_INLINE: Final = 2  # a plain callable, inline=True: called in a callback on the loop

# A cancelled task due at most this much after the owner's wake-up time is taken for
# the one it sleeps for (the wake-up time is computed as now + wait, not read back).
_HEAD_SLACK: Final = 1e-6


async def _with_timeout(fn: Callable[[], Awaitable[object]], timeout: float) -> None:
    """Await ``fn()`` for at most ``timeout`` seconds of loop time; then fail the run."""
    limit = asyncio.timeout(timeout)
    try:
        async with limit:
            await fn()
    except TimeoutError:
        if limit.expired():
            raise TimeoutError(f"timed out after {timeout!r} s") from None
        raise  # the job's own TimeoutError


def _how(fn: object, timeout: object, inline: object) -> tuple[int, float | None]:
    """Check `AsyncScheduler`'s ``timeout`` and ``inline`` for ``fn``; return ``(how, timeout)``."""
    limit = seconds_or_none("timeout", timeout, positive=True)
    if not isinstance(inline, bool):
        raise TypeError(f"inline must be a bool, got {inline!r}")
    if _is_coroutine_function(fn):
        if inline:
            raise ValueError(
                f"inline=True is for plain callables (coroutine functions run as "
                f"tasks on the loop), got fn={fn!r}"
            )
        return _AWAIT, limit
    if limit is not None and callable(fn):
        raise ValueError(
            f"timeout needs a coroutine function (a plain callable cannot be "
            f"cancelled), got fn={fn!r}"
        )
    return (_INLINE if inline else _POOL), None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class AsyncScheduler(ScheduleDecorators):
    """Delayed and recurring jobs on an asyncio event loop, run by one owner task.

    The same contract as `Scheduler` and the same options as `ThreadScheduler`
    (overlap, fixed-delay, ``errors``, ``on_error``, listeners), driven by a task on
    the loop it was created on. Coroutine functions run as tasks on that loop; plain
    callables run on an executor (the loop's default one unless ``executor`` is
    given), or on the loop itself with ``inline=True``. Use it as an async context
    manager, or await `start` and `stop`::

        async with AsyncScheduler() as s:
            s.schedule(3, probe, interval=3)  # probe may be an async def
            ...

    Thread safety: `schedule`, `add`, `cancel` and every other non-async method may
    be called from any thread. On the loop's thread they act at once; from another
    thread the call is handed to the loop (`loop.call_soon_threadsafe`) and blocks
    until the loop has run it, so it needs the loop to be running and must not be
    made from a thread the loop is itself waiting for. `start` and `stop` are
    coroutines to await on the scheduler's loop.

    Args:
        clock: Zero-argument callable returning seconds. Default: the loop's own clock
            (`loop.time`), which the owner task sleeps on. Another clock (a test's
            `FakeClock`) must tick on the same scale.
        executor: Where plain callables run: any `concurrent.futures.Executor`, which
            the scheduler never shuts down. Default: the loop's default executor.
        max_errors: How many entries `errors` keeps (the newest); ``None`` for no bound.
        on_error: Called as ``on_error(task_id, exc)`` after each failed run, on the
            loop's thread.
        wall_clock: For wall-clock schedules (`At`, `Cron`); see `Scheduler`.
        rng: The random source for jitter; see `Scheduler`.
        exit_timeout: Leaving the ``async with`` block waits at most this many seconds
            for running jobs (then cancels the coroutine jobs still running);
            ``None`` waits as long as it takes.
        cancel_on_exit: Leaving the ``async with`` block cancels running coroutine
            jobs instead of waiting for them. An exception leaving the block does so
            too.

    Raises:
        RuntimeError: No event loop is running in this thread.
        TypeError: ``clock``, ``executor``, ``on_error`` or ``cancel_on_exit`` is of
            the wrong kind.
        ValueError: A bad ``max_errors`` or ``exit_timeout``.

    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        executor: Executor | None = None,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: ErrorHook | None = None,
        wall_clock: Clock | None = None,
        rng: random.Random | None = None,
        exit_timeout: float | None = None,
        cancel_on_exit: bool = False,
    ) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "AsyncScheduler() needs a running event loop: create it in a coroutine"
            ) from None
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(
                f"executor must be a concurrent.futures.Executor or None, got {executor!r}"
            )
        if not isinstance(cancel_on_exit, bool):
            raise TypeError(f"cancel_on_exit must be a bool, got {cancel_on_exit!r}")
        self._exit_timeout = seconds_or_none("exit_timeout", exit_timeout, positive=False)
        self._cancel_on_exit = cancel_on_exit
        if clock is None:
            clock = loop.time
        self._core = Scheduler(
            clock, wall_clock=wall_clock, max_errors=max_errors, on_error=on_error, rng=rng
        )
        self._clock = clock
        self._policy = Policy(self._core, clock)
        self._loop = loop
        self._thread_id = threading.get_ident()
        self._executor = executor
        self._owner: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None  # what the owner sleeps on
        self._stopping = False
        # Job tasks (strong references: the loop keeps only weak ones) -> whether their
        # run has begun. Only begun ones are ever cancelled by `stop`: one cancelled
        # before its first step would never book its run.
        self._jobs: dict[asyncio.Future[None], bool] = {}
        self._calls: set[asyncio.Future[bool]] = set()  # executor runs not yet booked
        # A test's FakeClock wakes the owner task when it is moved (tickwork.testing).
        watch_clock(clock, self._clock_moved)
        watch_clock(wall_clock, self._clock_moved)

    # -- the core's contract (any thread) -----------------------------------------

    def schedule(
        self,
        delay: float,
        fn: Callable[..., object],
        interval: float | None = None,
        *,
        fixed_delay: bool = False,
        overlap: Overlap = "skip",
        max_running: int | None = None,
        timeout: float | None = None,
        inline: bool = False,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Schedule ``fn`` to run ``delay`` seconds from now; return its task id.

        Args:
            delay: Seconds from now until the first run (finite, >= 0).
            fn: A coroutine function (run as a task on the loop) or a plain callable
                (run on the executor, or on the loop with ``inline``), called as
                ``fn(*args, **kwargs)``.
            interval: For a recurring task, seconds between runs (finite, > 0).
            fixed_delay: Measure ``interval`` from the end of each run.
            overlap: ``"skip"`` (default), ``"queue"`` or ``"allow"``, as for
                `ThreadScheduler.schedule`.
            max_running: With ``overlap="allow"``, at most this many runs at once.
            timeout: For a coroutine function: cancel a run after this many seconds
                and record it as failed (``TimeoutError``). ``None``: no limit.
            inline: Call a plain callable on the loop itself instead of the executor
                (for quick, non-blocking functions that use asyncio objects).
            args: Positional arguments for ``fn``.
            kwargs: Keyword arguments for ``fn``; with ``args``, checked against its
                signature now (a call that could never work is refused here).
            name: What `tasks` calls it (default: ``fn``'s qualified name).

        Returns:
            The task id: 1, 2, 3, ... in scheduling order (failed calls use none).

        Raises:
            TypeError: A bad argument type (see `ThreadScheduler.schedule`), or
                ``inline`` is not a bool.
            ValueError: A bad value (see `ThreadScheduler.schedule`), a ``timeout``
                that is not > 0 or is given for a plain callable, or ``inline=True``
                with a coroutine function.
            RuntimeError: The scheduler has been stopped.

        """
        shown = None
        if args or kwargs or name is not None:
            fn, shown = bind(fn, args, kwargs, name)
        policy = self._policy
        make = functools.partial(
            policy.schedule, delay, fn, interval, fixed_delay, overlap, max_running, shown=shown
        )
        return self._on_loop(self._new, "schedule", fn, timeout, inline, make)

    def add(
        self,
        schedule: Schedule,
        fn: Callable[..., object],
        *,
        overlap: Overlap = "skip",
        max_running: int | None = None,
        timeout: float | None = None,
        inline: bool = False,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Run ``fn`` on ``schedule`` (`Once`, `At`, `Every` or `Cron`); return its task id.

        The keyword options are as for `schedule`; ``args`` and ``kwargs`` are always
        checked against ``fn``'s signature here.

        Raises:
            TypeError: ``schedule`` is not a schedule value, or ``fn`` is not callable.
            ValueError: A bad option (see `schedule`).
            RuntimeError: The scheduler has been stopped.
        """
        fn, shown = bind(fn, args, kwargs, name, schedule=schedule)
        make = functools.partial(self._policy.add, schedule, fn, overlap, max_running, shown=shown)
        return self._on_loop(self._new, "add", fn, timeout, inline, make)

    def cancel(self, task_id: int) -> bool:
        """Cancel a task; return whether a live task was cancelled.

        After it returns True, no run of the task starts; a run already going is not
        interrupted (cancel its coroutine yourself, or use a ``timeout``). Returns
        False for an unknown id, a cancelled task, and a one-shot task already due.
        """
        if threading.get_ident() == self._thread_id:
            return self._cancel(task_id)
        return self._on_loop(self._cancel, task_id)

    def pause(self, task_id: int, note: str | None = None) -> bool:
        """Pause a task: it stops coming due until `resume`; return whether it was paused.

        After it returns True, no run of the task starts but the ones `trigger` asks
        for: a run already going finishes (cancel its coroutine yourself to stop it),
        a run handed over and not started is dropped, a queued run is forgotten. The
        task stays live and `tasks` shows it paused, with ``note``. Any thread, as
        `cancel`.

        Args:
            task_id: The id `schedule` or `add` returned.
            note: Why it is paused, shown by `tasks` (``TaskInfo.note``) until resumed.

        Returns:
            False, and nothing changes, for an unknown id (as `cancel`) and for a task
            paused already (it keeps its first note).

        Raises:
            TypeError: ``task_id`` is not an int, or ``note`` is not a str or ``None``.

        """
        return self._on_loop(self._pause, task_id, note)

    def resume(self, task_id: int) -> bool:
        """Resume a paused task; the runs that came due while it was paused are missed.

        The rules of `ThreadScheduler.resume`: a due time still ahead is kept; one that
        passed goes to the next slot of the task's own grid after now (fixed-rate),
        ``interval`` after now (fixed-delay) or the next fire time (cron), and a
        one-shot task runs at once. Any thread, as `cancel`.

        Returns:
            Whether a paused task was resumed: False for an unknown id and for a task
            that is not paused.

        Raises:
            TypeError: ``task_id`` is not an int.

        """
        return self._on_loop(self._resume, task_id)

    def trigger(self, task_id: int) -> bool:
        """Run a task once now, outside its schedule, under its overlap policy.

        The run is handed over by this call, as a due run is (a coroutine job becomes a
        task on the loop, a plain callable goes to the executor), started or not. The
        rules of `ThreadScheduler.trigger`: the grid does not move, a fixed-delay task
        counts it as one of its runs, a one-shot task runs now instead of later, a
        paused task runs and stays paused, and a trigger while a run is going on is
        skipped, queued or run alongside as ``overlap`` says. Any thread, as `cancel`.

        Returns:
            Whether a run was handed over or queued: False for an unknown id and for a
            trigger the overlap policy skipped.

        Raises:
            TypeError: ``task_id`` is not an int.
            RuntimeError: The scheduler has been stopped.

        """
        return self._on_loop(self._trigger, task_id)

    def next_run_in(self) -> float | None:
        """Seconds until the next task is due: 0.0 if overdue, ``None`` if none."""
        return self._on_loop(self._core.next_run_in)

    @property
    def errors(self) -> list[str]:
        """``"task <id>: <message>"`` for each failed run, oldest first (bounded)."""
        return self._core.errors

    # -- lifecycle (on the loop) ----------------------------------------------------

    async def start(self) -> None:
        """Start the owner task on the loop.

        Raises:
            RuntimeError: Already started, stopped (a scheduler does not restart), or
                awaited on another loop.

        """
        self._require_loop("start")
        if self._stopping:
            raise RuntimeError("start() on a stopped AsyncScheduler (it does not restart)")
        if self._owner is not None:
            raise RuntimeError("start() on an AsyncScheduler that is already running")
        self._owner = self._loop.create_task(self._own(), name="tickwork-owner")

    async def stop(
        self, *, wait: bool = True, timeout: float | None = None, cancel: bool = False
    ) -> bool:
        """Stop: no run starts after this is called; then wait for or cancel running jobs.

        Runs handed over but not started are dropped. Calling it again is harmless. A
        coroutine job may await it: its own task is neither waited for nor cancelled.

        Args:
            wait: Wait for the running jobs to end.
            timeout: With ``wait``, at most this many seconds of loop time; then the
                coroutine jobs still running are cancelled (and awaited while they
                unwind). Jobs on the executor cannot be interrupted: they finish in
                their threads. ``None`` waits as long as it takes.
            cancel: Cancel the running coroutine jobs at once instead of waiting for
                them to finish (they are still awaited while they unwind, with
                ``wait``).

        Returns:
            Whether every job ended in time: False if the timeout expired, or if jobs
            are still running when it returns without ``wait``.

        Raises:
            ValueError: ``timeout`` is not ``None`` or a finite number >= 0.
            RuntimeError: Awaited on another loop than the scheduler's.

        """
        timeout = seconds_or_none("timeout", timeout, positive=False)
        self._require_loop("stop")
        self._stopping = True
        self._policy.stopped = True
        me = asyncio.current_task()
        owner = self._owner
        if owner is not None and owner is not me:
            if self._waiter is not None:
                _release(self._waiter)
            await asyncio.wait({owner})
            if not owner.cancelled():
                owner.exception()  # retrieved: an owner that died has logged it already
        if cancel:
            for job, begun in list(self._jobs.items()):
                if begun and job is not me:
                    job.cancel()
        pending: set[asyncio.Future[Any]] = {job for job in self._jobs if job is not me}
        pending.update(self._calls)
        if not pending:
            return True
        if not wait:
            return False
        _, pending = await asyncio.wait(pending, timeout=timeout)
        if not pending:
            return True
        late = [job for job in pending if job in self._jobs]
        for job in late:
            if self._jobs[job]:
                job.cancel()
        if late:
            await asyncio.wait(late)
        return False

    async def __aenter__(self) -> AsyncScheduler:
        """Start the scheduler; return it."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop: wait for running jobs (``exit_timeout``), or cancel them on request or error."""
        await self.stop(
            timeout=self._exit_timeout, cancel=self._cancel_on_exit or exc_type is not None
        )

    # -- introspection and events (any thread) -----------------------------------------

    def __len__(self) -> int:
        """The number of live tasks (scheduled, not cancelled, not finished)."""
        return self._on_loop(self._core.__len__)

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` is a live task."""
        return self._on_loop(self._core.__contains__, task_id)

    def tasks(self) -> list[TaskInfo]:
        """The live tasks with their next due time, in the order they will run.

        A fixed-delay task whose run is going on shows the due time of that run.
        """
        return self._on_loop(self._policy.infos)

    def running(self) -> dict[int, int]:
        """Task id -> how many of its runs are handed over right now (started or about to)."""
        return self._on_loop(dict, self._policy.running)

    def skipped_runs(self, task_id: int | None = None) -> int:
        """How many due runs the overlap policy skipped: of one live task, or in total."""
        return self._on_loop(self._policy.skipped, task_id)

    def add_listener(self, listener: Listener) -> None:
        """Deliver a `RunEvent` to ``listener`` for every run from now on.

        Every event is delivered on the loop's thread (an executor job's STARTED is
        handed over to it), so a listener may use asyncio objects; it should be quick.
        One that raises is logged and skipped.
        """
        self._on_loop(self._policy.add_listener, listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop delivering events to ``listener``; unknown listeners are ignored."""
        self._on_loop(self._policy.remove_listener, listener)

    # -- hand-off ------------------------------------------------------------------

    def _on_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Call ``fn(*args)`` on the loop's thread: directly there, else handed over."""
        if threading.get_ident() == self._thread_id:
            return fn(*args)
        result: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def request() -> None:
            try:
                result.set_result(fn(*args))
            except Exception as exc:
                result.set_exception(exc)

        self._loop.call_soon_threadsafe(request)
        return result.result()

    def _require_loop(self, name: str) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            raise RuntimeError(f"{name}() must be awaited on the scheduler's event loop")

    # -- on the loop: requests ---------------------------------------------------------

    def _new(
        self, what: str, fn: object, timeout: object, inline: object, make: Callable[..., int]
    ) -> int:
        """`schedule` or `add` (``what``): ``make(driver=...)`` schedules it in the policy."""
        if self._stopping:
            raise RuntimeError(f"{what}() on a stopped AsyncScheduler, got fn={fn!r}")
        policy = self._policy
        how = _how(fn, timeout, inline)
        task_id = make(driver=how)
        if policy.wake:
            self._wake()
        return task_id

    def _rearm(self, entry: list[Any] | None) -> None:
        """Wake the owner if its timer was set for ``entry``, a task that left the schedule.

        Re-armed for the next task, an idle loop does not wake for nothing (and the
        timer frees nothing it holds).
        """
        if entry is not None and entry[_DUE] <= self._policy.deadline + _HEAD_SLACK:
            self._wake()

    def _cancel(self, task_id: int) -> bool:
        entry = self._core._tasks.get(task_id)
        if not self._policy.cancel(task_id):
            return False
        self._rearm(entry)
        return True

    def _pause(self, task_id: int, note: str | None) -> bool:
        entry = self._core._tasks.get(task_id) if type(task_id) is int else None
        if not self._policy.pause(task_id, note):
            return False
        self._rearm(entry)
        return True

    def _resume(self, task_id: int) -> bool:
        policy = self._policy
        if not policy.resume(task_id):
            return False
        if policy.wake:
            self._wake()
        return True

    def _trigger(self, task_id: int) -> bool:
        if self._stopping:
            raise RuntimeError(f"trigger() on a stopped AsyncScheduler, got task_id={task_id!r}")
        entry = self._core._tasks.get(task_id) if type(task_id) is int else None
        done = self._policy.trigger(task_id)
        if entry is not None and entry[2] is None:  # a one-shot or fixed-delay task left
            self._rearm(entry)
        self._hand_over()
        return done

    def step(self) -> float | None:
        """Run one tick now; return seconds until the next run (``None``: none planned).

        Call it on the scheduler's loop. It hands every run due on the clock over (a
        coroutine job becomes a task that runs when the loop next gets control, so
        ``await asyncio.sleep(0)`` after it), as the owner task does on each wake-up.
        Meant for tests on a `tickwork.testing.FakeClock`; it works started or not.

        Raises:
            RuntimeError: Called from another thread than the loop's.

        """
        if threading.get_ident() != self._thread_id:
            raise RuntimeError("step() must be called on the scheduler's event loop thread")
        self._step()
        return self._core.next_run_in()

    def _clock_moved(self) -> None:
        """The test's fake clock moved (on any thread): wake the owner task."""
        loop = self._loop
        if loop.is_closed():
            return
        if threading.get_ident() == self._thread_id:
            self._wake()
        else:
            loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """Wake the owner task (it looks at the schedule again)."""
        self._policy.wake = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- on the loop: the owner task -----------------------------------------------------

    async def _own(self) -> None:
        """The owner: tick, then sleep until the next due time or a wake-up."""
        core, policy, clock = self._core, self._policy, self._clock
        try:
            while not self._stopping:
                self._step()  # synchronous: stop() cannot come in between
                # Capped while calendar tasks exist, to notice wall-clock jumps.
                wait = core.next_wakeup_in()
                if wait == 0.0:
                    await asyncio.sleep(0)  # let the jobs just handed over start
                    continue
                policy.deadline = math.inf if wait is None else clock() + wait
                policy.wake = False
                try:
                    await self._wait(wait)
                finally:
                    policy.deadline = -math.inf
        except asyncio.CancelledError:
            raise
        except BaseException:
            _log().critical("tickwork owner task died; no more runs start", exc_info=True)
            raise

    async def _wait(self, timeout: float | None) -> None:
        """Sleep until ``timeout`` seconds pass or `_wake` is called (tests replace it)."""
        loop = self._loop
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _release, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def _step(self) -> None:
        """One tick: hand every due run over and deliver pending events."""
        if self._stopping:
            return
        self._core.run_pending()
        self._hand_over()

    def _hand_over(self) -> None:
        """Deliver the events and start the runs the policy has ready."""
        policy = self._policy
        ready, events = policy.take()
        if events:
            policy.deliver(events)
        if ready:
            self._submit(ready)

    def _submit(self, runs: list[Run]) -> None:
        loop = self._loop
        jobs = self._jobs
        for run in runs:
            how = run.task.driver[0]
            if how == _AWAIT:
                # The job's coroutine is made only when its run starts: a run that is
                # dropped first never creates one, so none is left un-awaited.
                jobs[loop.create_task(self._run_job(run))] = False
            elif how == _INLINE:
                loop.call_soon(self._run_inline, run)
            else:
                self._run_in_pool(run)

    # -- on the loop: runs ---------------------------------------------------------------

    async def _run_job(self, run: Run) -> None:
        """A coroutine job's task: start check, the awaited job, bookkeeping, reports."""
        policy, jobs = self._policy, self._jobs
        me = asyncio.current_task()
        assert me is not None
        if not policy.begin(run):
            del jobs[me]
            return
        jobs[me] = True
        task = run.task
        fn: Any = task.fn
        limit = task.driver[1]
        try:
            await policy.call_async(
                run, fn if limit is None else functools.partial(_with_timeout, fn, limit)
            )
        except BaseException:
            # Cancelled by stop, or a CancelledError / KeyboardInterrupt out of the job,
            # which runs on the loop's thread: booked, not reported, and it propagates
            # (as from the core's run_pending; see docs/drivers.md).
            del jobs[me]
            self._end(run, report=False)
            raise
        del jobs[me]
        self._end(run, report=True)

    def _run_inline(self, run: Run) -> None:
        """An ``inline=True`` run, in a callback on the loop."""
        policy = self._policy
        if not policy.begin(run):
            return
        try:
            policy.call(run)
        except BaseException:
            self._end(run, report=False)
            raise
        self._end(run, report=True)

    def _run_in_pool(self, run: Run) -> None:
        """Hand a plain callable's run to the executor; `_pooled` books it on return."""
        policy = self._policy
        if not policy.begin(run):
            return
        try:
            call = self._loop.run_in_executor(self._executor, self._call_in_worker, run)
        except RuntimeError as exc:  # the executor was shut down
            policy.drop(run)
            _log().warning("executor refused 1 run(s): %s", exc)
            return
        self._calls.add(call)
        call.add_done_callback(functools.partial(self._pooled, run))

    def _call_in_worker(self, run: Run) -> bool:
        """On the worker: call the job unless the run was cancelled or stopped meanwhile.

        Reads flags the loop sets (plain attribute reads, atomic in CPython): a run
        still waiting in the executor's queue when `cancel`, `pause` or `stop` returns
        does not start, as with the thread driver.
        """
        policy = self._policy
        task = run.task
        if policy.stopped or task.cancelled or (task.paused and not run.forced):
            return False
        policy.call(run, self._announce, worker=True)
        return True

    def _announce(self, event: RunEvent) -> None:
        """On the worker: hand an executor run's STARTED to the loop, where listeners run."""
        self._loop.call_soon_threadsafe(self._policy.deliver, [event])

    def _pooled(self, run: Run, call: asyncio.Future[bool]) -> None:
        """Back on the loop after an executor run: book it."""
        self._calls.discard(call)
        error = call.exception()
        if error is not None:  # not the job's (worker=True fails its run): the clock's, say
            self._end(run, report=False)
            _log().warning("task %d: job raised %r on the executor", run.task.task_id, error)
        elif call.result():
            self._end(run, report=True)
        else:
            self._policy.drop(run)

    def _end(self, run: Run, *, report: bool) -> None:
        """Book a finished run, then report it and start what it made ready."""
        policy = self._policy
        policy.end(run)
        if policy.wake:
            self._wake()
        if report:
            policy.report(run)
        self._hand_over()

    def _check(self) -> None:
        """Verify the driver's invariants and the core's; for tests."""
        self._policy.check()
        begun = sum(self._jobs.values()) + len(self._calls)
        assert begun == self._policy.in_progress, "begun runs and in_progress disagree"
