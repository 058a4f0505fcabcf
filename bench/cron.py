"""Benchmark: next-fire computations per second, tickwork vs raw cronsim vs croniter.

Workload: for each expression in Europe/Berlin, compute the next fire time after a
chain of instants (each op starts from the previous result, as a scheduler does after
every run). Each op is a fresh query from an aware instant:

* tickwork: ``CronExpression.next_after(t)`` (expression parsed once, up front);
* cronsim:  ``next(CronSim(expr, t_local))`` (raw cronsim, its own DST handling);
* croniter: ``croniter(expr, t_local).get_next(datetime)``.

Repeats are interleaved and the best of each is kept. Prints ns/op and the ratio to
raw cronsim measured in the same run. Run: ``.venv/bin/python bench/cron.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

from tickwork._core.cron import CronExpression

TZ = ZoneInfo("Europe/Berlin")
EXPRS = ["*/5 * * * *", "0 9 * * 1-5"]
OPS = 2000
REPEATS = 7


def ours(expr: str) -> Callable[[datetime], datetime]:
    cron = CronExpression(expr, TZ)
    return cron.next_after


def raw_cronsim(expr: str) -> Callable[[datetime], datetime]:
    def step(t: datetime) -> datetime:
        return next(CronSim(expr, t))

    return step


def raw_croniter(expr: str) -> Callable[[datetime], datetime]:
    def step(t: datetime) -> datetime:
        result: datetime = croniter(expr, t).get_next(datetime)
        return result

    return step


def run_chain(step: Callable[[datetime], datetime], start: datetime) -> float:
    t = start
    t0 = time.perf_counter_ns()
    for _ in range(OPS):
        t = step(t)
    return (time.perf_counter_ns() - t0) / OPS


def main() -> int:
    start = datetime(2025, 1, 1, tzinfo=TZ)
    print(f"Python {sys.version.split()[0]}; {OPS} ops x best of {REPEATS}, Europe/Berlin")
    for expr in EXPRS:
        contenders = {
            "tickwork": ours(expr),
            "cronsim": raw_cronsim(expr),
            "croniter": raw_croniter(expr),
        }
        for step in contenders.values():  # warm caches (zone transitions, imports)
            run_chain(step, start)
        best = dict.fromkeys(contenders, float("inf"))
        for _ in range(REPEATS):
            for name, step in contenders.items():
                best[name] = min(best[name], run_chain(step, start))
        base = best["cronsim"]
        print(f"\n{expr!r}")
        for name, ns in best.items():
            print(f"  {name:<9} {ns:10.0f} ns/op   {ns / base:5.2f}x raw cronsim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
