"""Delayed jobs: one-offs enqueued by app code, on both stores.

- ``enqueue`` / ``enqueue_many``: due at ``at`` or after ``delay``, run once, with the
  run's options (retries, timeout, ...); all checks before anything is written;
- ``key``: idempotent while pending or running, free again once it ended;
- a one-off leaves the jobs table when its slot ends (ok, failed, missed, abandoned,
  cancelled); its ledger entry stays; `Store.jobs`, the listing and ``oneoffs()`` count
  one-offs instead of listing them;
- ``cancel`` by reference, id or key; a running one-off is not cancelled.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.executors import ManualExecutor, drain
from tickwork import DurableScheduler, Every, OneOff
from tickwork.stores import JobSpec, JobSpecError
from tickwork.stores.contract import JobQuery, OneOffCounts, list_jobs
from tickwork.testing import FakeClock

HERE = "tests.test_oneoffs"
START = 1_700_000_000.0
CALLS: list[tuple[Any, ...]] = []


def note(*args: Any, **kwargs: Any) -> None:
    CALLS.append((*args, *sorted(kwargs.items())))


def fails() -> None:
    CALLS.append(("fails",))
    raise RuntimeError("no")


def needs_one(x: int) -> None:
    CALLS.append((x,))


async def coro() -> None:  # never awaited by DurableScheduler
    pass


Made = tuple[DurableScheduler, ManualExecutor, FakeClock, Any]


@pytest.fixture
def made(open_either_store: Callable[..., Any]) -> Made:
    CALLS.clear()
    clock = FakeClock(wall_start=START)
    store = open_either_store()
    pool = ManualExecutor()
    ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, lease=30.0)
    return ds, pool, clock, store


def _rows(store: Any) -> int:
    """Rows in the jobs table, one-offs included."""
    table = "jobs" if type(store).__name__ == "SQLiteStore" else "tickwork_jobs"
    return int(
        store._run(
            "count",
            lambda cur: cur.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0],
            write=False,
        )
    )


def test_a_one_off_runs_once_at_its_time_and_leaves(made: Made) -> None:
    ds, pool, clock, store = made
    ref = ds.enqueue(note, 1, "a", delay=10, kwargs={"k": 2})
    assert re.fullmatch("~[0-9a-f]{28}", ref.id) and ref.created
    assert ref.run_at == START + 10
    drain(ds, pool)
    assert CALLS == []  # not due yet
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", pending=1)]
    clock.advance(10)
    drain(ds, pool)
    assert CALLS == [(1, "a", ("k", 2))]
    assert _rows(store) == 0  # gone from the jobs table
    assert ds.get(ref.id) is None
    [entry] = store.history(ref.id)
    assert (entry.outcome, entry.scheduled) == ("ok", START + 10)
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", done=1)]
    clock.advance(100)
    drain(ds, pool)
    assert len(CALLS) == 1  # once


def test_ids_grow_with_the_enqueue_time_and_differ_within_one_instant(made: Made) -> None:
    """The first 12 hex digits are the enqueue's milliseconds (the scheduler's clock).

    Ids that grow with time go to the right edge of the stores' B-trees; ids made in
    one millisecond, in one call or many, still differ (16 random digits).
    """
    ds, _pool, clock, _store = made
    first = ds.enqueue_many([OneOff(note) for _ in range(50)])
    clock.advance(0.001)
    later = [ds.enqueue(note) for _ in range(3)]
    clock.advance(3600)
    last = ds.enqueue(note, at=START)  # due before the others: its id is still later
    ids = [r.id for r in [*first, *later, last]]
    assert len(set(ids)) == len(ids)
    assert {i[1:13] for i in ids[:50]} == {f"{int(START * 1000):012x}"}
    assert max(ids[:50]) < min(ids[50:53]) and max(ids[50:53]) < last.id


def test_at_takes_an_aware_datetime_and_refuses_both_or_naive(made: Made) -> None:
    ds = made[0]
    when = datetime.fromtimestamp(START + 5, UTC)
    assert ds.enqueue(note, at=when).run_at == START + 5
    assert ds.enqueue(note, delay=timedelta(minutes=1)).run_at == START + 60
    assert ds.enqueue(note, delay="2h").run_at == START + 7200
    assert ds.enqueue(note).run_at == START  # neither: now
    with pytest.raises(ValueError, match=r"give at or delay, not both: got at=1.0 and delay=2"):
        ds.enqueue(note, at=1.0, delay=2)
    with pytest.raises(ValueError, match="at must be an aware datetime or POSIX seconds"):
        ds.enqueue(note, at=datetime(2030, 1, 1))


def test_bad_items_raise_before_anything_is_written(made: Made) -> None:
    ds, _, _, store = made
    good = OneOff(note, (1,))
    with pytest.raises(
        JobSpecError, match=r"items\[1\]: func 'tests.test_oneoffs:needs_one' cannot be called"
    ):
        ds.enqueue_many([good, OneOff(needs_one, (1, 2))])
    # Items of one shape are checked once: each new shape is checked on its own.
    fine = [OneOff(needs_one, (1,)), OneOff(needs_one, (2,)), OneOff(needs_one, kwargs={"x": 3})]
    for bad, i in [((1, 2), ()), ((), ("y",))]:
        with pytest.raises(JobSpecError, match=rf"items\[3\]: func '{HERE}:needs_one'"):
            ds.enqueue_many([*fine, OneOff(needs_one, bad, dict.fromkeys(i, 1))])
    with pytest.raises(TypeError, match="module-level function"):
        ds.enqueue(lambda: None)
    with pytest.raises(TypeError, match="coroutine function"):
        ds.enqueue(coro)
    with pytest.raises(JobSpecError, match="retries"):
        ds.enqueue(note, retries=-1)
    with pytest.raises(ValueError, match=r"unknown option.*every"):
        OneOff(note, options={"every": 3})
    with pytest.raises(ValueError, match="key must be a non-empty printable string"):
        ds.enqueue(note, key="")
    with pytest.raises(TypeError, match=r"items\[0\] must be a tickwork.OneOff, got 3"):
        ds.enqueue_many([3])  # type: ignore[list-item]
    assert _rows(store) == 0


def test_keys_and_arguments_with_quotes_and_other_scripts_arrive_as_given(made: Made) -> None:
    """The batch's values reach the store intact (PostgreSQL: as binary arrays)."""
    ds, pool, _, _ = made
    odd = ['a"b', "c\\d", "é ü ключ", "{x,y}", "NULL", "'q'"]
    refs = ds.enqueue_many([OneOff(note, (k, {"v": k}), key=k) for k in odd])
    assert [r.id for r in refs] == ["~key:" + k for k in odd] and all(r.created for r in refs)
    assert not any(ds.enqueue(note, key=k).created for k in odd)  # found by the same key
    drain(ds, pool)
    assert sorted(CALLS) == sorted((k, {"v": k}) for k in odd)


