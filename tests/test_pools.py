"""Concurrency pools through the library and the jobs file (one process, fake clocks).

The store's part (the claim keeps to the limits) is `tests/pool_contract.py`; many
nodes racing is `tests/test_pools_cluster.py`.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import AsyncDurableScheduler, DurableScheduler, Every
from tickwork.__main__ import build_parser
from tickwork._cli.jobs import run_jobs
from tickwork._core.errors import ConfigError
from tickwork._daemon.declare import ENTRY_POINT
from tickwork._daemon.jobsfile.config import parse_config
from tickwork._daemon.web.status_page import page
from tickwork.metrics import SchedulerMetrics
from tickwork.stores import JobSpec, JobSpecError, PoolState
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock, InlineExecutor

from . import durable_jobs

REC = "tests.durable_jobs:record"
SLOW = "tests.durable_jobs:slow"
START = DURABLE_START

Make = Callable[..., tuple[DurableScheduler, ManualExecutor]]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "jobs.db")
    yield s
    s.close()


@pytest.fixture
def make(durable_clock: FakeClock, store: SQLiteStore) -> Make:
    def new(**kw: Any) -> tuple[DurableScheduler, ManualExecutor]:
        pool = ManualExecutor()
        ds = DurableScheduler(
            store, executor=pool, wall_clock=durable_clock.wall, monotonic_clock=durable_clock, **kw
        )
        return ds, pool

    return new


def job(job_id: str, seconds: float = 10, **kw: Any) -> JobSpec:
    return JobSpec(job_id, REC, Every(seconds), args=[job_id], **kw)


def test_the_scheduler_declares_its_limits_to_the_store(make: Make, store: SQLiteStore) -> None:
    make(pools={"db": 2, "net": 5}, max_running=10)
    assert store.pools(START) == [
        PoolState("*", 10, 0, 0),
        PoolState("db", 2, 0, 0),
        PoolState("net", 5, 0, 0),
    ]
    # another node declaring nothing leaves them; one declaring another limit wins
    make()
    make(pools={"db": 3})
    assert [(p.name, p.limit) for p in store.pools(START)] == [("*", 10), ("db", 3), ("net", 5)]


def test_bad_pool_arguments_are_refused(make: Make, store: SQLiteStore) -> None:
    with pytest.raises(ValueError, match=r"^pools\['db'\] must be an integer from 1 to 1,000,000"):
        make(pools={"db": 0})
    with pytest.raises(
        TypeError, match=r"^pools must be a mapping of pool name to limit, got 'db'$"
    ):
        make(pools="db")
    with pytest.raises(ValueError, match=r"^pool must be a pool name of 1-100 letters"):
        make(pools={"a b": 1})
    with pytest.raises(ValueError, match=r"^max_running must be an integer .*got -1$"):
        make(max_running=-1)
    assert store.pools(START) == []  # nothing half-declared


def test_a_job_whose_pool_has_no_limit_is_refused(make: Make) -> None:
    ds, _ = make(pools={"db": 1})
    with pytest.raises(
        JobSpecError,
        match=r"^job 'x': pool 'dbb' has no limit: give it to the scheduler"
        r" \(pools=\{'dbb': 2\}\) or in the jobs file \(\[pool.dbb\] limit = 2\)$",
    ):
        ds.declare(job("x", pool="dbb"))
    ds.declare(job("y", pool="db"))
    other, _ = make()  # a node that declares no limits itself: the stored one counts
    other.declare(job("z", pool="db"))


def test_the_async_scheduler_takes_pools_too(store: SQLiteStore) -> None:
    AsyncDurableScheduler(store, pools={"db": 4}, max_running=8)
    assert [(p.name, p.limit) for p in store.pools(START)] == [("*", 8), ("db", 4)]


def test_runs_wait_for_a_slot_and_go_when_one_frees(
    make: Make, durable_clock: FakeClock, store: SQLiteStore
) -> None:
    ds, pool = make(pools={"db": 1})
    ds.declare(job("a", pool="db"))
    ds.declare(job("b", pool="db"))
    durable_clock.advance(10)
    ds.step()  # "a" is claimed; "b" waits for the slot
    assert [c.job_id for c in ds.jobs()[0].claims] == ["a"]
    assert store.pools(durable_clock.wall())[0] == PoolState("db", 1, 1, 1)
    pool.run_all()  # "a" ends
    durable_clock.advance(1)
    drain(ds, pool)
    assert [c[0] for c in durable_jobs.CALLS] == [("a",), ("b",)]


def test_a_run_that_waits_past_its_grace_follows_the_missed_policy(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make(pools={"db": 1})
    ds.declare(job("hog", seconds=100, pool="db"))
    ds.declare(job("late", seconds=100, pool="db", grace=5.0, missed="skip"))
    durable_clock.advance(100)
    ds.step()  # the hog holds the only slot; "late" waits
    durable_clock.advance(30)  # longer than late's grace
    ds.step()
    assert [s.outcome for s in ds.history("late")] == []
    pool.run_all()  # the hog ends: "late" gets the slot, 30 s behind, grace 5 s
    drain(ds, pool)
    assert [s.outcome for s in ds.history("late")] == ["missed"]
    assert [c[0] for c in durable_jobs.CALLS] == [("hog",)]
    late = ds.get("late")
    assert late is not None and late.next_run == START + 200  # its next slot is planned


# -- the jobs file ------------------------------------------------------------------


FILE = """
max_running = 8

