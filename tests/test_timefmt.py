"""Operator-facing times are UTC ISO 8601, never epoch floats."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from tickwork import Every
from tickwork._core.text import iso, out_of_range
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore


def test_iso_is_utc_with_a_z_and_optional_milliseconds() -> None:
    assert iso(1_796_000_000.25) == "2026-11-30T00:53:20Z"
    assert iso(1_796_000_000.25, millis=True) == "2026-11-30T00:53:20.250Z"


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e20])
def test_iso_never_fails_a_log_line(value: float) -> None:
    # Words that say what is wrong, never a bare float that reads like a time (issue 26).
    assert iso(value) == out_of_range(value) != repr(value)


def test_a_recovered_claim_is_logged_with_an_iso_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(f"{tmp_path}/s.db")
    try:
        store.upsert(JobSpec("j", "tests.durable_jobs:record", Every(60)), 1_796_000_000.0)
        store.claim_due(
            1_796_000_000.0, owner="h:1:aa", lease_seconds=5, limit=1, advance=lambda s, at: at + 60
        )
        with caplog.at_level(logging.WARNING, logger="tickwork"):
            store.recover_expired(1_796_000_010.0)
    finally:
        store.close()
    [line] = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
    assert "(scheduled 2026-11-30T00:53:20.000Z)" in line


def test_the_surfaces_time_texts_live_in_one_module() -> None:
    from tickwork._core.text import (
        iso_due,
        plain_seconds,
        relative_time,
        run_duration,
        short_duration,
        utc_time,
    )

    assert iso_due(1_800_000_000.0) == "2027-01-15T08:00:00Z"
    assert iso_due(1_800_000_000.25) == "2027-01-15T08:00:00.250Z"
    assert utc_time(1_800_000_000) == "2027-01-15 08:00:00 UTC" and utc_time(None) == "-"
    assert relative_time(100, 105) == "in 5 s" and relative_time(1000, 820) == "3 min ago"
    assert relative_time(0, 9000) == "in 2 h 30 min" and relative_time(0, None) == ""
    assert relative_time(2591807.85, 0) == "30 d ago"
    assert [run_duration(v) for v in (0.25, 12.5, 245, 3723)] == [
        "0.25s",
        "12.5s",
        "4m05s",
        "1h02m03s",
    ]
    assert short_duration(0.25) == "250 ms" and short_duration(1.5) == "1.50 s"
    assert short_duration(None) == "-" and plain_seconds(30.0) == "30s"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.25, "250 ms"),
        (0.9996, "1.00 s"),  # rounds into the next unit, never "1000 ms"
        (1.5, "1.50 s"),
        (42.4, "42 s"),
        (59.6, "1 min"),
        (250, "4 min 10 s"),
        (3599.6, "1 h"),
        (15000, "4 h 10 min"),
        (86399.9, "1 d"),
        (183600, "2 d 3 h"),
        (2591807.85, "30 d"),  # the lateness, once "2591807.85 s"
        (float("inf"), "inf s"),
    ],
)
def test_durations_read_at_a_glance(seconds: float, shown: str) -> None:
    from tickwork._core.text import human_duration, short_duration

    assert human_duration(seconds) == shown and short_duration(seconds) == shown


def test_a_time_is_shown_once_where_local_time_is_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from tickwork._core.text import local_and_utc, local_time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert local_and_utc(1_800_000_000) == "2027-01-15T08:00:00Z"
        assert local_time(1_800_000_000) == "2027-01-15 08:00:00 UTC"
        monkeypatch.setenv("TZ", "Europe/Paris")
        time.tzset()
        assert local_and_utc(1_800_000_000) == "2027-01-15T09:00:00+01:00 (2027-01-15T08:00:00Z)"
        assert local_time(1_800_000_000) == "2027-01-15 09:00:00 CET"
        assert local_time(None) == "-"
        assert local_time(1e300) == "out of range: 1e+300 s since 1970, after the year 9999"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_pages_one_time_format_is_in_the_job_s_zone() -> None:
    from tickwork import Cron, Every
    from tickwork._core.text import job_zone, zoned_time

    assert zoned_time(1_800_000_000, "Europe/Paris") == "2027-01-15 09:00:00 CET"
    assert zoned_time(1_815_000_000, "Europe/Paris") == "2027-07-08 00:40:00 CEST"
    assert zoned_time(1_800_000_000, "America/New_York") == "2027-01-15 03:00:00 EST"
    assert zoned_time(1_800_000_000, "No/Such_Zone") == "2027-01-15 08:00:00 UTC"
    assert zoned_time(None, "Europe/Paris") == "-"
    assert zoned_time(1e20, "Europe/Paris").startswith("out of range: ")
    assert job_zone(Cron("0 7 * * *", tz="Europe/Paris")) == "Europe/Paris"
    assert job_zone(Every(60)) == "UTC" and job_zone(None) == "UTC"
