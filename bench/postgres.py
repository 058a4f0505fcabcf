"""Benchmark: real `DurableScheduler` node processes on one PostgreSQL database, old vs new.

    .venv/bin/python bench/postgres.py                 # about 7 min on 2 cores
    .venv/bin/python bench/postgres.py --quick         # small sizes, about 3 min
    .venv/bin/python bench/postgres.py --workloads kill   # the fault runs alone, 4 min
    .venv/bin/python bench/postgres.py --new REF --baseline REF --workloads steady \
        --steady-nodes 1 --every 0 --repeat 5   # one change, five rounds, 5 min

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

Workloads (``--workloads``, default all), each in a fresh schema of a database created
for the run. ``--repeat N`` runs each burst and each steady load N times, the trees'
order alternating: the machine's scatter between runs (10-15% in CPU per run on a
shared 2-core machine) is larger than many changes, so a change is judged by the
median of its per-round ratios; the main tables then show each tree's median round.

- burst: ``--burst`` one-shots all due at one instant, on each of ``--nodes`` node
  counts: runs per second from the due time to the last start, and the ratio to one node.
- steady: ``--steady`` one-shots due evenly over ``--seconds`` plus ``--every`` jobs
  ``Every(1.0)``, on 3 nodes: start delay (start minus scheduled) p50/p99/max of
  the runs scheduled in the window; the longest stretch any node went without starting a
  run while a run was waiting (due, not started); the longest stretch any node started
  nothing at all.
- commits: for each burst, the jobs database's ``xact_commit`` (pg_stat_database) from
  just before the due time to after the last finish, divided by the runs. Only the nodes
  use that database (the results and the harness's reads go to the DSN's database), so
  nothing is subtracted: it includes the nodes' idle look-ups in the few seconds around
  the burst. Then 3 idle nodes (jobs due in an hour) for ``--idle`` seconds: commits/s.
  Before an idle run the jobs database is vacuumed and analyzed (``VACUUM ANALYZE``,
  not counted): loading 10,000 jobs, and the schemas earlier runs dropped, would
  otherwise have PostgreSQL's autovacuum do that work inside some windows and not
  others, and its transactions and CPU count in the database's figures (issue 25: that
  was the whole difference between 10 and 10,000 idle jobs; the nodes send the same).
- CPU per run, in the burst table: the server's processes (from ``/proc``: the
  postmaster, the backends it reaped, its live children) over the nodes' lives, and
  the node processes from ready to stopped (they report it), divided by the runs. The
  backend of the harness's own connection is left out: it polls the results every
  0.1 s with a count over all of them, which costs more for a slower system (more
  polls, each over more rows).
- kill (issue 15, point 4): 3 nodes, one SIGKILLed, every job at the defaults
  (at-most-once, ``overlap`` and ``missed`` "skip") and both trees at their default lease
  (`DurableScheduler`'s, 30 s in both; the loader reports it). "busy": 5,000 one-shots
  due evenly over 10 s plus 20 jobs ``Every(1.0)``, a node killed 3 s in
  (``--quick``: 1,000 over 4 s, killed 2 s in, slots counted over 8 s);
  "quiet": 2,000 one-shots over 60 s (``--quick``: 600 over 20 s), each run sleeping
  0.2 s first so that nodes hold runs, a node killed 10 s in. From that moment the
  harness reads the claims table every 5 ms and kills (SIGKILL) the node holding the most
  claims not yet started, as soon as one does (at most 1 s), else the one holding the
  most claims; it reads that node's claims 0.1 s later. The survivors then run until
  the killed node holds no claim and no one-shot is due or held (and the window is
  over), or at most the lease plus 20 s after the kill (the old tree's nodes may notice
  a lease end only at their 10-s safety poll). Figures: one-shots run once,
  run twice, "lost" (never started anywhere) and "lost in flight" (recorded started on
  the killed node, which died before the run wrote its row: at-most-once gives them up
  as ``abandoned``, by design; the store's outcome is checked); recurring slots of the
  20-s window missing or run twice; when the killed node's claims were all gone from
  the store; its unstarted claims re-run on a survivor and the latest re-start after
  the kill; the longest any slot due in the window waited after the kill.

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
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
SETTLE = 0.5  # seconds from all nodes ready to the earliest due time, at least
STALL = 120.0  # no new run for this long: the workload is reported as stuck
WORKLOADS = ("burst", "steady", "idle", "kill", "ledger")
#: Rounds of the ledger workload: bursts with and without the slot ledger, alternating
#: (``--rounds``). A single node's bursts vary by 20-30% from one to the next on a shared
#: machine, so a 10% budget needs the median of many pairs, not of five.
LEDGER_ROUNDS = 11
# Fault runs: seconds past the lease (from the kill) before what is left counts as lost;
# more than the safety poll of a notified store (10 s), which is when the old tree's
# nodes, asleep through a lease end, notice it.
MARGIN = 20.0

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
    server_cpu: float = math.nan  # CPU seconds of the server's processes over the nodes' lives
    node_cpu: float = math.nan  # CPU seconds of the node processes, from ready to stopped
    late: bool = False  # the nodes were ready after the first due time
    recurring: tuple[int, int] = (0, 0)  # recurring slots run, slots due in the window
    per_node: dict[str, int] = field(default_factory=dict)
    total: int = 0  # every run recorded over the nodes' lives (steady: recurring ones too)


@dataclass
class Fault:
    """When to SIGKILL a node (wall time ``at``) and the end of the workload's window."""

    at: float
    end: float
    prefer: float = 1.0  # at most this long waiting for a node to hold an unstarted claim
    within: float = 5.0  # at most this long waiting for a node to hold a claim


