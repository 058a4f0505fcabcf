"""What a store author needs: the protocols a store implements and the records it passes.

A user of durable jobs needs `tickwork.stores` (records, policies, errors, the `Store`
type). Writing a store of your own (another database, a test double) needs this module
too: the optional capabilities a store may offer (`AttemptLedger`, `BatchDeclare`,
`BatchRecorder`,
`CarryingClaim`, `ChangeNotifier`, `ClaimAhead`, `ClaimWakeup`, `JobListing` with its
`JobQuery` and `JobsPage`, `LookCover`, `LookNotices`, `SessionLiveness`, `StoreClock`),
the records that cross `Store.claim_due`, `start` and `finish`, the callback types the
scheduler hands to `claim_due`, and the JSON codec of a `JobSpec`.
``docs/durability.md`` ("Writing another store") walks through it, and
``tests/store_contract.py`` is the suite a new store must pass.

It is also the engine's face: what the durable scheduler, the daemon and the CLI use of
a store beyond a user's part, so no layer above imports a store's private modules:

- the shared SQL core a dialect subclasses (`SQLStore`), the alert episodes an
  `tickwork.AlertWatch` keeps in it (`AlertEpisodes`, `Episode`, `EpisodeState`,
  `JobFacts`), a job's recent failures read from its ledger (`failure_streak`,
  `newest_entries`, `STREAK_DEPTH`), and a page of jobs listed from any store
  (`list_jobs`, its states `JOB_STATES`, `LATE_AFTER`, `MOST_PER_PAGE`);
- the daemons holding a namespace (`NamespaceHolders`) and the process identity that
  tells a live owner from a gone one (`OWNER_ENV`, `proc_stat`, `process_alive`);
- the checks and words of a job's fields that the jobs file and the control verbs
  share with `JobSpec`: ids (`check_job_id`), pools (`MAX_RUNNING`, `check_pool_limit`,
  `check_pool_name`, `pool_name_problem`) and ``after`` edges (`Edges`, `after_arg`,
  `find_cycle`, `cycle_message`, `schedule_and_after`);
- one-offs, the delayed jobs apps enqueue (`OneOffQueue`, `OneOffRow`, `oneoff_rows`,
  `OneOffForm`, `OneOffCounts`, `ONEOFF_MARK`, `is_oneoff`), and their ledger over a time
  window (`OneOffWindow`).
"""

from __future__ import annotations

