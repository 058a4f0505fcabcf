"""PostgreSQL: an owner is alive while one of its database sessions is open.

`PostgresStore.tag_sessions` marks a store's sessions (a shared advisory lock per
owner); `live_owners` reads the marks of every node. ``tickwork jobs`` uses it to show a
claim whose owner's sessions are gone as lost at once, not when its lease runs out.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tickwork import DurableScheduler, Every
from tickwork.__main__ import build_parser
from tickwork._cli.jobs import run_jobs
from tickwork._daemon.declare import ENTRY_POINT
from tickwork.stores import JobSpec
from tickwork.stores.contract import SessionLiveness
from tickwork.stores.postgres import PostgresStore


def wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def stores(pg_dsn: str, pg_schema: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a = PostgresStore(pg_dsn, schema=pg_schema)
    b = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def terminate_sessions_of(observer: PostgresStore, victim: PostgresStore) -> int:
    """Terminate every session ``victim`` holds (as a DBA or a network cut would)."""
    assert victim._owner_key is not None  # the test needs the lock key
    space, objid = victim._owner_key

    def body(cur: Any) -> int:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 2",
            (space, objid),
        )
        row = cur.fetchone()
        assert row is not None
        return int(row[0])

    return observer._run("terminate", body, write=False)


def test_the_store_is_a_session_liveness_store(stores: tuple[PostgresStore, PostgresStore]) -> None:
    assert isinstance(stores[0], SessionLiveness)


def test_a_tagged_owner_is_live_until_its_sessions_end(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = stores
    assert b.live_owners(["h:1:aa", "h:2:bb"]) == set()
    a.tag_sessions("h:1:aa")
    assert b.live_owners(["h:1:aa", "h:2:bb", ""]) == {"h:1:aa"}
    a.close()
    wait_for(lambda: b.live_owners(["h:1:aa"]) == set(), "the closed store's sessions to end")


def test_a_cut_session_is_seen_at_once_and_a_reconnect_is_marked_again(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = stores
    a.tag_sessions("h:1:aa")
    while a._listen_conn is None:  # open the listening connection, marked too
        a.wait_for_change(0)
    assert terminate_sessions_of(b, a) == 2  # the main and the listening connection
    wait_for(lambda: b.live_owners(["h:1:aa"]) == set(), "the owner to read as gone")
    a.jobs()  # any call reconnects; the new session carries the mark
    assert b.live_owners(["h:1:aa"]) == {"h:1:aa"}


def test_tag_sessions_refuses_an_empty_owner(stores: tuple[PostgresStore, PostgresStore]) -> None:
    with pytest.raises(ValueError, match="owner must be a non-empty string, got ''"):
        stores[0].tag_sessions("")


def test_a_started_durable_scheduler_marks_its_sessions(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = stores
    s = DurableScheduler(a, owner="node-x:42:cafe")
    assert b.live_owners(["node-x:42:cafe"]) == set()
    s.start()
    try:
        assert b.live_owners(["node-x:42:cafe"]) == {"node-x:42:cafe"}
    finally:
        assert s.stop(timeout=30)


def claim(store: PostgresStore, job: str, owner: str, now: float) -> None:
    store.upsert(JobSpec(f"jobs/{job}", ENTRY_POINT, Every(60), kwargs={"job": job}), now - 1)
    [c] = [
        c
        for c in store.claim_due(
            now, owner=owner, lease_seconds=300, limit=10, advance=lambda s, at: at + 60
        )
        if c.job_id == f"jobs/{job}"
    ]
    assert store.start(c, started=now)


def test_tickwork_jobs_shows_a_claim_of_a_gone_session_as_lost(fresh_database: str) -> None:
    now = time.time()
    live_node = PostgresStore(fresh_database)
    dead_node = PostgresStore(fresh_database)
    try:
        # Owners on another host, leases far from over: only the sessions can tell.
        live_node.tag_sessions("elsewhere:1:aaaa")
        dead_node.tag_sessions("elsewhere:2:bbbb")
        claim(live_node, "alive", "elsewhere:1:aaaa", now)
        claim(dead_node, "gone", "elsewhere:2:bbbb", now)
        dead_node.close()  # its process died: PostgreSQL ends its sessions
        args = build_parser().parse_args(["jobs", "--database", fresh_database, "--json"])
        rows: dict[str, dict[str, Any]] = {}

        def listed() -> bool:
            out = io.StringIO()
            assert run_jobs(args, out=out, err=io.StringIO()) == 0
            rows.update({r["job"]: r for r in json.loads(out.getvalue())})
            return rows["gone"]["running"] == 0

        wait_for(listed, "the gone node's claim to read as lost")
        assert rows["alive"]["running"] == 1 and rows["alive"]["lost"] == []
        [lost] = rows["gone"]["lost"]
        assert lost["owner"] == "elsewhere:2"
        assert lost["why"].startswith("its database session or process is gone; a running")
        assert "at the latest when its lease runs out at 20" in lost["why"]
    finally:
        live_node.close()
        dead_node.close()


def test_the_status_page_marks_a_node_whose_sessions_are_gone(fresh_database: str) -> None:
    from tickwork._daemon.web.status_page import page

    now = time.time()
    live_node = PostgresStore(fresh_database)
    dead_node = PostgresStore(fresh_database)
    reader = PostgresStore(fresh_database)
    try:
        # Owners on another host: this host cannot look at their processes.
        live_node.tag_sessions("elsewhere:1:aaaa")
        dead_node.tag_sessions("elsewhere:2:bbbb")
        claim(live_node, "alive", "elsewhere:1:aaaa", now)
        claim(dead_node, "gone", "elsewhere:2:bbbb", now)
        dead_node.close()  # its process died: PostgreSQL ends its sessions
        gone = '<span class="mark">(gone)</span>'

        def marked() -> str | None:
            text = page(reader, "jobs", "jobs.toml")
            return text if f"elsewhere:2{gone}" in text else None

        text = wait_for_value(marked, "the gone node marked")
        assert '<span class="node">elsewhere:1</span>' in text
        assert f"elsewhere:1{gone}" not in text
    finally:
        for store in (live_node, dead_node, reader):
            store.close()


def wait_for_value(check: Any, what: str, timeout: float = 30.0) -> Any:
    give_up = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value
