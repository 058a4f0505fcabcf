"""The store contract as tests: every store runs this same suite.

Use it by subclassing `StoreContract` in a ``test_*.py`` module and providing the
``open_store`` fixture: a zero-argument factory that opens a *new* store object on the
same, initially empty, backing database each time it is called (two objects stand for
two processes or hosts), and closes them all at teardown. Times are plain numbers; no
test sleeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest

from tickwork import At, Cron, Every
from tickwork.stores import (
    Claim,
    JobNotFoundError,
    JobSpec,
    JobState,
    LastRun,
    OutcomeRetention,
    RuntimeControl,
    SlotLedger,
    SlotRecord,
    Store,
    StoreError,
    Upsert,
)
from tickwork.stores._ledger import _PRUNE_JOBS as PRUNE_JOBS
from tickwork.stores.contract import (
    KEEP,
    BatchRecorder,
    CarryingClaim,
    ClaimWakeup,
    Finish,
    GivenUp,
    JobQuery,
    OneOffCounts,
    OneOffQueue,
    Start,
    list_jobs,
    oneoff_rows,
)

OpenStore = Callable[..., Store]

LEASE = 30.0


def noop() -> None:
    """A job function that exists (the store never imports it; the scheduler would)."""


FUNC = "tests.store_contract:noop"


def spec(job_id: str = "job", schedule: Any = None, **kw: Any) -> JobSpec:
    return JobSpec(job_id, FUNC, schedule or Every(10), **kw)


def once(state: JobState, now: float) -> float | None:
    """AdvanceFn policy of a one-shot: nothing after this run."""
    return None


def grid(state: JobState, now: float) -> float | None:
    """AdvanceFn policy of a fixed-rate job: the next grid point after ``now``."""
    assert state.next_run is not None
    step = state.spec.schedule.interval  # type: ignore[union-attr]
    return state.next_run + step * (math.floor((now - state.next_run) / step) + 1)


def step_one(state: JobState, now: float) -> float | None:
    """AdvanceFn policy that replays every slot (as ``missed="all"``): the next one after."""
    assert state.next_run is not None
    return state.next_run + state.spec.schedule.interval  # type: ignore[union-attr]


def oneoff(job_id: str, at: float, **kw: Any) -> Any:
    """The row of a one-off (id ``"~" + job_id``) due at ``at``, as an enqueue writes it."""
    spec = JobSpec("~" + job_id, FUNC, At(at), **kw)
    (row,) = oneoff_rows(spec, [(spec.id, at, spec.args, spec.kwargs)])
    return row


def _queue(store: Store) -> Any:
    """The store as `OneOffQueue` (both bundled stores are)."""
    assert isinstance(store, OneOffQueue)
    return store


def counts(store: Store) -> OneOffCounts:
    """The one-offs' counts of `FUNC`, the function of `oneoff` rows."""
    got = {c.queue: c for c in _queue(store).oneoff_counts()}
    assert set(got) <= {FUNC}, got
    return got.get(FUNC, OneOffCounts(FUNC))


def never(state: JobState, now: float) -> float | None:
    """AdvanceFn policy for claims that must not call it (retries)."""
    raise AssertionError(f"advance called for job {state.id!r}, next_run {state.next_run!r}")


def _control(store: Store) -> Any:
    """The store as `RuntimeControl` (both bundled stores have it)."""
    assert isinstance(store, RuntimeControl)
    return store


def claim(store: Store, now: float, owner: str = "A", **kw: Any) -> list[Claim]:
    kw.setdefault("lease_seconds", LEASE)
    kw.setdefault("limit", 100)
    kw.setdefault("advance", grid)
    return store.claim_due(now, owner=owner, **kw)


