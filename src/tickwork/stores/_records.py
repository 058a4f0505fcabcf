"""The records a store keeps and hands out: a job's live state, its claims, its runs.

`JobState` (a stored job), `Claim`, `LastRun`, the calls `Start` and `Finish` that a
batch records, `Recovered`, `GivenUp`, the slot ledger's `SlotRecord`, an operator's
`ActionRecord` and `PauseNote`, the callback types `Store.claim_due` takes, and the
rules every store shares about a claim's end (`recovery_action`, `hands_back`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, Literal, TypeAlias

from tickwork._core.text import iso
from tickwork.stores._jobspec import JobSpec
from tickwork.stores._terms import ActionKind, Origin, Outcome, RecoveryAction

__all__ = [
    "KEEP",
    "ActionRecord",
    "AdvanceFn",
    "Claim",
    "Finish",
    "GiveUpFn",
    "GivenUp",
    "JobState",
    "Keep",
    "LastRun",
    "PauseNote",
    "Recovered",
    "SlotRecord",
    "Start",
    "StartNowFn",
    "Upsert",
    "abandoned_error",
    "hands_back",
    "recovery_action",
]


class Upsert(Enum):
    """What `Store.upsert` did."""

    CREATED = "created"
    """The job was new; it was stored with the given next run."""
    UPDATED = "updated"
    """The declaration changed; a changed schedule took the given next run, other
    changes kept the stored one."""
    UNCHANGED = "unchanged"
    """The same declaration was stored already; nothing changed (next run, last run
    and a pause made at run time are all kept)."""


class Keep(Enum):
    """Type of `KEEP`."""

    KEEP = "keep"
    """Leave the stored next run as it is."""


#: Pass as ``next_run`` to `Store.finish` to leave the job's next run as it is.
KEEP: Final = Keep.KEEP


@dataclass(frozen=True, slots=True)
class LastRun:
    """The most recent run of a job that ended (or was given up).

    Times are UTC POSIX seconds as given by the caller.
    """

    scheduled: float
    """The due time of the run."""
    started: float | None
    """When it started, or ``None`` if it never did (e.g. ``"missed"``)."""
    ended: float | None
    """When it ended, or ``None`` if its runner died (``"abandoned"``)."""
    outcome: Outcome
    """How it went."""
    error: str | None
    """Error text for ``"failed"`` and ``"abandoned"`` (a short traceback summary)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """One run taken by one owner under a lease, as returned by `Store.claim_due`.

    The ``token`` is the claim's identity: `Store.start`, `Store.renew` and
    `Store.finish` only act while the store still holds this token, so a node that
    lost its lease cannot report a run as its own.
    """

    token: str
    """Unguessable identity of this claim."""
    job_id: str
    """The job."""
    owner: str
    """Who claimed it (a stable name per process: host, pid, ...)."""
    scheduled: float
    """The due time being run (the job's next run when it was claimed)."""
    claimed_at: float
    """The ``now`` given to `Store.claim_due`."""
    lease_until: float
    """When the lease expires unless renewed."""
    started: float | None
    """When `Store.start` recorded the run as started, else ``None``."""
    spec: JobSpec
    """The declaration at the time of the claim (what to call, how)."""
    retry: bool = False
    """True if this claim re-offers a slot whose earlier claim expired (see
    `Store.recover_expired`) or was handed back. The store does not decide it again;
    `DurableScheduler` does, by the job's ``missed`` / ``grace`` rules as of the new
    claim (``tickwork._durable.decide.decide_retry``): run, or given up ``"missed"``. In
    `JobState.claims`, a retry nobody has taken yet has ``owner=""``, ``started=None``
    and ``lease_until`` = when it was recovered. A run asked for by an operator
    (``origin`` not ``"schedule"``) waits the same way until it is taken."""
    origin: Origin = "schedule"
    """Why the slot runs: ``"schedule"`` (its grid), ``"manual"`` (`RuntimeControl.trigger`),
    ``"backfill"`` (`RuntimeControl.backfill`) or ``"after"`` (a slot of a job it is
    chained after ended: `JobSpec.after`); the slot ledger records it."""