def test_a_key_is_idempotent_while_pending_or_running_and_free_after(made: Made) -> None:
    ds, pool, _, _ = made
    first = ds.enqueue(note, "one", key="order-7")
    again = ds.enqueue(note, "two", key="order-7", delay=50)
    assert (first.id, again.id) == ("~key:order-7", "~key:order-7")
    assert first.created and not again.created
    refs = ds.enqueue_many([OneOff(note, ("x",), key="k"), OneOff(note, ("y",), key="k")])
    assert [r.created for r in refs] == [True, False]  # the batch's first wins
    ds.step()  # claimed: both are running now (their runs wait in the pool)
    assert not ds.enqueue(note, "three", key="order-7").created
    pool.run_all()
    drain(ds, pool)
    assert sorted(CALLS) == [("one",), ("x",)]
    assert ds.enqueue(note, "four", key="order-7").created  # ended: the key is free
    drain(ds, pool)
    assert sorted(CALLS) == [("four",), ("one",), ("x",)]


def test_run_options_apply_retries_then_failed_counts(made: Made) -> None:
    ds, pool, clock, store = made
    ref = ds.enqueue(fails, retries=2, retry_backoff=0.01, retry_backoff_max=0.01)
    for _ in range(5):
        drain(ds, pool)
        clock.advance(1)
    assert CALLS == [("fails",)] * 3
    assert [e.outcome for e in store.history(ref.id)] == ["failed"] * 3
    assert _rows(store) == 0
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:fails", failed=1)]


