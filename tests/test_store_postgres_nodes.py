"""Several scheduler processes on one PostgreSQL database: every due run exactly once.

Store-level: each node is ``tests/pg_node.py`` looping claim -> start -> run -> finish
(the durable scheduler will take its place). 5,000 one-shots due within 10 s and 50 jobs
every second; each run records itself in ``tw_results`` under its claim token, so a
duplicate is one (job, slot) with two tokens.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (pip install -e '.[dev]')"
)

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from tickwork import At, Every  # noqa: E402
from tickwork.stores import JobSpec  # noqa: E402
from tickwork.stores.postgres import PostgresStore  # noqa: E402

from .pg_node import RESULTS_DDL  # noqa: E402
from .waiting import DEADLINE  # noqa: E402

pytestmark = pytest.mark.slow

NODE = Path(__file__).with_name("pg_node.py")
FUNC = "tests.pg_node:record"
ONESHOTS, SPREAD = 5000, 10.0
RECURRING, SLOTS = 50, 10


def dsn_with(dsn: str, **params: Any) -> str:
    return make_conninfo("", **{**conninfo_to_dict(dsn), **params})


@dataclass
class Cluster:
    dsn: str
    schema: str
    tmp: Path
    t0: float = 0.0  # the one-shots' first due time
    t1: float = 0.0  # the recurring jobs' first slot: t0, or later if loading ran past it
    procs: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    @property
    def stop(self) -> Path:
        return self.tmp / "stop"

    def load(self, lead: float) -> None:
        """Declare the jobs, every other one at-least-once; due from now + lead."""
        self.t0 = time.time() + lead
        fast = dsn_with(self.dsn, options="-c synchronous_commit=off")  # setup only
        with PostgresStore(fast, schema=self.schema) as store:
            # One transaction for the one-shots (declared one by one, a loaded machine
            # took longer than the lead, and most one-shots were late before they existed).
            oneshots = []
            for i in range(ONESHOTS):
                at = self.t0 + SPREAD * i / ONESHOTS
                delivery = "at_least_once" if i % 2 else "at_most_once"
                oneshots.append((JobSpec(f"o{i:04}", FUNC, At(at), delivery=delivery), at))
            store.upsert_many(oneshots)
            # A loaded machine can take longer than the lead for the one-shots: slots
            # from t0 would then have passed before the jobs existed.
            self.t1 = max(self.t0, time.time() + 1.0)
            for i in range(RECURRING):
                delivery = "at_least_once" if i % 2 else "at_most_once"
                spec = JobSpec(
                    f"r{i:02}",
                    FUNC,
                    Every(1.0),
                    kwargs={"until": self.t1 + SLOTS},
                    delivery=delivery,
                )
                store.upsert(spec, self.t1)
        # A slow machine may finish loading after t0: one-shots are then late, never wrong.

    def prepare(self) -> None:
        """The store's tables and the results table, before any node starts."""
        PostgresStore(self.dsn, schema=self.schema).close()
        self.query(RESULTS_DDL)

    def start(self, owner: str, dsn: str | None = None, **config: Any) -> None:
        config = {
            "dsn": dsn or self.dsn,
            "schema": self.schema,
            "owner": owner,
            "stop": str(self.stop),
            **config,
        }
        self.procs[owner] = subprocess.Popen(
            [sys.executable, str(NODE), json.dumps(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=NODE.parent.parent,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + DEADLINE
        while not all((self.tmp / f"stop.{o}.ready").exists() for o in self.procs):
            for owner, p in self.procs.items():
                assert p.poll() is None, f"{owner} died: {p.communicate()[1]}"
            assert time.monotonic() < deadline, "nodes did not start"
            time.sleep(0.02)

    def query(self, q: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            cur = conn.execute(q, args)
            return cur.fetchall() if cur.description else []

    def left(self) -> tuple[int, int]:
        """(jobs with a next run, live claims): (0, 0) once every run is done."""
        planned, claimed = self.query(
            "SELECT (SELECT count(*) FROM tickwork_jobs WHERE next_run IS NOT NULL),"
            " (SELECT count(*) FROM tickwork_claims)"
        )[0]
        return planned, claimed

    def wait_done(self, timeout: float) -> float:
        """Until nothing is planned or claimed; seconds after the last due time."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.left()
            if left == (0, 0):
                return time.time() - (self.t0 + SPREAD)
            for owner, p in self.procs.items():
                if p.poll() not in (None, -9):
                    pytest.fail(f"node {owner} exited with {p.returncode}: {p.communicate()[1]}")
            assert time.monotonic() < deadline, f"not done: (planned, claimed) = {left}"
            time.sleep(0.2)

    def finish(self) -> dict[str, int]:
        self.stop.touch()
        ran = {}
        for owner, p in self.procs.items():
            out, err = p.communicate(timeout=60)
            if p.returncode == -9:  # the doomed node
                continue
            assert p.returncode == 0, f"{owner}: {err}"
            ran[owner] = json.loads(out)["ran"]
        return ran

    def runs(self) -> dict[tuple[str, float], list[str]]:
        """(job id, scheduled) -> owners of every recorded run."""
        out: dict[tuple[str, float], list[str]] = {}
        for job_id, scheduled, owner in self.query(
            "SELECT job_id, scheduled, owner FROM tw_results"
        ):
            out.setdefault((job_id, scheduled), []).append(owner)
        return out

    def expected(self) -> set[tuple[str, float]]:
        slots = {
            (job_id, at)
            for job_id, at in self.query("SELECT id, last_scheduled FROM tickwork_jobs")
        }
        oneshots = {s for s in slots if s[0].startswith("o")}
        assert len(oneshots) == ONESHOTS
        recurring = {
            (f"r{i:02}", self.t1 + k * 1.0) for i in range(RECURRING) for k in range(SLOTS)
        }
        return oneshots | recurring


@pytest.fixture
def cluster(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Any:
    c = Cluster(pg_dsn, pg_schema, tmp_path)
    c.prepare()
    yield c
    c.stop.touch()
    for p in c.procs.values():
        try:
            p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


def is_least(job_id: str) -> bool:
    return int(job_id[1:]) % 2 == 1


def test_three_nodes_run_every_one_shot_and_every_slot_exactly_once(cluster: Cluster) -> None:
    for owner in ("n1", "n2", "n3"):
        cluster.start(owner)
    cluster.load(lead=4.0)
    cluster.wait_ready()
    lag = cluster.wait_done(timeout=DEADLINE)
    ran = cluster.finish()
    runs = cluster.runs()
    expected = cluster.expected()
    assert set(runs) == expected, "lost or unexpected runs"
    twice = {k: v for k, v in runs.items() if len(v) > 1}
    assert twice == {}, f"{len(twice)} runs happened more than once"
    assert sum(ran.values()) == len(expected) == ONESHOTS + RECURRING * SLOTS
    assert all(ran.values()), f"a node ran nothing: {ran}"
    print(f"3 nodes: {ran}, done {lag:.2f} s after the last due time")


def test_a_node_sigkilled_mid_run_loses_nothing_and_repeats_only_at_least_once(
    cluster: Cluster,
) -> None:
    # These nodes never renew a lease: the survivors' 10 s outlast any batch of theirs
    # on a loaded machine, while the doomed node's 2 s make its claims recoverable soon.
    for owner in ("n1", "n2"):
        cluster.start(owner, lease=10.0)
    cluster.start("doomed", lease=2.0, die_after=300, batch=30)
    cluster.load(lead=4.0)
    cluster.wait_ready()
    cluster.wait_done(timeout=DEADLINE)
    assert cluster.procs["doomed"].wait(timeout=10) == -9
    cluster.finish()
    phases: dict[str, str] = json.loads((cluster.tmp / "stop.doomed.dying").read_text())
    assert set(phases.values()) == {"claimed", "started", "ran"}
    runs = cluster.runs()
    expected = cluster.expected()
    assert set(runs) <= expected
    for key in expected:
        job_id, scheduled = key
        owners = runs.get(key, [])
        phase = phases.get(f"{job_id}@{scheduled!r}")
        if phase == "ran":  # ran on the doomed node, killed before finish
            assert owners[0] == "doomed" or owners[-1] == "doomed"
            assert len(owners) == (2 if is_least(job_id) else 1), (key, owners)
        elif phase == "started":  # started, killed before it ran
            assert len(owners) == (1 if is_least(job_id) else 0), (key, owners)
            assert "doomed" not in owners
        else:  # never started (or not the doomed node's): exactly once
            assert len(owners) == 1, (key, phase, owners)
    abandoned = [k for k, p in phases.items() if p == "started" and not is_least(k.split("@")[0])]
    for key in abandoned:  # at-most-once runs that started and died are on record
        job_id = key.split("@")[0]
        if job_id.startswith("o"):
            ((outcome,),) = cluster.query(
                "SELECT last_outcome FROM tickwork_jobs WHERE id = %s", job_id
            )
            assert outcome == "abandoned"


def test_connections_terminated_while_runs_are_due_change_nothing(cluster: Cluster) -> None:
    app = f"tw-loss-{secrets.token_hex(4)}"
    for owner in ("n1", "n2"):
        cluster.start(owner, dsn=dsn_with(cluster.dsn, application_name=app), lease=5.0)
    cluster.load(lead=4.0)
    cluster.wait_ready()
    killed = rounds = 0
    # Through the due times, and on until 20 connections were cut: on a loaded machine
    # the load and start-up eat into the due times (once only 10 were cut by then).
    while (time.time() < cluster.t0 + SPREAD or killed < 20) and rounds < 100:
        rounds += 1
        time.sleep(0.7)
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            (n,) = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (app,),
            ).fetchone() or (0,)
        killed += n
        rounds += 1
    cluster.wait_done(timeout=DEADLINE)
    ran = cluster.finish()
    runs = cluster.runs()
    assert killed >= 20, f"only {killed} connections were terminated in {rounds} rounds"
    assert set(runs) == cluster.expected()
    twice = {k: v for k, v in runs.items() if len(v) > 1}
    assert twice == {}, f"{len(twice)} runs happened more than once"
    assert sum(ran.values()) == len(runs)
