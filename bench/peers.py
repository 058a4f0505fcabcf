"""Benchmark: tickwork beside its peers on one PostgreSQL server, in one run.

    .venv/bin/python bench/peers.py --burst 5000 --nodes 1 3 --rounds 3   # ~18 min, 2 cores
    .venv/bin/python bench/peers.py --quick                               # a smoke run
    .venv/bin/python bench/peers.py --systems tickwork pgboss --pgboss-batch 500 50
    .venv/bin/python bench/peers.py --delayed                             # issue 41 (9 min, loaded)
    .venv/bin/python bench/peers.py --delayed --systems tickwork --baseline HEAD~1   # A/B
    .venv/bin/python bench/peers.py --soak 600 --nodes 1                  # tables over 10 min

One throwaway PostgreSQL server (started as bench/postgres.py starts one: the test
suite's, with ``fsync``, ``synchronous_commit`` and ``full_page_writes`` back on) holds
every run; each run gets a fresh database. For every system, node count and round:
``--burst`` one-shot jobs are stored due at one instant (not timed), the node processes
start and say ready, the jobs fall due, and the harness waits until every job wrote its
row. The job is the same everywhere: one autocommit ``INSERT INTO bench_results (job,
node)``, whose default column ``clock_timestamp()`` says when it ran.

- runs/s: jobs / (last row's time - due time);
- CPU per run: the server's processes (``/proc``: the postmaster, the backends it
  reaped, its live children; as bench/postgres.py reads it, without the backends of
  the harness's own connections, which poll the results) and the node processes
  (each reports its own CPU time), both from all nodes ready to all nodes exited,
  divided by the jobs;
- against tickwork: the median over the rounds of each round's ratio to tickwork on the
  same node count (rounds rotate which system goes first).

Systems: ``tickwork`` (this tree's ``src``, `DurableScheduler` on `PostgresStore` at
its defaults), ``apscheduler`` (4.x: `Scheduler` with `SQLAlchemyDataStore` on psycopg
and `PsycopgEventBroker`), ``procrastinate`` (3.x workers), ``pgboss`` (pg-boss 10 on
Node, ``work()`` with ``--pgboss-batch``, one system row per batch size). The peers are
installed out of tickwork's venv, from exact pins: bench/peers-requirements.txt into
``bench/.peers/venv`` and ``PGBOSS_PACKAGES`` into ``bench/.peers/node`` (npm), created
or reused by this command. A peer that fails to install or to run is reported with the
reason and left out; the others go on. Nothing here is a test, nothing asserts on time.

``--delayed`` adds the delayed-jobs workload (bench/peers_delayed.py: enqueue rates, a
fixed rate with pickup latency, CPU and commits per run) for tickwork, pg-boss and
Procrastinate; ``--soak`` runs tickwork alone at a fixed rate and samples its tables.
tickwork's burst is of one-offs (``enqueue_many``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_node import CONCURRENCY, PROCRASTINATE_POLL  # noqa: E402
from bench.peers_delayed import (  # noqa: E402
    DELAYED_SYSTEMS,
    ENQUEUE_WAYS,
    SOAK_EVERY,
    Enqueue,
    Steady,
    enqueue_rate,
    enqueue_table,
    preload_table,
    soak_table,
    steady,
    steady_table,
)
from bench.postgres import (  # noqa: E402
    Tree,
    _parent,
    backend_cpu,
    server_cpu,
    start_server,
    stop_server,
)

BENCH = ROOT / "bench"
PEERS = BENCH / ".peers"
VENV = PEERS / "venv"
NODE_DIR = PEERS / "node"
REQUIREMENTS = BENCH / "peers-requirements.txt"
#: pg-boss and node-postgres, exact versions (npm).
PGBOSS_PACKAGES = {"pg-boss": "10.4.2", "pg": "8.16.3"}
PYTHON_SYSTEMS = ("tickwork", "apscheduler", "procrastinate")
SYSTEMS = (*PYTHON_SYSTEMS, "pgboss")
SETTLE = 1.0  # seconds from all nodes ready to the due time, at least
STALL = 120.0  # no new row for this long: the run is given up
PGBOSS_POLL = 0.5  # pg-boss's pollingIntervalSeconds: its minimum (default 2)
#: What leaves a system out of the rest of a command, its reason printed.
FAILURES = (RuntimeError, OSError, ValueError, KeyError, psycopg.Error)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the peers' installs ----------------------------------------------------------------


def install_python_peers() -> str | None:
    """Create or reuse bench/.peers/venv with the pinned requirements; why not, or None."""
    stamp = VENV / "requirements.txt"
    wanted = REQUIREMENTS.read_text()
    if stamp.exists() and stamp.read_text() == wanted:
        return None
    try:
        if not (VENV / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        log("installing the Python peers into bench/.peers/venv ...")
        out = subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "-q", "-r", str(REQUIREMENTS)],
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot create bench/.peers/venv: {exc}"
    if out.returncode != 0:
        return f"pip install -r {REQUIREMENTS.name} failed: {out.stderr.strip()[-600:]}"
    stamp.write_text(wanted)
    return None


def install_pgboss() -> str | None:
    """npm install the pinned pg-boss and pg into bench/.peers/node; why not, or None."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node and npm are not installed"
    package = {"private": True, "dependencies": PGBOSS_PACKAGES}
    text = json.dumps(package, indent=2) + "\n"
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    manifest = NODE_DIR / "package.json"
    installed = NODE_DIR / "node_modules" / "pg-boss" / "package.json"
    if manifest.exists() and manifest.read_text() == text and installed.exists():
        return None
    manifest.write_text(text)
    log("installing pg-boss into bench/.peers/node ...")
    out = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--save-exact"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return f"npm install failed: {out.stderr.strip()[-600:]}"
    return None


