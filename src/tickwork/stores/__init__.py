"""Durable jobs: the store contract, its plain-data records, and their errors.

A store keeps durable jobs in a database so they survive the process. This package
holds what every store shares; the stores themselves are separate modules imported
only by the programs that use them (``tickwork.stores.sqlite``,
``tickwork.stores.postgres``), so importing this package loads no database driver.
See ``docs/durability.md`` and ``docs/postgres.md``.
"""

from __future__ import annotations

from tickwork._core.errors import TickworkError as TickworkError
from tickwork.stores._errors import JobNotFoundError as JobNotFoundError
from tickwork.stores._errors import JobPausedError as JobPausedError
from tickwork.stores._errors import JobSpecError as JobSpecError
from tickwork.stores._errors import SchemaVersionError as SchemaVersionError
from tickwork.stores._errors import StoreError as StoreError

from ._model import ACTION_KINDS as ACTION_KINDS
from ._model import DELIVERIES as DELIVERIES
from ._model import KEEP as KEEP
from ._model import MISSED_POLICIES as MISSED_POLICIES
from ._model import ORIGINS as ORIGINS
from ._model import OUTCOMES as OUTCOMES
from ._model import OVERLAP_POLICIES as OVERLAP_POLICIES
from ._model import SPEC_VERSION as SPEC_VERSION
from ._model import ActionKind as ActionKind
from ._model import ActionRecord as ActionRecord
from ._model import Advance as Advance
from ._model import AtSchedule as AtSchedule
from ._model import Claim as Claim
from ._model import CronSchedule as CronSchedule
from ._model import Delivery as Delivery
from ._model import EverySchedule as EverySchedule
from ._model import Finish as Finish
from ._model import GivenUp as GivenUp
from ._model import GiveUp as GiveUp
from ._model import JobSpec as JobSpec
from ._model import JobState as JobState
from ._model import Keep as Keep
from ._model import LastRun as LastRun
from ._model import Missed as Missed
from ._model import Origin as Origin
from ._model import Outcome as Outcome
from ._model import Overlap as Overlap
from ._model import PauseNote as PauseNote
from ._model import Recovered as Recovered
from ._model import Schedule as Schedule
from ._model import SlotRecord as SlotRecord
from ._model import Start as Start
from ._model import StartNow as StartNow
from ._model import Upsert as Upsert
from ._model import resolve_func as resolve_func
from ._model import schedule_from_dict as schedule_from_dict
from ._model import spec_from_json as spec_from_json
from ._model import spec_to_json as spec_to_json
from ._protocol import BatchRecorder as BatchRecorder
from ._protocol import ChangeNotifier as ChangeNotifier
from ._protocol import RuntimeControl as RuntimeControl
from ._protocol import SessionLiveness as SessionLiveness
from ._protocol import SlotLedger as SlotLedger
from ._protocol import Store as Store
from ._protocol import StoreClock as StoreClock

__all__ = [
    "ACTION_KINDS",
    "DELIVERIES",
    "KEEP",
    "MISSED_POLICIES",
    "ORIGINS",
    "OUTCOMES",
    "OVERLAP_POLICIES",
    "SPEC_VERSION",
    "ActionKind",
    "ActionRecord",
    "Advance",
    "AtSchedule",
    "BatchRecorder",
    "ChangeNotifier",
    "Claim",
    "CronSchedule",
    "Delivery",
    "EverySchedule",
    "Finish",
    "GiveUp",
    "GivenUp",
    "JobNotFoundError",
    "JobPausedError",
    "JobSpec",
    "JobSpecError",
    "JobState",
    "Keep",
    "LastRun",
    "Missed",
    "Origin",
    "Outcome",
    "Overlap",
    "PauseNote",
    "Recovered",
    "RuntimeControl",
    "Schedule",
    "SchemaVersionError",
    "SessionLiveness",
    "SlotLedger",
    "SlotRecord",
    "Start",
    "StartNow",
    "Store",
    "StoreClock",
    "StoreError",
    "TickworkError",
    "Upsert",
    "resolve_func",
    "schedule_from_dict",
    "spec_from_json",
    "spec_to_json",
]
