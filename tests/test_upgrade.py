"""Upgrades are safe (issue 25, point 4): a state written by an older release opens in this one.

The fixtures in tests/fixtures/upgrade were written by the old releases' own code
(tools/make_old_states.py checks each commit out and runs it): an SQLite file and a
PostgreSQL schema (pg_dump, replayed here) per release, with a manifest of what that
release read back. Opening one with the current code migrates it in one transaction to
``len(MIGRATIONS)``, keeps every job, next run, pause, claim and ledger entry, and leaves
a state that works. A migration killed with SIGKILL half-way leaves the old state exactly
as it was (never half-migrated), and the next open migrates it fully. A state from a
newer release is refused, untouched, with a message saying what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from tickwork import At
from tickwork.stores import JobSpec, SchemaVersionError
from tickwork.stores import sqlite as sqlite_mod
from tickwork.stores.contract import OneOffCounts, oneoff_rows

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "upgrade"
PLACEHOLDER = "tw_fixture_old"  # the schema name in the dumps (tools/make_old_states.py)
COMMITS = sorted(p.stem.split("-", 1)[1] for p in FIXTURES.glob("sqlite-*.json"))
KINDS = ["sqlite", "postgres"]
MARKER_DEADLINE = 120.0  # seconds to wait for the child's marker (a loaded machine)


def test_fixtures_exist() -> None:
    assert len(COMMITS) >= 2, "tools/make_old_states.py writes one fixture per old release"
    for commit in COMMITS:
        for name in (
            f"sqlite-{commit}.sqlite",
            f"postgres-{commit}.sql",
            f"postgres-{commit}.json",
        ):
            assert (FIXTURES / name).is_file(), name


# -- one old state, in either store ------------------------------------------------------


@dataclass
class OldState:
    """An old release's state, copied or replayed for one test."""

    kind: str
    commit: str
    manifest: dict[str, Any]
    path: Path | None = None  # sqlite
    dsn: str = ""  # postgres
    schema: str = ""

    def open(self) -> Any:
        """The store, with the current code (migrating the state if it is old)."""
        # No pruning by age: the fixtures' ledger entries were recorded when they were made.
        if self.kind == "sqlite":
            return sqlite_mod.SQLiteStore(self.path or "", history_days=None)
        from tickwork.stores.postgres import PostgresStore

        return PostgresStore(self.dsn, schema=self.schema, history_days=None)

    def target(self) -> list[str]:
        """The child's arguments that name the state."""
        if self.kind == "sqlite":
            return [str(self.path)]
        return [self.dsn, self.schema]

    def query(self, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one statement, read outside tickwork (a raw connection)."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(str(self.path))
            try:
                return conn.execute(text, params).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return [tuple(row) for row in conn.execute(text, params).fetchall()]

    def execute(self, text: str, params: tuple[Any, ...] = ()) -> None:
        if self.kind == "sqlite":
            conn = sqlite3.connect(str(self.path), isolation_level=None)
            try:
                conn.execute(text, params)
            finally:
                conn.close()
            return
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(text, params)

    def version(self) -> int:
        """The schema version the state says it has."""
        if self.kind == "sqlite":
            return int(self.query("PRAGMA user_version")[0][0])
        rows = self.query(
            f'SELECT value FROM "{self.schema}".tickwork_meta WHERE key = %s', ("schema_version",)
        )
        return int(rows[0][0])

    def columns(self) -> dict[str, list[str]]:
        """Every table of the state and its columns: the schema's shape."""
        if self.kind == "sqlite":
            tables = self.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            return {
                t: [str(c[1]) for c in self.query(f'PRAGMA table_info("{t}")')] for (t,) in tables
            }
        rows = self.query(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (self.schema,),
        )
        out: dict[str, list[str]] = {}
        for table, column in rows:
            out.setdefault(str(table), []).append(str(column))
        return out

    def indexes(self) -> list[str]:
        if self.kind == "sqlite":
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
        else:
            rows = self.query(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s ORDER BY indexname",
                (self.schema,),
            )
        return [str(r[0]) for r in rows]

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, in a stable order: the data, read raw."""
        prefix = "" if self.kind == "sqlite" else f'"{self.schema}".'
        return {
            t: sorted(self.query(f"SELECT * FROM {prefix}{t}"), key=repr) for t in self.columns()
        }


def _load(kind: str, commit: str, tmp_path: Path, request: pytest.FixtureRequest) -> OldState:
    manifest = json.loads((FIXTURES / f"{kind}-{commit}.json").read_text())
    if kind == "sqlite":
        path = tmp_path / "state.sqlite3"
        shutil.copyfile(FIXTURES / f"sqlite-{commit}.sqlite", path)
        path.chmod(0o600)
        return OldState(kind, commit, manifest, path=path)
    import psycopg

    dsn = request.getfixturevalue("pg_dsn")
    schema = request.getfixturevalue("pg_schema")
    dump = (FIXTURES / f"postgres-{commit}.sql").read_text()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(dump.replace(PLACEHOLDER, schema))
    return OldState(kind, commit, manifest, dsn=dsn, schema=schema)


@pytest.fixture(params=[(k, c) for k in KINDS for c in COMMITS], ids=lambda p: f"{p[0]}-{p[1]}")
def old(request: pytest.FixtureRequest, tmp_path: Path) -> OldState:
    kind, commit = request.param
    return _load(kind, commit, tmp_path, request)


@pytest.fixture(params=KINDS)
def newest_old(request: pytest.FixtureRequest, tmp_path: Path) -> OldState:
    """The newest old state of each store."""
    return _load(request.param, COMMITS[-1], tmp_path, request)


def _latest(kind: str) -> int:
    if kind == "sqlite":
        return len(sqlite_mod.MIGRATIONS)
    from tickwork.stores import postgres

    return len(postgres.MIGRATIONS)


# -- what the old release wrote is what the new one reads ---------------------------------


def _same(new: Any, old: dict[str, Any] | None, what: str) -> None:
    """Every field the old release recorded reads back equal (new fields may be added)."""
    if old is None:
        assert new is None, what
        return
    assert new is not None, what
    names = {f.name for f in fields(new)}
    for key, value in old.items():
        if key in names:
            got = getattr(new, key)
            if isinstance(value, dict) or isinstance(got, (tuple, list)):
                continue  # nested: compared by the callers where it matters
            assert got == value, f"{what}.{key}: {got!r} != {value!r}"


def check_manifest(store: Any, manifest: dict[str, Any]) -> None:
    states = {s.spec.id: s for s in store.jobs()}
    assert sorted(states) == sorted(j["id"] for j in manifest["jobs"])
    for job in manifest["jobs"]:
        state = states[job["id"]]
        assert state.next_run == job["next_run"], job["id"]
        assert state.paused == job["paused"], job["id"]
        spec = state.spec.to_dict()
        for key, value in job["spec"].items():
            if key == "schedule":
                for skey, svalue in value.items():
                    assert spec["schedule"][skey] == svalue, (job["id"], skey)
            elif key != "v":
                assert spec[key] == value, (job["id"], key)
        _same(state.last_run, job["last_run"], f"{job['id']}.last_run")
        if "pause" in job:  # a pause made at run time, with who, when and why
            _same(state.pause, job["pause"], f"{job['id']}.pause")
        if "first_slot" in job:
            assert state.first_slot == job["first_slot"], job["id"]
        assert len(state.claims) == len(job["claims"]), job["id"]
        for claim, old_claim in zip(state.claims, job["claims"], strict=True):
            _same(claim, old_claim, f"{job['id']}.claim")
    ledger = {r.seq: r for r in store.history(limit=1000)}
    assert sorted(ledger) == sorted(r["seq"] for r in manifest["ledger"])
    for entry in manifest["ledger"]:
        _same(ledger[entry["seq"]], entry, f"ledger[{entry['seq']}]")
    if "actions" in manifest:
        actions = {a.seq: a for a in store.actions(limit=1000)}
        assert sorted(actions) == sorted(a["seq"] for a in manifest["actions"])
        for action in manifest["actions"]:
            _same(actions[action["seq"]], action, f"actions[{action['seq']}]")


def check_works(store: Any, manifest: dict[str, Any]) -> None:
    """Claim, start, finish and read the history of the migrated state."""
    t0 = manifest["t0"]
    now = t0 + 1000

    def advance(state: Any, at: float) -> float:
        return float(state.next_run) + float(state.spec.schedule.interval)

    claims = store.claim_due(now, owner="new-node", lease_seconds=60, limit=10, advance=advance)
    ids = sorted(c.job_id for c in claims)
    triggered = "actions" in manifest  # the newer release's fixture queued a manual run
    assert ids == (["every-5m", "once"] if triggered else ["every-5m"])
    for claim in claims:
        assert store.start(claim, started=now + 1)
        assert store.finish(claim, outcome="ok", ended=now + 2)
    (held,) = store.get("held").claims  # the old release's held claim is still held
    assert store.finish(held, outcome="failed", ended=now + 3, error="ended after the upgrade")
    assert store.get("held").claims == ()
    every = store.get("every-5m")
    assert (every.next_run, every.last_run.scheduled, every.last_run.outcome) == (
        t0 + 1200,
        t0 + 900,
        "ok",
    )
    old_top = max(r["seq"] for r in manifest["ledger"])
    new = [r for r in store.history(limit=1000) if r.seq > old_top]
    assert sorted((r.job_id, r.outcome) for r in new) == sorted(
        [(i, "ok") for i in ids] + [("held", "failed")]
    )


def check_one_offs(store: Any, manifest: dict[str, Any]) -> None:
    """The migrated state takes one-offs (issue 41): enqueued once by key, run, gone."""
    now, due = manifest["t0"] + 1000, manifest["t0"] + 1  # due before any other job
    spec = JobSpec("~key:after-upgrade", "os:getcwd", At(due))
    (row,) = oneoff_rows(spec, [(spec.id, due, (), {})])
    assert store.enqueue([row]) == [True]
    assert store.enqueue([row]) == [False]
    assert store.oneoff_counts() == [OneOffCounts("os:getcwd", pending=1)]
    (claim,) = store.claim_due(
        now, owner="new-node", lease_seconds=60, limit=1, advance=lambda state, at: None
    )
    assert claim.job_id == row.id
    assert store.start(claim, started=now + 1)
    assert store.finish(claim, outcome="ok", ended=now + 2)
    assert store.get(row.id) is None
    assert [e.outcome for e in store.history(row.id)] == ["ok"]
    assert store.oneoff_counts() == [OneOffCounts("os:getcwd", done=1)]
    assert sorted(s.id for s in store.jobs()) == sorted(j["id"] for j in manifest["jobs"])


def migrate_and_check(old: OldState) -> None:
    """Open ``old`` with this code: migrated to the latest version, all kept, working."""
    store = old.open()
    try:
        assert old.version() == _latest(old.kind)
        check_manifest(store, old.manifest)
        check_works(store, old.manifest)
        check_one_offs(store, old.manifest)
    finally:
        store.close()


def test_an_old_state_is_migrated_and_keeps_everything(old: OldState) -> None:
    assert old.version() == old.manifest["schema_version"] < _latest(old.kind)
    migrate_and_check(old)
    store = old.open()  # opened again: nothing left to migrate, the work kept
    try:
        assert old.version() == _latest(old.kind)
        assert len(store.history(limit=1000)) > len(old.manifest["ledger"])
    finally:
        store.close()


# -- a newer state is refused ------------------------------------------------------------


def _fingerprint(state: OldState) -> Any:
    if state.kind == "sqlite":
        assert state.path is not None
        return hashlib.sha256(state.path.read_bytes()).hexdigest()
    return (state.columns(), state.rows())


def test_a_state_from_a_newer_release_is_refused_untouched(newest_old: OldState) -> None:
    state = newest_old
    state.open().close()  # migrated to the current version
    newer = _latest(state.kind) + 1
    if state.kind == "sqlite":
        state.execute(f"PRAGMA user_version = {newer}")
    else:
        state.execute(
            f'UPDATE "{state.schema}".tickwork_meta SET value = %s WHERE key = %s',
            (str(newer), "schema_version"),
        )
    before = _fingerprint(state)
    with pytest.raises(SchemaVersionError) as caught:
        state.open()
    message = str(caught.value)
    assert f"schema version {newer}; this tickwork supports up to {_latest(state.kind)}:" in message
    assert "written by a newer tickwork" in message
    assert "upgrade tickwork (pip install --upgrade tickwork) to open it" in message
    assert (
        "the file was not modified" if state.kind == "sqlite" else "nothing was modified"
    ) in message
    assert _fingerprint(state) == before
    assert state.version() == newer


# -- a migration killed half-way ---------------------------------------------------------


@pytest.fixture
def child() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()


def _wait_for(marker: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + MARKER_DEADLINE
    while not marker.exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the child ended ({proc.returncode}) before the marker: {err.decode()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no marker from the child after {MARKER_DEADLINE} s")
        time.sleep(0.02)


@pytest.mark.parametrize("at", ["first", "last"])
def test_a_migration_killed_half_way_leaves_the_old_state(
    old: OldState, at: str, tmp_path: Path, child: list[subprocess.Popen[bytes]]
) -> None:
    """Killed once the first step it needs ran, or once every step ran, before the commit."""
    step = old.manifest["schema_version"] if at == "first" else _latest(old.kind) - 1
    shape, indexes, rows = old.columns(), old.indexes(), old.rows()
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "upgrade_child.py"),
            str(marker),
            str(step),
            old.kind,
            *old.target(),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    child.append(proc)
    _wait_for(marker, proc)  # the step has run, inside the opening transaction
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    # Never half-migrated: the old version, the old tables, columns, indexes and rows.
    assert old.version() == old.manifest["schema_version"]
    assert old.columns() == shape
    assert old.indexes() == indexes
    assert old.rows() == rows
    # Opened again with the normal code: migrated fully, everything kept, and it works.
    migrate_and_check(old)


def test_the_command_line_says_what_to_do_with_a_newer_state(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    from tickwork.__main__ import main

    state = _load("sqlite", COMMITS[-1], tmp_path, request)
    state.open().close()
    state.execute(f"PRAGMA user_version = {_latest('sqlite') + 1}")
    assert main(["jobs", "--state", str(state.path)]) != 0
    err = capsys.readouterr().err
    assert "written by a newer tickwork; upgrade tickwork (pip install --upgrade tickwork)" in err