def versions() -> dict[str, str]:
    """The versions that matter, as installed."""
    found: dict[str, str] = {}
    python = VENV / "bin" / "python"  # made only for the Python peers
    freeze = [str(python), "-m", "pip", "freeze"] if python.exists() else ["true"]
    out = subprocess.run(freeze, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        name, _, version = line.partition("==")
        if name.lower() in {"apscheduler", "sqlalchemy", "psycopg", "procrastinate", "greenlet"}:
            found[name] = version
    for name in PGBOSS_PACKAGES:
        path = NODE_DIR / "node_modules" / name / "package.json"
        if path.exists():
            found[name] = json.loads(path.read_text())["version"]
    if shutil.which("node"):
        found["node"] = subprocess.run(
            ["node", "--version"], capture_output=True, text=True
        ).stdout.strip()
    return found


# -- one run ----------------------------------------------------------------------------


@dataclass
class Run:
    """One burst of one system on some nodes."""

    system: str
    nodes: int
    jobs: int = 0
    rows: int = 0
    per_s: float = math.nan
    server_cpu: float = math.nan
    node_cpu: float = math.nan
    late: bool = False

    @property
    def cpu_ms(self) -> tuple[float, float, float]:
        """Server, nodes and total CPU milliseconds per run."""
        server = self.server_cpu / self.jobs * 1000 if self.jobs else math.nan
        nodes = self.node_cpu / self.jobs * 1000 if self.jobs else math.nan
        return server, nodes, server + nodes


@dataclass
class System:
    """How to load and run one system, and what was learned of it."""

    name: str
    label: str
    command: list[str]
    env: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)
    per_job: float = 0.01  # seconds to store one job, start-up included (learned)
    start: float = 5.0  # seconds from launching the nodes to all ready (learned)
    failed: str | None = None


