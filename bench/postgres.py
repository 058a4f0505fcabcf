"""Benchmark: real `DurableScheduler` node processes on one PostgreSQL database, old vs new.

    .venv/bin/python bench/postgres.py                 # about 5 min on 2 cores
    .venv/bin/python bench/postgres.py --quick         # small sizes, about 2 min

Every figure comes from node processes (bench/pg_node.py) that each run the shipped
`tickwork.DurableScheduler` on a `PostgresStore`, with the library's defaults (lease,
poll, pool), as a user's process would. The harness declares the jobs (``store.upsert``
in a loader process), starts the nodes, and reads what the job function recorded:
(job id, scheduled, start time, owner, claim token), one row per run, written into
another database than the jobs' one (see the commits workload). Every commit of the
nodes is durable (the server's ``synchronous_commit`` and ``fsync``, both on); only the
loader runs with ``synchronous_commit=off``.

Two trees are measured in the same run with the same harness: "new" is this checkout's
``src`` (or ``--new REF``), "old" is ``--baseline REF`` (default 4dc0735, the commit before
issue 15's fix of sleeping nodes), checked out with ``git worktree`` into a temporary
folder; the node and loader processes import ``tickwork`` from the tree's ``src``
(``PYTHONPATH``) and the harness checks which file they imported. One small warm-up run
of each tree comes first; within each workload, which tree goes first alternates.

Workloads, each in a fresh schema of a database created for the run:

- burst: ``--burst`` one-shots all due at one instant, on each of ``--nodes`` node
  counts: runs per second from the due time to the last start, and the ratio to one node.
- steady: ``--steady`` one-shots due evenly over ``--seconds`` plus ``--every`` jobs
  ``EverySchedule(1.0)``, on 3 nodes: start delay (start minus scheduled) p50/p99/max of
  the runs scheduled in the window; the longest stretch any node went without starting a
  run while a run was waiting (due, not started); the longest stretch any node started
  nothing at all.
- commits: for each burst, the jobs database's ``xact_commit`` (pg_stat_database) from
  just before the due time to after the last finish, divided by the runs. Only the nodes
  use that database (the results and the harness's reads go to the DSN's database), so
  nothing is subtracted: it includes the nodes' idle look-ups in the few seconds around
  the burst. Then 3 idle nodes (jobs due in an hour) for ``--idle`` seconds: commits/s.

Duplicate runs (a slot recorded twice) are counted everywhere; they must be 0. This is
not a test: nothing asserts on time, and the figures are only comparable within a run.

PostgreSQL: ``TICKWORK_PG_DSN`` if set (its database holds the results; the run creates
and drops one more database for the jobs, or, without the right to, puts the jobs there
too and prints no commit figures). Otherwise a throwaway server is started as the test
suite does (tests/pg_server.py), with ``fsync``, ``synchronous_commit`` and
``full_page_writes`` turned back on (the test server turns them off).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
SETTLE = 0.5  # seconds from all nodes ready to the earliest due time, at least
STALL = 120.0  # no new run for this long: the workload is reported as stuck

Row = tuple[str, float, float, str, str]  # job id, scheduled, started, owner, token


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@dataclass
class Tree:
    """A tickwork source tree the nodes import: its ``src`` folder and a label."""

    name: str
    label: str
    src: Path
    worktree: Path | None = None

    @classmethod
    def checkout(cls, name: str, ref: str | None) -> Tree:
        """This checkout's ``src`` (``ref`` None), or a ``git worktree`` of ``ref``."""
        if ref is None:
            dirty = git("status", "--porcelain", "--", "src")
            head = git("rev-parse", "--short", "HEAD")
            label = f"this checkout (HEAD {head}{', src/ modified' if dirty else ''})"
            return cls(name, label, ROOT / "src")
        short = git("rev-parse", "--short", f"{ref}^{{commit}}")
        where = Path(tempfile.mkdtemp(prefix=f"tw-bench-{name}-"))
        git("worktree", "add", "--detach", str(where / "tree"), short)
        return cls(name, f"{short} (git worktree)", where / "tree" / "src", where / "tree")

    def remove(self) -> None:
        if self.worktree is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.worktree)],
                capture_output=True,
            )
            shutil.rmtree(self.worktree.parent, ignore_errors=True)

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.src)}