@dataclass(frozen=True, slots=True)
class JobState:
    """A stored job: its declaration plus everything the store tracks about it."""

    spec: JobSpec
    """The declaration, as last upserted."""
    next_run: float | None
    """Next due time (UTC POSIX seconds), or ``None`` when no run is planned."""
    paused: bool
    """Whether the job is paused now (declared, or set at run time)."""
    last_run: LastRun | None
    """The most recent ended or given-up run, if any."""
    claims: tuple[Claim, ...] = ()
    """Runs currently claimed, and runs waiting for a node to take them (no owner):
    recovered slots to be re-offered (``retry`` set) and the runs operators queued
    (trigger, backfill), oldest slot first. At most one run is held at a time unless
    ``overlap="allow"``."""
    pause: PauseNote | None = None
    """Who paused the job at run time, when, why and until when (``None``: not paused
    at run time; a job declared paused has ``paused`` set and no note)."""
    first_slot: float | None = None
    """The first slot planned for the job when it was first declared (its next run
    then): slots before it are from before the job existed, and a backfill leaves them
    out. Kept across re-declarations and schedule changes. ``None``: not known (a job
    stored before tickwork recorded it, or declared with no slot to plan)."""
    pool_wait: float | None = None
    """The due slot (``next_run``) that waits for its concurrency pool: a claim found
    it due and held it back because the job's pool, or ``max_running``, was full.
    ``None`` when the job's next run has not waited for a slot. When it gets one, it
    is judged by its own lateness against ``grace`` (docs/durability.md, "Concurrency
    pools")."""

    @property
    def id(self) -> str:
        """The job id (``spec.id``)."""
        return self.spec.id

    @property
    def next_run_at(self) -> datetime | None:
        """`next_run` as an aware UTC `datetime` (``None`` when no run is planned).

        Convert it with ``.astimezone(ZoneInfo("Europe/Berlin"))`` to show it in a zone.
        """
        return None if self.next_run is None else datetime.fromtimestamp(self.next_run, UTC)

    @property
    def waiting_runs(self) -> int:
        """Runs waiting for a node to take them: the claims with no owner.

        Runs an operator queued (trigger, backfill) and slots recovered to be run again;
        none has started.
        """
        return sum(1 for c in self.claims if not c.owner)

    @property
    def waiting(self) -> tuple[Claim, ...]:
        """The runs waiting to be taken, oldest slot first: claims with no owner yet.

        Backfilled and triggered runs, and recovered slots re-offered
        (`RuntimeControl.cancel_waiting_runs` cancels them).
        """
        return tuple(c for c in self.claims if not c.owner)


@dataclass(frozen=True, slots=True)
class Start:
    """A `Store.start` call, for `tickwork.stores.BatchRecorder.record`."""

    claim: Claim
    """The claim to record as started."""
    started: float
    """When the run started (UTC POSIX seconds)."""


@dataclass(frozen=True, slots=True)
class Finish:
    """A `Store.finish` call, for `tickwork.stores.BatchRecorder.record`."""

    claim: Claim
    """The claim whose run ended."""
    outcome: Outcome
    """As `Store.finish`'s ``outcome``."""
    ended: float
    """When the run ended (UTC POSIX seconds)."""
    error: str | None = None
    """As `Store.finish`'s ``error``."""
    next_run: float | Keep | None = KEEP
    """As `Store.finish`'s ``next_run``."""
    output: str | None = None
    """The tail of the run's output, for the slot ledger (where the runner kept it)."""
    attempt: int = 1
    """Which attempt of the claim this was (a job's ``retries``: 2 is the first retry)."""
    recorded: bool = False
    """The attempt's ledger entry was written already (`SQLStore.record_attempt`, at a
    thread's time limit): the finish frees the claim and sets the last run only."""
    started: float | None = None
    """When the attempt that ended the run started, if not at the run's start (a retry):
    its ledger entry's start. None: the run's recorded start."""


@dataclass(frozen=True, slots=True)
class Recovered:
    """A claim whose lease had expired, and what recovery did with it."""

    claim: Claim
    """The expired claim (now released)."""
    action: RecoveryAction
    """``"released"``: it had not started, so its slot is re-offered (a retry).
    ``"requeued"``: it had started and the job is at-least-once: re-offered too.
    ``"abandoned"``: it had started and the job is at-most-once: recorded as
    ``"abandoned"`` in the last run and not run again."""