@dataclass
class Killed:
    """What `Lab._fault` saw: the node it killed, when, and the claims it held."""

    owner: str
    at: float  # wall time of the SIGKILL
    held: bool  # it held a claim when it was picked
    claims: list[tuple[str, str, float, float | None]]  # token, job, scheduled, started
    lease: float
    freed: float = math.nan  # seconds from the kill until it held no claim any more
    gave_up: int = 0  # one-shots still due or held when the wait ended at its bound
    outcomes: dict[str, str | None] = field(default_factory=dict)  # one-shots' last_outcome


@dataclass
class KillResult:
    """The figures of one fault run (see `kill`)."""

    late: bool = False
    owner: str = ""
    held: bool = False
    unstarted: int = 0  # claims of the killed node not started when it died
    started: int = 0  # ... recorded started (a run in flight, or one just claimed)
    oneshots: int = 0
    once: int = 0  # one-shots that ran exactly once
    lost: int = 0  # never started anywhere
    in_flight: int = 0  # started on the killed node, no row, not run again (at-most-once)
    twice: int = 0  # one-shots that ran more than once
    slots: int = 0  # recurring slots scheduled in the window
    missing: int = 0
    doubled: int = 0
    freed: float = math.nan
    rerun: int = 0  # unstarted claims of the killed node that ran on a survivor
    recovery: float = math.nan  # the latest such re-run, seconds after the kill
    wait: float = math.nan  # the longest a due slot waited after the kill
    lease: float = math.nan
    gave_up: int = 0
    dups: int = 0  # slots recorded more than once, anywhere
    killed_at: float = math.nan  # seconds after the first due time
    again: int = 0  # started on the killed node and run again (at-most-once broken)
    off_grid: int = 0  # recurring runs scheduled off the job's 1-s grid
    missing_in_flight: int = 0  # missing slots started on the killed node (at-most-once)


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
        self.postmaster = _parent(self.conn.info.backend_pid)
        self.per_job = 0.003  # seconds to declare one job (learned from each load)
        self.start = 3.0  # seconds from launching the nodes to all ready (learned)
        self.lease = 30.0  # the default lease of the tree's DurableScheduler (learned)

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

    def server_cpu(self) -> float:
        """CPU seconds the server's processes used so far, ended backends included.

        The postmaster's own time, the time of its children it has reaped (every
        backend that ended: ``cutime`` + ``cstime``), and that of its live children but
        one: the backend of the harness's own connection, which polls the results every
        0.1 s (a count over all of them, dearer as they grow) and reads the counters. It
        lives through every run, so none of its time reaches the postmaster's reaped
        time; it is the bench's cost, not the system's.
        """
        return server_cpu(self.postmaster, skip=self.conn.info.backend_pid)

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
        fault: Fault | None = None,
        sleep: float = 0.0,
        store: dict[str, Any] | None = None,
        vacuum: bool = False,
    ) -> tuple[list[Row], dict[str, Any]]:
        """Load the jobs, run ``nodes`` nodes until ``done(one-shots run)``; the rows.

        ``oneshots`` is (span, count) from ``first``; ``every`` jobs run each second from
        ``first``. Without ``done`` the nodes stop ``hold`` seconds after they settled.
        With ``fault``, one node is SIGKILLed and the nodes stop as `_fault` says;
        ``info["killed"]`` is what it saw. ``sleep``: seconds each run sleeps first.
        ``store``: keyword arguments for each node's `PostgresStore` (the ledger
        workload passes ``history_keep=0``). ``vacuum``: ``VACUUM ANALYZE`` the jobs
        database after loading, before counting (so autovacuum has nothing due).
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
                "sleep": sleep,
                "store": store or {},
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
            self.lease = float(loaded["lease"])
            if oneshots[1] + every:
                self.per_job = 1.3 * loaded["seconds"] / (oneshots[1] + every)
            if vacuum:
                with psycopg.connect(self.jobs_dsn, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE")
            before = self.settled_commits()
            server_before = self.server_cpu()
            node_cpu = 0.0
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
            if fault is not None:
                info["killed"] = self._fault(schema, procs, fault)
            elif done is None:
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
                    said = json.loads(lines[-1])
                    self._check_import(tree, said["tickwork"])
                    node_cpu += said.get("cpu", math.nan)
                else:
                    node_cpu = math.nan
            warnings = [line for line in _tail(logs, 10**6).splitlines() if line.strip()]
            if warnings:
                info["warnings"] = warnings
            for path in [*logs, stop, *(Path(f"{stop}.n{n}.ready") for n in range(nodes))]:
                path.unlink(missing_ok=True)
        after = self.settled_commits()
        if before is not None and after is not None:
            info["commits"] = after - before
        info["server_cpu"] = self.server_cpu() - server_before
        info["node_cpu"] = node_cpu
        self.conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(results))
        )
        with psycopg.connect(self.jobs_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        return rows, info

    def lead(self, jobs: int) -> float:
        """When the first job may be due: after loading, starting and settling."""
        return time.time() + self.per_job * jobs + self.start + SETTLE + 1.0

    def _fault(self, schema: str, procs: list[subprocess.Popen[str]], fault: Fault) -> Killed:
        """SIGKILL one node ``fault.after`` s into the window; wait for the survivors.

        From then on the claims table is read every 5 ms until a node holds a claim that
        has not started (for at most ``fault.prefer`` s; after that any claim will do,
        for at most ``fault.within`` s): the node holding the most unstarted claims, then
        the most claims, is killed (``n0`` if none held any). Its claims are read 0.1 s
        after it died (its sessions have ended by then, and neither tree recovers a
        claim that soon: the new one waits 0.5 s to believe an owner is gone, the old one
        for the lease). Then the survivors run until the killed node holds no claim, no
        one-shot is due or held, and the window is 2 s past; or, at the latest, until
        the lease plus `MARGIN` after the kill (what is left then is lost).
        """
        claims = sql.Identifier(schema, "tickwork_claims")
        jobs = sql.Identifier(schema, "tickwork_jobs")
        with psycopg.connect(self.jobs_dsn, autocommit=True) as conn:
            time.sleep(max(0.0, fault.at - time.time()))
            prefer = time.monotonic() + fault.prefer
            give_up = time.monotonic() + fault.within
            while True:
                held = [
                    (str(o), int(u), int(t))
                    for o, u, t in conn.execute(
                        sql.SQL(
                            "SELECT owner, count(*) FILTER (WHERE started IS NULL), count(*)"
                            " FROM {} WHERE owner <> '' GROUP BY owner"
                        ).format(claims)
                    ).fetchall()
                ]
                now = time.monotonic()
                if any(h[1] for h in held) or (held and now > prefer) or now > give_up:
                    break
                time.sleep(0.005)
            owner = max(held, key=lambda h: (h[1], h[2]))[0] if held else "n0"
            proc = procs[int(owner[1:])]
            proc.send_signal(signal.SIGKILL)
            at = time.time()
            proc.wait()
            time.sleep(0.1)
            snapshot = [
                (str(r[0]), str(r[1]), float(r[2]), None if r[3] is None else float(r[3]))
                for r in conn.execute(
                    sql.SQL(
                        "SELECT token, job_id, scheduled, started FROM {} WHERE owner = %s"
                    ).format(claims),
                    (owner,),
                ).fetchall()
            ]
            killed = Killed(owner, at, bool(held), snapshot, lease=self.lease)
            pending_sql = sql.SQL(
                "SELECT count(*) FROM {} j WHERE j.id LIKE 'once%' AND (j.next_run IS NOT NULL"
                " OR EXISTS (SELECT 1 FROM {} c WHERE c.job_id = j.id))"
            ).format(jobs, claims)
            bound = max(fault.end, at + self.lease) + MARGIN
            while True:
                now = time.time()
                if math.isnan(killed.freed):
                    row = conn.execute(
                        sql.SQL("SELECT count(*) FROM {} WHERE owner = %s").format(claims),
                        (owner,),
                    ).fetchone()
                    if row is not None and row[0] == 0:
                        killed.freed = now - at
                row = conn.execute(pending_sql).fetchone()
                pending = 0 if row is None else int(row[0])
                if not math.isnan(killed.freed) and pending == 0 and now > fault.end + 2.0:
                    break
                if now > bound:
                    killed.gave_up = pending
                    break
                time.sleep(0.05 if math.isnan(killed.freed) else 0.25)
            killed.outcomes = {
                str(job_id): None if outcome is None else str(outcome)
                for job_id, outcome in conn.execute(
                    sql.SQL("SELECT id, last_outcome FROM {} WHERE id LIKE 'once%'").format(jobs)
                ).fetchall()
            }
        return killed

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


def burst(lab: Lab, tree: Tree, nodes: int, n: int, store: dict[str, Any] | None = None) -> Result:
    first = lab.lead(n)
    rows, info = lab.run(
        tree, nodes, first=first, oneshots=(0.0, n), done=lambda c: c >= n, store=store
    )
    owners = [f"n{i}" for i in range(nodes)]
    last = max(r[2] for r in rows)
    result = summarize(rows, owners, first, last)
    result.per_s = len({r[0] for r in rows}) / (last - first) if last > first else math.inf
    result.late = info["late"]
    result.commits = info.get("commits")
    result.server_cpu, result.node_cpu = info["server_cpu"], info["node_cpu"]
    what = f"burst {n} on {nodes} node(s)" + (f" with {store}" if store else "")
    _report(tree, what, result, info)
    return result


def ledger(
    lab: Lab, tree: Tree, nodes: int, n: int, rounds: int = LEDGER_ROUNDS
) -> tuple[list[float], list[float]]:
    """Bursts with the slot ledger and without it (``history_keep=0``), alternating."""
    with_ledger: list[float] = []
    without: list[float] = []
    for r in range(rounds):
        for keep in (None, 0) if r % 2 == 0 else (0, None):
            store = None if keep is None else {"history_keep": 0}
            rate = burst(lab, tree, nodes, n, store).per_s
            (with_ledger if keep is None else without).append(rate)
    return with_ledger, without


def ledger_table(results: dict[int, tuple[list[float], list[float]]], n: int) -> None:
    print()
    print(f"ledger: the new tree, {n:,} one-shots due at once, with the slot ledger and without")
    print("(history_keep=0), alternating, the same run")
    print("| nodes | with ledger runs/s | without runs/s | with / without | per round |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for nodes, (led, bare) in sorted(results.items()):
        ratios = [w / b for w, b in zip(led, bare, strict=True)]
        print(
            f"| {nodes} | {statistics.median(led):,.0f} | {statistics.median(bare):,.0f}"
            f" | {statistics.median(ratios):.2f}x | {', '.join(f'{x:.2f}' for x in ratios)} |"
        )
    print("with / without: the median of the per-round ratios (1.00x: the ledger costs nothing);")
    print("budget of issue 13: within 10% (>= 0.90x).")


def steady(lab: Lab, tree: Tree, n: int, seconds: float, every: int, nodes: int = 3) -> Result:
    first = lab.lead(n + every)
    end = first + seconds

    def done(count: int) -> bool:
        return count >= n and time.time() > end + 2.0

    rows, info = lab.run(tree, nodes, first=first, oneshots=(seconds, n), every=every, done=done)
    # The window: slots scheduled before the end (the last one-shot is due at the end
    # minus one step, the recurring jobs go on until the nodes stop).
    result = summarize(rows, [f"n{i}" for i in range(nodes)], first, end - 1e-6)
    recurring = {(r[0], r[1]) for r in rows if r[0].startswith("every") and r[1] < end}
    result.recurring = (len(recurring), every * math.ceil(seconds))
    result.late = info["late"]
    result.commits = info.get("commits")
    result.server_cpu, result.node_cpu = info["server_cpu"], info["node_cpu"]
    result.total = len(rows)
    what = f"steady {n} + {every} every 1 s over {seconds:g} s on {nodes} node(s)"
    _report(tree, what, result, info)
    return result


def idle(lab: Lab, tree: Tree, seconds: float, jobs: int = 10) -> tuple[Result, Result]:
    """3 nodes that stop at once, then 3 that idle ``seconds`` longer; commits and CPU.

    ``jobs`` one-shots are declared, all due in an hour; the jobs database is then
    vacuumed and analyzed, so autovacuum's work on them is not counted as the nodes'.
    """
    results = []
    for hold in (0.0, seconds):
        rows, info = lab.run(
            tree, 3, first=time.time() + 3600, oneshots=(0.0, jobs), hold=hold, vacuum=True
        )
        result = Result(runs=len(rows), commits=info.get("commits"))
        result.server_cpu, result.node_cpu = info["server_cpu"], info["node_cpu"]
        results.append(result)
        _report(tree, f"3 nodes idle {hold:g} s after start-up, {jobs:,} jobs", result, info)
    return results[0], results[1]


@dataclass(frozen=True)
class KillLoad:
    """A fault workload: 3 nodes, one-shots and recurring jobs, one node SIGKILLed."""

    name: str
    oneshots: int  # due evenly over ``span`` seconds from the first due time
    span: float
    every: int  # jobs Every(1.0) from the first due time
    window: float  # seconds; recurring slots scheduled in it are counted
    after: float  # the kill, seconds after the first due time
    sleep: float = 0.0  # each run sleeps this long before recording itself

    def describe(self) -> str:
        text = f"{self.oneshots:,} one-shots due evenly over {self.span:g} s"
        if self.every:
            text += f" + {self.every} jobs every 1 s for {self.window:g} s"
        if self.sleep:
            text += f", each run {self.sleep * 1000:.0f} ms long"
        return f"{text}; one node SIGKILLed from {self.after:g} s in"


KILLS = (
    KillLoad("busy", 5000, 10.0, 20, 20.0, 3.0),
    KillLoad("quiet", 2000, 60.0, 0, 60.0, 10.0, sleep=0.2),
)
QUICK_KILLS = (
    KillLoad("busy", 1000, 4.0, 20, 8.0, 2.0),
    KillLoad("quiet", 600, 20.0, 0, 20.0, 10.0, sleep=0.2),
)


def kill(lab: Lab, tree: Tree, load: KillLoad) -> KillResult:
    """One fault run on 3 nodes: what was lost, run twice, and how fast it recovered.

    One-shots: run once; run twice; "in flight" when never run but started on the killed
    node (the store recorded its start: at-most-once, the default delivery, gives such a
    run up as ``abandoned`` by design); "lost" when never started anywhere. Recurring
    slots of the window: missing or recorded twice. The killed node's claims that had
    not started must run on a survivor: how many did, and the latest start after the
    kill. The longest wait: over the slots due before the window's end and started
    after the kill, the longest from the kill (or the due time, if later) to the start.
    """
    first = lab.lead(load.oneshots + load.every)
    end = first + load.window
    rows, info = lab.run(
        tree,
        3,
        first=first,
        oneshots=(load.span, load.oneshots),
        every=load.every,
        fault=Fault(first + load.after, end),
        sleep=load.sleep,
    )
    k: Killed = info["killed"]
    r = KillResult(late=info["late"], owner=k.owner, held=k.held, lease=k.lease)
    r.freed, r.gave_up, r.oneshots, r.killed_at = k.freed, k.gave_up, load.oneshots, k.at - first
    r.unstarted = sum(1 for c in k.claims if c[3] is None)
    r.started = len(k.claims) - r.unstarted
    by_slot: dict[tuple[str, float], list[Row]] = {}
    for row in rows:
        by_slot.setdefault((row[0], row[1]), []).append(row)
    r.dups = sum(len(v) - 1 for v in by_slot.values())
    ran: dict[str, int] = {}
    for row in rows:
        if row[0].startswith("once"):
            ran[row[0]] = ran.get(row[0], 0) + 1
    in_flight = {c[1] for c in k.claims if c[3] is not None}
    for i in range(load.oneshots):
        job = f"once{i:06}"
        count = ran.get(job, 0)
        if count == 1:
            r.once += 1
        elif count > 1:
            r.twice += 1
        elif job in in_flight or k.outcomes.get(job) == "abandoned":
            r.in_flight += 1
        else:
            r.lost += 1
    # A started claim of the killed node that also ran on a survivor: at-most-once broken.
    for _, job, scheduled, started in k.claims:
        again = [x for x in by_slot.get((job, scheduled), []) if x[3] != k.owner]
        if started is not None and again:
            r.again += 1
            log(f"[{tree.name}] {job} at {scheduled:.3f} was started on {k.owner} and ran again")
        if started is None and again:
            r.rerun += 1
            late = min(x[2] for x in again) - k.at
            r.recovery = late if math.isnan(r.recovery) else max(r.recovery, late)
    slots: dict[tuple[str, int], int] = {}
    for job, scheduled, *_ in rows:
        step = round(scheduled - first)
        if job.startswith("every") and scheduled < end - 1e-6:
            if abs(scheduled - first - step) > 1e-3 or step < 0:
                r.off_grid += 1
            else:
                slots[job, step] = slots.get((job, step), 0) + 1
    r.slots = load.every * math.ceil(load.window)
    r.missing = r.slots - len(slots)
    started_slots = {
        (job, round(scheduled - first))
        for _, job, scheduled, started in k.claims
        if started is not None and job.startswith("every")
    }
    r.missing_in_flight = sum(
        1
        for j in range(load.every)
        for step in range(math.ceil(load.window))
        if (f"every{j:03}", step) in started_slots and (f"every{j:03}", step) not in slots
    )
    r.doubled = sum(1 for c in slots.values() if c > 1)
    for (_, scheduled), runs in by_slot.items():
        start = min(x[2] for x in runs)
        if scheduled < end and start > k.at:
            waited = start - max(scheduled, k.at)
            r.wait = waited if math.isnan(r.wait) else max(r.wait, waited)
    log(
        f"[{tree.name}] kill {load.name}: killed {k.owner}"
        f"{'' if k.held else ' (it held no claim)'} {k.at - first:.2f} s in holding"
        f" {r.unstarted} unstarted + {r.started} started claims; one-shots once {r.once},"
        f" lost {r.lost}, in flight {r.in_flight}, twice {r.twice}; recurring slots"
        f" missing {r.missing} ({r.missing_in_flight} in flight), doubled {r.doubled} of"
        f" {r.slots}; dups {r.dups};"
        f" claims freed {r.freed:.2f} s after the kill; unstarted re-run {r.rerun}"
        f" (last {r.recovery:.2f} s); longest wait {r.wait:.2f} s; lease {k.lease:g} s"
        f"{f'; gave up with {k.gave_up} one-shots pending' if k.gave_up else ''}"
        f"{' LATE' if r.late else ''}"
    )
    outcomes: dict[str, int] = {}
    for job, outcome in k.outcomes.items():
        if not ran.get(job):
            outcomes[str(outcome)] = outcomes.get(str(outcome), 0) + 1
    if outcomes:
        log(f"[{tree.name}]   store's last outcome of the one-shots that never ran: {outcomes}")
    warnings = info.get("warnings", [])
    for line in warnings[:3]:
        log(f"[{tree.name}]   node log: {line}")
    if len(warnings) > 3:
        log(f"[{tree.name}]   ... {len(warnings) - 3} more node log lines")
    return r


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
    steadies: dict[tuple[str, int], Result],
    idles: dict[str, tuple[Result, Result]],
    kills: dict[tuple[str, str], KillResult],
    args: argparse.Namespace,
) -> None:
    """Print the figures of both trees side by side (markdown tables), per workload run."""
    names = [t.name for t in trees]
    if bursts:
        burst_table(names, bursts, idles, args)
    if steadies:
        steady_table(names, steadies, args)
    if idles:
        idle_table(names, idles, args)
    if kills:
        kill_table(names, kills, args)


def _idle_figures(
    names: list[str], idles: dict[str, tuple[Result, Result]], seconds: float
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Commits of a node's start-up and shutdown, and of an idle node per second."""
    fixed: dict[str, float | None] = {}
    rate: dict[str, float | None] = {}
    for name in names:
        short, long = idles[name]
        fixed[name] = None if short.commits is None else short.commits / 3
        rate[name] = (
            None
            if short.commits is None or long.commits is None
            else (long.commits - short.commits) / seconds
        )
    return fixed, rate


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def server_cpu(postmaster: int, skip: int = 0) -> float:
    """CPU seconds of a server's processes so far, but for its live child ``skip``.

    The postmaster's own time and the time of its children it has reaped (every
    backend that ended: ``cutime`` + ``cstime``), and that of its live children.
    """
    fields = _stat(postmaster)
    seconds = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK") if fields else 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != skip:
            child = _stat(int(pid))
            if child and int(child[1]) == postmaster:
                seconds += backend_cpu(int(pid), child)
    return seconds


