"""Benchmark: tickwork's ThreadScheduler against APScheduler 3 and stdlib sched in a thread.

Run it with the bench extra installed (the baselines are measured in the same run)::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/driver.py

Workloads, the same for every scheduler (worker pools: 10 threads for tickwork and
APScheduler's default; sched runs its jobs in its own thread):

- lateness: 2,000 one-shots due evenly over 2 s; run time minus due time, p50/p99/max.
- add / remove: the cost per job of adding 20,000 far-future jobs to a running
  scheduler, then removing them all.
- idle CPU: process CPU time over 3 idle seconds with 1,000 far-future jobs pending.
- throughput: 100,000 noop jobs, all due at once: jobs run per second.

Every scheduler is warmed up first (a short pass of each workload, discarded); then
``--rounds`` rounds (default 3) run all three, the first one rotating each round, and each
figure is the median over the rounds. ``--quick`` uses smaller sizes.

This is not a test: nothing asserts on absolute time. Targets (idle machine): p99
lateness <= 1 ms, max <= 5 ms; add and remove <= 3 us per job; idle CPU <= 0.5 ms per
3 s; throughput >= 10x APScheduler's.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sched
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tickwork import ThreadScheduler

WORKERS = 10
LATE_JOBS = 2_000
LATE_SPAN = 2.0
PENDING = 20_000
IDLE_JOBS = 1_000
IDLE_SECONDS = 3.0
BURST = 100_000

Result = dict[str, float]


def noop() -> None:
    pass


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lateness_summary(late: list[float]) -> Result:
    return {
        "p50": statistics.median(late) * 1e3,
        "p99": percentile(late, 0.99) * 1e3,
        "max": max(late) * 1e3,
    }


# -- tickwork --------------------------------------------------------------------------


def tickwork_lateness() -> Result:
    late: list[float] = []
    done = threading.Event()
    with ThreadScheduler(max_workers=WORKERS) as s:
        t0 = time.monotonic() + 0.3
        for i in range(LATE_JOBS):
            due = t0 + LATE_SPAN * i / LATE_JOBS

            def job(due: float = due) -> None:
                late.append(time.monotonic() - due)
                if len(late) == LATE_JOBS:
                    done.set()

            s.schedule(due - time.monotonic(), job)
        done.wait(60)
    return lateness_summary(late)


def tickwork_add_remove() -> Result:
    with ThreadScheduler(max_workers=WORKERS) as s:
        schedule, cancel = s.schedule, s.cancel
        t = time.perf_counter()
        ids = [schedule(3600.0 + i * 1e-3, noop) for i in range(PENDING)]
        added = time.perf_counter() - t
        t = time.perf_counter()
        for task_id in ids:
            cancel(task_id)
        removed = time.perf_counter() - t
    return {"add": added / PENDING * 1e6, "remove": removed / PENDING * 1e6}


def tickwork_idle() -> Result:
    with ThreadScheduler(max_workers=WORKERS) as s:
        for i in range(IDLE_JOBS):
            s.schedule(3600.0 + i, noop)
        return {"idle": idle_cpu()}


def tickwork_throughput() -> Result:
    count = 0
    done = threading.Event()
    lock = threading.Lock()

    def job() -> None:
        nonlocal count
        with lock:
            count += 1
            if count == BURST:
                done.set()

    s = ThreadScheduler(max_workers=WORKERS)
    for _ in range(BURST):
        s.schedule(0, job)
    t = time.perf_counter()
    s.start()
    done.wait(600)
    elapsed = time.perf_counter() - t
    s.stop()
    return {"rate": BURST / elapsed}


# -- APScheduler 3 (BackgroundScheduler, memory job store, thread pool of 10) -----------


def aps() -> Any:
    from apscheduler.schedulers.background import BackgroundScheduler

    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    return BackgroundScheduler(
        timezone="UTC",
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        executors={"default": {"type": "threadpool", "max_workers": WORKERS}},
    )


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def aps_lateness() -> Result:
    late: list[float] = []
    done = threading.Event()
    s = aps()
    s.start()
    t0 = time.time() + 0.3
    for i in range(LATE_JOBS):
        due = t0 + LATE_SPAN * i / LATE_JOBS

        def job(due: float = due) -> None:
            late.append(time.time() - due)
            if len(late) == LATE_JOBS:
                done.set()

        s.add_job(job, "date", run_date=at(due))
    done.wait(60)
    s.shutdown()
    return lateness_summary(late)


def aps_add_remove() -> Result:
    s = aps()
    s.start()
    base = time.time() + 3600
    t = time.perf_counter()
    ids = [s.add_job(noop, "date", run_date=at(base + i * 1e-3)).id for i in range(PENDING)]
    added = time.perf_counter() - t
    t = time.perf_counter()
    for job_id in ids:
        s.remove_job(job_id)
    removed = time.perf_counter() - t
    s.shutdown()
    return {"add": added / PENDING * 1e6, "remove": removed / PENDING * 1e6}


def aps_idle() -> Result:
    s = aps()
    s.start()
    base = time.time() + 3600
    for i in range(IDLE_JOBS):
        s.add_job(noop, "date", run_date=at(base + i))
    out = {"idle": idle_cpu()}
    s.shutdown()
    return out


def aps_throughput() -> Result:
    count = 0
    done = threading.Event()
    lock = threading.Lock()

    def job() -> None:
        nonlocal count
        with lock:
            count += 1
            if count == BURST:
                done.set()

    s = aps()
    now = at(time.time())
    for _ in range(BURST):
        s.add_job(job, "date", run_date=now)
    t = time.perf_counter()
    s.start()
    done.wait(600)
    elapsed = time.perf_counter() - t
    s.shutdown()
    return {"rate": BURST / elapsed}


# -- stdlib sched, run() in one thread (jobs run in that thread) -------------------------


def run_sched(s: sched.scheduler) -> threading.Thread:
    thread = threading.Thread(target=s.run, daemon=True)
    thread.start()
    return thread


def sched_lateness() -> Result:
    late: list[float] = []
    s = sched.scheduler(time.monotonic, time.sleep)
    t0 = time.monotonic() + 0.3
    for i in range(LATE_JOBS):
        due = t0 + LATE_SPAN * i / LATE_JOBS
        s.enterabs(due, 0, lambda due=due: late.append(time.monotonic() - due))
    run_sched(s).join(60)
    return lateness_summary(late)


def sched_add_remove() -> Result:
    # sched cannot see events added while run() sleeps, so a running loop adds nothing
    # here; this measures the data structure alone (enter is O(log n), cancel O(n)).
    s = sched.scheduler(time.monotonic, time.sleep)
    base = time.monotonic() + 3600
    t = time.perf_counter()
    events = [s.enterabs(base + i * 1e-3, 0, noop) for i in range(PENDING)]
    added = time.perf_counter() - t
    t = time.perf_counter()
    for event in events:
        s.cancel(event)
    removed = time.perf_counter() - t
    return {"add": added / PENDING * 1e6, "remove": removed / PENDING * 1e6}


def sched_idle() -> Result:
    s = sched.scheduler(time.monotonic, time.sleep)
    base = time.monotonic() + 3600
    for i in range(IDLE_JOBS):
        s.enterabs(base + i, 0, noop)
    run_sched(s)  # daemon: sleeps an hour, then dies with the process
    return {"idle": idle_cpu()}


def sched_throughput() -> Result:
    s = sched.scheduler(time.monotonic, time.sleep)
    now = time.monotonic()
    for _ in range(BURST):
        s.enterabs(now, 0, noop)
    t = time.perf_counter()
    run_sched(s).join(600)
    return {"rate": BURST / (time.perf_counter() - t)}


# -- harness -------------------------------------------------------------------------


def idle_cpu() -> float:
    """Process CPU (all threads) over IDLE_SECONDS of wall time, in ms."""
    time.sleep(0.2)  # let start-up work settle
    gc.collect()
    cpu = time.process_time()
    time.sleep(IDLE_SECONDS)
    return (time.process_time() - cpu) * 1e3


def measure(runs: dict[str, Callable[[], Result]]) -> Result:
    out: Result = {}
    for name, fn in runs.items():
        print(f"  {name} ...", end="", flush=True, file=sys.stderr)
        out.update(fn())
        print(" done", file=sys.stderr)
    return out


SUITES: dict[str, dict[str, Callable[[], Result]]] = {
    "tickwork": {
        "lateness": tickwork_lateness,
        "add/remove": tickwork_add_remove,
        "idle": tickwork_idle,
        "throughput": tickwork_throughput,
    },
    "APScheduler 3": {
        "lateness": aps_lateness,
        "add/remove": aps_add_remove,
        "idle": aps_idle,
        "throughput": aps_throughput,
    },
    "sched (thread)": {
        "lateness": sched_lateness,
        "add/remove": sched_add_remove,
        "idle": sched_idle,
        "throughput": sched_throughput,
    },
}


def warm_up() -> None:
    """One short pass of every workload per scheduler (imports, pools, caches), discarded."""
    global LATE_JOBS, PENDING, IDLE_SECONDS, BURST
    saved = (LATE_JOBS, PENDING, IDLE_SECONDS, BURST)
    LATE_JOBS, PENDING, IDLE_SECONDS, BURST = 200, 2_000, 0.2, 5_000
    try:
        for name, runs in SUITES.items():
            print(f"warm-up {name}", file=sys.stderr)
            measure(runs)
    finally:
        LATE_JOBS, PENDING, IDLE_SECONDS, BURST = saved


def main() -> int:
    global LATE_JOBS, PENDING, IDLE_SECONDS, BURST
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    try:
        import apscheduler
    except ImportError:
        print("APScheduler missing: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 2
    if args.quick:
        LATE_JOBS, PENDING, IDLE_SECONDS, BURST = 500, 5_000, 1.0, 20_000
    idle_base = idle_cpu()  # the harness alone, to subtract from nothing: printed
    warm_up()
    names = list(SUITES)
    per_round: dict[str, list[Result]] = {name: [] for name in names}
    orders: list[str] = []
    for r in range(max(1, args.rounds)):
        order = names[r % len(names) :] + names[: r % len(names)]
        orders.append(" -> ".join(order))
        print(f"round {r + 1}: {orders[-1]}", file=sys.stderr)
        for name in order:
            print(
                name if name != "APScheduler 3" else f"APScheduler {apscheduler.__version__}",
                file=sys.stderr,
            )
            per_round[name].append(measure(SUITES[name]))
    # Each figure: the median over the rounds (each scheduler ran first in one of them).
    results: dict[str, Result] = {
        name: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        for name, rounds in per_round.items()
    }
    print(
        f"medians of {max(1, args.rounds)} rounds; the order rotates each round and every"
        " scheduler was warmed up first"
    )
    for r, order in enumerate(orders):
        print(f"round {r + 1}: {order}")

    columns = [
        ("p50 late ms", "p50", "{:.3f}"),
        ("p99 late ms", "p99", "{:.3f}"),
        ("max late ms", "max", "{:.3f}"),
        ("add us/job", "add", "{:.2f}"),
        ("remove us/job", "remove", "{:.2f}"),
        (f"idle CPU ms/{IDLE_SECONDS:g}s", "idle", "{:.2f}"),
        ("jobs/s (burst)", "rate", "{:,.0f}"),
    ]
    print(
        f"Python {sys.version.split()[0]}; harness idle CPU {idle_base:.2f} ms/{IDLE_SECONDS:g}s\n"
    )
    print("| scheduler | " + " | ".join(c[0] for c in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, r in results.items():
        print(f"| {name} | " + " | ".join(fmt.format(r[key]) for _, key, fmt in columns) + " |")
    tw, ap = results["tickwork"], results["APScheduler 3"]
    print()
    print(f"throughput: tickwork / APScheduler = {tw['rate'] / ap['rate']:.1f}x (target >= 10x)")
    print(f"add: APScheduler / tickwork = {ap['add'] / tw['add']:.1f}x")
    print(f"remove: APScheduler / tickwork = {ap['remove'] / tw['remove']:.1f}x")
    print(f"p99 lateness: APScheduler / tickwork = {ap['p99'] / tw['p99']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
