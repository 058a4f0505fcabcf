"""SQLiteStore: the store contract, plus what only a SQLite file has to prove."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwork import At, Every
from tickwork.stores import JobSpec, JobState, SchemaVersionError, Store, StoreError, Upsert
from tickwork.stores import sqlite as sqlite_mod
from tickwork.stores.contract import spec_to_json
from tickwork.stores.sqlite import APPLICATION_ID, SQLiteStore

from .pool_contract import PoolContract
from .store_contract import FUNC, LEASE, StoreContract, claim, once, oneoff, spec


class TestSQLiteContract(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Iterator[Callable[..., Store]]:
        opened: list[SQLiteStore] = []

        def open_store(**kw: Any) -> Store:
            opened.append(SQLiteStore(tmp_path / "jobs.db", **kw))
            return opened[-1]

        yield open_store
        for s in opened:
            s.close()


class TestSQLitePools(PoolContract):
    open_store = TestSQLiteContract.open_store


class _WithoutReturning(sqlite3.Connection):
    """A connection that refuses ``RETURNING`` as an SQLite older than 3.35 does."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if "RETURNING" in sql.upper():
            raise sqlite3.OperationalError('near "RETURNING": syntax error')
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if "RETURNING" in sql.upper():
            raise sqlite3.OperationalError('near "RETURNING": syntax error')
        return super().executemany(sql, *args)


class TestSQLiteContractWithoutReturning(TestSQLiteContract):
    """The contract again on an SQLite older than 3.35.5 (no usable RETURNING)."""

    @pytest.fixture(autouse=True)
    def _no_returning(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sqlite_mod, "_RETURNING", False)
        connect = sqlite3.connect
        monkeypatch.setattr(
            sqlite3, "connect", lambda *a, **kw: connect(*a, **kw, factory=_WithoutReturning)
        )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def files_of(path: Path) -> dict[str, bytes]:
    """Every file next to ``path`` (the database and any -wal/-shm/-journal) and its bytes."""
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


def make_store_file(db: Path, *jobs: str) -> None:
    with SQLiteStore(db) as s:
        for job_id in jobs:
            s.upsert(spec(job_id), 100.0)


# -- the file ---------------------------------------------------------------------------


def test_wal_mode_and_application_id(db: Path) -> None:
    with SQLiteStore(db) as s:
        s.upsert(spec(), 1.0)
        conn = raw(db)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
        conn.close()


def test_files_are_owner_only_whatever_the_umask(db: Path) -> None:
    old = os.umask(0o002)
    try:
        with SQLiteStore(db) as s:
            s.upsert(spec(), 1.0)  # a write creates the -wal and -shm files
            names = {p.name for p in db.parent.iterdir()}
            assert names == {"jobs.db", "jobs.db-wal", "jobs.db-shm"}
            for p in db.parent.iterdir():
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
    finally:
        os.umask(old)


def test_an_existing_file_keeps_its_mode_and_a_loose_one_is_warned_about(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db.touch()
    db.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="tickwork.stores"), SQLiteStore(db) as s:
        s.upsert(spec(), 1.0)
    assert stat.S_IMODE(db.stat().st_mode) == 0o644
    assert "accessible to other users (mode 644)" in caplog.text


def test_the_row_is_json_text_never_pickle(db: Path) -> None:
    with SQLiteStore(db) as s:
        s.upsert(spec(args=(1, "two"), kwargs={"three": [3.0]}), 1.0)
        (c,) = claim(s, 1.0)
        s.start(c, started=1.0)
        s.finish(c, outcome="failed", ended=2.0, error="boom")
    conn = raw(db)
    for table in ("jobs", "claims"):
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        for col in columns:
            blobs = conn.execute(f"SELECT count(*) FROM {table} WHERE typeof({col}) = 'blob'")
            assert blobs.fetchone()[0] == 0, f"{table}.{col} holds a blob"
    kind, text = conn.execute("SELECT typeof(spec), spec FROM jobs").fetchone()
    conn.close()
    assert kind == "text"
    data = json.loads(text)
    assert data["v"] == 1 and data["args"] == [1, "two"] and data["kwargs"] == {"three": [3.0]}
    assert data["func"] == FUNC


