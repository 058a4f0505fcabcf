"""Dead-man alerts (`tickwork.AlertWatch`): conditions and episodes on fake clocks, both stores.

Each condition opens an episode once, sends nothing more while it holds, and sends one
recovery when it clears; two watchers on one store send each message once between
them; a message whose sender died is taken over after the lease.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tickwork import AlertRules, AlertWatch, DurableScheduler, Every, WatchAlert
from tickwork.stores import JobSpec
from tickwork.testing import FakeClock, InlineExecutor

from .conftest import DURABLE_START


def _scheduler(store: Any, clock: FakeClock, owner: str = "node-a") -> DurableScheduler:
    return DurableScheduler(
        store,
        owner=owner,
        executor=InlineExecutor(),
        max_workers=1,
        wall_clock=clock.wall,
        monotonic_clock=clock,
    )


def _watch(source: Any, got: list[WatchAlert], owner: str | None = None, **kw: Any) -> AlertWatch:
    return AlertWatch(source, on_alert=got.append, owner=owner, **kw)


def _events(got: list[WatchAlert]) -> list[tuple[str, str, str]]:
    return [(a.job_id, a.kind, a.event) for a in got]


def test_no_success_opens_once_and_recovers(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    store = open_either_store()
    s = _scheduler(store, durable_clock)
    s.declare(JobSpec("flaky", "tests.durable_jobs:boom", Every(60)))
    got: list[WatchAlert] = []
    watch = _watch(s, got)
    watch.watch("flaky", AlertRules(no_success=150))
    for _ in range(3):  # three failed runs: 60, 120, 180 s after the declaration
        durable_clock.advance(60)
        s.step()
        watch.check()
    # The first slot was at +60; 150 s later (at +210) the alert opens, once.
    assert got == []
    durable_clock.advance(31)
    watch.check()
    assert _events(got) == [("flaky", "no_success", "alert")]
    assert got[0].detail == "no successful run yet (alert after 2 min 30 s)"
    assert got[0].node == "node-a" and got[0].at == DURABLE_START + 211
    for _ in range(3):
        durable_clock.advance(60)
        s.step()
        assert watch.check() == []  # no repeat while it holds
    s.declare(JobSpec("flaky", "tests.durable_jobs:record", Every(60)))
    durable_clock.advance(60)
    s.step()
    sent = watch.check()
    assert _events(sent) == [("flaky", "no_success", "recovered")]
    assert sent[0].since == DURABLE_START + 211
    assert watch.check() == []
    kinds = [(a.action, a.actor) for a in store.actions("flaky")]
    assert kinds == [("alert-cleared", "node-a"), ("alert", "node-a")]
    assert store.actions("flaky")[1].detail == (
        "no_success: no successful run yet (alert after 2 min 30 s)"
    )


def test_two_watchers_send_each_message_once(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    store_a, store_b = open_either_store(), open_either_store()
    s = _scheduler(store_a, durable_clock)
    s.declare(JobSpec("quiet", "tests.durable_jobs:record", Every(3600)))
    got: list[WatchAlert] = []
    rules = AlertRules(no_success=100, late=120)
    a = _watch(store_a, got, owner="a", wall_clock=durable_clock.wall)
    b = _watch(store_b, got, owner="b", wall_clock=durable_clock.wall)
    for w in (a, b):
        w.watch("quiet", rules)
    # Nobody runs the schedule (its daemon is down): late at +3600+121, no success too.
    durable_clock.advance(3600 + 121)
    for _ in range(3):
        a.check()
        b.check()
    assert sorted(_events(got)) == [("quiet", "late", "alert"), ("quiet", "no_success", "alert")]
    assert "has not been started by any node" in next(x.detail for x in got if x.kind == "late")
    got.clear()
    s.step()  # the job runs (late, so "late" still holds: that run started late)
    a.check()
    b.check()
    assert _events(got) == [("quiet", "no_success", "recovered")]


def test_missed_running_and_late_conditions(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    store = open_either_store()
    s = _scheduler(store, durable_clock)
    s.declare(JobSpec("tick", "tests.durable_jobs:record", Every(60), grace=5.0))
    got: list[WatchAlert] = []
    watch = _watch(s, got)
    watch.watch("tick", AlertRules(missed=True, running=30, late=20))
    durable_clock.advance(60 + 10)  # 10 s late: over grace, so the slot is missed
    s.step()
    watch.check()
    assert _events(got) == [("tick", "missed", "alert")]
    durable_clock.advance(50)  # the next slot runs on time
    s.step()
    watch.check()
    assert _events(got)[1:] == [("tick", "missed", "recovered")]
    # A claim started long ago and not ended: "running", and it clears when it ends.
    durable_clock.advance(60)  # +180: another node takes the slot and hangs in it
    now = durable_clock.wall()
    (claim,) = store.claim_due(
        now, owner="other", lease_seconds=1000, limit=1, advance=lambda st, t: now + 60
    )
    assert store.start(claim, started=now)
    durable_clock.advance(31)
    del got[:]
    watch.check()
    assert _events(got) == [("tick", "running", "alert")]
    assert got[0].detail.startswith("a run started 2023-11-14T22:16:20Z is still going after 31 s")
    store.finish(claim, outcome="ok", ended=durable_clock.wall())
    watch.check()
    assert _events(got)[1:] == [("tick", "running", "recovered")]


def test_late_does_not_flap_on_the_slots_overlap_skip_gives_up(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    # Issue 39: 4 alerts and 4 recoveries in 15 s on a job whose runs outlast its period.
    store = open_either_store()
    s = _scheduler(store, durable_clock)
    s.declare(JobSpec("busy", "tests.durable_jobs:record", Every(10), overlap="skip"))
    got: list[WatchAlert] = []
    watch = _watch(s, got)
    watch.watch("busy", AlertRules(late=3, missed=True))
    for _ in range(4):
        state = s.get("busy")
        assert state is not None and state.next_run is not None
        durable_clock.advance(state.next_run - durable_clock.wall())
        now = durable_clock.wall()
        (claim,) = store.claim_due(
            now, owner="other", lease_seconds=1000, limit=1, advance=lambda st, t: t + 10
        )
        assert store.start(claim, started=now)  # on time; it runs 15 s, its period is 10
        for _ in range(3):
            durable_clock.advance(5)
            watch.check()
        store.finish(claim, outcome="ok", ended=durable_clock.wall())
        s.step()  # the slot due meanwhile is skipped
        watch.check()
        assert s.history("busy", limit=1)[0].outcome == "skipped"
    # Every run started on time: nothing is late. The skips are "missed"'s: one episode.
    assert _events(got) == [("busy", "missed", "alert")]


def test_late_does_not_flap_between_a_runs_end_and_the_skip_of_its_slot(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    # The run has ended and freed its claim; the slot due during it is still the job's
    # next run until the next look skips it. A check in between saw it "not started".
    store = open_either_store()
    s = _scheduler(store, durable_clock)
    s.declare(JobSpec("busy", "tests.durable_jobs:record", Every(10), overlap="skip"))
    got: list[WatchAlert] = []
    watch = _watch(s, got)
    watch.watch("busy", AlertRules(late=3))
    for _ in range(3):
        state = s.get("busy")
        assert state is not None and state.next_run is not None
        durable_clock.advance(state.next_run - durable_clock.wall())
        now = durable_clock.wall()
        (claim,) = store.claim_due(
            now, owner="other", lease_seconds=1000, limit=1, advance=lambda st, t: t + 10
        )
        assert store.start(claim, started=now)
        durable_clock.advance(15)  # it outlasts its period
        store.finish(claim, outcome="ok", ended=durable_clock.wall())
        watch.check()  # before any look has skipped the slot due at +10
        s.step()
        watch.check()
        assert s.history("busy", limit=1)[0].outcome == "skipped"
    assert _events(got) == []


def test_a_dead_senders_message_is_taken_over_after_the_lease(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    store_a, store_b = open_either_store(), open_either_store()
    s = _scheduler(store_a, durable_clock)
    s.declare(JobSpec("quiet", "tests.durable_jobs:record", Every(3600)))

    def dies(alert: WatchAlert) -> None:
        raise ConnectionError("webhook down")

    got: list[WatchAlert] = []
    a = AlertWatch(store_a, on_alert=dies, owner="a", wall_clock=durable_clock.wall, lease=60)
    b = _watch(store_b, got, owner="b", wall_clock=durable_clock.wall, lease=60)
    for w in (a, b):
        w.watch("quiet", AlertRules(late=10))
    durable_clock.advance(3600 + 11)
    assert a.check() == []  # a won the episode; its delivery failed
    assert b.check() == [] and got == []  # b waits for a's lease
    durable_clock.advance(61)
    assert _events(b.check()) == [("quiet", "late", "alert")]
    assert b.check() == [] and a.check() == []


def test_paused_jobs_and_gone_jobs_are_not_judged(
    open_either_store: Callable[..., Any], durable_clock: FakeClock
) -> None:
    store = open_either_store()
    s = _scheduler(store, durable_clock)
    s.declare(JobSpec("held", "tests.durable_jobs:record", Every(60), paused=True))
    got: list[WatchAlert] = []
    watch = _watch(s, got)
    watch.watch("held", AlertRules(no_success=10, late=10))
    watch.watch("gone", AlertRules(no_success=10))
    durable_clock.advance(600)
    assert watch.check() == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"no_success": -1},
            ValueError,
            "no_success must be a number of seconds > 0 or None, got -1",
        ),
        ({"late": 0}, ValueError, "late must be a number of seconds > 0 or None, got 0"),
        ({"running": "1h"}, TypeError, "running must be a number of seconds > 0 or None, got '1h'"),
        (
            {"running": float("inf")},
            ValueError,
            "running must be a number of seconds > 0 or None, got inf",
        ),
        ({"missed": 1}, TypeError, "missed must be a bool, got 1"),
    ],
)
def test_rules_refuse_bad_values(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error) as info:
        AlertRules(**kwargs)
    assert str(info.value) == message


def test_watch_refuses_a_store_it_cannot_use(tmp_path: Any) -> None:
    with pytest.raises(TypeError, match=r"^source must be a DurableScheduler, an Async"):
        AlertWatch(object(), on_alert=print, owner="x")
    from tickwork.stores.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "s.db") as store:
        with pytest.raises(ValueError, match=r"^owner must be a non-empty string, got None$"):
            AlertWatch(store, on_alert=print)
        with pytest.raises(ValueError, match=r"^lease must be a number of seconds > 0, got 0$"):
            AlertWatch(store, on_alert=print, owner="x", lease=0)
        with pytest.raises(ValueError, match=r"^interval must be a number of seconds > 0 or"):
            AlertWatch(store, on_alert=print, owner="x", interval=-1)


def test_a_file_from_before_alerts_gains_the_episode_table(tmp_path: Any) -> None:
    import sqlite3

    from tickwork.stores import sqlite as sqlite_mod
    from tickwork.stores.sqlite import APPLICATION_ID, SQLiteStore

    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    before = sqlite_mod.MIGRATIONS.index(sqlite_mod._alert_episodes_v8)
    for step in sqlite_mod.MIGRATIONS[:before]:
        step(conn)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID:d}")
    conn.execute(f"PRAGMA user_version={before:d}")
    conn.close()
    clock = FakeClock(wall_start=DURABLE_START)
    with SQLiteStore(db) as store:
        s = _scheduler(store, clock)
        s.declare(JobSpec("job", "tests.durable_jobs:record", Every(60)))
        got: list[WatchAlert] = []
        watch = _watch(s, got)
        watch.watch("job", AlertRules(late=1))
        clock.advance(62)
        assert _events(watch.check()) == [("job", "late", "alert")]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_mod.MIGRATIONS)
    conn.close()


def test_the_async_scheduler_is_watched_through_its_engine(tmp_path: Any) -> None:
    from tickwork import AsyncDurableScheduler
    from tickwork.stores.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "s.db") as store:
        s = AsyncDurableScheduler(store, owner="async-node")
        watch = AlertWatch(s, on_alert=print)
        assert watch.owner == "async-node"
        watch.watch("x", AlertRules(running=60, late=8))
        assert watch.interval() == 2.0
        watch.watch("x", AlertRules())  # nothing on: not watched
        assert watch.watched() == {} and watch.interval() == 30.0
        watch.start()
        watch.stop()


def _facts(**kw: Any) -> Any:
    from tickwork.stores._alerts import JobFacts

    base: dict[str, Any] = {
        "paused": False,
        "next_run": None,
        "first_slot": None,
        "last_ok": None,
        "last_entry": None,
        "claims": (),
    }
    return JobFacts(**{**base, **kw})


def test_conditions_judged_from_facts() -> None:
    from tickwork._durable.watch import conditions

    def held(rules: AlertRules, now: float, **kw: Any) -> dict[str, str | None]:
        return dict(conditions(rules, _facts(**kw), now, first_seen=0.0))

    # late: a due slot nobody started; a jittered schedule gets its jitter on top
    assert held(AlertRules(late=10), 111.0, next_run=100.0)["late"] is not None
    assert held(AlertRules(late=10), 111.0, next_run=100.0, jitter=5.0)["late"] is None
    assert held(AlertRules(late=10), 116.0, next_run=100.0, jitter=5.0)["late"] is not None
    # late: the newest run started late, or a claim waits unstarted
    late_run = held(AlertRules(late=10), 500.0, last_entry=("ok", 100.0, 111.0))["late"]
    assert late_run == "slot 1970-01-01T00:01:40Z started 11 s late (alert after 10 s)"
    assert held(AlertRules(late=10), 500.0, last_entry=("ok", 100.0, 109.0))["late"] is None
    assert held(AlertRules(late=10), 111.0, claims=((100.0, None),))["late"] is not None
    # missed: only while the newest entry is a given-up slot
    assert held(AlertRules(missed=True), 0.0, last_entry=("skipped", 60.0, None)) == {
        "missed": "slot 1970-01-01T00:01:00Z skipped"
    }
    assert held(AlertRules(missed=True), 0.0, last_entry=("failed", 60.0, 61.0)) == {"missed": None}
    # no success: from the newest ok end, else the first slot, else when first seen
    assert held(AlertRules(no_success=100), 201.0, last_ok=100.0)["no_success"] == (
        "no successful run since 1970-01-01T00:01:40Z (alert after 1 min 40 s)"
    )
    assert held(AlertRules(no_success=100), 199.0, first_slot=100.0)["no_success"] is None
    assert held(AlertRules(no_success=100), 101.0)["no_success"] is not None
    # running: a started claim past the bound
    assert held(AlertRules(running=60), 161.0, claims=((0.0, 100.0),))["running"] is not None
    assert held(AlertRules(running=60), 159.0, claims=((0.0, 100.0),))["running"] is None