class Lab:
    """The server, and a fresh database per run."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        self.tmp = tmp
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.postmaster = _parent(self.conn.info.backend_pid)

    def close(self) -> None:
        self.conn.close()

    def setting(self, name: str) -> str:
        row = self.conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
        return "?" if row is None else str(row[0])

    def server_cpu(self) -> float:
        """CPU seconds of the server's processes so far (as bench/postgres.py reads it).

        The harness's own backend is left out: this one's, and (in `run`) that of the
        connection `_wait` polls the results on, which ends within the run.
        """
        return server_cpu(self.postmaster, skip=self.conn.info.backend_pid)

    def commits(self, name: str) -> int:
        """Transactions committed in database ``name`` so far, as the server counts them.

        A backend reports its counts when it ends or goes idle, so the figure is read
        until it holds still for 0.3 s (at most 5 s): read with every process that used
        the database gone, it is complete.
        """
        query = "SELECT xact_commit FROM pg_stat_database WHERE datname = %s"
        last, give_up = -1, time.monotonic() + 5
        while True:
            row = self.conn.execute(query, (name,)).fetchone()
            count = int(row[0]) if row else 0
            if count == last or time.monotonic() > give_up:
                return count
            last = count
            time.sleep(0.3)

    def database(self) -> tuple[str, str]:
        name = f"peers_{secrets.token_hex(4)}"
        self.conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        dsn = make_conninfo(self.dsn, dbname=name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE bench_results (job text NOT NULL, node text NOT NULL,"
                " at timestamptz NOT NULL DEFAULT clock_timestamp(), due double precision)"
            )
        return name, dsn

    def drop(self, name: str) -> None:
        self.conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    def config(self, system: System, dsn: str, n: int) -> dict[str, Any]:
        """What a process of ``system`` is told of the run's database (and ``n``)."""
        parts = conninfo_to_dict(make_conninfo(dsn))
        return {
            **system.extra,
            "dsn": _url(parts),
            "host": parts.get("host"),
            "port": int(parts.get("port") or 5432),
            "database": parts.get("dbname"),
            "user": parts.get("user"),
            "n": n,
        }

    def call(self, system: System, mode: str, config: dict[str, Any]) -> dict[str, Any]:
        """Run ``system``'s ``load`` or ``produce`` process to its end; its JSON line."""
        out = subprocess.run(
            [*system.command, mode, json.dumps(config)],
            cwd=BENCH,
            env=system.env,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{mode} failed: {out.stderr.strip()[-1500:]}")
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    def launch(
        self,
        system: System,
        config: dict[str, Any],
        stop: Path,
        logs: list[Path],
        procs: list[subprocess.Popen[str]],
    ) -> None:
        """Start a node process per log into ``procs``; wait until each says ready.

        Raises RuntimeError when one dies or they are not all ready in 180 s (the caller
        stops those in ``procs``).
        """
        launched = time.monotonic()
        nodes = len(logs)
        for i in range(nodes):
            node = {**config, "owner": f"n{i}", "stop": str(stop)}
            with logs[i].open("w") as err:
                procs.append(
                    subprocess.Popen(
                        [*system.command, "node", json.dumps(node)],
                        cwd=BENCH,
                        env=system.env,
                        stdout=subprocess.PIPE,
                        stderr=err,
                        text=True,
                    )
                )
        while not all(Path(f"{stop}.n{i}.ready").exists() for i in range(nodes)):
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"a node died while starting: {_tail(logs)}")
            if time.monotonic() - launched > 180:
                raise RuntimeError(f"the nodes did not start in 180 s: {_tail(logs)}")
            time.sleep(0.01)
        system.start = 1.3 * (time.monotonic() - launched)

    def run(self, system: System, nodes: int, n: int) -> Run:
        """Load ``n`` jobs due at one instant, run ``nodes`` nodes until all ran."""
        name, dsn = self.database()
        config = self.config(system, dsn, n)
        stop = self.tmp / f"{name}.stop"
        procs: list[subprocess.Popen[str]] = []
        logs = [self.tmp / f"{name}.{i}.log" for i in range(nodes)]
        result = Run(system.label, nodes, jobs=n)
        server_before = math.nan
        try:
            lead = system.per_job * n * 1.3 + system.start * 1.3 + SETTLE
            config["first"] = first = time.time() + lead
            t0 = time.monotonic()
            self.call(system, "load", config)
            loaded = time.monotonic() - t0
            self.launch(system, config, stop, logs, procs)
            ready = time.time()
            server_before = self.server_cpu()
            result.late = ready > first - 0.05
            polling = self._wait(dsn, n)  # the CPU of the harness's polling backend
        except BaseException as exc:
            self._stop(procs, stop, nodes)
            self.drop(name)
            if isinstance(exc, RuntimeError) and (said := _tail(logs, 800)):
                raise RuntimeError(f"{exc}; the nodes' log ends: {said}") from None
            raise
        result.node_cpu = self._stop(procs, stop, nodes)
        result.server_cpu = self.server_cpu() - server_before - polling
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT job), extract(epoch FROM max(at))"
                " FROM bench_results"
            ).fetchone()
        assert row is not None
        result.rows, distinct, last = int(row[0]), int(row[1]), float(row[2])
        if distinct != n:
            raise RuntimeError(f"{distinct} of {n} jobs ran")
        result.per_s = n / (last - max(first, ready))
        system.per_job = loaded / n  # for the next run's lead (start-up included: longer)
        for path in logs:
            path.unlink(missing_ok=True)
        self.drop(name)
        return result

    def _stop(self, procs: list[subprocess.Popen[str]], stop: Path, nodes: int) -> float:
        """Stop the nodes and wait for them; the CPU seconds they report, summed."""
        stop.touch()
        cpu = 0.0
        for p in procs:
            try:
                text, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
            lines = text.strip().splitlines()
            cpu += json.loads(lines[-1])["cpu"] if p.returncode == 0 and lines else math.nan
        for path in [stop, *(Path(f"{stop}.n{i}.ready") for i in range(nodes))]:
            path.unlink(missing_ok=True)
        return cpu

    def _wait(self, dsn: str, n: int) -> float:
        """Poll until ``n`` jobs ran; the CPU seconds the polling backend used."""
        last, changed = -1, time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT count(DISTINCT job) FROM bench_results").fetchone()
                count = int(row[0]) if row else 0
                if count >= n:
                    return backend_cpu(conn.info.backend_pid)  # it ends with the connection
                if count != last:
                    last, changed = count, time.monotonic()
                elif time.monotonic() - changed > STALL:
                    raise RuntimeError(f"no new run for {STALL:.0f} s ({count} of {n} ran)")
                time.sleep(0.1)


