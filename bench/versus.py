"""Benchmark: this tree against an older tickwork, measured in the same run.

Usage::

    .venv/bin/python bench/versus.py 4dc0735              # every workload, 5 rounds
    .venv/bin/python bench/versus.py f8385e4 --rounds 3 --workloads core-timers durable-sqlite
    .venv/bin/python bench/versus.py f8385e4 --new 91c46cb    # two commits, neither checked out

A change that should not cost anything (a refactor, a new option that is off by
default) is proven so here: the old tree is checked out in a temporary ``git worktree``
and every workload runs in a fresh child process per tree and per round, the two trees
alternating which goes first. Each child imports ``tickwork`` from its tree's ``src`` and
times the same workload code (the functions of ``bench/core.py``, ``bench/driver.py``
and ``bench/store.py``, which use only public names both trees have). The table gives
each tree's median over the rounds and the median of the per-round ratios, so a drift of
the machine's load during the run moves both sides together.

Workloads:

core-timers      ``Scheduler``: 20,000 one-shots scheduled and run on a fake clock, as a
                 ratio to the floor of ``bench/core.py`` timed in the same child (best of
                 7 each, interleaved; lower is better)
core-recurring   ``Scheduler``: 2,000 recurring tasks over 1,000 ticks (x floor)
core-timeouts    ``Scheduler``: 20,000 one-shots, 90% cancelled before they run (x floor)
thread-burst     ``ThreadScheduler``: 20,000 no-op one-shots due at once (jobs/s, higher is better)
thread-late      ``ThreadScheduler``: p99 lateness of 2,000 one-shots due over 2 s (ms)
durable-sqlite   ``DurableScheduler`` on a SQLite file: 5,000 no-op one-shots due at once
                 (durable jobs/s; ``synchronous=FULL``, every run recorded)

It never fails on a figure: it prints them. Exit status 2 means a child failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (unit, higher is better)
WORKLOADS: dict[str, tuple[str, bool]] = {
    "core-timers": ("x floor", False),
    "core-recurring": ("x floor", False),
    "core-timeouts": ("x floor", False),
    "thread-burst": ("jobs/s", True),
    "thread-late": ("ms p99", False),
    "durable-sqlite": ("jobs/s", True),
    "core-cron": ("runs/s", True),
}


# -- the child: one workload, one tree ------------------------------------------------


def _core(kind: str) -> float:
    """tickwork's best ns per unit over the floor's (`bench/core.py`), in this process.

    The floor (a bare heapq + dict doing the same work) is timed in the same child,
    interleaved, so a slow process or a busy moment moves both: the ratio is what
    compares across trees.
    """
    from bench import core

    factory, _, _ = core.load_tickwork()
    assert factory is not None
    data = core.make_data(20_000)
    fn: Callable[..., tuple[int, int, int]] = {
        "core-timers": core.api_timers,
        "core-recurring": core.api_recurring,
        "core-timeouts": core.api_timeouts,
    }[kind]
    best = {"tickwork": float("inf"), "floor": float("inf")}
    impls = {"tickwork": factory, "floor": core.Floor}
    for r in range(7):
        for name in ["tickwork", "floor"] if r % 2 == 0 else ["floor", "tickwork"]:
            ns, _jobs, units = core.call_quietly(partial(fn, impls[name], data), keep_gc=False)
            best[name] = min(best[name], ns / units)
    return best["tickwork"] / best["floor"]


def _thread_burst() -> float:
    from bench import store

    store.burst_thread(2_000)  # warm-up
    return store.burst_thread(20_000)


def _thread_late() -> float:
    from bench import driver

    driver.tickwork_lateness()  # warm-up
    return driver.tickwork_lateness()["p99"]


def _durable_sqlite() -> float:
    from bench import store

    with tempfile.TemporaryDirectory(prefix="tw-versus-") as tmp:
        store.burst_durable(500, Path(tmp) / "warm")
        return store.burst_durable(5_000, Path(tmp) / "run")


def _core_cron() -> float:
    """Runs/s of 2,000 `Cron` tasks (two zones) over 1,000 one-minute ticks of a fake clock.

    The calendar schedules' own path (next times, zones) on the in-memory core: what a
    state pays for cron when it configures no calendar and no ``H``.
    """
    from tickwork import Cron, Scheduler
    from tickwork.testing import FakeClock

    best = 0.0
    for _ in range(3):
        clock = FakeClock(wall_start=1_767_225_600.0)  # 2026-01-01T00:00Z
        s = Scheduler(clock, wall_clock=clock.wall)
        for i in range(500):
            s.add(Cron("*/5 * * * *"), _noop, name=f"a{i}")
            s.add(Cron("0 * * * *"), _noop, name=f"b{i}")
            s.add(Cron("*/5 * * * *", tz="Europe/Berlin"), _noop, name=f"c{i}")
            s.add(Cron("30 * * * *", tz="America/New_York"), _noop, name=f"d{i}")
        runs, t = 0, time.perf_counter()
        for _ in range(1_000):
            clock.advance(60.0)
            runs += s.run_pending()
        best = max(best, runs / (time.perf_counter() - t))
    return best


def _noop() -> None:
    """The cron workload's job."""


