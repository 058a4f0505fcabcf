"""`AsyncDurableScheduler`: durable jobs for an asyncio application.

It is `DurableScheduler` itself, not a second engine: the same timing thread claims
runs from the store, the same workers record their starts and finishes, with the same
recovery, missed-run and overlap rules. What this face adds is the event loop:

- a job whose function is a coroutine function (``async def``) is called on a worker
  and its coroutine is awaited on the application's loop (the one `start` was awaited
  on); the worker waits for it, so ``max_workers`` still bounds the runs in flight and
  a run's lease is renewed while it is awaited. A plain function runs on the worker,
  as on `DurableScheduler`, so a blocking job never stalls the loop;
- every method that talks to the store is a coroutine that runs the call in a thread
  (`asyncio.to_thread`), so the loop never waits on a database; the one exception is
  an enqueue on the app's own connection (``connection=``), which runs where the app
  uses that connection, in its transaction.

See ``docs/durability.md`` ("asyncio applications").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from concurrent.futures import Executor
from datetime import datetime
from types import TracebackType
from typing import Any, Concatenate, Final, Literal, ParamSpec, TypeVar

from tickwork._core.events import Listener
from tickwork._core.scheduler import DEFAULT_MAX_ERRORS
from tickwork._durable.oneoffs import Enqueued
from tickwork._durable.scheduler import DurableErrorHook, DurableScheduler, current_async_claim
from tickwork.stores import (
    ActionRecord,
    Claim,
    JobSpec,
    JobState,
    Schedule,
    SlotRecord,
    Store,
    Upsert,
)
from tickwork.stores.contract import OneOffCounts

__all__ = ["AsyncDurableScheduler"]

#: How often a worker awaiting a coroutine job checks that the loop still runs.
_LOOP_CHECK: Final = 0.5

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_thread(
    sync: Callable[Concatenate[Any, _P], _R], doc: str
) -> Callable[Concatenate[AsyncDurableScheduler, _P], Coroutine[Any, Any, _R]]:
    """The async face of a `DurableScheduler` method that may take an app's ``connection``.

    It takes the method's own parameters (its signature, for type checkers and
    `inspect`, is the method's) and calls the engine's method in a thread; with a
    ``connection`` on the calling thread instead, where the app uses that connection.
    ``doc`` is the face's docstring.
    """
    name = sync.__name__

    async def face(self: AsyncDurableScheduler, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        call: Callable[[], _R] = functools.partial(getattr(self._engine, name), *args, **kwargs)
        if kwargs.get("connection") is not None:
            return call()
        return await asyncio.to_thread(call)

    signature = inspect.signature(sync)
    me, *rest = signature.parameters.values()
    face.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[me.replace(annotation=inspect.Parameter.empty), *rest]
    )
    face.__name__ = name
    face.__qualname__ = f"AsyncDurableScheduler.{name}"
    face.__doc__ = inspect.cleandoc(doc)
    return face


class AsyncDurableScheduler:
    """Durable jobs kept in a `Store`, with ``async def`` jobs awaited on your loop.

    The arguments are those of `DurableScheduler`, which does the work; see it for
    each. Use it from a running event loop::

        async with AsyncDurableScheduler(SQLiteStore("state.db")) as scheduler:
            await scheduler.declare(JobSpec("refresh", "app.jobs:refresh", Every(60)))
            ...  # the application runs; jobs run until the block ends

    or call `start` and `stop` from an ASGI application's lifespan
    (``examples/asgi_durable.py``).

    Args:
        store: Where the jobs live; not closed by the scheduler.
        owner: See `DurableScheduler`.
        lease: See `DurableScheduler`.
        poll: See `DurableScheduler`.
        executor: See `DurableScheduler`: where runs go (a coroutine job holds its
            worker while it is awaited).
        max_workers: See `DurableScheduler`: the most runs in flight, coroutine jobs
            included.
        wall_clock: See `DurableScheduler`.
        monotonic_clock: See `DurableScheduler`.
        max_errors: See `DurableScheduler`.
        on_error: See `DurableScheduler` (called on the worker thread).
        allowed_modules: See `DurableScheduler`.
        pools: See `DurableScheduler`.
        max_running: See `DurableScheduler`.
        health_after: See `DurableScheduler`.

    Raises:
        TypeError: An argument of the wrong kind.
        ValueError: A bad value; the message names the argument and shows it.

    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        lease: float = 30.0,
        poll: float | None = None,
        executor: Executor | None = None,
        max_workers: int | None = None,
        wall_clock: Callable[[], float] | None = None,
        monotonic_clock: Callable[[], float] | None = None,
        max_errors: int | None = DEFAULT_MAX_ERRORS,
        on_error: DurableErrorHook | None = None,
        allowed_modules: Iterable[str] | None = None,
        pools: Mapping[str, int] | None = None,
        max_running: int | None = None,
        health_after: float = 5.0,
    ) -> None:
        self._engine = DurableScheduler(
            store,
            owner=owner,
            lease=lease,
            poll=poll,
            executor=executor,
            max_workers=max_workers,
            wall_clock=wall_clock,
            monotonic_clock=monotonic_clock,
            max_errors=max_errors,
            on_error=on_error,
            allowed_modules=allowed_modules,
            pools=pools,
            max_running=max_running,
            health_after=health_after,
        )
        self._engine._await_with(self._await)
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"AsyncDurableScheduler({self._engine!r})"

    @property
    def engine(self) -> DurableScheduler:
        """The `DurableScheduler` doing the work.

        Its methods block: call them from threads, never from the event loop.
        """
        return self._engine

    @property
    def store(self) -> Store:
        """The store the jobs live in."""
        return self._engine.store

    @property
    def owner(self) -> str:
        """This scheduler's name in claims."""
        return self._engine.owner

    @property
    def errors(self) -> list[str]:
        """``"job <id>: <message>"`` for each failed run, oldest first (bounded)."""
        return self._engine.errors

    @staticmethod
    def current_claim() -> Claim | None:
        """Inside a running durable job (coroutine or plain): its `Claim`, else ``None``."""
        return DurableScheduler.current_claim()

    def running(self) -> dict[str, int]:
        """Runs in flight per job id (their jobs being called or awaited)."""
        return self._engine.running()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` for every run event (on the worker or timing thread)."""
        self._engine.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
        self._engine.remove_listener(listener)

    # -- store calls, off the loop ---------------------------------------------------

    async def declare(self, spec: JobSpec) -> Upsert:
        """`DurableScheduler.declare`, in a thread; ``async def`` functions are allowed."""
        return await asyncio.to_thread(self._engine.declare, spec)

    async def add(self, spec: JobSpec) -> None:
        """`DurableScheduler.add`, in a thread."""
        await asyncio.to_thread(self._engine.add, spec)

    async def remove(self, job_id: str) -> None:
        """`DurableScheduler.remove`, in a thread."""
        await asyncio.to_thread(self._engine.remove, job_id)

    async def pause(
        self,
        job_id: str,
        *,
        note: str | None = None,
        until: float | datetime | None = None,
        by: str | None = None,
    ) -> None:
        """`DurableScheduler.pause`, in a thread."""
        await asyncio.to_thread(self._engine.pause, job_id, note=note, until=until, by=by)

    async def resume(self, job_id: str, *, by: str | None = None, note: str | None = None) -> bool:
        """`DurableScheduler.resume`, in a thread."""
        return await asyncio.to_thread(self._engine.resume, job_id, by=by, note=note)

    async def trigger(
        self, job_id: str, *, by: str | None = None, note: str | None = None
    ) -> Literal["queued", "skipped"]:
        """`DurableScheduler.trigger`, in a thread."""
        return await asyncio.to_thread(self._engine.trigger, job_id, by=by, note=note)

    async def backfill(
        self,
        job_id: str,
        start: float | datetime,
        end: float | datetime,
        *,
        force: bool = False,
        dry_run: bool = False,
        by: str | None = None,
        note: str | None = None,
    ) -> list[float]:
        """`DurableScheduler.backfill`, in a thread."""
        return await asyncio.to_thread(
            self._engine.backfill,
            job_id,
            start,
            end,
            force=force,
            dry_run=dry_run,
            by=by,
            note=note,
        )

    async def cancel_waiting(
        self,
        job_id: str,
        *,
        slot: float | datetime | None = None,
        by: str | None = None,
        note: str | None = None,
    ) -> list[float]:
        """`DurableScheduler.cancel_waiting`, in a thread."""
        return await asyncio.to_thread(
            self._engine.cancel_waiting, job_id, slot=slot, by=by, note=note
        )

    async def skip_next(
        self, job_id: str, *, by: str | None = None, note: str | None = None
    ) -> tuple[float, float | None] | None:
        """`DurableScheduler.skip_next`, in a thread."""
        return await asyncio.to_thread(self._engine.skip_next, job_id, by=by, note=note)

    async def actions(
        self, job_id: str | None = None, *, since: float | None = None, limit: int = 100
    ) -> list[ActionRecord]:
        """`DurableScheduler.actions`, in a thread."""
        return await asyncio.to_thread(self._engine.actions, job_id, since=since, limit=limit)

    async def reschedule(self, job_id: str, schedule: Schedule) -> None:
        """`DurableScheduler.reschedule`, in a thread."""
        await asyncio.to_thread(self._engine.reschedule, job_id, schedule)

    async def get(self, job_id: str) -> JobState | None:
        """`DurableScheduler.get`, in a thread."""
        return await asyncio.to_thread(self._engine.get, job_id)

    async def jobs(self) -> list[JobState]:
        """`DurableScheduler.jobs`, in a thread."""
        return await asyncio.to_thread(self._engine.jobs)

    async def history(
        self,
        job_id: str | None = None,
        *,
        since: float | datetime | None = None,
        outcome: str | None = None,
        before: int | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[SlotRecord]:
        """`DurableScheduler.history`, in a thread."""
        return await asyncio.to_thread(
            functools.partial(
                self._engine.history,
                job_id,
                since=since,
                outcome=outcome,
                before=before,
                after=after,
                limit=limit,
            )
        )

    # -- delayed jobs ----------------------------------------------------------------

    enqueue = _in_thread(
        DurableScheduler.enqueue,
        """`DurableScheduler.enqueue`, in a thread; ``async def`` functions are allowed.

        With ``connection`` (the app's own, blocking, PostgreSQL connection: see
        `DurableScheduler.enqueue`) the insert runs on this thread, where the app uses
        that connection: a Django connection belongs to its thread, and the statement
        must be in the app's transaction.
        """,
    )

    enqueue_many = _in_thread(
        DurableScheduler.enqueue_many,
        """`DurableScheduler.enqueue_many`, in a thread (with ``connection``: see `enqueue`).""",
    )

    async def cancel(self, ref: Enqueued | str, *, by: str | None = None) -> bool:
        """`DurableScheduler.cancel` (a pending one-off), in a thread."""
        return await asyncio.to_thread(self._engine.cancel, ref, by=by)

    async def oneoffs(self) -> list[OneOffCounts]:
        """`DurableScheduler.oneoffs`, in a thread."""
        return await asyncio.to_thread(self._engine.oneoffs)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine; coroutine jobs will be awaited on the loop running this.

        Raises:
            RuntimeError: Already started, or stopped (a scheduler does not restart).

        """
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._engine.start)

    async def stop(self, wait: bool = True, timeout: float | None = None) -> bool:
        """`DurableScheduler.stop`, in a thread.

        The loop keeps running meanwhile, so the coroutine jobs being awaited can
        finish and be recorded.
        """
        return await asyncio.to_thread(self._engine.stop, wait, timeout)

    async def __aenter__(self) -> AsyncDurableScheduler:
        """Start; return the scheduler."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop and wait for the running jobs."""
        await self.stop()

    # -- the engine's hook, on a worker thread ---------------------------------------

    def _await(self, awaitable: Awaitable[object], claim: Claim) -> object:
        """Await ``awaitable`` on the loop; return its result or raise its exception."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            _close(awaitable)
            raise RuntimeError(
                "a coroutine job needs the event loop AsyncDurableScheduler.start() ran on,"
                f" and it is not running (loop: {loop!r})"
            )

        async def run() -> object:
            current_async_claim.set(claim)  # this task's own context: nothing to reset
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(run(), loop)
        while True:
            done, _ = concurrent.futures.wait([future], timeout=_LOOP_CHECK)
            if done:
                return future.result()
            if loop.is_closed() or not loop.is_running():
                future.cancel()
                raise RuntimeError("the event loop stopped while a coroutine job was awaited")


def _close(awaitable: Awaitable[object]) -> None:
    """Close a coroutine that will never run, so it does not warn "never awaited"."""
    if isinstance(awaitable, Coroutine):
        coro: Coroutine[Any, Any, object] = awaitable
        coro.close()
