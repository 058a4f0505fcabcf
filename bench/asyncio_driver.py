"""Benchmark: tickwork's AsyncScheduler against bare loop.call_later and APScheduler 3.

Run it with the bench extra installed (everything is measured in the same run)::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/asyncio_driver.py

Workloads, the same for every scheduler, each on a fresh `asyncio.run` loop:

- lateness: 2,000 one-shot coroutine jobs due evenly over 2 s; the loop time at which
  the job starts minus its due time, p50/p99/max.
- throughput: 100,000 noop coroutine jobs, all due at once: jobs run per second, from
  start until the last one has run.

The floor is `loop.call_later` with a callback that starts the coroutine as a task: what
a hand-written loop would cost, with no cancel bookkeeping, overlap policy or errors.
APScheduler 3 runs `AsyncIOScheduler` with its memory job store. This is not a test:
nothing asserts on absolute time. Targets: tickwork's throughput within 1.5x of the
floor's, and its p99 lateness <= 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from driver import Result, at, lateness_summary  # bench/driver.py, beside this file
from tickwork import AsyncScheduler

LATE_JOBS = 2_000
LATE_SPAN = 2.0
BURST = 100_000


class Lateness:
    """Jobs that record how late they start, and an event set by the last one."""

    def __init__(self, count: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.count = count
        self.late: list[float] = []
        self.done = asyncio.Event()

    def job(self, due: float) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            self.late.append(self.loop.time() - due)
            if len(self.late) == self.count:
                self.done.set()

        return run


class Counter:
    """A noop coroutine job that counts its runs; ``done`` is set at ``count``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.n = 0
        self.done = asyncio.Event()

    async def job(self) -> None:
        self.n += 1
        if self.n == self.count:
            self.done.set()


# -- tickwork ---------------------------------------------------------------------------


async def tickwork_lateness() -> Result:
    bench = Lateness(LATE_JOBS)
    loop = bench.loop
    async with AsyncScheduler() as s:
        t0 = loop.time() + 0.3
        for i in range(LATE_JOBS):
            due = t0 + LATE_SPAN * i / LATE_JOBS
            s.schedule(due - loop.time(), bench.job(due))
        await asyncio.wait_for(bench.done.wait(), 60)
    return lateness_summary(bench.late)


async def tickwork_throughput() -> Result:
    bench = Counter(BURST)
    s = AsyncScheduler()
    for _ in range(BURST):
        s.schedule(0.0, bench.job)
    t = time.perf_counter()
    await s.start()
    await asyncio.wait_for(bench.done.wait(), 600)
    elapsed = time.perf_counter() - t
    await s.stop()
    return {"rate": BURST / elapsed}


# -- the floor: bare loop.call_later ------------------------------------------------------


def start_task(loop: asyncio.AbstractEventLoop, tasks: set[Any], job: Callable[[], Any]) -> None:
    task = loop.create_task(job())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def floor_lateness() -> Result:
    bench = Lateness(LATE_JOBS)
    loop = bench.loop
    tasks: set[Any] = set()
    t0 = loop.time() + 0.3
    for i in range(LATE_JOBS):
        due = t0 + LATE_SPAN * i / LATE_JOBS
        loop.call_later(due - loop.time(), start_task, loop, tasks, bench.job(due))
    await asyncio.wait_for(bench.done.wait(), 60)
    return lateness_summary(bench.late)


async def floor_throughput() -> Result:
    bench = Counter(BURST)
    loop = asyncio.get_running_loop()
    tasks: set[Any] = set()
    t = time.perf_counter()
    for _ in range(BURST):
        loop.call_later(0.0, start_task, loop, tasks, bench.job)
    await asyncio.wait_for(bench.done.wait(), 600)
    return {"rate": BURST / (time.perf_counter() - t)}


# -- APScheduler 3 (AsyncIOScheduler, memory job store) ------------------------------------


def aps() -> Any:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    return AsyncIOScheduler(
        timezone="UTC",
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
    )


async def aps_lateness() -> Result:
    # APScheduler keeps time on the wall clock: jobs measure against time.time().
    late: list[float] = []
    done = asyncio.Event()
    s = aps()
    s.start()
    t0 = time.time() + 0.3
    for i in range(LATE_JOBS):
        due = t0 + LATE_SPAN * i / LATE_JOBS

        async def job(due: float = due) -> None:
            late.append(time.time() - due)
            if len(late) == LATE_JOBS:
                done.set()

        s.add_job(job, "date", run_date=at(due))
    await asyncio.wait_for(done.wait(), 60)
    s.shutdown(wait=False)
    return lateness_summary(late)


async def aps_throughput() -> Result:
    bench = Counter(BURST)
    s = aps()
    now = at(time.time())
    for _ in range(BURST):
        s.add_job(bench.job, "date", run_date=now)
    t = time.perf_counter()
    s.start()
    await asyncio.wait_for(bench.done.wait(), 600)
    elapsed = time.perf_counter() - t
    s.shutdown(wait=False)
    return {"rate": BURST / elapsed}


# -- harness -------------------------------------------------------------------------------


def measure(runs: dict[str, Callable[[], Awaitable[Result]]]) -> Result:
    out: Result = {}
    for name, fn in runs.items():
        print(f"  {name} ...", end="", flush=True, file=sys.stderr)
        out.update(asyncio.run(fn()))
        print(" done", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-aps", action="store_true", help="skip APScheduler")
    args = parser.parse_args()
    results: dict[str, Result] = {}
    print("floor", file=sys.stderr)
    results["loop.call_later (floor)"] = measure(
        {"lateness": floor_lateness, "throughput": floor_throughput}
    )
    print("tickwork", file=sys.stderr)
    results["tickwork AsyncScheduler"] = measure(
        {"lateness": tickwork_lateness, "throughput": tickwork_throughput}
    )
    if not args.no_aps:
        try:
            import apscheduler
        except ImportError:
            print("APScheduler missing: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
            return 2
        print(f"APScheduler {apscheduler.__version__}", file=sys.stderr)
        results["APScheduler 3 AsyncIOScheduler"] = measure(
            {"lateness": aps_lateness, "throughput": aps_throughput}
        )

    columns = [
        ("p50 late ms", "p50", "{:.3f}"),
        ("p99 late ms", "p99", "{:.3f}"),
        ("max late ms", "max", "{:.3f}"),
        ("jobs/s (burst)", "rate", "{:,.0f}"),
    ]
    print(f"Python {sys.version.split()[0]}\n")
    print("| scheduler | " + " | ".join(c[0] for c in columns) + " | throughput vs floor |")
    print("|---|" + "---:|" * (len(columns) + 1))
    floor = results["loop.call_later (floor)"]
    for name, r in results.items():
        cells = " | ".join(fmt.format(r[key]) for _, key, fmt in columns)
        print(f"| {name} | {cells} | {floor['rate'] / r['rate']:.2f}x slower |")
    tw = results["tickwork AsyncScheduler"]
    ratio = floor["rate"] / tw["rate"]
    print()
    verdict = "PASS" if ratio <= 1.5 else "MISS"
    print(f"throughput: floor / tickwork = {ratio:.2f}x (target <= 1.5x) {verdict}")
    verdict = "PASS" if tw["p99"] <= 1.0 else "MISS"
    print(f"p99 lateness: tickwork {tw['p99']:.3f} ms (target <= 1 ms) {verdict}")
    aps_r = results.get("APScheduler 3 AsyncIOScheduler")
    if aps_r:
        print(f"throughput: tickwork / APScheduler = {tw['rate'] / aps_r['rate']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