def _url(parts: dict[str, Any]) -> str:
    """A ``postgresql://`` URL for the libpq parts (a socket folder goes in ``host=``)."""
    from urllib.parse import quote

    host = quote(str(parts.get("host", "")), safe="")
    user = parts.get("user", "postgres")
    return f"postgresql://{user}@/{parts['dbname']}?host={host}&port={parts.get('port', 5432)}"


def _tail(logs: list[Path], limit: int = 1500) -> str:
    text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
    return text[-limit:]


# -- figures ----------------------------------------------------------------------------


def median_range(values: list[float]) -> tuple[float, float, float]:
    """Median, min and max of the finite values (NaN when there are none)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return statistics.median(finite), min(finite), max(finite)


def round_ratios(runs: list[list[Run]], label: str, nodes: int, what: str) -> list[float]:
    """Per round: ``label``'s figure over tickwork's on the same node count.

    ``what`` is ``"rate"`` (runs/s: above 1 means faster than tickwork) or ``"cpu"``
    (total CPU per run: above 1 means more CPU per run than tickwork).
    """
    out = []
    for one in runs:
        mine = [r for r in one if r.system == label and r.nodes == nodes]
        base = [r for r in one if r.system == "tickwork" and r.nodes == nodes]
        if mine and base:
            a, b = (
                (mine[0].per_s, base[0].per_s)
                if what == "rate"
                else (mine[0].cpu_ms[2], base[0].cpu_ms[2])
            )
            if b > 0 and math.isfinite(a) and math.isfinite(b):
                out.append(a / b)
    return out


def table(runs: list[list[Run]], labels: list[str], node_counts: list[int]) -> list[str]:
    """The markdown table: per system and node count, medians over the rounds."""
    lines = [
        "| system | nodes | runs/s, median (min-max) | vs tickwork"
        " | CPU ms per run: server + nodes = total | CPU vs tickwork"
        " | duplicate rows | late starts |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for nodes in node_counts:
        for label in labels:
            mine = [r for one in runs for r in one if r.system == label and r.nodes == nodes]
            if not mine:
                continue
            rate = median_range([r.per_s for r in mine])
            server = median_range([r.cpu_ms[0] for r in mine])[0]
            node = median_range([r.cpu_ms[1] for r in mine])[0]
            total = median_range([r.cpu_ms[2] for r in mine])[0]
            rr = median_range(round_ratios(runs, label, nodes, "rate"))[0]
            cr = median_range(round_ratios(runs, label, nodes, "cpu"))[0]
            dups = sum(r.rows - r.jobs for r in mine)
            late = sum(r.late for r in mine)
            lines.append(
                f"| {label} | {nodes} | {_n(rate[0])} ({_n(rate[1])}-{_n(rate[2])}) | {_x(rr)}"
                f" | {_f(server)} + {_f(node)} = {_f(total)} | {_x(cr)} | {dups}"
                f" | {late} of {len(mine)} |"
            )
    return lines


def _calls(batch: int) -> str:
    return "single enqueues" if batch == 1 else f"{batch} jobs per call of the bulk API"


def _last(reason: str) -> str:
    """The last line of a failure (a traceback's error), for the report."""
    lines = reason.strip().splitlines()
    return lines[-1] if lines else reason


def _n(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.0f}"


def _f(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2f}"


def _x(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2f}x"


def machine(lab: Lab) -> list[str]:
    """Facts about the machine and the server, for the header."""
    model = "?"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return [
        f"machine: {os.cpu_count()} cores ({model}), {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}",
        f"PostgreSQL {lab.setting('server_version')}: fsync {lab.setting('fsync')},"
        f" synchronous_commit {lab.setting('synchronous_commit')},"
        f" max_connections {lab.setting('max_connections')}",
    ]


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


# -- main -------------------------------------------------------------------------------


def tickwork_system() -> System:
    """tickwork as this tree's ``src`` runs it, in this interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return System(
        "tickwork", "tickwork", [sys.executable, str(BENCH / "peer_node.py"), "tickwork"], env
    )


def systems(args: argparse.Namespace, why: dict[str, str]) -> list[System]:
    """The systems to run, installed; those that cannot be get a reason in ``why``."""
    peers_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out: list[System] = []
    python_failed = pgboss_failed = None
    if set(args.systems) & {"apscheduler", "procrastinate"}:
        python_failed = install_python_peers()
    if "pgboss" in args.systems:
        pgboss_failed = install_pgboss()
    node_py = str(BENCH / "peer_node.py")
    for name in args.systems:
        if name == "tickwork":
            out.append(tickwork_system())
        elif name in PYTHON_SYSTEMS:
            if python_failed:
                why[name] = python_failed
                continue
            out.append(System(name, name, [str(VENV / "bin" / "python"), node_py, name], peers_env))
        else:
            if pgboss_failed:
                why[name] = pgboss_failed
                continue
            env = {**os.environ, "NODE_PATH": str(NODE_DIR / "node_modules")}
            for batch in args.pgboss_batch:
                out.append(
                    System(
                        name,
                        f"pg-boss batch {batch}",
                        ["node", str(BENCH / "peer_pgboss.js")],
                        env,
                        extra={"batch": batch, "poll": PGBOSS_POLL},
                    )
                )
    return out


def arguments() -> argparse.Namespace:
    """The command line, with the defaults of ``--delayed``, ``--soak`` and ``--quick``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=5000, help="one-shot jobs due at once")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--rounds", type=int, help="default 3; 1 with --delayed")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEMS,
        help="default: all; with --delayed, all but apscheduler",
    )
    parser.add_argument(
        "--pgboss-batch",
        type=int,
        nargs="+",
        default=[500],
        help="pg-boss work() batchSize; one system row each",
    )
    parser.add_argument(
        "--warmup", type=int, help="jobs of each system's warm-up (1000; 500 with --delayed)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="tickwork at this git ref too (a git worktree), a row of its own in every"
        " table but the enqueue rates: this tree against it in the same rounds",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: everything small")
    parser.add_argument(
        "--delayed",
        action="store_true",
        help="the delayed-jobs workload too: enqueue rates, a fixed rate (bench/peers_delayed.py)",
    )
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="fixed rate: jobs/s offered (0: flat out)"
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="fixed rate: seconds of producing"
    )
    parser.add_argument("--producers", type=int, default=4, help="producers of the fixed rate")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="fixed rate and soak: jobs per enqueue call (1: single)",
    )
    parser.add_argument(
        "--enqueue-seconds", type=float, default=2.0, help="per enqueue-rate figure"
    )
    parser.add_argument(
        "--soak",
        type=float,
        metavar="SECONDS",
        help="only: tickwork at --rate on --nodes[0] nodes for SECONDS, sampling its tables",
    )
    parser.add_argument(
        "--preload",
        type=int,
        nargs=2,
        metavar=("PENDING", "DECLARED"),
        help="only: tickwork at --rate on each --nodes count beside 1,000 pending one-offs"
        " and 1,000 declared jobs, then beside PENDING and DECLARED",
    )
    args = parser.parse_args()
    alone = args.soak or args.preload  # tickwork alone
    delayed = args.delayed or alone
    if args.systems is None:
        args.systems = list(
            DELAYED_SYSTEMS if args.delayed else ("tickwork",) if alone else SYSTEMS
        )
    if "tickwork" not in args.systems:
        parser.error("--systems must include tickwork: the ratios are to it")
    args.rounds = args.rounds or (1 if delayed else 3)
    args.warmup = args.warmup or (500 if delayed else 1000)
    if args.quick:
        args.burst, args.rounds, args.warmup = 500, 1, 100
        args.rate, args.seconds, args.enqueue_seconds = 200.0, 3.0, 1.0
    return args


