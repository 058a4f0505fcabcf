"""PostgresStore: the store contract, plus what only a shared PostgreSQL server has to prove."""

from __future__ import annotations

import contextlib
import logging
import secrets
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (pip install -e '.[dev]')"
)

from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402

from tickwork import At, Every  # noqa: E402
from tickwork.stores import (  # noqa: E402
    JobSpec,
    JobState,
    LastRun,
    SchemaVersionError,
    Store,
    StoreError,
    Upsert,
)
from tickwork.stores import _looks as looks_mod  # noqa: E402
from tickwork.stores import _pgschema as pgschema_mod  # noqa: E402
from tickwork.stores import postgres as pg_mod  # noqa: E402
from tickwork.stores.contract import ChangeNotifier, Finish, Start, spec_to_json  # noqa: E402
from tickwork.stores.postgres import PostgresStore, redact_dsn  # noqa: E402

from .pool_contract import PoolContract  # noqa: E402
from .store_contract import LEASE, StoreContract, claim, counts, once, oneoff, spec  # noqa: E402
from .waiting import wait_until  # noqa: E402


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def open_store(self, pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., Store]]:
        opened: list[PostgresStore] = []

        def open_store(**kw: Any) -> Store:
            opened.append(PostgresStore(pg_dsn, schema=pg_schema, **kw))
            return opened[-1]

        yield open_store
        for s in opened:
            s.close()


