"""One-offs enqueued inside the app's own transaction (``connection=``), on PostgreSQL.

For each kind of connection an app holds (psycopg's connection and cursor, SQLAlchemy's
``Session`` and ``Connection`` on the psycopg driver, Django's ``connection`` under
``transaction.atomic()``): a rollback leaves nothing (no row, no run, no wake-up), a
commit runs the one-off once, and wakes a sleeping node. A keyed enqueue in two
concurrent transactions makes one row; a connection of another kind, or on another
database, is refused naming it; a SQLite store refuses ``connection=`` outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.django_pg import django_on
from tests.executors import ManualExecutor, drain
from tests.waiting import wait_until
from tickwork import DurableScheduler, Enqueued, OneOff
from tickwork.stores.postgres import PostgresStore
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

HERE = "tests.test_oneoffs_txn"
START = 1_700_000_000.0
CALLS: list[Any] = []
KINDS = ["psycopg", "psycopg-cursor", "sqlalchemy-session", "sqlalchemy-connection", "django"]


def note(x: Any) -> None:
    CALLS.append(x)


class Rollback(Exception):
    pass


#: ``app(kind)``: a context manager giving the object passed as ``connection=``; the
#: transaction commits when the block ends, and rolls back when it raises `Rollback`.
App = Callable[[str], contextlib.AbstractContextManager[Any]]


@pytest.fixture
def app(pg_dsn: str) -> Iterator[App]:
    closers: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def open_app(kind: str) -> Iterator[Any]:
        try:
            if kind.startswith("psycopg"):
                conn = psycopg.connect(pg_dsn)
                closers.append(conn.close)
                with conn.transaction():  # commits at the end, rolls back on Rollback
                    yield conn if kind == "psycopg" else conn.cursor()
            elif kind.startswith("sqlalchemy"):
                import sqlalchemy
                from sqlalchemy.orm import Session

                engine = sqlalchemy.create_engine(
                    pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1)
                )
                closers.append(engine.dispose)
                if kind == "sqlalchemy-session":
                    with Session(engine) as session, session.begin():
                        yield session
                else:
                    with engine.connect() as sa_conn, sa_conn.begin():
                        yield sa_conn
            else:
                connection, transaction = django_on(pg_dsn)
                closers.append(connection.close)
                with transaction.atomic():
                    yield connection
        except Rollback:
            pass

    yield open_app
    for close in closers:
        close()


Made = tuple[DurableScheduler, ManualExecutor, FakeClock, PostgresStore]


@pytest.fixture
def made(pg_dsn: str, pg_schema: str) -> Iterator[Made]:
    CALLS.clear()
    clock = FakeClock(wall_start=START)
    store = PostgresStore(pg_dsn, schema=pg_schema)
    pool = ManualExecutor()
    ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall)
    yield ds, pool, clock, store
    store.close()


def _rows(store: PostgresStore) -> int:
    return int(
        store._run(
            "count",
            lambda cur: cur.execute("SELECT COUNT(*) FROM tickwork_jobs").fetchone()[0],
            write=False,
        )
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_rollback_leaves_nothing_and_a_commit_runs_it_once(
    made: Made, app: App, kind: str
) -> None:
    ds, pool, clock, store = made
    with app(kind) as conn:
        gone = ds.enqueue(note, "rolled back", connection=conn)
        raise Rollback
    with app(kind) as conn:
        kept = ds.enqueue(note, "committed", key=f"k-{kind}", connection=conn)
        assert _rows(store) == 0  # not visible before the commit
    assert kept.created and kept.id == f"~key:k-{kind}"
    drain(ds, pool)
    clock.advance(60)
    drain(ds, pool)
    assert CALLS == ["committed"]
    assert [e.outcome for e in store.history(kept.id)] == ["ok"]
    assert store.history(gone.id) == [] and ds.get(gone.id) is None
    assert _rows(store) == 0


def test_the_one_off_commits_and_rolls_back_with_the_apps_own_write(
    made: Made, app: App, pg_schema: str
) -> None:
    ds, pool, _, _ = made
    orders = f'"{pg_schema}".orders'
    with app("psycopg") as conn:
        conn.execute(f"CREATE TABLE {orders} (id int PRIMARY KEY)")
    for order, commit in [(1, False), (2, True)]:
        with app("psycopg") as conn:
            conn.execute(f"INSERT INTO {orders} VALUES (%s)", (order,))
            ds.enqueue(note, order, connection=conn)
            if not commit:
                raise Rollback
    drain(ds, pool)
    with app("psycopg") as conn:
        assert conn.execute(f"SELECT id FROM {orders}").fetchall() == [(2,)]
    assert CALLS == [2]


def test_an_app_cursor_keeps_its_own_result(made: Made, app: App) -> None:
    ds = made[0]
    with app("psycopg-cursor") as cur:
        cur.execute("SELECT 41 + 1")
        ds.enqueue(note, 1, connection=cur)
        assert cur.fetchall() == [(42,)]


def test_an_app_connection_with_its_own_row_factory(made: Made, pg_dsn: str) -> None:
    from psycopg.rows import dict_row

    ds, pool, _, _ = made
    with psycopg.connect(pg_dsn, row_factory=dict_row) as conn:  # commits at the end
        refs = ds.enqueue_many(
            [OneOff(note, ("a",), key="a"), OneOff(note, ("b",))], connection=conn
        )
        again = ds.enqueue(note, "a2", key="a", connection=conn)
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    assert [r.created for r in [*refs, again]] == [True, True, False]
    drain(ds, pool)
    assert sorted(CALLS) == ["a", "b"]


def _listener(store: PostgresStore, pg_dsn: str) -> psycopg.Connection[Any]:
    listen = psycopg.connect(pg_dsn, autocommit=True)
    listen.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(store.channel)))
    return listen


def _heard_until_marker(
    listen: psycopg.Connection[Any], store: PostgresStore, pg_dsn: str
) -> list[str]:
    """The payloads announced on the store's channel, up to a marker sent now.

    Notifications arrive in commit order: whatever a transaction that ended before the
    marker announced comes before it.
    """
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, 'marker')", (store.channel,))
    heard: list[str] = []
    while "marker" not in heard:
        heard += [n.payload for n in listen.notifies(timeout=60, stop_after=1)]
    return heard


def test_a_rollback_wakes_no_node_and_a_commit_does(made: Made, app: App, pg_dsn: str) -> None:
    ds, _, _, store = made
    with contextlib.closing(_listener(store, pg_dsn)) as listen:
        with app("psycopg") as conn:
            ds.enqueue(note, 1, connection=conn)
            raise Rollback
        assert _heard_until_marker(listen, store, pg_dsn) == ["marker"]
        assert not ds._table.poked  # nor this node, woken by the commit's announcement alone
        with app("psycopg") as conn:
            ds.enqueue_many([OneOff(note, (2,)), OneOff(note, (3,))], connection=conn)
        assert _heard_until_marker(listen, store, pg_dsn) == ["enqueued", "marker"]
        ds.enqueue(note, 4)  # on the store's connection: this node looks at once
        assert ds._table.poked


def test_a_commit_wakes_a_sleeping_scheduler(pg_dsn: str, pg_schema: str, app: App) -> None:
    """No safety poll in sight: only the commit's announcement can start the run."""
    CALLS.clear()
    with (
        PostgresStore(pg_dsn, schema=pg_schema) as store,
        DurableScheduler(store, poll=3600) as ds,
    ):
        wait_until("the scheduler to listen", lambda: store._listen_conn is not None)
        # Its first wake-up's look may have ended before the wait above saw the listener:
        # one more look, surely after it, and then it sleeps (for an hour).
        poked = time.monotonic()
        ds._table.poke()
        wait_until(
            "a look after it listens",
            lambda: (
                (ds.health().last_look_age or 1e9) < time.monotonic() - poked and not ds._table.wake
            ),
        )
        with app("psycopg") as conn:
            ds.enqueue(note, "woken", connection=conn)
        wait_until("the one-off to run", lambda: CALLS == ["woken"])