@dataclass
class Result:
    """What one workload run measured."""

    runs: int = 0
    dups: int = 0
    per_s: float = math.nan
    p50: float = math.nan
    p99: float = math.nan
    max: float = math.nan
    waiting_gap: float = math.nan  # longest a node started nothing while a run waited
    gap: float = math.nan  # longest a node started nothing at all
    commits: int | None = None  # the jobs database's commits over the nodes' lives
    late: bool = False  # the nodes were ready after the first due time
    recurring: tuple[int, int] = (0, 0)  # recurring slots run, slots due in the window
    per_node: dict[str, int] = field(default_factory=dict)


class Lab:
    """The server, the jobs database, and the processes of one workload run."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        self.tmp = tmp
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.jobs_db: str | None = f"tw_bench_{secrets.token_hex(4)}"
        try:
            self.conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.jobs_db)))
        except psycopg.Error as exc:
            log(f"cannot create a database for the jobs ({exc}); no commit figures")
            self.jobs_db = None
        self.jobs_dsn = dsn if self.jobs_db is None else make_conninfo(dsn, dbname=self.jobs_db)
        self.per_job = 0.003  # seconds to declare one job (learned from each load)
        self.start = 3.0  # seconds from launching the nodes to all ready (learned)

    def close(self) -> None:
        if self.jobs_db is not None:
            self.conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.jobs_db)
                )
            )
        self.conn.close()

    def setting(self, name: str) -> str:
        row = self.conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
        return "?" if row is None else str(row[0])

    def commits(self) -> int | None:
        if self.jobs_db is None:
            return None
        row = self.conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (self.jobs_db,)
        ).fetchone()
        return None if row is None else int(row[0])

    def settled_commits(self) -> int | None:
        """The commit counter once it stopped moving for 0.3 s (sessions that just ended)."""
        last = self.commits()
        give_up = time.monotonic() + 5.0
        while last is not None and time.monotonic() < give_up:
            time.sleep(0.3)
            now = self.commits()
            if now == last:
                break
            last = now
        return last

    def run(
        self,
        tree: Tree,
        nodes: int,
        *,
        first: float,
        oneshots: tuple[float, int] = (0.0, 0),
        every: int = 0,
        done: Callable[[int], bool] | None = None,
        hold: float = 0.0,
    ) -> tuple[list[Row], dict[str, Any]]:
        """Load the jobs, run ``nodes`` nodes until ``done(one-shots run)``; the rows.

        ``oneshots`` is (span, count) from ``first``; ``every`` jobs run each second from
        ``first``. Without ``done`` the nodes stop ``hold`` seconds after they settled.
        ``info["commits"]`` is the jobs database's commits from just before the nodes
        started to after they all exited (their sessions' statistics are flushed then;
        a busy backend reports them up to 10 s late, so no earlier reading is exact).
        """
        schema = f"b{secrets.token_hex(4)}"
        results = f"{schema}_runs"
        stop = self.tmp / f"{schema}.stop"
        info: dict[str, Any] = {"schema": schema}
        procs: list[subprocess.Popen[str]] = []
        logs: list[Path] = []
        rows: list[Row] = []
        self.conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(results)))
        self.conn.execute(
            sql.SQL(
                "CREATE TABLE {}.runs (job_id text, scheduled float8, started float8,"
                " owner text, token text)"
            ).format(sql.Identifier(results))
        )
        try:
            config = {
                "dsn": self.jobs_dsn,
                "schema": schema,
                "oneshots": [first, oneshots[0], oneshots[1]],
                "every": [every, 1.0, first],
            }
            out = subprocess.run(
                [sys.executable, "-m", "bench.pg_node", "load", json.dumps(config)],
                cwd=ROOT,
                env=tree.env(),
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                raise SystemExit(f"[{tree.name}] loading the jobs failed:\n{out.stderr}")
            loaded = json.loads(out.stdout.strip().splitlines()[-1])
            self._check_import(tree, loaded["tickwork"])
            if oneshots[1] + every:
                self.per_job = 1.3 * loaded["seconds"] / (oneshots[1] + every)
            before = self.settled_commits()
            launched = time.monotonic()
            for n in range(nodes):
                node = {
                    **config,
                    "owner": f"n{n}",
                    "stop": str(stop),
                    "results_dsn": self.dsn,
                    "results_schema": results,
                }
                logs.append(self.tmp / f"{schema}.n{n}.log")
                with logs[-1].open("w") as err:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "bench.pg_node", "node", json.dumps(node)],
                            cwd=ROOT,
                            env=tree.env(),
                            stdout=subprocess.PIPE,
                            stderr=err,
                            text=True,
                        )
                    )
            while not all(Path(f"{stop}.n{n}.ready").exists() for n in range(nodes)):
                if any(p.poll() is not None for p in procs):
                    raise SystemExit(f"[{tree.name}] a node died while starting:\n{_tail(logs)}")
                time.sleep(0.01)
            self.start = max(self.start * 0.8, 1.3 * (time.monotonic() - launched))
            time.sleep(SETTLE)  # let the nodes finish their first look at the store
            info["late"] = time.time() > first - 0.05
            if done is None:
                time.sleep(hold)
            else:
                self._wait(tree, results, done)
            rows = self._rows(results)
        finally:
            stop.touch()
            for p in procs:
                try:
                    out_text, _ = p.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out_text, _ = p.communicate()
                lines = out_text.strip().splitlines()
                if p.returncode == 0 and lines:
                    self._check_import(tree, json.loads(lines[-1])["tickwork"])
            warnings = [line for line in _tail(logs, 10**6).splitlines() if line.strip()]
            if warnings:
                info["warnings"] = warnings
            for path in [*logs, stop, *(Path(f"{stop}.n{n}.ready") for n in range(nodes))]:
                path.unlink(missing_ok=True)
        after = self.settled_commits()
        if before is not None and after is not None:
            info["commits"] = after - before
        self.conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(results))
        )
        with psycopg.connect(self.jobs_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        return rows, info

    def lead(self, jobs: int) -> float:
        """When the first job may be due: after loading, starting and settling."""
        return time.time() + self.per_job * jobs + self.start + SETTLE + 1.0

    def _check_import(self, tree: Tree, path: str) -> None:
        if not Path(path).resolve().is_relative_to(tree.src.resolve()):
            raise SystemExit(f"[{tree.name}] a process imported {path}, not {tree.src}")

    def _wait(self, tree: Tree, results: str, done: Any) -> None:
        last, last_change = -1, time.monotonic()
        while True:
            count = self._count(results)
            if done(count):
                return
            if count != last:
                last, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > STALL:
                raise SystemExit(f"[{tree.name}] no run for {STALL:.0f} s ({count} recorded)")
            time.sleep(0.1)

    def _count(self, results: str) -> int:
        row = self.conn.execute(
            sql.SQL("SELECT count(DISTINCT job_id) FROM {}.runs WHERE job_id LIKE 'once%'").format(
                sql.Identifier(results)
            )
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _rows(self, results: str) -> list[Row]:
        return [
            (str(r[0]), float(r[1]), float(r[2]), str(r[3]), str(r[4]))
            for r in self.conn.execute(
                sql.SQL("SELECT job_id, scheduled, started, owner, token FROM {}.runs").format(
                    sql.Identifier(results)
                )
            ).fetchall()
        ]


def _tail(logs: list[Path], limit: int = 3000) -> str:
    text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
    return text[-limit:]


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted ``values``."""
    return values[max(0, math.ceil(q * len(values)) - 1)]