class TestPostgresPools(PoolContract):
    open_store = TestPostgresContract.open_store


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement psycopg executes from here on, as text (``executemany`` apart)."""
    seen: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
        seen.append(str(query))
        return execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    return seen


def test_a_claim_reads_no_limit_rows_when_the_state_has_none(
    open_pg: Callable[..., PostgresStore], statements: list[str]
) -> None:
    """A state without pools pays no statement for them: the claim's own re-read says so.

    With a limit declared, the gate reads (and locks) the limit rows again, and keeps to
    them, for due runs and for re-offered ones alike.
    """
    store = open_pg()
    reads = lambda: sum("SELECT name, lim FROM tickwork_pools" in q for q in statements)  # noqa: E731
    for i in range(3):
        store.upsert(spec(f"p{i}", pool="db"), 100.0)
    got = claim(store, 100.0)
    assert len(got) == 3 and reads() == 0
    store.finish(got[0], outcome="ok", ended=100.5)
    store.set_pool_limit("db", 1)  # type: ignore[attr-defined]
    statements.clear()
    assert claim(store, 110.0) == [] and reads() == 1  # two still hold the pool's slots
    for c in got[1:]:
        store.finish(c, outcome="ok", ended=111.0)
    statements.clear()
    assert len(claim(store, 120.0)) == 1 and reads() == 1


def test_a_sparse_claim_is_five_statements_and_its_writes_one(
    open_pg: Callable[..., PostgresStore], statements: list[str]
) -> None:
    """A claim asks once which chores can find anything, and writes its batch at once.

    (Issue 25.) One read for ended pauses, ended leases and waiting runs
    (`LookUpkeep`); the due rows locked once when fewer than asked for are due, then
    re-read; no read of the claims held unless a job allows overlap; the claims and
    the jobs' next runs in one set-based statement, however many; the next wake-up.
    """
    store = open_pg()
    for i in range(3):
        store.upsert(spec(f"j{i}", At(100.0)), 100.0)
    store.upsert(spec("later", At(200.0)), 200.0)
    statements.clear()
    taken = claim(store, 100.0, advance=once)
    assert sorted(c.job_id for c in taken) == ["j0", "j1", "j2"]
    heads = [
        " ".join(q.split()[:4])
        for q in statements
        # Not the session's setting, the look's announcement, the liveness check.
        if not any(word in q for word in ("set_config", "pg_notify", "SELECT n.owner"))
    ]
    assert heads == [
        "SELECT (SELECT min(paused_until) FROM",  # the chores
        "SELECT j.id FROM tickwork_jobs",  # lock the due rows (once: fewer than asked)
        "SELECT id, spec, paused,",  # re-read them
        "WITH taken AS (INSERT",  # the claims, and the next runs moved
        "SELECT (SELECT j.next_run FROM",  # the next wake-up
    ]
    states = {s.id: s for s in store.jobs()}
    assert [states[f"j{i}"].next_run for i in range(3)] == [None] * 3
    assert states["later"].next_run == 200.0
    assert {(c.owner, c.scheduled, c.started) for c in taken} == {("A", 100.0, None)}
    # The claims are there, each once: a second claim finds nothing due.
    assert claim(store, 100.0, advance=once) == []


def test_no_claim_statement_scans_the_jobs_table(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    """A claim's cost does not grow with the jobs it does not take, nor a finish's.

    psycopg prepares a statement run often, and the server then plans it once for any
    parameters (a generic plan) if that looks no worse; such a plan must not scan
    every job. The claim's set-based write, joined with its list of jobs, did: once per
    look, from the tenth claim on (issue 25); so did the lock of the job rows whose
    leases ended, once per recovery.
    """
    open_pg().upsert(spec("j0000", At(100.0)), 100.0)  # the tables, and one job's row
    jobs = sql.Identifier(pg_schema, "tickwork_jobs")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(  # 1,999 copies of its row, each under another id
                "INSERT INTO {0} SELECT (jsonb_populate_record(NULL::{0}, to_jsonb(j)"
                " || jsonb_build_object('id', 'j' || lpad(i::text, 4, '0')))).*"
                " FROM {0} j, generate_series(1, 1999) i"
            ).format(jobs)
        )

    def scans() -> int:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(jobs))  # the planner sees 2,000 jobs
            row = conn.execute(
                "SELECT seq_scan FROM pg_stat_user_tables"
                " WHERE schemaname = %s AND relname = 'tickwork_jobs'",
                (pg_schema,),
            ).fetchone()
        assert row is not None
        return int(row[0])

    store = open_pg()
    for i in range(1000, 1050):  # runs waiting unowned: the claims take them first
        assert store.trigger_job(f"j{i}", by="op", at=99.0, note=None) == "queued"
    store.close()
    before = scans()
    store = open_pg()
    taken = [c for _ in range(20) for c in claim(store, 100.0, advance=once, limit=5)]
    assert len({c.token for c in taken}) == 100
    assert sum(c.origin == "manual" for c in taken) == 50
    store.close()  # its session ends, and its statistics are written
    assert scans() == before
    # Leases ending, a few at a time, recovered by key through statements prepared in
    # their turn. (All 100 at once may be planned as a scan: that many rows is no
    # longer a few by key. It happens once, here, and is not counted.)
    store = open_pg()
    assert len(store.recover_expired(100.0 + LEASE + 1.0)) == 100
    store.close()
    before = scans()
    store = open_pg()
    for i in range(10):
        ended = 200.0 + 100.0 * i
        assert len(claim(store, ended, advance=once, lease_seconds=1.0, limit=5)) == 5
        assert len(store.recover_expired(ended + 2.0)) == 5
    store.close()
    assert scans() == before
    # Finishes, item by item (two at a time) and set-based (eight).
    store = open_pg()
    for i in range(10):
        now = 2000.0 + 10.0 * i
        ten = [Finish(c, "ok", now + 1.0) for c in claim(store, now, advance=once, limit=10)]
        assert len(ten) == 10
        assert store.record([], ten[:2]) == ([], [True] * 2)
        assert store.record([], ten[2:]) == ([], [True] * 8)
    store.close()
    assert scans() == before


def test_a_look_does_not_scan_the_claims_it_does_not_touch(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    """A look's cost does not grow with the runs in flight, nor its wake-up's with the jobs.

    A due job is claimable unless it holds a claim (and does not allow overlap). Written
    as ``overlap = 'allow' OR NOT EXISTS (...)``, the server ran the ``NOT EXISTS`` as a
    hashed subplan: a scan of every claim at every look (1.7-11.8 ms with 3,000 one-offs
    running). It is now a probe of the claims' job index for each due job the look
    passes, in the generic plans the looks are prepared with. The wake-up read's earliest
    claimable time, a join since, must walk the due index, not every job.
    """
    store = open_pg()
    store.enqueue([oneoff(f"run{i:04}", 100.0) for i in range(1500)])
    store.enqueue([oneoff(f"due{i:04}", 191.0 + 2.0 * i) for i in range(200)])
    store.upsert(spec("every", Every(10.0)), 100.0)
    held = [c for _ in range(16) for c in claim(store, 100.0, advance=once, lease_seconds=1e6)]
    assert len(held) == 1501  # left running: 1,501 claims held
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for table in ("tickwork_claims", "tickwork_jobs"):
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(pg_schema, table)))

    def scans() -> dict[str, int]:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT relname, seq_scan FROM pg_stat_user_tables WHERE schemaname = %s"
                " AND relname IN ('tickwork_claims', 'tickwork_jobs')",
                (pg_schema,),
            ).fetchall()
        return {name: int(n) for name, n in rows}

    def looks(times: range, *, wakeups: bool) -> None:
        store = open_pg()
        for i in times:  # past psycopg's threshold: prepared, then generic plans
            now = 200.0 + 10.0 * i
            got = claim(store, now, owner="B", advance=once, limit=5, lease_seconds=1e6)
            assert len(got) == 5
            if wakeups:
                assert store.next_wakeup() == now + 1.0  # the next one-off not taken
        store.close()  # its session ends, and its statistics are written

    looks(range(1), wakeups=False)  # B's first claim (its own past is read once)
    before = scans()
    looks(range(1, 13), wakeups=False)
    assert scans()["tickwork_claims"] == before["tickwork_claims"]
    before = scans()
    looks(range(13, 25), wakeups=True)
    assert scans()["tickwork_jobs"] == before["tickwork_jobs"]


def test_a_prepared_statement_is_planned_once_not_at_each_run(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """Every connection of a store keeps its prepared statements' generic plans.

    Left to itself, the server plans a prepared statement with a list parameter again
    at every execution (its generic plan guesses a longer list, so it looks dearer):
    at sparse rates, the re-read of a look's rows, the claims' write and a batch's lock
    were planned at every look and finish (issue 25). Each statement below runs more
    often than psycopg's threshold for preparing it.
    """
    store = open_pg()
    for i in range(8):
        store.upsert(spec(f"j{i}", Every(10.0)), 100.0)
    for i in range(8):
        now = 100.0 + 10.0 * i
        taken = claim(store, now, advance=lambda s, n: n + 10.0, limit=8)
        assert len(taken) == 8
        finishes = [Finish(c, "ok", now + 1.0) for c in taken]
        assert store.record([], finishes[:2]) == ([], [True] * 2)  # item by item
        assert store.record([], finishes[2:]) == ([], [True] * 6)  # set-based
    plans: dict[str, dict[str, tuple[int, int]]] = {}
    for lane in ("_conn", "_rec_conn"):  # the looks', and the batches'
        conn = getattr(store, lane)
        assert conn is not None, lane
        with conn.transaction():
            rows = conn.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            ).fetchall()
        plans[lane] = {q: (generic, custom) for q, generic, custom in rows}
        assert [q[:60] for q, (_, custom) in plans[lane].items() if custom] == [], lane
    # The statements planned at every run before: each prepared, with its one plan reused.
    heads = {"_conn": ["SELECT id, spec,", "WITH taken AS"], "_rec_conn": ["SELECT id, overlap"]}
    for lane, wanted in heads.items():
        for head in wanted:
            used = [g for q, (g, _) in plans[lane].items() if q.startswith(head)]
            assert used and used[0] >= 3, (lane, head, plans[lane])


def test_no_statement_is_jit_compiled(open_pg: Callable[..., PostgresStore]) -> None:
    """A look's generic plan over a large state must not be compiled at each execution.

    The plan guesses ``next_run <= $1`` to match a third of the table: past
    ``jit_above_cost`` (a million pending one-offs), the server compiled every look.
    """
    store = open_pg()
    store.upsert(spec("j", Every(10.0)), 100.0)
    assert len(claim(store, 100.0, advance=lambda s, n: n + 10.0)) == 1
    for lane in ("_conn", "_rec_conn"):
        conn = getattr(store, lane)
        if conn is None:  # the batches' connection opens with the first batch
            continue
        with conn.transaction():
            assert conn.execute("SHOW jit").fetchone() == ("off",), lane
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)


def test_a_plain_batch_is_recorded_in_three_statements(
    open_pg: Callable[..., PostgresStore], statements: list[str]
) -> None:
    """Starts and finishes of a plain batch go set-based, however many (stores/_pgbatch.py).

    A batch the set-based statements do not cover (a slot handed back) goes item by item.
    """
    store = open_pg()
    for i in range(6):
        store.upsert(spec(f"j{i}"), 100.0)
    claims = claim(store, 100.0)
    statements.clear()
    starts = [Start(c, 100.5) for c in claims[:5]]
    finishes = [Finish(c, "ok", 101.0) for c in claims[:5]]
    assert store.record(starts, finishes) == ([True] * 5, [True] * 5)
    statements[:] = [q for q in statements if "set_config" not in q]  # a new connection's
    assert len(statements) == 3
    statements.clear()
    assert store.record([], [Finish(claims[5], "cancelled", 101.0)]) == ([], [True])
    assert len(statements) > 1 and not any("jsonb_array_elements" in q for q in statements)
    assert len(store.history()) == 5


# -- helpers ------------------------------------------------------------------------------


@pytest.fixture
def open_pg(pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., PostgresStore]]:
    opened: list[PostgresStore] = []

    def open_pg(**kw: Any) -> PostgresStore:
        kw.setdefault("schema", pg_schema)
        opened.append(PostgresStore(kw.pop("dsn", pg_dsn), **kw))
        return opened[-1]

    yield open_pg
    for s in opened:
        s.close()


def admin(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def rows(dsn: str, schema: str, query: str) -> list[tuple[Any, ...]]:
    with admin(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def old_job(dsn: str, schema: str, job: JobSpec, next_run: float) -> None:
    """A job row as an older tickwork wrote it (only the columns of schema 1)."""
    with admin(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(
            "INSERT INTO tickwork_jobs (id, spec, schedule, overlap, paused, next_run)"
            " VALUES (%s, %s, '{}', %s, false, %s)",
            (job.id, spec_to_json(job), job.overlap, next_run),
        )


def terminate(dsn: str, app: str) -> int:
    """pg_terminate_backend every session with this application_name; how many."""
    with admin(dsn) as conn:
        got = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (app,),
        ).fetchone()
    return int(got[0]) if got else 0


def with_app(dsn: str, app: str, password: str | None = None) -> str:
    params = conninfo_to_dict(dsn)
    params["application_name"] = app
    if password is not None:
        params["password"] = password
    return make_conninfo("", **params)


# -- importing, the DSN and its password ------------------------------------------------------


def test_importing_tickwork_stores_does_not_load_psycopg() -> None:
    code = "import sys, tickwork, tickwork.stores; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_redact_dsn_masks_the_password_in_every_form() -> None:
    assert "s3cr3t" not in redact_dsn("postgresql://bob:s3cr3t@db.example/app")
    assert "password=***" in redact_dsn("host=db user=bob password=s3cr3t dbname=app")
    assert redact_dsn("host=db dbname=app") == "dbname=app host=db"
    assert redact_dsn("host=db password='s3cr3t") == "<unparsable connection string>"


def test_an_unreachable_server_fails_with_a_redacted_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = "postgresql://bob:hunter2-pw@127.0.0.1:1/app"  # nothing listens on port 1
    sleeps: list[float] = []
    with (
        caplog.at_level(logging.DEBUG, logger="tickwork.stores"),
        pytest.raises(StoreError, match=r"^cannot open the store: database .* unreachable") as err,
    ):
        PostgresStore(dsn, reconnect_timeout=0.5, backoff_min=0.1, sleep=sleeps.append)
    assert "hunter2-pw" not in str(err.value) and "hunter2-pw" not in caplog.text
    assert "password=***" in str(err.value)
    assert sleeps == [0.1, 0.2]  # exponential backoff, bounded by reconnect_timeout
    assert "reconnecting to" in caplog.text


def test_repr_and_logs_never_show_the_password(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = f"tw-{secrets.token_hex(4)}"
    dsn = with_app(pg_dsn, app, password="hunter2-pw")  # the local socket ignores it
    with PostgresStore(dsn, schema=pg_schema, sleep=lambda s: None) as store:
        assert "hunter2-pw" not in repr(store) and "***" in repr(store)
        store.upsert(spec(), 100.0)
        with caplog.at_level(logging.DEBUG):
            assert terminate(pg_dsn, app) == 1
            assert store.get("job") is not None  # reconnected
    assert "reconnecting to" in caplog.text
    assert "hunter2-pw" not in caplog.text


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"schema": ""}, r"^schema must be a non-empty printable name of at most 63 bytes"),
        ({"schema": "x" * 64}, r"^schema must be .*, got 'xxx"),
        ({"reconnect_timeout": -1}, r"^reconnect_timeout must be a finite number >= 0, got -1$"),
        ({"backoff_min": 0}, r"^backoff_min must be a finite number > 0, got 0$"),
        ({"backoff_max": 0.01}, r"^backoff_max must be >= backoff_min \(0.05\), got 0.01$"),
    ],
)
def test_bad_arguments_name_themselves(pg_dsn: str, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PostgresStore(pg_dsn, **kw)


def test_a_bad_dsn_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError, match=r"^dsn is not a valid connection string") as err:
        PostgresStore("host=db password='hunter2-pw")
    assert "hunter2-pw" not in str(err.value)
    with pytest.raises(TypeError, match=r"^dsn must be a str, got bytes$"):
        PostgresStore(b"host=db")  # type: ignore[arg-type]


# -- the schema ---------------------------------------------------------------------------


def test_tables_and_schema_version(open_pg: Callable[..., PostgresStore], pg_dsn: str) -> None:
    store = open_pg()
    store.upsert(spec(), 1.0)
    assert store.schema is not None
    meta = dict(rows(pg_dsn, store.schema, "SELECT key, value FROM tickwork_meta"))
    assert meta == {"application": "tickwork", "schema_version": str(len(pg_mod.MIGRATIONS))}
    assert store.channel == f"tickwork:{store.schema}"
    (kind,) = rows(pg_dsn, store.schema, "SELECT pg_typeof(spec)::text FROM tickwork_jobs")[0]
    assert kind == "text"  # JSON text, never a pickled blob


def test_a_newer_schema_is_refused_untouched(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    open_pg().upsert(spec(), 1.0)
    rows(pg_dsn, pg_schema, "UPDATE tickwork_meta SET value = '99' WHERE key = 'schema_version'")
    before = rows(pg_dsn, pg_schema, "SELECT * FROM tickwork_jobs")
    with pytest.raises(SchemaVersionError, match=r"schema version 99; this tickwork supports up"):
        open_pg()
    assert rows(pg_dsn, pg_schema, "SELECT * FROM tickwork_jobs") == before


def test_foreign_tables_are_refused_untouched(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
    rows(pg_dsn, pg_schema, "CREATE TABLE tickwork_jobs (invoice int)")
    with pytest.raises(StoreError, match=r"has tables \['tickwork_jobs'\] but no tickwork_meta"):
        open_pg()
    tables = rows(
        pg_dsn, pg_schema, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    )
    assert tables == [("tickwork_jobs",)]


def test_an_older_schema_is_migrated_once(
    open_pg: Callable[..., PostgresStore],
    pg_dsn: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    open_pg().upsert(spec("a"), 1.0)

    def step(cur: Any) -> None:
        cur.execute("ALTER TABLE tickwork_jobs ADD COLUMN note text")
        cur.execute("UPDATE tickwork_jobs SET note = 'from before'")

    latest = len(pg_mod.MIGRATIONS) + 1
    monkeypatch.setattr(pgschema_mod, "MIGRATIONS", [*pg_mod.MIGRATIONS, step])
    assert [j.id for j in open_pg().jobs()] == ["a"]
    open_pg()  # current already: nothing runs twice
    assert rows(pg_dsn, pg_schema, "SELECT note FROM tickwork_jobs") == [("from before",)]
    meta = dict(rows(pg_dsn, pg_schema, "SELECT key, value FROM tickwork_meta"))
    assert meta["schema_version"] == str(latest)


def test_a_new_schema_and_a_migration_each_log_one_line(
    open_pg: Callable[..., PostgresStore],
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    latest = len(pg_mod.MIGRATIONS)

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "schema" in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="tickwork.stores"):
        open_pg()
        open_pg()  # current already: says nothing
    assert lines() == [f"created tickwork schema in {pg_schema!r} at schema version {latest}"]
    caplog.clear()
    monkeypatch.setattr(pgschema_mod, "MIGRATIONS", [*pg_mod.MIGRATIONS, lambda cur: None])
    with caplog.at_level(logging.INFO, logger="tickwork.stores"):
        open_pg()
    assert lines() == [
        f"migrated tickwork schema in {pg_schema!r} from schema version {latest} to {latest + 1}"
    ]


def test_a_version_1_schema_with_a_live_claim_migrates_and_recovers(
    open_pg: Callable[..., PostgresStore],
    pg_dsn: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A schema written before retries existed (version 1), holding a claim whose owner
    # died: it opens, gains the retry column, and the claim is re-offered.
    monkeypatch.setattr(pgschema_mod, "MIGRATIONS", pg_mod.MIGRATIONS[:1])
    open_pg()
    old_job(pg_dsn, pg_schema, spec(overlap="allow"), 120.0)
    rows(
        pg_dsn,
        pg_schema,
        "INSERT INTO tickwork_claims"
        " VALUES ('old-token', 'job', 'dead', 100.0, 100.0, 130.0, NULL)",
    )
    monkeypatch.undo()
    store = open_pg()
    meta = dict(rows(pg_dsn, pg_schema, "SELECT key, value FROM tickwork_meta"))
    assert meta["schema_version"] == str(len(pg_mod.MIGRATIONS))
    (old,) = store.get("job").claims  # type: ignore[union-attr]
    assert (old.token, old.owner, old.retry) == ("old-token", "dead", False)
    (r,) = store.recover_expired(130.0)
    assert r.action == "released"
    assert store.get("job").next_run == 120.0  # type: ignore[union-attr]
    (again,) = claim(store, 130.0, "B", limit=1)
    assert (again.scheduled, again.retry, again.owner) == (100.0, True, "B")


def test_concurrent_first_opens_create_the_schema_once(pg_dsn: str, pg_schema: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresStore(pg_dsn, schema=pg_schema).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_schema_created_while_it_is_inspected_is_not_called_foreign(
    pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Workers starting together on an empty schema: one commits the tables while
    # another is looking them up. Looked up one statement at a time, the second saw
    # tickwork_jobs but not tickwork_meta and refused the schema as another's. Here
    # the other opener commits right after the first look-up statement, every time.
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
    original = PostgresStore._needs_migration
    created: list[bool] = []

    class CommitsBetweenStatements:
        def __init__(self, cur: Any) -> None:
            self._cur = cur

        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            result = self._cur.execute(query, *args, **kwargs)
            if "to_regclass" in str(query) and not created:
                created.append(True)
                PostgresStore(pg_dsn, schema=pg_schema).close()  # another opener
            return result

        def __getattr__(self, name: str) -> Any:
            return getattr(self._cur, name)

    def needs_migration(self: PostgresStore, cur: Any) -> bool:
        return original(self, CommitsBetweenStatements(cur))

    monkeypatch.setattr(PostgresStore, "_needs_migration", needs_migration)
    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        store.upsert(JobSpec("job", "m:f", At(100.0)), 100.0)
    assert created == [True]


def test_concurrent_first_opens_on_a_new_database(
    fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two daemons started together on a new database once failed here: each looked for
    # the tables in "public" and found none, one created them, and the other, inspecting
    # again in the transaction that had waited for the lock, still saw none (a stale
    # per-backend catalog cache) and failed with 'relation "tickwork_meta" already
    # exists'. Every opener now looks first, then all of them race for the lock.
    together = threading.Barrier(3, timeout=30)
    looked: set[int] = set()
    real_inspect = PostgresStore._inspect

    def inspect_together(self: PostgresStore, cur: Any) -> int:
        version = real_inspect(self, cur)
        if threading.get_ident() not in looked:
            looked.add(threading.get_ident())
            together.wait()
        return version

    monkeypatch.setattr(PostgresStore, "_inspect", inspect_together)
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresStore(fresh_database).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(fresh_database) as conn:
        meta = dict(conn.execute("SELECT key, value FROM tickwork_meta").fetchall())
    assert meta["schema_version"] == str(len(pg_mod.MIGRATIONS))


# -- connection loss and unknown commit outcomes -----------------------------------------------


class CutCommit:
    """Cut the connection at the next commit of ``store``: before or after the server did it."""

    def __init__(self, store: PostgresStore, *, committed: bool) -> None:
        self.store, self.committed, self.armed = store, committed, True
        self.real = store._commit

    def __call__(self, conn: psycopg.Connection[Any]) -> None:
        if not self.armed:
            return self.real(conn)
        self.armed = False
        if self.committed:
            conn.commit()
        conn.close()  # the client never hears the answer
        raise psycopg.OperationalError("the connection was cut during COMMIT (test)")


def cut_next_commit(store: PostgresStore, *, committed: bool) -> CutCommit:
    cut = CutCommit(store, committed=committed)
    store._commit = cut  # type: ignore[method-assign]
    return cut


@pytest.mark.parametrize("committed", [True, False])
def test_a_claim_whose_commit_was_cut_returns_exactly_what_committed(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    store = open_pg(sleep=lambda s: None)
    for i in range(3):
        store.upsert(spec(f"j{i}", At(100.0)), 100.0)
    cut_next_commit(store, committed=committed)
    got = claim(store, 100.0, advance=once)
    if committed:
        assert [c.job_id for c in got] == ["j0", "j1", "j2"]
        assert all(store.start(c, started=100.0) for c in got)
        assert claim(store, 100.0, advance=once) == []
    else:
        assert got == []  # nothing claimed, so nothing lost: all three are still due
        assert [c.job_id for c in claim(store, 100.0, advance=once)] == ["j0", "j1", "j2"]


@pytest.mark.parametrize("committed", [True, False])
def test_start_and_finish_whose_commit_was_cut_are_resolved(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    store = open_pg(sleep=lambda s: None)
    store.upsert(spec(), 100.0)
    (c,) = claim(store, 100.0)
    cut_next_commit(store, committed=committed)
    assert store.start(c, started=100.5)  # either way the run is started exactly once
    assert store.get("job").claims[0].started == 100.5  # type: ignore[union-attr]
    cut_next_commit(store, committed=committed)
    assert store.finish(c, outcome="ok", ended=101.0)
    state = store.get("job")
    assert state is not None and state.claims == ()
    assert state.last_run == LastRun(100.0, 100.5, 101.0, "ok", None)
    assert not store.finish(c, outcome="ok", ended=101.0)  # and only once


@pytest.mark.parametrize("committed", [True, False])
def test_a_claim_carrying_a_finish_whose_commit_was_cut_reports_both_exactly(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    """`claim_due_carrying`: the finish and the claims are found out as each alone would be."""
    store = open_pg(sleep=lambda s: None)
    store.upsert(spec("one", At(100.0)), 100.0)
    store.upsert(spec("two", At(110.0)), 110.0)
    (c1,) = claim(store, 100.0, advance=once)
    cut_next_commit(store, committed=committed)
    ended, claims = store.claim_due_carrying(
        [Finish(c1, "ok", 101.0)], 110.0, owner="A", lease_seconds=30.0, limit=10, advance=once
    )
    # The finish is found out as `record` finds it: written once, either way. The claims
    # as `claim_due` finds them: those that committed (none if the commit did not
    # happen, and then "two" is still due: nothing is lost).
    assert ended == [True]
    assert [e.outcome for e in store.history("one")] == ["ok"]  # one entry either way
    assert not store.finish(c1, outcome="ok", ended=101.0)
    if committed:
        assert [c.job_id for c in claims] == ["two"]
        assert claim(store, 110.0, advance=once) == []
    else:
        assert claims == []
        assert [c.job_id for c in claim(store, 110.0, advance=once)] == ["two"]


@pytest.mark.parametrize("keyed", [False, True], ids=["random-ids", "keyed"])
@pytest.mark.parametrize("committed", [True, False])
def test_an_enqueue_whose_commit_was_cut_adds_its_one_offs_once_even_if_one_ran_since(
    open_pg: Callable[..., PostgresStore], committed: bool, keyed: bool
) -> None:
    # Between the cut and the check, a node may claim, run and finish a one-off of the
    # batch (due now): its row is gone then, and must not be inserted again.
    node = open_pg()
    ran: list[str] = []

    def meanwhile(seconds: float) -> None:
        # A little real time too: the cut session's transaction may still be in progress
        # on the server for a moment, and the store asks again after its backoff.
        time.sleep(min(seconds, 0.05))
        for c in claim(node, 100.0, "node", advance=once):
            assert node.finish(c, outcome="ok", ended=100.5)
            ran.append(c.job_id)

    store = open_pg(sleep=meanwhile)
    rows = [oneoff(f"key:k{i}" if keyed else f"o{i}", 100.0) for i in range(3)]
    cut_next_commit(store, committed=committed)
    assert store.enqueue(rows) == [True, True, True]
    meanwhile(0.0)  # whatever is due now runs
    assert sorted(ran) == sorted(r.id for r in rows)  # once each
    assert claim(node, 1e9, advance=once) == []
    assert counts(store).done == 3 and counts(store).pending == 0


@pytest.mark.parametrize("committed", [True, False])
def test_a_one_off_s_finish_whose_commit_was_cut_is_found_out_even_when_its_row_is_gone(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    # Not committed, and meanwhile its owner's claim was recovered (abandoned: the
    # row went with the slot): the finish was not recorded, and must say so.
    other = open_pg()
    recovered: list[object] = []

    def meanwhile(seconds: float) -> None:
        # The cut session's transaction holds the claim until the server has noticed
        # the closed connection (a loaded machine: later than the retry's first sleep),
        # and a recovery passes over what is locked: recover once it has let go.
        deadline = time.monotonic() + 60
        while not recovered and other.get("~o") is not None:
            recovered.extend(other.recover_expired(100.0 + 2 * LEASE))
            assert time.monotonic() < deadline, "the cut session never let the claim go"
            time.sleep(0.01)

    store = open_pg(sleep=meanwhile)
    store.enqueue([oneoff("o", 100.0)])
    (c,) = claim(store, 100.0, advance=once)
    assert store.start(c, started=100.5)
    cut_next_commit(store, committed=committed)
    assert store.finish(c, outcome="ok", ended=101.0) is committed
    outcomes = [e.outcome for e in store.history("~o")]
    assert outcomes == (["ok"] if committed else ["abandoned"])
    assert store.get("~o") is None and claim(store, 1e9, advance=once) == []


@pytest.mark.parametrize("committed", [True, False])
def test_a_cancel_whose_commit_was_cut_says_it_cancelled(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    store = open_pg(sleep=lambda s: time.sleep(min(s, 0.05)))  # see the enqueue's test
    store.enqueue([oneoff("o", 100.0)])
    cut_next_commit(store, committed=committed)
    assert store.cancel_oneoff("~o", at=50.0, by="ann@x")
    assert [e.outcome for e in store.history("~o")] == ["cancelled"]
    assert store.get("~o") is None and counts(store).dropped == 1
    assert not store.cancel_oneoff("~o", at=51.0, by="ann@x")


def test_a_transaction_whose_fate_is_not_known_yet_is_asked_about_again(
    pg_dsn: str, open_pg: Callable[..., PostgresStore]
) -> None:
    store = open_pg()
    with psycopg.connect(pg_dsn) as pending, admin(pg_dsn) as asker:
        row = pending.execute("SELECT txid_current()").fetchone()
        assert row is not None
        with asker.cursor() as cur:
            # Transient: the store's retry loop asks again after its backoff.
            with pytest.raises(psycopg.OperationalError, match=r"is in progress"):
                pg_mod._xact_committed(store, cur, row[0])
            pending.commit()
            assert pg_mod._xact_committed(store, cur, row[0])
            aborted = pending.execute("SELECT txid_current()").fetchone()
            assert aborted is not None
            pending.rollback()
            assert not pg_mod._xact_committed(store, cur, aborted[0])


@pytest.mark.parametrize("committed", [True, False])
def test_upsert_and_remove_whose_commit_was_cut_report_what_they_did(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    store = open_pg(sleep=lambda s: None)
    cut_next_commit(store, committed=committed)
    assert store.upsert(spec(), 100.0) is Upsert.CREATED
    cut_next_commit(store, committed=committed)
    assert store.upsert(spec(grace=1.0), 100.0) is Upsert.UPDATED
    cut_next_commit(store, committed=committed)
    store.remove("job")
    assert store.jobs() == []


@pytest.mark.parametrize("committed", [True, False])
def test_a_cancel_whose_commit_was_cut_reports_what_it_cancelled_once(
    open_pg: Callable[..., PostgresStore], committed: bool
) -> None:
    store = open_pg(sleep=lambda s: None)
    store.upsert(spec(), 100.0)
    store.set_next_run("job", 200.0)
    store.backfill_job("job", [100.0, 110.0], by="a@x", at=150.0)
    cut_next_commit(store, committed=committed)
    assert store.cancel_waiting_runs("job", by="a@x", at=151.0) == [100.0, 110.0]
    assert store.get("job").waiting == ()  # type: ignore[union-attr]
    assert [a.action for a in store.actions("job")] == ["cancel", "backfill"]  # one cancel
    cancelled = store.history("job", outcome="cancelled")  # once each, no grid given
    assert sorted(e.scheduled for e in cancelled) == [100.0, 110.0]


def test_a_terminated_connection_is_reopened_for_every_operation(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = f"tw-{secrets.token_hex(4)}"
    sleeps: list[float] = []
    with PostgresStore(with_app(pg_dsn, app), schema=pg_schema, sleep=sleeps.append) as store:
        steps: list[Callable[[], object]] = [
            lambda: store.upsert(spec(), 100.0),
            lambda: store.jobs(),
            lambda: claim(store, 100.0),
            lambda: store.next_wakeup(),
            lambda: store.recover_expired(100.0),
        ]
        for step in steps:
            assert terminate(pg_dsn, app) == 1
            step()
        assert len(store.get("job").claims) == 1  # type: ignore[union-attr]
    assert sleeps == [0.05] * len(steps)


def test_an_operation_gives_up_after_reconnect_timeout(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_pg(reconnect_timeout=1.0, backoff_min=0.2, backoff_max=0.3)
    sleeps: list[float] = []
    store._sleep = sleeps.append
    store._drop()

    def refuse(*a: object, **kw: object) -> None:
        raise psycopg.OperationalError("connection refused (test)")

    monkeypatch.setattr(psycopg, "connect", refuse)
    with pytest.raises(StoreError, match=r"^cannot list jobs: database .* unreachable for"):
        store.jobs()
    assert sleeps == [0.2, 0.3, 0.3]
    monkeypatch.undo()
    assert store.jobs() == []  # and it recovers when the server is back


def test_advance_errors_are_not_retried(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg()
    store.upsert(spec(), 100.0)
    calls = []

    def advance(state: JobState, now: float) -> float | None:
        calls.append(now)
        raise RuntimeError("policy bug")

    with pytest.raises(RuntimeError, match="policy bug"):
        claim(store, 100.0, advance=advance)
    assert calls == [100.0]


def test_reentrant_call_from_advance_is_refused(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg()
    store.upsert(spec(), 100.0)

    def advance(state: JobState, now: float) -> float | None:
        store.get("job")
        return None

    with pytest.raises(StoreError, match=r"from inside another store call"):
        claim(store, 100.0, advance=advance)


# -- LISTEN/NOTIFY -----------------------------------------------------------------------


def test_both_stores_are_change_notifiers(
    open_pg: Callable[..., PostgresStore], tmp_path: Any
) -> None:
    from tickwork.stores.sqlite import SQLiteStore

    assert isinstance(open_pg(), ChangeNotifier)
    with SQLiteStore(tmp_path / "x.db") as s:
        assert isinstance(s, ChangeNotifier)


def test_wait_for_change_wakes_on_every_kind_of_change(
    open_pg: Callable[..., PostgresStore],
) -> None:
    waiter, writer = open_pg(), open_pg()
    assert waiter.wait_for_change(5.0)  # the first call starts listening
    t0 = time.monotonic()
    assert not waiter.wait_for_change(0.2)
    assert time.monotonic() - t0 >= 0.19
    writer.upsert(spec(schedule=Every(5, fixed_delay=True)), 100.0)
    (c,) = claim(writer, 100.0, advance=lambda s, n: None)
    # The setup's own announcement (the new job), consumed before counting the others.
    assert waiter.wait_for_change(5.0)
    assert not waiter.wait_for_change(0.2)
    changes: list[Callable[[], object]] = [
        lambda: writer.upsert(spec(grace=2.0), 100.0),
        lambda: writer.set_next_run("job", 50.0),
        lambda: writer.set_paused("job", True),
        lambda: writer.finish(c, outcome="ok", ended=101.0, next_run=106.0),
        lambda: writer.remove("job"),
    ]
    for change in changes:
        change()
        t0 = time.monotonic()
        assert waiter.wait_for_change(5.0)
        assert time.monotonic() - t0 < 2.0
        assert not waiter.wait_for_change(0.0), changes.index(change)  # one change, one wake-up
    writer.upsert(spec("x"), 1.0)
    writer.upsert(spec("x"), 1.0)  # unchanged: no announcement
    assert waiter.wait_for_change(1.0)
    assert not waiter.wait_for_change(0.1)


def two_listening_nodes(
    open_pg: Callable[..., PostgresStore],
) -> tuple[PostgresStore, PostgresStore]:
    """Two nodes' stores, "taker" and "other", both listening; a job due now, one at 110."""
    taker, other = open_pg(), open_pg()
    taker.tag_sessions("taker")
    other.tag_sessions("other")
    assert taker.wait_for_change(5.0) and other.wait_for_change(5.0)  # both listening
    taker.upsert(spec("now", At(100.0)), 100.0)
    taker.upsert(spec("next", At(110.0)), 110.0)
    while other.wait_for_change(0.2) | taker.wait_for_change(0.0):  # the upserts' news
        pass
    return taker, other