from tickwork.stores._after import Edges as Edges
from tickwork.stores._after import after_arg as after_arg
from tickwork.stores._after import cycle_message as cycle_message
from tickwork.stores._after import find_cycle as find_cycle
from tickwork.stores._after import schedule_and_after as schedule_and_after
from tickwork.stores._alerts import AlertEpisodes as AlertEpisodes
from tickwork.stores._alerts import Episode as Episode
from tickwork.stores._alerts import EpisodeState as EpisodeState
from tickwork.stores._alerts import JobFacts as JobFacts
from tickwork.stores._carry import CarryingClaim as CarryingClaim
from tickwork.stores._checks import check_job_id as check_job_id
from tickwork.stores._codec import schedule_from_dict as schedule_from_dict
from tickwork.stores._codec import spec_from_json as spec_from_json
from tickwork.stores._codec import spec_to_json as spec_to_json
from tickwork.stores._fields import pool_name_problem as pool_name_problem
from tickwork.stores._fields import resolve_func as resolve_func
from tickwork.stores._holders import NamespaceHolders as NamespaceHolders
from tickwork.stores._jobspec import SPEC_VERSION as SPEC_VERSION
from tickwork.stores._listing import JOB_STATES as JOB_STATES
from tickwork.stores._listing import LATE_AFTER as LATE_AFTER
from tickwork.stores._listing import MOST as MOST_PER_PAGE
from tickwork.stores._listing import JobListing as JobListing
from tickwork.stores._listing import JobQuery as JobQuery
from tickwork.stores._listing import JobsPage as JobsPage
from tickwork.stores._listing import list_jobs as list_jobs
from tickwork.stores._oneoffs import ONEOFF_MARK as ONEOFF_MARK
from tickwork.stores._oneoffs import OneOffCounts as OneOffCounts
from tickwork.stores._oneoffs import OneOffForm as OneOffForm
from tickwork.stores._oneoffs import OneOffQueue as OneOffQueue
from tickwork.stores._oneoffs import OneOffRow as OneOffRow
from tickwork.stores._oneoffs import OneOffWindow as OneOffWindow
from tickwork.stores._oneoffs import created_flags as created_flags
from tickwork.stores._oneoffs import is_oneoff as is_oneoff
from tickwork.stores._oneoffs import oneoff_rows as oneoff_rows
from tickwork.stores._pools import MAX_RUNNING as MAX_RUNNING
from tickwork.stores._pools import check_pool_limit as check_pool_limit
from tickwork.stores._pools import check_pool_name as check_pool_name
from tickwork.stores._procs import OWNER_ENV as OWNER_ENV
from tickwork.stores._procs import proc_stat as proc_stat
from tickwork.stores._procs import process_alive as process_alive
from tickwork.stores._protocol import AttemptLedger as AttemptLedger
from tickwork.stores._protocol import BatchRecorder as BatchRecorder
from tickwork.stores._protocol import ChangeNotifier as ChangeNotifier
from tickwork.stores._protocol import RuntimeControl as RuntimeControl
from tickwork.stores._protocol import SessionLiveness as SessionLiveness
from tickwork.stores._protocol import SlotLedger as SlotLedger
from tickwork.stores._protocol import Store as Store
from tickwork.stores._protocol import StoreClock as StoreClock
from tickwork.stores._records import KEEP as KEEP
from tickwork.stores._records import AdvanceFn as AdvanceFn
from tickwork.stores._records import Claim as Claim
from tickwork.stores._records import Finish as Finish
from tickwork.stores._records import GivenUp as GivenUp
from tickwork.stores._records import GiveUpFn as GiveUpFn
from tickwork.stores._records import Keep as Keep
from tickwork.stores._records import Recovered as Recovered
from tickwork.stores._records import Start as Start
from tickwork.stores._records import StartNowFn as StartNowFn
from tickwork.stores._sql import SQLStore as SQLStore
from tickwork.stores._streak import STREAK_DEPTH as STREAK_DEPTH
from tickwork.stores._streak import failure_streak as failure_streak
from tickwork.stores._streak import newest_entries as newest_entries
from tickwork.stores._upserts import BatchDeclare as BatchDeclare
from tickwork.stores._wakeup import ClaimAhead as ClaimAhead
from tickwork.stores._wakeup import ClaimWakeup as ClaimWakeup
from tickwork.stores._wakeup import LookCover as LookCover
from tickwork.stores._wakeup import LookNotices as LookNotices

__all__ = [
    "JOB_STATES",
    "KEEP",
    "LATE_AFTER",
    "MAX_RUNNING",
    "MOST_PER_PAGE",
    "ONEOFF_MARK",
    "OWNER_ENV",
    "SPEC_VERSION",
    "STREAK_DEPTH",
    "AdvanceFn",
    "AlertEpisodes",
    "AttemptLedger",
    "BatchDeclare",
    "BatchRecorder",
    "CarryingClaim",
    "ChangeNotifier",
    "Claim",
    "ClaimAhead",
    "ClaimWakeup",
    "Edges",
    "Episode",
    "EpisodeState",
    "Finish",
    "GiveUpFn",
    "GivenUp",
    "JobFacts",
    "JobListing",
    "JobQuery",
    "JobsPage",
    "Keep",
    "LookCover",
    "LookNotices",
    "NamespaceHolders",
    "OneOffCounts",
    "OneOffForm",
    "OneOffQueue",
    "OneOffRow",
    "OneOffWindow",
    "Recovered",
    "RuntimeControl",
    "SQLStore",
    "SessionLiveness",
    "SlotLedger",
    "Start",
    "StartNowFn",
    "Store",
    "StoreClock",
    "after_arg",
    "check_job_id",
    "check_pool_limit",
    "check_pool_name",
    "created_flags",
    "cycle_message",
    "failure_streak",
    "find_cycle",
    "is_oneoff",
    "list_jobs",
    "newest_entries",
    "oneoff_rows",
    "pool_name_problem",
    "proc_stat",
    "process_alive",
    "resolve_func",
    "schedule_and_after",
    "schedule_from_dict",
    "spec_from_json",
    "spec_to_json",
]
