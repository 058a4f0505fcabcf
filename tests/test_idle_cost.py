"""What an idle node costs does not depend on how many jobs the state holds (issue 25).

An idle `DurableScheduler` (every job due hours from now) is stepped over a fixed
stretch of fake time, on a state of few jobs and on one of many, and every statement it
sends is counted: the same statements, as many of them, and fewer transactions than
seconds passed. The dead-man watch of a daemon whose jobs have no ``alert_if_*`` key
reads nothing, and one that watches a job reads the same for few jobs as for many.
"""

from __future__ import annotations

import collections
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tickwork import AlertRules, AlertWatch, At, DurableScheduler
from tickwork.stores import JobSpec
from tickwork.testing import FakeClock, InlineExecutor

#: Fake seconds an idle node is watched for (30 of its 10-s polls on PostgreSQL).
WINDOW = 300.0
#: The job counts compared: few, and many.
FEW, MANY = 10, 2000
#: The jobs are due this long after the window starts.
HOURS_AWAY = 5 * 3600.0

_NUMBERS = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
#: The store's look for nodes that are gone, made at most every 0.25 s of *real* time
#: inside a claim's transaction: how many the fake window holds depends on how fast the
#: machine steps through it, so it is left out of the comparison (it reads the node
#: list, never the jobs).
_REAL_TIME_GATED = ("SELECT n.owner, EXISTS", "SELECT owner, pid, started, EXISTS")


class Counter:
    """What a store sends and what it costs the database.

    ``statements``: by text, numbers taken out; ``transactions``: ended (committed or
    rolled back); ``work``: rows the statements returned (PostgreSQL), or hundreds of
    SQLite virtual-machine steps (a scan of the jobs shows up in both, an indexed look
    does not).
    """

    def __init__(self) -> None:
        self.on = False
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions = 0
        self.work = 0

    def statement(self, text: str) -> None:
        if not self.on:
            return
        text = _NUMBERS.sub("N", re.sub(r"\s+", " ", text).strip())
        if text.startswith(_REAL_TIME_GATED):
            return
        self.statements[text] += 1
        if text.upper() in ("COMMIT", "ROLLBACK"):
            self.transactions += 1

    def ended(self) -> None:
        if self.on:
            self.transactions += 1

    def worked(self, amount: int = 1) -> int:
        if self.on:
            self.work += amount
        return 0  # SQLite's progress handler: go on

    def reset(self) -> None:
        self.statements.clear()
        self.transactions = 0
        self.work = 0

    def result(self) -> tuple[collections.Counter[str], int, int]:
        return collections.Counter(self.statements), self.transactions, self.work


