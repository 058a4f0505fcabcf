"""tickwork: delayed and recurring jobs on a deterministic, tick-driven core.

The public surface is re-exported here; everything else lives in private modules.
"""

from __future__ import annotations

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

__version__ = "0.1.0.dev0"

__all__ = [
    "At",
    "Cron",
    "CronError",
    "EventKind",
    "Every",
    "Once",
    "RunEvent",
    "Schedule",
    "Scheduler",
    "TaskInfo",
    "TickworkError",
    "__version__",
    "parse_duration",
]
