"""SQLite failover: the claims of a process that died are recovered at once, not after its lease.

A `DurableScheduler` lists its owner with its pid, the pid's start time and its scope
(host, boot, pid namespace) in the store (`SQLiteStore.tag_sessions`). A store in the
same scope sees at once that the process has ended and recovers its claims, whatever
the lease; an owner it cannot judge (another scope, never listed) keeps its lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwork import At, DurableScheduler
from tickwork.stores import JobSpec
from tickwork.stores._procs import process_scope
from tickwork.stores.contract import SessionLiveness
from tickwork.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
LEASE = 60.0
HANG = "tests.sqlite_node:hang_on"

needs_proc = pytest.mark.skipif(process_scope() is None, reason="needs /proc (Linux)")


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture(params=["declared", "one-offs"])
def ids(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The ids of the victim's two runs (at most once, at least once): one-shots declared,
    or one-offs enqueued with the keys ``most`` and ``least``."""
    return ("most", "least") if request.param == "declared" else ("~key:most", "~key:least")


@pytest.fixture
def victim(tmp_path: Path, ids: tuple[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A scheduler process named "victim" on ``tmp_path/s.db``, holding two started runs."""
    db, log = tmp_path / "s.db", tmp_path / "runs.log"
    now = time.time()
    most, least = ids
    with SQLiteStore(db) as store:
        for job_id, delivery in ((most, "at_most_once"), (least, "at_least_once")):
            kwargs = {"owner": "victim", "log": str(log)}
            if job_id.startswith("~"):
                key = job_id.removeprefix("~key:")
                DurableScheduler(store).enqueue(HANG, kwargs=kwargs, key=key, delivery=delivery)
                continue
            store.upsert(JobSpec(job_id, HANG, At(now), kwargs=kwargs, delivery=delivery), now)
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.sqlite_node", str(db), str(ready), "victim"], cwd=ROOT
    )
    try:
        wait_for(lambda: lines(log) == {f"{most} victim", f"{least} victim"}, "two runs")
        yield proc
    finally:
        proc.kill()
        proc.wait()


def lines(path: Path) -> set[str]:
    return set(path.read_text().splitlines()) if path.exists() else set()


@needs_proc
def test_a_sigkilled_process_has_its_claims_recovered_at_once(
    tmp_path: Path, victim: subprocess.Popen[bytes], ids: tuple[str, str]
) -> None:
    most, least = ids
    store = SQLiteStore(tmp_path / "s.db")
    assert isinstance(store, SessionLiveness)
    survivor = DurableScheduler(
        store, owner="survivor", lease=LEASE, allowed_modules=["tests.sqlite_node"]
    )
    survivor.start()
    try:
        time.sleep(1.0)  # the survivor has looked at the live victim's claims and left them
        assert lines(tmp_path / "runs.log") == {f"{most} victim", f"{least} victim"}
        assert store.live_owners(["victim", "survivor", "elsewhere"]) == {
            "victim",
            "survivor",
            "elsewhere",
        }
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        victim.wait()
        wait_for(
            lambda: f"{least} survivor" in lines(tmp_path / "runs.log"),
            "the at-least-once run again, on the survivor",
            timeout=LEASE / 4,
        )
        took = time.monotonic() - killed
        assert store.live_owners(["victim", "survivor"]) == {"survivor"}
        (last, *_) = store.history(most)
        assert last.outcome == "abandoned" and "'victim' was gone" in (last.error or "")
        wait_for(lambda: survivor.running() == {}, "the survivor's run to end")
    finally:
        survivor.stop(timeout=10)
    # At most once: never again; at least once: once more, elsewhere.
    assert sorted((tmp_path / "runs.log").read_text().splitlines()) == sorted(
        [f"{least} survivor", f"{least} victim", f"{most} victim"]
    )
    if most.startswith("~"):  # one-offs: ended, so gone, and counted once each
        assert store.get(most) is None and store.get(least) is None
        (counts,) = survivor.oneoffs()
        assert (counts.pending, counts.running, counts.done, counts.failed) == (0, 0, 1, 1)
        assert [e.outcome for e in store.history(least)] == ["ok", "abandoned"]
    store.close()
    print(f"SQLite, SIGKILL: claims recovered {took:.2f} s after the kill (lease {LEASE:.0f} s)")


@needs_proc
def test_an_owner_that_cannot_be_judged_keeps_its_lease(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        store.upsert(JobSpec("j", HANG, At(100.0), kwargs={"owner": "x", "log": "-"}), 100.0)
        [c] = store.claim_due(
            100.0, owner="elsewhere", lease_seconds=300, limit=5, advance=lambda s, at: None
        )
        store.start(c, started=101.0)
        # Listed from another scope (another host or pid namespace): not judged here.
        with store._tx("test") as conn:
            conn.execute(
                "INSERT INTO nodes VALUES ('elsewhere', 'other-host/boot/1', 4194305, 1, 100.0)"
            )
        time.sleep(0.3)  # past the look's rate limit
        assert store.recover_expired(102.0) == []
        assert store.live_owners(["elsewhere"]) == {"elsewhere"}
        # Listed in this scope with a process that is not running: gone.
        with store._tx("test") as conn:
            conn.execute("UPDATE nodes SET scope = ?", (process_scope(),))
        time.sleep(0.3)
        [recovered] = store.recover_expired(103.0)
        assert (recovered.claim.owner, recovered.action) == ("elsewhere", "abandoned")
        assert store.live_owners(["elsewhere"]) == set()