def backend_cpu(pid: int, fields: list[str] | None = None) -> float:
    """CPU seconds of one live process (a backend) so far; 0.0 if it is gone.

    ``fields``: its ``/proc`` stat fields, where the caller read them already.
    """
    fields = _stat(pid) if fields is None else fields
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def _parent(pid: int) -> int:
    """The parent process of ``pid`` (a backend's: the postmaster)."""
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def _median_rounds(rounds: dict[tuple[str, int], list[Result]]) -> dict[tuple[str, int], Result]:
    """Per tree and node count, the round whose CPU per run is the median.

    The lower one of an even count: a real run, all of whose figures belong together.
    """
    chosen = {}
    for key, results in rounds.items():
        ordered = sorted(results, key=_cpu_per_run)
        chosen[key] = ordered[(len(ordered) - 1) // 2]
    return chosen


def rounds_table(title: str, names: list[str], rounds: dict[tuple[str, int], list[Result]]) -> None:
    """Every round's CPU per run, per node count, each tree's median and range.

    With two trees, the ratio new / old of each round too (the trees ran back to back).
    """
    if not rounds:
        return
    print()
    print(f"{title}, CPU ms per run (server + nodes) over the rounds:")
    head = " | ".join(f"{name}: median (min-max)" for name in names)
    pair = len(names) == 2
    extra = " | new / old, each round | median ratio" if pair else ""
    print(f"| nodes | {head}{extra} |")
    print("| ---: |" + " ---: |" * len(names) + (" --- | ---: |" if pair else ""))
    for nodes in sorted({key[1] for key in rounds}):
        cells = [str(nodes)]
        for name in names:
            values = [_cpu_per_run(r) * 1000 for r in rounds[name, nodes]]
            server = statistics.median(r.server_cpu / r.runs * 1000 for r in rounds[name, nodes])
            cells.append(
                f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f});"
                f" server {server:.2f}"
            )
        if pair:
            ratios = [
                _cpu_per_run(new) / _cpu_per_run(old)
                for old, new in zip(rounds[names[0], nodes], rounds[names[1], nodes], strict=True)
            ]
            cells.append(", ".join(f"{x:.2f}x" for x in ratios))
            cells.append(f"{statistics.median(ratios):.2f}x")
        print("| " + " | ".join(cells) + " |")


