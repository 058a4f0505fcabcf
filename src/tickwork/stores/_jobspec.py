"""`JobSpec`: a durable job as its user declares it, checked field by field.

Its constructor is the one place a job's fields are checked: a declared job, and a
stored one read back by `_codec.spec_from_json`, are refused alike. The checks it shares
with others are in `_fields`; the stored form's version (`SPEC_VERSION`) is here beside
`JobSpec.to_dict`, which writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from operator import is_not
from types import MappingProxyType
from typing import Any, Final, TypeAlias, cast

from tickwork._core.attempts import (
    DEFAULT_KILL_GRACE,
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_RETRY_BACKOFF_MAX,
    AttemptPolicy,
    check_policy,
)
from tickwork._core.schedules import At, Cron, Every, Once
from tickwork._core.vocabulary import MISSED_POLICIES, Isolation, Missed, Overlap, overlap_problem
from tickwork.stores._after import Edges, after_arg, after_to_json
from tickwork.stores._errors import JobSpecError
from tickwork.stores._fields import (
    call_arguments,
    check_func_path,
    finite_number,
    job_id_arg,
    one_of,
    pool_name_problem,
)
from tickwork.stores._terms import DELIVERIES, Delivery

__all__ = ["SPEC_VERSION", "JobSpec", "Schedule"]

#: Version of the JSON encoding of a `JobSpec` (its ``"v"`` field). Bump it, and teach
#: `spec_from_json` to read the old shape, whenever a field changes meaning.
SPEC_VERSION: Final = 2

# The schedule values are the core's own (`tickwork.At`, `Every`, `Cron`, `Once`): one
# vocabulary for in-memory and durable jobs. Each knows its JSON form (``to_dict``).
Schedule: TypeAlias = At | Every | Cron | Once
_SCHEDULE_TYPES: Final = (At, Every, Cron, Once)
#: The attempt policy's defaults, the very objects `JobSpec` holds when they are not
#: given: a spec holding these has no attempt policy to check.
_DEFAULTS: Final = (
    0,
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_RETRY_BACKOFF_MAX,
    None,
    DEFAULT_KILL_GRACE,
    "thread",
)


def _seeded(schedule: object, job_id: str) -> Schedule:
    """``schedule`` checked as a schedule value, its H fields and jitter seeded by the id."""
    if not isinstance(schedule, _SCHEDULE_TYPES):
        raise JobSpecError(f"schedule must be a tickwork At, Every, Cron or Once, got {schedule!r}")
    return cast("Schedule", schedule._seeded(job_id))  # each kind seeds into its own kind


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A durable job as its user declares it: what to run, when, and the policies.

    Construction validates every field and copies the arguments into plain JSON data,
    so a `JobSpec` can always be stored. It does not import ``func``: call
    `resolve_func` for that (the scheduler does, when the job is added).

    Args:
        id: Stable id chosen by the user; upserts are keyed by it.
        func: Import path ``"package.module:function"``.
        schedule: When to run: `tickwork.At`, `Every`, `Cron` or `Once` (a `Once`
            delay counts from when the job is first declared); ``None`` (the default):
            no schedule of its own, the job runs only when triggered (`trigger`) or,
            with ``after``, after other jobs.
        args: Positional arguments, JSON values.
        kwargs: Keyword arguments, JSON values under str keys.
        overlap: A run due while the previous one is going: ``"skip"`` it,
            ``"queue"`` it until the previous ends, or ``"allow"`` both at once.
        missed: Runs missed while nothing ran the schedule: ``"skip"`` them, run
            ``"once"``, or run ``"all"`` of them (up to ``missed_cap``).
        missed_cap: Most missed runs replayed by ``missed="all"``, an int >= 1.
        grace: Seconds a run may start late and still count as on time; ``None``
            for no limit.
        delivery: A run whose runner died after starting it is given up
            (``"at_most_once"``) or run again (``"at_least_once"``).
        paused: Declared paused: no runs until resumed.
        after: Chains: run once each time a slot of one of these jobs ends. Each item
            is a job id (runs when that job's slot ends ``"ok"``) or a mapping
            ``{"job": id, "on": "ok" | "any"}`` (``"any"``: also after ``"failed"``
            and ``"timeout"``); stored as ``((id, on), ...)``. The run is queued in
            the store transaction that records the upstream's end, and its ledger
            entry names that slot (`SlotRecord.cause`). See docs/durability.md,
            "Chains".
        pool: The concurrency pool the job's runs count against (``None``: none), a
            name of 1-100 letters, digits or ``_.@:-``; the pool's limit is the
            state's (see ``docs/durability.md``, "Concurrency pools").
        retries: Further attempts of a run that failed or timed out, an int from 0
            to 100, each recorded in the slot ledger (docs/durability.md, "Retries
            and time limits").
        retry_backoff: Seconds before the first retry, doubled for each further one
            and jittered (a random point of its upper half).
        retry_backoff_max: The cap on the doubled backoff, in seconds.
        timeout: Seconds one attempt may take (``None`` or 0: no limit). At the
            limit the attempt is recorded ``"timeout"``; a coroutine is cancelled,
            a child process (``isolation="process"``) killed; a thread cannot be
            killed and goes on, its slot held until it returns.
        kill_grace: With ``isolation="process"``: seconds between SIGTERM and
            SIGKILL at the limit.
        isolation: ``"thread"`` (called in a worker thread) or ``"process"`` (called
            in a child process that is killed at ``timeout``, its output captured;
            ``func`` must be importable there).

    Raises:
        JobSpecError: A field is invalid; the message names it and shows the value.

    """

    id: str
    func: str
    schedule: Schedule | None = None
    _: KW_ONLY
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    overlap: Overlap = "skip"
    missed: Missed = "skip"
    missed_cap: int = 100
    grace: float | None = None
    delivery: Delivery = "at_most_once"
    paused: bool = False
    after: Edges = ()
    pool: str | None = None
    retries: int = 0
    retry_backoff: float = DEFAULT_RETRY_BACKOFF
    retry_backoff_max: float = DEFAULT_RETRY_BACKOFF_MAX
    timeout: float | None = None
    kill_grace: float = DEFAULT_KILL_GRACE
    isolation: Isolation = "thread"

    def __post_init__(self) -> None:
        put = object.__setattr__
        job_id_arg(self.id)
        check_func_path(self.func)
        if self.schedule is not None:
            put(self, "schedule", _seeded(self.schedule, self.id))
        args, kwargs = call_arguments(self.args, self.kwargs)
        grace = self._run_policies()
        if self.pool is not None and (problem := pool_name_problem("pool", self.pool)):
            raise JobSpecError(problem)
        put(self, "args", args)
        put(self, "kwargs", MappingProxyType(kwargs))
        put(self, "grace", grace)
        if self.after != ():  # chains: the upstream jobs, read into (id, on) pairs
            put(self, "after", after_arg(self.after, self.id))
        fields = (self.retries, self.retry_backoff, self.retry_backoff_max, self.timeout)
        given = (*fields, self.kill_grace, self.isolation)
        if any(map(is_not, given, _DEFAULTS)):
            self._check_attempts()

    def _run_policies(self) -> float | None:
        """Check overlap, missed, missed_cap, grace, delivery and paused; the grace."""
        if (problem := overlap_problem(self.overlap)) is not None:
            raise JobSpecError(problem)
        one_of("missed", self.missed, MISSED_POLICIES)
        cap = self.missed_cap
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise JobSpecError(f"missed_cap must be an int >= 1, got {cap!r}")
        grace = self.grace
        if grace is not None:
            grace = finite_number("grace", grace)
            if grace < 0.0:
                raise JobSpecError(
                    f"grace must be a finite number >= 0 or None, got {self.grace!r}"
                )
        one_of("delivery", self.delivery, DELIVERIES)
        if not isinstance(self.paused, bool):
            raise JobSpecError(f"paused must be a bool, got {self.paused!r}")
        return grace

    def _check_attempts(self) -> None:
        """Check the attempt policy's fields and keep their normal form."""
        policy = check_policy(
            retries=self.retries,
            retry_backoff=self.retry_backoff,
            retry_backoff_max=self.retry_backoff_max,
            timeout=self.timeout,
            kill_grace=self.kill_grace,
            isolation=self.isolation,
            error=JobSpecError,
        )
        for name, value in policy.to_dict().items():
            object.__setattr__(self, name, value)
        if self.timeout is not None and not policy.timeout:
            object.__setattr__(self, "timeout", None)  # 0: no limit

    @property
    def attempt_policy(self) -> AttemptPolicy:
        """The job's retries and time limit (`AttemptPolicy`)."""
        return AttemptPolicy(
            self.retries,
            self.retry_backoff,
            self.retry_backoff_max,
            self.timeout,
            self.kill_grace,
            self.isolation,
        )

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON form, as stored.

        ``"v"`` is 1 for a job with the default attempt policy (the form every
        tickwork reads), `SPEC_VERSION` with an ``"attempts"`` object holding the
        policy's fields that differ from the default (an older tickwork then refuses
        the job with "upgrade tickwork" rather than run it without its time limit).
        ``"pool"`` and ``"after"`` are there only when set: a job without them keeps
        the stored form it always had, and a tickwork that knows no pools refuses to
        run a pooled job rather than run it unlimited.
        """
        attempts = self.attempt_policy.to_dict()
        out: dict[str, Any] = {
            "v": SPEC_VERSION if attempts else 1,
            "id": self.id,
            "func": self.func,
            "schedule": None if self.schedule is None else self.schedule.to_dict(),
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "overlap": self.overlap,
            "missed": self.missed,
            "missed_cap": self.missed_cap,
            "grace": self.grace,
            "delivery": self.delivery,
            "paused": self.paused,
        }
        if self.after:  # only when chained: other specs keep their stored text
            out["after"] = after_to_json(self.after)
        if self.pool is not None:
            out["pool"] = self.pool
        if attempts:
            out["attempts"] = attempts
        return out