def gaps(rows: list[Row], owners: list[str], lo: float, hi: float) -> tuple[float, float]:
    """Longest stretch in [lo, hi] a node started no run (while one waited; at all).

    A run waits from its scheduled time to its first start. For each node, the stretches
    between its starts (and the window's ends) are cut by the times some run waited; the
    first figure is the longest part of a stretch during which runs waited without a
    break, the second the longest stretch itself.
    """
    first: dict[tuple[str, float], float] = {}
    for job_id, scheduled, started, _, _ in rows:
        key = (job_id, scheduled)
        first[key] = min(started, first.get(key, math.inf))
    waits: list[list[float]] = []
    for (_, scheduled), started in sorted(first.items(), key=lambda kv: kv[0][1]):
        a, b = max(scheduled, lo), min(started, hi)
        if b <= a:
            continue
        if waits and a <= waits[-1][1]:
            waits[-1][1] = max(waits[-1][1], b)
        else:
            waits.append([a, b])
    ends = [w[1] for w in waits]
    waiting, idle = 0.0, 0.0
    for owner in owners:
        starts = sorted(s for _, _, s, o, _ in rows if o == owner and lo <= s <= hi)
        edges = [lo, *starts, hi]
        for a, b in itertools.pairwise(edges):
            idle = max(idle, b - a)
            i = bisect_right(ends, a)
            while i < len(waits) and waits[i][0] < b:
                waiting = max(waiting, min(b, waits[i][1]) - max(a, waits[i][0]))
                i += 1
    return waiting, idle