def _cpu_per_run(r: Result) -> float:
    return (r.server_cpu + r.node_cpu) / r.runs if r.runs else math.nan


def _cpu(r: Result) -> str:
    if not r.runs or math.isnan(r.server_cpu + r.node_cpu):
        return "-"
    server, nodes = r.server_cpu / r.runs * 1000, r.node_cpu / r.runs * 1000
    return f"{server:.2f} + {nodes:.2f} = {server + nodes:.2f}"


def burst_table(
    names: list[str],
    bursts: dict[tuple[str, int], Result],
    idles: dict[str, tuple[Result, Result]],
    args: argparse.Namespace,
) -> None:
    both = len(names) == 2
    # Commits of a node's start-up and shutdown (3 nodes that stop as soon as they are
    # ready), and of an idle node per second (3 nodes idle --idle seconds longer).
    fixed, _ = _idle_figures(names, idles, args.idle) if idles else ({}, {})

    def per_run(name: str, nodes: int) -> str:
        r, f = bursts[name, nodes], fixed.get(name)
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
    head += [f"{name} CPU ms/run, server + nodes" for name in names]
    head += ["CPU new / old"] if both else []
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
        cells += [_cpu(r) for r in rs]
        cells += [_ratio(_cpu_per_run(rs[-1]), _cpu_per_run(rs[0]))] if both else []
        cells += [_s(r.waiting_gap) for r in rs]
        cells += [" / ".join(str(r.dups) for r in rs)]
        print("| " + " | ".join(cells) + " |")
    print(
        "runs/s: runs from the due time to the last start. node gap: the longest any node\n"
        "started no run while runs waited. commits/run: the jobs database's xact_commit over\n"
        "the nodes' lives, minus their start-up and shutdown (below), divided by the runs.\n"
        "CPU ms/run: the server's processes (every backend, ended ones included, and the\n"
        "background processes; not the harness's own backend, which polls the results)\n"
        "from just before the nodes started to after they exited, and\n"
        "the node processes from ready to stopped, divided by the runs; the server's part\n"
        "includes the job's own insert of its result row (one commit per run)."
    )