@pytest.fixture(params=["sqlite", "postgres"])
def counted_store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> Iterator[tuple[str, Callable[[], Any], Counter]]:
    """``(kind, open a store on one fresh database, its statement counter)``."""
    counter = Counter()
    opened: list[Any] = []
    if request.param == "sqlite":
        from tickwork.stores.sqlite import SQLiteStore

        connect = sqlite3.connect

        def traced(*args: Any, **kw: Any) -> sqlite3.Connection:
            conn = connect(*args, **kw)
            conn.set_trace_callback(counter.statement)
            conn.set_progress_handler(counter.worked, 100)
            return conn

        monkeypatch.setattr(sqlite3, "connect", traced)

        def open_store() -> Any:
            opened.append(SQLiteStore(tmp_path / "jobs.db"))
            return opened[-1]

    else:
        psycopg = pytest.importorskip("psycopg")
        from tickwork.stores.postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
        commit, rollback = psycopg.Connection.commit, psycopg.Connection.rollback

        def counting(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
            text = query if isinstance(query, str) else repr(query)
            counter.statement(text)
            cur = execute(self, query, *args, **kw)
            if not re.sub(r"\s+", " ", text).strip().startswith(_REAL_TIME_GATED):
                counter.worked(max(self.rowcount, 0) if self.description else 0)
            return cur

        def counting_many(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
            counter.statement("(many) " + (query if isinstance(query, str) else repr(query)))
            return executemany(self, query, *args, **kw)

        def ending(method: Any) -> Any:
            def end(self: Any) -> Any:
                counter.ended()
                return method(self)

            return end

        monkeypatch.setattr(psycopg.Cursor, "execute", counting)
        monkeypatch.setattr(psycopg.Cursor, "executemany", counting_many)
        monkeypatch.setattr(psycopg.Connection, "commit", ending(commit))
        monkeypatch.setattr(psycopg.Connection, "rollback", ending(rollback))

        def open_store() -> Any:
            opened.append(PostgresStore(dsn, schema=schema))
            return opened[-1]

    yield request.param, open_store, counter
    for store in opened:
        store.close()


def _declare(store: Any, jobs: int, due: float) -> None:
    for i in range(jobs):
        store.upsert(JobSpec(f"idle{i:05}", "tests.durable_jobs:record", At(due)), due)


def idle_node_cost(
    open_store: Callable[[], Any], counter: Counter, jobs: int
) -> tuple[collections.Counter[str], int, int]:
    """`Counter.result` of one idle node over `WINDOW` fake seconds.

    The node runs at its defaults but for its clocks, both fake (the database's clock
    would not follow the fake one: the node would see a wall-clock step every time it
    reads it). Its first look (start-up) is not counted; the looks after it are, each
    made when the previous one said to.
    """
    clock = FakeClock(wall_start=time.time())
    store = open_store()
    _declare(store, jobs, clock.wall() + HOURS_AWAY)
    ds = DurableScheduler(
        store,
        owner="idle-node",
        executor=InlineExecutor(),
        wall_clock=clock.wall,
        monotonic_clock=clock,
        allowed_modules=["tests.durable_jobs"],
    )
    ds.step()  # start-up: the first look, not counted
    counter.reset()
    counter.on = True
    end = clock() + WINDOW
    while (left := end - clock()) > 0:
        clock.advance(min(left, max(ds.step(), 0.001)))
    counter.on = False
    result = counter.result()
    assert ds.running() == {}  # nothing was due: it stayed idle
    ds.stop()
    return result


def test_an_idle_node_sends_the_same_for_few_jobs_as_for_many(
    counted_store: tuple[str, Callable[[], Any], Counter],
) -> None:
    """Issue 25: an idle node's statements do not grow with the job count; < 1 tx/s."""
    _, open_store, counter = counted_store
    few, few_tx, few_work = idle_node_cost(open_store, counter, FEW)
    store = open_store()  # the same database, grown to MANY jobs
    _declare(store, MANY, time.time() + HOURS_AWAY)
    many, many_tx, many_work = idle_node_cost(open_store, counter, 0)
    assert sum(few.values()) > 0  # it did look, every poll
    assert many == few, "an idle node's statements changed with the job count"
    assert many_tx == few_tx
    assert many_tx < WINDOW  # fewer than one transaction per second of (fake) time
    # Rows read back / SQLite steps: a look that scanned the jobs would read 2,000 more
    # each time (a few steps of slack: SQLite's B-trees are a level deeper).
    assert many_work <= few_work * 1.2 + 20, (few_work, many_work)


def test_a_dead_man_watch_reads_nothing_without_rules_and_the_same_with_many_jobs(
    counted_store: tuple[str, Callable[[], Any], Counter],
) -> None:
    """No ``alert_if_*`` key: no read. One watched job: the same read for 10 or 2,000 jobs.

    A job watched later (a reload that adds the keys) is read from its next look on;
    400 watched jobs are read in as many statements as one.
    """
    _, open_store, counter = counted_store
    store = open_store()
    due = time.time() + HOURS_AWAY
    _declare(store, FEW, due)
    watch = AlertWatch(store, on_alert=lambda alert: None, owner="idle-node")

    def looks() -> tuple[collections.Counter[str], int]:
        counter.reset()
        counter.on = True
        for _ in range(5):
            assert watch.check() == []
        counter.on = False
        statements, transactions, _ = counter.result()
        return statements, transactions

    assert looks() == (collections.Counter(), 0)  # nothing watched: nothing read
    watch.watch("idle00003", AlertRules(no_success=3600.0, missed=True))
    few = looks()
    assert sum(few[0].values()) > 0  # the job watched later is read
    _declare(store, MANY, due)
    assert looks() == few
    rules = AlertRules(no_success=3600.0, missed=True, late=60.0, running=600.0)
    for i in range(400):
        watch.watch(f"idle{i:05}", rules)
    statements, transactions = looks()  # 400 jobs watched: read in as many statements
    assert (sum(statements.values()), transactions) == (sum(few[0].values()), few[1])
    for i in range(400):
        watch.unwatch(f"idle{i:05}")
    assert looks() == (collections.Counter(), 0)


def test_watched_facts_read_in_chunks_are_each_jobs_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The facts of many watched jobs, read a chunk at a time, are what each job's are."""
    from tickwork.stores import _alerts
    from tickwork.stores.sqlite import SQLiteStore

    monkeypatch.setattr(_alerts, "FACTS_CHUNK", 3)
    with SQLiteStore(tmp_path / "jobs.db") as store:
        _declare(store, 10, time.time() + HOURS_AWAY)
        store.pause_job("idle00004", by="test", at=time.time())
        episodes = _alerts.AlertEpisodes(store)
        ids = [f"idle{i:05}" for i in reversed(range(10))] + ["gone", "idle00002"]
        facts = episodes.facts(ids)
        assert list(facts) == [f"idle{i:05}" for i in reversed(range(10))]
        assert facts == {job_id: episodes.facts([job_id])[job_id] for job_id in facts}
        assert facts["idle00004"].paused and not facts["idle00005"].paused


def test_a_metrics_scrape_reads_as_much_for_few_jobs_as_for_many(
    counted_store: tuple[str, Callable[[], Any], Counter],
) -> None:
    """A scrape reads the newest ledger entries at once; only a failing job is read back.

    The gauges are what each job's own ledger says (`failure_streak`).
    """
    from prometheus_client import generate_latest

    from tickwork import Every
    from tickwork.metrics import SchedulerMetrics
    from tickwork.stores._streak import failure_streak

    _, open_store, counter = counted_store
    clock = FakeClock(wall_start=time.time())
    store = open_store()
    ds = DurableScheduler(
        store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
    )
    ds.declare(JobSpec("report", "tests.durable_jobs:record", Every(10)))
    ds.declare(JobSpec("bad", "tests.durable_jobs:boom", Every(10)))
    for _ in range(3):
        clock.advance(10)
        ds.step()
    _declare(store, FEW, clock.wall() + HOURS_AWAY)
    metrics = SchedulerMetrics()
    metrics.watch(ds)

    def scrape() -> tuple[int, int]:
        counter.reset()
        counter.on = True
        generate_latest(metrics.registry)
        counter.on = False
        statements, transactions, _ = counter.result()
        return sum(statements.values()), transactions

    def gauge(name: str, job: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"job": job})

    few = scrape()
    assert gauge("tickwork_failure_streak", "bad") == failure_streak(ds, "bad")[0] == 3
    assert gauge("tickwork_failure_streak", "report") == 0
    assert gauge("tickwork_failure_streak", "idle00003") == 0
    ok = failure_streak(ds, "report")[1]
    assert ok is not None and ok.ended is not None
    assert gauge("tickwork_state_last_success_timestamp_seconds", "report") == ok.ended
    assert gauge("tickwork_state_last_success_timestamp_seconds", "idle00003") is None
    _declare(store, 400, clock.wall() + HOURS_AWAY)
    assert scrape() == few  # 400 jobs more: not one statement more
    assert gauge("tickwork_failure_streak", "idle00399") == 0