def recovery_action(spec: JobSpec, started: float | None) -> RecoveryAction:
    """What recovering an expired claim on ``spec``'s job does; shared by every store.

    A claim that never started is ``"released"`` and a started run of an
    ``at_least_once`` job ``"requeued"``: both become an unowned retry of the same slot,
    which `Store.claim_due` re-offers without touching the job's next run (later slots
    of an ``overlap="allow"`` job may have been taken meanwhile; rewinding the schedule
    to this slot would run them again). A started run of an ``at_most_once`` job is
    ``"abandoned"``: recorded, never re-offered.
    """
    if started is None:
        return "released"
    return "requeued" if spec.delivery == "at_least_once" else "abandoned"


def hands_back(outcome: Outcome, started: float | None) -> bool:
    """Whether `Store.finish` hands the claim's slot back instead of releasing it.

    A claim finished ``"cancelled"`` that never started (a scheduler stopping before it
    ran) becomes an unowned retry of the same slot, re-offered by `Store.claim_due`
    like a recovered one; the job's next run is not set back for it. Shared by every
    store.
    """
    return outcome == "cancelled" and started is None


def abandoned_error(owner: str, lease_until: float, *, gone: bool = False) -> str:
    """The ``error`` text of a last run recorded ``"abandoned"`` by recovery.

    ``gone``: recovered because the owner's sessions (or process) ended, before its lease.
    """
    if gone:
        return f"owner {owner!r} was gone (no live session or process) before the run ended"
    return f"lease of {owner!r} expired at {iso(lease_until, millis=True)} before the run ended"


@dataclass(frozen=True, slots=True)
class GivenUp:
    """Slots given up together by one claim decision, beyond the claimed slot itself.

    A job found behind (missed-run policy) or overlapping its own run (overlap policy)
    gives up the slots that passed meanwhile in one decision; the claimed slot itself
    ends by `Store.finish` like any other. These others are written to the slot ledger
    by the claim's own transaction, as one entry.
    """

    outcome: Literal["missed", "skipped"]
    """Why: the ``missed`` policy, or the ``overlap`` policy."""
    scheduled: float
    """The first of them (UTC POSIX seconds)."""
    slots: int
    """How many consecutive slots of the schedule, from ``scheduled`` on (counting stops
    at ``tickwork._durable.decide.COUNT_LIMIT``, 10,000)."""