def test_one_key_in_two_concurrent_transactions_makes_one_row(
    made: Made, app: App, pg_dsn: str
) -> None:
    ds, pool, _, store = made
    second: list[Enqueued] = []
    with app("psycopg") as first_conn:
        first = ds.enqueue(note, "first", key="order-9", connection=first_conn)
        pid = first_conn.info.backend_pid

        def other() -> None:
            with app("psycopg") as conn:
                second.append(ds.enqueue(note, "second", key="order-9", connection=conn))

        thread = threading.Thread(target=other)
        thread.start()
        with psycopg.connect(pg_dsn, autocommit=True) as watch:
            wait_until(
                "the second transaction to wait for the first's row",
                lambda: watch.execute(
                    "SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " WHERE NOT l.granted AND %s = ANY(pg_blocking_pids(a.pid))",
                    (pid,),
                ).fetchone(),
            )
    thread.join(timeout=120)
    assert first.created and [s.created for s in second] == [False]
    assert _rows(store) == 1
    drain(ds, pool)
    assert CALLS == ["first"]


def test_a_connection_of_another_kind_is_refused_naming_it(
    made: Made, app: App, tmp_path: Path, pg_dsn: str
) -> None:
    ds, _, _, store = made
    with (
        pytest.raises(
            TypeError,
            match=r"connection must be a psycopg connection or cursor, a SQLAlchemy Session"
            r" or Connection, or Django's connection, on PostgreSQL, got a"
            r" sqlite3.Connection: <sqlite3",
        ),
        contextlib.closing(sqlite3.connect(tmp_path / "app.db")) as lite,
    ):
        ds.enqueue(note, 1, connection=lite)
    with pytest.raises(TypeError, match=r"got a builtins.str: 'postgresql://'"):
        ds.enqueue(note, 1, connection="postgresql://")
    import sqlalchemy
    from sqlalchemy.orm import Session

    lite_engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with (
        Session(lite_engine) as session,
        pytest.raises(TypeError, match=r"got a SQLAlchemy connection to 'sqlite'"),
    ):
        ds.enqueue(note, 1, connection=session)
    with pytest.raises(TypeError, match=r"got a sqlalchemy.engine.base.Engine"):
        ds.enqueue(note, 1, connection=lite_engine)
    lite_engine.dispose()

    async def refuse_async() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as aconn:
            with pytest.raises(TypeError, match=r"got a psycopg.AsyncConnection: <psycopg"):
                ds.enqueue(note, 1, connection=aconn)

    asyncio.run(refuse_async())
    assert _rows(store) == 0


def test_a_sqlite_store_refuses_connection(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "jobs.db") as store:
        ds = DurableScheduler(store)
        with (
            contextlib.closing(sqlite3.connect(tmp_path / "app.db")) as lite,
            pytest.raises(
                ValueError,
                match=r"connection must be None on a SQLite store \('.*jobs.db'\): its state is"
                r" written by the store's own connection only .*, got connection=<sqlite3",
            ),
        ):
            ds.enqueue(note, 1, connection=lite)
        assert ds.oneoffs() == []
