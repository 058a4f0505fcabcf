"""Tests for tickwork._core.cron (CronExpression) and tickwork._cli.next."""

from __future__ import annotations

import argparse
import io
import pickle
import random
import time
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from tickwork._cli.next import add_parser, main, run
from tickwork._core.cron import CronExpression
from tickwork._core.errors import CronError, TickworkError

from .cron_reference import reference_fires, transitions


def z(s: str) -> datetime:
    """Parse an ISO instant such as '2025-10-26T00:30Z'."""
    return datetime.fromisoformat(s).astimezone(UTC)


def fires(expr: str, tz: str, start: datetime, n: int) -> list[datetime]:
    return [d.astimezone(UTC) for d in CronExpression(expr, tz).next_n(start, n)]


def local(tz: str, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(tz), fold=fold)  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# Table-driven DST cases: exact instants, derived by hand from Vixie cron's rules.

BERLIN = "Europe/Berlin"
NY = "America/New_York"
LH = "Australia/Lord_Howe"
SP = "America/Sao_Paulo"
APIA = "Pacific/Apia"

DST_TABLE = [
    # Berlin spring 2025-03-30: 02:00 CET -> 03:00 CEST at 01:00Z.
    (
        "fixed in gap runs once at the jump",
        "30 2 * * *",
        BERLIN,
        (2025, 3, 29, 12),
        0,
        ["2025-03-30T01:00Z", "2025-03-31T00:30Z"],
    ),
    (
        "fixed range across the gap",
        "30 1-4 * * *",
        BERLIN,
        (2025, 3, 29, 22),
        0,
        ["2025-03-30T00:30Z", "2025-03-30T01:00Z", "2025-03-30T01:30Z", "2025-03-30T02:30Z"],
    ),
    (
        "hourly: nothing invented in the gap",
        "0 * * * *",
        BERLIN,
        (2025, 3, 30, 0, 30),
        0,
        ["2025-03-30T00:00Z", "2025-03-30T01:00Z", "2025-03-30T02:00Z"],
    ),
    (
        "minute-star job is wildcard: gap minutes vanish",
        "*/15 2 * * *",
        BERLIN,
        (2025, 3, 29, 12),
        0,
        ["2025-03-31T00:00Z", "2025-03-31T00:15Z"],
    ),
    # Berlin autumn 2025-10-26: 03:00 CEST -> 02:00 CET at 01:00Z.
    (
        "fixed in repeated hour runs once",
        "30 2 * * *",
        BERLIN,
        (2025, 10, 25, 12),
        0,
        ["2025-10-26T00:30Z", "2025-10-27T01:30Z"],
    ),
    (
        "start in second pass goes to the next day",
        "30 2 * * *",
        BERLIN,
        (2025, 10, 26, 2, 10),
        1,
        ["2025-10-27T01:30Z"],
    ),
    (
        "fixed range skips the second 02:30",
        "30 1-4 * * *",
        BERLIN,
        (2025, 10, 25, 22),
        0,
        ["2025-10-25T23:30Z", "2025-10-26T00:30Z", "2025-10-26T02:30Z", "2025-10-26T03:30Z"],
    ),
    (
        "hourly fires in both passes",
        "0 * * * *",
        BERLIN,
        (2025, 10, 26, 0, 30),
        0,
        ["2025-10-25T23:00Z", "2025-10-26T00:00Z", "2025-10-26T01:00Z", "2025-10-26T02:00Z"],
    ),
    (
        "every 30 minutes follows real time",
        "*/30 * * * *",
        BERLIN,
        (2025, 10, 26, 1, 50),
        0,
        [
            "2025-10-26T00:00Z",
            "2025-10-26T00:30Z",
            "2025-10-26T01:00Z",
            "2025-10-26T01:30Z",
            "2025-10-26T02:00Z",
        ],
    ),
    (
        "hour step starts with * so it is wildcard",
        "0 */2 * * *",
        BERLIN,
        (2025, 10, 26, 0, 30),
        0,
        ["2025-10-26T00:00Z", "2025-10-26T01:00Z", "2025-10-26T03:00Z"],
    ),
    # New York 2025: spring 03-09 02:00 EST -> 03:00 EDT (07:00Z); fall 11-02 02:00 EDT
    # -> 01:00 EST (06:00Z).
    (
        "NY fixed in gap",
        "30 2 * * *",
        NY,
        (2025, 3, 8, 12),
        0,
        ["2025-03-09T07:00Z", "2025-03-10T06:30Z"],
    ),
    (
        "NY fixed in repeat",
        "30 1 * * *",
        NY,
        (2025, 11, 1, 12),
        0,
        ["2025-11-02T05:30Z", "2025-11-03T06:30Z"],
    ),
    (
        "NY every 20 minutes in the repeated hour",
        "*/20 1 * * *",
        NY,
        (2025, 11, 1, 12),
        0,
        [
            "2025-11-02T05:00Z",
            "2025-11-02T05:20Z",
            "2025-11-02T05:40Z",
            "2025-11-02T06:00Z",
            "2025-11-02T06:20Z",
            "2025-11-02T06:40Z",
            "2025-11-03T06:00Z",
        ],
    ),
    # Lord Howe: 30-minute shifts. Spring 2025-10-05 02:00 -> 02:30 (15:30Z on 10-04);
    # autumn 2025-04-06 02:00+11 -> 01:30+10:30 (15:00Z on 04-05).
    (
        "LH fixed in 30-minute gap",
        "15 2 * * *",
        LH,
        (2025, 10, 4, 12),
        0,
        ["2025-10-04T15:30Z", "2025-10-05T15:15Z"],
    ),
    (
        "LH fixed in 30-minute repeat",
        "45 1 * * *",
        LH,
        (2025, 4, 5, 12),
        0,
        ["2025-04-05T14:45Z", "2025-04-06T15:15Z"],
    ),
    (
        "LH wildcard in 30-minute repeat",
        "45 * * * *",
        LH,
        (2025, 4, 6, 1, 0),
        0,
        ["2025-04-05T14:45Z", "2025-04-05T15:15Z", "2025-04-05T16:15Z"],
    ),
    # Sao Paulo: midnight transitions. 2018-11-04 00:00 -> 01:00 (03:00Z);
    # 2019-02-17 00:00 -> 2019-02-16 23:00 (02:00Z).
    (
        "SP midnight job in the gap",
        "0 0 * * *",
        SP,
        (2018, 11, 3, 12),
        0,
        ["2018-11-04T03:00Z", "2018-11-05T02:00Z"],
    ),
    (
        "SP 23:30 runs once on the repeated evening",
        "30 23 * * *",
        SP,
        (2019, 2, 16, 12),
        0,
        ["2019-02-17T01:30Z", "2019-02-18T02:30Z"],
    ),
    # Apia skipped 2011-12-30 entirely (a 24-hour jump at 10:00Z): nothing runs for it.
    (
        "Apia: no catch-up after a 24-hour jump",
        "0 9 * * *",
        APIA,
        (2011, 12, 28, 12),
        0,
        ["2011-12-29T19:00Z", "2011-12-30T19:00Z"],
    ),
    (
        "Apia: the vanished date is skipped",
        "0 12 30 12 *",
        APIA,
        (2011, 12, 1),
        0,
        ["2012-12-29T22:00Z"],
    ),
    (
        "Apia: wildcard keeps real time",
        "*/30 * * * *",
        APIA,
        (2011, 12, 29, 23),
        0,
        ["2011-12-30T09:30Z", "2011-12-30T10:00Z", "2011-12-30T10:30Z"],
    ),
]


