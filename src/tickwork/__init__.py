"""tickwork: delayed and recurring jobs on a deterministic, tick-driven core.

The public surface is re-exported here; everything else lives in private modules.
"""

from __future__ import annotations

from ._scheduler import EventKind as EventKind
from ._scheduler import RunEvent as RunEvent
from ._scheduler import Scheduler as Scheduler
from ._scheduler import TaskInfo as TaskInfo

__version__ = "0.1.0.dev0"

__all__ = [
    "EventKind",
    "RunEvent",
    "Scheduler",
    "TaskInfo",
    "__version__",
]
