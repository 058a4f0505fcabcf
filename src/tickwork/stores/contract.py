"""What a store author needs: the protocols a store implements and the records it passes.

A user of durable jobs needs `tickwork.stores` (records, policies, errors, the `Store`
type). Writing a store of your own (another database, a test double) needs this module
too: the optional capabilities a store may offer (`BatchRecorder`, `CarryingClaim`,
`ChangeNotifier`, `ClaimAhead`, `ClaimWakeup`, `JobListing` with its `JobQuery` and
`JobsPage`, `LookCover`, `LookNotices`, `SessionLiveness`, `StoreClock`), the records
that cross `Store.claim_due`, `start` and `finish`, the callback types the scheduler
hands to `claim_due`, and the JSON codec of a `JobSpec`.
``docs/durability.md`` ("Writing another store") walks through it, and
``tests/store_contract.py`` is the suite a new store must pass.
"""

from __future__ import annotations

from tickwork.stores._carry import CarryingClaim as CarryingClaim
from tickwork.stores._listing import JOB_STATES as JOB_STATES
from tickwork.stores._listing import JobListing as JobListing
from tickwork.stores._listing import JobQuery as JobQuery
from tickwork.stores._listing import JobsPage as JobsPage
from tickwork.stores._listing import list_jobs as list_jobs
from tickwork.stores._model import KEEP as KEEP
from tickwork.stores._model import SPEC_VERSION as SPEC_VERSION
from tickwork.stores._model import AdvanceFn as AdvanceFn
from tickwork.stores._model import Claim as Claim
from tickwork.stores._model import Finish as Finish
from tickwork.stores._model import GivenUp as GivenUp
from tickwork.stores._model import GiveUpFn as GiveUpFn
from tickwork.stores._model import Keep as Keep
from tickwork.stores._model import Recovered as Recovered
from tickwork.stores._model import Start as Start
from tickwork.stores._model import StartNowFn as StartNowFn
from tickwork.stores._model import resolve_func as resolve_func
from tickwork.stores._model import schedule_from_dict as schedule_from_dict
from tickwork.stores._model import spec_from_json as spec_from_json
from tickwork.stores._model import spec_to_json as spec_to_json
from tickwork.stores._protocol import BatchRecorder as BatchRecorder
from tickwork.stores._protocol import ChangeNotifier as ChangeNotifier
from tickwork.stores._protocol import RuntimeControl as RuntimeControl
from tickwork.stores._protocol import SessionLiveness as SessionLiveness
from tickwork.stores._protocol import SlotLedger as SlotLedger
from tickwork.stores._protocol import Store as Store
from tickwork.stores._protocol import StoreClock as StoreClock
from tickwork.stores._wakeup import ClaimAhead as ClaimAhead
from tickwork.stores._wakeup import ClaimWakeup as ClaimWakeup
from tickwork.stores._wakeup import LookCover as LookCover
from tickwork.stores._wakeup import LookNotices as LookNotices

__all__ = [
    "JOB_STATES",
    "KEEP",
    "SPEC_VERSION",
    "AdvanceFn",
    "BatchRecorder",
    "CarryingClaim",
    "ChangeNotifier",
    "Claim",
    "ClaimAhead",
    "ClaimWakeup",
    "Finish",
    "GiveUpFn",
    "GivenUp",
    "JobListing",
    "JobQuery",
    "JobsPage",
    "Keep",
    "LookCover",
    "LookNotices",
    "Recovered",
    "RuntimeControl",
    "SessionLiveness",
    "SlotLedger",
    "Start",
    "StartNowFn",
    "Store",
    "StoreClock",
    "list_jobs",
    "resolve_func",
    "schedule_from_dict",
    "spec_from_json",
    "spec_to_json",
]
