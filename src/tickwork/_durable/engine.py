"""The durable engine's shared state (`RunTable`), and the records its parts pass around.

`DurableScheduler` holds its parts; none inherits from another, and each is an object
whose constructor names what it depends on:

- `RunTable` (here): the runs held, the counts around them and the locks: the only
  mutable state the parts share, every field documented on the class;
- `Events` (``events``): who hears about runs: listeners, the error list, ``on_error``;
- `Recovery` (``recovery``): what keeps held work and the schedule sound when things
  go wrong: failed store steps and their back-off, wall-clock steps, lease renewals,
  and the decision on a re-offered slot;
- `Functions` and `Running` (``runs``): which job functions may run here, and a
  worker's part: resolve the job's function, record the start, call it, record the
  finish (group-committed), hand a claim back;
- `Claiming` (``claims``): the timing thread's look at the store: claim the due runs
  with a `Claimer` chosen once from what the store can do, and dispatch them;
- `DurableScheduler` (``scheduler``): the public API, the life cycle and the timing
  loop; it builds the parts and wires them together.
"""

from __future__ import annotations

import math
import threading
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from typing import Final

from tickwork._core.errors import JobFailed
from tickwork._durable.decide import Decision
from tickwork.stores import Claim

#: Longest error text recorded in a job's last run.
_MAX_ERROR_TEXT: Final = 2000

#: Default safety poll (seconds) of a store that cannot announce changes.
DEFAULT_POLL: Final = 1.0
#: Default safety poll of a `ChangeNotifier` store: other nodes' changes wake it anyway.
DEFAULT_NOTIFIED_POLL: Final = 10.0
#: Default size of a durable scheduler's pool (and of the daemon's ``--workers``): the
#: most runs in flight at once. Not ``cpus + 4``: durable runs mostly wait (on the store's
#: commits, networks, child processes), the threads start only as runs need them, and a
#: store records a generation of runs per commit, so the pool bounds how many runs share
#: one (docs/durability.md, "How many runs at once").
DEFAULT_WORKERS: Final = 32
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
#: When running jobs said their work ended (`DurableScheduler.record_end`: a
#: `time.monotonic` reading), by claim token; taken by the run's finish as its end.
_ends: dict[str, float] = {}
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


