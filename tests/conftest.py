from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

import pytest

from tickwork import Scheduler
from tickwork.testing import FakeClock

from . import pg_server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sched(clock: FakeClock) -> Scheduler:
    return Scheduler(clock)


class Log(list[str]):
    """The contract's ``log`` (docs/concepts.md): ``log.job(name)`` appends ``name``."""

    def job(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.append(name)

        run.__qualname__ = f"job({name!r})"
        return run


@pytest.fixture
def log() -> Log:
    return Log()


# -- durable schedulers on a fake clock, on either store -----------------------------------

#: The wall-clock start of `durable_clock` (2023-11-14T22:13:20Z).
DURABLE_START = 1_700_000_000.0


@pytest.fixture
def durable_clock() -> Iterator[FakeClock]:
    """A fake clock at `DURABLE_START`, also the one ``tests.durable_jobs`` records by."""
    from . import durable_jobs

    c = FakeClock(wall_start=DURABLE_START)
    durable_jobs.CALLS.clear()
    durable_jobs.CLOCK = c
    yield c
    durable_jobs.CLOCK = None


@pytest.fixture(params=["sqlite", "postgres"])
def open_either_store(
    request: pytest.FixtureRequest, tmp_path: Any
) -> Iterator[Callable[..., Any]]:
    """Opens stores on one database (SQLite file, or PostgreSQL schema), all closed after."""
    from tickwork.stores.sqlite import SQLiteStore

    opened: list[Any] = []

    def open_store(**kw: Any) -> Any:
        if request.param == "sqlite":
            opened.append(SQLiteStore(tmp_path / "jobs.db", **kw))
        else:
            from tickwork.stores.postgres import PostgresStore

            dsn = request.getfixturevalue("pg_dsn")
            schema = request.getfixturevalue("pg_schema")
            opened.append(PostgresStore(dsn, schema=schema, **kw))
        return opened[-1]

    yield open_store
    for s in opened:
        s.close()


# -- PostgreSQL ---------------------------------------------------------------------------

PG_SKIP = "PostgreSQL tests skipped"
PG_HOWTO = (
    "install the PostgreSQL server (15 or later: initdb and pg_ctl, found on PATH, by"
    " pg_config --bindir or in /usr/lib/postgresql/*/bin) and the suite starts a throwaway"
    " server of its own; or set TICKWORK_PG_DSN=postgresql:///DBNAME to use a running one"
)


def _pg_required() -> bool:
    return os.environ.get("TICKWORK_REQUIRE_POSTGRES", "") == "1"


def _check_dsn(dsn: str) -> str | None:
    """None if ``dsn`` accepts a connection, else what is wrong."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]')"
    try:
        psycopg.connect(dsn, connect_timeout=10).close()
    except psycopg.Error as exc:
        from tickwork.stores.postgres import redact_dsn

        return f"cannot connect to {redact_dsn(dsn)!r}: {exc}"
    return None


def _no_postgres(problem: str) -> NoReturn:
    if _pg_required():
        pytest.fail(f"TICKWORK_REQUIRE_POSTGRES=1 but {problem}", pytrace=False)
    pytest.skip(f"{PG_SKIP}: {problem}; {PG_HOWTO}")


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The DSN of a PostgreSQL server the tests may use (create schemas, databases, roles).

    ``TICKWORK_PG_DSN`` names one. Without it the session (each pytest-xdist worker is a
    session) starts a throwaway server of its own (tests/pg_server.py: a temporary folder,
    a Unix socket, no TCP) the first time a test asks, and stops it at the end. Only where
    neither exists are the tests skipped (one summary line); ``TICKWORK_REQUIRE_POSTGRES=1``
    (set by .ci/run) turns that into a failure: CI must never pass by skipping the
    PostgreSQL store.
    """
    dsn = os.environ.get("TICKWORK_PG_DSN", "")
    if dsn:
        problem = _check_dsn(dsn)
        if problem:
            _no_postgres(problem)
        yield dsn
        return
    bindir = pg_server.find_bindir()
    if bindir is None:
        _no_postgres("TICKWORK_PG_DSN is not set and no PostgreSQL server binaries were found")
    keeper = subprocess.Popen(
        [sys.executable, pg_server.__file__, str(bindir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a Ctrl-C reaches pytest, whose teardown closes stdin
    )
    assert keeper.stdin is not None and keeper.stdout is not None
    try:
        status, _, detail = keeper.stdout.readline().strip().partition(" ")
        if status != "ready":
            keeper.wait(timeout=120)
            pytest.fail(
                f"could not start a throwaway PostgreSQL server from {bindir}:"
                f" {detail or 'the keeper process exited'} (or set TICKWORK_PG_DSN)",
                pytrace=False,
            )
        problem = _check_dsn(detail)
        if problem:
            pytest.fail(f"the throwaway PostgreSQL server: {problem}", pytrace=False)
        yield detail
    finally:
        keeper.stdin.close()  # the keeper stops the server and removes its folder
        try:
            keeper.wait(timeout=120)
        except subprocess.TimeoutExpired:
            keeper.terminate()
            keeper.wait(timeout=60)
        finally:
            keeper.stdout.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Fold "no PostgreSQL" skips into one short-summary line, not one per test."""
    report = yield
    longrepr = report.longrepr
    if (
        report.skipped
        and isinstance(longrepr, tuple)
        and len(longrepr) == 3
        and str(longrepr[2]).startswith(f"Skipped: {PG_SKIP}")
    ):
        report.longrepr = (__file__, _no_postgres.__code__.co_firstlineno, longrepr[2])
    return report


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, uniquely named schema for one test, dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"tw_test_{secrets.token_hex(6)}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def fresh_database(pg_dsn: str) -> Iterator[str]:
    """The DSN of a new, empty database (its ``public`` schema exists, as on any)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    name = f"tickwork_fresh_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        if "://" in pg_dsn:  # keep the URL form (tickwork run --database wants a URL)
            from urllib.parse import urlsplit

            parts = urlsplit(pg_dsn)
            query = f"?{parts.query}" if parts.query else ""
            yield f"{parts.scheme}://{parts.netloc}/{name}{query}"
        else:
            yield make_conninfo(pg_dsn, dbname=name)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


# -- the order files go out to the workers ---------------------------------------------------

#: The files with soak-tier tests (marked ``slow``), longest first. Their tests go out to
#: the workers one by one (`pytest_xdist_make_scheduler`), not as whole files: the two
#: stores' halves of a kill loop, or a file's three multi-node runs, then run side by side
#: instead of one after another on one worker while the others have finished. None of
#: them has module-scoped fixtures. A file with a ``slow`` test must be listed here.
SOAK_FILES = (
    "test_durable_postgres.py",
    "test_daemon_kills.py",
    "test_oneoff_kills.py",
    "test_durable_crash.py",
    "test_pg_failover.py",
    "test_pg_clock.py",
    "test_thread_soak.py",
)


@pytest.hookimpl(optionalhook=True)  # the wheel's core suite runs without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (`dev.py test`'s), with `SOAK_FILES` split into their tests."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SoakSplit(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path.rsplit("/", 1)[-1] in SOAK_FILES else path

    return SoakSplit(config, log)


#: Files of the fast tier that take the longest (real daemons, several nodes, browsers),
#: measured with ``--durations``: sent to the workers first, after the soak tier's, so no
#: worker starts one of them when the others are nearly done. Only an order: a file left
#: out of this list runs all the same.
HEAVY_FIRST = (
    "test_control_races.py",
    "test_scheduler_model.py",
    "test_daemon_e2e.py",
    "test_daemon_namespace.py",
    "test_liveness.py",
    "test_cli_backfill.py",
    "test_cli_file.py",
    "test_idle_cost.py",
    "test_cron.py",
    "test_daemon_jobkeys.py",
    "test_attempts.py",
    "test_calendars_daemon.py",
    "test_chains_e2e.py",
    "test_daemon_stall.py",
    "test_status_page.py",
    "test_pools_cluster.py",
)


#: pytest-timeout's limit for a soak-tier test (the others have pyproject's 300 s): a crash
#: loop took 220 s on 4 workers at a load near 15; only a hang should reach this.
SOAK_TIMEOUT = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Soak-tier files first (`SOAK_FILES`' order), then `HEAVY_FIRST`, then the rest.

    ``python3 dev.py test`` hands files to its workers in this order
    (``--no-loadscope-reorder``): the longest start first and the short ones fill in.
    Soak-tier tests get `SOAK_TIMEOUT` unless they set a timeout of their own.
    """
    soak = {item.path for item in items if item.get_closest_marker("slow")}
    unlisted = sorted(p.name for p in soak if p.name not in SOAK_FILES)
    if unlisted:
        raise pytest.UsageError(f"soak-tier files missing from SOAK_FILES (conftest): {unlisted}")
    soak_rank = {name: rank for rank, name in enumerate(SOAK_FILES)}
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SOAK_TIMEOUT))
    heavy = {name: rank for rank, name in enumerate(HEAVY_FIRST)}

    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.path in soak:
            return (0, soak_rank[item.path.name])
        return (1, heavy.get(item.path.name, len(heavy)))

    items.sort(key=rank)  # stable: files and tests keep their order within a rank


# -- CI refuses skips ------------------------------------------------------------------------


def _refuse_skips() -> bool:
    return os.environ.get("TICKWORK_REFUSE_SKIPS", "") == "1"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``TICKWORK_REFUSE_SKIPS=1`` (set by .ci/run) a skipped test fails the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if _refuse_skips() and skipped and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = len(terminalreporter.stats.get("skipped", []))
    if _refuse_skips() and skipped:
        terminalreporter.write_line(
            f"TICKWORK_REFUSE_SKIPS=1: {skipped} test(s) skipped, and CI runs every test",
            red=True,
            bold=True,
        )