def test_a_one_off_later_than_its_grace_is_missed_and_leaves(made: Made) -> None:
    ds, pool, clock, store = made
    ref = ds.enqueue(note, at=START + 1, grace=5)
    clock.advance(100)
    drain(ds, pool)
    assert CALLS == []
    assert [e.outcome for e in store.history(ref.id)] == ["missed"]
    assert _rows(store) == 0
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", dropped=1)]


def test_cancel_by_ref_id_or_key_and_not_while_running(made: Made) -> None:
    ds, pool, clock, store = made
    a = ds.enqueue(note, "a", delay=60)
    b = ds.enqueue(note, "b", delay=60, key="bee")
    c = ds.enqueue(note, "c", delay=60)
    assert ds.cancel(a) and ds.cancel("bee") and ds.cancel(c.id)
    assert not ds.cancel(a)  # gone already
    assert not ds.cancel("never")
    assert [e.outcome for e in store.history(b.id)] == ["cancelled"]
    running = ds.enqueue(note, "r")
    ds.step()  # claimed, its run in the pool
    assert not ds.cancel(running)
    pool.run_all()
    drain(ds, pool)
    clock.advance(120)
    drain(ds, pool)
    assert CALLS == [("r",)]
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", done=1, dropped=3)]
    assert _rows(store) == 0


def test_one_offs_are_counted_not_listed(made: Made) -> None:
    ds, _, clock, store = made
    ds.declare(JobSpec("report", f"{HERE}:note", Every(60)))
    ds.enqueue_many([OneOff(note, (i,), delay=30) for i in range(250)])
    assert [j.id for j in ds.jobs()] == ["report"]
    page = list_jobs(store, JobQuery(), now=clock.wall())
    assert [j.id for j in page.jobs] == ["report"] and page.total == 1
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", pending=250)]
    assert ds.get(ds.enqueue(note, 1).id) is not None  # one by one, by its id


def test_a_batch_is_one_transaction(made: Made) -> None:
    ds, pool, _, store = made
    refs = ds.enqueue_many(OneOff(note, (i,)) for i in range(1000))
    assert len({r.id for r in refs}) == 1000 and all(r.created for r in refs)
    assert _rows(store) == 1000
    drain(ds, pool)
    assert sorted(c[0] for c in CALLS) == list(range(1000))
    assert _rows(store) == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "options"),
    [
        ((), {}, {}),
        ((1, "é", [2.5, None], {"a": True}), {"k": (1, 2)}, {"retries": 3, "timeout": 9}),
        (("x",), {}, {"pool": "mail", "grace": 5, "missed": "once", "isolation": "process"}),
    ],
)
def test_a_row_is_what_its_jobspec_would_store(
    args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]
) -> None:
    from tickwork import At
    from tickwork.stores.contract import oneoff_rows, spec_to_json

    template = JobSpec("~", f"{HERE}:note", At(0), **options)
    [row] = oneoff_rows(template, [("~abc", START + 0.25, args, kwargs)])
    spec = JobSpec("~abc", f"{HERE}:note", At(START + 0.25), args=args, kwargs=kwargs, **options)
    assert row.spec == spec_to_json(spec)
    assert (row.id, row.run_at, row.queue) == ("~abc", START + 0.25, f"{HERE}:note")
    with pytest.raises(JobSpecError, match=r"args\[0\] must be JSON-serialisable"):
        oneoff_rows(template, [("~abc", START, ({1, 2},), {})])
    with pytest.raises(JobSpecError, match="a one-off's id starts with '~', got 'abc'"):
        oneoff_rows(template, [("abc", START, (), {})])