[pool.db-heavy]
limit = 2

[[job]]
name = "export"
command = ["true"]
every = "1m"
pool = "db-heavy"
"""


def test_the_jobs_file_declares_pools() -> None:
    config = parse_config(FILE)
    assert dict(config.pools) == {"db-heavy": 2} and config.max_running == 8
    assert config.jobs[0].pool == "db-heavy"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            FILE.replace('pool = "db-heavy"', 'pool = "db"'),
            "<string>:11: job \"export\": pool: no [pool.db] table gives the pool 'db' its"
            " limit (add [pool.db] with limit = N)",
        ),
        (
            FILE.replace("limit = 2", "limit = 0"),
            '<string>:5: pool "db-heavy": limit: must be an integer from 1 to 1,000,000, got 0',
        ),
        (
            FILE.replace("limit = 2", "limits = 2"),
            '<string>:4: pool "db-heavy": limit: missing: write [pool.<name>] limit = N',
        ),
        (
            FILE.replace("max_running = 8", 'max_running = "8"'),
            "<string>:2: max_running: must be an integer from 1 to 1,000,000, got '8'",
        ),
        (
            FILE.replace('pool = "db-heavy"', 'pool = "db heavy"'),
            '<string>:11: job "export": pool: must be a pool name of 1-100 letters, digits or'
            " '_.@:-', starting with a letter or digit, got 'db heavy'",
        ),
    ],
)
def test_bad_pools_in_the_jobs_file_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert str(info.value) == message


# -- what waits for a slot is visible -----------------------------------------------


def full_pool(path: Path) -> float:
    """A state: pool db (limit 1) held by "a", "b" due and waiting; returns now."""
    now = time.time()
    with SQLiteStore(path) as s:
        s.set_pool_limit("db", 1)
        for name in ("a", "b", "c"):
            spec = JobSpec(
                f"jobs/{name}",
                ENTRY_POINT,
                Every(60),
                kwargs={"job": name},
                pool=None if name == "c" else "db",
            )
            s.upsert(spec, now - 5)
        (held, c) = s.claim_due(
            now, owner="x:1", lease_seconds=300, limit=10, advance=lambda st, t: t + 60
        )
        assert [held.job_id, c.job_id] == ["jobs/a", "jobs/c"]
    return now


def test_tickwork_jobs_shows_what_waits_for_a_pool(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    full_pool(state)
    args = build_parser().parse_args(["jobs", "--state", str(state), "--json"])
    out = io.StringIO()
    assert run_jobs(args, out=out, err=io.StringIO()) == 0
    rows = {r["job"]: r for r in json.loads(out.getvalue())}
    assert {k: (r["pool"], r["waiting_for"]) for k, r in rows.items()} == {
        "a": ("db", None),
        "b": ("db", "pool db"),
        "c": (None, None),
    }
    for extra in ([], ["--long"]):
        args = build_parser().parse_args(["jobs", "--state", str(state), *extra])
        out = io.StringIO()
        assert run_jobs(args, out=out, err=io.StringIO()) == 0
        text = out.getvalue()
        assert (
            "waiting for pool db" if not extra else "waiting   for a slot: pool db is full"
        ) in text


def test_the_status_page_and_the_metrics_show_the_pools(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    now = full_pool(state)
    store = SQLiteStore(state)
    try:
        ds = DurableScheduler(store, max_running=10)
        html = page(store, "jobs", "jobs.toml")
        assert html.count("waiting for pool db") == 1
        metrics = SchedulerMetrics()
        metrics.watch(ds)
        text = generate_latest(metrics.registry).decode()
        for line in (
            'tickwork_pool_limit{pool="db"} 1.0',
            'tickwork_pool_running{pool="db"} 1.0',
            'tickwork_pool_waiting{pool="db"} 1.0',
            'tickwork_pool_limit{pool="*"} 10.0',
            'tickwork_pool_running{pool="*"} 2.0',
        ):
            assert line in text.splitlines()
    finally:
        store.close()
    assert now


# -- fairness: a busy pool starves no job (issue 39) ---------------------------------


def _contend(ds: list[DurableScheduler], clock: FakeClock, seconds: float) -> None:
    """Step the nodes in turn for ``seconds`` of fake time; their runs go inline."""
    end = clock.wall() + seconds
    while clock.wall() < end:
        waits = [d.step() for d in ds]
        clock.advance(min(0.25, max(0.01, min(waits))))


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_busy_pool_runs_every_job_in_turn_and_drops_nothing_within_grace(
    open_either_store: Callable[..., Any], durable_clock: FakeClock, nodes: int
) -> None:
    # The case: "a" takes 3 s and "b" 1 s, both every 2 s, in a pool of one.
    ds = [
        DurableScheduler(
            open_either_store(),
            executor=InlineExecutor(),
            wall_clock=durable_clock.wall,
            monotonic_clock=durable_clock,
            pools={"p": 1},
            allowed_modules=["tests.durable_jobs"],
        )
        for _ in range(nodes)
    ]
    for name, took in (("a", 3.0), ("b", 1.0)):
        ds[0].declare(JobSpec(name, SLOW, Every(2), args=[took], pool="p", grace=60.0))
    _contend(ds, durable_clock, 40.0)
    ran = [c[0][0] for c in durable_jobs.CALLS]
    # Each job gets the slot in turn: the one that waited longest goes next.
    assert ran == [3.0, 1.0] * (len(ran) // 2) + [3.0] * (len(ran) % 2)
    assert len(ran) >= 14
    outcomes = {s.outcome for s in ds[0].history("b")}
    assert "missed" not in outcomes and "ok" in outcomes
    # Slots that came due while an earlier one waited are skipped, not missed.
    assert outcomes <= {"ok", "skipped"}


def test_the_daemon_runs_both_jobs_of_a_busy_pool_and_shows_the_wait(tmp_path: Path) -> None:
    # The jobs file, quicker: "a" holds the pool longer than its period.
    from tests.test_daemon_e2e import Run, jobs_json, wait_until, write_jobs

    jobs = write_jobs(
        tmp_path,
        """
        [pool.p]
        limit = 1

        [[job]]
        name = "a"
        every = "1s"
        pool = "p"
        command = ["sleep", "1.5"]

        [[job]]
        name = "b"
        every = "1s"
        pool = "p"
        command = ["sleep", "0.5"]
        """,
    )
    run = Run(jobs, tmp_path / "state" / "s.sqlite3", "--log-format", "json")
    try:

        def records() -> list[dict[str, Any]]:
            return [json.loads(line) for line in list(run.lines) if line.startswith("{")]

        def waiting() -> bool:
            run.wait_line("running 2 jobs")  # the state exists
            return any(r["waiting_for"] == "pool p" for r in jobs_json(tmp_path).values())

        wait_until("a job shown waiting for pool p", waiting, 120.0)
        wait_until(
            "two runs of b",
            lambda: sum(r["event"] == "finished" and r["job"] == "b" for r in records()) >= 2,
            60.0,
        )
        # A slot that came due while its job's run waited for the pool is logged as
        # such, not as an overlap with a run that was not going.
        pooled = lambda: any(r.get("reason") == "pool" for r in records())  # noqa: E731
        wait_until("a slot skipped for the pool", pooled, 120.0)
    finally:
        run.stop()
    missed = [r for r in records() if r.get("reason") == "missed"]
    assert missed == [], missed  # within its grace (1 minute), no slot is dropped as late
    assert {r["job"] for r in records() if r["event"] == "finished"} == {"a", "b"}

    # No line says a slot was skipped that then ran (the run's own slot was named).
    def slots(event: str) -> set[tuple[str, str]]:
        return {(r["job"], r["scheduled"]) for r in records() if r.get("event") == event}

    assert not slots("skipped") & slots("started"), sorted(slots("skipped") & slots("started"))
