"""Declaring durable jobs: `declare`, `add`, `declare_many` and the decorators' form.

`Declaring` is `DurableScheduler`'s part that checks what a store does not (the function
imports and takes the arguments, the schedule computes, the pool has a limit, the
chains' upstream jobs exist) and hands the job to the store: one by one, or a whole
program's jobs in one transaction (`declare_many`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from tickwork._core.scheduler import _is_coroutine_function, misfit
from tickwork._core.schedules import Cron, Every
from tickwork._durable.chains import check_after
from tickwork._durable.decide import first_run
from tickwork._durable.isolation import check_importable
from tickwork._durable.pools import Pools
from tickwork.stores import JobSpec, JobSpecError, Store, Upsert
from tickwork.stores.contract import ONEOFF_MARK, BatchDeclare, is_oneoff, resolve_func

__all__ = ["Declaring"]


class _Host(Protocol):
    """What `Declaring` uses of its `DurableScheduler`."""

    _store: Store
    _pools: Pools

    def _allow(self, func: str) -> None: ...
    def _poke(self) -> None: ...
    def now(self) -> float: ...
    def _prepare(self, spec: JobSpec, now: float | None = None) -> tuple[JobSpec, float | None]: ...
    @property
    def _awaits(self) -> bool: ...


class Declaring:
    """`DurableScheduler`'s declarations (see the module's docstring)."""

    def declare(self: _Host, spec: JobSpec) -> Upsert:
        """Declare a job, idempotently by id: create it, update it, or change nothing.

        Call it at start-up for every job the program defines. The same declaration
        as stored changes nothing (not the next run, not a pause made at run time);
        a changed schedule restarts the job's schedule from now; other changes keep
        the next run. The job's function is imported here, so a typo fails now.

        Args:
            spec: The job.

        Returns:
            What the store did.

        Raises:
            TypeError: ``spec`` is not a `JobSpec`, or its ``func`` names a coroutine
                function (``async def``: jobs are called, never awaited).
            JobSpecError: The function cannot be imported, the cron expression or zone
                is invalid here, or an interval is below the wall clock's resolution.
                Nothing is stored then.
            StoreError: The store failed (nothing is stored).

        """
        spec, first = self._prepare(spec)
        result = self._store.upsert(spec, first)
        self._allow(spec.func)
        self._poke()
        return result

    def _decorated(
        self: _Host, schedule: Every | Cron, fn: Callable[..., object], options: Any
    ) -> None:
        """``@scheduler.every(...)``: declare ``fn`` by its import path (id: ``name`` or it)."""
        path = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', '')}"
        if not re.fullmatch(r"[\w.]+:[\w.]+", path):
            raise TypeError(
                "a durable job's function must be importable by its path (a module-level"
                f" function), got {fn!r}"
            )
        options = dict(options)  # one decorator may declare several functions
        Declaring.declare(
            self, JobSpec(options.pop("name", None) or path, path, schedule, **options)
        )

    def add(self: _Host, spec: JobSpec) -> None:
        """Add a new job at run time (`declare` if it may exist already).

        Raises:
            ValueError: A job with this id exists (nothing is changed).
            TypeError: As for `declare`.
            JobSpecError: As for `declare`.

        """
        spec, first = self._prepare(spec)
        if self._store.get(spec.id) is not None:
            raise ValueError(f"a job with id {spec.id!r} exists already; declare() updates it")
        self._store.upsert(spec, first)
        self._allow(spec.func)
        self._poke()

    def declare_many(self: _Host, specs: Iterable[JobSpec]) -> list[Upsert | Exception]:
        """Declare many jobs at once: what a program (or a jobs file) does at each start.

        Each spec is checked as `declare` checks it; the ones that pass are written in one
        transaction (`tickwork.stores.contract.BatchDeclare`: only the new or changed ones
        are written), so a restart with a hundred thousand unchanged jobs is quick. A
        chained job (``after``) is declared after the others, one by one (its upstream
        jobs must be stored first).

        Returns:
            Per spec, in order: what the store did, or the exception its checks raised
            (`JobSpecError`, `TypeError`; nothing is stored for it).

        Raises:
            StoreError: The store failed (nothing of the batch is stored).

        """
        now = self.now()  # one reading for the batch (a store's clock is a round trip)
        out: list[Upsert | Exception | None] = []
        batch: list[tuple[int, JobSpec, float | None]] = []
        chained: list[tuple[int, JobSpec]] = []
        for i, spec in enumerate(specs):
            out.append(None)
            if isinstance(spec, JobSpec) and spec.after:
                chained.append((i, spec))
                continue
            try:
                checked, first = self._prepare(spec, now)
            except (TypeError, ValueError) as exc:  # JobSpecError is a ValueError
                out[i] = exc
                continue
            batch.append((i, checked, first))
        store = self._store
        if isinstance(store, BatchDeclare):
            done = store.upsert_many([(spec, first) for _, spec, first in batch])
        else:
            done = [store.upsert(spec, first) for _, spec, first in batch]
        for (i, spec, _), result in zip(batch, done, strict=True):
            out[i] = result
            self._allow(spec.func)
        for i, spec in chained:
            try:
                out[i] = Declaring.declare(self, spec)
            except (TypeError, ValueError) as exc:
                out[i] = exc
        self._poke()
        return [r for r in out if r is not None]

    def _prepare(
        self: _Host, spec: JobSpec, now: float | None = None
    ) -> tuple[JobSpec, float | None]:
        """Check what a store does not: the function imports, the schedule computes.

        ``now``: the time its first run counts from (default: now, read from the clock,
        which may be the database server's: a batch reads it once).
        """
        now = self.now() if now is None else now
        checked = _checked_spec(spec, awaits=self._awaits, now=now)
        check_after(self._store, checked[0])  # chains: after= names stored jobs, no cycle
        self._pools.check(checked[0])  # its pool has a limit
        return checked


def _checked_spec(spec: JobSpec, *, awaits: bool, now: float) -> tuple[JobSpec, float | None]:
    """``spec`` and its first run, after the checks a store does not make.

    The function imports and can take the arguments (a coroutine function only where
    the scheduler ``awaits``), and the schedule computes a first run after ``now``.
    """
    if not isinstance(spec, JobSpec):
        raise TypeError(f"spec must be a tickwork.stores.JobSpec, got {spec!r}")
    if is_oneoff(spec.id):
        raise JobSpecError(
            f"a declared job's id must not start with {ONEOFF_MARK!r} (a one-off's"
            f" mark), got {spec.id!r}"
        )
    fn = resolve_func(spec.func)  # raises JobSpecError naming the path and why
    if not awaits and _is_coroutine_function(fn):
        raise TypeError(
            "func must name a plain function, not a coroutine function (async def):"
            " DurableScheduler calls jobs without awaiting them; use"
            " tickwork.AsyncDurableScheduler, which awaits them on your event loop,"
            f" got {spec.func!r}"
        )
    if spec.isolation == "process":
        try:
            check_importable(spec.func, fn)
        except ValueError as exc:
            raise JobSpecError(f"job {spec.id!r}: {exc}") from None
    why = misfit(fn, spec.args, spec.kwargs)
    if why is not None:
        raise JobSpecError(
            f"job {spec.id!r}: func {spec.func!r} cannot be called with"
            f" args={list(spec.args)!r} and kwargs={dict(spec.kwargs)!r}: {why}"
        )
    try:
        # Chains: a job with no schedule of its own (only after=) has no first run.
        first = None if spec.schedule is None else first_run(spec.schedule, now)
    except ValueError as exc:  # CronError is a ValueError
        raise JobSpecError(f"job {spec.id!r}: {exc}") from exc
    schedule = spec.schedule
    interval = None if schedule is None else schedule.period
    if interval is not None and first is not None and interval < math.ulp(first):
        # The wall clock could not tell its slots apart (slot + seconds == slot).
        raise JobSpecError(
            f"job {spec.id!r}: schedule.seconds must be at least {math.ulp(first)!r} s,"
            f" the wall clock's resolution at the first run {first!r},"
            f" got {interval!r}"
        )
    return spec, first