def test_rows_written_out_match_their_jobspecs_over_ids_and_instants() -> None:
    """The bulk path writes a row's id and instant itself: the same text as `JobSpec`'s."""
    from tickwork import At
    from tickwork.stores.contract import oneoff_rows, spec_to_json

    rng = random.Random(47)
    template = JobSpec("~", f"{HERE}:note", At(0))
    keys = ['a"b', "c\\d", "é ü", "it's", "ключ", "x" * 190, "~nested", "</script>"]
    ids = ["~key:" + k for k in keys] + [f"~{rng.getrandbits(80):020x}" for _ in range(50)]
    instants = [0.0, 1.0, START, START + 1 / 3, 1e-7, 253402300799.0, 1e9 + 0.1]
    instants += [rng.uniform(0, 253402300799) for _ in range(len(ids) - len(instants))]
    runs = [(i, t, (t, i), {"k": i}) for i, t in zip(ids, instants, strict=True)]
    for row, (job_id, t, args, kwargs) in zip(oneoff_rows(template, runs), runs, strict=True):
        spec = JobSpec(job_id, f"{HERE}:note", At(t), args=args, kwargs=kwargs)
        assert row.spec == spec_to_json(spec)
        assert row.schedule == spec_to_json(spec).split('"schedule":')[1][: len(row.schedule)]
        assert (row.id, row.run_at) == (job_id, t)


def test_a_batch_of_finishes_deletes_the_one_offs_and_counts_them(made: Made) -> None:
    # Six finishes in one `record`: on PostgreSQL the set-based batch (stores/_pgbatch.py),
    # on SQLite item by item; either way the rows go and the totals count each end.
    from tickwork.stores.contract import Finish, Start

    ds, _, clock, store = made
    refs = ds.enqueue_many([OneOff(note, (i,)) for i in range(6)])
    claims = store.claim_due(
        clock.wall(), owner="me", lease_seconds=30, limit=10, advance=lambda s, now: None
    )
    assert sorted(c.job_id for c in claims) == sorted(r.id for r in refs)
    outcomes = ["ok", "ok", "ok", "failed", "timeout", "ok"]
    started, ended = store.record(
        [Start(c, clock.wall()) for c in claims],
        [Finish(c, o, clock.wall() + 1) for c, o in zip(claims, outcomes, strict=True)],
    )
    assert all(started) and all(ended)
    assert _rows(store) == 0
    assert ds.oneoffs() == [OneOffCounts(f"{HERE}:note", done=4, failed=2)]
    assert sorted(e.outcome for r in refs for e in store.history(r.id)) == sorted(outcomes)


def test_a_node_that_does_not_allow_the_function_records_it_failed(made: Made) -> None:
    # Schedulers sharing one store object claim for all of them (`claim_oneoffs_of`):
    # one that does not allow a function may then claim its one-off, and fails it.
    ds, _, clock, store = made
    ref = ds.enqueue(note, 1)
    other_pool = ManualExecutor()
    other = DurableScheduler(store, executor=other_pool, wall_clock=clock.wall, lease=30.0)
    drain(other, other_pool)  # neither enqueued it nor lists its module in allowed_modules
    assert CALLS == []
    [entry] = store.history(ref.id)
    assert entry.outcome == "failed" and "is not allowed here" in (entry.error or "")
    assert _rows(store) == 0
    assert other.oneoffs() == [OneOffCounts(f"{HERE}:note", failed=1)]
    allowed = DurableScheduler(
        store, executor=other_pool, wall_clock=clock.wall, allowed_modules=["tests"]
    )
    ds.enqueue(note, 2)  # enqueued elsewhere, run where its module is allowed
    drain(allowed, other_pool)
    assert CALLS == [(2,)]


def test_a_node_claims_only_the_one_offs_it_allows(
    made: Made, open_either_store: Callable[..., Any]
) -> None:
    """Two nodes, each with its own store: the one that does not allow the function
    never claims its one-offs (nor wakes for them); the one that allows them runs each
    once, and none fails (issue 41)."""
    producer, _, clock, _ = made  # enqueues only: never steps
    refs = [producer.enqueue(note, i) for i in range(6)]
    refs.append(producer.enqueue(note, 6, delay=5))  # due later: no node wakes for it now
    nodes = []
    for allowed in ([], ["tests"]):
        pool = ManualExecutor()
        ds = DurableScheduler(
            open_either_store(), executor=pool, wall_clock=clock.wall, allowed_modules=allowed
        )
        nodes.append((ds, pool))
    (other, other_pool), (allowing, pool) = nodes
    assert other.step() > 5.0 and not other_pool.run_all()  # none claimed, none due for it
    assert CALLS == []
    clock.advance(5)
    drain(allowing, pool)
    assert sorted(CALLS) == [(i,) for i in range(7)]
    assert allowing.oneoffs() == [OneOffCounts(f"{HERE}:note", done=7)]
    assert all(e.outcome == "ok" for r in refs for e in other.history(r.id))