def test_memory_store_works(tmp_path: Path) -> None:
    with SQLiteStore(":memory:") as s:
        assert s.upsert(spec(), 1.0) is Upsert.CREATED
        assert len(claim(s, 1.0)) == 1
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_and_directory_path_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"^cannot create database file '.*nope/jobs.db': "):
        SQLiteStore(tmp_path / "nope" / "jobs.db")
    with pytest.raises(StoreError, match=r"is not a regular file$"):
        SQLiteStore(tmp_path)


def test_busy_timeout_is_validated(db: Path) -> None:
    with pytest.raises(ValueError, match=r"^busy_timeout must be a finite number > 0, got -1$"):
        SQLiteStore(db, busy_timeout=-1)
    assert not db.exists()


def test_importing_the_package_does_not_load_sqlite() -> None:
    code = "import sys, tickwork.stores; print('sqlite3' in sys.modules)"
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# -- foreign, corrupt and newer files are refused and left untouched ---------------------


def test_non_sqlite_file_is_refused_untouched(db: Path) -> None:
    db.write_bytes(b"name,when\nbackup,03:00\n")
    before = files_of(db)
    with pytest.raises(StoreError, match=r"is not a SQLite database \(it starts with b'name,when"):
        SQLiteStore(db)
    assert files_of(db) == before


def test_foreign_sqlite_database_is_refused_untouched(db: Path) -> None:
    conn = raw(db)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.close()
    before = files_of(db)
    with pytest.raises(StoreError, match=r"another application \(application_id 0x0, 1 schema"):
        SQLiteStore(db)
    assert files_of(db) == before


def test_other_application_id_is_refused_even_when_empty(db: Path) -> None:
    conn = raw(db)
    conn.execute("PRAGMA application_id = 42")
    conn.close()
    before = files_of(db)
    with pytest.raises(StoreError, match=r"application_id 0x2a"):
        SQLiteStore(db)
    assert files_of(db) == before


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:100] + b"\x5a\xa5" * (len(b) // 2), id="garbage-after-header"),
        pytest.param(lambda b: b[:50], id="truncated-header"),
        pytest.param(lambda b: b[:20] + b"\xff" * (len(b) - 20), id="overwritten"),
    ],
)  # fmt: skip
def test_corrupt_database_is_refused_untouched(db: Path, damage: Callable[[bytes], bytes]) -> None:
    make_store_file(db, "a", "b")
    db.write_bytes(damage(db.read_bytes()))
    before = files_of(db)
    with pytest.raises(StoreError, match=r"the file was not modified: if it is the state,"):
        SQLiteStore(db)
    assert files_of(db) == before


