"""Benchmark of the tickwork core (`tickwork.Scheduler`) against a heapq floor and `sched`.

Run ``python bench/core.py`` (``--quick`` for a short run, ``--n`` to choose N).

Workloads, each at N = 20,000 and N = 1,000,000 by default, all driven by a fake clock
(a list cell read through a C-level ``partial``, so reading it costs every
implementation the same), with jobs that are one shared C-level counter (so the figures
are the schedulers' own overhead, and the counter checks that every implementation ran
the same number of jobs):

(a) timers     N one-shot tasks with seeded random delays in [0, 1000), scheduled at t=0,
               then 1000 ticks (clock += 1, ``run_pending()``). Unit: one task
               (scheduled + run). Scheduling is inside the timed region.
(b) timeouts   the same N tasks, 90% of them cancelled before they are due, each at a
               seeded random tick between 1 and its due time (cancels happen at the start
               of the tick, before ``run_pending()``). Unit: one task (scheduled, then
               cancelled or run).
(c) recurring  N/10 recurring tasks, seeded random intervals in [5, 250), first run at a
               random point of the first interval, over 1000 ticks. Unit: one run.
(d) idle       N tasks due far in the future (never due), polled 100,000 times with
               ``next_run_in()`` + ``run_pending()`` (clock += 1 per poll). Unit: one poll.
               Building the scheduler is not timed.

Implementations, measured in the same process, round-robin within each repeat, best-of:

floor      `Floor`, below: the same contract on a bare heapq + dict, as tight as it can
           honestly be (lazy deletion with a dead counter and compaction, fixed-rate rule,
           clock read once per ``run_pending`` and kept monotonic, ties by id, a
           try/except around every job, argument checks, held tasks for jobs that schedule
           already-due work). Ratios are tickwork / floor.
tickwork   ``tickwork.Scheduler`` as found on ``sys.path`` (else ``src/`` of this repo).
sched      stdlib ``sched.scheduler(clock, delayfunc)`` driven by ``run(blocking=False)``;
           a poll is one ``run(False)`` (it returns the delay, so it is both calls).
           It catches no job exceptions. ``sched.cancel`` is O(n) (list.remove +
           heapify), so workload (b) runs for sched only up to N = 20,000.

Also: bytes per pending task at the largest N (tracemalloc; 1 M one-shots sharing one
Python no-op function, minus the empty scheduler), and, for workload (b), the largest
number of dead (cancelled, still in the heap) entries relative to live tasks, read from
the scheduler's internals (``_heap``, ``_tasks``) when it has them.

Targets are printed as PASS/MISS beside each figure; they never change the exit status.
The machine is shared and noisy: only ratios measured within one run mean anything.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import math
import operator
import platform
import random
import sched
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from heapq import heapify, heappop, heappush
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

SEED = 20240601
TICKS = 1000
POLLS = 100_000
CANCEL_FRACTION = 0.9
SCHED_CANCEL_MAX_N = 20_000  # sched.cancel is O(n): (b) at 1M would take hours
SCHED_CANCEL_N = 5_000  # ... so sched runs (b) at this N when N is larger
FAR_FUTURE = 1e9

TARGETS = {"timers": 1.15, "timeouts": 1.15, "recurring": 1.15, "idle": 1.3}
TARGET_BYTES = 200.0
DEFAULT_SLACK = 1024  # "plus a constant" when the core does not export COMPACT_SLACK

Clock = Callable[[], float]
Job = Callable[[], object]


class CoreAPI(Protocol):
    """The part of the tickwork contract the workloads use."""

    def schedule(self, delay: float, fn: Job, interval: float | None = None) -> int: ...

    def cancel(self, task_id: int) -> bool: ...

    def run_pending(self) -> int: ...

    def next_run_in(self) -> float | None: ...


Factory = Callable[[Clock], CoreAPI]


# -- the floor ---------------------------------------------------------------------------

_INF = math.inf
_SLACK = 1024
_MAX_ERRORS = 1000


class Floor:
    """The core's contract on a bare heap + dict, written as tight as honestly possible.

    Heap entries are ``[due, task_id, fn, interval]`` lists, ordered by ``(due, id)``;
    ``fn = None`` marks a cancelled (dead) entry. A fixed-rate task is re-pushed *before*
    its job runs (its next due time does not depend on when the job ends), so a job that
    cancels itself just marks an entry that is already back in the heap.
    """

    __slots__ = (
        "_clock",
        "_dead",
        "_heap",
        "_held",
        "_last",
        "_next_id",
        "_tasks",
        "_tick",
        "errors",
    )

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[list[Any]] = []
        self._tasks: dict[int, list[Any]] = {}
        self._held: list[list[Any]] = []
        self._dead = 0
        self._next_id = 1
        self._last = -_INF
        self._tick: float | None = None
        self.errors: list[str] = []

    def schedule(self, delay: float, fn: Job, interval: float | None = None) -> int:
        if not 0.0 <= delay < _INF:  # also rejects NaN; a non-number raises TypeError
            raise ValueError(f"delay must be finite and >= 0, got {delay!r}")
        if interval is not None and not 0.0 < interval < _INF:
            raise ValueError(f"interval must be finite and > 0, got {interval!r}")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        now = self._clock()
        if now >= self._last:
            self._last = now
        else:
            now = self._last
        task_id = self._next_id
        self._next_id = task_id + 1
        due = now + delay
        entry = [due, task_id, fn, interval]
        self._tasks[task_id] = entry
        tick = self._tick
        if tick is not None and due <= tick:
            self._held.append(entry)  # due already: waits for the next call
        else:
            heappush(self._heap, entry)
        return task_id

    def cancel(self, task_id: int) -> bool:
        entry = self._tasks.pop(task_id, None)
        if entry is None:
            return False
        entry[2] = None
        self._dead += 1
        if self._dead > len(self._tasks) + _SLACK:
            self._compact()
        return True

    def run_pending(self) -> int:
        if self._tick is not None:
            raise RuntimeError("run_pending() called from inside a job")
        now = self._clock()
        if now >= self._last:
            self._last = now
        else:
            now = self._last
        heap = self._heap
        if not heap or heap[0][0] > now:
            return 0
        tasks = self._tasks
        ran = 0
        self._tick = now
        try:
            while heap and heap[0][0] <= now:
                entry = heappop(heap)
                fn = entry[2]
                if fn is None:
                    self._dead -= 1
                    continue
                ran += 1
                interval = entry[3]
                if interval is None:
                    del tasks[entry[1]]
                else:
                    due = entry[0] + interval
                    entry[0] = due if due > now else now + interval
                    heappush(heap, entry)
                try:
                    fn()
                except Exception as exc:
                    self._failed(entry[1], exc)
        finally:
            self._tick = None
            if self._held:
                for entry in self._held:
                    heappush(heap, entry)  # cancelled ones go in dead, already counted
                self._held.clear()
            if self._dead > len(tasks) + _SLACK:
                self._compact()
        return ran

    def next_run_in(self) -> float | None:
        heap = self._heap
        while heap and heap[0][2] is None:
            heappop(heap)
            self._dead -= 1
        if self._held:
            return 0.0
        if not heap:
            return None
        now = self._clock()
        if now >= self._last:
            self._last = now
        else:
            now = self._last
        wait = heap[0][0] - now
        return wait + 0.0 if wait > 0.0 else 0.0

    def _failed(self, task_id: int, exc: Exception) -> None:
        errors = self.errors
        errors.append(f"task {task_id}: {exc}")
        if len(errors) > _MAX_ERRORS:
            del errors[0]

    def _compact(self) -> None:
        heap = self._heap
        heap[:] = [entry for entry in heap if entry[2] is not None]
        heapify(heap)
        self._dead = 0


# -- workload data -----------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """Seeded inputs for one N, shared by every implementation."""

    n: int
    delays: list[float]
    cancel_at: list[list[int]]  # per tick 1..TICKS: indexes of tasks cancelled then
    cancelled: int
    recurring: list[tuple[float, float]]  # (first delay, interval)
    far: list[float]


def make_data(n: int) -> Data:
    rng = random.Random(SEED + n)
    delays = [rng.random() * TICKS for _ in range(n)]
    cancel_at: list[list[int]] = [[] for _ in range(TICKS + 1)]
    doomed = rng.sample(range(n), round(n * CANCEL_FRACTION))
    for i in doomed:
        # A tick in 1..ceil(due): the cancel comes before run_pending() at that tick,
        # so the task is always cancelled before it runs.
        cancel_at[1 + int(rng.random() * math.ceil(delays[i]))].append(i)
    recurring = []
    for _ in range(max(1, n // 10)):
        interval = rng.uniform(5.0, 250.0)
        recurring.append((rng.random() * interval, interval))
    far = [FAR_FUTURE + rng.random() * FAR_FUTURE for _ in range(n)]
    return Data(n, delays, cancel_at[1:], len(doomed), recurring, far)


def fake_clock() -> tuple[list[float], Clock]:
    cell = [0.0]
    return cell, partial(operator.getitem, cell, 0)


TICK_TIMES = [float(t) for t in range(1, TICKS + 1)]


# -- workloads on the tickwork API (floor and tickwork run the same code) -----------------
# Each returns (elapsed ns, jobs run, units).


def api_timers(factory: Factory, data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = factory(clock)
    schedule = s.schedule
    run = s.run_pending
    t0 = time.perf_counter_ns()
    for d in data.delays:
        schedule(d, job)
    for t in TICK_TIMES:
        cell[0] = t
        run()
    t1 = time.perf_counter_ns()
    return t1 - t0, next(counter), data.n


def api_timeouts(factory: Factory, data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = factory(clock)
    schedule = s.schedule
    cancel = s.cancel
    run = s.run_pending
    t0 = time.perf_counter_ns()
    ids = [schedule(d, job) for d in data.delays]
    for t, doomed in zip(TICK_TIMES, data.cancel_at, strict=True):
        cell[0] = t
        for i in doomed:
            cancel(ids[i])
        run()
    t1 = time.perf_counter_ns()
    return t1 - t0, next(counter), data.n


def api_recurring(factory: Factory, data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = factory(clock)
    schedule = s.schedule
    run = s.run_pending
    t0 = time.perf_counter_ns()
    for d, interval in data.recurring:
        schedule(d, job, interval)
    for t in TICK_TIMES:
        cell[0] = t
        run()
    t1 = time.perf_counter_ns()
    runs = next(counter)
    return t1 - t0, runs, runs


def api_idle_build(factory: Factory, data: Data) -> Callable[[list[float]], tuple[int, int, int]]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = factory(clock)
    for d in data.far:
        s.schedule(d, job)

    def poll(times: list[float]) -> tuple[int, int, int]:
        next_run_in = s.next_run_in
        run = s.run_pending
        t0 = time.perf_counter_ns()
        for t in times:
            cell[0] = t
            next_run_in()
            run()
        t1 = time.perf_counter_ns()
        return t1 - t0, next(counter), len(times)

    return poll


# -- the same workloads on stdlib sched ---------------------------------------------------

_no_delay = bool  # delayfunc: run(blocking=False) calls it with 0 after each event


def sched_timers(data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = sched.scheduler(clock, _no_delay)
    enter = s.enter
    run = s.run
    t0 = time.perf_counter_ns()
    for d in data.delays:
        enter(d, 0, job)
    for t in TICK_TIMES:
        cell[0] = t
        run(False)
    t1 = time.perf_counter_ns()
    return t1 - t0, next(counter), data.n


def sched_timeouts(data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = sched.scheduler(clock, _no_delay)
    enter = s.enter
    cancel = s.cancel
    run = s.run
    t0 = time.perf_counter_ns()
    events = [enter(d, 0, job) for d in data.delays]
    for t, doomed in zip(TICK_TIMES, data.cancel_at, strict=True):
        cell[0] = t
        for i in doomed:
            cancel(events[i])
        run(False)
    t1 = time.perf_counter_ns()
    return t1 - t0, next(counter), data.n


def sched_timeouts_on(small: Data, _data: Data) -> tuple[int, int, int]:
    return sched_timeouts(small)


def _sched_recurring(
    s: sched.scheduler, clock: Clock, job: Job, delay: float, interval: float
) -> None:
    """Schedule a fixed-rate task on ``sched`` the way a user would: a re-entering job."""
    enterabs = s.enterabs
    due = clock() + delay

    def fire() -> None:
        nonlocal due
        job()
        now = clock()
        due += interval
        if due <= now:
            due = now + interval
        enterabs(due, 0, fire)

    enterabs(due, 0, fire)


def sched_recurring(data: Data) -> tuple[int, int, int]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = sched.scheduler(clock, _no_delay)
    run = s.run
    t0 = time.perf_counter_ns()
    for d, interval in data.recurring:
        _sched_recurring(s, clock, job, d, interval)
    for t in TICK_TIMES:
        cell[0] = t
        run(False)
    t1 = time.perf_counter_ns()
    runs = next(counter)
    return t1 - t0, runs, runs


def sched_idle_build(data: Data) -> Callable[[list[float]], tuple[int, int, int]]:
    cell, clock = fake_clock()
    counter = itertools.count()
    job = counter.__next__
    s = sched.scheduler(clock, _no_delay)
    for d in data.far:
        s.enter(d, 0, job)

    def poll(times: list[float]) -> tuple[int, int, int]:
        run = s.run
        t0 = time.perf_counter_ns()
        for t in times:
            cell[0] = t
            run(False)
        t1 = time.perf_counter_ns()
        return t1 - t0, next(counter), len(times)

    return poll


# -- loading tickwork --------------------------------------------------------------------


def load_tickwork() -> tuple[Factory | None, ModuleType | None, str]:
    """Find ``tickwork.Scheduler``: on sys.path first, else in this repository's src/."""
    try:
        pkg = importlib.import_module("tickwork")
    except ModuleNotFoundError:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
        try:
            pkg = importlib.import_module("tickwork")
        except ModuleNotFoundError:
            return None, None, "tickwork not importable"
    cls = getattr(pkg, "Scheduler", None)
    mod: ModuleType | None = None
    try:
        mod = importlib.import_module("tickwork._core.scheduler")
    except ImportError:
        mod = None
    if cls is None and mod is not None:
        cls = getattr(mod, "Scheduler", None)
    if cls is None:
        return None, mod, f"no tickwork.Scheduler in {pkg.__file__}"
    where = getattr(sys.modules.get(cls.__module__), "__file__", None) or pkg.__file__
    return cls, mod, str(where)