def main() -> None:
    args = arguments()
    args.tree = _tickwork_version()  # at the start: the tree the figures are of
    why: dict[str, str] = {}
    chosen = systems(args, why)
    baseline = None if args.baseline is None else Tree.checkout("baseline", args.baseline)
    if baseline is not None:
        short = baseline.label.split()[0]
        this = tickwork_system()
        chosen.insert(1, System("tickwork", f"tickwork@{short}", this.command, baseline.env()))
    started_load = load_average()
    if os.environ.get("TICKWORK_PG_DSN"):
        log("bench/peers.py always starts its own server; TICKWORK_PG_DSN is ignored")
    dsn, keeper = start_server()
    tmp = Path(tempfile_dir())
    found = Found()
    try:
        lab = Lab(dsn, tmp)
        if args.soak:
            found.soak = soak(lab, chosen[0], args)
        elif args.preload:
            found.preloads = preloads(lab, chosen[0], args)
        else:
            warm_up(lab, chosen, args.warmup, why)
            live = [s for s in chosen if s.failed is None]
            for r in range(args.rounds):
                order = live[r % len(live) :] + live[: r % len(live)] if live else []
                if args.delayed:
                    found.enqueues.append(enqueue_rates(lab, order, args, why))
                    found.steadies.append(fixed_rates(lab, order, args, why))
                found.bursts.append(bursts(lab, order, args, r, why))
        header = machine(lab)
        lab.close()
    finally:
        stop_server(keeper)
        shutil.rmtree(tmp, ignore_errors=True)
        if baseline is not None:
            baseline.remove()
    for line in report(
        args,
        chosen,
        found,
        [
            *header,
            f"load average (1/5/15 min): {started_load} at the start, {load_average()} at the end",
        ],
        why,
    ):
        print(line)


