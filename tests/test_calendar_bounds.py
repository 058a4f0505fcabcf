"""What no calendar can hold (issue 26, point 2): refused when written, shown when stored.

New durations are at most 365,000 days and new instants fall in the years 1 to 9999
(UTC): the library's schedules, the jobs file (through ``tickwork validate``) and the
CLI's time options refuse the rest with the usual message (the key or argument, the
rule, the value). A state that already holds such a value (written here straight into
SQLite) still reads: ``tickwork jobs``, ``tickwork history`` and the status page show
it, saying it is out of range, and none of them fails.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.test_daemon_e2e import Run
from tests.test_http import get
from tickwork import At, Cron, Every, Once, Scheduler
from tickwork._core.args import MAX_INSTANT, MAX_SECONDS, MIN_INSTANT
from tickwork._core.schedules import DurationTooLong, parse_duration
from tickwork._core.text import (
    iso,
    iso_due,
    local_and_utc,
    out_of_range,
    relative_time,
    run_duration,
    schedule_words,
    seconds_fixed,
    short_duration,
    utc_time,
)
from tickwork.stores import JobSpec
from tickwork.stores.contract import schedule_from_dict, spec_from_json, spec_to_json
from tickwork.testing import FakeClock

HUGE = 8_640_001_796_399_670.0  # now + "100000000000d", as the issue saw it stored
TOO_LONG = "must be at most 365000 days (about 1000 years)"
OUTSIDE = "must fall in the years 1 to 9999 (UTC)"


def tickwork(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, forked warm (tests/forked.py)."""
    return forked.tickwork(*argv, timeout=120)