#: The caller's account of what a claim gave up, called by a `tickwork.stores.SlotLedger`
#: store's ``claim_due(..., given_up=)`` as ``given_up(state)`` after ``advance`` for each
#: newly claimed job: the slots to write to the ledger as given up, or ``None``.
GiveUpFn: TypeAlias = Callable[[JobState], GivenUp | None]


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """One entry of the slot ledger: how a slot (or a run of given-up slots) ended.

    Every slot of a durable job ends in exactly one entry: ``"ok"``, ``"failed"``,
    ``"timeout"`` (the job raised a `TimeoutError`: ``tickwork run``'s timeouts do),
    ``"missed"`` (missed-run policy), ``"skipped"`` (overlap policy), ``"abandoned"``
    (its runner was lost) or ``"cancelled"`` (it waited to be taken and an operator
    cancelled it, `RuntimeControl.cancel_waiting_runs`); a slot run again after an
    ``"abandoned"`` attempt (``at_least_once``) has one entry per attempt. Times are UTC
    POSIX seconds.
    """

    seq: int
    """The entry's place in the ledger: larger is later (unique per store)."""
    job_id: str
    """The job."""
    scheduled: float
    """The slot's due time (the first slot, when ``slots`` > 1)."""
    outcome: Outcome
    """How it ended."""
    slots: int = 1
    """Consecutive slots this entry accounts for (> 1 only for given-up or cancelled
    slots)."""
    origin: Origin = "schedule"
    """What caused the slot: ``"schedule"`` (its grid), ``"manual"`` (a trigger, or a
    slot skipped by ``skip-next``), ``"backfill"`` or ``"after"`` (chains: see
    ``cause``)."""
    claimed: float | None = None
    """When it was claimed, if it was."""
    started: float | None = None
    """When the run started, if it did."""
    ended: float | None = None
    """When the run ended or the slot was given up (``None``: its runner was lost)."""
    node: str = ""
    """The owner that claimed it (``host:pid:...``), or ``""``."""
    attempt: int = 1
    """1, or more for a slot re-run after an abandoned attempt."""
    error: str | None = None
    """Error text for ``"failed"`` and ``"abandoned"``; why, for a failed decision."""
    output: str | None = None
    """The tail of the run's output, where the runner kept it."""
    cause: str | None = None
    """For a chained run (origin ``"after"``): the upstream slot whose end queued it,
    ``"<job id>@<its slot, ISO 8601 UTC>"``; else ``None``."""

    @property
    def lateness(self) -> float | None:
        """Seconds from the due time to the start (``None`` if it never started)."""
        return None if self.started is None else self.started - self.scheduled

    @property
    def duration(self) -> float | None:
        """Seconds from the start to the end (``None`` unless both are known)."""
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-ready data: times as ISO 8601 UTC text, plus seconds."""
        out: dict[str, Any] = {
            "seq": self.seq,
            "job": self.job_id,
            "scheduled": iso(self.scheduled, millis=True),
            "outcome": self.outcome,
            "slots": self.slots,
            "origin": self.origin,
        }
        for name in ("claimed", "started", "ended"):
            value = getattr(self, name)
            out[name] = None if value is None else iso(value, millis=True)
        out["lateness_seconds"] = self.lateness
        out["duration_seconds"] = self.duration
        out["node"] = self.node
        out["attempt"] = self.attempt
        out["error"] = self.error
        out["output"] = self.output
        out["cause"] = self.cause
        return out


@dataclass(frozen=True, slots=True)
class PauseNote:
    """A pause made at run time: by whom, when, why, and until when."""

    by: str
    """Who paused the job (``user@host``, or what the caller said)."""
    at: float
    """When (UTC POSIX seconds)."""
    note: str | None = None
    """Why, in the operator's words."""
    until: float | None = None
    """When the pause ends by itself (UTC POSIX seconds), or ``None``: until resumed."""

    def to_json(self) -> str:
        """The note as stored (JSON text)."""
        return json.dumps({"by": self.by, "at": self.at, "note": self.note, "until": self.until})

    @staticmethod
    def from_json(text: str | None) -> PauseNote | None:
        """A stored note, or ``None`` for none (or one this version cannot read)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return PauseNote(
                str(data["by"]),
                float(data["at"]),
                None if data.get("note") is None else str(data["note"]),
                None if data.get("until") is None else float(data["until"]),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: times as ISO 8601 UTC text."""
        return {
            "by": self.by,
            "at": iso(self.at, millis=True),
            "note": self.note,
            "until": None if self.until is None else iso(self.until, millis=True),
        }


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One operator action on a job, as recorded (`RuntimeControl.actions`)."""

    seq: int
    """Its place among the actions: larger is later."""
    job_id: str
    """The job acted on."""
    action: ActionKind
    """``"pause"``, ``"resume"``, ``"trigger"``, ``"backfill"``, ``"skip-next"``,
    ``"cancel"``, or a dead-man alert sent (``"alert"``) or cleared (``"alert-cleared"``),
    recorded by the node that sent it (`tickwork.AlertWatch`)."""
    actor: str
    """Who (``user@host``, ``tickwork`` for a pause that ended by itself)."""
    at: float
    """When (UTC POSIX seconds)."""
    note: str | None = None
    """The operator's note."""
    detail: str | None = None
    """What it did, in words (the slots queued or cancelled, the slot skipped, a pause's
    end)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the time as ISO 8601 UTC text."""
        return {
            "seq": self.seq,
            "job": self.job_id,
            "action": self.action,
            "actor": self.actor,
            "at": iso(self.at, millis=True),
            "note": self.note,
            "detail": self.detail,
        }


AdvanceFn: TypeAlias = Callable[[JobState, float], float | None]

#: The caller's choice of claims to record as started by the claim itself, called by a
#: `tickwork.stores.BatchRecorder` store's ``claim_due(..., start=)`` as ``start(state)``
#: after ``advance`` for each newly claimed job (never for retries): True records the
#: claim started at ``now`` in the same transaction (no separate `Store.start`).
StartNowFn: TypeAlias = Callable[[JobState], bool]
