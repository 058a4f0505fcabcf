"""tickwork: delayed and recurring jobs on a deterministic, tick-driven core.

The public surface is re-exported here; everything else lives in private modules.
The drivers (`ThreadScheduler`, `AsyncScheduler`, `DurableScheduler`,
`AsyncDurableScheduler`) are imported on
first access, so ``import tickwork`` alone loads no thread or asyncio machinery and no
database driver (the core is pure; see ``tests/test_exports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import CronError as CronError
from ._errors import TickworkError as TickworkError
from ._scheduler import EventKind as EventKind
from ._scheduler import RunEvent as RunEvent
from ._scheduler import Scheduler as Scheduler
from ._scheduler import TaskInfo as TaskInfo
from ._schedules import At as At
from ._schedules import Cron as Cron
from ._schedules import Every as Every
from ._schedules import Once as Once
from ._schedules import Schedule as Schedule
from ._schedules import parse_duration as parse_duration

if TYPE_CHECKING:
    from ._async_durable import AsyncDurableScheduler as AsyncDurableScheduler
    from ._asyncio import AsyncScheduler as AsyncScheduler
    from ._durable import DurableScheduler as DurableScheduler
    from ._durable import Health as Health
    from ._thread import ThreadScheduler as ThreadScheduler

__version__ = "0.1.0.dev0"

__all__ = [
    "AsyncDurableScheduler",
    "AsyncScheduler",
    "At",
    "Cron",
    "CronError",
    "DurableScheduler",
    "EventKind",
    "Every",
    "Health",
    "Once",
    "RunEvent",
    "Schedule",
    "Scheduler",
    "TaskInfo",
    "ThreadScheduler",
    "TickworkError",
    "__version__",
    "parse_duration",
]


# Public names whose modules import threading, asyncio or a database driver.
_LAZY = {
    "AsyncDurableScheduler": "._async_durable",
    "AsyncScheduler": "._asyncio",
    "DurableScheduler": "._durable",
    "Health": "._durable",
    "ThreadScheduler": "._thread",
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
