"""Several nodes on one store: a node that hears another taking runs leaves it the due times.

`LookNotices` (PostgreSQL: a claim that took runs announces itself on a channel of its
own) lets a scheduler sleep on at its wake-up instead of looking, while another one is
taking the runs; it still looks for its own work and at least every `LOOK_AT_LEAST`
seconds. Here a SQLite store stands in with notices set by hand; the PostgreSQL
announcements themselves are in ``tests/test_store_postgres.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.executors import ManualExecutor, manual_scheduler
from tickwork import At, DurableScheduler
from tickwork._durable.claims import DEFER, LOOK_AT_LEAST
from tickwork.stores import JobSpec
from tickwork.stores.contract import LookCover, LookNotices
from tickwork.stores.sqlite import SQLiteStore

REC = "tests.durable_jobs:record"


class HearingStore(SQLiteStore):
    """A SQLite store whose announcements from other schedulers the test sets."""

    heard: tuple[int, float, float | None] | None = None

    def look_elsewhere(self) -> tuple[int, float, float | None] | None:
        return self.heard


class CoveredStore(HearingStore):
    """...that also hears a promise to look at every due time, and keeps its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.left = 0.0  # seconds left of another node's promise
        self.alike = True  # ...a node that runs what this one runs
        self.holds = False  # whether a promise of this node's would hold
        self.said: list[bool] = []  # each look's `cover(able)`

    def covered(self, *, alike: bool = False) -> float:
        return self.left if self.alike or not alike else 0.0

    def cover(self, able: bool) -> bool:
        self.said.append(able)
        return self.holds and able


def _node(tmp_path: Path, clock: Any) -> tuple[Any, Any, HearingStore]:
    store = HearingStore(tmp_path / "jobs.db")
    assert isinstance(store, LookNotices)
    ds, pool = manual_scheduler(store, clock)
    return ds, pool, store


def test_a_node_sleeps_on_while_another_announces_it_takes_the_runs(
    tmp_path: Path, durable_clock: Any
) -> None:
    ds, _, store = _node(tmp_path, durable_clock)
    claiming = ds._claiming
    now = durable_clock.wall()
    ds.step()  # its own look: nothing heard yet
    assert claiming.deferred() is None  # nothing heard: look
    store.heard = (1, 0.0, now + 0.1)  # another node took runs; next due in 100 ms
    assert claiming.deferred() == pytest.approx(0.1 + DEFER)
    store.heard = (1, 0.0, now + 60)  # next due in a minute: it still looks every second
    assert claiming.deferred() == pytest.approx(LOOK_AT_LEAST, abs=0.1)
    store.heard = (1, 0.0, now - 1)  # due already, but the other looked just now
    assert claiming.deferred() == pytest.approx(DEFER, abs=0.01)
    store.heard = (1, 5.0, now - 1)  # the other announced nothing for 5 s: look
    assert claiming.deferred() is None
    store.heard = (1, 0.0, now + 0.1)
    ds.step()  # it looked itself since: that announcement is no news
    assert claiming.deferred() is None
    store.close()


def test_a_node_looks_for_its_own_work_whatever_it_hears(
    tmp_path: Path, durable_clock: Any
) -> None:
    ds, _, store = _node(tmp_path, durable_clock)
    now = durable_clock.wall()
    ds.declare(JobSpec("long", REC, At(now + 1)))
    durable_clock.advance(1)
    ds.step()  # holds a claim: its lease is renewed at a third of the lease
    store.heard = (7, 0.0, now + 3600)
    left = ds._claiming.deferred()
    renew = min(r.renew_at for r in ds._table.runs.values())
    assert left is not None and left <= renew - durable_clock.wall() + 1e-6
    durable_clock.advance(renew - durable_clock.wall())
    assert ds._claiming.deferred() is None  # the renewal is due: look
    store.close()


def test_a_node_that_took_nothing_leaves_the_next_due_time_to_the_one_taking_runs(
    tmp_path: Path, durable_clock: Any
) -> None:
    ds, _, store = _node(tmp_path, durable_clock)
    now = durable_clock.wall()
    ds.declare(JobSpec("later", REC, At(now + 5)))
    assert ds.step() == pytest.approx(5)  # alone: it wakes at the due time
    store.heard = (1, 0.0, now + 5)  # another node is taking runs
    assert ds.step() == pytest.approx(5 + DEFER)  # it comes DEFER later, if needed
    store.heard = (1, LOOK_AT_LEAST + 1, now + 5)  # not heard from for a while
    assert ds.step() == pytest.approx(5)
    store.close()