def summarize(rows: list[Row], owners: list[str], lo: float, hi: float) -> Result:
    """Delays, gaps and duplicates of the runs scheduled in [lo, hi]."""
    window = [r for r in rows if lo <= r[1] <= hi]
    slots = {(r[0], r[1]) for r in window}
    delays = sorted(r[2] - r[1] for r in window)
    result = Result(runs=len(window), dups=len(window) - len(slots))
    if delays:
        result.p50, result.p99, result.max = (
            quantile(delays, 0.5),
            quantile(delays, 0.99),
            delays[-1],
        )
    result.waiting_gap, result.gap = gaps(rows, owners, lo, hi)
    for r in window:
        result.per_node[r[3]] = result.per_node.get(r[3], 0) + 1
    return result


def burst(lab: Lab, tree: Tree, nodes: int, n: int) -> Result:
    first = lab.lead(n)
    rows, info = lab.run(tree, nodes, first=first, oneshots=(0.0, n), done=lambda c: c >= n)
    owners = [f"n{i}" for i in range(nodes)]
    last = max(r[2] for r in rows)
    result = summarize(rows, owners, first, last)
    result.per_s = len({r[0] for r in rows}) / (last - first) if last > first else math.inf
    result.late = info["late"]
    result.commits = info.get("commits")
    _report(tree, f"burst {n} on {nodes} node(s)", result, info)
    return result


def steady(lab: Lab, tree: Tree, n: int, seconds: float, every: int) -> Result:
    first = lab.lead(n + every)
    end = first + seconds

    def done(count: int) -> bool:
        return count >= n and time.time() > end + 2.0

    rows, info = lab.run(tree, 3, first=first, oneshots=(seconds, n), every=every, done=done)
    # The window: slots scheduled before the end (the last one-shot is due at the end
    # minus one step, the recurring jobs go on until the nodes stop).
    result = summarize(rows, ["n0", "n1", "n2"], first, end - 1e-6)
    recurring = {(r[0], r[1]) for r in rows if r[0].startswith("every") and r[1] < end}
    result.recurring = (len(recurring), every * math.ceil(seconds))
    result.late = info["late"]
    _report(tree, f"steady {n} + {every} every 1 s over {seconds:g} s on 3 nodes", result, info)
    return result


def idle(lab: Lab, tree: Tree, seconds: float) -> tuple[Result, Result]:
    """3 nodes that stop at once, then 3 that idle ``seconds`` longer; commits of each."""
    results = []
    for hold in (0.0, seconds):
        rows, info = lab.run(tree, 3, first=time.time() + 3600, oneshots=(0.0, 10), hold=hold)
        results.append(Result(runs=len(rows), commits=info.get("commits")))
        _report(tree, f"3 nodes idle {hold:g} s after start-up", results[-1], info)
    return results[0], results[1]


def _report(tree: Tree, what: str, r: Result, info: dict[str, Any]) -> None:
    figures = (
        f"{r.runs} runs, {r.dups} dups, {r.per_s:.0f} runs/s, delay p50/p99/max"
        f" {r.p50:.3f}/{r.p99:.3f}/{r.max:.3f} s, longest node gap {r.gap:.2f} s"
        f" ({r.waiting_gap:.2f} s with a run waiting), commits {r.commits},"
        f" per node {dict(sorted(r.per_node.items()))}"
    )
    log(f"[{tree.name}] {what}: {figures}{' LATE' if r.late else ''}")
    for line in info.get("warnings", [])[:5]:
        log(f"[{tree.name}]   node log: {line}")
    if len(info.get("warnings", [])) > 5:
        log(f"[{tree.name}]   ... {len(info['warnings']) - 5} more node log lines")