@pytest.mark.parametrize(
    ("expr", "tz", "start", "fold", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in DST_TABLE],
)
def test_dst_table(
    expr: str, tz: str, start: tuple[int, ...], fold: int, expected: list[str]
) -> None:
    got = fires(expr, tz, local(tz, *start, fold=fold), len(expected))
    assert got == [z(s) for s in expected]


# --------------------------------------------------------------------------------------
# cronsim 2.8 gets these wrong; pinned here.


def test_cronsim_bug_second_pass_start_is_not_earlier() -> None:
    start = local(BERLIN, 2025, 10, 26, 2, 10, fold=1)
    got = CronExpression("30 2 * * *", BERLIN).next_after(start)
    assert got > start
    assert got == local(BERLIN, 2025, 10, 27, 2, 30)


def test_cronsim_bug_lord_howe_hour_17() -> None:
    got = CronExpression("* 17 * * *", LH).next_after(local(LH, 2025, 10, 5, 1, 33))
    assert got.isoformat() == "2025-10-05T17:00:00+11:00"


def test_cronsim_bug_lord_howe_0237_exists() -> None:
    got = CronExpression("37 * * * *", LH).next_n(local(LH, 2025, 10, 4, 23, 52), 4)
    assert [d.isoformat() for d in got] == [
        "2025-10-05T00:37:00+10:30",
        "2025-10-05T01:37:00+10:30",
        "2025-10-05T02:37:00+11:00",
        "2025-10-05T03:37:00+11:00",
    ]