# -- the library -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Every(1e300), f"interval {TOO_LONG}, got 1e+300"),
        (lambda: Every(60, first=1e300), f"first {TOO_LONG}, got 1e+300"),
        (lambda: Every(60, jitter=1e300), f"jitter {TOO_LONG}, got 1e+300"),
        (lambda: Every(60, until=1e300), f"until {OUTSIDE}, got 1e+300"),
        (lambda: Cron("* * * * *", jitter=10**20), f"jitter {TOO_LONG}, got {10**20}"),
        (lambda: Cron("* * * * *", until=-1e300), f"until {OUTSIDE}, got -1e+300"),
        (lambda: Once(1e300), f"delay {TOO_LONG}, got 1e+300"),
        (lambda: At(1e300), f"when {OUTSIDE}, got 1e+300"),
        (lambda: At(MAX_INSTANT + 1), f"when {OUTSIDE}, got {MAX_INSTANT + 1!r}"),
        (lambda: At(MIN_INSTANT - 1), f"when {OUTSIDE}, got {MIN_INSTANT - 1!r}"),
    ],
)
def test_schedules_refuse_what_no_calendar_holds(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make()


def test_an_aware_datetime_past_the_year_9999_in_utc_is_refused() -> None:
    # 9999-12-31T23:00 at UTC-5 is 10000-01-01T04:00Z: a datetime, but not in UTC.
    late = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(ValueError, match=r"^when must fall in the years 1 to 9999 \(UTC\)"):
        At(late)


def test_the_bounds_themselves_pass() -> None:
    assert Every(MAX_SECONDS).interval == MAX_SECONDS
    assert At(MAX_INSTANT).when == MAX_INSTANT and At(MIN_INSTANT).when == MIN_INSTANT
    assert iso(MAX_INSTANT) == "9999-12-31T23:59:59Z" and iso(MIN_INSTANT) == "0001-01-01T00:00:00Z"
    with pytest.raises(ValueError, match=re.escape(TOO_LONG)):
        Every(math.nextafter(MAX_SECONDS, math.inf))


def test_the_scheduler_refuses_a_delay_or_interval_too_long() -> None:
    s = Scheduler(FakeClock())
    with pytest.raises(ValueError, match=re.escape(f"delay {TOO_LONG}, got 1e+300")):
        s.schedule(1e300, print)
    with pytest.raises(ValueError, match=re.escape(f"interval {TOO_LONG}, got 1e+300")):
        s.schedule(1.0, print, interval=1e300)
    with pytest.raises(ValueError, match=re.escape(f"delay {TOO_LONG}, got {10**15}")):
        s.schedule(10**15, print)  # an int takes the checked path
    assert s.schedule(MAX_SECONDS, print) == 1


@pytest.mark.parametrize(
    "text", ["100000000000d", "999999999w", "1e308", "1e400", "9" * 400 + "s", "365001d"]
)
def test_parse_duration_refuses_what_is_too_long_and_says_so(text: str) -> None:
    with pytest.raises(DurationTooLong) as caught:
        parse_duration(text)
    assert str(caught.value) == f"duration {TOO_LONG}, got {text!r}"
    assert parse_duration("365000d") == MAX_SECONDS


def test_a_stored_schedule_still_reads_whatever_it_holds() -> None:
    every = schedule_from_dict({"kind": "every", "seconds": HUGE, "until": 1e300})
    assert isinstance(every, Every) and every.interval == HUGE and every.until == 1e300
    at = schedule_from_dict({"kind": "at", "at": -1e300})
    assert isinstance(at, At) and at.when == -1e300
    spec = JobSpec("ns/x", "m:f", Every(60))
    text = spec_to_json(spec).replace('"seconds":60.0', f'"seconds":{HUGE!r}')
    assert spec_from_json(text).schedule == schedule_from_dict({"kind": "every", "seconds": HUGE})
    with pytest.raises(ValueError, match=re.escape(TOO_LONG)):  # the bounds are back after reading
        Every(HUGE)


def test_every_formatter_shows_an_out_of_range_time_the_same_way() -> None:
    words = "out of range: 8.64e+15 s since 1970, after the year 9999"
    assert out_of_range(HUGE) == words
    assert iso(HUGE) == iso(HUGE, millis=True) == iso_due(HUGE) == words
    assert utc_time(HUGE) == local_and_utc(HUGE) == words
    assert iso(-1e300) == "out of range: -1e+300 s since 1970, before the year 1"
    assert iso(math.nan) == "not a time (nan)" and iso(math.inf).startswith("out of range")
    assert relative_time(0.0, HUGE) == ""
    assert run_duration(math.inf) == "infs" and run_duration(1e300) == "1e+300s"
    assert seconds_fixed(0.25, 3) == "0.250" and seconds_fixed(-1e300, 2) == "-1e+300"
    assert short_duration(1e300) == "1e+300 s"
    assert schedule_words(schedule_from_dict({"kind": "at", "at": HUGE})) == f"once, at {words}"


def test_a_time_in_range_in_utc_but_not_in_local_time_shows_in_utc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # 9999-12-31T23:59Z is year 10000 there
    time.tzset()
    try:
        assert local_and_utc(MAX_INSTANT) == "9999-12-31T23:59:59Z"
        assert local_and_utc(0.0) == "1970-01-01T09:00:00+09:00 (1970-01-01T00:00:00Z)"
    finally:
        monkeypatch.undo()
        time.tzset()


# -- the jobs file and the CLI's options -------------------------------------------------


def test_validate_refuses_every_key_too_long_or_out_of_range(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """\
            [defaults]
            grace = "999999999w"

            [[job]]
            name = "a"
            command = ["true"]
            every = "100000000000d"

            [[job]]
            name = "b"
            command = ["true"]
            every = 1e308
            first = "1e308"
            jitter = "400000d"

            [[job]]
            name = "c"
            command = ["true"]
            cron = "* * * * *"
            until = 9999-12-31T23:00:00-05:00
            timeout = "999999999w"
            kill_grace = 1e300
            retry_backoff = "1e400"
            retry_backoff_max = "999999999w"

            [[job]]
            name = "d"
            command = ["true"]
            at = "0001-01-01T00:00:00+01:00"

            [[job]]
            name = "e"
            command = ["true"]
            in = "999999999w"
            """
        )
    )
    done = tickwork("validate", str(jobs))
    assert done.returncode == 2 and done.stdout == ""
    f = str(jobs)
    assert done.stderr.splitlines() == [
        f"{f}:2: defaults: grace: duration {TOO_LONG}, got '999999999w'",
        f"{f}:7: job \"a\": every: duration {TOO_LONG}, got '100000000000d'",
        f'{f}:12: job "b": every: {TOO_LONG}, got 1e+308',
        f"{f}:13: job \"b\": first: duration {TOO_LONG}, got '1e308'",
        f"{f}:14: job \"b\": jitter: duration {TOO_LONG}, got '400000d'",
        f'{f}:20: job "c": until: {OUTSIDE}, got 9999-12-31T23:00:00-05:00',
        f"{f}:21: job \"c\": timeout: duration {TOO_LONG}, got '999999999w'",
        f'{f}:22: job "c": kill_grace: {TOO_LONG}, got 1e+300',
        f"{f}:23: job \"c\": retry_backoff: duration {TOO_LONG}, got '1e400'",
        f"{f}:24: job \"c\": retry_backoff_max: duration {TOO_LONG}, got '999999999w'",
        f'{f}:29: job "d": at: {OUTSIDE}, got 0001-01-01T00:00:00+01:00',
        f"{f}:34: job \"e\": in: duration {TOO_LONG}, got '999999999w'",
        "tickwork validate: 12 problems found",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pause", "x", "--until", "999999999w"], f"argument --until: duration {TOO_LONG}"),
        (["pause", "x", "--until", "9999-12-31T23:00-05:00"], f"argument --until: {OUTSIDE}"),
        (["history", "--since", "1e308"], f"argument --since: duration {TOO_LONG}"),
        (["history", "--since", "0001-01-01T00:00+01:00"], f"argument --since: {OUTSIDE}"),
        (
            ["backfill", "x", "--from", "100000000000d", "--to", "now"],
            f"argument --from: duration {TOO_LONG}",
        ),
        (
            ["backfill", "x", "--from", "1h", "--to", "10000-01-01T00:00Z"],
            "argument --to: must be a duration back from now",
        ),
        (["run", "j.toml", "--lease", "1e308"], f"--lease: duration {TOO_LONG}"),
        (["run", "j.toml", "--for", "999999999w"], f"--for: duration {TOO_LONG}"),
        (["run", "j.toml", "--shutdown-grace", "1e400"], f"--shutdown-grace: duration {TOO_LONG}"),
        (["run", "j.toml", "--poll", "400000d"], f"--poll: duration {TOO_LONG}"),
    ],
)
def test_the_cli_time_options_refuse_what_no_calendar_holds(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    done = tickwork(*argv, "--state", str(tmp_path / "s.sqlite3"))
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


# -- a state that already holds such values ----------------------------------------------


def poison(state: Path) -> None:
    """Write out-of-range values straight into the state, as an older tickwork could."""
    db = sqlite3.connect(state)
    with db:
        (spec,) = db.execute("SELECT spec FROM jobs WHERE id = 'jobs/big'").fetchone()
        data = json.loads(spec)
        data["schedule"]["seconds"] = HUGE
        db.execute(
            "UPDATE jobs SET spec = ?, schedule = ?, next_run = ?, last_scheduled = ?,"
            " last_started = ?, last_ended = ?, last_outcome = 'ok' WHERE id = 'jobs/big'",
            (json.dumps(data), json.dumps(data["schedule"]), HUGE, HUGE, HUGE, 1e300),
        )
        (control,) = db.execute("SELECT control FROM jobs WHERE id = 'jobs/held'").fetchone()
        note = json.loads(control) | {"until": 1e300}
        db.execute(
            "UPDATE jobs SET control = ?, paused_until = ? WHERE id = 'jobs/held'",
            (json.dumps(note), 1e300),
        )
        db.execute(
            "INSERT INTO ledger (job_id, scheduled, outcome, claimed, started, ended, node,"
            " recorded) VALUES ('jobs/big', ?, 'ok', ?, ?, ?, 'web1:1:ab', ?)",
            (HUGE, HUGE, HUGE, 1e300, HUGE),
        )
        db.execute(
            "INSERT INTO actions (job_id, action, actor, at, note, detail)"
            " VALUES ('jobs/big', 'trigger', 'ops@x', ?, NULL, NULL)",
            (-1e300,),
        )
        db.execute(
            "INSERT INTO claims (token, job_id, owner, scheduled, claimed_at, lease_until,"
            " started, origin) VALUES ('t1', 'jobs/big', 'elsewhere:1:ab', ?, ?, ?, ?,"
            " 'schedule')",
            (HUGE, HUGE, 1e300, HUGE),
        )
    db.close()


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[[job]]\nname = "big"\nevery = "1h"\ncommand = ["true"]\n\n'
        '[[job]]\nname = "held"\nevery = "1h"\ncommand = ["true"]\n'
    )
    return path


