"""``tickwork demo``: a narrated tour of the core `Scheduler` on a real clock.

A short script schedules a few jobs (a backup, a log rotation, a repeating probe, a
job that is cancelled), then calls ``run_pending()`` at chosen moments, printing every
call, its result and every job run. Time is compressed by ``speed`` (default 2: the 20
schedule-seconds of the script take 10 real seconds), so the run ends by itself.

The clock handed to the scheduler reads the script's time: the demo really waits until
each scripted moment and then shows the scheduler that moment, the way cron reads
whole minutes. A call that a loaded machine delays still sees its scripted second, so
the output is the same on every run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tickwork._core.scheduler import Scheduler


def run_demo(out: TextIO, *, speed: float = 2.0) -> int:
    """Play the demo script in real time, printing every call and every job run; return 0."""
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed!r}")
    start = time.monotonic()

    def elapsed() -> float:
        return time.monotonic() - start

    now = 0.0  # the scripted moment the scheduler sees (set once it has really come)

    def clock() -> float:
        return now

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
        # A real driver would sleep on next_run_in(); the demo follows its script
        # instead, so every call happens at the time the script gives.
        nonlocal now
        while (remaining := t - elapsed() * speed) > 0:
            time.sleep(remaining / speed)
        now = float(t)

    print(f"The tickwork Scheduler on a real clock, {speed:g}x speed\n", file=out)
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


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``demo`` sub-command to an argparse ``subparsers`` object."""
    demo = subparsers.add_parser(
        "demo",
        help="watch the scheduler schedule, run and cancel a few jobs (about 10 s)",
        description="A narrated tour of the library's Scheduler on a real clock: it "
        "schedules a backup, a log rotation and a repeating probe, cancels a job, and "
        "prints every call and every run as it happens. For the cron replacement, see "
        "`tickwork run --help`.",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=2.0,
        help="how many times faster than real time to play it (default 2)",
    )
    demo.set_defaults(func=_run)
    demo_parser: argparse.ArgumentParser = demo
    return demo_parser


def _run(args: argparse.Namespace) -> int:
    return run_demo(sys.stdout, speed=args.speed)