class RunTable:
    """The runs one scheduler holds, the counts around them, and the locks.

    The one piece of mutable state the engine's parts share: claiming adds runs,
    workers start and end them, recovery renews their leases, the public API counts
    them and `DurableScheduler.stop` waits for them. Every field but ``lost_claims``
    is read and written with ``lock`` held, and ``lock`` is never held while a job, a
    listener, the ``on_error`` hook or a store call runs, so all of them may call back
    into the scheduler from any thread.

    Attributes:
        lock: Guards the fields below (re-entrant: a job may call the scheduler).
        cond: On ``lock``: the timing thread sleeps here; notified with ``wake`` set.
        idle: On ``lock``: `DurableScheduler.stop` waits here for the runs to end.
        runs: Claim token -> `_Run`: each slot claimed here, from its claim until its
            finish is committed or its claim is handed back.
        capacity: Workers: how many runs may be in the executor at once (fixed).
        in_job: Runs whose job function is being called.
        ending: Runs done on their worker whose finish is not yet committed (being
            written, or owed while the store fails); they hold no worker, so
            ``len(runs) - ending`` is the workers busy.
        wake: The timing thread should look at the store again at once: a run's end
            made room to claim (stale, and so passed over, once a look has filled
            the pool again), or ``poked``.
        poked: `poke` asked for a look, whether or not there is room to claim.
        heard: `hear` asked for a look: another process announced a change, which a
            scheduler promising to look at every due time may look at instead
            (`Claiming.deferred`). It does not set ``wake``.
        refill: The end of a run that held the last busy worker of a full pool woke
            the timing thread: the look it brings on is coming, so a finish may wait
            for it (`TimingLoop.look_near`), and that wake is never passed over. It
            falls as that look begins (`TimingLoop.run`), once ``looking`` is set.
        stopping: `DurableScheduler.stop` was called: no run starts any more.
        lost_claims: Claims lost to recovery elsewhere since construction (for
            `DurableScheduler.health`); a counter, bumped without the lock.
        next_look: The monotonic time the sleeping timing thread looks next (infinity
            while it is awake or not running); read without the lock by `Recorder`.
        looking: The timing thread is in a look (set and read without the lock).

    """

    __slots__ = (
        "capacity",
        "cond",
        "ending",
        "heard",
        "idle",
        "in_job",
        "lock",
        "looking",
        "lost_claims",
        "next_look",
        "poked",
        "refill",
        "runs",
        "stopping",
        "wake",
    )

    def __init__(self, capacity: int) -> None:
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.idle = threading.Condition(self.lock)
        self.runs: dict[str, _Run] = {}
        self.capacity = capacity
        self.in_job = 0
        self.ending = 0
        self.wake = False
        self.poked = False
        self.heard = False
        self.refill = False
        self.stopping = False
        self.lost_claims = 0
        self.next_look = math.inf
        self.looking = False

    def poke(self) -> None:
        """Make the timing thread look at the store again now."""
        with self.lock:
            self.wake = self.poked = True
            self.cond.notify()

    def hear(self) -> None:
        """Make the timing thread look again: a change another process announced (`heard`)."""
        with self.lock:
            self.heard = True
            self.cond.notify()

    def take_wakes(self) -> tuple[bool, bool]:
        """``(wake, heard)``, both cleared with ``poked`` (lock held): what ended a sleep."""
        wake, heard = self.wake, self.heard
        self.wake = self.poked = self.heard = False
        return wake, heard

    def woken(self) -> bool:
        """Whether the timing thread should look again at once; clears the wake (lock held).

        A wake for room to claim is stale when the pool is full again (the look that
        ran meanwhile filled it): a look now would claim nothing, and the run that
        makes room next wakes the thread anew. Not while finishes may wait for it
        (``refill``): that look records them.
        """
        room = len(self.runs) - self.ending < self.capacity
        wake = self.wake and (self.poked or self.refill or room)
        self.wake = self.poked = False
        return wake

    def hold(self, run: _Run) -> None:
        """Hold a run just claimed (until `forget`)."""
        with self.lock:
            self.runs[run.claim.token] = run

    def started(self, run: _Run) -> None:
        """The run's start is recorded: its job is about to be called."""
        with self.lock:
            run.started = True
            self.in_job += 1

    def done_on_worker(self, run: _Run) -> None:
        """The run's worker is done and free; its finish waits for the next commit."""
        with self.lock:
            if run.claim.token in self.runs and not run.ended:
                # Wake the timing thread only when this end makes room: a full pool kept
                # its last look from claiming. While runs still wait for a worker (a
                # store that claims ahead, `ClaimAhead`), an end makes none: a look
                # then would find the pool full again and claim nothing.
                busy = len(self.runs) - self.ending
                run.ended = True
                self.ending += 1
                if run.started:
                    self.in_job -= 1
                if busy == self.capacity:
                    # Room to claim again: the look this brings on may record the
                    # finishes that end meanwhile, this one's first (`refill`).
                    self.wake = self.refill = True
                    self.cond.notify()

    def forget(self, run: _Run, *, look: bool = True) -> None:
        """The run is over here (finished, handed back or lost): drop it, wake who waits.

        ``look=False``: its recorded end made nothing claimable that the last look did
        not see (`Running` decides), so a run done on its worker (whose free worker
        woke the timing thread already if that mattered) wakes nobody.
        """
        with self.lock:
            if self.runs.pop(run.claim.token, None) is not None:
                if run.ended:
                    self.ending -= 1
                elif run.started:
                    self.in_job -= 1
            if (look or not run.ended) and len(self.runs) - self.ending < self.capacity:
                # Room to claim again (and the job itself may be claimable now).
                self.wake = True
                self.cond.notify()
            if self.stopping:
                self.idle.notify_all()