@pytest.fixture
def state(tmp_path: Path, jobs: Path) -> Path:
    path = tmp_path / "s.sqlite3"
    done = tickwork("run", str(jobs), "--state", str(path), "--for", "0.5s")
    assert done.returncode == 0, done.stderr
    done = tickwork("pause", str(jobs), "held", "--state", str(path), "--until", "1h")
    assert done.returncode == 0, done.stderr
    poison(path)
    return path


WORDS = "out of range: 8.64e+15 s since 1970, after the year 9999"
LATE = "out of range: 1e+300 s since 1970, after the year 9999"


def test_jobs_shows_a_stored_out_of_range_time(jobs: Path, state: Path) -> None:
    done = tickwork("jobs", str(jobs), "--state", str(state))  # the table
    assert done.returncode == 0, done.stderr
    assert WORDS in done.stdout and "8640001796399670" not in done.stdout
    done = tickwork("jobs", str(jobs), "--state", str(state), "--long")
    assert done.returncode == 0, done.stderr
    assert f"next run  {WORDS}" in done.stdout
    assert f"last run  {WORDS}" in done.stdout
    assert f"until {LATE}" in done.stdout  # the pause's end
    assert f"the run due {WORDS}" in done.stdout  # the claim
    assert ", took 1e+300s" in done.stdout  # an absurd length in exponent form
    done = tickwork("jobs", str(jobs), "--state", str(state), "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["job"]: row for row in json.loads(done.stdout)}
    big = rows["big"]
    assert big["next_run"] == big["last_scheduled"] == WORDS and big["last_ended"] == LATE
    assert rows["held"]["pause"]["until"] == LATE
    assert "8640001796399670" not in done.stdout  # never a bare float for a time


def test_history_shows_a_stored_out_of_range_time(jobs: Path, state: Path) -> None:
    done = tickwork("history", str(jobs), "--state", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{WORDS}  big  ok  late 0.000s  took 1e+300s  on web1:1")
    assert "out of range: -1e+300 s since 1970, before the year 1  big  [trigger]" in done.stdout
    done = tickwork("history", str(jobs), "big", "--state", str(state), "--json")
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)[0]
    assert entry["scheduled"] == WORDS and entry["ended"] == LATE


def test_the_status_page_shows_a_stored_out_of_range_time(jobs: Path, tmp_path: Path) -> None:
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state, "--http", "127.0.0.1:0")
    try:
        line = run.wait_line("metrics at http://127.0.0.1:")
        base = line.split("metrics at ", 1)[1].split("/metrics", 1)[0]
        run.wait_line("running 2 jobs")
        done = tickwork("pause", str(jobs), "held", "--state", str(state), "--until", "1h")
        assert done.returncode == 0, done.stderr
        poison(state)
        status, page = get(base + "/")
        assert status == 200, page
        big = page.split('<td class="job">big', 1)[1].split("</tr>", 1)[0]
        assert WORDS in big
        held = page.split('<td class="job">held', 1)[1].split("</tr>", 1)[0]
        assert f"until {LATE}" in held
        assert get(base + "/healthz")[0] == 200
    finally:
        run.kill()
    assert "Traceback" not in run.text()


def test_a_state_from_before_the_bounds_is_not_rewritten(state: Path) -> None:
    """Reading does not change the stored value: it is shown, not clamped."""
    with sqlite3.connect(state) as db:
        (next_run,) = db.execute("SELECT next_run FROM jobs WHERE id = 'jobs/big'").fetchone()
    assert next_run == HUGE