def start_server() -> tuple[str, subprocess.Popen[str]]:
    """A throwaway server as the test suite starts one, made durable again."""
    keeper = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "pg_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert keeper.stdout is not None
    status, _, detail = keeper.stdout.readline().strip().partition(" ")
    if status != "ready":
        keeper.wait(timeout=120)
        raise SystemExit(f"cannot start a throwaway PostgreSQL server: {detail or 'no reply'}")
    with psycopg.connect(detail, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = on").format(sql.Identifier(name)))
        conn.execute("SELECT pg_reload_conf()")
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        with psycopg.connect(detail, autocommit=True) as conn:
            row = conn.execute(
                "SELECT current_setting('fsync') = 'on'"
                " AND current_setting('synchronous_commit') = 'on'"
            ).fetchone()
        if row and row[0]:
            break
        time.sleep(0.1)
    return detail, keeper


def stop_server(keeper: subprocess.Popen[str]) -> None:
    assert keeper.stdin is not None
    keeper.stdin.close()
    keeper.wait(timeout=120)


def _ratio(new: float, old: float) -> str:
    if not (old > 0 and math.isfinite(old) and math.isfinite(new)):
        return "-"
    return f"{new / old:.2f}x"


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:,.0f} ms"


def _s(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds:.2f} s"