@dataclass
class Found:
    """Everything one command measured, per round."""

    bursts: list[list[Run]] = field(default_factory=list)
    enqueues: list[list[Enqueue]] = field(default_factory=list)
    steadies: list[list[Steady]] = field(default_factory=list)
    soak: Steady | None = None
    preloads: list[Steady] = field(default_factory=list)


def warm_up(lab: Lab, chosen: list[System], n: int, why: dict[str, str]) -> None:
    """A discarded burst of ``n`` per system on one node; a failure leaves it out."""
    for system in chosen:
        try:
            log(f"[{system.label}] warm-up: {n} jobs on 1 node")
            lab.run(system, 1, n)
        except FAILURES as exc:
            system.failed = str(exc)
            why[system.label] = f"warm-up failed: {exc}"
            log(f"[{system.label}] left out: {exc}")


def bursts(
    lab: Lab, order: list[System], args: argparse.Namespace, r: int, why: dict[str, str]
) -> list[Run]:
    """One round of bursts: each system on each node count; a failure leaves it out."""
    one: list[Run] = []
    for nodes in args.nodes:
        for system in order:
            if system.failed:
                continue
            try:
                run = lab.run(system, nodes, args.burst)
            except FAILURES as exc:
                system.failed = str(exc)
                why[system.label] = f"round {r + 1}, {nodes} node(s): {exc}"
                log(f"[{system.label}] left out: {exc}")
                continue
            one.append(run)
            s, nd, t = run.cpu_ms
            log(
                f"round {r + 1} [{run.system}] {nodes} node(s): {run.per_s:,.0f} runs/s,"
                f" CPU ms/run {s:.2f} + {nd:.2f} = {t:.2f}, rows {run.rows}"
                f"{' LATE' if run.late else ''}"
            )
    return one


