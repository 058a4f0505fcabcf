"""Durable jobs: their records, policies and errors, and the `Store` type they live in.

A store keeps durable jobs in a database so they survive the process. This package
holds what a user of durable jobs needs; the stores themselves are separate modules
imported only by the programs that use them (``tickwork.stores.sqlite``,
``tickwork.stores.postgres``), so importing this package loads no database driver.
What a store *author* needs besides (the optional capabilities, the records of
claiming and finishing, the callback types) is `tickwork.stores.contract`. See
``docs/durability.md`` and ``docs/postgres.md``.
"""

from __future__ import annotations

from typing import Any, Final

from tickwork._core.errors import TickworkError as TickworkError
from tickwork._core.vocabulary import MISSED_POLICIES as MISSED_POLICIES
from tickwork._core.vocabulary import OVERLAP_POLICIES as OVERLAP_POLICIES
from tickwork._core.vocabulary import Missed as Missed
from tickwork._core.vocabulary import Overlap as Overlap
from tickwork.stores._codec import deprecated as _deprecated
from tickwork.stores._errors import JobNotFoundError as JobNotFoundError
from tickwork.stores._errors import JobPausedError as JobPausedError
from tickwork.stores._errors import JobSpecError as JobSpecError
from tickwork.stores._errors import SchemaVersionError as SchemaVersionError
from tickwork.stores._errors import StoreError as StoreError
from tickwork.stores._jobspec import JobSpec as JobSpec
from tickwork.stores._jobspec import Schedule as Schedule
from tickwork.stores._pools import PoolLimits as PoolLimits
from tickwork.stores._pools import PoolState as PoolState
from tickwork.stores._protocol import OutcomeRetention as OutcomeRetention
from tickwork.stores._protocol import RuntimeControl as RuntimeControl
from tickwork.stores._protocol import SlotLedger as SlotLedger
from tickwork.stores._protocol import Store as Store
from tickwork.stores._records import ActionRecord as ActionRecord
from tickwork.stores._records import Claim as Claim
from tickwork.stores._records import JobState as JobState
from tickwork.stores._records import LastRun as LastRun
from tickwork.stores._records import PauseNote as PauseNote
from tickwork.stores._records import SlotRecord as SlotRecord
from tickwork.stores._records import Upsert as Upsert
from tickwork.stores._terms import ACTION_KINDS as ACTION_KINDS
from tickwork.stores._terms import DELIVERIES as DELIVERIES
from tickwork.stores._terms import ORIGINS as ORIGINS
from tickwork.stores._terms import OUTCOMES as OUTCOMES
from tickwork.stores._terms import ActionKind as ActionKind
from tickwork.stores._terms import Delivery as Delivery
from tickwork.stores._terms import Origin as Origin
from tickwork.stores._terms import Outcome as Outcome

__all__ = [
    "ACTION_KINDS",
    "DELIVERIES",
    "MISSED_POLICIES",
    "ORIGINS",
    "OUTCOMES",
    "OVERLAP_POLICIES",
    "ActionKind",
    "ActionRecord",
    "Claim",
    "Delivery",
    "JobNotFoundError",
    "JobPausedError",
    "JobSpec",
    "JobSpecError",
    "JobState",
    "LastRun",
    "Missed",
    "Origin",
    "Outcome",
    "OutcomeRetention",
    "Overlap",
    "PauseNote",
    "PoolLimits",
    "PoolState",
    "RuntimeControl",
    "Schedule",
    "SchemaVersionError",
    "SlotLedger",
    "SlotRecord",
    "Store",
    "StoreError",
    "Upsert",
]

#: Names this package exported before `tickwork.stores.contract` held a store author's
#: part: still importable from here, with a `DeprecationWarning` naming the new home.
_MOVED: Final = frozenset(
    {
        "KEEP",
        "SPEC_VERSION",
        "BatchRecorder",
        "ChangeNotifier",
        "Finish",
        "GivenUp",
        "Keep",
        "Recovered",
        "SessionLiveness",
        "Start",
        "StoreClock",
        "resolve_func",
        "schedule_from_dict",
        "spec_from_json",
        "spec_to_json",
    }
)


def __getattr__(name: str) -> Any:
    """Resolve a moved or deprecated name, with a `DeprecationWarning`."""
    if name in _MOVED:
        import warnings

        from tickwork.stores import contract

        warnings.warn(
            f"tickwork.stores.{name} is a store author's name: import it from"
            f" tickwork.stores.contract",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(contract, name)
    return _deprecated(__name__, name)
