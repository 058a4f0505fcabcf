"""Calendars (issue 27, point 4): excluded dates, ranges, weekdays and public holidays.

The holiday dates asserted here are the known ones (German, Bavarian, US federal and
English bank holidays for 2025-2027), written out, not read back from the package.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.executors import ManualExecutor, drain, manual_scheduler
from tickwork import Calendar, CalendarError, Cron, CronError, DurableScheduler, Every
from tickwork._core import calendars as calendars_module
from tickwork._core.cron import CronExpression
from tickwork._daemon.jobsfile.config import parse_config
from tickwork.stores import JobSpec, Store
from tickwork.stores.contract import schedule_from_dict
from tickwork.testing import FakeClock

from . import durable_jobs

ROOT = Path(__file__).resolve().parents[1]


def days(cal: Calendar, start: str, end: str) -> list[str]:
    """The excluded days from ``start`` to ``end`` (ISO, both included), weekends apart."""
    d, last, out = date.fromisoformat(start), date.fromisoformat(end), []
    while d <= last:
        if d.weekday() < 5 and cal.excludes(d):
            out.append(d.isoformat())
        d += timedelta(days=1)
    return out


def test_german_holidays_2025_2027() -> None:
    de = Calendar(holidays="DE")
    for day in (
        "2025-04-18",  # Good Friday
        "2025-04-21",  # Easter Monday
        "2025-06-09",  # Whit Monday
        "2025-10-03",
        "2025-12-25",
        "2025-12-26",
        "2026-04-03",  # Good Friday
        "2026-05-14",  # Ascension
        "2026-05-25",  # Whit Monday
        "2027-03-26",  # Good Friday
        "2027-05-17",  # Whit Monday
    ):
        assert de.excludes(date.fromisoformat(day)), day
    assert not de.excludes(date(2025, 12, 24))
    assert not de.excludes(date(2026, 1, 6))  # Epiphany: Bavaria, not the whole country
    assert not de.excludes(date(2026, 6, 4))  # Corpus Christi: likewise
    by = Calendar(holidays="DE-BY")
    for day in ("2026-01-06", "2026-06-04", "2026-11-01", "2025-06-19", "2027-05-27"):
        assert by.excludes(date.fromisoformat(day)), day
    assert days(by, "2026-01-01", "2026-12-31") == [
        "2026-01-01",
        "2026-01-06",
        "2026-04-03",
        "2026-04-06",
        "2026-05-01",
        "2026-05-14",
        "2026-05-25",
        "2026-06-04",
        "2026-12-25",
    ]


def test_us_federal_holidays_with_observed_days() -> None:
    us = Calendar(holidays="US")
    assert us.excludes(date(2026, 7, 3))  # Independence Day (Sat) observed on Friday
    assert us.excludes(date(2025, 7, 4))
    assert us.excludes(date(2025, 11, 27))  # Thanksgiving
    assert us.excludes(date(2026, 11, 26))
    assert us.excludes(date(2027, 7, 5))  # observed (Sunday the 4th)
    assert us.excludes(date(2027, 12, 24))  # Christmas (Sat) observed
    assert us.excludes(date(2025, 6, 19))  # Juneteenth
    assert not us.excludes(date(2025, 12, 26))
    assert not us.excludes(date(2026, 4, 3))  # no Good Friday
    assert days(us, "2026-01-01", "2026-06-30") == [
        "2026-01-01",
        "2026-01-19",
        "2026-02-16",
        "2026-05-25",
        "2026-06-19",
    ]


def test_english_bank_holidays() -> None:
    uk = Calendar(holidays="GB-ENG")
    for day in ("2025-12-26", "2025-04-18", "2026-04-03", "2026-05-04", "2026-08-31"):
        assert uk.excludes(date.fromisoformat(day)), day
    assert uk.excludes(date(2026, 12, 28))  # Boxing Day (Sat) observed on Monday
    assert uk.excludes(date(2027, 12, 27)) and uk.excludes(date(2027, 12, 28))
    assert days(uk, "2027-01-01", "2027-06-30") == [
        "2027-01-01",
        "2027-03-26",
        "2027-03-29",
        "2027-05-03",
        "2027-05-31",
    ]


def fires(cron: CronExpression, after: str, n: int) -> list[str]:
    start = datetime.fromisoformat(after)
    return [f.strftime("%Y-%m-%d %a %H:%M") for f in cron.next_n(start, n)]


def test_business_days_only_skips_weekends_and_holidays() -> None:
    cal = Calendar.business_days("DE")
    cron = CronExpression("0 9 * * *", "Europe/Berlin", calendar=cal)
    assert fires(cron, "2025-12-23T12:00+01:00", 5) == [
        "2025-12-24 Wed 09:00",
        "2025-12-29 Mon 09:00",
        "2025-12-30 Tue 09:00",
        "2025-12-31 Wed 09:00",
        "2026-01-02 Fri 09:00",
    ]


def test_the_first_business_day_of_the_month() -> None:
    cal = Calendar.business_days("DE-BY")
    cron = CronExpression("30 8 1 * *", "Europe/Berlin", calendar=cal, shift="next")
    assert fires(cron, "2025-12-15T00:00Z", 8) == [
        "2026-01-02 Fri 08:30",  # New Year's Day
        "2026-02-02 Mon 08:30",  # the 1st is a Sunday
        "2026-03-02 Mon 08:30",
        "2026-04-01 Wed 08:30",
        "2026-05-04 Mon 08:30",  # Labour Day, then a weekend
        "2026-06-01 Mon 08:30",
        "2026-07-01 Wed 08:30",
        "2026-08-03 Mon 08:30",
    ]


def test_the_last_friday_unless_a_holiday_then_the_thursday_before() -> None:
    uk = Calendar(holidays="GB-ENG")
    cron = CronExpression("0 17 * * 5L", "Europe/London", calendar=uk, shift="previous")
    got = fires(cron, "2026-01-01T00:00Z", 12)
    assert got[2] == "2026-03-27 Fri 17:00"
    assert "2026-12-24 Thu 17:00" in got  # the 25th is Christmas Day
    de = Calendar(holidays="DE")
    cron = CronExpression("0 17 * * 5L", "Europe/Berlin", calendar=de, shift="previous")
    assert fires(cron, "2027-03-01T00:00Z", 2) == [
        "2027-03-25 Thu 17:00",  # Good Friday, 26 March 2027
        "2027-04-30 Fri 17:00",
    ]


def test_dates_ranges_and_weekdays() -> None:
    cal = Calendar(
        dates=["2026-03-10", "2026-03-12..2026-03-13", date(2026, 3, 16)],
        weekdays=["Sunday", "sat"],
    )
    assert cal.dates == ("2026-03-10", "2026-03-12..2026-03-13", "2026-03-16")
    assert cal.weekdays == ("sat", "sun")
    cron = CronExpression("0 12 * * *", calendar=cal)
    assert fires(cron, "2026-03-09T13:00Z", 3) == [
        "2026-03-11 Wed 12:00",
        "2026-03-17 Tue 12:00",
        "2026-03-18 Wed 12:00",
    ]
    nxt = CronExpression("0 12 * * *", calendar=cal, shift="next")
    # Every excluded day's slot moves to the next allowed day, at the same time, once.
    assert fires(nxt, "2026-03-09T13:00Z", 3) == [
        "2026-03-11 Wed 12:00",
        "2026-03-17 Tue 12:00",
        "2026-03-18 Wed 12:00",
    ]
    # A minutely expression over a long excluded range: jumps, does not crawl.
    long = Calendar(dates=["2026-01-01..2026-12-31"])
    assert fires(CronExpression("* * * * *", calendar=long), "2026-01-01T00:00Z", 1) == [
        "2027-01-01 Fri 00:00"
    ]


def test_bad_calendars_are_refused_with_pinned_messages() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"dates": ["2026-02-30"]}, "dates must be dates ('2025-12-24') or ranges"),
        ({"dates": ["2026-03-02..2026-03-01"]}, "dates: a range must end on or after its start"),
        ({"weekdays": ["fri", "caturday"]}, "weekdays must be day names 'mon', 'tue'"),
        ({"weekdays": list(calendars_module.WEEKDAYS)}, "weekdays must leave at least one"),
        ({"holidays": "germany"}, "holidays must be a country code, optionally with a subdivision"),
        ({"holidays": "XX"}, "holidays: the holidays package has no country 'XX', got 'XX'"),
        ({"holidays": "DE-ZZ"}, "holidays: the holidays package has no subdivision 'ZZ' of DE"),
    ]
    for kwargs, message in cases:
        with pytest.raises(CalendarError) as info:
            Calendar(**kwargs)
        assert str(info.value).startswith(message), (kwargs, str(info.value))
    with pytest.raises(
        CronError, match=r"^shift must be one of 'skip', 'previous', 'next', got 'soon'$"
    ):
        Cron("0 9 * * *", calendar=Calendar(weekdays=["sun"]), shift="soon")  # type: ignore[arg-type]


def test_a_missing_holidays_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "holidays", None)  # import holidays -> ImportError
    calendars_module._holiday_days.cache_clear()
    try:
        with pytest.raises(CalendarError) as info:
            Calendar(holidays="FR")
        assert str(info.value) == (
            "holidays needs the 'holidays' package: pip install 'tickwork[holidays]'"
        )
    finally:
        calendars_module._holiday_days.cache_clear()


def test_the_core_does_not_import_the_holidays_package() -> None:
    code = (
        "import sys, tickwork; tickwork.Calendar(weekdays=['sun']);"
        " print('holidays' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_stored_form_round_trips() -> None:
    cron = Cron(
        "0 9 1 * *",
        "Europe/Berlin",
        calendar=Calendar(
            dates=["2026-12-24..2026-12-31"], weekdays=["sat", "sun"], holidays="DE-BY"
        ),
        shift="next",
    )
    stored = cron.to_dict()
    assert stored["calendar"] == {
        "dates": ["2026-12-24..2026-12-31"],
        "weekdays": ["sat", "sun"],
        "holidays": "DE-BY",
    }
    assert stored["shift"] == "next"
    assert schedule_from_dict(stored) == cron
    assert Cron("0 9 * * *").to_dict() == {"kind": "cron", "expr": "0 9 * * *", "tz": "UTC"}


JOBS = """
[calendar.work]
weekdays = ["sat", "sun"]
holidays = "DE-BY"
dates = ["2026-12-24..2026-12-31"]