# -- measuring ---------------------------------------------------------------------------


Result = tuple[int, int, int]  # elapsed ns, jobs run, units


@dataclass
class Row:
    workload: str
    n: int
    impl: str
    unit: str
    best: float  # ns per unit
    median: float
    jobs: int
    note: str = ""


def call_quietly(fn: Callable[[], Result], keep_gc: bool) -> Result:
    gc.collect()
    if not keep_gc:
        gc.disable()
    try:
        return fn()
    finally:
        gc.enable()


def measure(
    cases: dict[str, Callable[[int], Result]], repeats: int, keep_gc: bool
) -> dict[str, list[Result]]:
    """Run every case ``repeats`` times, round-robin, rotating who goes first."""
    names = list(cases)
    out: dict[str, list[Result]] = {name: [] for name in names}
    for r in range(repeats):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            out[name].append(call_quietly(partial(cases[name], r), keep_gc))
    return out


def rows_for(
    workload: str, n: int, unit: str, results: dict[str, list[Result]], notes: dict[str, str]
) -> list[Row]:
    rows = []
    for name, runs in results.items():
        per_unit = [ns / units for ns, _, units in runs]
        rows.append(
            Row(
                workload,
                n,
                name,
                unit,
                min(per_unit),
                statistics.median(per_unit),
                runs[0][1],
                notes.get(name, ""),
            )
        )
    return rows