def test_cronsim_bug_lord_howe_0200_after_fall_back() -> None:
    got = CronExpression("*/15 2 * * *", LH).next_n(local(LH, 2025, 4, 6, 0, 0), 4)
    assert [d.isoformat() for d in got] == [
        "2025-04-06T02:00:00+10:30",
        "2025-04-06T02:15:00+10:30",
        "2025-04-06T02:30:00+10:30",
        "2025-04-06T02:45:00+10:30",
    ]


def test_result_carries_fold_in_second_pass() -> None:
    got = CronExpression("0 * * * *", BERLIN).next_after(z("2025-10-26T00:30Z"))
    assert (got.isoformat(), got.fold) == ("2025-10-26T02:00:00+01:00", 1)


# --------------------------------------------------------------------------------------
# Brute-force reference (tests/cron_reference.py) on random expressions near transitions.


def _random_field(rng: random.Random, lo: int, hi: int, hot: list[int]) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return "*"
    if kind == 1:
        return (
            f"*/{rng.choice([2, 3, 5, 7, 10, 15, 20, 30])}" if hi > 24 else f"*/{rng.randint(2, 6)}"
        )
    pick = rng.choice(hot) if rng.random() < 0.7 else rng.randint(lo, hi)
    if kind == 2:
        return str(pick)
    if kind == 3:
        return f"{pick}-{min(hi, pick + rng.randint(1, 5))}"
    if kind == 4:
        return f"{pick}-{min(hi, pick + rng.randint(2, 9))}/{rng.randint(2, 3)}"
    vals = sorted({pick, rng.randint(lo, hi), rng.randint(lo, hi)})
    return ",".join(map(str, vals))


def random_dense_expr(rng: random.Random) -> str:
    minute = _random_field(rng, 0, 59, [0, 15, 30, 45, 59])
    hour = _random_field(rng, 0, 23, [0, 1, 2, 3, 23])
    dom = rng.choice(["*", "*", "*", "*/2", "1-20", "3,4,5,6,7,17,18"])
    dow = rng.choice(["*", "*", "*", "1-5", "0,6", "SUN,MON", "*/2"])
    return f"{minute} {hour} {dom} * {dow}"


REFERENCE_ZONES = [
    (BERLIN, datetime(2025, 1, 1), datetime(2026, 1, 1)),
    (NY, datetime(2025, 1, 1), datetime(2026, 1, 1)),
    (LH, datetime(2025, 1, 1), datetime(2026, 1, 1)),
    (SP, datetime(2018, 6, 1), datetime(2019, 6, 1)),
    (APIA, datetime(2011, 9, 1), datetime(2012, 6, 1)),
    ("UTC", datetime(2025, 1, 1), datetime(2025, 1, 3)),
]


