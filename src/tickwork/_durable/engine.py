"""The durable engine's shared state, and the records its parts pass around.

`DurableScheduler` is one object built from four parts, each a class in its own module,
each layer using only the ones below it:

- `_Engine` (here): the state every part reads (the store, the clock, the runs held,
  the locks), the `_Run` record of a claimed slot, and event delivery;
- `_Recovery` (``_durable_recovery``): what keeps held work and the schedule sound when
  things go wrong: failed store steps and their back-off, wall-clock steps, lease
  renewals, and the decision on a re-offered slot;
- `_Running` (``_durable_runs``): a worker's part: resolve the job's function, record
  the start, call it, record the finish (group-committed), hand a claim back;
- `_Claiming` (``_durable_claims``): the timing thread's look at the store: claim the
  due runs (starts folded for idle workers) and dispatch them to the pool;
- `DurableScheduler` (``_durable``): the public API, the life cycle and the timing loop.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import Final

from tickwork._core.errors import JobFailed
from tickwork._core.scheduler import Listener, RunEvent, _deliver
from tickwork._durable.decide import Decision
from tickwork._durable.recorder import Recorder
from tickwork._durable.storetime import StoreTime
from tickwork.stores._model import (
    Claim,
)
from tickwork.stores._protocol import BatchRecorder, ChangeNotifier, SlotLedger, Store

_log = logging.getLogger("tickwork.durable")

#: Longest error text recorded in a job's last run.
_MAX_ERROR_TEXT: Final = 2000

#: Default safety poll (seconds) of a store that cannot announce changes.
DEFAULT_POLL: Final = 1.0
#: Default safety poll of a `ChangeNotifier` store: other nodes' changes wake it anyway.
DEFAULT_NOTIFIED_POLL: Final = 10.0
#: First wait after a failed store call; it doubles per failure, up to ``poll``.
_RETRY_MIN: Final = 0.1
#: Work was due but none of it could be claimed (another node's claim transaction held
#: the rows): look again after this many seconds, doubling per such look, up to
#: `_HELD_MAX`. The holder commits within milliseconds; the safety poll is never waited out.
_HELD_MIN: Final = 0.01
_HELD_MAX: Final = 1.0

DurableErrorHook = Callable[[str, Exception], object]

_current = threading.local()
#: What running jobs gave `DurableScheduler.record_output`, by claim token; taken by
#: the run's finish into the slot ledger.
_outputs: dict[str, str] = {}
#: Characters of a run's output kept for the ledger (the end of it).
OUTPUT_LIMIT = 4000
#: The claim of the coroutine job running in this context (`AsyncDurableScheduler`).
current_async_claim: ContextVar[Claim | None] = ContextVar("tickwork_claim", default=None)


def _error_text(exc: BaseException) -> str:
    """``Type: message`` plus the innermost frames: short enough for a database row.

    A `JobFailed` is its message alone: the job has described its failure already.
    """
    if isinstance(exc, JobFailed):
        return str(exc)[:_MAX_ERROR_TEXT]
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "".join(traceback.format_list(frames))
    head = f"{type(exc).__name__}: {exc}"
    text = head if not where else f"{head}\n{where.rstrip()}"
    return text[:_MAX_ERROR_TEXT]


class _Run:
    """One claimed slot this scheduler holds: its claim and when to renew its lease."""

    __slots__ = ("claim", "decision", "ended", "renew_at", "started")

    def __init__(self, claim: Claim, decision: Decision, renew_at: float) -> None:
        self.claim = claim
        self.decision = decision
        self.renew_at = renew_at
        self.started = False
        self.ended = False  # done on its worker; its finish is waiting to be committed


class _Engine:
    """The state shared by the parts of `DurableScheduler` (set by its ``__init__``)."""

    _store: Store
    _owner: str
    _batch: BatchRecorder | None
    _ledger: SlotLedger | None
    _pruned: float
    _recorder: Recorder | None
    _lease: float
    _notifier: ChangeNotifier | None
    _poll: float
    _mono: Callable[[], float]
    _store_time: StoreTime | None
    _wall: Callable[[], float]
    _offset: float | None
    _vanished: tuple[float, float] | None
    _on_error: DurableErrorHook | None
    _prefixes: tuple[str, ...]
    _declared: set[str]
    _funcs: dict[str, Callable[..., object]]
    _own_executor: bool
    _capacity: int
    _executor: Executor
    _lock: threading.RLock
    _cond: threading.Condition
    _idle: threading.Condition
    _runs: dict[str, _Run]
    _in_job: int
    _ending: int
    _wake: bool
    _thread: threading.Thread | None
    _listener: threading.Thread | None
    _halt: threading.Event
    _stopping: bool
    _failures: int
    _lost_claims: int
    _held: int
    _errors: deque[str]
    _listeners: list[Listener]
    _local: threading.local
    _last_recover: float
    _awaiter: Callable[[Awaitable[object], Claim], object] | None

    def _emit(self, event: RunEvent) -> None:
        listeners = self._listeners
        if listeners:
            _deliver(listeners, event)