def steady_table(
    names: list[str], steadies: dict[tuple[str, int], Result], args: argparse.Namespace
) -> None:
    both = len(names) == 2
    print()
    print(
        f"steady: {args.steady:,} one-shots due evenly over {args.seconds:g} s + {args.every}"
        " jobs every 1 s (runs scheduled in the window)"
    )
    print(
        "| tree | nodes | runs | p50 delay | p99 delay | max delay | node gap, runs waiting"
        " | node gap | recurring slots run | commits/run | CPU ms/run, server + nodes | dups |"
    )
    print("| --- |" + " ---: |" * 11)
    for nodes in args.steady_nodes:
        for name in names:
            r = steadies[name, nodes]
            commits = "-" if r.commits is None or not r.total else f"{r.commits / r.total:.2f}"
            runs = replace(r, runs=r.total)
            print(
                f"| {name}{' (late)' if r.late else ''} | {nodes} | {r.runs:,} | {_ms(r.p50)}"
                f" | {_ms(r.p99)} | {_ms(r.max)} | {_s(r.waiting_gap)} | {_s(r.gap)}"
                f" | {r.recurring[0]}/{r.recurring[1]} | {commits} | {_cpu(runs)} | {r.dups} |"
            )
        if both:
            o, n = steadies["old", nodes], steadies["new", nodes]
            print(
                f"| new / old | {nodes} | | {_ratio(n.p50, o.p50)} | {_ratio(n.p99, o.p99)}"
                f" | {_ratio(n.max, o.max)} | {_ratio(n.waiting_gap, o.waiting_gap)}"
                f" | {_ratio(n.gap, o.gap)} | | | | |"
            )
    print(
        "delay: start minus scheduled. node gap, runs waiting: the longest any node started\n"
        "no run while some run was due and not started; node gap: ... started no run at all.\n"
        "commits/run: the jobs database's xact_commit over the nodes' lives (start-up, the\n"
        "lead before the first due time and the 2 s after the last included) per run recorded;\n"
        "CPU ms/run: as in the burst table, per run recorded."
    )