def child(workload: str, src: str) -> None:
    """Import ``tickwork`` from ``src`` before any bench module can put another first."""
    sys.path.insert(0, src)
    sys.path.insert(1, str(ROOT))
    import tickwork
    import tickwork.stores
    import tickwork.stores.sqlite  # cached: bench/store.py gets this one

    assert Path(tickwork.__file__).resolve().is_relative_to(Path(src).resolve()), tickwork.__file__
    import logging

    logging.disable(logging.WARNING)
    value = {
        "thread-burst": _thread_burst,
        "thread-late": _thread_late,
        "durable-sqlite": _durable_sqlite,
        "core-cron": _core_cron,
    }.get(workload, lambda: _core(workload))()
    print(json.dumps({"value": value, "tickwork": tickwork.__file__}))


# -- the parent ------------------------------------------------------------------------


def _run_child(workload: str, src: Path) -> float:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", workload, "--src", str(src)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{workload} failed on {src} (exit status {proc.returncode})")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["value"])


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3f}"


def _worktree(ref: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
        check=True,
        capture_output=True,
    )
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", nargs="?", help="git ref of the old tree")
    parser.add_argument(
        "--new", metavar="REF", help="git ref of the new tree (default: this tree's src/)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per workload (default 5)")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--child", choices=list(WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.src)
        return 0
    if not args.baseline:
        parser.error("baseline: give the git ref of the old tree, e.g. 4dc0735")
    if args.rounds < 1:
        parser.error(f"--rounds: must be at least 1, got {args.rounds}")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    state = ", modified" if dirty else ""
    if args.new:
        print(f"old: {args.baseline}; new: {args.new}")
    else:
        print(f"old: {args.baseline}; new: this tree's src/ (HEAD {head}{state})")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, {sys.executable}")
    with tempfile.TemporaryDirectory(prefix="tw-versus-old-") as tmp:
        old_src = _worktree(args.baseline, Path(tmp) / "tree") / "src"
        new_src = _worktree(args.new, Path(tmp) / "new") / "src" if args.new else ROOT / "src"
        trees = {"old": old_src, "new": new_src}
        try:
            print()
            print("| workload | unit | old (median) | new (median) | new vs old | per round |")
            print("| --- | --- | ---: | ---: | ---: | --- |")
            for workload in args.workloads:
                unit, higher_better = WORKLOADS[workload]
                got: dict[str, list[float]] = {"old": [], "new": []}
                ratios: list[float] = []
                for r in range(args.rounds):
                    order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                    for name in order:
                        got[name].append(_run_child(workload, trees[name]))
                    ratios.append(got["new"][-1] / got["old"][-1])
                ratio = statistics.median(ratios)
                better = ratio >= 1 if higher_better else ratio <= 1
                word = "better" if better else "worse"
                speed = ratio if higher_better else 1 / ratio
                print(
                    f"| {workload} | {unit} | {_fmt(statistics.median(got['old']))} | "
                    f"{_fmt(statistics.median(got['new']))} | {speed:.3f}x ({word}) | "
                    f"{', '.join(f'{x:.2f}' for x in ratios)} |",
                    flush=True,
                )
        finally:
            for name in ("tree", "new"):
                subprocess.run(
                    [
                        "git",
                        "-C",
                        str(ROOT),
                        "worktree",
                        "remove",
                        "--force",
                        str(Path(tmp) / name),
                    ],
                    capture_output=True,
                )
    print()
    print(
        "new vs old: the median over rounds of new/old, as a speed (above 1.000x is faster);"
        " per round: the raw new/old figure of each round."
    )
    print(f"finished {time.strftime('%Y-%m-%d %H:%M:%S')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