def enqueue_rates(
    lab: Lab, order: list[System], args: argparse.Namespace, why: dict[str, str]
) -> list[Enqueue]:
    """One round of enqueue rates: every way of `ENQUEUE_WAYS`, each system once."""
    one: list[Enqueue] = []
    for store, kind, producers, batch in ENQUEUE_WAYS:
        done: set[str] = set()
        for system in order:
            # One row a system (pg-boss's work batches enqueue alike), a tickwork
            # baseline (`--baseline`) a row of its own.
            row = system.label if system.name == "tickwork" else system.name
            if system.failed or row in done or system.name not in DELAYED_SYSTEMS:
                continue
            if store == "SQLite" and system.name != "tickwork":
                continue
            done.add(row)
            n = producers or args.producers
            what = f"{store} {kind} enqueue, {n} producer(s)"
            try:
                got = enqueue_rate(lab, system, store, kind, n, batch, args.enqueue_seconds)
            except FAILURES as exc:
                why[f"{system.name} ({what})"] = str(exc)
                log(f"[{system.name}] {what}: failed: {exc}")
                continue
            one.append(got)
            log(f"[{system.name}] {what}: {got.per_s:,.0f} jobs/s")
    return one


def fixed_rates(
    lab: Lab, order: list[System], args: argparse.Namespace, why: dict[str, str]
) -> list[Steady]:
    """One round of the fixed rate: each system on each node count."""
    one: list[Steady] = []
    for nodes in args.nodes:
        for system in order:
            if system.failed or system.name not in DELAYED_SYSTEMS:
                continue
            what = f"{args.rate:,.0f}/s for {args.seconds:.0f} s on {nodes} node(s)"
            try:
                got = steady(
                    lab, system, nodes, args.rate, args.seconds, args.producers, batch=args.batch
                )
            except FAILURES as exc:
                why[f"{system.label} ({what})"] = str(exc)
                log(f"[{system.label}] {what}: failed: {exc}")
                continue
            one.append(got)
            log(
                f"[{system.label}] {what}: enqueued {got.reached:,.0f}/s, completed"
                f" {got.completed:,.0f}/s, p50/p99 {got.p50 * 1000:.1f}/{got.p99 * 1000:.1f} ms,"
                f" CPU ms/run {got.cpu_ms[2]:.2f}, commits/run {got.commits_per_run:.2f}"
            )
    return one


def soak(lab: Lab, system: System, args: argparse.Namespace) -> Steady:
    """tickwork at ``--rate`` for ``--soak`` seconds, its tables sampled."""
    nodes = args.nodes[0]
    log(f"[{system.label}] soak: {args.rate:,.0f}/s for {args.soak:.0f} s on {nodes} node(s)")
    every = SOAK_EVERY
    return steady(lab, system, nodes, args.rate, args.soak, args.producers, every, batch=args.batch)