def test_newer_schema_is_refused_untouched(db: Path) -> None:
    make_store_file(db, "a")
    conn = raw(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = files_of(db)
    with pytest.raises(
        SchemaVersionError,
        match=rf"schema version 99; this tickwork supports up to {len(sqlite_mod.MIGRATIONS)}:",
    ):
        SQLiteStore(db)
    assert files_of(db) == before


# -- migrations -------------------------------------------------------------------------


def test_an_older_schema_is_migrated_keeping_the_data(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store_file(db, "a", "b")

    def step(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE jobs ADD COLUMN note TEXT")
        conn.execute("UPDATE jobs SET note = 'from before'")

    latest = len(sqlite_mod.MIGRATIONS) + 1
    monkeypatch.setattr(sqlite_mod, "MIGRATIONS", [*sqlite_mod.MIGRATIONS, step])
    with SQLiteStore(db) as s:
        assert [j.id for j in s.jobs()] == ["a", "b"]
        assert s.upsert(spec("c"), 1.0) is Upsert.CREATED
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == latest
    assert conn.execute("SELECT note FROM jobs WHERE id = 'a'").fetchone()[0] == "from before"
    conn.close()
    with SQLiteStore(db) as s:  # already current: opening again changes nothing
        assert len(s.jobs()) == 3


def test_a_new_file_and_a_migration_each_log_one_line(
    db: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = len(sqlite_mod.MIGRATIONS)
    with caplog.at_level(logging.INFO, logger="tickwork.stores"):
        SQLiteStore(db).close()
        SQLiteStore(db).close()  # current already: says nothing
    assert [r.getMessage() for r in caplog.records] == [
        f"created database {str(db)!r} at schema version {latest}"
    ]
    caplog.clear()
    monkeypatch.setattr(sqlite_mod, "MIGRATIONS", [*sqlite_mod.MIGRATIONS, lambda c: None])
    with caplog.at_level(logging.INFO, logger="tickwork.stores"):
        SQLiteStore(db).close()
    assert [r.getMessage() for r in caplog.records] == [
        f"migrated database {str(db)!r} from schema version {latest} to {latest + 1}"
    ]


def test_a_failing_migration_leaves_the_old_version(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store_file(db, "a")

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE jobs ADD COLUMN half_done TEXT")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(sqlite_mod, "MIGRATIONS", [*sqlite_mod.MIGRATIONS, broken])
    with pytest.raises(StoreError, match=r"^cannot prepare database .*syntax error"):
        SQLiteStore(db)
    monkeypatch.undo()
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    conn.close()
    assert "half_done" not in columns
    with SQLiteStore(db) as s:
        assert [j.id for j in s.jobs()] == ["a"]


def test_a_version_1_file_with_a_live_claim_migrates_and_recovers(db: Path) -> None:
    # A file written by tickwork before retries existed (schema 1), holding a claim
    # whose owner died: it opens, gains the retry column, and the claim is re-offered.
    conn = raw(db)
    sqlite_mod.MIGRATIONS[0](conn)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version=1")
    conn.execute(
        "INSERT INTO jobs (id, spec, schedule, overlap, paused, next_run)"
        " VALUES ('job', ?, '{}', 'allow', 0, 120.0)",
        (spec_to_json(spec(overlap="allow")),),
    )
    conn.execute(
        "INSERT INTO claims VALUES ('old-token', 'job', 'dead', 100.0, 100.0, 130.0, NULL)"
    )
    conn.commit()
    conn.close()
    with SQLiteStore(db) as s:
        (old,) = s.get("job").claims  # type: ignore[union-attr]
        assert (old.token, old.owner, old.retry) == ("old-token", "dead", False)
        (r,) = s.recover_expired(130.0)
        assert r.action == "released"
        assert s.get("job").next_run == 120.0  # type: ignore[union-attr]
        (again,) = claim(s, 130.0, "B", limit=1)
        assert (again.scheduled, again.retry, again.owner) == (100.0, True, "B")
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(claims)")]
    conn.close()
    assert columns[-2:] == ["retry", "origin"]


# -- rows this version cannot read ------------------------------------------------------


def write_raw_spec(db: Path, job_id: str, text: str) -> None:
    conn = raw(db)
    conn.execute("UPDATE jobs SET spec = ? WHERE id = ?", (text, job_id))
    conn.close()


def test_a_row_from_a_newer_version_is_skipped_not_destroyed(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_store_file(db, "new", "old")
    newer = json.dumps({"v": 99, "id": "new", "something": "else"})
    write_raw_spec(db, "new", newer)
    with SQLiteStore(db) as s, caplog.at_level(logging.WARNING, logger="tickwork.stores"):
        with pytest.raises(SchemaVersionError, match=r"'new' has version 99"):
            s.get("new")
        assert [j.id for j in s.jobs()] == ["old"]
        assert [c.job_id for c in claim(s, 100.0)] == ["old"]  # "new" never blocks "old"
        with pytest.raises(SchemaVersionError, match=r"refusing to overwrite it"):
            s.upsert(spec("new"), 1.0)
    assert caplog.text.count("skipping job 'new'") == 1  # logged once, not on every poll
    conn = raw(db)
    assert conn.execute("SELECT spec FROM jobs WHERE id = 'new'").fetchone()[0] == newer
    conn.close()


def test_a_corrupt_row_is_skipped_and_repaired_by_a_redeclaration(db: Path) -> None:
    make_store_file(db, "bad", "good")
    write_raw_spec(db, "bad", "{not json")
    with SQLiteStore(db) as s:
        with pytest.raises(StoreError, match=r"^stored job spec is not valid JSON"):
            s.get("bad")
        assert [c.job_id for c in claim(s, 100.0, limit=1)] == ["good"]
        assert s.upsert(spec("bad"), 100.0) is Upsert.UPDATED
        assert s.get("bad") is not None


# -- concurrency ------------------------------------------------------------------------


def test_reentrant_call_from_advance_is_refused_and_claims_nothing(db: Path) -> None:
    with SQLiteStore(db) as s:
        s.upsert(spec(), 100.0)
        before = s.jobs()

        def advance(state: JobState, now: float) -> float | None:
            s.get("job")
            return None

        with pytest.raises(StoreError, match=r"from inside another store call"):
            claim(s, 100.0, advance=advance)
        assert s.jobs() == before


def test_threads_sharing_one_store_claim_each_job_once(db: Path) -> None:
    with SQLiteStore(db) as s:
        for i in range(60):
            s.upsert(JobSpec(f"j{i:02}", FUNC, At(100.0)), 100.0)
        got: list[str] = []
        lock = threading.Lock()

        def worker(owner: str) -> None:
            while batch := claim(s, 100.0, owner, limit=3, advance=once):
                for c in batch:
                    assert s.start(c, started=100.0)
                    assert s.finish(c, outcome="ok", ended=100.0)
                with lock:
                    got.extend(c.job_id for c in batch)

        threads = [threading.Thread(target=worker, args=(f"t{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(got) == [f"j{i:02}" for i in range(60)]


WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from tickwork.stores.sqlite import SQLiteStore
    path, owner, go = sys.argv[1:4]
    store = SQLiteStore(path, busy_timeout=30)
    open(go + "." + owner, "w").close()  # ready
    while not os.path.exists(go):
        time.sleep(0.001)
    got = []
    while batch := store.claim_due(
        100.0, owner=owner, lease_seconds=300, limit=3, advance=lambda s, n: None
    ):
        for c in batch:
            assert store.start(c, started=100.0)
            time.sleep(0.002)  # the job runs outside any transaction
            assert store.finish(c, outcome="ok", ended=100.0)
            got.append(c.job_id)
    store.close()
    print(json.dumps(got))
    """
)


def test_two_processes_claim_every_due_job_exactly_once(db: Path) -> None:
    jobs = [f"j{i:03}" for i in range(150)]
    with SQLiteStore(db) as s:
        for job_id in jobs:
            s.upsert(JobSpec(job_id, FUNC, At(100.0)), 100.0)
    go = db.parent / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), owner, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for owner in ("P1", "P2")
    ]
    deadline = time.monotonic() + 60
    while not all((db.parent / f"go.{o}").exists() for o in ("P1", "P2")):
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.005)
    go.touch()  # both have the store open: start claiming together
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    claimed = results[0] + results[1]
    assert sorted(claimed) == jobs  # every job once: none lost, none twice
    assert all(results), f"one process got nothing: {[len(r) for r in results]}"
    with SQLiteStore(db) as s:
        states = s.jobs()
    assert all(j.last_run is not None and j.last_run.outcome == "ok" for j in states)
    assert all(j.claims == () and j.next_run is None for j in states)


# -- a real SIGKILL at each point of a run ----------------------------------------------

KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from tickwork.stores.sqlite import SQLiteStore
    path, point = sys.argv[1:3]
    store = SQLiteStore(path)

    def advance(state, now):
        if point == "in-claim":
            os.kill(os.getpid(), signal.SIGKILL)  # inside the claim's transaction
        return None

    claims = store.claim_due(100.0, owner="doomed", lease_seconds=30, limit=10, advance=advance)
    for c in claims:
        if point != "before-start":
            assert store.start(c, started=100.0)
    os.kill(os.getpid(), signal.SIGKILL)  # mid-run, or after the run before finish
    """
)


@pytest.mark.parametrize(
    ("point", "most", "least"),
    [
        ("in-claim", None, None),
        ("before-start", "released", "released"),
        ("after-start", "abandoned", "requeued"),
    ],
)
def test_sigkill_at_each_point_of_a_run(
    db: Path, point: str, most: str | None, least: str | None
) -> None:
    # Declared one-shots, and one-offs (issue 41) beside them: the same semantics.
    with SQLiteStore(db) as s:
        s.upsert(JobSpec("most", FUNC, At(100.0)), 100.0)
        s.upsert(JobSpec("least", FUNC, At(100.0), delivery="at_least_once"), 100.0)
        s.enqueue([oneoff("most", 100.0), oneoff("least", 100.0, delivery="at_least_once")])
    proc = subprocess.run(
        [sys.executable, "-c", KILLED, str(db), point], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -9, proc.stderr
    ids = ["least", "most", "~least", "~most"]
    with SQLiteStore(db, busy_timeout=1) as s:  # the dead process left no lock behind
        if most is None:  # the claim rolled back: nothing taken, all still due
            assert [(j.id, j.next_run, j.claims) for j in map(s.get, ids)] == [  # type: ignore[union-attr]
                (job_id, 100.0, ()) for job_id in ids
            ]
            assert s.recover_expired(1000.0) == []
            return
        assert all(len(j.claims) == 1 for j in map(s.get, ids))  # type: ignore[union-attr]
        actions = {r.claim.job_id: r.action for r in s.recover_expired(130.0)}
        assert actions == {"most": most, "least": least, "~most": most, "~least": least}
        due = sorted(c.job_id for c in claim(s, 130.0, "survivor", advance=once))
        expected = {"released": True, "requeued": True, "abandoned": False}
        assert due == sorted(j for j, a in actions.items() if expected[a])
        if most == "abandoned":
            last = s.get("most").last_run  # type: ignore[union-attr]
            assert last is not None and last.outcome == "abandoned" and last.started == 100.0
            assert s.get("~most") is None  # the one-off's slot ended: its row is gone
            assert [(e.outcome, e.started) for e in s.history("~most")] == [("abandoned", 100.0)]
        else:
            assert s.get("~most") is not None


def test_a_version_4_file_gains_the_slot_ledger_and_keeps_everything(db: Path) -> None:
    # A file of the schema before the ledger (4), with a job that ran and one claim
    # held: both survive the migration, and the next finish writes the first entry.
    conn = raw(db)
    for step in sqlite_mod.MIGRATIONS[:4]:
        step(conn)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version=4")
    conn.execute(
        "INSERT INTO jobs (id, spec, schedule, overlap, paused, next_run, last_scheduled,"
        " last_started, last_ended, last_outcome) VALUES ('job', ?, '{}', 'skip', 0, 130.0,"
        " 110.0, 110.5, 111.0, 'ok')",
        (spec_to_json(spec()),),
    )
    conn.execute("INSERT INTO claims VALUES ('tok', 'job', 'A', 120.0, 120.0, 150.0, 120.5, 0)")
    conn.commit()
    conn.close()
    with SQLiteStore(db) as s:
        state = s.get("job")
        assert state is not None and state.next_run == 130.0
        assert state.last_run is not None and state.last_run.outcome == "ok"
        (held,) = state.claims
        assert s.history() == []
        assert s.finish(held, outcome="ok", ended=121.0)
        (e,) = s.history()
        assert (e.job_id, e.scheduled, e.started, e.ended, e.node) == (
            "job",
            120.0,
            120.5,
            121.0,
            "A",
        )
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
    conn.close()


def test_a_version_6_file_gains_the_first_slot_and_does_not_guess_it(db: Path) -> None:
    # A file of the schema before first slots (6), with a job, a waiting backfilled run
    # and a ledger entry: it opens (migrated in one transaction), keeps them all, and
    # the old job's first slot is not known, so a backfill of it is not clipped; a job
    # declared now has one.
    conn = raw(db)
    for step in sqlite_mod.MIGRATIONS[:6]:
        step(conn)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version=6")
    conn.execute(
        "INSERT INTO jobs (id, spec, schedule, overlap, paused, next_run) VALUES"
        " ('job', ?, '{}', 'skip', 0, 200.0)",
        (spec_to_json(spec()),),
    )
    conn.execute(
        "INSERT INTO claims VALUES ('tok', 'job', '', 150.0, 150.0, 150.0, NULL, 1, 'backfill')"
    )
    conn.execute(
        "INSERT INTO ledger (job_id, scheduled, outcome, started, ended, recorded)"
        " VALUES ('job', 140.0, 'ok', 140.5, 141.0, 141.0)"
    )
    conn.commit()
    conn.close()
    with SQLiteStore(db) as s:
        state = s.get("job")
        assert state is not None and state.first_slot is None and state.next_run == 200.0
        assert [(c.scheduled, c.origin) for c in state.waiting] == [(150.0, "backfill")]
        assert [e.scheduled for e in s.history("job")] == [140.0]
        assert s.backfill_job("job", [10.0, 20.0], by="a@x", at=190.0) == [10.0, 20.0]
        s.upsert(spec("new"), 300.0)
        assert s.get("new").first_slot == 300.0  # type: ignore[union-attr]
        assert s.cancel_waiting_runs("job", by="a@x", at=191.0) == [10.0, 20.0, 150.0]
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    assert columns[columns.index("first_slot") :] == ["first_slot", "pool_wait", "queue"]
    conn.close()


def test_opening_reads_the_header_and_the_schema_in_one_snapshot(tmp_path: Path) -> None:
    """Several processes open a new file at once (web workers): one creates the schema
    while another looks. Read in separate statements, the looker saw application_id 0
    and then the new tables, and refused the file as another application's."""
    path = str(tmp_path / "shared.db")
    sqlite3.connect(path).close()  # the new, empty file both see
    other = str(tmp_path / "other.db")

    class Interleaved:
        """A connection on which another process creates the store after the first read."""

        def __init__(self) -> None:
            self.conn = sqlite3.connect(path, isolation_level=None)
            self.reads = 0

        def execute(self, sql: str) -> Interleaved:
            self.rows = self.conn.execute(sql).fetchall()  # the read ends here
            self.reads += 1
            if self.reads == 1:
                SQLiteStore(path).close()  # the other worker: creates and migrates it
            return self

        def fetchone(self) -> Any:
            return self.rows[0]

    looker = Interleaved()
    with SQLiteStore(other) as store:
        try:
            assert store._inspect(looker) == 0  # type: ignore[arg-type]  # the empty file
        finally:
            looker.conn.close()
    with SQLiteStore(path) as store:  # and it is a tickwork database now
        assert store.jobs() == []


def test_a_file_another_process_is_creating_is_opened_once_it_is_free(tmp_path: Path) -> None:
    # Workers started together on a new file: one holds the write lock while it creates
    # the tables. Switching to WAL then fails at once with "database is locked" (SQLite
    # does not wait there); the store tries again within its busy timeout.
    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the write lock, as while creating the tables
    timer = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    timer.start()
    try:
        with SQLiteStore(path, busy_timeout=30) as store:
            assert store.jobs() == []
    finally:
        timer.join()
        other.close()


def test_a_sparse_claim_reads_only_what_can_find_something(db: Path) -> None:
    """A claim asks once which of its chores can find anything (issue 25).

    Ended pauses, expired leases and waiting runs are one read (`LookUpkeep`); the due
    jobs are looked up once when fewer than asked for are due; the claims a job holds
    are read only for jobs that allow overlap. Each chore still runs when it has work.
    """
    store = SQLiteStore(db)
    try:
        store.upsert(spec("job", At(100.0)), 100.0)
        store.upsert(spec("later", At(200.0)), 200.0)
        seen: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(seen.append)
        (c,) = claim(store, 100.0, advance=once)
        heads = [" ".join(s.split()[:3]) for s in seen if "FROM nodes" not in s]
        assert heads == [
            "BEGIN IMMEDIATE",
            "SELECT (SELECT min(paused_until)",  # the chores: pauses, leases, runs waiting
            "SELECT id, spec,",  # the due jobs, once: fewer than asked for (no pool limits)
            "INSERT INTO claims",
            "UPDATE jobs SET",
            "SELECT (SELECT j.next_run",  # the next wake-up, found by the claim
            "COMMIT",
        ]
        # Each chore runs when the read says it can find something: a pause that
        # ended, a lease that ended (its slot is re-offered and taken as a retry), and
        # the held claims of a job that allows overlap.
        store.upsert(spec("free", Every(10), overlap="allow"), 300.0)
        store.pause_job("later", by="op", at=150.0, until=250.0)
        seen.clear()
        taken = claim(store, 300.0 + LEASE, advance=once, limit=10)
        assert sorted((t.job_id, t.retry) for t in taken) == [
            ("free", False), ("job", True), ("later", False)
        ]  # fmt: skip
        text = "\n".join(seen)
        assert "UPDATE jobs SET paused = 0" in text  # the pause ended
        assert "JOIN jobs j ON j.id = c.job_id WHERE c.owner <> ''" in text  # recovery
        assert "FROM claims WHERE job_id" in text  # the claims held by "free"
        assert c.job_id == "job"
    finally:
        store.close()


@pytest.mark.parametrize("returning", [True, False])
def test_a_run_is_six_statements_and_its_release_is_one(
    db: Path, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    """The statements of a claimed, started and finished one-shot (issue 25).

    Its claim (the row inserted, the job's next run moved), its start, and its finish:
    the claim released in one statement that also reads its start and whether its job
    has downstream jobs, the job's last run, its ledger entry. `docs/durability.md`
    counts them.
    """
    from tickwork.stores.contract import Finish, Start

    # True: as this SQLite runs it (RETURNING from 3.35.5 on); False: an older one.
    monkeypatch.setattr(sqlite_mod, "_RETURNING", returning and sqlite_mod._RETURNING)
    store = SQLiteStore(db)
    try:
        store.upsert(spec("job", At(100.0)), 100.0)
        seen: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(seen.append)
        (c,) = claim(store, 100.0, advance=once)
        claim_statements = [s for s in seen if s.split()[0] in ("INSERT", "UPDATE", "DELETE")]
        seen.clear()
        assert store.record([Start(c, 100.5)], []) == ([True], [])
        assert store.record([], [Finish(c, "ok", 101.0)]) == ([], [True])
        run = [s for s in seen if s not in ("BEGIN IMMEDIATE", "COMMIT")]
        assert [s.split()[0] for s in claim_statements] == ["INSERT", "UPDATE"]
        # Without RETURNING (SQLite before 3.35.5) the release reads the claim first,
        # then whether the claim held back the job's next run, and the finish asks
        # whether the job has downstream jobs.
        release = (
            ["DELETE FROM claims"]
            if sqlite_mod._RETURNING
            else [
                "SELECT started FROM",
                "DELETE FROM claims",
                "SELECT overlap <>",
                "SELECT job_id, on_outcome",
            ]
        )
        assert [" ".join(s.split()[:3]) for s in run] == [
            "UPDATE claims SET",  # the start
            *release,  # RETURNING its start, whether it has downstream jobs, held back
            "UPDATE jobs SET",  # the last run
            "INSERT INTO ledger",  # the ledger entry
        ]
        (entry,) = store.history("job")
        assert (entry.started, entry.ended, entry.outcome) == (100.5, 101.0, "ok")
    finally:
        store.close()


def test_new_jobs_are_declared_with_one_insert_each_and_announced_once(db: Path) -> None:
    """`upsert_many` creates new jobs set-based (issue 41): one ``executemany`` of their
    rows and one announcement, not a read, an insert, a delete and a count per job."""
    store = SQLiteStore(db)
    try:
        seen: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(seen.append)
        batch = [(spec(f"n{i:03}", Every(60)), 100.0 + i) for i in range(200)]
        done = store.upsert_many(batch)
        assert done == [Upsert.CREATED] * 200
        writes = [s.split()[0] for s in seen if s.split()[0] in ("INSERT", "UPDATE", "DELETE")]
        assert writes == ["INSERT"] * 200 + ["UPDATE"]  # the rows, then the change counter
        assert store.get("n007").next_run == 107.0  # type: ignore[union-attr]
        assert store.upsert_many(batch) == [Upsert.UNCHANGED] * 200
    finally:
        store.close()