class StoreContract:
    """Contract tests; subclasses provide ``open_store``."""

    @pytest.fixture
    def open_store(self) -> OpenStore:
        raise NotImplementedError("a store test module must override the open_store fixture")

    @pytest.fixture
    def store(self, open_store: OpenStore) -> Store:
        return open_store()

    # -- declaring jobs ---------------------------------------------------------------

    def test_is_a_store(self, store: Store) -> None:
        assert isinstance(store, Store)

    def test_upsert_creates_and_get_returns_the_state(self, store: Store) -> None:
        s = spec(args=(1, [2]), kwargs={"x": {"y": None}})
        assert store.upsert(s, 100.0) is Upsert.CREATED
        state = store.get("job")
        assert state == JobState(
            spec=s, next_run=100.0, paused=False, last_run=None, first_slot=100.0
        )
        assert state.id == "job"
        assert store.get("other") is None

    def test_same_declaration_twice_is_unchanged_and_keeps_the_state(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert store.start(c, started=100.5)
        assert store.finish(c, outcome="ok", ended=101.0)
        before = store.get("job")
        assert before is not None and before.next_run == 110.0
        # a restart re-declares the same job with a freshly computed first run
        assert store.upsert(spec(), 500.0) is Upsert.UNCHANGED
        assert store.get("job") == before
        assert len(store.jobs()) == 1

    def test_changed_schedule_takes_the_new_next_run(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        assert store.upsert(spec(schedule=Every(60)), 160.0) is Upsert.UPDATED
        state = store.get("job")
        assert state is not None
        assert state.next_run == 160.0
        assert state.spec.schedule == Every(60)

    @pytest.mark.parametrize(
        "change",
        [
            {"kwargs": {"x": 1}},
            {"args": ("a",)},
            {"overlap": "allow"},
            {"missed": "all", "missed_cap": 5},
            {"grace": 2.5},
            {"delivery": "at_least_once"},
        ],
    )
    def test_changed_non_schedule_field_keeps_next_run(
        self, store: Store, change: dict[str, Any]
    ) -> None:
        store.upsert(spec(), 100.0)
        store.set_next_run("job", 123.0)
        assert store.upsert(spec(**change), 999.0) is Upsert.UPDATED
        state = store.get("job")
        assert state is not None
        assert state.next_run == 123.0
        assert state.spec == spec(**change)

    def test_changed_func_updates(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        new = JobSpec("job", "tests.store_contract:other", Every(10))
        assert store.upsert(new, 5.0) is Upsert.UPDATED
        state = store.get("job")
        assert state is not None and state.spec.func == new.func and state.next_run == 100.0

    def test_runtime_pause_survives_an_unchanged_redeclaration(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        store.set_paused("job", True)
        assert store.upsert(spec(), 100.0) is Upsert.UNCHANGED
        assert store.get("job").paused  # type: ignore[union-attr]
        # ...and an update of another field does not resume it either
        assert store.upsert(spec(grace=1.0), 100.0) is Upsert.UPDATED
        assert store.get("job").paused  # type: ignore[union-attr]

    def test_a_changed_declared_pause_is_applied(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        assert store.upsert(spec(paused=True), 100.0) is Upsert.UPDATED
        assert store.get("job").paused  # type: ignore[union-attr]
        assert store.upsert(spec(paused=False), 100.0) is Upsert.UPDATED
        assert not store.get("job").paused  # type: ignore[union-attr]
        store.upsert(spec("p", paused=True), 100.0)
        assert store.get("p").paused  # type: ignore[union-attr]

    def test_jobs_lists_all_ordered_by_id(self, store: Store) -> None:
        for job_id in ["b", "c", "a"]:
            store.upsert(spec(job_id), 100.0)
        assert [j.id for j in store.jobs()] == ["a", "b", "c"]

    def test_a_page_of_jobs_is_searched_filtered_counted_as_when_read_whole(
        self, store: Store
    ) -> None:
        # Ids sort as "ns/a-0" < ... ; "other/" jobs are outside the prefix.
        for i in range(6):
            store.upsert(spec(f"ns/a-{i}"), 100.0 if i < 3 else 500.0)
        store.upsert(spec("ns/B_%x"), 500.0)
        store.upsert(spec("other/a-9"), 100.0)
        store.set_paused("ns/a-0", True)
        (c,) = claim(store, 100.0, limit=1)  # ns/a-1: running
        (d,) = claim(store, 110.0, limit=1)  # ns/a-2: its run fails
        assert (c.job_id, d.job_id) == ("ns/a-1", "ns/a-2")
        store.finish(d, outcome="failed", ended=111.0, error="boom")
        assert _control(store).trigger_job("ns/a-4", by="ana", at=120.0) == "queued"
        now = 300.0  # a-2's next run (120) is late; a-4's queued run (120) too
        expected = {
            "all": 7, "failing": 1, "paused": 1, "late": 2, "running": 1, "waiting": 1,
        }  # fmt: skip

        class Whole:  # the same store, read whole by `list_jobs`
            def __getattr__(self, name: str) -> Any:
                if name == "jobs_page":
                    raise AttributeError(name)
                return getattr(store, name)

        for listing in (store, Whole()):

            def ask(listing: Any = listing, **kw: Any) -> Any:
                return list_jobs(listing, JobQuery(prefix="ns/", **kw), now=now)

            page = ask()
            assert [s.id for s in page.jobs][:3] == ["ns/B_%x", "ns/a-0", "ns/a-1"]
            assert dict(page.counts) == expected and page.total == 7
            assert [s.id for s in ask(state="failing").jobs] == ["ns/a-2"]
            assert [s.id for s in ask(state="late").jobs] == ["ns/a-2", "ns/a-4"]
            assert [s.id for s in ask(state="running").jobs] == ["ns/a-1"]
            assert [s.id for s in ask(state="waiting").jobs] == ["ns/a-4"]
            assert [s.id for s in ask(state="paused").jobs] == ["ns/a-0"]
            # LIKE's wildcards are searched as text, in any case
            assert [s.id for s in ask(search="b_%").jobs] == ["ns/B_%x"]
            assert ask(search="_").total == 1 and ask(search="A-").total == 6
            two = ask(offset=2, limit=2)
            assert [s.id for s in two.jobs] == ["ns/a-1", "ns/a-2"] and two.total == 7
            assert ask(offset=6, limit=None).jobs[0].id == "ns/a-5"
            assert ask(offset=2, limit=2).jobs[0].claims == store.get("ns/a-1").claims  # type: ignore[union-attr]
        with pytest.raises(ValueError, match=r"state must be one of failing, .*, got 'ok'"):
            JobQuery(state="ok")
        with pytest.raises(ValueError, match=r"limit must be an integer from 1 to 1,000"):
            JobQuery(limit=0)

    def test_all_schedule_kinds_round_trip(self, store: Store) -> None:
        kinds = [
            At(1.5e9),
            Every(0.5, fixed_delay=True),
            Cron("0 3 * * *", "Europe/Berlin"),
        ]
        for i, sched in enumerate(kinds):
            store.upsert(spec(f"j{i}", sched), None)
        assert [j.spec.schedule for j in store.jobs()] == kinds
        assert all(j.next_run is None for j in store.jobs())

    def test_remove(self, store: Store) -> None:
        store.upsert(spec("a"), 100.0)
        store.upsert(spec("b"), 100.0)
        store.remove("a")
        assert store.get("a") is None
        assert [j.id for j in store.jobs()] == ["b"]
        with pytest.raises(JobNotFoundError, match=r"^no job with id 'a'$"):
            store.remove("a")

    def test_unknown_ids_raise_job_not_found(self, store: Store) -> None:
        with pytest.raises(JobNotFoundError, match="'nope'"):
            store.set_paused("nope", True)
        with pytest.raises(LookupError, match="'nope'"):
            store.set_next_run("nope", 1.0)
        assert store.jobs() == []

    def test_invalid_arguments_change_nothing(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        before = store.jobs()
        bad_spec: Any = {"id": "x"}
        with pytest.raises(TypeError, match=r"^spec must be a JobSpec, got \{'id': 'x'\}$"):
            store.upsert(bad_spec, 1.0)
        with pytest.raises(ValueError, match=r"^next_run must be a finite number, got nan$"):
            store.upsert(spec("n"), math.nan)
        with pytest.raises(ValueError, match=r"^next_run must be a finite number, got inf$"):
            store.set_next_run("job", math.inf)
        with pytest.raises(TypeError, match=r"^paused must be a bool, got 1$"):
            store.set_paused("job", 1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^job_id must be a non-empty .*, got ''$"):
            store.remove("")
        with pytest.raises(ValueError, match=r"^lease_seconds must be a finite number > 0, got 0$"):
            claim(store, 200.0, lease_seconds=0)
        with pytest.raises(ValueError, match=r"^limit must be an int >= 1, got 0$"):
            claim(store, 200.0, limit=0)
        with pytest.raises(ValueError, match=r"^owner must be a non-empty string, got ''$"):
            claim(store, 200.0, owner="")
        with pytest.raises(TypeError, match=r"^now must be a number of seconds, got '200'$"):
            claim(store, "200")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^advance must be callable as advance\(state, now\)"):
            claim(store, 200.0, advance=None)
        assert store.jobs() == before

    # -- claiming ---------------------------------------------------------------------

    def test_claim_takes_due_jobs_in_order_and_advances_them(self, store: Store) -> None:
        store.upsert(spec("late", At(120.0)), 120.0)
        store.upsert(spec("first"), 90.0)
        store.upsert(spec("second"), 100.0)
        store.upsert(spec("future"), 101.0)
        claims = claim(store, 100.0, owner="A")
        assert [c.job_id for c in claims] == ["first", "second"]
        c = claims[0]
        assert (c.owner, c.scheduled, c.claimed_at, c.lease_until, c.started) == (
            "A", 90.0, 100.0, 100.0 + LEASE, None,
        )  # fmt: skip
        assert c.spec == spec("first")
        assert claims[0].token != claims[1].token
        first = store.get("first")
        assert first is not None
        assert first.next_run == 110.0  # the grid point after now, set with the claim
        assert first.claims == (c,)
        assert store.get("future").next_run == 101.0  # type: ignore[union-attr]

    def test_claim_respects_limit(self, store: Store) -> None:
        for i in range(5):
            store.upsert(spec(f"j{i}"), 100.0 + i)
        assert [c.job_id for c in claim(store, 200.0, limit=2)] == ["j0", "j1"]
        assert [c.job_id for c in claim(store, 200.0, limit=10)] == ["j2", "j3", "j4"]
        assert claim(store, 200.0) == []

    def test_advance_sees_the_state_and_now(self, store: Store) -> None:
        store.upsert(spec(kwargs={"k": 1}), 100.0)
        seen: list[tuple[JobState, float]] = []

        def advance(state: JobState, now: float) -> float | None:
            seen.append((state, now))
            return 777.0

        claim(store, 150.0, advance=advance)
        ((state, now),) = seen
        assert now == 150.0
        assert state.next_run == 100.0 and state.spec == spec(kwargs={"k": 1})
        assert store.get("job").next_run == 777.0  # type: ignore[union-attr]

    def test_one_shot_has_no_next_run_after_its_claim(self, store: Store) -> None:
        store.upsert(spec(schedule=At(100.0)), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        assert store.get("job").next_run is None  # type: ignore[union-attr]
        assert claim(store, 110.0, advance=once) == []
        assert store.finish(c, outcome="ok", ended=101.0)
        assert claim(store, 1e9, advance=once) == []

    def test_paused_jobs_are_not_claimed_until_resumed(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        store.set_paused("job", True)
        assert claim(store, 200.0) == []
        store.set_paused("job", False)
        assert [c.job_id for c in claim(store, 200.0)] == ["job"]

    def test_jobs_without_next_run_are_never_claimed(self, store: Store) -> None:
        store.upsert(spec(), None)
        assert claim(store, 1e12) == []
        store.set_next_run("job", 5.0)
        assert len(claim(store, 5.0)) == 1

    def test_claims_are_exclusive_between_owners(self, open_store: OpenStore) -> None:
        a, b = open_store(), open_store()
        for i in range(10):
            a.upsert(spec(f"j{i}"), 100.0)
        got_a = claim(a, 100.0, "A", limit=4)
        got_b = claim(b, 100.0, "B")
        assert len(got_a) == 4 and len(got_b) == 6
        assert {c.job_id for c in got_a}.isdisjoint({c.job_id for c in got_b})
        # the next slots (110) are due, but each job is still claimed: nobody gets them
        assert claim(a, 115.0, "A") == [] and claim(b, 115.0, "B") == []

    def test_a_claimed_job_is_claimable_again_after_finish(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert claim(store, 110.0) == []
        store.finish(c, outcome="ok", ended=111.0)
        (c2,) = claim(store, 111.0, owner="B")
        assert c2.scheduled == 110.0

    def test_overlap_allow_can_be_claimed_while_claimed(self, store: Store) -> None:
        store.upsert(spec(overlap="allow"), 100.0)
        (c1,) = claim(store, 100.0)
        (c2,) = claim(store, 110.0)
        assert (c1.scheduled, c2.scheduled) == (100.0, 110.0)
        state = store.get("job")
        assert state is not None and [c.token for c in state.claims] == [c1.token, c2.token]

    def test_a_batch_claim_shows_each_job_only_its_own_claims(self, store: Store) -> None:
        # One claim call takes many jobs at once; advance must see, for each job, the
        # claims held on that job and no other's (overlap="allow" keeps them claimable).
        for name in ("a", "b", "c"):
            store.upsert(spec(name, overlap="allow"), 100.0)
        first = {c.job_id: c.token for c in claim(store, 100.0)}
        seen: dict[str, list[str]] = {}

        def advance(state: JobState, now: float) -> float | None:
            seen[state.id] = [c.token for c in state.claims]
            return grid(state, now)

        second = claim(store, 110.0, advance=advance)
        assert sorted(c.job_id for c in second) == ["a", "b", "c"]
        assert seen == {job_id: [token] for job_id, token in first.items()}
        for c in second:
            state = store.get(c.job_id)
            assert state is not None
            assert [x.token for x in state.claims] == [first[c.job_id], c.token]

    def test_a_changed_spec_is_read_back_changed_after_many_reads(self, store: Store) -> None:
        # Decoded specs may be remembered by their stored text; a redeclared job must
        # never be read as its old self, however often the old one was read.
        store.upsert(spec("a", args=[1]), 100.0)
        for _ in range(3):
            state = store.get("a")
            assert state is not None and state.spec.args == (1,)
        store.upsert(spec("a", args=[2]), 100.0)
        state = store.get("a")
        assert state is not None and state.spec.args == (2,)
        (c,) = claim(store, 100.0)
        assert c.spec.args == (2,)
        # Many distinct specs read once each: whatever is remembered stays bounded and
        # every one of them reads back as itself.
        for i in range(1100):
            store.upsert(spec(f"j{i}", args=[i]), 500.0)
        assert {s.id: s.spec.args for s in store.jobs() if s.id != "a"} == {
            f"j{i}": (i,) for i in range(1100)
        }

    def test_advance_that_raises_claims_nothing(self, store: Store) -> None:
        store.upsert(spec("a"), 100.0)
        store.upsert(spec("b"), 100.0)
        before = store.jobs()

        def advance(state: JobState, now: float) -> float | None:
            if state.id == "b":
                raise RuntimeError("policy bug")
            return 200.0

        with pytest.raises(RuntimeError, match="policy bug"):
            claim(store, 100.0, advance=advance)
        assert store.jobs() == before

    @pytest.mark.parametrize("result", [math.nan, math.inf, "200", True])
    def test_advance_returning_a_bad_time_claims_nothing(
        self, store: Store, result: object
    ) -> None:
        store.upsert(spec(), 100.0)
        before = store.jobs()
        message = (
            r"^advance\(\) must return a finite number of seconds or None, got .* for job 'job'$"
        )
        with pytest.raises(ValueError, match=message):
            claim(store, 100.0, advance=lambda s, n: result)
        assert store.jobs() == before

    # -- starting, renewing, finishing ------------------------------------------------

    def test_start_records_the_start_once(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert store.start(c, started=101.0)
        assert store.get("job").claims[0].started == 101.0  # type: ignore[union-attr]
        assert not store.start(c, started=102.0)
        assert store.get("job").claims[0].started == 101.0  # type: ignore[union-attr]

    def test_start_after_the_lease_ended_is_refused(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert not store.start(c, started=100.0 + LEASE)
        assert store.get("job").claims[0].started is None  # type: ignore[union-attr]

    def test_finish_records_the_last_run_and_releases(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        store.start(c, started=100.5)
        assert store.finish(c, outcome="failed", ended=102.0, error="ZeroDivisionError: x")
        state = store.get("job")
        assert state is not None
        assert state.claims == ()
        assert state.last_run == LastRun(100.0, 100.5, 102.0, "failed", "ZeroDivisionError: x")
        assert state.next_run == 110.0

    def test_finish_without_start_records_a_run_that_never_started(self, store: Store) -> None:
        store.upsert(spec(grace=1.0), 100.0)
        (c,) = claim(store, 150.0)  # far too late for the grace: the policy gives it up
        assert store.finish(c, outcome="missed", ended=150.0)
        assert store.get("job").last_run == LastRun(100.0, None, 150.0, "missed", None)  # type: ignore[union-attr]

    def test_finish_can_set_the_next_run(self, store: Store) -> None:
        store.upsert(spec(schedule=Every(5, fixed_delay=True)), 100.0)
        (c,) = claim(store, 100.0, advance=lambda s, n: n + 5)
        assert store.get("job").next_run == 105.0  # type: ignore[union-attr]
        store.start(c, started=100.0)
        assert store.finish(c, outcome="ok", ended=112.0, next_run=117.0)
        assert store.get("job").next_run == 117.0  # type: ignore[union-attr]
        (c,) = claim(store, 117.0, advance=lambda s, n: n + 5)
        assert store.finish(c, outcome="ok", ended=118.0, next_run=KEEP)
        assert store.get("job").next_run == 122.0  # type: ignore[union-attr]
        (c,) = claim(store, 122.0, advance=lambda s, n: n + 5)
        assert store.finish(c, outcome="ok", ended=123.0, next_run=None)
        assert store.get("job").next_run is None  # type: ignore[union-attr]

    def test_finish_with_a_stale_token_returns_false_and_changes_nothing(
        self, store: Store
    ) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        store.start(c, started=100.0)
        store.finish(c, outcome="ok", ended=101.0)
        (c2,) = claim(store, 110.0, owner="B")
        before = store.jobs()
        assert not store.finish(c, outcome="failed", ended=111.0, error="stale", next_run=1.0)
        assert not store.renew(c, now=111.0, lease_seconds=60.0)
        assert not store.start(c, started=111.0)
        assert store.jobs() == before
        assert store.get("job").claims == (c2,)  # type: ignore[union-attr]

    def test_finish_rejects_bad_arguments_and_keeps_the_claim(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        before = store.jobs()
        with pytest.raises(ValueError, match=r"^outcome must be one of 'ok', .*, got 'great'$"):
            store.finish(c, outcome="great", ended=101.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^claim must be a Claim"):
            store.finish(c.token, outcome="ok", ended=101.0)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^ended must be a finite number, got nan$"):
            store.finish(c, outcome="ok", ended=math.nan)
        assert store.jobs() == before

    def test_renew_extends_the_lease(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert store.renew(c, now=120.0, lease_seconds=LEASE)
        assert store.get("job").claims[0].lease_until == 150.0  # type: ignore[union-attr]
        assert store.recover_expired(149.0) == []
        assert store.renew(c, now=121.0, lease_seconds=1.0)  # never shortens
        assert store.get("job").claims[0].lease_until == 150.0  # type: ignore[union-attr]

    def test_remove_while_claimed_makes_finish_return_false(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        store.remove("job")
        assert not store.finish(c, outcome="ok", ended=101.0)
        assert store.jobs() == []

    # -- leases, recovery, delivery semantics -----------------------------------------

    def test_expired_claim_that_never_started_is_released(self, store: Store) -> None:
        # killed after the claim, before the run: nothing ran, so the slot is offered again
        store.upsert(spec(schedule=At(100.0)), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        assert store.recover_expired(100.0 + LEASE - 0.001) == []
        (r,) = store.recover_expired(100.0 + LEASE)
        assert r.action == "released" and r.claim.token == c.token
        state = store.get("job")
        assert state is not None
        assert (state.next_run, state.last_run) == (None, None)  # the schedule is untouched
        (retry,) = state.claims
        assert (retry.retry, retry.owner, retry.scheduled, retry.started) == (True, "", 100.0, None)
        assert retry.token != c.token
        assert store.next_wakeup() == 100.0  # a pending retry is due now
        (again,) = claim(store, 200.0, owner="B", advance=never)
        assert (again.retry, again.owner, again.scheduled) == (True, "B", 100.0)
        assert again.token not in (c.token, retry.token)
        assert store.get("job").claims == (again,)  # type: ignore[union-attr]
        assert claim(store, 200.0, owner="C", advance=never) == []  # handed out once
        assert not store.start(c, started=200.0)  # the old claim is gone
        assert store.start(again, started=200.0)
        assert store.finish(again, outcome="ok", ended=201.0)
        assert store.get("job").last_run == LastRun(100.0, 200.0, 201.0, "ok", None)  # type: ignore[union-attr]

    def test_at_most_once_started_run_is_abandoned_not_repeated(self, store: Store) -> None:
        # killed mid-run, or after the run but before finish: recorded, never re-run
        store.upsert(spec(schedule=At(100.0)), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        store.start(c, started=100.5)
        (r,) = store.recover_expired(200.0)
        assert r.action == "abandoned"
        state = store.get("job")
        assert state is not None
        assert state.next_run is None and state.claims == ()
        assert state.last_run is not None
        assert (state.last_run.outcome, state.last_run.started, state.last_run.ended) == (
            "abandoned", 100.5, None,
        )  # fmt: skip
        assert "'A'" in (state.last_run.error or "")
        assert claim(store, 1e9, advance=once) == []

    def test_at_least_once_started_run_is_due_again(self, store: Store) -> None:
        store.upsert(spec(schedule=At(100.0), delivery="at_least_once"), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        store.start(c, started=100.5)
        (r,) = store.recover_expired(200.0)
        assert r.action == "requeued"
        state = store.get("job")
        assert state is not None and state.next_run is None
        assert [x.retry for x in state.claims] == [True]
        assert state.last_run is not None and state.last_run.outcome == "abandoned"
        (again,) = claim(store, 200.0, owner="B", advance=never)
        assert again.scheduled == 100.0  # the same slot: an idempotency key for the job
        assert again.retry and again.started is None

    def test_recurring_at_most_once_keeps_its_next_slot(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        store.start(c, started=100.0)
        store.recover_expired(140.0)
        assert store.get("job").next_run == 110.0  # type: ignore[union-attr]

    def test_recurring_at_least_once_reoffers_the_lost_slot(self, store: Store) -> None:
        store.upsert(spec(delivery="at_least_once"), 100.0)
        (c,) = claim(store, 100.0)
        store.start(c, started=100.0)
        store.recover_expired(140.0)
        assert store.get("job").next_run == 110.0  # type: ignore[union-attr]
        # overlap="skip": the retry is the job's one claim, so 110 waits for it to end
        assert [(x.scheduled, x.retry) for x in claim(store, 140.0, "B")] == [(100.0, True)]
        assert claim(store, 140.0, "C") == []

    @pytest.mark.parametrize("started", [False, True], ids=["not-started", "started"])
    @pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once"])
    def test_recovering_an_early_overlapping_claim_never_reruns_later_slots(
        self, open_store: OpenStore, started: bool, delivery: str
    ) -> None:
        # overlap="allow": A holds slot 100, B ran 110, C holds 120 when A's lease ends.
        a, b, c, d = open_store(), open_store(), open_store(), open_store()
        a.upsert(spec(overlap="allow", missed="all", delivery=delivery), 100.0)
        (ca,) = claim(a, 100.0, "A", advance=step_one)
        if started:
            assert a.start(ca, started=100.5)
        (cb,) = claim(b, 110.0, "B", advance=step_one)
        assert b.start(cb, started=110.0) and b.finish(cb, outcome="ok", ended=111.0)
        (cc,) = claim(c, 120.0, "C", advance=step_one)
        assert c.start(cc, started=120.0)
        (r,) = d.recover_expired(100.0 + LEASE)
        reoffered = not started or delivery == "at_least_once"
        assert r.claim.token == ca.token
        assert r.action == ("abandoned" if not reoffered else "requeued" if started else "released")
        before = d.get("job").next_run  # type: ignore[union-attr]
        taken: list[Claim] = []
        for _ in range(5):  # a job is taken at most once per call for its due slot
            taken += claim(d, 131.0, "D", advance=step_one)
        # 110 (run by B) and 120 (held by C) are never offered again
        assert sorted(x.scheduled for x in taken) == ([100.0, 130.0] if reoffered else [130.0])
        assert before == 130.0  # recovery did not rewind the schedule
        got = sorted((x.scheduled, x.retry) for x in taken)
        assert got == ([(100.0, True)] if reoffered else []) + [(130.0, False)]
        assert all(x.owner == "D" for x in taken)
        assert d.get("job").next_run == 140.0  # type: ignore[union-attr]
        assert not a.start(ca, started=131.0)  # A stalled: it never runs the slot late
        assert not a.finish(ca, outcome="ok", ended=131.0)
        assert c.finish(cc, outcome="ok", ended=131.0)  # C's later slot is unaffected

    def test_finishing_an_unstarted_claim_cancelled_hands_its_slot_back(
        self, open_store: OpenStore
    ) -> None:
        # A stopping scheduler hands back slot 100 of an overlap="allow" job after
        # another process took 110: 100 is re-offered, 110 is not run again.
        a, b = open_store(), open_store()
        a.upsert(spec(overlap="allow", missed="all"), 100.0)
        (ca,) = claim(a, 100.0, "A", advance=step_one)
        (cb,) = claim(b, 110.0, "B", advance=step_one)
        assert a.finish(ca, outcome="cancelled", ended=111.0)
        state = a.get("job")
        assert state is not None and state.next_run == 120.0
        assert state.last_run == LastRun(100.0, None, 111.0, "cancelled", None)
        assert [(c.scheduled, c.owner, c.retry) for c in state.claims] == [
            (100.0, "", True), (110.0, "B", False),
        ]  # fmt: skip
        assert not a.start(ca, started=111.0) and not a.finish(ca, outcome="ok", ended=112.0)
        assert b.next_wakeup() == 100.0  # the retry is due now
        (again,) = claim(b, 112.0, "B", advance=never)
        assert (again.scheduled, again.retry, again.owner) == (100.0, True, "B")
        assert claim(b, 112.0, "C", advance=step_one) == []  # 120 is not due yet
        # a started run finished "cancelled" is simply released
        assert b.start(cb, started=112.0) and b.finish(cb, outcome="cancelled", ended=113.0)
        assert [c.token for c in b.get("job").claims] == [again.token]  # type: ignore[union-attr]

    def test_a_retry_runs_as_is_without_advancing_the_job(self, store: Store) -> None:
        store.upsert(spec(overlap="allow"), 100.0)
        claim(store, 100.0, "A")  # 100, next 110
        claim(store, 110.0, "A")  # 110, next 120
        assert [r.action for r in store.recover_expired(141.0)] == ["released", "released"]
        seen: list[float | None] = []

        def record(state: JobState, now: float) -> float | None:
            seen.append(state.next_run)
            return grid(state, now)

        got = [(x.scheduled, x.retry) for x in claim(store, 141.0, "B", advance=record)]
        # oldest retries first, then the due slot (only that one passes through advance)
        assert got == [(100.0, True), (110.0, True), (120.0, False)]
        assert seen == [120.0]

    def test_a_pending_retry_cannot_be_started_renewed_or_finished(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        claim(store, 100.0)
        store.recover_expired(140.0)
        (pending,) = store.get("job").claims  # type: ignore[union-attr]
        message = r"^claim must be a Claim from claim_due\(\), got a pending retry nobody holds"
        with pytest.raises(ValueError, match=message + r" \(owner ''\) of job 'job' sched"):
            store.start(pending, started=141.0)
        with pytest.raises(ValueError, match=message):
            store.renew(pending, now=141.0, lease_seconds=LEASE)
        with pytest.raises(ValueError, match=message):
            store.finish(pending, outcome="ok", ended=141.0)
        assert store.get("job").claims == (pending,)  # type: ignore[union-attr]

    def test_a_paused_jobs_retry_waits_until_resumed(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        claim(store, 100.0)
        store.set_paused("job", True)
        store.recover_expired(140.0)
        assert store.next_wakeup() is None
        assert claim(store, 140.0, "B") == []
        store.set_paused("job", False)
        assert store.next_wakeup() == 100.0
        assert [(x.scheduled, x.retry) for x in claim(store, 141.0, "B")] == [(100.0, True)]

    def test_removing_a_job_drops_its_retry(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        claim(store, 100.0)
        store.recover_expired(140.0)
        store.remove("job")
        assert store.next_wakeup() is None and claim(store, 140.0, "B") == []

    def test_waiting_runs_are_the_runs_no_node_has_taken(self, open_store: OpenStore) -> None:
        a, b = open_store(), open_store()
        assert isinstance(a, RuntimeControl)
        # Declared at 800 (its first slot), then re-declared to run next at 2000: the
        # slots backfilled below are after its first slot, and none of its own is due.
        a.upsert(spec(overlap="queue"), 800.0)
        a.upsert(spec(schedule=Every(1000), overlap="queue"), 1000.0)
        assert a.get("job").waiting_runs == 0  # type: ignore[union-attr]
        assert a.backfill_job("job", [900.0, 910.0, 920.0], by="ops", at=950.0) == [
            900.0, 910.0, 920.0
        ]  # fmt: skip
        assert a.trigger_job("job", by="ops", at=950.0) == "queued"
        # Read by another store object (another process): the same count, both reads.
        assert b.get("job").waiting_runs == 4  # type: ignore[union-attr]
        assert [s.waiting_runs for s in b.jobs()] == [4]
        (taken,) = claim(b, 950.0, "B", limit=1, advance=never)  # oldest waiting run first
        assert (taken.scheduled, taken.origin) == (900.0, "backfill")
        assert b.get("job").waiting_runs == 3  # type: ignore[union-attr]
        assert b.start(taken, started=951.0) and b.finish(taken, outcome="ok", ended=952.0)
        assert a.get("job").waiting_runs == 3  # type: ignore[union-attr]
        a.set_paused("job", True)  # a pause holds them, it does not drop them
        assert a.get("job").waiting_runs == 3  # type: ignore[union-attr]

    def test_claim_due_recovers_expired_leases_itself(self, open_store: OpenStore) -> None:
        a, b = open_store(), open_store()
        a.upsert(spec(schedule=At(100.0), delivery="at_least_once"), 100.0)
        (lost,) = claim(a, 100.0, "A", advance=once)
        assert a.start(lost, started=100.0)
        assert claim(b, 100.0 + LEASE - 1, "B", advance=once) == []  # still A's
        (taken,) = claim(b, 100.0 + LEASE, "B", advance=once)
        assert taken.scheduled == 100.0 and taken.owner == "B"
        # A wakes up: it must not report the run as its own
        assert not a.finish(lost, outcome="ok", ended=200.0)
        assert not a.renew(lost, now=200.0, lease_seconds=LEASE)
        assert b.start(taken, started=131.0)
        assert b.finish(taken, outcome="ok", ended=132.0)
        assert a.get("job").last_run.outcome == "ok"  # type: ignore[union-attr]

    def test_stalled_owner_loses_the_claim_before_starting(self, store: Store) -> None:
        store.upsert(spec(schedule=At(100.0)), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        store.recover_expired(200.0)
        assert not store.start(c, started=201.0)  # so it never runs the job late and twice

    def test_recovery_only_touches_expired_claims(self, store: Store) -> None:
        store.upsert(spec("a"), 100.0)
        store.upsert(spec("b"), 120.0)
        (ca,) = claim(store, 100.0)
        (cb,) = claim(store, 120.0)
        (r,) = store.recover_expired(135.0)
        assert r.claim.token == ca.token
        assert store.get("b").claims == (cb,)  # type: ignore[union-attr]

    def test_next_wakeup_covers_due_times_and_lease_ends(self, store: Store) -> None:
        assert store.next_wakeup() is None
        store.upsert(spec("a"), 100.0)
        store.upsert(spec("paused", paused=True), 50.0)
        store.upsert(spec("none"), None)
        assert store.next_wakeup() == 100.0
        claim(store, 100.0)
        # a's next slot (110) cannot be claimed while a is held; its lease ends at 130
        assert store.next_wakeup() == 100.0 + LEASE
        store.upsert(spec("b"), 120.0)
        assert store.next_wakeup() == 120.0
        store.recover_expired(130.0)  # a's slot 100 is a pending retry: due now
        assert store.next_wakeup() == 100.0

    def test_a_claim_leaves_the_next_wakeup_it_found_once(self, store: Store) -> None:
        # ClaimWakeup: a look that claims fewer runs than it may asks no second question.
        assert isinstance(store, ClaimWakeup)
        assert store.wakeup_after_claim() == (False, None)  # no claim yet
        store.upsert(spec("a"), 100.0)
        store.upsert(spec("b"), 105.0)
        assert [c.job_id for c in claim(store, 100.0)] == ["a"]
        assert store.wakeup_after_claim() == (True, 105.0) == (True, store.next_wakeup())
        assert store.wakeup_after_claim() == (False, None)  # handed out once
        assert [c.job_id for c in claim(store, 106.0, limit=1)] == ["b"]
        assert store.wakeup_after_claim() == (False, None)  # a full batch: more may be due
        assert claim(store, 107.0) == []
        assert store.wakeup_after_claim() == (True, 100.0 + LEASE)  # a's lease ends first

    def test_a_finish_asks_for_a_look_only_when_it_may_have_freed_held_work(
        self, open_store: OpenStore
    ) -> None:
        # ClaimWakeup.look_after_finish: what a run's end made claimable that the last
        # look's wake-up could not cover; a plain run's end costs no look.
        a, b = open_store(), open_store()
        assert isinstance(a, ClaimWakeup) and isinstance(b, RuntimeControl)
        assert a.look_after_finish()  # no wake-up read yet: it cannot tell
        a.upsert(spec("one", schedule=At(100.0)), 100.0)
        a.upsert(spec("tick", overlap="skip"), 100.0)
        a.upsert(spec("queued", schedule=At(100.0), overlap="queue"), 100.0)
        a.look_after_finish()  # takes the declarations' announcements

        def advance(state: JobState, now: float) -> float | None:
            return None if isinstance(state.spec.schedule, At) else grid(state, now)

        by_job = {c.job_id: c for c in claim(a, 100.0, advance=advance)}
        assert a.finish(by_job["one"], outcome="ok", ended=101.0)
        assert not a.look_after_finish()  # nothing was held back, nothing announced
        assert a.finish(by_job["tick"], outcome="ok", ended=101.0)
        assert a.look_after_finish()  # its next run (110) was held back by the claim
        assert b.trigger_job("queued", by="ops", at=101.0) == "queued"  # another process
        assert not a.look_after_finish()  # not seen here yet...
        assert claim(a, 101.5) == []  # ...until a look reads the run waiting behind it
        assert a.finish(by_job["queued"], outcome="ok", ended=102.0)
        assert a.look_after_finish()
        assert claim(a, 102.0, advance=never)[0].origin == "manual"
        assert not a.look_after_finish()  # that look found no waiting run left
        a.upsert(spec("new"), 120.0)  # a new job: announced here
        assert a.look_after_finish() and not a.look_after_finish()  # once

    def test_a_claim_carrying_finishes_records_them_in_its_own_transaction(
        self, store: Store
    ) -> None:
        # CarryingClaim: the finishes are recorded as `record` records them, then the
        # claim is made, in one commit; on an error neither is kept.
        assert isinstance(store, CarryingClaim) and isinstance(store, SlotLedger)
        store.upsert(spec("one", schedule=At(100.0)), 100.0)
        store.upsert(spec("two", schedule=At(110.0)), 110.0)
        store.upsert(spec("three", schedule=At(130.0)), 130.0)
        (c1,) = claim(store, 100.0, advance=once)
        kw: dict[str, Any] = {"owner": "A", "lease_seconds": LEASE, "limit": 100}
        ended, claims = store.claim_due_carrying(
            [Finish(c1, "ok", 101.0)], 110.0, advance=once, **kw
        )
        assert ended == [True] and [c.job_id for c in claims] == ["two"]
        state = store.get("one")
        assert state is not None and state.claims == ()
        assert state.last_run == LastRun(100.0, None, 101.0, "ok", None)
        assert [e.outcome for e in store.history("one")] == ["ok"]
        # A finish whose claim is not held reads False; the claim is made all the same.
        assert store.claim_due_carrying([Finish(c1, "ok", 102.0)], 111.0, advance=once, **kw) == (
            [False],
            [],
        )
        (c2,) = claims

        def bad(state: JobState, now: float) -> float | None:
            return math.nan

        with pytest.raises(ValueError, match="advance"):
            store.claim_due_carrying([Finish(c2, "failed", 131.0)], 130.0, advance=bad, **kw)
        held = store.get("two")
        assert held is not None and held.claims == (c2,)  # the finish was not kept either
        assert store.history("two") == []
        assert store.claim_due_carrying([], 130.0, advance=once, **kw)[1][0].job_id == "three"

    # -- batches: starts and finishes in one transaction (BatchRecorder) --------------

    def test_a_batch_records_each_start_and_finish_as_the_single_calls_would(
        self, open_store: OpenStore
    ) -> None:
        a, b = open_store(), open_store()
        assert isinstance(a, BatchRecorder)
        for job_id in ("x", "y", "z", "w"):
            a.upsert(spec(job_id), 100.0)
        by_job = {c.job_id: c for c in claim(a, 100.0)}
        cx, cy, cz, cw = (by_job[j] for j in ("x", "y", "z", "w"))
        assert a.start(cx, started=100.5)
        lost = Start(cz, 101.0)
        assert a.finish(cz, outcome="cancelled", ended=100.6)  # handed back: z is gone
        started, finished = b.record(
            [Start(cy, 101.0), lost, Start(cy, 101.5)],
            [
                Finish(cx, "ok", 102.0),
                Finish(cw, "cancelled", 102.0),  # unstarted: its slot handed back
                Finish(cx, "failed", 102.5, "boom"),  # already finished above
            ],
        )
        assert started == [True, False, False]  # y started once; z's claim is gone
        assert finished == [True, True, False]
        x = a.get("x")
        assert x is not None and x.last_run == LastRun(100.0, 100.5, 102.0, "ok", None)
        assert x.claims == () and x.next_run == 110.0
        y = a.get("y")
        assert y is not None and [c.started for c in y.claims] == [101.0]
        w = a.get("w")
        assert w is not None and [(c.owner, c.retry) for c in w.claims] == [("", True)]
        assert a.record([], []) == ([], [])

    def test_a_claim_can_record_the_runs_it_hands_to_idle_workers_as_started(
        self, open_store: OpenStore
    ) -> None:
        a = open_store()
        assert isinstance(a, BatchRecorder)
        for job_id in ("p", "q", "r"):
            a.upsert(spec(job_id), 100.0)
        asked: list[tuple[str, float | None]] = []

        def start(state: JobState) -> bool:
            asked.append((state.id, state.next_run))
            return state.id != "q"

        got = {c.job_id: c for c in a.claim_due(
            100.0, owner="A", lease_seconds=LEASE, limit=10, advance=grid, start=start
        )}  # fmt: skip
        assert sorted(asked) == [("p", 100.0), ("q", 100.0), ("r", 100.0)]
        assert {j: c.started for j, c in got.items()} == {"p": 100.0, "q": None, "r": 100.0}
        stored = {j: [x.started for x in a.get(j).claims] for j in got}  # type: ignore[union-attr]
        assert stored == {"p": [100.0], "q": [None], "r": [100.0]}
        assert not a.start(got["p"], started=100.5)  # already started: a start is refused
        assert a.start(got["q"], started=100.5)
        assert a.finish(got["p"], outcome="ok", ended=101.0)
        p = a.get("p")
        assert p is not None and p.last_run == LastRun(100.0, 100.0, 101.0, "ok", None)
        # Retries are never started by the claim: the caller decides them first.
        assert [r.action for r in a.recover_expired(100.0 + LEASE + 1)] == ["abandoned"] * 2
        for job_id in ("p", "q", "r"):
            a.remove(job_id)
        a.upsert(spec("s", delivery="at_least_once"), 200.0)
        (cs,) = claim(a, 200.0)
        assert a.start(cs, started=200.0)
        assert [r.action for r in a.recover_expired(200.0 + LEASE + 1)] == ["requeued"]
        asked.clear()
        (again,) = a.claim_due(
            300.0, owner="B", lease_seconds=LEASE, limit=10, advance=never, start=start
        )
        assert again.retry and again.started is None and asked == []

    def test_a_batch_with_a_malformed_item_records_nothing(self, store: Store) -> None:
        assert isinstance(store, BatchRecorder)
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        with pytest.raises(TypeError, match="finishes must hold Finish"):
            store.record([Start(c, 100.5)], [object()])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="outcome must be one of"):
            store.record([Start(c, 100.5)], [Finish(c, "fine", 101.0)])  # type: ignore[arg-type]
        state = store.get("job")
        assert state is not None and [x.started for x in state.claims] == [None]
        assert state.last_run is None

    # -- the slot ledger ----------------------------------------------------------------

    def test_a_finished_run_writes_one_ledger_entry(self, store: Store) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.25)
        assert store.start(c, started=100.5)
        assert store.finish(c, outcome="failed", ended=102.0, error="boom")
        (e,) = store.history()
        assert e == SlotRecord(
            e.seq, "job", 100.0, "failed", 1, "schedule", 100.25, 100.5, 102.0, "A", 1, "boom"
        )
        assert (e.lateness, e.duration) == (0.5, 1.5)
        assert e.to_dict()["scheduled"] == "1970-01-01T00:01:40.000Z"
        assert e.to_dict()["lateness_seconds"] == 0.5

    def test_a_batch_writes_an_entry_per_finish_and_none_for_a_slot_handed_back(
        self, store: Store
    ) -> None:
        assert isinstance(store, BatchRecorder) and isinstance(store, SlotLedger)
        for name in ("a", "b", "c"):
            store.upsert(spec(name), 100.0)
        a, b, c = claim(store, 100.0)
        assert store.record(
            [Start(a, 100.1), Start(b, 100.1)],
            [
                Finish(a, "ok", 101.0, output="line 1\nline 2"),
                Finish(b, "failed", 101.0, "bad"),
                Finish(c, "cancelled", 101.0),  # never started: handed back, not ended
            ],
        ) == ([True, True], [True, True, True])
        entries = store.history()
        assert [(e.job_id, e.outcome, e.output) for e in entries] == [
            ("b", "failed", None),
            ("a", "ok", "line 1\nline 2"),
        ]
        assert entries[0].seq > entries[1].seq
        (retry,) = claim(store, 102.0, owner="B", advance=never)
        assert retry.job_id == "c" and retry.retry
        assert store.finish(retry, outcome="missed", ended=102.0)
        assert [(e.job_id, e.outcome, e.node) for e in store.history(limit=1)] == [
            ("c", "missed", "B")
        ]

    def test_a_batch_s_entries_read_back_exactly_even_when_its_last_finish_is_refused(
        self, store: Store
    ) -> None:
        # PostgreSQL sends a batch's entries as one JSON parameter of the last finish's
        # statement; when that finish's claim is gone, they go in a statement of their own.
        assert isinstance(store, BatchRecorder) and isinstance(store, SlotLedger)
        for name in ("a", "b", "c", "z"):
            store.upsert(spec(name), 100.0)
        by_job = {x.job_id: x for x in claim(store, 100.0 + 1 / 3)}
        a, b, c, z = (by_job[j] for j in ("a", "b", "c", "z"))
        assert store.finish(z, outcome="ok", ended=101.0)
        text = 'quote " backslash \\ tab \t é 🎉 \u2028 end'
        times = (100.1 + 0.2, 1e-7 + 100.0, 100.0 + 2**-40)
        assert store.record(
            [Start(a, times[0]), Start(b, times[1])],
            [
                Finish(b, "failed", times[2], text, output=text),
                Finish(a, "ok", 102.0, output=""),
                Finish(c, "skipped", 102.0),  # never started: ends all the same
                Finish(z, "ok", 103.0),  # z finished already: not recorded
            ],
        ) == ([True, True], [True, True, True, False])
        got = {e.job_id: e for e in store.history()}
        assert sorted(got) == ["a", "b", "c", "z"]
        assert (got["a"].started, got["a"].output, got["a"].error) == (times[0], "", None)
        assert (got["b"].started, got["b"].ended, got["b"].error) == (times[1], times[2], text)
        assert got["b"].output == text and got["b"].claimed == 100.0 + 1 / 3
        assert (got["c"].outcome, got["c"].started, got["c"].node) == ("skipped", None, "A")

    def test_a_batch_of_plain_runs_reads_as_the_single_calls_would(
        self, open_store: OpenStore
    ) -> None:
        # PostgreSQL records such a batch set-based (stores/_pgbatch.py): a start and the
        # finish of one claim in one batch, a removed job, a claim another node freed.
        a, b = open_store(), open_store()
        assert isinstance(b, BatchRecorder) and isinstance(b, SlotLedger)
        for name in ("p", "q", "r", "s", "t", "u"):
            a.upsert(spec(name), 100.0)
        by_job = {x.job_id: x for x in claim(a, 100.0)}
        p, q, r, s, t, u = (by_job[j] for j in ("p", "q", "r", "s", "t", "u"))
        a.remove("r")
        assert a.finish(s, outcome="ok", ended=100.2)
        assert b.record(
            [Start(p, 100.25), Start(q, 100.5), Start(r, 100.5), Start(s, 100.5)],
            [
                Finish(q, "failed", 101.0, "bad"),
                Finish(p, "ok", 101.5),
                Finish(r, "ok", 101.5),
                Finish(t, "skipped", 101.5),  # never started: ends all the same
                Finish(u, "ok", 101.75, output="out"),
            ],
        ) == ([True, True, False, False], [True, True, False, True, True])
        got = {(e.job_id, e.outcome, e.started, e.ended, e.error) for e in b.history()}
        assert got == {
            ("p", "ok", 100.25, 101.5, None),
            ("q", "failed", 100.5, 101.0, "bad"),
            ("s", "ok", None, 100.2, None),
            ("t", "skipped", None, 101.5, None),
            ("u", "ok", None, 101.75, None),
        }
        state = a.get("q")
        assert state is not None and state.claims == ()
        assert state.last_run == LastRun(100.0, 100.5, 101.0, "failed", "bad")
        assert state.next_run == 110.0  # the finish keeps the next run the claim set
        assert b.record([], [Finish(p, "ok", 102.0)]) == ([], [False])  # freed already

    def test_slots_a_claim_gives_up_are_written_by_the_claim(self, store: Store) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec("late"), 100.0)
        store.upsert(spec("on-time"), 150.0)
        asked: list[str] = []

        def given_up(state: JobState) -> GivenUp | None:
            asked.append(state.id)
            return GivenUp("missed", 110.0, 4) if state.id == "late" else None

        claims = store.claim_due(
            150.0,
            owner="A",
            lease_seconds=LEASE,
            limit=10,
            advance=grid,
            given_up=given_up,
        )
        assert sorted(c.job_id for c in claims) == ["late", "on-time"]
        assert sorted(asked) == ["late", "on-time"]
        (e,) = store.history()
        assert (e.job_id, e.outcome, e.scheduled, e.slots, e.claimed, e.started, e.ended) == (
            "late",
            "missed",
            110.0,
            4,
            150.0,
            None,
            150.0,
        )
        assert e.node == "A"

    def test_a_bad_given_up_result_claims_nothing(self, store: Store) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec(), 100.0)
        with pytest.raises(TypeError, match="given_up\\(\\) must return a GivenUp or None"):
            store.claim_due(
                100.0,
                owner="A",
                lease_seconds=LEASE,
                limit=10,
                advance=grid,
                given_up=lambda state: ("missed", 1),  # type: ignore[arg-type,return-value]
            )
        state = store.get("job")
        assert state is not None and state.claims == () and state.next_run == 100.0
        assert store.history() == []

    @pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once"])
    def test_a_lost_started_run_is_an_abandoned_attempt(self, store: Store, delivery: str) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec(schedule=At(100.0), delivery=delivery), 100.0)
        (c,) = claim(store, 100.0, advance=once)
        assert store.start(c, started=100.5)
        store.recover_expired(100.0 + LEASE)
        (lost,) = store.history()
        assert (lost.outcome, lost.started, lost.ended, lost.node, lost.attempt) == (
            "abandoned",
            100.5,
            None,
            "A",
            1,
        )
        assert lost.error is not None and "'A'" in lost.error
        if delivery == "at_least_once":
            (again,) = claim(store, 140.0, owner="B", advance=never)
            assert store.start(again, started=140.0)
            assert store.finish(again, outcome="ok", ended=141.0)
            latest = store.history(limit=1)[0]
            assert (latest.outcome, latest.attempt, latest.node) == ("ok", 2, "B")

    def test_a_lost_claim_that_never_started_writes_nothing(self, store: Store) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec(), 100.0)
        claim(store, 100.0)
        assert [r.action for r in store.recover_expired(100.0 + LEASE)] == ["released"]
        assert store.history() == []

    def test_history_filters_and_pages(self, store: Store) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec("a", schedule=Every(10)), 100.0)
        store.upsert(spec("b", schedule=Every(10)), 100.0)
        for now in (100.0, 110.0, 120.0):
            for c in claim(store, now, advance=step_one):
                outcome = "ok" if (c.job_id, now) != ("b", 110.0) else "failed"
                assert store.finish(c, outcome=outcome, ended=now + 1)  # type: ignore[arg-type]
        everything = store.history()
        assert len(everything) == 6
        assert [e.seq for e in everything] == sorted((e.seq for e in everything), reverse=True)
        assert [e.scheduled for e in store.history("a")] == [120.0, 110.0, 100.0]
        assert [(e.job_id, e.scheduled) for e in store.history(outcome="failed")] == [("b", 110.0)]
        assert {e.scheduled for e in store.history(since=110.0)} == {110.0, 120.0}
        _, second = store.history(limit=2)
        page = store.history(before=second.seq, limit=10)
        assert [e.seq for e in page] == [e.seq for e in everything[2:]]
        assert store.history("nobody") == []

    def test_history_pages_forward_after_a_seq_keeping_the_oldest_newest_first(
        self, store: Store
    ) -> None:
        assert isinstance(store, SlotLedger)
        store.upsert(spec("a", schedule=Every(10)), 100.0)
        store.upsert(spec("b", schedule=Every(10)), 100.0)
        for now in (100.0, 110.0, 120.0, 130.0):
            for c in claim(store, now, advance=step_one):
                outcome = "failed" if c.job_id == "a" and now in (110.0, 130.0) else "ok"
                assert store.finish(c, outcome=outcome, ended=now + 1)  # type: ignore[arg-type]
        seqs = [e.seq for e in store.history()]  # newest first, 8 entries
        # the 3 right after the oldest, newest first; then the rest
        assert [e.seq for e in store.history(after=seqs[-1], limit=3)] == seqs[4:7]
        assert [e.seq for e in store.history(after=seqs[4], limit=10)] == seqs[:4]
        assert store.history(after=seqs[0]) == []
        a = [e.seq for e in store.history("a")]
        assert [e.seq for e in store.history("a", after=a[-1], limit=2)] == a[1:3]
        failed = [e.seq for e in store.history("a", outcome="failed")]
        got = store.history("a", outcome="failed", after=a[-1], limit=1)
        assert [e.seq for e in got] == failed[1:] and got[0].scheduled == 110.0
        assert [e.scheduled for e in store.history("a", since=120.0, after=a[-1])] == [130.0, 120.0]
        # both: the window between, the oldest of it kept
        assert [e.seq for e in store.history(after=seqs[-1], before=seqs[0], limit=2)] == seqs[5:7]

    @pytest.mark.parametrize(
        ("kw", "error", "match"),
        [
            ({"limit": 0}, ValueError, "limit"),
            ({"outcome": "fine"}, ValueError, "outcome must be one of"),
            ({"since": float("nan")}, ValueError, "since"),
            ({"before": "7"}, TypeError, "before must be an int"),
            ({"after": 7.0}, TypeError, "after must be an int"),
            ({"job_id": ""}, ValueError, "job"),
        ],
    )
    def test_history_refuses_bad_arguments(
        self, store: Store, kw: dict[str, Any], error: type[Exception], match: str
    ) -> None:
        assert isinstance(store, SlotLedger)
        with pytest.raises(error, match=match):
            store.history(**kw)

    def test_pruning_keeps_the_newest_entries_per_job_and_drops_old_ones(
        self, open_store: OpenStore
    ) -> None:
        store = open_store(history_keep=3, history_days=1.0)
        assert isinstance(store, SlotLedger)
        store.upsert(spec("a", schedule=Every(10)), 100.0)
        store.upsert(spec("b", schedule=Every(10)), 100.0)
        for k in range(5):
            for c in claim(store, 100.0 + 10 * k, advance=step_one):
                if c.job_id == "a" or k == 0:
                    assert store.finish(c, outcome="ok", ended=101.0 + 10 * k)
        # b's one entry is young: only a's two oldest go
        assert store.prune_history(time.time()) == 2
        assert [e.scheduled for e in store.history("a")] == [140.0, 130.0, 120.0]
        assert len(store.history("b")) == 1
        assert store.prune_history(time.time()) == 0  # nothing written since
        # two days on, everything is older than history_days
        assert store.prune_history(time.time() + 2 * 86400) == 4
        assert store.history() == []

    def test_pruning_reaches_every_job_however_many_keep_being_written(
        self, open_store: OpenStore
    ) -> None:
        """A prune trims a bounded number of jobs: the longest waiting go first.

        More jobs are written between two prunes than one prune trims. It used to take
        the first ids in sort order, which the busiest ids kept winning: the others were
        never trimmed and their entries grew without end.
        """
        store = open_store(history_keep=1)
        assert isinstance(store, SlotLedger)
        n = PRUNE_JOBS + 6
        ids = [f"j{i:03}" for i in range(n)]
        for job_id in ids:
            store.upsert(spec(job_id, schedule=Every(10)), 100.0)
        most = []
        for k in range(6):  # every job runs once between two prunes
            taken = claim(store, 100.0 + 10 * k, advance=step_one, limit=n)
            assert len(taken) == n
            for c in taken:
                assert store.finish(c, outcome="ok", ended=101.0 + 10 * k)
            store.prune_history(time.time())
            most.append(max(len(store.history(job_id)) for job_id in ids))
        # one entry kept each; at most two prunes between a job's trims
        assert max(most) <= 3, most

    @pytest.mark.parametrize("history_keep", [None, 100])
    def test_per_job_retention_keeps_the_newest_of_each_outcome(
        self, open_store: OpenStore, history_keep: int | None
    ) -> None:
        store = open_store(history_keep=history_keep)
        assert isinstance(store, SlotLedger) and isinstance(store, OutcomeRetention)
        store.upsert(spec("a", schedule=Every(10)), 100.0)
        store.upsert(spec("b", schedule=Every(10)), 100.0)
        store.set_job_retention("a", keep_ok=2, keep_failed=3)
        outcomes = ["ok", "failed", "timeout", "ok", "ok", "failed", "ok", "timeout", "failed"]
        for k, outcome in enumerate(outcomes):
            for c in claim(store, 100.0 + 10 * k, advance=step_one):
                assert store.finish(c, outcome=outcome, ended=101.0 + 10 * k)  # type: ignore[arg-type]
        store.set_job_retention("b", keep_ok=None, keep_failed=None)  # forgets nothing kept
        assert store.prune_history(time.time()) == len(outcomes) - 5
        kept = [(e.scheduled, e.outcome) for e in store.history("a")]
        # the newest two ok entries, the newest three failed or timed out ones
        assert kept == [(180.0, "failed"), (170.0, "timeout"), (160.0, "ok"), (150.0, "failed"),
                        (140.0, "ok")]  # fmt: skip
        assert len(store.history("b")) == len(outcomes)  # no limits of its own
        # only what the limits hold back: a later prune finds nothing more to do
        for c in claim(store, 190.0, advance=step_one):
            assert store.finish(c, outcome="ok", ended=191.0)
        assert store.prune_history(time.time()) == 1  # a's ok at 140 goes
        assert [e.outcome for e in store.history("a")].count("ok") == 2
        store.set_job_retention("a", keep_ok=0)  # none at all; failed ones now unlimited
        for c in claim(store, 200.0, advance=step_one):
            assert store.finish(c, outcome="failed", ended=201.0)
        store.prune_history(time.time())
        assert [e.scheduled for e in store.history("a")] == [200.0, 180.0, 170.0, 150.0]

    def test_per_job_retention_arguments_are_checked(self, open_store: OpenStore) -> None:
        store = open_store()
        assert isinstance(store, OutcomeRetention)
        with pytest.raises(ValueError, match="keep_ok must be an int >= 0 or None, got -1"):
            store.set_job_retention("a", keep_ok=-1)
        with pytest.raises(ValueError, match="keep_failed must be an int >= 0 or None, got True"):
            store.set_job_retention("a", keep_failed=True)

    def test_keeping_no_history_writes_no_entries(self, open_store: OpenStore) -> None:
        store = open_store(history_keep=0)
        assert isinstance(store, SlotLedger)
        store.upsert(spec(), 100.0)
        (c,) = claim(store, 100.0)
        assert store.finish(c, outcome="ok", ended=101.0)
        assert store.history() == []
        state = store.get("job")
        assert state is not None and state.last_run is not None  # the last run is kept
        assert store.prune_history(time.time()) == 0

    def test_retention_arguments_are_checked(self, open_store: OpenStore) -> None:
        with pytest.raises(ValueError, match="history_keep must be an int >= 0 or None, got -1"):
            open_store(history_keep=-1)
        with pytest.raises(ValueError, match="history_days"):
            open_store(history_days=-1.0)

    # -- runtime control: the first slot, backfill's clip and dry run, cancelling ------

    def test_the_first_slot_is_kept_from_the_first_declaration(self, store: Store) -> None:
        store.upsert(spec(), 100.0)
        store.upsert(spec(schedule=Every(60)), 160.0)  # a new schedule: a new next run
        store.upsert(spec(schedule=Every(60), grace=1.0), 999.0)
        state = store.get("job")
        assert state is not None and (state.next_run, state.first_slot) == (160.0, 100.0)
        assert [s.first_slot for s in store.jobs()] == [100.0]
        store.upsert(spec("ended", At(50.0)), None)  # nothing to plan: not known
        assert store.get("ended").first_slot is None  # type: ignore[union-attr]

    def test_a_backfill_leaves_out_slots_before_the_first_and_a_dry_run_changes_nothing(
        self, store: Store
    ) -> None:
        control = _control(store)
        store.upsert(spec(), 100.0)
        store.set_next_run("job", 200.0)
        slots = [70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 200.0]
        would = control.backfill_job("job", slots, by="ops@x", at=205.0, dry_run=True)
        assert would == [100.0, 110.0, 120.0]  # not before 100, not from the next run on
        assert store.get("job").waiting == () and control.actions("job") == []  # type: ignore[union-attr]
        assert control.backfill_job("job", slots, by="ops@x", at=205.0) == would
        state = store.get("job")
        assert state is not None
        assert [(c.scheduled, c.origin) for c in state.waiting] == [
            (100.0, "backfill"), (110.0, "backfill"), (120.0, "backfill"),
        ]  # fmt: skip
        (act,) = control.actions("job")
        assert act.detail is not None and "3 before the job's first slot" in act.detail
        # what waits is not queued twice, and a dry run says so too
        assert control.backfill_job("job", [110.0], by="ops@x", at=205.0, dry_run=True) == []

    def test_cancel_takes_back_waiting_runs_one_or_all_and_records_them(self, store: Store) -> None:
        control = _control(store)
        store.upsert(spec(), 100.0)
        store.set_next_run("job", 200.0)
        control.backfill_job("job", [100.0, 110.0, 120.0, 130.0, 160.0], by="a@x", at=205.0)
        (held,) = claim(store, 205.0, "A")  # 100 is taken: it goes on
        assert held.scheduled == 100.0 and held.origin == "backfill"
        assert control.cancel_waiting_runs("job", slot=110.0005, by="b@x", at=206.0) == [110.0]
        assert control.cancel_waiting_runs("job", slot=110.0, by="b@x", at=206.0) == []
        following = lambda t: t + 10.0  # noqa: E731 - the schedule's next slot
        done = control.cancel_waiting_runs("job", following, by="c@x", at=207.0, note="oops")
        assert done == [120.0, 130.0, 160.0]
        state = store.get("job")
        assert state is not None and [c.token for c in state.claims] == [held.token]
        assert state.waiting == ()
        # one entry per run of slots that follow each other on the schedule
        cancelled = [
            (e.scheduled, e.slots, e.origin, e.started, e.ended, e.error)
            for e in store.history("job", outcome="cancelled")  # type: ignore[attr-defined]
        ]
        assert sorted(cancelled) == [
            (110.0, 1, "backfill", None, 206.0, "cancelled by b@x while waiting"),
            (120.0, 2, "backfill", None, 207.0, "cancelled by c@x while waiting: oops"),
            (160.0, 1, "backfill", None, 207.0, "cancelled by c@x while waiting: oops"),
        ]
        acts = control.actions("job")
        assert [(a.action, a.actor, a.note) for a in acts[:2]] == [
            ("cancel", "c@x", "oops"), ("cancel", "b@x", None),
        ]  # fmt: skip
        assert acts[0].detail == (
            "3 waiting run(s) cancelled (3 backfill), 1970-01-01T00:02:00Z to 1970-01-01T00:02:40Z"
        )
        # nothing waits: nothing done, nothing recorded; the taken run still finishes
        assert control.cancel_waiting_runs("job", by="d@x", at=208.0) == []
        assert len(control.actions("job")) == len(acts)
        assert store.start(held, started=208.0) and store.finish(held, outcome="ok", ended=209.0)
        # a cancelled slot may be backfilled again: it never ran
        assert control.backfill_job("job", [110.0], by="a@x", at=210.0) == [110.0]
        with pytest.raises(JobNotFoundError):
            control.cancel_waiting_runs("nope", by="a@x", at=210.0)

    def test_cancelling_the_waiting_runs_frees_the_schedule(self, store: Store) -> None:
        control = _control(store)
        store.upsert(spec(), 100.0)
        store.set_next_run("job", 300.0)
        control.backfill_job("job", [200.0, 210.0], by="a@x", at=290.0)
        # while they wait, the job's own slot is not claimable (overlap "skip")
        assert store.next_wakeup() == 200.0
        assert control.cancel_waiting_runs("job", by="a@x", at=295.0) == [200.0, 210.0]
        assert store.next_wakeup() == 300.0
        (c,) = claim(store, 300.0, "A")
        assert (c.scheduled, c.origin) == (300.0, "schedule")

    # -- durability -------------------------------------------------------------------

    # -- one-offs: enqueued, run once, gone when their slot ends (OneOffQueue) ---------

    def test_enqueued_one_offs_run_once_and_leave_at_their_finish(self, store: Store) -> None:
        q = _queue(store)
        store.upsert(spec("declared", schedule=At(500.0)), 500.0)
        assert q.enqueue([oneoff("a", 100.0, args=[1]), oneoff("b", 200.0)]) == [True, True]
        assert q.enqueue([]) == []
        assert counts(store) == OneOffCounts(FUNC, pending=2)
        assert [j.id for j in store.jobs()] == ["declared"]  # counted, not listed
        assert store.get("~a") is not None and store.get("~a").spec.args == (1,)  # type: ignore[union-attr]
        assert store.next_wakeup() == 100.0
        got = {c.job_id: c for c in claim(store, 100.0, advance=once)}
        assert sorted(got) == ["~a"]
        assert counts(store) == OneOffCounts(FUNC, pending=1, running=1)
        assert store.start(got["~a"], started=100.5)
        assert store.finish(got["~a"], outcome="ok", ended=101.0)
        assert store.get("~a") is None  # its row went with its end ...
        assert [(e.outcome, e.scheduled, e.started) for e in store.history("~a")] == [
            ("ok", 100.0, 100.5)
        ]  # ... its ledger entry stays
        assert not store.finish(got["~a"], outcome="ok", ended=102.0)  # once
        assert counts(store) == OneOffCounts(FUNC, pending=1, done=1)
        assert [c.job_id for c in claim(store, 150.0, advance=once)] == []
        (b,) = claim(store, 200.0, advance=once)
        assert b.job_id == "~b" and store.start(b, started=200.0)
        assert store.finish(b, outcome="failed", ended=201.0, error="boom")
        assert store.get("~b") is None
        assert counts(store) == OneOffCounts(FUNC, done=1, failed=1)
        assert [c.job_id for c in claim(store, 1e9, advance=once)] == ["declared"]  # it stays

    def test_a_keyed_one_off_is_added_once_while_pending_or_running(self, store: Store) -> None:
        q = _queue(store)
        assert q.enqueue([oneoff("key:k", 100.0, args=["first"])]) == [True]
        assert q.enqueue([oneoff("key:k", 50.0, args=["second"])]) == [False]
        assert q.enqueue([oneoff("key:j", 100.0), oneoff("key:j", 100.0), oneoff("x", 9.0)]) == [
            True,
            False,
            True,
        ]  # a batch naming one key twice adds its first
        k = store.get("~key:k")
        assert k is not None and k.spec.args == ("first",) and k.next_run == 100.0
        got = {c.job_id: c for c in claim(store, 100.0, advance=once)}
        assert sorted(got) == ["~key:j", "~key:k", "~x"]
        assert q.enqueue([oneoff("key:k", 300.0)]) == [False]  # running: still its key
        assert store.start(got["~key:k"], started=100.0)
        assert store.finish(got["~key:k"], outcome="ok", ended=101.0)
        assert q.enqueue([oneoff("key:k", 300.0, args=["again"])]) == [True]  # ended: free
        assert counts(store) == OneOffCounts(FUNC, pending=1, running=2, done=1)
        assert [e.outcome for e in store.history("~key:k")] == ["ok"]

    def test_recovery_gives_up_a_started_at_most_once_one_off_and_its_row_leaves(
        self, store: Store
    ) -> None:
        q = _queue(store)
        q.enqueue([oneoff("most", 100.0)])
        (c,) = claim(store, 100.0, advance=once)
        assert store.start(c, started=100.5)
        (r,) = store.recover_expired(100.0 + LEASE)
        assert r.action == "abandoned"
        assert store.get("~most") is None
        (e,) = store.history("~most")
        assert (e.outcome, e.started, e.node) == ("abandoned", 100.5, "A")
        assert counts(store) == OneOffCounts(FUNC, failed=1)
        assert claim(store, 1e9, advance=once) == []
        assert not store.finish(c, outcome="ok", ended=200.0)  # the late finish changes nothing
        assert counts(store) == OneOffCounts(FUNC, failed=1)
        assert len(store.history("~most")) == 1

    @pytest.mark.parametrize("delivery", ["at_most_once", "at_least_once"])
    def test_recovery_re_offers_an_unstarted_or_at_least_once_one_off_and_keeps_its_row(
        self, store: Store, delivery: str
    ) -> None:
        q = _queue(store)
        q.enqueue([oneoff("o", 100.0, delivery=delivery)])
        (c,) = claim(store, 100.0, advance=once)
        started = delivery == "at_least_once"
        if started:
            assert store.start(c, started=100.5)
        (r,) = store.recover_expired(100.0 + LEASE)
        assert r.action == ("requeued" if started else "released")
        state = store.get("~o")
        assert state is not None and [x.owner for x in state.claims] == [""]
        assert counts(store) == OneOffCounts(FUNC, pending=1)
        (again,) = claim(store, 200.0, owner="B", advance=never)
        assert again.scheduled == 100.0 and store.start(again, started=200.0)
        assert store.finish(again, outcome="ok", ended=201.0)
        assert store.get("~o") is None
        assert [e.outcome for e in store.history("~o")] == (
            ["ok", "abandoned"] if started else ["ok"]
        )  # newest first: the lost attempt, then the one that ended the slot
        assert counts(store) == OneOffCounts(FUNC, done=1)

    def test_a_one_off_handed_back_unstarted_keeps_its_row_and_runs_later(
        self, store: Store
    ) -> None:
        q = _queue(store)
        q.enqueue([oneoff("o", 100.0)])
        (c,) = claim(store, 100.0, advance=once)
        assert store.finish(c, outcome="cancelled", ended=100.5)  # a node stopping
        assert store.history("~o") == [] and counts(store) == OneOffCounts(FUNC, pending=1)
        (again,) = claim(store, 101.0, owner="B", advance=never)
        assert store.finish(again, outcome="ok", ended=102.0)
        assert store.get("~o") is None and counts(store) == OneOffCounts(FUNC, done=1)

    def test_cancel_deletes_a_pending_one_off_never_a_running_one(self, store: Store) -> None:
        q = _queue(store)
        store.upsert(spec("declared", schedule=At(500.0)), 500.0)
        q.enqueue([oneoff("a", 100.0), oneoff("key:b", 100.0), oneoff("c", 100.0)])
        assert q.cancel_oneoff("~a", at=50.0, by="ann@x")
        assert not q.cancel_oneoff("~a", at=51.0, by="ann@x")  # gone already
        assert not q.cancel_oneoff("~never", at=51.0, by="ann@x")
        assert not q.cancel_oneoff("declared", at=51.0, by="ann@x")  # not a one-off
        assert store.get("declared") is not None
        (e,) = store.history("~a")
        assert (e.outcome, e.scheduled, e.started, e.ended) == ("cancelled", 100.0, None, 50.0)
        assert store.get("~a") is None
        got = {c.job_id: c for c in claim(store, 100.0, advance=once)}
        assert sorted(got) == ["~c", "~key:b"]
        assert not q.cancel_oneoff("~key:b", at=100.5, by="ann@x")  # held by a node
        assert store.get("~key:b") is not None and store.history("~key:b") == []
        assert store.finish(got["~c"], outcome="ok", ended=101.0)
        store.recover_expired(100.0 + LEASE)  # unstarted: re-offered, held by none
        assert q.cancel_oneoff("~key:b", at=200.0, by="ann@x")
        assert store.get("~key:b") is None and claim(store, 300.0, advance=never) == []
        assert counts(store) == OneOffCounts(FUNC, done=1, dropped=2)

    @pytest.mark.parametrize("how", ["record", "carrying"])
    def test_a_batch_of_finishes_deletes_the_rows_of_the_one_offs_it_ends(
        self, store: Store, how: str
    ) -> None:
        assert isinstance(store, BatchRecorder) and isinstance(store, CarryingClaim)
        q = _queue(store)
        q.enqueue([oneoff(f"o{i}", 100.0) for i in range(6)])
        store.upsert(spec("declared"), 100.0)
        cs = claim(store, 100.0, advance=once)
        ones = [c for c in cs if c.job_id.startswith("~")]
        assert len(ones) == 6
        starts = [Start(c, 100.5) for c in cs]
        finishes = [Finish(c, "ok" if i % 3 else "failed", 101.0) for i, c in enumerate(cs)]
        if how == "record":
            assert store.record(starts, finishes) == ([True] * 7, [True] * 7)
        else:
            assert store.record(starts, []) == ([True] * 7, [])
            kw: dict[str, Any] = {"owner": "A", "lease_seconds": LEASE, "limit": 100}
            assert store.claim_due_carrying(finishes, 101.0, advance=once, **kw) == (
                [True] * 7,
                [],
            )
        assert all(store.get(c.job_id) is None for c in ones)
        declared = store.get("declared")
        assert declared is not None and declared.last_run is not None  # declared jobs stay
        failed = sum(1 for f in finishes if f.outcome == "failed" and f.claim in ones)
        assert counts(store) == OneOffCounts(FUNC, done=6 - failed, failed=failed)
        assert sorted(e.job_id for e in store.history() if e.job_id.startswith("~")) == sorted(
            c.job_id for c in ones
        )  # one entry each

    def test_one_offs_are_shared_by_every_store_object_and_claimed_once(
        self, open_store: OpenStore
    ) -> None:
        a, b = open_store(), open_store()
        _queue(a).enqueue([oneoff(f"o{i}", 100.0) for i in range(20)])
        first = claim(a, 100.0, "A", limit=7, advance=once)
        second = claim(b, 100.0, "B", advance=once)
        assert len(first) == 7 and len(second) == 13
        assert {c.job_id for c in first}.isdisjoint(c.job_id for c in second)
        assert counts(b) == OneOffCounts(FUNC, running=20)
        for s, cs in ((a, first), (b, second)):
            for c in cs:
                assert s.finish(c, outcome="ok", ended=101.0)
        assert counts(a) == OneOffCounts(FUNC, done=20)
        a.close()
        assert counts(open_store()) == OneOffCounts(FUNC, done=20)  # kept by the state

    def test_state_is_shared_and_survives_reopening(self, open_store: OpenStore) -> None:
        a = open_store()
        a.upsert(spec(kwargs={"n": [1, 2.5, "x", None, True]}), 100.0)
        (c,) = claim(a, 100.0)
        a.start(c, started=100.0)
        a.finish(c, outcome="ok", ended=101.0)
        a.close()
        b = open_store()
        state = b.get("job")
        assert state is not None
        assert state.spec == spec(kwargs={"n": [1, 2.5, "x", None, True]})
        assert state.last_run == LastRun(100.0, 100.0, 101.0, "ok", None)
        assert state.next_run == 110.0

    def test_closed_store_refuses_calls(self, open_store: OpenStore) -> None:
        s = open_store()
        s.close()
        s.close()  # idempotent
        with pytest.raises(StoreError, match="closed"):
            s.jobs()
        with pytest.raises(StoreError, match="closed"):
            s.upsert(spec(), 1.0)
