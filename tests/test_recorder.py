"""Group commit (`tickwork._durable.recorder.Recorder`) on a real SQLite store.

The writer is held inside its transaction by a gate, so that what the other threads add
meanwhile is known exactly: no test depends on timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tickwork import At, DurableScheduler
from tickwork._durable.recorder import Recorder
from tickwork.stores import Claim, JobSpec, StoreError
from tickwork.stores.contract import Finish, Start
from tickwork.stores.sqlite import SQLiteStore

from . import durable_jobs

FUNC = "tests.store_contract:noop"


class GatedStore(SQLiteStore):
    """Counts `record` calls; the first one waits at a gate until released."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[tuple[int, int]] = []
        self.inside = threading.Event()
        self.gate = threading.Event()
        self.fail: BaseException | None = None

    def record(
        self, starts: Sequence[Start], finishes: Sequence[Finish]
    ) -> tuple[list[bool], list[bool]]:
        self.calls.append((len(starts), len(finishes)))
        if len(self.calls) == 1:
            self.inside.set()
            assert self.gate.wait(30)
        if self.fail is not None:
            raise self.fail
        return super().record(starts, finishes)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GatedStore]:
    s = GatedStore(tmp_path / "r.db")
    yield s
    s.close()


def claims(store: SQLiteStore, n: int) -> list[Claim]:
    for i in range(n):
        store.upsert(JobSpec(f"j{i}", FUNC, At(100.0)), 100.0)
    return store.claim_due(
        100.0, owner="A", lease_seconds=30.0, limit=n, advance=lambda state, now: None
    )


def test_a_lone_caller_writes_at_once_and_sees_the_result(store: GatedStore) -> None:
    (c,) = claims(store, 1)
    store.gate.set()
    rec = Recorder(store)
    assert rec.start(c, 100.5) is True
    got: list[object] = []
    rec.finish(Finish(c, "ok", 101.0), got.append)
    assert got == [True]  # called back before finish() returned: nobody else was writing
    state = store.get("j0")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "ok" and state.claims == ()
    assert (rec.batches, rec.records) == (2, 2)


def test_records_added_while_a_transaction_commits_share_the_next_one(
    store: GatedStore,
) -> None:
    cs = claims(store, 6)
    rec = Recorder(store)
    results: dict[int, bool] = {}
    first = threading.Thread(target=lambda: results.__setitem__(0, rec.start(cs[0], 100.5)))
    first.start()
    assert store.inside.wait(30)  # the first caller is the writer, held in its commit
    waiting = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, rec.start(cs[i], 100.5)))
        for i in range(1, 4)
    ]
    for t in waiting:
        t.start()
    ended: list[object] = []
    for c in cs[4:]:  # finishes of unstarted claims: the callers do not wait
        rec.finish(Finish(c, "cancelled", 100.6), ended.append)
    deadline = time.monotonic() + 30
    while len(rec._queue) < 5:  # the three starts and two finishes are queued
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert ended == []  # not written yet
    store.gate.set()
    first.join(30)
    for t in waiting:
        t.join(30)
    assert results == {0: True, 1: True, 2: True, 3: True}
    assert ended == [True, True]
    assert store.calls == [(1, 0), (3, 2)]  # one transaction for the five
    assert (rec.batches, rec.records) == (2, 6)
    handed_back = store.get("j5")
    assert handed_back is not None and [c.retry for c in handed_back.claims] == [True]


def test_a_failed_transaction_fails_every_record_in_it(store: GatedStore) -> None:
    c0, c1 = claims(store, 2)
    store.gate.set()
    store.fail = StoreError("disk full")
    rec = Recorder(store)
    with pytest.raises(StoreError, match="disk full"):
        rec.start(c0, 100.5)
    got: list[object] = []
    rec.finish(Finish(c1, "ok", 101.0), got.append)
    assert len(got) == 1 and isinstance(got[0], StoreError)
    state = store.get("j0")
    assert state is not None and [c.started for c in state.claims] == [None]


def test_a_batch_the_store_refuses_is_written_singly_so_only_the_bad_record_fails(
    store: GatedStore,
) -> None:
    c0, c1 = claims(store, 2)
    rec = Recorder(store)
    first = threading.Thread(target=lambda: rec.start(c0, 100.5))
    first.start()
    assert store.inside.wait(30)
    bad: list[object] = []
    good: list[object] = []
    rec.finish(Finish(c1, "ok", 101.0), good.append)
    rec.finish(Finish(c0, "ok", float("nan")), bad.append)  # refused by the store
    store.gate.set()
    first.join(30)
    deadline = time.monotonic() + 30
    while not (bad and good):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert good == [True]
    assert len(bad) == 1 and isinstance(bad[0], ValueError)


def test_the_scheduler_groups_its_workers_starts_and_finishes(tmp_path: Path) -> None:
    # Eight workers, 200 one-shots due at once, on a real store: every run recorded
    # once (how many transactions they share depends on the machine; the gated tests
    # above pin the grouping itself).
    durable_jobs.CALLS.clear()
    with SQLiteStore(tmp_path / "d.db") as store:
        now = time.time()
        for i in range(200):
            store.upsert(JobSpec(f"j{i:03}", "tests.durable_jobs:record", At(now), args=[i]), now)
        ds = DurableScheduler(store, max_workers=8, allowed_modules=["tests.durable_jobs"])
        ds.start()
        deadline = time.monotonic() + 120
        while any(s.last_run is None for s in store.jobs()):
            assert time.monotonic() < deadline, "the runs did not all finish"
            time.sleep(0.05)
        assert ds.stop(timeout=60)
        assert sorted(c[0][0] for c in durable_jobs.CALLS) == list(range(200))
        assert all(s.last_run is not None and s.last_run.outcome == "ok" for s in store.jobs())
        assert all(s.claims == () for s in store.jobs())
        # Every finish went through the recorder, and every start that the claim did
        # not record itself (runs handed straight to an idle worker).
        rec = ds._running.recorder
        assert rec is not None and 200 <= rec.records <= 400 and rec.batches <= rec.records


def test_a_writer_unwound_by_a_callback_hands_the_writing_to_a_waiting_start(
    store: GatedStore,
) -> None:
    c0, c1 = claims(store, 2)
    rec = Recorder(store)

    class Boom(BaseException):
        pass

    def explode(result: object) -> None:
        raise Boom

    raised: list[BaseException] = []

    def finish() -> None:
        try:
            rec.finish(Finish(c0, "cancelled", 100.6), explode)
        except Boom as exc:
            raised.append(exc)

    writer = threading.Thread(target=finish)
    writer.start()
    assert store.inside.wait(30)  # the finish's thread writes, held in its commit
    started: list[bool] = []
    waiting = threading.Thread(target=lambda: started.append(rec.start(c1, 100.5)))
    waiting.start()
    deadline = time.monotonic() + 30
    while len(rec._queue) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    store.gate.set()
    writer.join(30)
    waiting.join(30)
    assert len(raised) == 1  # the writer's callback unwound it
    assert started == [True]  # and the waiting start was written all the same
    assert store.calls == [(0, 1), (1, 0)]
    assert not rec._writing