[[job]]
name = "first-business-day"
command = ["true"]
cron = "0 9 1 * *"
timezone = "Europe/Berlin"
calendar = "work"
shift = "next"
"""


def test_the_jobs_file_names_a_calendar_table() -> None:
    (job,) = parse_config(JOBS).jobs
    assert isinstance(job.schedule, Cron) and job.schedule.shift == "next"
    assert job.schedule.calendar == Calendar(
        weekdays=["sat", "sun"], holidays="DE-BY", dates=["2026-12-24..2026-12-31"]
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            'calendar = "holiday"',
            "calendar: must name a [calendar.NAME] table (defined: work), got 'holiday'",
        ),
        ('shift = "later"', "shift: must be one of 'skip', 'previous', 'next', got 'later'"),
    ],
)
def test_validate_reports_bad_calendar_keys(tmp_path: Path, extra: str, message: str) -> None:
    text = (
        JOBS.replace('shift = "next"', extra)
        if "shift" in extra
        else JOBS.replace('calendar = "work"', extra)
    )
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert f'job "first-business-day": {message}' in out.stdout + out.stderr


def test_validate_reports_a_bad_calendar_table(tmp_path: Path) -> None:
    bad = JOBS.replace('weekdays = ["sat", "sun"]', 'weekdays = ["sat", "sonntag"]')
    bad += '\n[[job]]\nname = "e"\ncommand = ["true"]\nin = "1m"\ncalendar = "work"\n'
    path = tmp_path / "jobs.toml"
    path.write_text(bad)
    out = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(path)], capture_output=True, text=True
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2
    assert 'calendar "work": weekdays: weekdays must be day names' in text
    assert 'job "e": calendar: applies only to every and cron schedules' in text


def test_tickwork_next_shows_a_jobs_calendar(tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "next",
            "--file",
            str(path),
            "--job",
            "first-business-day",
            "--after",
            "2026-04-15T00:00Z",
            "-n",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert "shift next" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == [
        "2026-05-04T09:00:00+02:00",
        "2026-06-01T09:00:00+02:00",
    ]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "next",
            "0 9 * * *",
            "--holidays",
            "US",
            "--exclude-weekdays",
            "sat,sun",
            "--after",
            "2026-07-01T12:00Z",
            "-n",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [line.split()[0] for line in out.stdout.splitlines()[1:]] == [
        "2026-07-02T09:00:00+00:00",
        "2026-07-06T09:00:00+00:00",  # the 3rd is the observed Independence Day
    ]


def test_the_in_memory_scheduler_follows_the_calendar() -> None:
    from tickwork import Scheduler

    start = datetime(2025, 12, 24, 10, tzinfo=UTC).timestamp()
    clock = FakeClock(wall_start=start)
    s = Scheduler(clock)
    ran: list[str] = []
    cal = Calendar.business_days("GB-ENG")
    s.add(
        Cron("0 9 * * *", calendar=cal),
        lambda: ran.append(datetime.fromtimestamp(clock.wall(), UTC).date().isoformat()),
    )
    for _ in range(10 * 24):
        clock.advance(3600)
        s.run_pending()
    assert ran == ["2025-12-29", "2025-12-30", "2025-12-31", "2026-01-02"]
    with pytest.raises(TypeError, match="calendar must be a tickwork Calendar"):
        Cron("0 9 * * *", calendar={"weekdays": ["sun"]})  # type: ignore[arg-type]
    assert Every(60).to_dict() == {"kind": "every", "seconds": 60.0, "fixed_delay": False}


REC = "tests.durable_jobs:record"


def test_a_durable_calendar_job_persists_and_fires_on_the_right_day(
    open_either_store: Callable[..., Store],
) -> None:
    start = datetime(2025, 12, 24, 0, tzinfo=UTC).timestamp()
    clock = FakeClock(1000.0, wall_start=start)
    durable_jobs.CALLS.clear()
    cal = Calendar.business_days("DE")
    spec = JobSpec("report", REC, Cron("0 9 * * *", calendar=cal, shift="skip"))

    def scheduler() -> tuple[DurableScheduler, ManualExecutor]:
        return manual_scheduler(open_either_store(), clock)

    ds, pool = scheduler()
    ds.declare(spec)
    for _ in range(24):
        clock.advance(3600)
        drain(ds, pool)
    state = ds.get("report")
    assert state is not None and state.next_run == datetime(2025, 12, 29, 9, tzinfo=UTC).timestamp()
    ds.stop()
    ds, pool = scheduler()  # a fresh scheduler on the same state
    state = ds.get("report")
    assert state is not None and state.spec.schedule == spec.schedule
    for _ in range(24 * 6):
        clock.advance(3600)
        drain(ds, pool)
    slots = [
        datetime.fromtimestamp(c[2], UTC).strftime("%m-%d %H") for c in durable_jobs.CALLS if c[2]
    ]
    assert slots == ["12-24 09", "12-29 09", "12-30 09"]
    ds.stop()


def test_the_docs_examples_run() -> None:
    text = (ROOT / "docs" / "cron.md").read_text()
    start = text.index("## Calendars")
    end = text.index("## How this differs from croniter")
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "docs/cron.md", "exec"), {})
    (toml,) = re.findall(r"```toml\n(.*?)```", text[start:end], re.DOTALL)
    (job,) = parse_config(toml).jobs
    assert isinstance(job.schedule, Cron) and job.schedule.shift == "next"


def test_the_schedule_in_words_names_the_calendar() -> None:
    from tickwork._core.text import schedule_words

    cal = Calendar.business_days("DE-BY", dates=["2026-12-24"])
    assert schedule_words(Cron("0 9 1 * *", calendar=cal, shift="next")) == (
        "at 09:00, on day 1 of the month (UTC), not on sat, sun, DE-BY holidays,"
        " 1 excluded date (moved to the next allowed day)"
    )


def test_an_interval_skips_excluded_days_and_stays_on_its_grid() -> None:
    from tickwork import Scheduler

    cal = Calendar.business_days("US")
    every = Every(6 * 3600, calendar=cal, tz="America/New_York")
    friday = datetime(2026, 7, 2, 22, tzinfo=UTC).timestamp()  # Thu 18:00 in New York
    # Friday 3 July is the observed Independence Day, then a weekend: Monday 00:00 local.
    assert every.allowed_slot(friday + 6 * 3600) == datetime(2026, 7, 6, 4, tzinfo=UTC).timestamp()
    assert every.allowed_slot(friday) == friday
    assert schedule_from_dict(every.to_dict()) == every
    with pytest.raises(ValueError, match=r"^tz applies only with a calendar"):
        Every(60, tz="Europe/Berlin")
    clock = FakeClock(wall_start=friday)
    s = Scheduler(clock)
    ran: list[str] = []
    s.add(every, lambda: ran.append(datetime.fromtimestamp(clock.wall(), UTC).isoformat()[:13]))
    for _ in range(4 * 24):
        clock.advance(3600)
        s.run_pending()
    # Friday 00:00 local is the holiday's: the grid goes on on Monday, every 6 hours.
    assert ran == ["2026-07-06T04", "2026-07-06T10", "2026-07-06T16", "2026-07-06T22"]


def test_a_durable_interval_with_a_calendar_persists_and_skips_the_weekend(
    open_either_store: Callable[..., Store],
) -> None:
    friday = datetime(2026, 3, 6, 20, tzinfo=UTC).timestamp()
    clock = FakeClock(1000.0, wall_start=friday)
    durable_jobs.CALLS.clear()
    spec = JobSpec("probe", REC, Every(3 * 3600, calendar=Calendar(weekdays=["sat", "sun"])))

    def scheduler() -> tuple[DurableScheduler, ManualExecutor]:
        return manual_scheduler(open_either_store(), clock)

    ds, pool = scheduler()
    ds.declare(spec)
    ds.stop()
    ds, pool = scheduler()
    state = ds.get("probe")
    assert state is not None and state.spec.schedule == spec.schedule
    for _ in range(3 * 24):
        clock.advance(3600)
        drain(ds, pool)
    slots = [
        datetime.fromtimestamp(c[2], UTC).strftime("%a %H") for c in durable_jobs.CALLS if c[2]
    ]
    assert slots == ["Fri 23", "Mon 02", "Mon 05", "Mon 08", "Mon 11", "Mon 14", "Mon 17", "Mon 20"]
    ds.stop()


def test_backfill_lists_only_the_slots_on_allowed_days() -> None:
    from tickwork._durable.control import _grid
    from tickwork.stores import JobState

    sunday = datetime(2026, 3, 8, tzinfo=UTC).timestamp()
    spec = JobSpec("b", "m:f", Every(86400, calendar=Calendar(weekdays=["sun"])))
    state = JobState(spec=spec, next_run=sunday + 86400, paused=False, last_run=None)
    got = _grid(state, sunday - 3 * 86400, sunday + 86400, 100)
    assert [datetime.fromtimestamp(t, UTC).strftime("%a") for t in got] == [
        "Thu",
        "Fri",
        "Sat",
        "Mon",
    ]
    cron = JobSpec("c", "m:f", Cron("0 0 * * *", calendar=Calendar(weekdays=["sun"])))
    got = _grid(
        JobState(spec=cron, next_run=sunday + 86400, paused=False, last_run=None),
        sunday - 86400,
        sunday + 86400,
        9,
    )
    assert [datetime.fromtimestamp(t, UTC).strftime("%a") for t in got] == ["Sat", "Mon"]


def test_tickwork_next_shows_an_interval_job_with_its_calendar(tmp_path: Path) -> None:
    # Not only cron jobs: an interval job's slots as if declared at --after, its
    # calendar skipping the weekend; a one-shot's single run; a chained job says so.
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[calendar.weekdays]\nweekdays = ["sat", "sun"]\n\n'
        '[[job]]\nname = "pulse"\ncommand = ["true"]\nevery = "6h"\n'
        'calendar = "weekdays"\ntimezone = "Europe/Berlin"\n\n'
        '[[job]]\nname = "new-year"\ncommand = ["true"]\nat = "2027-01-01T00:00:00Z"\n\n'
        '[[job]]\nname = "after-pulse"\ncommand = ["true"]\nafter = ["pulse"]\n'
    )

    def next_of(job: str, *extra: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-m", "tickwork", "next", "--file", str(path), "--job", job, *extra],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.splitlines()

    # Friday 2026-12-04 20:00 Berlin: +6 h is Saturday 02:00, excluded with the whole
    # weekend; the grid carries on on Monday.
    lines = next_of("pulse", "--after", "2026-12-04T20:00:00", "-n", "3")
    assert lines[0] == "# job pulse: every 6 hours  (tz Europe/Berlin)"
    assert [line.split()[0] for line in lines[1:]] == [
        "2026-12-07T02:00:00+01:00",
        "2026-12-07T08:00:00+01:00",
        "2026-12-07T14:00:00+01:00",
    ]
    lines = next_of("new-year", "--after", "2026-12-04T00:00Z")
    assert lines[1:] == ["2027-01-01T00:00:00+00:00  Fri UTC  2027-01-01T00:00:00Z"]
    assert next_of("after-pulse") == [
        "# job after-pulse: no schedule of its own, it runs after pulse"
    ]