@pytest.mark.parametrize(("tz", "lo", "hi"), REFERENCE_ZONES, ids=[r[0] for r in REFERENCE_ZONES])
def test_matches_brute_force_reference_near_transitions(
    tz: str, lo: datetime, hi: datetime
) -> None:
    rng = random.Random(f"cron-reference-{tz}")
    points = transitions(tz, lo.replace(tzinfo=UTC), hi.replace(tzinfo=UTC))
    if not points:
        points = [lo.replace(tzinfo=UTC).timestamp() + 86400]
    horizon = 30 * 3600.0
    for _ in range(45):
        expr = random_dense_expr(rng)
        cron = CronExpression(expr, tz)
        start = rng.choice(points) + rng.uniform(-26 * 3600, 4 * 3600)
        if rng.random() < 0.3:
            start = float(int(start) // 60 * 60)  # exactly on a minute boundary
        want = reference_fires(expr, tz, start, horizon)
        got: list[float] = []
        t = start
        while True:
            t = cron.next_after_timestamp(t)
            if t > start + horizon:
                break
            got.append(t)
        assert got == want, (expr, tz, start)


# --------------------------------------------------------------------------------------
# Differential test against croniter in UTC (no DST, so the libraries' DST policies do
# not matter there).


def _croniter_field(rng: random.Random, lo: int, hi: int, names: list[str] | None) -> str:
    # Only syntax both libraries read the same way: no `N/step` without a range (its
    # meaning changed in croniter 7), no full ranges spelled out (`0-6`, `1-31`: croniter
    # collapses them to `*`, which flips Vixie's day AND/OR rule), no L/#/W, no 7.
    kind = rng.randrange(6)
    span = hi - lo
    if kind == 0:
        return "*"
    if kind == 1:
        return f"*/{rng.randint(2, max(2, span // 2))}"
    a = rng.randint(lo, hi - 1)
    if kind == 2:
        if names and rng.random() < 0.5:
            return names[a - lo]
        return str(a)
    if kind == 3:
        b = rng.randint(a + 1, min(hi, a + span - 1))
        if names and rng.random() < 0.5:
            return f"{names[a - lo]}-{names[b - lo]}"
        return f"{a}-{b}"
    if kind == 4:
        b = rng.randint(a + 1, min(hi, a + span - 1))
        return f"{a}-{b}/{rng.randint(2, 4)}"
    return ",".join(str(v) for v in sorted(rng.sample(range(lo, hi + 1), rng.randint(2, 4))))


MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def test_differential_against_croniter_utc() -> None:
    rng = random.Random(20261202)
    checked = 0
    for _ in range(2500):
        expr = " ".join(
            [
                _croniter_field(rng, 0, 59, None),
                _croniter_field(rng, 0, 23, None),
                _croniter_field(rng, 1, 31, None),
                _croniter_field(rng, 1, 12, MONTHS),
                _croniter_field(rng, 0, 6, DAYS),
            ]
        )
        try:
            cron = CronExpression(expr)
        except CronError:
            continue  # impossible day/month combination; covered by the error tests
        start = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(
            seconds=rng.randrange(40 * 365 * 86400)
        )
        # implement_cron_bug=True: croniter then applies Vixie's rule that a day field
        # starting with '*' makes day-of-month AND day-of-week (otherwise OR), which is
        # what cron (and CronExpression) does; croniter's default is plain OR.
        it = croniter(expr, start, implement_cron_bug=True)
        want = [it.get_next(datetime) for _ in range(3)]
        got = CronExpression(expr).next_n(start, 3)
        assert got == want, (expr, start)
        assert cron == CronExpression(expr)
        checked += 1
    assert checked > 2000


# --------------------------------------------------------------------------------------
# Syntax: aliases, names, L / LW / # / nL.


@pytest.mark.parametrize(
    ("alias", "plain"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_aliases(alias: str, plain: str) -> None:
    start = z("2025-10-25T21:17Z")
    assert CronExpression(alias, BERLIN).next_n(start, 5) == CronExpression(plain, BERLIN).next_n(
        start, 5
    )


def test_hourly_alias_is_a_wildcard_job() -> None:
    assert not CronExpression("@hourly").is_fixed_time
    assert CronExpression("@daily").is_fixed_time


def test_names_any_case() -> None:
    a = CronExpression("0 9 * jan-mar Mon-Fri").next_n(z("2025-01-01T00:00Z"), 10)
    b = CronExpression("0 9 * 1-3 1-5").next_n(z("2025-01-01T00:00Z"), 10)
    assert a == b


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 0 L * *", ["2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30"]),
        ("0 0 LW * *", ["2025-01-31", "2025-02-28", "2025-03-31", "2025-04-30"]),
        ("0 0 * * 5L", ["2025-01-31", "2025-02-28", "2025-03-28", "2025-04-25"]),
        ("0 0 * * 1#2", ["2025-01-13", "2025-02-10", "2025-03-10", "2025-04-14"]),
        ("0 0 * * MON#5", ["2025-03-31", "2025-06-30", "2025-09-29", "2025-12-29"]),
        ("0 0 * 2 MON#5", ["2044-02-29", "2072-02-29", "2112-02-29", "2140-02-29"]),
        ("0 0 29 2 *", ["2028-02-29", "2032-02-29", "2036-02-29", "2040-02-29"]),
        ("0 0 */2 * 1", ["2025-01-13", "2025-01-27", "2025-02-03", "2025-02-17"]),
        ("0 0 1 * 1", ["2025-01-06", "2025-01-13", "2025-01-20", "2025-01-27"]),
        ("0 0 8-9 * 0#2", ["2025-01-08", "2025-01-09", "2025-01-12", "2025-02-08"]),
        ("0 0 * * 7", ["2025-01-05", "2025-01-12", "2025-01-19", "2025-01-26"]),
    ],
)
def test_calendar_syntax(expr: str, expected: list[str]) -> None:
    got = CronExpression(expr).next_n(z("2025-01-01T00:00Z"), 4)
    assert [d.date().isoformat() for d in got] == expected


# --------------------------------------------------------------------------------------
# The strict-after rule and the numeric API.


def test_strictly_after_a_fire_time() -> None:
    c = CronExpression("0 9 * * *", BERLIN)
    first = c.next_after(z("2025-06-01T00:00Z"))
    assert c.next_after(first) == first + timedelta(days=1)
    assert c.next_after(first - timedelta(microseconds=1)) == first


def test_next_after_accepts_any_aware_zone() -> None:
    c = CronExpression("0 9 * * *", BERLIN)
    t = datetime(2025, 6, 1, 3, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert c.next_after(t) == c.next_after(t.astimezone(UTC))
    assert c.next_after(t).tzinfo is ZoneInfo(BERLIN)


def test_timestamp_api_matches_datetime_api() -> None:
    c = CronExpression("*/7 3-5 * * *", NY)
    t = z("2025-11-02T04:59:30Z")
    assert c.next_after_timestamp(t.timestamp()) == c.next_after(t).timestamp()


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(TypeError, match=r"^t must be an aware datetime \(with tzinfo\), got naive"):
        CronExpression("* * * * *").next_after(datetime(2025, 1, 1))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_timestamp_must_be_finite(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^ts must be a finite number of seconds, got (nan|inf)$"):
        CronExpression("* * * * *").next_after_timestamp(bad)


def test_iter_after_and_next_n() -> None:
    c = CronExpression("0 0 1 * *")
    it = c.iter_after(z("2025-01-15T00:00Z"))
    assert [next(it).month for _ in range(3)] == [2, 3, 4]
    assert c.next_n(z("2025-01-15T00:00Z"), 0) == []
    with pytest.raises(ValueError, match=r"^n must be an int >= 0, got -1$"):
        c.next_n(z("2025-01-15T00:00Z"), -1)


def test_results_strictly_increase_through_transitions() -> None:
    rng = random.Random(7)
    for tz in (BERLIN, NY, LH, SP):
        for _ in range(30):
            c = CronExpression(random_dense_expr(rng), tz)
            t = z("2025-03-01T00:00Z") + timedelta(minutes=rng.randrange(300 * 24 * 60))
            prev = t
            for d in c.next_n(t, 20):
                assert d > prev
                prev = d


# --------------------------------------------------------------------------------------
# Value semantics.


def test_value_semantics() -> None:
    a = CronExpression("0 9 * * 1-5", BERLIN)
    b = CronExpression("0 9 * * 1-5", ZoneInfo(BERLIN))
    assert a == b
    assert hash(a) == hash(b)
    assert a != CronExpression("0 9 * * 1-5", NY)
    assert a != "0 9 * * 1-5"
    assert repr(a) == "CronExpression('0 9 * * 1-5', tz='Europe/Berlin')"
    assert (a.expr, a.tz, a.tz_name) == ("0 9 * * 1-5", ZoneInfo(BERLIN), BERLIN)
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError, match="immutable"):
        a.expr = "x"  # type: ignore[misc]


def test_default_zone_is_utc() -> None:
    assert CronExpression("* * * * *").tz_name == "UTC"


def test_local_zone_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/Sao_Paulo")
    assert CronExpression("* * * * *", "local").tz_name == SP
    assert CronExpression("* * * * *").tz_name == "UTC"


# --------------------------------------------------------------------------------------
# Errors: messages name the field and show the value.


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 30 2 *", r"^day-of-month: 30 never occurs in February in `0 0 30 2 \*`$"),
        ("0 0 31 4 *", r"^day-of-month: 31 never occurs in April in `0 0 31 4 \*`$"),
        (
            "0 0 31 4,6,9,11 *",
            r"^day-of-month: 31 never occurs in April, June, September or November "
            r"in `0 0 31 4,6,9,11 \*`$",
        ),
        (
            "0 0 */31 * MON#2",
            r"^day-of-month: \*/31 never falls on day-of-week MON#2 in `0 0 \*/31 \* MON#2` "
            r"\(no match in a full 28-year calendar cycle\)$",
        ),
        ("61 * * * *", r"^minute: invalid value `61` in `61 \* \* \* \*`$"),
        ("* 24 * * *", r"^hour: invalid value `24` in `\* 24 \* \* \*`$"),
        ("* * 0 * *", r"^day-of-month: invalid value `0` in `\* \* 0 \* \*`$"),
        ("* * * 13 *", r"^month: invalid value `13` in `\* \* \* 13 \*`$"),
        ("* * * * FRI-MON", r"^day-of-week: invalid value `FRI-MON` in `\* \* \* \* FRI-MON`$"),
        ("*/0 * * * *", r"^minute: invalid value `\*/0` in `\*/0 \* \* \* \*`$"),
        ("0 9 15W * *", r"^day-of-month: invalid value `15W` in `0 9 15W \* \*`$"),
        ("60 30 2 * * *", r"^second: invalid value `60` in `60 30 2 \* \* \*`$"),
        ("0 60 2 * * *", r"^minute: invalid value `60` in `0 60 2 \* \* \*`$"),
        (
            "* * * *",
            r"^expr: expected 5 fields \(minute hour day-of-month month day-of-week\), "
            r"or 6 with a seconds field first, got 4 in `\* \* \* \*`$",
        ),
        (
            "0 0 30 2 * * *",
            r"^expr: expected 5 fields .*, got 7 in `0 0 30 2 \* \* \*`$",
        ),
        (
            "@reboot",
            r"^expr: @reboot is not a calendar schedule and is not supported; "
            r"run the job once at start-up instead$",
        ),
        ("@often", r"^expr: unknown alias `@often` \(known: @yearly, .*, @hourly\)$"),
    ],
)
def test_bad_expressions(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        CronExpression(expr)


def test_error_hierarchy() -> None:
    assert issubclass(CronError, TickworkError)
    assert issubclass(CronError, ValueError)


def test_unknown_zone() -> None:
    with pytest.raises(
        CronError,
        match=r"^tz: unknown time zone 'Mars/Olympus'; expected an IANA name such as "
        r"'Europe/Berlin', 'UTC' or 'local'$",
    ):
        CronExpression("* * * * *", "Mars/Olympus")


def test_wrong_argument_types() -> None:
    with pytest.raises(TypeError, match=r"^expr must be a str, got int 5$"):
        CronExpression(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^tz must be an IANA zone name \(str\) or a ZoneInfo"):
        CronExpression("* * * * *", UTC)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "expr", ["0 0 */31 * MON#2", "* * */20 * 1L", "0 0 */30 2 SUN#5", "0 0 L 4 *#0"]
)
def test_impossible_expressions_fail_fast(expr: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(CronError):
        CronExpression(expr)
    assert time.perf_counter() - t0 < 2.0  # bounded: no hang (generous for a busy CI)


def test_rare_but_possible_expression_is_accepted() -> None:
    # Feb 29 on a Monday under AND semantics: possible, every 28 years or so.
    c = CronExpression("0 0 29 2 */7")
    assert c.next_after(z("2025-01-01T00:00Z")).date().isoformat() == "2032-02-29"


# --------------------------------------------------------------------------------------
# CLI piece.


def _ns(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"tz": "UTC", "count": 5, "after": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_cli_run_prints_local_and_utc() -> None:
    out = io.StringIO()
    rc = run(
        _ns(expr="0 9 * * 1-5", tz=BERLIN, count=3, after="2025-03-28T00:00Z"),
        out=out,
        err=io.StringIO(),
    )
    assert rc == 0
    assert out.getvalue().splitlines() == [
        "# 0 9 * * 1-5  (tz Europe/Berlin)",
        "2025-03-28T09:00:00+01:00  Fri CET  2025-03-28T08:00:00Z",
        "2025-03-31T09:00:00+02:00  Mon CEST  2025-03-31T07:00:00Z",
        "2025-04-01T09:00:00+02:00  Tue CEST  2025-04-01T07:00:00Z",
    ]


def test_cli_naive_after_is_wall_time_in_tz() -> None:
    out = io.StringIO()
    assert run(_ns(expr="30 2 * * *", tz=BERLIN, count=1, after="2025-10-26T02:40"), out=out) == 0
    assert out.getvalue().splitlines()[1].startswith("2025-10-27T02:30:00+01:00")


def test_cli_bad_expression_exits_2() -> None:
    err = io.StringIO()
    assert run(_ns(expr="0 0 30 2 *"), out=io.StringIO(), err=err) == 2
    assert err.getvalue() == (
        "tickwork next: error: day-of-month: 30 never occurs in February in `0 0 30 2 *`\n"
    )


def test_cli_bad_after_and_tz_exit_2() -> None:
    err = io.StringIO()
    assert run(_ns(expr="* * * * *", after="yesterday"), out=io.StringIO(), err=err) == 2
    assert "--after must be an ISO 8601 date-time, got 'yesterday'" in err.getvalue()
    assert run(_ns(expr="* * * * *", tz="Nowhere/City"), out=io.StringIO(), err=err) == 2
    assert "tz: unknown time zone 'Nowhere/City'" in err.getvalue()


def test_cli_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["@hourly", "-n", "2", "--after", "2025-01-01T00:30:00+00:00"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "2025-01-01T01:00:00+00:00  Wed UTC  2025-01-01T01:00:00Z",
        "2025-01-01T02:00:00+00:00  Wed UTC  2025-01-01T02:00:00Z",
    ]
    assert main(["61 * * * *"]) == 2
    assert "minute: invalid value `61`" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["* * * * *", "-n", "0"])
    assert exc.value.code == 2


def test_cli_add_parser_sets_func() -> None:
    parser = argparse.ArgumentParser(prog="tickwork")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["next", "@daily", "--tz", "Asia/Tokyo"])
    assert args.func is run
    assert (args.expr, args.tz, args.count, args.after) == ("@daily", "Asia/Tokyo", 5, None)


# -- steps of the system clock (docs/cron.md, "Steps of the system clock") ---------------

# Wall clock at 10:20:54.5 UTC, 2026-12-02; the job waits for `target`.
_BEFORE = datetime(2026, 12, 2, 10, 20, 54, 500000, tzinfo=UTC).timestamp()


def _ts(hh: int, mm: int, day: int = 2) -> float:
    return datetime(2026, 12, day, hh, mm, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("expr", "target", "step", "expected"),
    [
        # wildcard: after any step back, the first slot after the new wall time
        ("* * * * *", _ts(10, 21), -30, _ts(10, 21)),
        ("* * * * *", _ts(10, 21), -7200, _ts(8, 21)),
        ("* * * * *", _ts(10, 21), -86400, _ts(10, 21, day=1)),
        ("0 * * * *", _ts(11, 0), -14400, _ts(7, 0)),
        # fixed-time, back by up to 3 h: first pass only, keep waiting for the target
        ("15 10 * * *", _ts(10, 15, day=3), -7200, _ts(10, 15, day=3)),
        ("15 10 * * *", _ts(10, 15, day=3), -3 * 3600, _ts(10, 15, day=3)),
        # fixed-time, back by more than 3 h: a correction, both passes
        ("15 10 * * *", _ts(10, 15, day=3), -3 * 3600 - 1, _ts(10, 15)),
        ("15 10 * * *", _ts(10, 15, day=3), -86400, _ts(10, 15)),
        # forward: the target stays (already due if the step carried past it)
        ("* * * * *", _ts(10, 21), 7200, _ts(10, 21)),
        ("15 10 * * *", _ts(10, 15, day=3), 86400, _ts(10, 15, day=3)),
        # an overdue target is never moved later
        ("* * * * *", _ts(7, 0), -30, _ts(7, 0)),
    ],
)
def test_after_clock_step(expr: str, target: float, step: float, expected: float) -> None:
    cron = CronExpression(expr)
    assert cron.after_clock_step(target, _BEFORE + step, step) == expected


@pytest.mark.parametrize(
    ("args", "exc", "message"),
    [
        (("x", 0.0, 0.0), TypeError, "target must be a number of seconds, got str 'x'"),
        ((0.0, True, 0.0), TypeError, "seen must be a number of seconds, got bool True"),
        ((0.0, 0.0, float("nan")), ValueError, "step must be a finite number of seconds, got nan"),
    ],
)
def test_after_clock_step_validates(args: tuple[object, ...], exc: type, message: str) -> None:
    with pytest.raises(exc, match=f"^{message}$"):
        CronExpression("* * * * *").after_clock_step(*args)  # type: ignore[arg-type]


# -- a seconds field (6 fields, seconds first) -----------------------------------------


def _fires(expr: str, tz: str, start: datetime, n: int) -> list[str]:
    return [t.isoformat() for t in CronExpression(expr, tz).next_n(start, n)]


def test_a_seconds_field_fires_on_its_seconds() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert _fires("*/20 * * * * *", "UTC", start, 4) == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
        "2026-01-01T00:01:00+00:00",
        "2026-01-01T00:01:20+00:00",
    ]
    assert _fires("30 0 3 * * *", "UTC", start, 2) == [
        "2026-01-01T03:00:30+00:00",
        "2026-01-02T03:00:30+00:00",
    ]
    assert _fires("0,15 * * * * *", "UTC", start + timedelta(seconds=59), 2) == [
        "2026-01-01T00:01:00+00:00",
        "2026-01-01T00:01:15+00:00",
    ]