def bench_n(
    data: Data,
    tickwork: Factory | None,
    repeats: int,
    keep_gc: bool,
    workloads: list[str],
    log: Callable[[str], None],
) -> list[Row]:
    api: dict[str, Factory] = {"floor": Floor}
    if tickwork is not None:
        api["tickwork"] = tickwork
    n = data.n
    rows: list[Row] = []

    def one(
        workload: str,
        unit: str,
        api_fn: Callable[[Factory, Data], Result],
        sched_fn: Callable[[Data], Result] | None,
        note: str = "",
    ) -> None:
        cases: dict[str, Callable[[int], Result]] = {
            name: (lambda _r, f=factory: api_fn(f, data)) for name, factory in api.items()
        }
        if sched_fn is not None:
            cases["sched"] = lambda _r: sched_fn(data)
        t = time.perf_counter()
        results = measure(cases, repeats, keep_gc)
        log(f"  {workload:<9} N={n:>9,}  {time.perf_counter() - t:6.1f} s")
        rows.extend(rows_for(workload, n, unit, results, {}))
        if note:
            rows.append(Row(workload, n, "sched", unit, math.nan, math.nan, 0, note))

    if "timers" in workloads:
        one("timers", "task", api_timers, sched_timers)
    if "timeouts" in workloads:
        # sched.cancel is O(n) (list.remove + heapify): 20,000 tasks already take ~13 s
        # a run. So sched runs (b) on the first SCHED_CANCEL_N-sized workload only (a
        # lower bound of its cost at N), and not at all past SCHED_CANCEL_MAX_N.
        if n > SCHED_CANCEL_MAX_N:
            skip = f"skipped: sched.cancel is O(n); measured only for N <= {SCHED_CANCEL_MAX_N:,}"
            one("timeouts", "task", api_timeouts, None, skip)
        else:
            small = data if n <= SCHED_CANCEL_N else make_data(SCHED_CANCEL_N)
            one("timeouts", "task", api_timeouts, partial(sched_timeouts_on, small))
            if small is not data:
                rows[-1].note = f"at N={SCHED_CANCEL_N:,} (O(n) cancel): a lower bound at N"
    if "recurring" in workloads:
        one("recurring", "run", api_recurring, sched_recurring)
    if "idle" in workloads:
        t = time.perf_counter()
        polls: dict[str, Callable[[list[float]], Result]] = {}
        for name, factory in api.items():
            polls[name] = call_quietly_build(lambda f=factory: api_idle_build(f, data), keep_gc)
        polls["sched"] = call_quietly_build(lambda: sched_idle_build(data), keep_gc)

        def times_for(r: int) -> list[float]:
            # The clock keeps going forward across repeats (a real clock never goes back).
            return [float(r * POLLS + i + 1) for i in range(POLLS)]

        cases = {name: (lambda r, p=p: p(times_for(r))) for name, p in polls.items()}
        results = measure(cases, repeats, keep_gc)
        log(f"  {'idle':<9} N={n:>9,}  {time.perf_counter() - t:6.1f} s (incl. building)")
        rows.extend(rows_for("idle", n, "poll", results, {}))
        del polls, cases
        gc.collect()
    return rows