def test_a_node_sleeps_on_while_another_promises_to_look_at_every_due_time(
    tmp_path: Path, durable_clock: Any
) -> None:
    store = CoveredStore(tmp_path / "jobs.db")
    assert isinstance(store, LookCover)
    ds, _ = manual_scheduler(store, durable_clock)
    claiming = ds._claiming
    now = durable_clock.wall()
    ds.declare(JobSpec("soon", REC, At(now + 0.01)))
    ds.step()  # its own look: it heard nothing
    assert claiming.deferred() is None
    store.left = 0.5  # another node promised, and heard nothing else: it sleeps on
    assert claiming.deferred() == pytest.approx(0.5)  # past the due time, to the lapse
    store.left = 30.0
    assert claiming.deferred() == pytest.approx(LOOK_AT_LEAST, abs=0.1)  # once a second
    store.left = 0.0  # withdrawn or lapsed: the due time is its own again
    assert claiming.deferred() is None
    store.left = 0.5
    # While the promise holds, a look plans the next for the lapse, not the due time:
    # a finish would wait for that look, which would take runs again, and so on.
    assert ds.step() == pytest.approx(0.5)
    store.left = 0.0
    durable_clock.advance(0.01)
    ds.step()  # holds a claim now: its lease is renewed, promise or not
    store.left = 30.0
    renew = min(r.renew_at for r in ds._table.runs.values())
    durable_clock.advance(renew - durable_clock.wall())
    assert claiming.deferred() is None
    store.close()


def test_a_change_heard_is_left_to_a_node_that_promised_and_runs_the_same_work(
    tmp_path: Path, durable_clock: Any
) -> None:
    """An enqueue (any change another process announces) wakes every node; one looks.

    On three nodes at 400 enqueues a second, each enqueue brought on a look on every
    node, two of which found nothing: 1.3 commits per run counted by the server.
    """
    store = CoveredStore(tmp_path / "jobs.db")
    ds, _ = manual_scheduler(store, durable_clock)
    claiming = ds._claiming
    ds.step()  # its own look
    assert claiming.deferred(heard=True) is None  # no promise: it looks at the change
    store.heard = (1, 0.0, durable_clock.wall() + 0.1)  # another node took runs...
    assert claiming.deferred(heard=True) is None  # ...and promised nothing: look
    store.left = 0.5  # another node promised, and runs what this one runs
    assert claiming.deferred(heard=True) == pytest.approx(0.5)  # it looks for it
    store.alike = False  # one that runs other work: the change may be this one's
    assert claiming.deferred(heard=True) is None
    assert claiming.deferred() == pytest.approx(0.5)  # its due times are covered still
    store.close()


def test_the_timing_loop_sleeps_on_after_a_change_only_while_it_is_covered(
    tmp_path: Path, durable_clock: Any
) -> None:
    store = CoveredStore(tmp_path / "jobs.db")
    ds, _ = manual_scheduler(store, durable_clock)
    loop, table = ds._timing, ds._table
    mono = [100.0]
    slept: list[float] = []

    def wait(timeout: float) -> None:  # a change is heard a second into the sleep
        slept.append(timeout)
        mono[0] += 1.0
        table.hear()

    loop.wait = wait  # type: ignore[method-assign]
    loop._mono = lambda: mono[0]
    assert loop._sleep_until_look(5.0) == (True, pytest.approx(4.0))  # ended early
    assert slept == [5.0]
    table.hear()  # heard during the look: no sleep at all, the whole time left
    assert loop._sleep_until_look(2.0) == (True, 2.0)
    table.poke()  # this process's own change: look now
    assert loop._sleep_until_look(2.0) is None
    store.close()


def _one_worker_two_jobs(store: CoveredStore, clock: Any) -> tuple[DurableScheduler, float]:
    """A node with one worker, whose runs wait (its worker stays busy); jobs at 1 and 1.3 s."""
    ds = DurableScheduler(
        store,
        executor=ManualExecutor(),
        max_workers=1,
        wall_clock=clock.wall,
        monotonic_clock=clock,
        allowed_modules=["tests.durable_jobs"],
    )
    now = clock.wall()
    ds.declare(JobSpec("first", REC, At(now + 1)))
    ds.declare(JobSpec("second", REC, At(now + 1.3)))
    return ds, now


def test_a_promising_node_with_every_worker_busy_looks_at_the_due_time_to_withdraw(
    tmp_path: Path, durable_clock: Any
) -> None:
    store = CoveredStore(tmp_path / "jobs.db")
    store.holds = True
    ds, now = _one_worker_two_jobs(store, durable_clock)
    durable_clock.advance(1)
    # Its one worker was free at this look: it may promise. It took "first", so every
    # worker is busy now; still, it promised, so it wakes at the next due time...
    assert ds.step() == pytest.approx(0.3)
    assert store.said == [True]
    store.heard = (1, 0.0, now + 2)  # another node's look: one that promised looks anyway
    assert ds._claiming.deferred() is None
    durable_clock.advance(0.3)
    # ...where, its worker still busy, it withdraws, and waits for the run to end.
    assert ds.step() > 1.0
    assert store.said == [True, False]
    store.holds = False
    store.close()


def test_a_full_node_that_promised_nothing_waits_for_a_run_to_end(
    tmp_path: Path, durable_clock: Any
) -> None:
    store = CoveredStore(tmp_path / "jobs.db")  # its promises never hold
    ds, _ = _one_worker_two_jobs(store, durable_clock)
    durable_clock.advance(1)
    assert ds.step() > 1.0  # no look at 1.3 s: nothing could be claimed there
    store.close()