def test_concurrent_enqueues_share_a_transaction(made: Made) -> None:
    # The first caller's write is held until three others wait: they go in one more
    # transaction together, each getting its own flags, all of them stored.
    import threading

    from tests.waiting import wait_until

    ds, pool, _, store = made
    calls: list[int] = []
    release = threading.Event()
    real = store.enqueue

    def enqueue(rows: Any) -> list[bool]:
        calls.append(len(rows))
        if len(calls) == 1:
            release.wait(60)
        return real(rows)

    store.enqueue = enqueue
    refs: dict[int, Any] = {}

    def producer(i: int) -> None:
        refs[i] = ds.enqueue(note, i, key="same" if i == 3 else None)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(4)]
    threads[0].start()
    wait_until("the first write", lambda: calls == [1])
    for t in threads[1:]:
        t.start()
    wait_until("three callers waiting", lambda: len(ds._enqueues._waiting) == 3)
    release.set()
    for t in threads:
        t.join(60)
    assert calls == [1, 3]
    assert all(refs[i].created for i in range(4))
    assert not ds.enqueue(note, 9, key="same").created
    drain(ds, pool)
    assert sorted(c[0] for c in CALLS) == [0, 1, 2, 3]


def test_a_caller_returns_once_its_own_rows_are_written_not_after_the_others(
    made: Made,
) -> None:
    # The first caller writes alone (held) while three others queue up. Once its own
    # write has committed it returns, and one of the three writes their transaction:
    # the first is back while that second write is still held. (A writer that went on
    # writing for whoever kept coming would not return while producers kept enqueueing.)
    import threading

    from tests.waiting import wait_until

    ds, pool, _, store = made
    writers: list[int] = []
    held = [threading.Event(), threading.Event()]
    real = store.enqueue

    def enqueue(rows: Any) -> list[bool]:
        writers.append(threading.get_ident())
        held[len(writers) - 1].wait(60)
        return real(rows)

    store.enqueue = enqueue
    refs: dict[int, Any] = {}
    idents: dict[int, int] = {}

    def producer(i: int) -> None:
        idents[i] = threading.get_ident()
        refs[i] = ds.enqueue(note, i)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(4)]
    threads[0].start()
    wait_until("the first write", lambda: len(writers) == 1)
    for t in threads[1:]:
        t.start()
    wait_until("three callers waiting", lambda: len(ds._enqueues._waiting) == 3)
    held[0].set()
    wait_until("the second write", lambda: len(writers) == 2)
    threads[0].join(60)
    assert not threads[0].is_alive() and refs[0].created  # back, the second still held
    assert writers[1] != idents[0] and writers[1] in {idents[i] for i in (1, 2, 3)}
    assert all(t.is_alive() for t in threads[1:])
    held[1].set()
    for t in threads:
        t.join(60)
    assert all(refs[i].created for i in range(4)) and len(writers) == 2
    drain(ds, pool)
    assert sorted(c[0] for c in CALLS) == [0, 1, 2, 3]


def test_the_group_commit_is_built_with_its_scheduler(made: Made) -> None:
    # Built once, in the constructor: no first enqueue races to make it.
    from tickwork._durable.oneoffs import Combiner

    ds, pool, clock, store = made
    other = DurableScheduler(store, executor=pool, wall_clock=clock.wall)
    assert isinstance(ds._enqueues, Combiner)
    assert isinstance(other._enqueues, Combiner)
    assert ds._enqueues is not other._enqueues


def test_a_failed_group_write_raises_in_its_callers_and_the_next_one_goes_on(made: Made) -> None:
    from tickwork.stores import StoreError

    ds, _, _, store = made
    real = store.enqueue
    store.enqueue = lambda rows: (_ for _ in ()).throw(StoreError("down"))
    with pytest.raises(StoreError, match="down"):
        ds.enqueue(note, 1)
    store.enqueue = real
    assert ds.enqueue(note, 2).created
    assert _rows(store) == 1
