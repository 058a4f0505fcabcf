"""Helpers for testing code that uses tickwork: a controllable clock.

Example::

    from tickwork import Scheduler
    from tickwork.testing import FakeClock

    clock = FakeClock()
    s = Scheduler(clock)
    s.schedule(5, job)
    clock.advance(5)
    assert s.run_pending() == 1
"""

from __future__ import annotations

import math

__all__ = ["FakeClock"]


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

    __slots__ = ("_now", "_wall_offset")

    def __init__(self, start: float = 0.0, *, wall_start: float = 1_700_000_000.0) -> None:
        self._now = _finite("start", start)
        self._wall_offset = _finite("wall_start", wall_start) - self._now

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
        return self.wall()


def _finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)
