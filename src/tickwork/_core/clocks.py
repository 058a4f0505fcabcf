"""Clocks: what the core and the drivers take time from, and how a test clock is noticed.

A clock is any callable returning seconds (`time.monotonic`, `time.time`, a
`tickwork.testing.FakeClock`). A clock that moves only when told to offers ``watch``
(`WatchableClock`): a driver registers a callback with it, so moving the clock wakes
the driver at once. Production code recognises such a clock by this protocol alone and
never imports ``tickwork.testing``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

__all__ = ["WALL_STEP", "WatchableClock", "watch_clock"]

#: A change of the wall-minus-monotonic offset beyond this many seconds means the wall
#: clock was set (an NTP step, an administrator, a resume from suspend): wall-clock
#: schedules are re-anchored to the new wall time. Smaller changes (NTP slewing,
#: rounding) are drift, absorbed: they move calendar runs by less than this.
WALL_STEP: Final = 1.0


@runtime_checkable
class WatchableClock(Protocol):
    """A clock that calls back whenever it is moved (a test's fake clock)."""

    def watch(self, callback: Callable[[], object]) -> None:
        """Have ``callback`` called after every move of this clock."""


def watch_clock(clock: object, callback: Callable[[], object]) -> None:
    """Have ``callback`` called whenever ``clock`` moves, if it is a `WatchableClock`.

    A bound method of one (``clock.wall``) counts; any other clock is left alone.
    """
    owner = getattr(clock, "__self__", clock)
    if isinstance(owner, WatchableClock):
        owner.watch(callback)