def preloads(lab: Lab, system: System, args: argparse.Namespace) -> list[Steady]:
    """tickwork at ``--rate`` beside a small state, then beside ``--preload``'s."""
    out = []
    for nodes in args.nodes:
        for preload in ((1000, 1000), tuple(args.preload)):
            what = f"{args.rate:,.0f}/s on {nodes} node(s) beside {preload[0]:,} pending"
            log(f"[{system.label}] {what} and {preload[1]:,} declared")
            got = steady(
                lab,
                system,
                nodes,
                args.rate,
                args.seconds,
                args.producers,
                batch=args.batch,
                preload=(preload[0], preload[1]),
            )
            log(
                f"[{system.label}] {what}: pickup p50/p99"
                f" {got.p50 * 1000:.1f}/{got.p99 * 1000:.1f} ms"
            )
            out.append(got)
    return out


def report(
    args: argparse.Namespace,
    chosen: list[System],
    found: Found,
    header: list[str],
    why: dict[str, str],
) -> list[str]:
    """The markdown the command prints."""
    labels = [s.label for s in chosen]
    versions_found = versions()
    if args.soak:
        title = (
            f"# tickwork's tables over {args.soak:.0f} s at {args.rate:,.0f} one-offs/s offered"
            f" ({args.producers} producers, {_calls(args.batch)}, {args.nodes[0]} node(s))"
        )
    elif args.delayed:
        title = (
            f"# Delayed jobs, tickwork beside its peers: enqueue rates, {args.rate:,.0f}/s"
            f" offered for {args.seconds:.0f} s, a burst of {args.burst:,}; {args.rounds} round(s)"
        )
    else:
        title = (
            f"# tickwork beside its peers: a burst of {args.burst:,} one-shots due at once,"
            f" {args.rounds} round(s)"
        )
    out = [title, ""]
    out += [f"- {line}" for line in header]
    out.append(
        f"- tickwork {args.tree} (this tree), "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions_found.items()))
    )
    out.append(
        f"- settings: tickwork at its defaults (a pool of {CONCURRENCY} threads);"
        f" APScheduler at its defaults (100 jobs at once per node) with the task's"
        f" max_running_jobs=None; Procrastinate concurrency={CONCURRENCY},"
        f" fetch_job_polling_interval={PROCRASTINATE_POLL}; pg-boss work() batchSize"
        f" {' and '.join(map(str, args.pgboss_batch))}, pollingIntervalSeconds {PGBOSS_POLL},"
        f" inserts on a pg pool of {CONCURRENCY}"
    )
    if args.preload:
        title = (
            f"# tickwork at {args.rate:,.0f} one-offs/s offered for {args.seconds:.0f} s beside"
            f" a small state and beside {args.preload[0]:,} pending one-offs and"
            f" {args.preload[1]:,} declared jobs ({args.producers} producers,"
            f" {_calls(args.batch)})"
        )
        out[0] = title
        out += ["", *preload_table(found.preloads)]
    if args.soak and found.soak is not None:
        out += ["", *soak_table(found.soak), ""]
        out += steady_table([[found.soak]], [found.soak.system], [found.soak.nodes])
    if found.enqueues:
        out += [
            "",
            f"## Enqueue rates ({args.enqueue_seconds:g} s each, flat out, no node running)",
            "",
        ]
        out += enqueue_table(found.enqueues)
    if found.steadies:
        out += [
            "",
            f"## Fixed rate: {args.producers} producers offering {args.rate:,.0f} jobs/s in all"
            f" for {args.seconds:g} s, {_calls(args.batch)}",
            "",
        ]
        out += steady_table(found.steadies, labels, args.nodes)
    if found.bursts:
        out += ["", f"## A burst of {args.burst:,} due at once", ""]
        out += table(found.bursts, labels, args.nodes)
    if args.delayed and "apscheduler" in args.systems:
        why["apscheduler (delayed workload)"] = (
            "in the burst only: it has no job queue to enqueue into"
        )
    if why:
        out.append("")
        out += [f"- {label}: not measured: {_last(reason)}" for label, reason in why.items()]
    return out


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="tw-peers-")


def _tickwork_version() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import tickwork; print(tickwork.__version__)"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
    )
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return f"{out.stdout.strip()} at {rev}"


if __name__ == "__main__":
    main()