def test_six_fields_with_second_zero_match_the_five_field_form() -> None:
    start = datetime(2026, 3, 20, tzinfo=UTC)
    for tz in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
        for five in ("30 2 * * *", "*/7 * * * *", "0 */2 * * *", "15 1 * * 0"):
            six = CronExpression("0 " + five, tz).next_n(start, 40)
            assert six == CronExpression(five, tz).next_n(start, 40), (tz, five)


def test_seconds_follow_the_same_dst_rules() -> None:
    # Berlin, 2026-03-29: 02:00-03:00 is skipped. A fixed-time slot in it runs once at
    # the jump, as its 5-field form does; a wildcard one does not run for the gap.
    spring = datetime(2026, 3, 28, 12, tzinfo=UTC)
    assert _fires("30 30 2 * * *", "Europe/Berlin", spring, 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:30+02:00",
        "2026-03-31T02:30:30+02:00",
    ]
    # 2026-10-25: 02:00-03:00 is repeated. The fixed-time slot runs in the first pass
    # only; a wildcard-minute job with seconds runs in both passes (real time).
    autumn = datetime(2026, 10, 24, 12, tzinfo=UTC)
    assert _fires("30 30 2 * * *", "Europe/Berlin", autumn, 2) == [
        "2026-10-25T02:30:30+02:00",
        "2026-10-26T02:30:30+01:00",
    ]
    passes = CronExpression("45 59 * * * *", "Europe/Berlin").next_n(
        datetime(2026, 10, 24, 23, 30, tzinfo=UTC), 3
    )
    assert [t.isoformat() for t in passes] == [
        "2026-10-25T01:59:45+02:00",
        "2026-10-25T02:59:45+02:00",
        "2026-10-25T02:59:45+01:00",
    ]


def test_a_seconds_cron_on_the_core_fires_on_its_seconds() -> None:
    from tickwork import Cron, Scheduler
    from tickwork.testing import FakeClock

    clock = FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    s = Scheduler(clock)
    ran: list[str] = []
    s.add(Cron("*/20 * * * * *"), lambda: ran.append(f"{int(clock.wall()) % 60:02d}"))
    for _ in range(80):
        clock.advance(1)
        s.run_pending()
    assert ran == ["20", "40", "00", "20"]