def _c(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(
    trees: list[Tree],
    bursts: dict[tuple[str, int], Result],
    steadies: dict[str, Result],
    idles: dict[str, tuple[Result, Result]],
    args: argparse.Namespace,
) -> None:
    """Print the figures of both trees side by side (markdown tables)."""
    names = [t.name for t in trees]
    both = len(trees) == 2
    # Commits of a node's start-up and shutdown (3 nodes that stop as soon as they are
    # ready), and of an idle node per second (3 nodes idle --idle seconds longer).
    fixed: dict[str, float | None] = {}
    rate: dict[str, float | None] = {}
    for name in names:
        short, long = idles[name]
        fixed[name] = None if short.commits is None else short.commits / 3
        rate[name] = (
            None
            if short.commits is None or long.commits is None
            else (long.commits - short.commits) / args.idle
        )

    def per_run(name: str, nodes: int) -> str:
        r, f = bursts[name, nodes], fixed[name]
        if r.commits is None or f is None or not r.runs:
            return "-"
        return f"{(r.commits - nodes * f) / r.runs:.2f}"

    print()
    print(f"burst: {args.burst:,} one-shots due at one instant")
    head = ["nodes"]
    head += [f"{name} runs/s" for name in names]
    head += ["new / old"] if both else []
    head += [f"{name} x 1 node" for name in names]
    head += [f"{name} commits/run" for name in names]
    head += [f"{name} node gap" for name in names]
    head += [" / ".join(names) + " dups"]
    print("| " + " | ".join(head) + " |")
    print("|" + " ---: |" * len(head))
    base = args.nodes[0]
    for nodes in args.nodes:
        rs = [bursts[name, nodes] for name in names]
        cells = [str(nodes)]
        cells += [f"{r.per_s:,.0f}{' (late)' if r.late else ''}" for r in rs]
        cells += [_ratio(rs[-1].per_s, rs[0].per_s)] if both else []
        cells += [
            _ratio(r.per_s, bursts[name, base].per_s) for name, r in zip(names, rs, strict=True)
        ]
        cells += [per_run(name, nodes) for name in names]
        cells += [_s(r.waiting_gap) for r in rs]
        cells += [" / ".join(str(r.dups) for r in rs)]
        print("| " + " | ".join(cells) + " |")
    print(
        "runs/s: runs from the due time to the last start. node gap: the longest any node\n"
        "started no run while runs waited. commits/run: the jobs database's xact_commit over\n"
        "the nodes' lives, minus their start-up and shutdown (below), divided by the runs."
    )
    print()
    print(
        f"steady: {args.steady:,} one-shots due evenly over {args.seconds:g} s + {args.every}"
        " jobs every 1 s, 3 nodes (runs scheduled in the window)"
    )
    print(
        "| tree | runs | p50 delay | p99 delay | max delay | node gap, runs waiting"
        " | node gap | recurring slots run | dups |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        r = steadies[name]
        print(
            f"| {name}{' (late)' if r.late else ''} | {r.runs:,} | {_ms(r.p50)} | {_ms(r.p99)}"
            f" | {_ms(r.max)} | {_s(r.waiting_gap)} | {_s(r.gap)}"
            f" | {r.recurring[0]}/{r.recurring[1]} | {r.dups} |"
        )
    if both:
        o, n = steadies["old"], steadies["new"]
        print(
            f"| new / old | | {_ratio(n.p50, o.p50)} | {_ratio(n.p99, o.p99)}"
            f" | {_ratio(n.max, o.max)} | {_ratio(n.waiting_gap, o.waiting_gap)}"
            f" | {_ratio(n.gap, o.gap)} | | |"
        )
    print(
        "delay: start minus scheduled. node gap, runs waiting: the longest any node started\n"
        "no run while some run was due and not started; node gap: ... started no run at all."
    )
    print()
    print(f"idle: 3 nodes, 10 jobs due in an hour, {args.idle:g} s")
    print("| tree | commits/s, 3 idle nodes | commits per node start-up + shutdown |")
    print("| --- | ---: | ---: |")
    for name in names:
        print(f"| {name} | {_c(rate[name])} | {_c(fixed[name], 1)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--burst", type=int, default=5000, help="one-shots due at once")
    parser.add_argument("--steady", type=int, default=2000, help="one-shots over --seconds")
    parser.add_argument("--seconds", type=float, default=20.0, help="span of the steady load")
    parser.add_argument("--every", type=int, default=10, help="jobs every 1 s in the steady load")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle workload")
    parser.add_argument(
        "--baseline", default="4dc0735", help="git ref of the old tree ('none': new only)"
    )
    parser.add_argument("--new", default=None, help="git ref of the new tree (default: src/)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.quick:
        args.burst, args.steady, args.seconds, args.idle = 400, 200, 4.0, 3.0
    warm = max(50, min(500, args.burst // 10))
    trees: list[Tree] = []
    keeper = None
    tmp = Path(tempfile.mkdtemp(prefix="tw-bench-"))
    try:
        dsn = os.environ.get("TICKWORK_PG_DSN", "")
        source = "TICKWORK_PG_DSN"
        if not dsn:
            log("starting a throwaway PostgreSQL server (tests/pg_server.py) ...")
            dsn, keeper = start_server()
            source = "a throwaway server (tests/pg_server.py, made durable)"
        if args.baseline != "none":
            trees.append(Tree.checkout("old", args.baseline))
        trees.append(Tree.checkout("new", args.new))
        lab = Lab(dsn, tmp)
        try:
            version = lab.setting("server_version")
            print(
                f"PostgreSQL {version}, {source}; fsync {lab.setting('fsync')},"
                f" synchronous_commit {lab.setting('synchronous_commit')};"
                f" {os.cpu_count()} CPUs, {sys.executable}"
            )
            for tree in trees:
                print(f"{tree.name}: {tree.label}, tickwork from {tree.src}")
            for tree in trees:
                burst(lab, tree, 2, warm)  # warm-up: discarded
            order = list(trees)
            bursts: dict[tuple[str, int], Result] = {}
            for nodes in args.nodes:
                for tree in order:
                    bursts[tree.name, nodes] = burst(lab, tree, nodes, args.burst)
                order.reverse()
            steadies: dict[str, Result] = {}
            for tree in order:
                steadies[tree.name] = steady(lab, tree, args.steady, args.seconds, args.every)
            order.reverse()
            idles: dict[str, tuple[Result, Result]] = {}
            for tree in order:
                idles[tree.name] = idle(lab, tree, args.idle)
            table(trees, bursts, steadies, idles, args)
        finally:
            lab.close()
    finally:
        for tree in trees:
            tree.remove()
        if keeper is not None:
            stop_server(keeper)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
