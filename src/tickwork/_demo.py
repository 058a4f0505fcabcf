"""``tickwork demo``: SPEC.md's Example 1 on a real clock, narrated.

Time is compressed by ``speed`` (default 2: the 20 schedule-seconds of the example
take 10 real seconds), so the run ends by itself. The clock handed to the scheduler
reads whole (scaled) seconds, the way cron reads whole minutes: a call made a few
microseconds after t=6 still sees t=6, so the outputs match the example exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

from ._scheduler import Scheduler


def run_demo(out: TextIO, *, speed: float = 2.0) -> int:
    """Play Example 1 in real time, printing every call and every job run; return 0."""
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed!r}")
    start = time.monotonic()

    def elapsed() -> float:
        return time.monotonic() - start

    def clock() -> float:
        return float(math.floor(elapsed() * speed))

    log: list[str] = []

    def job(name: str) -> Callable[[], None]:
        def run() -> None:
            log.append(name)
            print(f"        ran {name:<8} (real time {elapsed():6.3f} s)", file=out, flush=True)

        return run

    s = Scheduler(clock)

    def say(at: float, call: str, result: object) -> None:
        print(f"t={at:<4g} {call:<42} -> {result!r}", file=out, flush=True)

    def wait_until(t: float) -> None:
        # A real driver would sleep on next_run_in(); the demo follows the example's
        # script instead, so every call happens at the time the example gives.
        while (remaining := t - elapsed() * speed) > 0:
            time.sleep(remaining / speed)

    print(f"SPEC Example 1 on a real clock, {speed:g}x speed\n", file=out)
    say(0, 's.schedule(5, job("backup"))', s.schedule(5, job("backup")))
    say(0, 's.schedule(2, job("rotate"))', s.schedule(2, job("rotate")))
    say(0, 's.schedule(3, job("probe"), interval=3)', s.schedule(3, job("probe"), interval=3))
    say(0, 's.schedule(4, job("noop"))', s.schedule(4, job("noop")))
    say(0, "s.cancel(4)", s.cancel(4))
    for t in (1, 2, 6, 9):
        wait_until(t)
        say(t, "s.run_pending()", s.run_pending())
    say(9, "s.next_run_in()", s.next_run_in())
    say(9, "s.cancel(3)", s.cancel(3))
    wait_until(20)
    say(20, "s.run_pending()", s.run_pending())
    say(20, "s.cancel(3)", s.cancel(3))
    say(20, "s.next_run_in()", s.next_run_in())
    print(f"\nlog == {log!r}", file=out)
    return 0
