from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator

import pytest

from tickwork import Scheduler
from tickwork.testing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sched(clock: FakeClock) -> Scheduler:
    return Scheduler(clock)


class Log(list[str]):
    """The SPEC's ``log``: ``log.job(name)`` is a job that appends ``name``."""

    def job(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.append(name)

        run.__qualname__ = f"job({name!r})"
        return run


@pytest.fixture
def log() -> Log:
    return Log()


# -- PostgreSQL ---------------------------------------------------------------------------

PG_HOWTO = (
    "start PostgreSQL (15 or later), create a database (createdb tickwork_test) and set"
    " TICKWORK_PG_DSN=postgresql:///tickwork_test to run them (.ci/run does all of this)"
)


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The DSN of a reachable PostgreSQL server; skips (or fails in CI) without one.

    ``TICKWORK_REQUIRE_POSTGRES=1`` (set by .ci/run) turns a missing server into a failure:
    CI must never pass by skipping the PostgreSQL store.
    """
    dsn = os.environ.get("TICKWORK_PG_DSN", "")
    required = os.environ.get("TICKWORK_REQUIRE_POSTGRES", "") == "1"
    problem = "TICKWORK_PG_DSN is not set"
    if dsn:
        try:
            import psycopg
        except ImportError:
            problem = "psycopg is not installed (pip install -e '.[dev]')"
        else:
            try:
                psycopg.connect(dsn, connect_timeout=5).close()
                return dsn
            except psycopg.Error as exc:
                from tickwork.stores.postgres import redact_dsn

                problem = f"cannot connect to {redact_dsn(dsn)!r}: {exc}"
    if required:
        pytest.fail(f"TICKWORK_REQUIRE_POSTGRES=1 but {problem}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {problem}; {PG_HOWTO}")


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
