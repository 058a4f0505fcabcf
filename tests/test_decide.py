"""The durable run policy (`tickwork._durable.decide.decide`) in isolation: table-driven, pure."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork import At, Cron, CronError, Every, Once
from tickwork._durable.decide import (
    CORRECTION,
    COUNT_LIMIT,
    Decision,
    after_clock_step,
    decide,
    decide_retry,
    first_run,
    within_until,
)
from tickwork.stores import Claim, JobSpec, JobState, LastRun
from tickwork.stores.contract import GivenUp

FUNC = "tests.store_contract:noop"
EVERY10 = Every(10)
# 2024-01-01T00:00:00Z: a 5-minute cron slot.
T0 = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
CRON5 = Cron("*/5 * * * *", "UTC")


def state(
    schedule: Any = EVERY10,
    next_run: float | None = 100.0,
    last: LastRun | None = None,
    claims: tuple[Claim, ...] = (),
    **kw: Any,
) -> JobState:
    spec = JobSpec("j", FUNC, schedule, **kw)
    return JobState(spec=spec, next_run=next_run, paused=False, last_run=last, claims=claims)


def ran(started: float, ended: float, scheduled: float = 90.0) -> LastRun:
    return LastRun(scheduled, started, ended, "ok", None)


# (name, state kwargs, now, expected decision)
CASES: list[tuple[str, dict[str, Any], float, Decision]] = [
    # on time: the only passed slot, no grace limit
    ("on time", {}, 100.5, Decision("run", 110.0)),
    ("on time exactly at the slot", {}, 100.0, Decision("run", 110.0)),
    ("on time, late but no grace", {}, 109.9, Decision("run", 110.0)),
    # behind by whole slots (100, 110, 120, 130 passed at 135)
    (
        "skip: go to the next slot after now",
        {},
        135.0,
        Decision("missed", 140.0, missed=4, given_up=GivenUp("missed", 110.0, 3)),
    ),
    (
        "once: one catch-up, back on the grid",
        {"missed": "once"},
        135,
        Decision("run", 140.0, 3, given_up=GivenUp("missed", 110.0, 3)),
    ),
    ("all: replay the oldest first", {"missed": "all"}, 135.0, Decision("run", 110.0)),
    ("all: the last replay", {"missed": "all", "next_run": 130.0}, 135.0, Decision("run", 140.0)),
    (
        "all: over the cap drops the oldest",
        {"missed": "all", "missed_cap": 2},
        135.0,
        Decision("missed", 120.0, missed=2, capped=True, given_up=GivenUp("missed", 110.0, 1)),
    ),
    ("all: at the cap replays", {"missed": "all", "missed_cap": 4}, 135.0, Decision("run", 110.0)),
    # grace: a late run beyond it counts as missed
    ("grace: within", {"grace": 5.0}, 104.0, Decision("run", 110.0)),
    ("grace: beyond, skip", {"grace": 5.0}, 106.0, Decision("missed", 110.0, missed=1)),
    ("grace: beyond, once", {"grace": 5.0, "missed": "once"}, 106.0, Decision("run", 110.0)),
    ("grace: beyond, all", {"grace": 5.0, "missed": "all"}, 106.0, Decision("run", 110.0)),
    ("grace 0: any lateness", {"grace": 0.0}, 100.001, Decision("missed", 110.0, missed=1)),
    # one-shots: nothing after; late beyond grace + skip is given up
    ("at: late, no grace", {"schedule": At(100)}, 5000.0, Decision("run", None)),
    (
        "at: beyond grace, skip",
        {"schedule": At(100), "grace": 60.0},
        161.0,
        Decision("missed", None, missed=1),
    ),
    (
        "at: beyond grace, once",
        {"schedule": At(100), "grace": 60.0, "missed": "once"},
        161.0,
        Decision("run", None, missed=1),
    ),
    # fixed delay: provisional next run (the real one is set when the run ends)
    (
        "fixed delay: on time",
        {"schedule": Every(10, fixed_delay=True)},
        100.5,
        Decision("run", 110.5),
    ),
    (
        "fixed delay: beyond grace, skip",
        {"schedule": Every(10, fixed_delay=True), "grace": 1.0},
        150.0,
        Decision("missed", 160.0, missed=1),
    ),
    # overlap: slot 110 (and 120) came due while the run of 90 went on (started 95, ended 125)
    (
        "overlap skip",
        {"last": ran(95, 125), "next_run": 110.0},
        126.0,
        Decision("skipped", 130.0, skipped=2, given_up=GivenUp("skipped", 120.0, 1)),
    ),
    (
        "overlap queue: one run, the rest skipped",
        {"last": ran(95, 125), "overlap": "queue", "next_run": 110.0},
        126.0,
        Decision("run", 130.0, skipped=1, given_up=GivenUp("skipped", 120.0, 1)),
    ),
    (
        "overlap allow ignores the last run",
        {"last": ran(95, 125), "overlap": "allow", "next_run": 120.0},
        126.0,
        Decision("run", 130.0),
    ),
    (
        "a missed last run is no overlap",
        {"last": LastRun(90, None, 95, "missed", None)},
        101,
        Decision("run", 110.0),
    ),
    (
        "an abandoned run is no overlap",
        {"last": LastRun(90, 95, None, "abandoned", "x")},
        101,
        Decision("run", 110.0),
    ),
    # cron: slots from the expression, in its zone
    ("cron on time", {"schedule": CRON5, "next_run": T0}, T0 + 1, Decision("run", T0 + 300)),
    (
        "cron skip after an hour down",
        {"schedule": CRON5, "next_run": T0},
        T0 + 3610,
        Decision("missed", T0 + 3900, missed=13, given_up=GivenUp("missed", T0 + 300, 12)),
    ),
    (
        "cron once after an hour down",
        {"schedule": CRON5, "next_run": T0, "missed": "once"},
        T0 + 3610,
        Decision("run", T0 + 3900, missed=12, given_up=GivenUp("missed", T0 + 300, 12)),
    ),
    (
        "cron all replays the next slot",
        {"schedule": CRON5, "next_run": T0, "missed": "all"},
        T0 + 3610,
        Decision("run", T0 + 300),
    ),
    (
        "cron all over the cap: the newest 5 of 13",
        {"schedule": CRON5, "next_run": T0, "missed": "all", "missed_cap": 5},
        T0 + 3610,
        Decision(
            "missed", T0 + 8 * 300, missed=8, capped=True, given_up=GivenUp("missed", T0 + 300, 7)
        ),
    ),
]


@pytest.mark.parametrize(("kw", "now", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(kw: dict[str, Any], now: float, want: Decision) -> None:
    assert decide(state(**kw), now) == want


FIXED_DELAY = Every(10, fixed_delay=True)


@pytest.mark.parametrize("overlap", ["allow", "skip", "queue"])
def test_a_fixed_delay_job_never_overlaps_even_with_overlap_allow(overlap: str) -> None:
    # slot 100 is claimed while the run of slot 90 is still going (its claim is held)
    busy = state(FIXED_DELAY, claims=(other_claim(90.0),), overlap=overlap)
    assert decide(busy, 100.5) == Decision("skipped", 110.5, skipped=1)
    # the same slot with no run going: it runs, with the provisional next run
    assert decide(state(FIXED_DELAY, overlap=overlap), 100.5) == Decision("run", 110.5)


def test_a_busy_fixed_delay_job_is_skipped_even_when_late_beyond_grace() -> None:
    # the overlap rule comes first: the slot is not counted as missed while a run goes on
    busy = state(FIXED_DELAY, claims=(other_claim(90.0),), overlap="allow", grace=1.0)
    assert decide(busy, 150.0) == Decision("skipped", 160.0, skipped=1)


# A slot exactly `grace` late is still on time: late means strictly more than grace.
# (name, state kwargs, on time at 100 + grace, late just after)
GRACE_EDGE_CASES: list[tuple[str, dict[str, Any], Decision, Decision]] = [
    (
        "interval",
        {},
        Decision("run", 110.0),
        Decision("missed", 110.0, missed=1),
    ),
    (
        "cron",
        {"schedule": Cron("* * * * *"), "next_run": 60.0},
        Decision("run", 120.0),
        Decision("missed", 120.0, missed=1),
    ),
    ("one-shot", {"schedule": At(100)}, Decision("run", None), Decision("missed", None, 1)),
    (
        "one-shot, missed=once",
        {"schedule": At(100), "missed": "once"},
        Decision("run", None),
        Decision("run", None, missed=1),
    ),
    (
        "fixed delay",
        {"schedule": FIXED_DELAY},
        Decision("run", 115.0),
        Decision("missed", 115.5, 1),
    ),
    (
        "fixed delay, missed=once",
        {"schedule": FIXED_DELAY, "missed": "once"},
        Decision("run", 115.0),
        Decision("run", 115.5, missed=1),
    ),
]


@pytest.mark.parametrize(
    ("kw", "on_time", "late"),
    [c[1:] for c in GRACE_EDGE_CASES],
    ids=[c[0] for c in GRACE_EDGE_CASES],
)
def test_a_run_exactly_grace_late_is_on_time_and_later_is_late(
    kw: dict[str, Any], on_time: Decision, late: Decision
) -> None:
    slot = kw.get("next_run", 100.0)
    assert decide(state(grace=5.0, **kw), slot + 5.0) == on_time
    assert decide(state(grace=5.0, **kw), slot + 5.5) == late


# Edges of the rules, each case one boundary (found by mutation testing, docs/testing.md).
EDGE_CASES: list[tuple[str, dict[str, Any], float, Decision]] = [
    (
        "behind when the next slot comes exactly now (skip)",
        {},
        110.0,
        Decision("missed", 120.0, missed=2, given_up=GivenUp("missed", 110.0, 1)),
    ),
    (
        "all: the next slot exactly now is the next replay",
        {"missed": "all"},
        110.0,
        Decision("run", 110.0),
    ),
    (
        "cron: a slot exactly at now counts as passed",
        {"schedule": CRON5, "next_run": T0},
        T0 + 600,
        Decision("missed", T0 + 900, missed=3, given_up=GivenUp("missed", T0 + 300, 2)),
    ),
    ("no next run: nothing to do", {"next_run": None}, 100.0, Decision("skipped", None)),
    (
        "a slot after until (stored before until was set) is no slot",
        {"schedule": Every(10, until=50.0)},
        100.0,
        Decision("skipped", None),
    ),
    (
        "a next run after until ends the job",
        {"schedule": Every(10, until=105.0)},
        100.5,
        Decision("run", None),
    ),
    (
        "a next run exactly at until is kept",
        {"schedule": Every(10, until=110.0)},
        100.5,
        Decision("run", 110.0),
    ),
    (
        "overlap allow: a slot during the last run goes to the missed policy",
        {"last": ran(95, 125), "overlap": "allow", "next_run": 110.0},
        126.0,
        Decision("missed", 130.0, missed=2, given_up=GivenUp("missed", 120.0, 1)),
    ),
    (
        "overlap: a failed last run overlaps too",
        {"last": LastRun(90.0, 95.0, 125.0, "failed", "boom"), "next_run": 110.0},
        126.0,
        Decision("skipped", 130.0, skipped=2, given_up=GivenUp("skipped", 120.0, 1)),
    ),
    (
        "overlap: a timed-out last run overlaps too",
        {"last": LastRun(90.0, 95.0, 125.0, "timeout", "timeout"), "next_run": 110.0},
        126.0,
        Decision("skipped", 130.0, skipped=2, given_up=GivenUp("skipped", 120.0, 1)),
    ),
    (
        "overlap: a slot due exactly as the last run started overlaps",
        {"last": ran(110, 125, scheduled=100.0), "next_run": 110.0},
        126.0,
        Decision("skipped", 130.0, skipped=2, given_up=GivenUp("skipped", 120.0, 1)),
    ),
    (
        "overlap: a slot due exactly as the last run ended does not",
        {"last": ran(95, 110), "next_run": 110.0},
        110.5,
        Decision("run", 120.0),
    ),
]


@pytest.mark.parametrize(
    ("kw", "now", "want"), [c[1:] for c in EDGE_CASES], ids=[c[0] for c in EDGE_CASES]
)
def test_decide_at_the_edges(kw: dict[str, Any], now: float, want: Decision) -> None:
    assert decide(state(**kw), now) == want


def test_a_slot_exactly_where_the_clock_jumped_from_had_its_time() -> None:
    # the clock jumped from 100 to 100 + CORRECTION: slot 100 is on time, the jump's end
    # (the first moment of the new time) had no real time before it
    jump = (100.0, 100.0 + CORRECTION)
    assert decide(state(next_run=100.0), 100.5, vanished=jump) == Decision("run", 110.0)
    at_end = state(Every(CORRECTION), next_run=jump[1])
    want = Decision("missed", jump[1] + CORRECTION, missed=1)
    assert decide(at_end, jump[1] + 1, vanished=jump) == want


def test_the_next_slot_after_a_rounding_grid_is_the_very_next() -> None:
    # 0.2 + 3 * 0.1 rounds to exactly 0.5: the first slot after 0.5 is 0.6, not 0.7
    d = decide(state(Every(0.1), next_run=0.2), 0.5)
    assert d.next_run == pytest.approx(0.6, abs=1e-9)


def test_all_over_the_cap_replays_the_newest_slots_of_a_per_second_cron() -> None:
    # slots T0..T0+4 passed, the cap keeps 4: the replays start at T0+1, right after s
    every_second = Cron("* * * * * *")
    d = decide(state(every_second, next_run=T0, missed="all", missed_cap=4), T0 + 4)
    assert d == Decision("missed", T0 + 1, missed=1, capped=True)


def test_the_over_cap_warning_names_the_job_and_the_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "tickwork.durable"):
        decide(state(missed="all", missed_cap=2), 135.0)
        year = 365 * 86400.0
        decide(state(Cron("* * * * *"), next_run=T0, missed="all", missed_cap=3), T0 + year)
    assert caplog.messages == [
        "job 'j' is 4 runs behind, more than missed_cap=2: the oldest are dropped,"
        " the last 2 replayed",
        f"job 'j' is at least {COUNT_LIMIT} runs behind, more than missed_cap=3: the oldest"
        " are dropped, the last 3 replayed",
    ]


def test_cap_logs_a_warning_and_never_stops_the_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "tickwork.durable"):
        d = decide(state(missed="all", missed_cap=100), 100.0 + 10 * 1000)
    assert d.action == "missed" and d.capped and d.next_run == 100.0 + 10 * 901
    assert "more than missed_cap=100" in caplog.text
    # the replays then follow, one per claim, in order
    d2 = decide(state(missed="all", missed_cap=100, next_run=d.next_run), 100.0 + 10 * 1000)
    assert d2 == Decision("run", 100.0 + 10 * 902)


def test_huge_downtime_is_counted_with_a_limit() -> None:
    # a per-minute cron after a year away: counted up to COUNT_LIMIT, not walked to the end
    year = 365 * 86400.0
    d = decide(state(Cron("* * * * *"), next_run=T0), T0 + year)
    assert d.action == "missed" and d.missed == COUNT_LIMIT
    assert d.next_run == T0 + year + 60  # T0 + year is itself a minute boundary
    assert d.given_up == GivenUp("missed", T0 + 60, COUNT_LIMIT - 1)  # "at least" so many
    d = decide(state(Cron("* * * * *"), next_run=T0, missed="all", missed_cap=3), T0 + year)
    assert d == Decision(
        "missed",
        T0 + year - 120,
        missed=COUNT_LIMIT - 3,
        capped=True,
        given_up=GivenUp("missed", T0 + 60, COUNT_LIMIT - 4),
    )


def test_the_next_slot_is_strictly_after_now_despite_rounding() -> None:
    d = decide(state(Every(0.1), next_run=0.3), 0.3 + 0.1 * 7)
    assert d.next_run is not None and d.next_run > 0.3 + 0.1 * 7


class _Broken:
    """Stands for a cron expression that cannot compute (a zone gone from this host)."""

    is_fixed_time = True

    def next_after_timestamp(self, t: float) -> float:
        raise CronError("tz: unknown time zone 'Mars/Olympus'")


def _broken_cron() -> Cron:
    cron = Cron("0 3 * * *")
    object.__setattr__(cron, "expression", _Broken())
    return cron


def test_a_schedule_that_cannot_compute_fails_the_job_instead_of_raising() -> None:
    d = decide(state(_broken_cron(), next_run=T0), T0 + 1)
    assert d.action == "failed" and d.next_run is None
    assert d.error is not None and "Mars/Olympus" in d.error


def test_first_run() -> None:
    assert first_run(At(5.0), 100.0) == 5.0
    assert first_run(Once(5.0), 100.0) == 105.0
    assert first_run(Every(10, first=3.0), 100.0) == 103.0
    assert first_run(Every(10, until=110.0), 100.0) == 110.0  # exactly at until: kept
    assert first_run(Every(10, until=109.0), 100.0) is None  # after until: it has ended
    assert first_run(Every(10), 100.0) == 110.0
    assert first_run(CRON5, T0 + 1) == T0 + 300
    assert first_run(Cron("0 3 * * *", "Europe/Berlin"), T0) == T0 + 2 * 3600


def test_within_until() -> None:
    ends = Every(10, until=110.0)
    assert within_until(ends, 110.0) == 110.0
    assert within_until(ends, 110.5) is None
    assert within_until(ends, None) is None
    assert within_until(EVERY10, 1e12) == 1e12


def retry_claim(slot: float) -> Claim:
    spec = JobSpec("j", FUNC, EVERY10)
    return Claim("t", "j", "me", slot, 0.0, 0.0, None, spec, True)


def other_claim(slot: float) -> Claim:
    spec = JobSpec("j", FUNC, EVERY10)
    return Claim("u", "j", "other", slot, 0.0, 0.0, None, spec)


# A retry of slot 100 (its first claim was lost); the job's own next run is 110 unless
# said otherwise. (name, state kwargs, now, expected decision)
RETRY_CASES: list[tuple[str, dict[str, Any], float, Decision]] = [
    ("retry on time runs", {"next_run": 110.0}, 105.0, Decision("run", 110.0)),
    ("retry on time, no grace", {"next_run": 110.0}, 109.9, Decision("run", 110.0)),
    (
        "retry: skip gives it up once a later slot has come",
        {"next_run": 110.0},
        111.2,
        Decision("missed", 110.0, missed=1),
    ),
    (
        "retry: skip gives it up beyond grace",
        {"next_run": 110.0, "grace": 2.0},
        103.0,
        Decision("missed", 110.0, missed=1),
    ),
    ("retry: within grace runs", {"next_run": 110.0, "grace": 2.0}, 101.0, Decision("run", 110.0)),
    (
        "retry: once, a later slot is due: that one is the catch-up",
        {"next_run": 110.0, "missed": "once"},
        125.0,
        Decision("missed", 110.0, missed=1),
    ),
    (
        "retry: once, it was the catch-up and nothing later came: it runs",
        {"next_run": 140.0, "missed": "once"},
        125.0,
        Decision("run", 140.0),
    ),
    (
        "retry: once, a later slot was claimed already (overlap allow)",
        {"next_run": 140.0, "missed": "once", "claims": (other_claim(130.0),)},
        135.0,
        Decision("missed", 140.0, missed=1),
    ),
    (
        "retry: once, a later slot ran already (overlap allow)",
        {"next_run": 140.0, "missed": "once", "last": ran(131, 132, scheduled=130.0)},
        135.0,
        Decision("missed", 140.0, missed=1),
    ),
    (
        "retry: all replays it (the oldest first)",
        {"next_run": 110.0, "missed": "all"},
        135.0,
        Decision("run", 110.0),
    ),
    (
        "retry: all, more than missed_cap behind: dropped",
        {"next_run": 110.0, "missed": "all", "missed_cap": 3},
        135.0,
        Decision("missed", 110.0, missed=1, capped=True),
    ),
    (
        "retry: all, at the cap: replayed",
        {"next_run": 110.0, "missed": "all", "missed_cap": 4},
        135.0,
        Decision("run", 110.0),
    ),
    (
        "retry: cron skip after its next slot came",
        {"schedule": CRON5, "next_run": T0 + 400},
        T0 + 301,
        Decision("missed", T0 + 400, missed=1),
    ),
    (
        "retry: one-shot, no grace: runs however late",
        {"schedule": At(100), "next_run": None},
        5000.0,
        Decision("run", None),
    ),
    (
        "retry: one-shot beyond grace, skip",
        {"schedule": At(100), "next_run": None, "grace": 60.0},
        161.0,
        Decision("missed", None, missed=1),
    ),
    (
        "retry: one-shot beyond grace, once",
        {"schedule": At(100), "next_run": None, "grace": 60.0, "missed": "once"},
        161.0,
        Decision("run", None, missed=1),
    ),
    (
        "retry: fixed delay has no later slot",
        {"schedule": Every(10, fixed_delay=True), "next_run": 105.0},
        150.0,
        Decision("run", 105.0),
    ),
    (
        "retry: exactly grace late is on time",
        {"next_run": 110.0, "grace": 2.0},
        102.0,
        Decision("run", 110.0),
    ),
    (
        "retry: skip gives it up when its next slot comes exactly now",
        {"next_run": 110.0},
        110.0,
        Decision("missed", 110.0, missed=1),
    ),
    (
        "retry: once, the job's next slot is due exactly now: that one is the catch-up",
        {"next_run": 130.0, "missed": "once"},
        130.0,
        Decision("missed", 130.0, missed=1),
    ),
    (
        "retry: once, its own earlier attempt is no later slot",
        {
            "next_run": 140.0,
            "missed": "once",
            "last": LastRun(100.0, 101.0, None, "abandoned", "x"),
        },
        125.0,
        Decision("run", 140.0),
    ),
    (
        "retry: fixed delay beyond grace, skip",
        {"schedule": Every(10, fixed_delay=True), "next_run": 105.0, "grace": 1.0},
        150.0,
        Decision("missed", 105.0, missed=1),
    ),
]


@pytest.mark.parametrize(
    ("kw", "now", "want"), [c[1:] for c in RETRY_CASES], ids=[c[0] for c in RETRY_CASES]
)
def test_decide_retry(kw: dict[str, Any], now: float, want: Decision) -> None:
    kw.setdefault("claims", ())
    kw["claims"] = (retry_claim(100.0), *kw["claims"])
    assert decide_retry(state(**kw), 100.0, now) == want


def test_a_retry_with_a_bad_zone_fails_instead_of_raising() -> None:
    bad = state(_broken_cron(), next_run=T0 + 86400)
    d = decide_retry(bad, T0, T0 + 90000)
    assert d.action == "failed" and d.error is not None and "Mars/Olympus" in d.error
    assert d.next_run == T0 + 86400  # a retry never moves the job's next run


def test_a_dropped_retry_warning_names_the_job_the_slot_and_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "tickwork.durable"):
        kw: dict[str, Any] = {"missed": "all", "missed_cap": 3, "claims": (retry_claim(100.0),)}
        decide_retry(state(next_run=110.0, **kw), 100.0, 135.0)
        year = 365 * 86400.0
        minutely = state(Cron("* * * * *"), next_run=T0 + year + 60, **kw)
        decide_retry(minutely, T0, T0 + year)
    assert caplog.messages == [
        "job 'j': the re-offered slot 1970-01-01T00:01:40.000Z is 4 slots behind,"
        " more than missed_cap=3: dropped",
        "job 'j': the re-offered slot 2024-01-01T00:00:00.000Z is at least"
        f" {COUNT_LIMIT} slots behind, more than missed_cap=3: dropped",
    ]


# Slots of a forward wall-clock jump of CORRECTION or more: never on time.
VANISHED_CASES: list[tuple[str, dict[str, Any], float, Decision]] = [
    (
        "vanished: a daily fixed-time slot, skip: nothing runs",
        {"schedule": Cron("0 3 * * *"), "next_run": T0 + 3 * 3600},
        T0 + 5 * 3600,
        Decision("missed", T0 + 27 * 3600, missed=1),
    ),
    (
        "vanished: once still runs one catch-up",
        {"schedule": Cron("0 3 * * *"), "next_run": T0 + 3 * 3600, "missed": "once"},
        T0 + 5 * 3600,
        Decision("run", T0 + 27 * 3600),
    ),
    (
        "vanished: a 1-day interval slot, skip",
        {"schedule": Every(86400), "next_run": T0 + 3 * 3600},
        T0 + 5 * 3600,
        Decision("missed", T0 + 27 * 3600, missed=1),
    ),
    (
        "not vanished: a slot before the jump is on time",
        {"schedule": Cron("0 1 * * *"), "next_run": T0 + 3600},
        T0 + 5 * 3600,
        Decision("run", T0 + 25 * 3600),
    ),
    (
        "vanished: one-shots are not affected",
        {"schedule": At(T0 + 3 * 3600), "next_run": T0 + 3 * 3600},
        T0 + 5 * 3600,
        Decision("run", None),
    ),
]


@pytest.mark.parametrize(
    ("kw", "now", "want"), [c[1:] for c in VANISHED_CASES], ids=[c[0] for c in VANISHED_CASES]
)
def test_decide_in_vanished_time(kw: dict[str, Any], now: float, want: Decision) -> None:
    # the wall clock jumped from T0 + 2 h to T0 + 5 h + 4 min
    assert decide(state(**kw), now, vanished=(T0 + 2 * 3600, T0 + 5 * 3600 + 240)) == want


FIXED60 = Every(60, fixed_delay=True)

# After a step back: (name, schedule, stored next run, now, step, expected next run)
STEP_CASES: list[tuple[str, Any, float, float, float, float | None]] = [
    ("interval: back onto its grid", Every(1), T0 + 1, T0 - 3600, -3601, T0 - 3599),
    ("interval: within one interval kept", Every(60), T0 + 1, T0 - 30, -31, None),
    ("interval: 30 s back, 10 s grid", Every(10), T0 + 10, T0 - 25, -30, T0 - 20),
    ("fixed delay: now + interval", Every(10, fixed_delay=True), T0, T0 - 60, -60, T0 - 50),
    ("wildcard cron: next minute", Cron("* * * * *"), T0 + 60, T0 - 7170, -7200, T0 - 7140),
    ("wildcard 30 s back: same slot", Cron("* * * * *"), T0 + 60, T0 + 10, -30, None),
    ("fixed-time, 2 h back: kept", Cron("0 1 * * *"), T0 + 90000, T0 + 300, -7200, None),
    (
        "fixed-time, 4 h back: runs again",
        Cron("0 1 * * *"),
        T0 + 90000,
        T0 - 10800,
        -CORRECTION - 3600,
        T0 + 3600,
    ),
    ("one-shot kept", At(T0 + 50), T0 + 50, T0 - 3600, -3600, None),
    ("forward steps are for decide", Every(1), T0 + 1, T0 + 3600, 3600, None),
    ("forward steps keep a far next run", Every(10), T0 + 100, T0, 3600, None),
    ("no step keeps it", Every(10), T0 + 100, T0, 0.0, None),
    ("a step under a second forward keeps it", Every(10), T0 + 100, T0, 0.5, None),
    ("fixed delay within one interval kept", FIXED60, T0 + 1, T0 - 30, -31, None),
    ("fixed delay exactly one interval ahead kept", FIXED60, T0 + 60, T0, -60, None),
    ("interval: 95 s back, 10 s grid", Every(10), T0 + 10, T0 - 85, -95, T0 - 80),
    (
        "fixed-time, exactly CORRECTION back: a correction, runs again",
        Cron("0 1 * * *"),
        T0 + 90000,
        T0 + 3600 - CORRECTION,
        -CORRECTION,
        T0 + 3600,
    ),
]


@pytest.mark.parametrize(
    ("schedule", "next_run", "now", "step", "want"),
    [c[1:] for c in STEP_CASES],
    ids=[c[0] for c in STEP_CASES],
)
def test_after_clock_step(
    schedule: Any, next_run: float, now: float, step: float, want: float | None
) -> None:
    got = after_clock_step(state(schedule, next_run=next_run), now, step)
    assert got == (None if want is None else pytest.approx(want, abs=1e-6))


@pytest.mark.parametrize(
    ("next_run", "now"),
    [(81.56, 78.66), (2.1, -2.7)],
    ids=["rounding lands on now", "rounding lands before now"],
)
def test_after_clock_step_moves_to_the_first_grid_slot_strictly_after_now(
    next_run: float, now: float
) -> None:
    got = after_clock_step(state(Every(0.1), next_run=next_run), now, -10.0)
    assert got is not None and got > now
    assert got == pytest.approx(now + 0.1, abs=1e-9)


def test_after_clock_step_without_a_next_run_keeps_it() -> None:
    assert after_clock_step(state(next_run=None), T0, -3600.0) is None
