"""Make the old-state fixtures of tests/test_upgrade.py: states written by older releases.

For each commit in `POINTS`, this checks the commit out with ``git worktree add`` into a
temporary folder and runs ``tools/old_state_writer.py`` with that tree's ``src`` first on
``PYTHONPATH``, so the state is written by the old code itself:

- ``tests/fixtures/upgrade/sqlite-<commit>.sqlite``: an SQLite state file;
- ``tests/fixtures/upgrade/postgres-<commit>.sql``: a PostgreSQL schema, dumped with
  ``pg_dump --inserts`` (plain SQL, replayed by the tests with psycopg; the schema is named
  `PLACEHOLDER`, which the tests replace with a schema of their own);
- ``...-<commit>.json`` beside each: what the old code read back from the state (jobs,
  next runs, paused flags, claims, ledger rows, actions), which the tests compare against.

Re-run from the repository root (all of `POINTS`, or the commits named)::

    .venv/bin/python tools/make_old_states.py [COMMIT ...]

PostgreSQL: ``TICKWORK_PG_DSN`` names a server to use; without it a throwaway server is
started as the test suite does (``tests/pg_server.py``), and its ``pg_dump`` is used.
The fixtures are deterministic except for claim tokens and the ledger's ``recorded``
times, so re-running changes those only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "upgrade"
WRITER = ROOT / "tools" / "old_state_writer.py"
PLACEHOLDER = "tw_fixture_old"

#: (commit, why this one). The first has the slot ledger but no runtime control (SQLite
#: schema 5, PostgreSQL 4); the second is the last before this round's schema steps
#: (SQLite 7, PostgreSQL 6); the third the last before one-offs (SQLite 12, PostgreSQL 11).
POINTS = [
    ("3ca7687", "slot ledger, before runtime control (issue 14)"),
    ("4af5497", "runtime control and first_slot, before alerts, chains and pools"),
    ("ac73ea5", "alerts, chains, pools and daemons, before one-offs (issue 41)"),
]

sys.path.insert(0, str(ROOT / "tests"))
import pg_server  # noqa: E402  (the suite's throwaway server)


@contextmanager
def old_tree(commit: str) -> Iterator[Path]:
    """The repository at ``commit``, checked out in a temporary folder."""
    where = Path(tempfile.mkdtemp(prefix=f"tw-old-{commit}-")) / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), commit],
        check=True,
        capture_output=True,
    )
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=True
        )
        shutil.rmtree(where.parent, ignore_errors=True)


@contextmanager
def pg_server_dsn() -> Iterator[str]:
    """``TICKWORK_PG_DSN``, or a throwaway server for as long as the block runs."""
    dsn = os.environ.get("TICKWORK_PG_DSN", "")
    if dsn:
        yield dsn
        return
    bindir = pg_server.find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries found: set TICKWORK_PG_DSN")
    keeper = subprocess.Popen(
        [sys.executable, pg_server.__file__, str(bindir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert keeper.stdin is not None and keeper.stdout is not None
    try:
        status, _, detail = keeper.stdout.readline().strip().partition(" ")
        if status != "ready":
            raise SystemExit(f"cannot start a throwaway PostgreSQL server: {detail}")
        yield detail
    finally:
        keeper.stdin.close()
        keeper.wait(timeout=120)


def pg_dump_path() -> str:
    """The ``pg_dump`` beside the server binaries the suite uses (or on ``PATH``)."""
    bindir = pg_server.find_bindir()
    found = bindir / "pg_dump" if bindir is not None else None
    if found is not None and found.exists():
        return str(found)
    which = shutil.which("pg_dump")
    if which is None:
        raise SystemExit("pg_dump not found")
    return which


def write(tree: Path, *args: str) -> dict[str, object]:
    """Run the writer with the old tree's code; its manifest."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run(
        [sys.executable, str(WRITER), *args], env=env, check=True, capture_output=True, text=True
    ).stdout
    data: dict[str, object] = json.loads(out)
    return data


def dump_schema(dsn: str) -> str:
    """The placeholder schema as plain SQL (comments and psql meta-commands left out)."""
    text = subprocess.run(
        [
            pg_dump_path(),
            f"--dbname={dsn}",
            f"--schema={PLACEHOLDER}",
            "--inserts",
            "--no-owner",
            "--no-privileges",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    keep = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("--", "\\"))]
    return "\n".join(keep) + "\n"


def drop_schema(dsn: str) -> None:
    """Drop the placeholder schema, if it is there."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(PLACEHOLDER))
        )


def save(name: str, commit: str, why: str, manifest: dict[str, object]) -> None:
    """Write a fixture's manifest, naming the commit that wrote it."""
    subject = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%s", commit],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    manifest = {"commit": commit, "why": why, "subject": subject, **manifest}
    (OUT / f"{name}.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main(only: list[str]) -> int:
    """Write the fixtures: both stores for each commit of `POINTS` (or those in ``only``)."""
    unknown = sorted(set(only) - {commit for commit, _ in POINTS})
    if unknown:
        raise SystemExit(f"not in POINTS: {', '.join(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    with pg_server_dsn() as dsn:
        for commit, why in POINTS:
            if only and commit not in only:
                continue
            with old_tree(commit) as tree:
                db = OUT / f"sqlite-{commit}.sqlite"
                db.unlink(missing_ok=True)
                save(f"sqlite-{commit}", commit, why, write(tree, "sqlite", str(db)))
                db.chmod(0o644)
                drop_schema(dsn)
                try:
                    manifest = write(tree, "postgres", dsn, PLACEHOLDER)
                    (OUT / f"postgres-{commit}.sql").write_text(dump_schema(dsn))
                finally:
                    drop_schema(dsn)
                save(f"postgres-{commit}", commit, why, manifest)
            print(f"{commit}: sqlite schema and postgres schema written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
