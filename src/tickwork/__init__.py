"""tickwork: delayed and recurring jobs on a deterministic, tick-driven core.

The public surface is re-exported here; everything else lives in private modules.
The drivers (`ThreadScheduler`, `AsyncScheduler`, `DurableScheduler`,
`AsyncDurableScheduler`) are imported on
first access, so ``import tickwork`` alone loads no thread or asyncio machinery and no
database driver (the core is pure; see ``tests/test_exports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork._core.calendars import Calendar as Calendar
from tickwork._core.calendars import CalendarError as CalendarError
from tickwork._core.errors import CronError as CronError
from tickwork._core.errors import JobInterrupted as JobInterrupted
from tickwork._core.errors import TickworkError as TickworkError
from tickwork._core.events import EventKind as EventKind
from tickwork._core.events import RunEvent as RunEvent
from tickwork._core.scheduler import Scheduler as Scheduler
from tickwork._core.scheduler import TaskInfo as TaskInfo
from tickwork._core.schedules import At as At
from tickwork._core.schedules import Cron as Cron
from tickwork._core.schedules import Every as Every
from tickwork._core.schedules import Once as Once
from tickwork._core.schedules import Schedule as Schedule
from tickwork._core.schedules import parse_duration as parse_duration

if TYPE_CHECKING:
    from tickwork._drivers.asyncio import AsyncScheduler as AsyncScheduler
    from tickwork._drivers.thread import ThreadScheduler as ThreadScheduler
    from tickwork._durable.asyncio import AsyncDurableScheduler as AsyncDurableScheduler
    from tickwork._durable.oneoffs import Enqueued as Enqueued
    from tickwork._durable.oneoffs import OneOff as OneOff
    from tickwork._durable.scheduler import DurableScheduler as DurableScheduler
    from tickwork._durable.scheduler import Health as Health
    from tickwork._durable.watch import AlertRules as AlertRules
    from tickwork._durable.watch import AlertWatch as AlertWatch
    from tickwork._durable.watch import WatchAlert as WatchAlert

from tickwork._core.version import __version__ as __version__

__all__ = [
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


# Public names whose modules import threading, asyncio or a database driver.
_LAZY = {
    "AlertRules": "._durable.watch",
    "AlertWatch": "._durable.watch",
    "WatchAlert": "._durable.watch",
    "AsyncDurableScheduler": "._durable.asyncio",
    "AsyncScheduler": "._drivers.asyncio",
    "DurableScheduler": "._durable.scheduler",
    "Enqueued": "._durable.oneoffs",
    "OneOff": "._durable.oneoffs",
    "Health": "._durable.scheduler",
    "ThreadScheduler": "._drivers.thread",
}


def __getattr__(name: str) -> object:
    """Import the drivers lazily: ``from tickwork import ThreadScheduler`` works as usual."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwork' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