def call_quietly_build(
    build: Callable[[], Callable[[list[float]], Result]], keep_gc: bool
) -> Callable[[list[float]], Result]:
    gc.collect()
    if not keep_gc:
        gc.disable()
    try:
        return build()
    finally:
        gc.enable()


def bytes_per_task(factory: Callable[[Clock], Any], delays: list[float], use_sched: bool) -> float:
    """Traced bytes per pending one-shot task, all sharing one Python no-op function."""

    def noop() -> None:
        pass

    _, clock = fake_clock()
    gc.collect()
    tracemalloc.start()
    try:
        s = factory(clock)
        base = tracemalloc.get_traced_memory()[0]
        if use_sched:
            enter = s.enter
            for d in delays:
                enter(d, 0, noop)
        else:
            schedule = s.schedule
            for d in delays:
                schedule(d, noop)
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del s
    gc.collect()
    return used / len(delays)


@dataclass
class DeadStats:
    impl: str
    n: int
    max_ratio: float  # max dead/live over samples with live >= floor_live
    floor_live: int
    max_excess: int  # max(dead - 2 * live)
    max_dead: int
    counter_ok: bool  # the scheduler's own dead counter (if any) matched every sample


def dead_stats(name: str, factory: Factory, data: Data) -> DeadStats | None:
    """Workload (b) again, untimed, sampling dead = len(_heap) - len(_tasks) throughout."""
    cell, clock = fake_clock()
    s = factory(clock)
    if not isinstance(getattr(s, "_heap", None), list) or not isinstance(
        getattr(s, "_tasks", None), dict
    ):
        return None
    floor_live = max(1, data.n // 100)
    worst = 0.0
    excess = -(10**18)
    max_dead = 0
    counter_ok = True

    def sample() -> None:
        nonlocal worst, excess, max_dead, counter_ok
        live = len(s._tasks)  # type: ignore[attr-defined]
        dead = len(s._heap) - live  # type: ignore[attr-defined]
        own = getattr(s, "_dead", None)
        if isinstance(own, int) and own != dead:
            counter_ok = False
        max_dead = max(max_dead, dead)
        excess = max(excess, dead - 2 * live)
        if live >= floor_live:
            worst = max(worst, dead / live)

    job = itertools.count().__next__
    ids = [s.schedule(d, job) for d in data.delays]
    sample()
    for t, doomed in zip(TICK_TIMES, data.cancel_at, strict=True):
        cell[0] = t
        for i in doomed:
            s.cancel(ids[i])
            sample()
        s.run_pending()
        sample()
    return DeadStats(name, data.n, worst, floor_live, excess, max_dead, counter_ok)


# -- report ------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def format_table(rows: list[Row]) -> Iterator[str]:
    floor = {(r.workload, r.n): r.best for r in rows if r.impl == "floor"}
    jobs = {(r.workload, r.n): r.jobs for r in rows if r.impl == "floor"}
    head = (
        f"{'workload':<10} {'N':>9} {'impl':<9} {'unit':<5} {'ns/unit':>9} {'median':>9} "
        f"{'x floor':>8}  target"
    )
    yield head
    yield "-" * (len(head) + 14)
    last = None
    for r in rows:
        key = (r.workload, r.n)
        if last is not None and key != last:
            yield ""
        last = key
        if math.isnan(r.best):
            yield (
                f"{r.workload:<10} {r.n:>9,} {r.impl:<9} {r.unit:<5} {'-':>9} {'':>9} {'':>8}  "
                f"{r.note}"
            )
            continue
        ratio = r.best / floor[key] if key in floor else math.nan
        target = TARGETS[r.workload]
        if r.impl == "tickwork":
            mark = f"{verdict(ratio <= target)} (<= {target:.2f}x)"
        elif r.impl == "floor":
            mark = "(reference)"
        else:
            mark = ""
        if r.note:
            mark += r.note
        elif key in jobs and r.jobs != jobs[key] and r.workload != "idle":
            mark += f"  WARNING: ran {r.jobs:,} jobs, floor ran {jobs[key]:,}"
        yield (
            f"{r.workload:<10} {r.n:>9,} {r.impl:<9} {r.unit:<5} {r.best:>9,.0f} "
            f"{r.median:>9,.0f} {ratio:>7.2f}x  {mark}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=20,000 and 100,000, 2 repeats")
    parser.add_argument("--n", type=int, nargs="+", help="problem sizes (default 20000 1000000)")
    parser.add_argument("--repeats", type=int, help="best-of this many (default 5 / 3 at 1M)")
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=["timers", "timeouts", "recurring", "idle"],
        default=["timers", "timeouts", "recurring", "idle"],
    )
    parser.add_argument("--gc", action="store_true", help="keep the cyclic GC on while timing")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    args = parser.parse_args(argv)

    sizes = args.n or ([20_000, 100_000] if args.quick else [20_000, 1_000_000])
    sizes = sorted(set(sizes))

    def repeats_for(n: int) -> int:
        if args.repeats:
            return int(args.repeats)
        if args.quick:
            return 2
        return 5 if n <= 100_000 else 3

    factory, module, where = load_tickwork()
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    print(f"tickwork core benchmark  (python {platform.python_version()}, {platform.machine()})")
    print(f"tickwork.Scheduler: {where}")
    print(
        f"seed {SEED}; {TICKS} ticks; {POLLS:,} polls; cyclic GC "
        f"{'on' if args.gc else 'off'} while timing; best-of per row "
        + ", ".join(f"N={n:,}: {repeats_for(n)}" for n in sizes)
    )

    rows: list[Row] = []
    dead: list[DeadStats] = []
    for n in sizes:
        log(f"N = {n:,}: preparing data")
        data = make_data(n)
        rows.extend(bench_n(data, factory, repeats_for(n), args.gc, args.workloads, log))
        if "timeouts" in args.workloads:
            impls: dict[str, Factory] = {"floor": Floor}
            if factory is not None:
                impls["tickwork"] = factory
            for name, f in impls.items():
                stats = dead_stats(name, f, data)
                if stats is not None:
                    dead.append(stats)
        del data
        gc.collect()

    print()
    print("Time per unit (best; median of the repeats beside it). task = one task scheduled")
    print("and then run or cancelled; run = one run of a recurring task; poll = one")
    print("next_run_in() + run_pending() (one run(False) for sched). x floor = best / floor best.")
    print()
    for line in format_table(rows):
        print(line)

    if not args.no_memory:
        n_mem = max(sizes)
        log(f"memory pass, N = {n_mem:,}")
        delays = make_data(n_mem).delays
        print()
        print(f"Bytes per pending task (tracemalloc, {n_mem:,} one-shots, one shared no-op fn,")
        print("minus the empty scheduler):")
        mem_impls: list[tuple[str, Callable[[Clock], Any], bool]] = [("floor", Floor, False)]
        if factory is not None:
            mem_impls.append(("tickwork", factory, False))
        mem_impls.append(("sched", lambda c: sched.scheduler(c, _no_delay), True))
        for name, f, is_sched in mem_impls:
            per = bytes_per_task(f, delays, is_sched)
            mark = f"{verdict(per <= TARGET_BYTES)} (<= {TARGET_BYTES:.0f})"
            if name != "tickwork":
                mark = "(reference)"
            print(f"  {name:<9} {per:7.1f} B/task  {mark}")
        del delays

    if dead:
        slack = getattr(module, "COMPACT_SLACK", None) if module is not None else None
        const = slack if isinstance(slack, int) else DEFAULT_SLACK
        print()
        print("Dead (cancelled, still in the heap) entries in workload (b), sampled after every")
        print("cancel and run_pending; dead = len(_heap) - len(_tasks). Target: dead <= 2*live +")
        src = "COMPACT_SLACK" if isinstance(slack, int) else "assumed"
        print(f"{const} ({src}), i.e. max(dead - 2*live) <= {const}.")
        for st in dead:
            mark = verdict(st.max_excess <= const) if st.impl == "tickwork" else "(reference)"
            check = "" if st.counter_ok else "  (its _dead counter disagreed)"
            print(
                f"  {st.impl:<9} N={st.n:>9,}  max dead/live {st.max_ratio:5.2f} "
                f"(while live >= {st.floor_live:,})  max dead {st.max_dead:,}  "
                f"max(dead - 2*live) {st.max_excess:,}  {mark}{check}"
            )
    elif factory is not None:
        print("\n(dead/live ratio: the scheduler exposes no _heap/_tasks; not measured)")

    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
