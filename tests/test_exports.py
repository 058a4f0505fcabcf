"""The public surface is small and pinned: a change here is a deliberate API change."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tickwork


def test_all_is_pinned_and_sorted() -> None:
    assert tickwork.__all__ == [
        "AlertRules",
        "AlertWatch",
        "AsyncDurableScheduler",
        "AsyncScheduler",
        "At",
        "Calendar",
        "CalendarError",
        "Cron",
        "CronError",
        "DurableScheduler",
        "Enqueued",
        "EventKind",
        "Every",
        "Health",
        "JobInterrupted",
        "Once",
        "OneOff",
        "RunEvent",
        "Schedule",
        "Scheduler",
        "TaskInfo",
        "ThreadScheduler",
        "TickworkError",
        "WatchAlert",
        "__version__",
        "parse_duration",
    ]
    assert tickwork.__all__ == sorted(tickwork.__all__, key=lambda n: (n.islower(), n))


def test_every_export_exists_and_is_documented() -> None:
    for name in tickwork.__all__:
        obj = getattr(tickwork, name)
        if name != "__version__":
            assert obj.__doc__, f"{name} has no docstring"


def test_drivers_are_exported_lazily() -> None:
    # Attribute access imports a driver; a bare ``import tickwork`` does not (below).
    from tickwork import AsyncScheduler, ThreadScheduler
    from tickwork._drivers.asyncio import AsyncScheduler as direct_async
    from tickwork._drivers.thread import ThreadScheduler as direct

    assert ThreadScheduler is direct is tickwork.ThreadScheduler
    assert AsyncScheduler is direct_async is tickwork.AsyncScheduler
    with pytest.raises(AttributeError, match=r"^module 'tickwork' has no attribute 'nope'$"):
        tickwork.nope  # noqa: B018


def test_durable_scheduler_is_exported_lazily() -> None:
    from tickwork import DurableScheduler
    from tickwork._durable.scheduler import DurableScheduler as direct

    assert DurableScheduler is direct is tickwork.DurableScheduler


def test_version() -> None:
    assert tickwork.__version__ == "0.1.0.dev0"


def test_core_imports_no_threading_asyncio_or_databases() -> None:
    # A clean interpreter: importing the core must not pull in any driver machinery.
    # What the standard library's zoneinfo imports by itself is not tickwork's doing
    # (on Python 3.13 it loads sysconfig, which loads threading).
    code = (
        "import sys, zoneinfo\n"
        "stdlib = set(sys.modules)\n"
        "import tickwork, tickwork.testing\n"
        "bad = sorted(m for m in ('threading', 'asyncio', 'sqlite3', '_sqlite3', 'psycopg',"
        " 'argparse', 'concurrent.futures') if m in set(sys.modules) - stdlib)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