def test_a_claim_that_took_runs_is_heard_by_the_others_as_a_look_not_a_change(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LookNotices`: what lets a node sleep on while another takes the runs."""
    from tickwork.stores.contract import LookNotices

    taker, other = two_listening_nodes(open_pg)
    assert isinstance(other, LookNotices)
    assert other.look_elsewhere() is None
    assert [c.job_id for c in claim(taker, 100.0, "taker", advance=once)] == ["now"]
    deadline = time.monotonic() + 10.0
    while other.look_elsewhere() is None and time.monotonic() < deadline:
        assert not other.wait_for_change(0.1)  # a look is not a change: no wake-up
    heard = other.look_elsewhere()
    assert heard is not None
    count, age, wake = heard
    assert count == 1 and 0.0 <= age < 10.0 and wake == 110.0  # what the claim found next
    assert claim(taker, 100.5, "taker", advance=once) == []  # took nothing: no news
    assert not taker.wait_for_change(0.2)
    assert taker.look_elsewhere() is None  # its own looks are no news to itself
    assert other.look_elsewhere()[0] == 1  # type: ignore[index]

    def heard_by(store: PostgresStore, count: int) -> None:
        deadline = time.monotonic() + 10.0
        while (store.look_elsewhere() or (0,))[0] < count and time.monotonic() < deadline:
            store.wait_for_change(0.1)
        assert (store.look_elsewhere() or (0,))[0] == count

    # Spaced (each costs every listener a transaction): a node that hears nobody else
    # announces at most once per ANNOUNCE_ALONE. Announcements arrive in commit order,
    # so the next one heard shows that the one between was not sent.
    monkeypatch.setattr(looks_mod, "ANNOUNCE_ALONE", 3600.0)
    taker.upsert(spec("a", At(100.6)), 100.6)
    taker.upsert(spec("b", At(100.7)), 100.7)
    assert [c.job_id for c in claim(taker, 100.6, "taker", advance=once)] == ["a"]  # not sent
    monkeypatch.setattr(looks_mod, "ANNOUNCE_ALONE", 0.0)
    assert [c.job_id for c in claim(taker, 100.7, "taker", advance=once)] == ["b"]  # sent
    heard_by(other, 2)
    assert other.look_elsewhere()[2] == 110.0  # type: ignore[index]  # b's, not a's (100.7)


def test_a_promise_to_look_is_heard_held_and_withdrawn_as_a_change(
    open_pg: Callable[..., PostgresStore],
) -> None:
    """`LookCover`: a node with a worker free promises; the others sleep on until withdrawn."""
    from tickwork.stores.contract import LookCover

    taker, other = two_listening_nodes(open_pg)
    assert isinstance(taker, LookCover)
    assert taker.cover(True) is False  # able, and nothing promised yet
    assert [c.job_id for c in claim(taker, 100.0, "taker", advance=once)] == ["now"]
    assert taker.cover(True) is True  # its claim's announcement promised
    deadline = time.monotonic() + 10.0
    while other.covered() == 0.0 and time.monotonic() < deadline:
        assert not other.wait_for_change(0.1)  # a promise is not a change
    assert 0.0 < other.covered() <= looks_mod.COVER_FOR
    assert taker.covered() == 0.0  # its own promise is not one it defers to
    assert taker.cover(False) is False  # every worker busy: withdrawn at once
    deadline = time.monotonic() + 10.0
    while not other.wait_for_change(0.1):  # the withdrawal wakes it: a change
        assert time.monotonic() < deadline, "the withdrawal was not heard"
    assert other.covered() == 0.0


def test_a_node_under_a_steady_promise_stops_hearing_changes_until_it_ends(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each notification costs every listening session a transaction (three per enqueue
    on three nodes), and a node that a steady promise covers only sleeps on at it: it
    stops listening on the changes' channel, and listens again, and looks (a change),
    when the promise is withdrawn or lapses. The promise's clock is the test's."""
    mono = [1000.0]
    monkeypatch.setattr(looks_mod, "time", types.SimpleNamespace(monotonic=lambda: mono[0]))
    taker, other = two_listening_nodes(open_pg)

    def channels(store: PostgresStore) -> set[str]:
        conn = store._listen_conn
        assert conn is not None
        return {r[0] for r in conn.execute("SELECT pg_listening_channels()").fetchall()}

    def promise(at: float) -> None:  # the taker takes a run with a worker free
        mono[0] += looks_mod.ANNOUNCE_GAP  # announcements are spaced
        taker.upsert(spec(f"at{at}", At(at)), at)
        taker.cover(True)
        assert f"at{at}" in [c.job_id for c in claim(taker, at, "taker", advance=once)]
        assert taker.cover(True) is True

    def heard_until(holds: Callable[[], bool]) -> None:  # (a loaded machine: no timer)
        deadline = time.monotonic() + 10.0
        while not holds():
            assert time.monotonic() < deadline, "not heard"
            other.wait_for_change(0.1)

    promise(100.1)
    heard_until(lambda: other.covered() > 0.0)
    assert not other._muted and other.channel in channels(other)  # not renewed yet
    mono[0] += looks_mod.MUTE_AFTER  # renewed that long after: a steady promise
    promise(100.2)
    heard_until(lambda: other._muted)
    assert other.channel not in channels(other)
    assert other._looks_channel in channels(other)  # it still hears the looks
    taker.upsert(spec("unheard", At(100.3)), 100.3)  # a change: the taker looks for it
    assert not other.wait_for_change(0.3)
    mono[0] += looks_mod.COVER_FOR  # lapsed (the taker died or found nothing)
    assert other.wait_for_change(5.0)  # listens again, and looks for what it missed
    assert not other._muted and other.channel in channels(other)
    taker.upsert(spec("heard", At(100.4)), 100.4)
    deadline = time.monotonic() + 10.0
    while not other.wait_for_change(0.1):  # changes are heard again
        assert time.monotonic() < deadline, "the change was not heard"
    # A withdrawal (every worker of the taker busy) ends it at once, the same way.
    promise(100.5)
    heard_until(lambda: other.covered() > 0.0)
    mono[0] += looks_mod.MUTE_AFTER
    promise(100.6)
    heard_until(lambda: other._muted)
    assert taker.cover(False) is False  # withdrawn
    heard_until(lambda: not other._muted)
    assert other.channel in channels(other)


def test_a_finish_that_frees_a_held_job_is_announced_even_with_no_new_next_run(
    open_pg: Callable[..., PostgresStore],
) -> None:
    # While a job that allows no overlap is claimed, other nodes leave its next run out
    # of their wake-ups; its release must wake them, or they sleep to their next poll.
    waiter, writer = open_pg(), open_pg()
    assert waiter.wait_for_change(5.0)  # listening
    writer.upsert(spec("held"), 100.0)
    writer.upsert(spec("free", overlap="allow"), 100.0)
    assert waiter.wait_for_change(5.0)
    while waiter.wait_for_change(0.2):  # drain the upserts' announcements
        pass
    claims = {c.job_id: c for c in claim(writer, 100.0)}
    assert not waiter.wait_for_change(0.2)  # a claim frees nothing
    writer.finish(claims["free"], outcome="ok", ended=101.0)  # overlap allowed: never held
    assert not waiter.wait_for_change(0.3)
    writer.finish(claims["held"], outcome="ok", ended=101.0)  # KEEP: next run 110 unchanged
    assert waiter.wait_for_change(5.0)


def test_wait_for_change_is_scoped_to_the_schema(
    open_pg: Callable[..., PostgresStore], pg_dsn: str
) -> None:
    waiter = open_pg()
    other_schema = f"tw_test_{secrets.token_hex(6)}"
    try:
        other = open_pg(schema=other_schema)
        assert waiter.wait_for_change(1.0)
        other.upsert(spec(), 1.0)
        assert not waiter.wait_for_change(0.3)
    finally:
        with admin(pg_dsn) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(other_schema)))


def test_interrupt_wait_and_close_wake_a_waiting_thread(
    open_pg: Callable[..., PostgresStore],
) -> None:
    store = open_pg()
    assert store.wait_for_change(1.0)
    results: list[object] = []

    def wait() -> None:
        t0 = time.monotonic()
        results.append(store.wait_for_change(30.0))
        results.append(time.monotonic() - t0)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.1)
    store.interrupt_wait()
    t.join(5)
    assert results[0] is True and results[1] < 5  # type: ignore[operator]
    store.interrupt_wait()  # before a wait: the next one returns at once
    assert store.wait_for_change(30.0)
    results.clear()
    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.1)
    store.close()
    t.join(5)
    assert not t.is_alive() and results[0] is True
    with pytest.raises(StoreError, match=r"^cannot wait for changes: the store is closed$"):
        store.wait_for_change(0.0)


def test_a_lost_listening_connection_is_reopened(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = f"tw-{secrets.token_hex(4)}"
    with (
        PostgresStore(with_app(pg_dsn, app, "hunter2-pw"), schema=pg_schema) as waiter,
        PostgresStore(pg_dsn, schema=pg_schema) as writer,
    ):
        assert waiter.wait_for_change(1.0)
        waiter.jobs()  # both connections exist
        assert terminate(pg_dsn, app) == 2
        with caplog.at_level(logging.WARNING, logger="tickwork.stores"):
            assert waiter.wait_for_change(5.0)  # lost: tell the caller to look again
        assert "lost the listening connection" in caplog.text
        assert "hunter2-pw" not in caplog.text
        assert waiter.wait_for_change(5.0)  # reopened: notifications may have been missed
        writer.upsert(spec(), 1.0)
        assert waiter.wait_for_change(5.0)
        assert waiter.get("job") is not None  # the main connection reconnects too


# -- record(): its own connection --------------------------------------------------------


def test_record_does_not_wait_for_a_claim_in_progress(
    open_pg: Callable[..., PostgresStore],
) -> None:
    # The workers' group commits and the timing thread's claims use two connections: a
    # finish recorded while a claim transaction is open (on another job) goes through.
    store = open_pg()
    store.upsert(spec("done"), 100.0)
    store.upsert(spec("next"), 105.0)
    (held,) = claim(store, 100.0)
    assert store.start(held, started=100.0)
    recorded: list[tuple[list[bool], list[bool]]] = []

    def advance(state: JobState, now: float) -> float | None:
        # Inside the claim transaction of "next": another thread records "done".
        t = threading.Thread(
            target=lambda: recorded.append(store.record([], [Finish(held, "ok", 106.0)]))
        )
        t.start()
        t.join(30)
        assert not t.is_alive(), "record() waited for the claim transaction"
        return None

    (c,) = claim(store, 106.0, advance=advance)
    assert c.job_id == "next" and recorded == [([], [True])]
    done = store.get("done")
    assert done is not None and done.last_run is not None and done.last_run.outcome == "ok"


def test_a_version_3_schema_gains_the_slot_ledger_and_keeps_everything(
    open_pg: Callable[..., PostgresStore],
    pg_dsn: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A schema from before the ledger (3) with a claim held: it survives the
    # migration, and its finish writes the first entry.
    monkeypatch.setattr(pgschema_mod, "MIGRATIONS", pg_mod.MIGRATIONS[:3])
    open_pg()
    old_job(pg_dsn, pg_schema, spec(), 100.0)
    rows(
        pg_dsn,
        pg_schema,
        "INSERT INTO tickwork_claims"
        " VALUES ('held-token', 'job', 'A', 100.0, 100.0, 130.0, 100.5, false)",
    )
    monkeypatch.undo()
    store = open_pg()
    state = store.get("job")
    assert state is not None and [c.token for c in state.claims] == ["held-token"]
    (held,) = state.claims
    assert store.history() == []
    assert store.finish(held, outcome="ok", ended=101.0)
    (e,) = store.history()
    assert (e.job_id, e.scheduled, e.started, e.ended, e.node) == ("job", 100.0, 100.5, 101.0, "A")


def test_a_version_5_schema_gains_the_first_slot_and_does_not_guess_it(
    open_pg: Callable[..., PostgresStore],
    pg_dsn: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As SQLite's version 6 file: the job stored before first slots keeps everything,
    # its first slot is not known (a backfill of it is not clipped), a new job has one.
    monkeypatch.setattr(pgschema_mod, "MIGRATIONS", pg_mod.MIGRATIONS[:5])
    open_pg()
    old_job(pg_dsn, pg_schema, spec(), 200.0)
    rows(
        pg_dsn,
        pg_schema,
        "INSERT INTO tickwork_claims VALUES"
        " ('tok', 'job', '', 150.0, 150.0, 150.0, NULL, true, 'backfill')",
    )
    monkeypatch.undo()
    store = open_pg()
    meta = dict(rows(pg_dsn, pg_schema, "SELECT key, value FROM tickwork_meta"))
    assert meta["schema_version"] == str(len(pg_mod.MIGRATIONS))
    state = store.get("job")
    assert state is not None and state.first_slot is None and state.next_run == 200.0
    assert [(c.scheduled, c.origin) for c in state.waiting] == [(150.0, "backfill")]
    assert store.backfill_job("job", [10.0, 20.0], by="a@x", at=190.0) == [10.0, 20.0]
    store.upsert(spec("new"), 300.0)
    assert store.get("new").first_slot == 300.0  # type: ignore[union-attr]
    assert store.cancel_waiting_runs("job", by="a@x", at=191.0) == [10.0, 20.0, 150.0]


def test_new_jobs_are_declared_in_one_insert_and_announced_once(
    open_pg: Callable[..., PostgresStore], statements: list[str]
) -> None:
    """`upsert_many` creates a batch of new jobs set-based (issue 41): one read of the
    stored declarations, one insert, one announcement, however many jobs; a chained
    job's edges go with it, and a changed job is written as `upsert` writes it."""
    store = open_pg()
    store.upsert(spec("old", Every(60)), 100.0)
    batch = [(spec(f"n{i:03}", Every(60)), 100.0 + i) for i in range(300)]
    batch.append((spec("down", Every(60), after=[("n000", "ok")]), 100.0))
    batch.append((spec("old", Every(90)), 100.0))
    statements.clear()
    done = store.upsert_many(batch)  # type: ignore[attr-defined]
    assert done == [Upsert.CREATED] * 301 + [Upsert.UPDATED]
    heads = [" ".join(q.split()[:3]) for q in statements if "set_config" not in q]
    assert heads[:2] == ["SELECT id, spec", "INSERT INTO tickwork_jobs"]
    assert sum("pg_notify" in q for q in statements) == 2  # the new ones', the changed one's
    assert len(statements) < 15
    assert store.get("n007").next_run == 107.0  # type: ignore[union-attr]
    assert store.get("down").spec.after == (("n000", "ok"),)  # type: ignore[union-attr]
    assert store.upsert_many(batch[:-1]) == [Upsert.UNCHANGED] * 301  # type: ignore[attr-defined]


def test_an_enqueue_is_one_statement_and_a_one_offs_finish_deletes_without_updating(
    open_pg: Callable[..., PostgresStore], statements: list[str]
) -> None:
    """An enqueue announces its rows within its insert; a one-off's finish, item by item,
    deletes its row without first recording the last run on it (issue 41 review)."""
    waiter, store = open_pg(), open_pg()
    assert waiter.wait_for_change(5.0)  # listening
    statements.clear()
    assert store.enqueue([oneoff(f"o{i}", 100.0) for i in range(3)]) == [True] * 3
    mine = [q for q in statements if "set_config" not in q]
    assert len(mine) == 1 and "pg_notify" in mine[0]
    assert waiter.wait_for_change(5.0)  # heard, once
    assert not waiter.wait_for_change(0.1)
    taken = claim(store, 100.0, advance=once)
    statements.clear()
    assert store.record([], [Finish(c, "ok", 101.0) for c in taken[:2]]) == ([], [True] * 2)
    assert store.finish(taken[2], outcome="failed", ended=101.0, error="boom")
    assert not any("UPDATE tickwork_jobs" in q for q in statements)
    assert counts(store).done == 2 and counts(store).failed == 1
    assert len(store.history()) == 3 and store.get("~o0") is None


@pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once"])
def test_a_start_that_commits_while_its_expired_claim_is_recovered_is_seen_by_the_recovery(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str, delivery: str
) -> None:
    """A node alive past its lease starts its run while another node recovers the claim.

    The start (an UPDATE of the claim row) is under way when the recovery looks, and
    commits after. The recovery must act on the claim as committed: it leaves the claim
    being written to its next look (or waits for it), and then sees it started: an
    ``abandoned`` entry and, at-most-once, no second run. Acting on what it read first
    (not started, so re-offered with no entry), the slot ran twice with one attempt on
    record: found once in the one-off kill loop at a load of 30.
    """
    owner, recoverer = open_pg(), open_pg()
    owner.upsert(spec("job", At(100.0), delivery=delivery), 100.0)
    (c,) = claim(owner, 100.0, advance=once)
    recovered: list[Any] = []
    with admin(pg_dsn) as start:
        start.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        start.execute("BEGIN")
        start.execute("UPDATE tickwork_claims SET started = 100.5 WHERE token = %s", (c.token,))
        _meanwhile(
            start,
            lambda: recovered.extend(recoverer.recover_expired(100.0 + LEASE + 1)),
            pg_dsn,
            pg_schema,
        )
    recovered.extend(recoverer.recover_expired(100.0 + LEASE + 2))  # the next look
    want = "abandoned" if delivery == "at_most_once" else "requeued"
    assert [(r.claim.job_id, r.action) for r in recovered] == [("job", want)]
    assert [e.outcome for e in owner.history("job")] == ["abandoned"]
    state = owner.get("job")
    retries = [] if state is None else [(x.retry, x.started) for x in state.claims]
    assert retries == ([] if delivery == "at_most_once" else [(True, None)])


def _lock_waited_on(pg_dsn: str, pg_schema: str) -> list[tuple[Any, ...]]:
    """Sessions of this database waiting for a row lock (another transaction holds it)."""
    return rows(
        pg_dsn,
        pg_schema,
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()",
    )


def _meanwhile(
    holder: psycopg.Connection[Any], act: Callable[[], object], pg_dsn: str, pg_schema: str
) -> None:
    """Run ``act`` on a thread while ``holder``'s open transaction holds its rows.

    Once ``act`` waits for a row lock (or has passed the held rows and ended),
    ``holder`` commits; then ``act`` must end.
    """
    thread = threading.Thread(target=act)
    thread.start()
    wait_until(
        "the other transaction to wait for the held rows, or to pass them",
        lambda: not thread.is_alive() or _lock_waited_on(pg_dsn, pg_schema),
    )
    holder.execute("COMMIT")
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_a_cancel_that_waits_for_a_claim_of_its_one_off_cancels_nothing(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    """A node claims (and starts) a one-off while an operator cancels it.

    The cancel waits for the claim's transaction, which holds the one-off's row. Once
    the claim has committed, a run of it is held: the cancel must say it cancelled
    nothing, and the claim and the row stay. Deciding on what it saw before the claim
    committed, the cancel deleted the row (and the claim with it), wrote "cancelled
    before it ran" and returned True, while the node ran the function.
    """
    store = open_pg()
    store.enqueue([oneoff("x", 100.0)])
    done: list[bool] = []
    with admin(pg_dsn) as claim_tx:
        claim_tx.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        claim_tx.execute("BEGIN")
        claim_tx.execute("SELECT 1 FROM tickwork_jobs WHERE id = '~x' FOR NO KEY UPDATE")
        claim_tx.execute(
            "INSERT INTO tickwork_claims (token, job_id, scheduled, started, owner,"
            " claimed_at, lease_until, retry, origin)"
            " VALUES ('t', '~x', 100, 100.5, 'A', 100, 200, false, 'schedule')"
        )
        claim_tx.execute("UPDATE tickwork_jobs SET next_run = NULL WHERE id = '~x'")
        other = open_pg()
        _meanwhile(
            claim_tx,
            lambda: done.append(other.cancel_oneoff("~x", at=101.0, by="op")),
            pg_dsn,
            pg_schema,
        )
    assert done == [False]
    assert rows(pg_dsn, pg_schema, "SELECT token, owner FROM tickwork_claims") == [("t", "A")]
    assert rows(pg_dsn, pg_schema, "SELECT id FROM tickwork_jobs") == [("~x",)]
    assert store.history("~x") == []


def test_a_recovery_passes_a_claim_being_written_and_takes_the_rest(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    """A stalled owner's start holds one claim row, uncommitted, as the recovery looks.

    The recovery recovers the other expired claims at once and leaves that one to its
    next look (where the start has committed or rolled back). Waiting for the row, the
    recovering node's whole store lane (its renewals too) would hang on the stalled
    owner, and a batch locking its starts' claim rows before its finishes' job rows
    would deadlock with it.
    """
    owner, recoverer = open_pg(), open_pg()
    owner.upsert(spec("a", At(100.0)), 100.0)
    owner.upsert(spec("b", At(100.0)), 100.0)
    claims = {c.job_id: c for c in claim(owner, 100.0, advance=once)}
    first: list[Any] = []
    with admin(pg_dsn) as start:
        start.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        start.execute("BEGIN")
        start.execute(
            "UPDATE tickwork_claims SET started = 100.5 WHERE token = %s", (claims["a"].token,)
        )
        thread = threading.Thread(
            target=lambda: first.extend(recoverer.recover_expired(100.0 + LEASE + 1))
        )
        thread.start()
        thread.join(timeout=60)
        held = thread.is_alive()  # still waiting for the row: a hang, the start held on
        start.execute("COMMIT")
        thread.join(timeout=60)
    assert not held, "the recovery waited for a claim row another transaction holds"
    assert [(r.claim.job_id, r.action) for r in first] == [("b", "released")]
    later = recoverer.recover_expired(100.0 + LEASE + 2)
    assert [(r.claim.job_id, r.action) for r in later] == [("a", "abandoned")]


def test_a_pause_ending_on_two_nodes_at_once_resumes_once_and_keeps_a_new_pause(
    open_pg: Callable[..., PostgresStore], pg_dsn: str, pg_schema: str
) -> None:
    """A pause's ``until`` comes; meanwhile an operator pauses the job again, longer.

    Each node's claim ends the pauses whose time came. One that read the old ``until``
    and then waited for the row must decide again on what was committed: the new pause
    stands (not undone by the old one's end) and no "resume" is recorded. Deciding on
    its first read, the node resumed the job the operator had just paused (and two
    nodes ending one pause recorded two resumes).
    """
    store, node = open_pg(), open_pg()
    store.upsert(spec("job", Every(10)), 100.0)
    store.pause_job("job", by="op", at=100.0, until=150.0)
    with admin(pg_dsn) as operator:
        operator.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        operator.execute("BEGIN")  # the operator's new pause, not committed yet
        operator.execute(
            "UPDATE tickwork_jobs SET paused = true, paused_until = 10000 WHERE id = 'job'"
        )
        _meanwhile(operator, lambda: claim(node, 200.0, owner="B"), pg_dsn, pg_schema)
    state = store.get("job")
    assert state is not None and state.paused
    assert rows(pg_dsn, pg_schema, "SELECT paused_until FROM tickwork_jobs") == [(10000.0,)]
    assert [a.action for a in store.actions("job")] == ["pause"]


def test_a_transaction_a_frozen_node_left_open_is_ended_and_its_rows_taken(
    open_pg: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node frozen mid-transaction (a paused VM) holds a due job's row.

    The server ends the store's transaction once it has been idle
    `IDLE_IN_TRANSACTION` seconds (1 s here), so another node claims the job. Without
    the limit the row stayed locked for as long as the node stayed frozen: every claim
    skipped it (and a pool's row would have made every pool-limited claim wait).
    """
    monkeypatch.setattr(pg_mod, "IDLE_IN_TRANSACTION", 1.0)
    frozen, other = open_pg(), open_pg()
    frozen.upsert(spec("job", At(100.0)), 100.0)
    conn = frozen._connect()  # a session of the store's, with its settings
    try:
        conn.execute("SELECT 1 FROM tickwork_jobs WHERE id = 'job' FOR NO KEY UPDATE")
        # ... and nothing more: the node is frozen, its transaction open.
        got = wait_until(
            "another node to claim the job",
            lambda: [c.job_id for c in claim(other, 200.0, owner="B", advance=once)],
        )
        assert got == ["job"]
    finally:
        with contextlib.suppress(Exception):
            conn.close()
