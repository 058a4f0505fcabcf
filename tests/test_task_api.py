"""Jobs with arguments and names, `At` with datetimes, and what `tasks()` shows.

Every driver takes ``args`` / ``kwargs`` / ``name``; the arguments are checked against
the job's signature when it is added (not at every run); `tasks()` shows the name, the
schedule value and the next run as an aware datetime.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tickwork import (
    AsyncScheduler,
    At,
    Cron,
    DurableScheduler,
    Every,
    Once,
    Scheduler,
    ThreadScheduler,
)
from tickwork.stores import JobSpec, JobSpecError
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

T0 = datetime(2026, 3, 2, 8, 30, tzinfo=UTC).timestamp()


def greet(who: str, *, punctuation: str = "!") -> str:
    return f"hello {who}{punctuation}"


def test_at_takes_an_aware_datetime_and_mypy_strict_agrees(tmp_path: Path) -> None:
    source = tmp_path / "uses_at.py"
    source.write_text(
        textwrap.dedent(
            """
            from datetime import datetime, timedelta, timezone

            from tickwork import At, Every, Scheduler

            def job(name: str) -> None:
                print(name)

            s = Scheduler()
            s.add(At(datetime.now(timezone.utc) + timedelta(minutes=5)), job, args=["x"])
            s.add(At(1_767_225_600.0), job, kwargs={"name": "y"}, name="second")
            s.add(Every(60, until=datetime(2027, 1, 1, tzinfo=timezone.utc)), job, args=("z",))
            s.schedule(5, job, args=["w"], name="fourth")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert At(moment) == At(moment.timestamp()) and At(moment).when == 1767225600.0
    with pytest.raises(ValueError, match=r"^when must be an aware datetime \(with a time zone\)"):
        At(datetime(2026, 1, 1))


def test_the_core_calls_the_job_with_its_arguments() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    said: list[str] = []
    s.schedule(1, lambda who, mark: said.append(f"{who}{mark}"), args=["a"], kwargs={"mark": "?"})
    s.add(Every(2), lambda who: said.append(who), args=("b",))
    clock.advance(2)
    s.run_pending()
    assert said == ["a?", "b"]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(["a", "b"], None), ([], None), (["a"], {"colour": "red"})],
)
def test_arguments_that_cannot_fit_are_refused_when_added(
    args: list[Any], kwargs: dict[str, Any] | None
) -> None:
    s = Scheduler(FakeClock())
    with pytest.raises(TypeError, match=r"^fn greet cannot be called with args="):
        s.add(Once(1), greet, args=args, kwargs=kwargs)
    with pytest.raises(TypeError, match=r"^fn greet cannot be called with args="):
        s.schedule(1, greet, args=args or ["a", "b", "c"], kwargs=kwargs)
    assert s.tasks() == []  # nothing was added


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"args": "ab"}, r"^args must be a tuple or list, got 'ab'$"),
        ({"kwargs": {1: 2}}, r"^kwargs must be a mapping with str keys or None, got \{1: 2\}$"),
        ({"name": ""}, r"^name must be a non-empty str or None, got ''$"),
        ({"name": 3}, r"^name must be a non-empty str or None, got 3$"),
    ],
)
def test_bad_arguments_name_the_argument(kw: dict[str, Any], message: str) -> None:
    s = Scheduler(FakeClock())
    with pytest.raises(TypeError, match=message):
        s.add(Once(1), greet, **kw)


def test_tasks_show_name_schedule_next_run_and_arguments() -> None:
    clock = FakeClock(wall_start=T0)
    s = Scheduler(clock)
    a = s.schedule(5, greet, args=["a"], name="greeter")
    b = s.schedule(10, greet, 30, args=["b"], fixed_delay=True)
    c = s.add(Cron("0 9 * * *"), greet, kwargs={"who": "c"})
    d = s.schedule(20, print)
    by_id = {t.task_id: t for t in s.tasks()}
    assert by_id[a].name == "greeter" and by_id[a].schedule == Once(5)
    assert by_id[a].next_run == datetime.fromtimestamp(T0 + 5, UTC)
    assert by_id[a].fn is greet and by_id[a].args == ("a",) and dict(by_id[a].kwargs) == {}
    assert by_id[b].name == "greet"
    assert by_id[b].schedule == Every(30, fixed_delay=True, first=10)
    assert by_id[c].schedule == Cron("0 9 * * *") and dict(by_id[c].kwargs) == {"who": "c"}
    assert by_id[c].next_run == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert by_id[d].name == "print" and by_id[d].schedule == Once(20)
    assert all(t.next_run is not None and t.next_run.tzinfo is UTC for t in s.tasks())


def test_the_thread_driver_takes_and_shows_arguments() -> None:
    ran = threading.Event()
    got: list[str] = []

    def job(who: str) -> None:
        got.append(who)
        ran.set()

    ts = ThreadScheduler()
    too_many = r"cannot be called with args=\('x', 'y'\) and kwargs=\{\}: too many"
    with pytest.raises(TypeError, match=too_many):
        ts.add(Once(0), job, args=["x", "y"])
    ts.add(Every(3600, first=3600), job, args=["later"], name="hourly")
    ts.schedule(0, job, args=["now"])
    [info] = [t for t in ts.tasks() if t.name == "hourly"]
    assert info.fn is job and info.args == ("later",) and info.schedule == Every(3600, first=3600)
    ts.start()
    try:
        assert ran.wait(60)
    finally:
        ts.stop()
    assert got == ["now"]


def test_the_asyncio_driver_takes_and_shows_arguments() -> None:
    got: list[str] = []

    async def job(who: str) -> None:
        got.append(who)

    async def main() -> list[str]:
        s = AsyncScheduler()
        missing = r"cannot be called with args=\(\) and kwargs=\{\}: missing a required"
        with pytest.raises(TypeError, match=missing):
            s.add(Once(0), job, args=[])
        s.schedule(0, job, args=["now"], name="soon")
        names = [t.name for t in s.tasks()]
        async with s:
            for _ in range(6000):
                if got:
                    break
                await asyncio.sleep(0.01)
        return names

    assert asyncio.run(main()) == ["soon"]
    assert got == ["now"]


def test_durable_arguments_are_checked_against_the_function(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        ds = DurableScheduler(store)
        with pytest.raises(JobSpecError, match=r"^job 'g': func 'tests.test_task_api:greet'"):
            ds.declare(JobSpec("g", "tests.test_task_api:greet", Every(60), kwargs={"x": 1}))
        assert store.jobs() == []
        ds.declare(JobSpec("g", "tests.test_task_api:greet", Every(60), args=["ok"]))
        assert [j.id for j in store.jobs()] == ["g"]
    finally:
        store.close()
