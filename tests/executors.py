"""Executors for tests that drive a scheduler's steps by hand (no pool threads)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, Protocol

import pytest

from tickwork import DurableScheduler
from tickwork.stores import Store
from tickwork.testing import FakeClock


class ManualExecutor(Executor):
    """Keeps submitted work until the test runs it with `run_all`.

    A run cannot start, or end, between two of a test's assertions, however loaded the
    machine is. An exception out of a pool item is not swallowed: it fails the test.
    """

    def __init__(self) -> None:
        self.queue: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.queue.append((fn, args))
        return Future()

    def run_all(self) -> int:
        """Run what was submitted, in order, and what that submits; return how many."""
        n = 0
        while self.queue:
            fn, args = self.queue.pop(0)
            fn(*args)
            n += 1
        return n


class _Steps(Protocol):
    def step(self) -> float: ...


def drain(ds: _Steps, pool: ManualExecutor) -> None:
    """Step ``ds`` and run ``pool`` until nothing more is due now (at most 1,000 steps)."""
    for _ in range(1000):
        wait = ds.step()
        if not pool.run_all() and wait > 0:
            return
    raise AssertionError("never settled")


def manual_scheduler(store: Store, clock: FakeClock) -> tuple[DurableScheduler, ManualExecutor]:
    """A `DurableScheduler` on ``store`` and ``clock`` whose runs wait in a `ManualExecutor`.

    Its jobs may be in ``tests.durable_jobs`` only; `drain` runs what it claimed.
    """
    pool = ManualExecutor()
    ds = DurableScheduler(
        store,
        executor=pool,
        wall_clock=clock.wall,
        monotonic_clock=clock,
        allowed_modules=["tests.durable_jobs"],
    )
    return ds, pool


def inline_scheduler(store: Store, clock: FakeClock) -> DurableScheduler:
    """A `DurableScheduler` on ``store`` and ``clock`` that runs each claimed run at once.

    Its jobs are run in the timing thread's `step`, so a test sees them done when it
    returns.
    """
    from tickwork.testing import InlineExecutor

    return DurableScheduler(
        store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
    )


def freeze_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the timing thread's own monotonic clock stand still (`LOOK_GAP` is read on it).

    A look then takes no time, so the gap after it is measured exactly.
    """
    from tickwork._durable import claims as claims_mod

    class Frozen:
        @staticmethod
        def monotonic() -> float:
            return 1000.0

    monkeypatch.setattr(claims_mod, "time", Frozen)