def idle_table(
    names: list[str], idles: dict[str, tuple[Result, Result]], args: argparse.Namespace
) -> None:
    fixed, rate = _idle_figures(names, idles, args.idle)
    print()
    print(f"idle: 3 nodes, 10 jobs due in an hour, {args.idle:g} s")
    print("| tree | commits/s, 3 idle nodes | commits per node start-up + shutdown |")
    print("| --- | ---: | ---: |")
    for name in names:
        print(f"| {name} | {_c(rate[name])} | {_c(fixed[name], 1)} |")


def idle_sizes_table(
    names: list[str], sizes: dict[tuple[str, int], tuple[Result, Result]], seconds: float
) -> None:
    """Per idle node, by the number of jobs: commits/s and CPU ms/s (idle minus start-up)."""
    print()
    print(f"idle by job count: 3 nodes, every job due in an hour, {seconds:g} s")
    print("| tree | jobs | commits/s per node | server CPU ms/s | CPU ms/s per node |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (name, jobs), (short, long) in sorted(sizes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if name not in names:
            continue
        commits = (
            "-"
            if short.commits is None or long.commits is None
            else f"{(long.commits - short.commits) / seconds / 3:.2f}"
        )
        server = (long.server_cpu - short.server_cpu) / seconds * 1000
        node = (long.node_cpu - short.node_cpu) / seconds / 3 * 1000
        print(f"| {name} | {jobs:,} | {commits} | {server:.1f} | {node:.1f} |")
    print(
        "Differences of a run idling the given time and one stopping at once, each after the\n"
        "same start-up; CPU ms/s: milliseconds of CPU per second idle."
    )


def kill_table(
    names: list[str], kills: dict[tuple[str, str], KillResult], args: argparse.Namespace
) -> None:
    loads = [load for load in args.kill_loads if (names[0], load.name) in kills]
    leases = sorted({f"{r.lease:g} s" for r in kills.values()})
    print()
    print(
        f"kill: 3 nodes, one SIGKILLed; every job at the defaults (at-most-once, overlap and"
        f" missed 'skip'); lease {' / '.join(leases)}, the DurableScheduler default"
    )
    for load in loads:
        print(f"  {load.name}: {load.describe()}")
    print(
        "| workload | tree | killed at | its claims, unstarted + started | one-shots run once"
        " | lost | lost in flight (at-most-once) | run twice | recurring slots missing /"
        " doubled | killed node's claims freed | its unstarted claims re-run, last"
        " | longest wait after the kill |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for load in loads:
        for name in names:
            r = kills[name, load.name]
            tree = f"{name}{' (late)' if r.late else ''}"
            recurring = "-"
            if r.slots:
                flight = f" ({r.missing_in_flight} in flight)" if r.missing_in_flight else ""
                recurring = f"{r.missing}{flight} / {r.doubled} of {r.slots:,}"
            rerun = f"{r.rerun} of {r.unstarted}" + (f", {_s(r.recovery)}" if r.rerun else "")
            print(
                f"| {load.name} | {tree} | {_s(r.killed_at)} | {r.unstarted} + {r.started}"
                f"{'' if r.held else ' (held none)'} | {r.once:,} of {r.oneshots:,} | {r.lost}"
                f" | {r.in_flight} | {r.twice} | {recurring} | {_s(r.freed)} | {rerun}"
                f" | {_s(r.wait)} |"
            )
    print(
        "killed at: seconds after the first due time. From the workload's moment on, the kill\n"
        "waits up to 1 s for a node holding a claim not yet started (the most such claims\n"
        "wins); then it takes the node holding the most claims.\n"
        "lost: never started anywhere. lost in flight: recorded started on the killed node,\n"
        "which died before the run wrote its row; given up as 'abandoned', by design of\n"
        "at-most-once delivery (so are missing recurring slots 'in flight'). claims freed:\n"
        "from the kill until the killed node held no claim. re-run: its claims that had not\n"
        "started, run on a survivor; the last one's start after the kill. longest wait: over\n"
        "slots due in the window and started after the kill, the longest from the kill (or\n"
        "the due time, if later) to the start. (late): the nodes were ready only after the\n"
        "first due time (a slow start on a loaded machine), so they began with work due."
    )
    bad = {key: r for key, r in kills.items() if r.dups or r.again or r.off_grid or r.gave_up}
    for (name, workload), r in sorted(bad.items()):
        print(
            f"!! {name} {workload}: {r.dups} slots recorded twice, {r.again} started runs"
            f" run again, {r.off_grid} recurring runs off the grid, {r.gave_up} one-shots"
            " still pending when the wait ended"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--burst", type=int, default=5000, help="one-shots due at once")
    parser.add_argument("--steady", type=int, default=2000, help="one-shots over --seconds")
    parser.add_argument("--seconds", type=float, default=20.0, help="span of the steady load")
    parser.add_argument("--every", type=int, default=10, help="jobs every 1 s in the steady load")
    parser.add_argument(
        "--idle-jobs",
        type=int,
        nargs="+",
        default=[10],
        help="job counts of the idle workload (each due in an hour); the first feeds the"
        " burst table's start-up figures",
    )
    parser.add_argument(
        "--steady-nodes", type=int, nargs="+", default=[3], help="node counts of the steady load"
    )
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of the idle workload")
    parser.add_argument(
        "--baseline", default="4dc0735", help="git ref of the old tree ('none': new only)"
    )
    parser.add_argument("--new", default=None, help="git ref of the new tree (default: src/)")
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=WORKLOADS,
        default=list(WORKLOADS),
        help="which workloads to run (default: all)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=LEDGER_ROUNDS,
        help=f"rounds of the ledger workload (default {LEDGER_ROUNDS})",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of each burst and steady run, the trees' order alternating; the tables"
        " then show each tree's median round, and a table per workload every round's CPU",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args.kill_loads = KILLS
    if args.quick:
        args.burst, args.steady, args.seconds, args.idle = 400, 200, 4.0, 3.0
        args.kill_loads = QUICK_KILLS
        args.rounds = min(args.rounds, 3)
    chosen = set(args.workloads)
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
            steadies: dict[tuple[str, int], Result] = {}
            idles: dict[str, tuple[Result, Result]] = {}
            kills: dict[tuple[str, str], KillResult] = {}
            burst_rounds: dict[tuple[str, int], list[Result]] = {}
            steady_rounds: dict[tuple[str, int], list[Result]] = {}
            if "burst" in chosen:
                for nodes in args.nodes:
                    for _ in range(args.repeat):
                        for tree in order:
                            result = burst(lab, tree, nodes, args.burst)
                            burst_rounds.setdefault((tree.name, nodes), []).append(result)
                        order.reverse()
                bursts = _median_rounds(burst_rounds)
            if "steady" in chosen:
                for nodes in args.steady_nodes:
                    for _ in range(args.repeat):
                        for tree in order:
                            result = steady(lab, tree, args.steady, args.seconds, args.every, nodes)
                            steady_rounds.setdefault((tree.name, nodes), []).append(result)
                        order.reverse()
                steadies = _median_rounds(steady_rounds)
            sizes: dict[tuple[str, int], tuple[Result, Result]] = {}
            if "idle" in chosen:
                for jobs in args.idle_jobs:
                    for tree in order:
                        sizes[tree.name, jobs] = idle(lab, tree, args.idle, jobs)
                        if jobs == args.idle_jobs[0]:
                            idles[tree.name] = sizes[tree.name, jobs]
                    order.reverse()
            ledgers: dict[int, tuple[list[float], list[float]]] = {}
            if "ledger" in chosen:
                for nodes in args.nodes:
                    ledgers[nodes] = ledger(lab, trees[-1], nodes, args.burst, args.rounds)
            if "kill" in chosen:
                for load in args.kill_loads:
                    for tree in order:
                        kills[tree.name, load.name] = kill(lab, tree, load)
                    order.reverse()
            table(trees, bursts, steadies, idles, kills, args)
            if args.repeat > 1:
                names = [t.name for t in trees]
                rounds_table(f"burst of {args.burst:,}", names, burst_rounds)
                spread = f"steady {args.steady:,} over {args.seconds:g} s"
                rounds_table(spread, names, steady_rounds)
            if sizes:
                idle_sizes_table([t.name for t in trees], sizes, args.idle)
            if ledgers:
                ledger_table(ledgers, args.burst)
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
