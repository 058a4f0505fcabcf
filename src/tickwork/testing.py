"""Helpers for testing code that uses tickwork: a controllable clock and executor.

The core, on a `FakeClock`::

    from tickwork import Scheduler
    from tickwork.testing import FakeClock

    clock = FakeClock()
    s = Scheduler(clock)
    s.schedule(5, job)
    clock.advance(5)
    assert s.run_pending() == 1

Every driver built with a `FakeClock` (``clock=`` for `ThreadScheduler` and
`AsyncScheduler`; ``wall_clock=clock.wall, monotonic_clock=clock`` for
`DurableScheduler`) watches it: moving the clock wakes a started driver at once, which
then runs what is due on the fake time. Without starting it, each driver's public
``step()`` runs one tick in the calling thread; with an `InlineExecutor` the due jobs
run inside that call, so a test needs no thread and no sleep. See ``docs/testing.md``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING

from tickwork._core.args import seconds
from tickwork._core.clocks import watch_clock as watch_clock

if TYPE_CHECKING:
    from tickwork._drivers.inline import InlineExecutor as InlineExecutor

__all__ = ["FakeClock", "InlineExecutor"]


def __getattr__(name: str) -> object:
    """Import `InlineExecutor` on first use.

    It needs ``concurrent.futures``, which loads threading: importing the clock must not.
    """
    if name == "InlineExecutor":
        from tickwork._drivers.inline import InlineExecutor

        return InlineExecutor
    raise AttributeError(f"module 'tickwork.testing' has no attribute {name!r}")


class FakeClock:
    """A clock that only moves when told to; pass it where tickwork takes a clock.

    Calling the instance returns the current monotonic reading (seconds), so it can
    stand in for `time.monotonic`. `wall` returns a wall-clock reading (POSIX seconds)
    that moves with it and can additionally be stepped on its own with `jump_wall`,
    the way NTP or a suspended laptop moves `time.time` but not `time.monotonic`.

    Args:
        start: The first monotonic reading.
        wall_start: The first wall-clock reading, in POSIX seconds.

    """

    __slots__ = ("__weakref__", "_now", "_wall_offset", "_watchers")

    def __init__(self, start: float = 0.0, *, wall_start: float = 1_700_000_000.0) -> None:
        self._now = _finite("start", start)
        self._wall_offset = _finite("wall_start", wall_start) - self._now
        self._watchers: list[Callable[[], Callable[[], object] | None]] = []

    def watch(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` after every move of this clock (`advance`, `set`, `jump_wall`).

        The drivers register here when they are built with this clock, so that moving it
        wakes them; a test seldom needs it. A bound method is held weakly (a driver that
        is dropped stops being called); it is called on the thread that moved the clock.

        Raises:
            TypeError: ``callback`` is not callable.

        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        ref: Callable[[], Callable[[], object] | None] = (
            weakref.WeakMethod(callback) if isinstance(callback, MethodType) else lambda: callback
        )
        self._watchers = [*self._watchers, ref]  # copy on write: movers read a snapshot

    def _moved(self) -> None:
        refs = self._watchers
        gone = False
        for ref in refs:
            callback = ref()
            if callback is None:
                gone = True
            else:
                callback()
        if gone:
            self._watchers = [r for r in self._watchers if r() is not None]

    def __call__(self) -> float:
        """The current monotonic reading."""
        return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r}, wall_start={self.wall()!r})"

    @property
    def now(self) -> float:
        """The current monotonic reading (same as calling the clock)."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0); return the new reading.

        Raises:
            ValueError: ``seconds`` is negative or not finite: a monotonic clock never
                goes backwards.

        """
        step = _finite("seconds", seconds)
        if step < 0:
            raise ValueError(f"seconds must be >= 0 (the clock never goes back), got {seconds!r}")
        self._now += step
        self._moved()
        return self._now

    def set(self, now: float) -> float:
        """Move time forward to ``now``; return it.

        Raises:
            ValueError: ``now`` is earlier than the current reading, or not finite.

        """
        target = _finite("now", now)
        if target < self._now:
            raise ValueError(
                f"now must not be earlier than the current reading {self._now!r}, got {now!r}"
            )
        self._now = target
        self._moved()
        return self._now

    def wall(self) -> float:
        """The current wall-clock reading, in POSIX seconds (a stand-in for `time.time`)."""
        return self._now + self._wall_offset

    def jump_wall(self, seconds: float) -> float:
        """Step only the wall clock by ``seconds`` (either sign); return the new wall time.

        Models an NTP correction, an administrator setting the time, or a resume from
        suspend on Linux (where `time.monotonic` stops while the machine sleeps and
        `time.time` does not). A resume where both clocks move on together is
        `advance`. ``docs/cron.md`` ("Steps of the system clock") says what the
        schedulers do after each.

        Raises:
            TypeError: ``seconds`` is not a number.
            ValueError: ``seconds`` is not finite.

        """
        self._wall_offset += _finite("seconds", seconds)
        self._moved()
        return self.wall()


def _finite(name: str, value: float) -> float:
    """``value`` as a finite float, or a `TypeError` / `ValueError` naming ``name``."""
    return seconds(name, value)
