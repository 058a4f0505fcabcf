"""Stable spreading (issue 27, point 5): Jenkins' ``H`` in cron fields and a stable jitter."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.executors import ManualExecutor, drain, manual_scheduler
from tickwork import Cron, CronError, DurableScheduler, Every, Scheduler
from tickwork._core.cron import CronExpression
from tickwork._core.schedules import jitter_delay
from tickwork._daemon.jobsfile.config import parse_config
from tickwork.stores import JobSpec, Store
from tickwork.stores.contract import schedule_from_dict
from tickwork.testing import FakeClock

from . import durable_jobs

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # a Monday


def minute(seed: str, expr: str = "H * * * *") -> int:
    return CronExpression(expr, seed=seed).next_after(T0).minute


def test_a_thousand_jobs_at_h_spread_over_the_hour() -> None:
    counts = Counter(minute(f"job-{i}") for i in range(1000))
    assert set(counts) == set(range(60))  # every minute is used
    # Roughly uniform: 1000/60 = 16.7 a minute; a chi-square far below the 0.1% bound.
    chi2 = sum((c - 1000 / 60) ** 2 / (1000 / 60) for c in counts.values())
    assert chi2 < 100, counts
    assert max(counts.values()) < 40


def test_the_same_name_gives_the_same_minute_in_a_fresh_process() -> None:
    names = ["backup", "report", "db/vacuum", "ünïcode"]
    here = [minute(n, "H H * * *") for n in names]
    code = (
        "import sys; from datetime import datetime, UTC;"
        " from tickwork._core.cron import CronExpression as C;"
        " t = datetime(2026, 3, 2, tzinfo=UTC);"
        " print([C('H H * * *', seed=n).next_after(t).minute for n in sys.argv[1:]])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *names],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert out.stdout.strip() == repr(here)


def test_the_h_forms() -> None:
    def times(expr: str, seed: str = "nightly", n: int = 4) -> list[str]:
        cron = CronExpression(expr, seed=seed)
        return [f.strftime("%d %H:%M") for f in cron.next_n(T0, n)]

    h = minute("nightly")
    assert times("H * * * *", n=2) == [f"02 00:{h:02}", f"02 01:{h:02}"]
    start = h % 15
    assert times("H/15 * * * *") == [f"02 00:{m:02}" for m in range(start, 60, 15)]
    ranged = CronExpression("H(0-29) * * * *", seed="nightly").next_after(T0).minute
    assert 0 <= ranged <= 29
    every10 = [int(t[-2:]) for t in times("H(0-29)/10 * * * *", n=3)]
    assert every10[0] < 10 and every10 == [every10[0], every10[0] + 10, every10[0] + 20]
    hours = {f.hour for f in CronExpression("0 H(9-17) * * *", seed="x").next_n(T0, 5)}
    assert len(hours) == 1 and 9 <= hours.pop() <= 17
    doms = {CronExpression("0 0 H * *", seed=f"j{i}").next_after(T0).day for i in range(300)}
    assert doms <= set(range(1, 29)) and len(doms) > 20  # 1-28: every month has it
    dows = {CronExpression("0 0 * * H", seed=f"j{i}").next_after(T0).weekday() for i in range(100)}
    assert len(dows) == 7
    # Day and month names with an H in them are not H items.
    assert CronExpression("0 9 * * THU").next_after(T0).strftime("%a") == "Thu"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("H * * * *", "minute: H needs a seed to hash (the job's name): pass seed='name'"),
        ("H(30-10) * * * *", "minute: H(a-b) needs 0 <= a <= b <= 59, got `H(30-10)`"),
        ("0 H(0-24) * * *", "hour: H(a-b) needs 0 <= a <= b <= 23, got `H(0-24)`"),
        ("H/0 * * * *", "minute: the step of H/0 must be from 1 to 60, got `H/0`"),
        ("Hx * * * *", "minute: H must be written H, H/n, H(a-b) or H(a-b)/n, got `Hx`"),
    ],
)
def test_bad_h_is_refused_naming_the_field(expr: str, message: str) -> None:
    seed = None if "needs a seed" in message else "j"
    with pytest.raises(CronError) as info:
        CronExpression(expr, seed=seed)
    assert str(info.value).startswith(message), str(info.value)


def test_stable_jitter_keeps_one_offset_per_name() -> None:
    a = Cron("0 * * * *", jitter=600, stable_jitter=True, seed="a")
    b = Cron("0 * * * *", jitter=600, stable_jitter=True, seed="b")
    draws = {jitter_delay(a, random.Random(i)) for i in range(20)}
    assert len(draws) == 1 and 0 <= draws.pop() < 600
    assert jitter_delay(a) != jitter_delay(b)
    fresh = Cron("0 * * * *", jitter=600)
    assert len({jitter_delay(fresh, random.Random(i)) for i in range(20)}) == 20
    offsets = [
        jitter_delay(Cron("0 * * * *", jitter=3600, stable_jitter=True, seed=f"j{i}"))
        for i in range(1000)
    ]
    assert len({int(o) for o in offsets}) > 700  # a thousand jobs, spread over the hour


def test_the_in_memory_scheduler_seeds_with_the_task_name() -> None:
    clock = FakeClock(wall_start=T0.timestamp())
    s = Scheduler(clock)
    ran: list[float] = []
    s.add(Every(60, jitter=30, stable_jitter=True), lambda: ran.append(clock()), name="probe")
    for _ in range(200):
        clock.advance(1)
        s.run_pending()
    first = ran[0] - 60
    assert [round(t - 60 * (i + 1), 6) for i, t in enumerate(ran)] == [first] * len(ran)
    with pytest.raises(ValueError, match=r"needs a seed \(H in its expression or stable_jitter\)"):
        s.add(Cron("H * * * *"), lambda: None)


def test_stored_and_jobs_file_forms() -> None:
    spec = JobSpec("hourly-sync", "m:f", Cron("H H(0-5) * * *"))
    assert isinstance(spec.schedule, Cron) and spec.schedule.seed == "hourly-sync"
    assert spec.schedule.to_dict()["seed"] == "hourly-sync"
    assert schedule_from_dict(spec.schedule.to_dict()) == spec.schedule
    config = parse_config(
        """
        [[job]]
        name = "sync"
        command = ["true"]
        cron = "H * * * *"

        [[job]]
        name = "probe"
        command = ["true"]
        every = "5m"
        jitter = "1m"
        stable_jitter = true
        """
    )
    sync, probe = config.jobs
    assert isinstance(sync.schedule, Cron) and sync.schedule.seed == "sync"
    assert isinstance(probe.schedule, Every) and probe.schedule.seed == "probe"
    assert probe.schedule.stable_jitter


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("stable_jitter = true", 'job "j": stable_jitter: needs a jitter to keep stable'),
        ('stable_jitter = "yes"', "job \"j\": stable_jitter: must be true or false, got 'yes'"),
        ('seed = ""', "job \"j\": seed: must be a non-empty string, got ''"),
    ],
)
def test_validate_reports_bad_spreading_keys(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(f'[[job]]\nname = "j"\ncommand = ["true"]\ncron = "H * * * *"\n{extra}\n')
    out = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert message in out.stdout + out.stderr


REC = "tests.durable_jobs:record"


def test_a_durable_h_job_persists_and_fires_at_its_minute(
    open_either_store: Callable[..., Store],
) -> None:
    clock = FakeClock(1000.0, wall_start=T0.timestamp())
    durable_jobs.CALLS.clear()
    want = CronExpression("H * * * *", seed="spread-me").next_n(T0, 2)

    def scheduler() -> tuple[DurableScheduler, ManualExecutor]:
        return manual_scheduler(open_either_store(), clock)

    ds, pool = scheduler()
    ds.declare(JobSpec("spread-me", REC, Cron("H * * * *")))
    state = ds.get("spread-me")
    assert state is not None and state.next_run == want[0].timestamp()
    ds.stop()
    ds, pool = scheduler()
    stored = ds.get("spread-me")
    assert stored is not None and isinstance(stored.spec.schedule, Cron)
    assert stored.spec.schedule.seed == "spread-me"
    for _ in range(130):
        clock.advance(60)
        drain(ds, pool)
    assert [c[2] for c in durable_jobs.CALLS] == [w.timestamp() for w in want]
    ds.stop()


def test_the_daemon_declares_h_and_calendar_jobs_seeded_by_name(tmp_path: Path) -> None:
    from tickwork._daemon.daemon import Daemon
    from tickwork._daemon.filejobs import FileJobs
    from tickwork._daemon.runlog import RunLog
    from tickwork._daemon.state import place_of
    from tickwork.stores.sqlite import SQLiteStore

    text = """
        [calendar.weekdays]
        weekdays = ["sat", "sun"]

        [[job]]
        name = "sync"
        command = ["true"]
        cron = "H 9 * * *"
        calendar = "weekdays"
        shift = "next"
    """
    now = datetime(2026, 3, 6, 12, tzinfo=UTC).timestamp()  # a Friday, after 09:xx
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        for expected in ("1 created", "unchanged"):
            scheduler = DurableScheduler(store, wall_clock=lambda: now)
            daemon = Daemon(
                "jobs.toml",
                scheduler,
                place=place_of("jobs.toml", namespace="ns"),
                log=RunLog(sys.stderr),
            )
            jobs = FileJobs("jobs.toml", scheduler, place=daemon.place, dead_man=daemon.dead_man)
            assert expected in jobs.apply(parse_config(text)).summary()
        state = store.get("ns/sync")
        assert state is not None and isinstance(state.spec.schedule, Cron)
        assert state.spec.schedule.seed == "sync"
        m = minute("sync", "H 9 * * *")
        # Saturday's and Sunday's slots move to Monday: one run there, at 09:m.
        assert state.next_run == datetime(2026, 3, 9, 9, m, tzinfo=UTC).timestamp()
