"""Plain-data records of durable jobs, their validation and their JSON encoding.

Everything a store keeps is built from the values here: schedules, the declared
`JobSpec`, the live `JobState`, claims and last runs. They are frozen, hold only
JSON-compatible data, and encode to versioned JSON text (never pickle: a writable
database must not become code execution).

Nothing here imports a database driver, so a PostgreSQL-only program never loads sqlite3.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from enum import Enum
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from tickwork._core.args import seconds, stored_values
from tickwork._core.attempts import (
    DEFAULT_KILL_GRACE,
    DEFAULT_RETRY_BACKOFF,
    DEFAULT_RETRY_BACKOFF_MAX,
    AttemptPolicy,
    check_policy,
)
from tickwork._core.calendars import Calendar
from tickwork._core.errors import CronError
from tickwork._core.schedules import At, Cron, Every, Once
from tickwork._core.text import iso
from tickwork._core.vocabulary import (
    MISSED_POLICIES,
    OVERLAP_POLICIES,
    Isolation,
    Missed,
    Overlap,
    field_names,
    overlap_problem,
)
from tickwork.stores._after import Edges, after_arg, after_from_json, after_to_json
from tickwork.stores._errors import JobSpecError, SchemaVersionError, StoreError

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
    "AdvanceFn",
    "Claim",
    "Delivery",
    "Finish",
    "GiveUpFn",
    "GivenUp",
    "JobSpec",
    "JobState",
    "Keep",
    "LastRun",
    "Missed",
    "Origin",
    "Outcome",
    "Overlap",
    "PauseNote",
    "Recovered",
    "RecoveryAction",
    "Schedule",
    "SlotRecord",
    "Start",
    "StartNowFn",
    "Upsert",
    "pool_name_problem",
    "resolve_func",
    "schedule_from_dict",
    "spec_from_json",
    "spec_to_json",
]

#: Version of the JSON encoding of a `JobSpec` (its ``"v"`` field). Bump it, and teach
#: `spec_from_json` to read the old shape, whenever a field changes meaning.
SPEC_VERSION: Final = 2

Delivery: TypeAlias = Literal["at_most_once", "at_least_once"]
Outcome: TypeAlias = Literal[
    "ok", "failed", "timeout", "missed", "skipped", "abandoned", "cancelled"
]
#: Why a slot runs (`Claim.origin`, `SlotRecord.origin`).
Origin: TypeAlias = Literal["schedule", "manual", "backfill", "after"]
ORIGINS: Final[tuple[Origin, ...]] = ("schedule", "manual", "backfill", "after")
#: An operator's action on a job (`ActionRecord.action`).
ActionKind: TypeAlias = Literal[
    "pause", "resume", "trigger", "backfill", "skip-next", "cancel", "alert", "alert-cleared"
]
ACTION_KINDS: Final[tuple[ActionKind, ...]] = (
    "pause",
    "resume",
    "trigger",
    "backfill",
    "skip-next",
    "cancel",
    "alert",
    "alert-cleared",
)
#: The longest note kept with an action (longer ones are cut, with a mark).
MAX_NOTE: Final = 500

#: What recovery does with an expired claim (`Recovered.action`, `recovery_action`).
RecoveryAction: TypeAlias = Literal["released", "requeued", "abandoned"]

#: What happens to a run that had started when its runner died (see docs/durability.md).
DELIVERIES: Final[tuple[Delivery, ...]] = ("at_most_once", "at_least_once")
#: Outcomes a finished (or given up) run can record.
OUTCOMES: Final[tuple[Outcome, ...]] = (
    "ok",
    "failed",
    "timeout",
    "missed",
    "skipped",
    "abandoned",
    "cancelled",
)

#: Nesting bound for JSON arguments: deeper values (or cycles) are refused, not recursed.
_MAX_DEPTH: Final = 64
#: Longest job id a store accepts (fits any index, reads well in logs).
_MAX_ID: Final = 200


def _number(name: str, value: object) -> float:
    """``value`` as a finite float; bools and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JobSpecError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise JobSpecError(f"{name} must be a finite number, got {value!r}")
    return number


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise JobSpecError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


# -- schedules -------------------------------------------------------------------------


# The schedule values are the core's own (`tickwork.At`, `Every`, `Cron`, `Once`): one
# vocabulary for in-memory and durable jobs. Each knows its JSON form (``to_dict``).
Schedule: TypeAlias = At | Every | Cron | Once
_SCHEDULE_TYPES: Final = (At, Every, Cron, Once)


def _stored_at(at: float) -> At:
    """The `tickwork.At` of a stored ``{"kind": "at"}`` schedule, with the store's messages.

    Raises:
        JobSpecError: ``at`` is not a finite number.

    """
    return At(_number("schedule.at", at))


def _stored_every(seconds: float, fixed_delay: bool = False) -> Every:
    """The `tickwork.Every` of a stored ``{"kind": "every"}`` schedule, with the store's messages.

    Raises:
        JobSpecError: ``seconds`` is not a finite number > 0, or ``fixed_delay`` not a bool.

    """
    number = _number("schedule.seconds", seconds)
    if number <= 0.0:
        raise JobSpecError(f"schedule.seconds must be a finite number > 0, got {seconds!r}")
    if not isinstance(fixed_delay, bool):
        raise JobSpecError(f"schedule.fixed_delay must be a bool, got {fixed_delay!r}")
    return Every(number, fixed_delay=fixed_delay)


def _stored_cron(expr: str, tz: str = "UTC") -> Cron:
    """The `tickwork.Cron` of a stored ``{"kind": "cron"}`` schedule, with the store's messages.

    Raises:
        JobSpecError: ``expr`` or ``tz`` is not a non-empty string.
        CronError: The expression or the zone is invalid here.

    """
    if not isinstance(expr, str) or not expr.strip():
        raise JobSpecError(f"schedule.expr must be a non-empty string, got {expr!r}")
    if not isinstance(tz, str) or not tz or tz != tz.strip():
        raise JobSpecError(
            f"schedule.tz must be a time zone name without spaces around it, got {tz!r}"
        )
    return Cron(expr, tz)


_KINDS: Final[dict[str, tuple[Callable[..., Schedule], dict[str, str], tuple[str, ...]]]] = {
    # kind: (constructor, {stored key: argument}, required keys); the names come from
    # the one table of field names (tickwork._core.vocabulary.FIELDS)
    kind: (make, field_names(kind, source="stored", target="python"), (required,))
    for kind, make, required in (
        ("at", At, "at"),
        ("once", Once, "delay"),
        ("every", Every, "seconds"),
        ("cron", Cron, "expr"),
    )
}


def schedule_from_dict(data: object) -> Schedule:
    """Build a schedule from its JSON form (the inverse of ``schedule.to_dict()``).

    Reads every form stored so far: the keys of a kind that a schedule leaves at their
    defaults are simply absent. A duration or instant beyond what a calendar can hold
    (which a new schedule refuses) still reads, so that a state written before that
    rule, or by hand, can be shown and fixed.

    Args:
        data: A dict with a ``"kind"`` of ``"at"``, ``"once"``, ``"every"`` or
            ``"cron"`` and that kind's fields.

    Returns:
        The schedule value.

    Raises:
        JobSpecError: Not a dict, unknown kind, missing or unknown keys, or bad values
            (a cron expression or zone this host cannot read included).

    """
    with stored_values():
        return _schedule_from_dict(data)


def _schedule_from_dict(data: object) -> Schedule:
    if not isinstance(data, Mapping):
        raise JobSpecError(f"schedule must be a dict with a 'kind', got {data!r}")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise JobSpecError(
            f"schedule.kind must be one of 'at', 'once', 'every', 'cron', got {kind!r}"
        )
    make, keys, required = _KINDS[kind]
    missing = [k for k in required if k not in data]
    if missing:
        raise JobSpecError(f"schedule of kind {kind!r} needs {missing[0]!r}, got {dict(data)!r}")
    if len(data) > 1 + len(required):  # optional or unknown keys: look closer
        unknown = sorted(str(k) for k in data if k != "kind" and k not in keys)
        if unknown:
            raise JobSpecError(f"schedule of kind {kind!r} has unknown key {unknown[0]!r}")
    # The fields every tickwork has stored are checked with their own messages first.
    if kind == "at":
        return _stored_at(data["at"])
    base: Schedule
    if kind == "every":
        base = _stored_every(data["seconds"], data.get("fixed_delay", False))
    elif kind == "cron":
        try:
            base = _stored_cron(data["expr"], data.get("tz", "UTC"))
        except CronError as exc:
            raise JobSpecError(f"schedule: {exc}") from exc
    else:
        try:
            base = Once(_number("schedule.delay", data["delay"]))
        except ValueError as exc:
            raise JobSpecError(f"schedule.{exc}") from exc
    if len(data) <= 1 + len(required):
        return base
    values = {arg: data[key] for key, arg in keys.items() if key in data}
    try:
        if "calendar" in values:
            values["calendar"] = Calendar.from_dict(values["calendar"])
        return make(**values)
    except (TypeError, ValueError) as exc:  # CronError is a ValueError
        raise JobSpecError(f"schedule.{exc}") from exc


# -- validation helpers ----------------------------------------------------------------


def _json_copy(value: object, where: str, depth: int = 0) -> Any:
    """A deep copy of ``value`` made of JSON types only (tuples become lists).

    Refuses anything `json` would reject or silently change: NaN and infinities, non-str
    dict keys (json turns ``1`` into ``"1"``), sets, bytes, objects.
    """
    if depth > _MAX_DEPTH:
        raise JobSpecError(f"{where} is nested deeper than {_MAX_DEPTH} levels (or is a cycle)")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JobSpecError(f"{where} must be JSON-serialisable, got {value!r}")
        return float(value)
    if isinstance(value, list | tuple):
        return [_json_copy(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise JobSpecError(f"{where} must have str keys to be JSON, got key {k!r}")
            out[k] = _json_copy(v, f"{where}[{k!r}]", depth + 1)
        return out
    raise JobSpecError(
        f"{where} must be JSON-serialisable (None, bool, int, float, str, list, dict),"
        f" got {value!r} of type {type(value).__name__}"
    )


def call_arguments(args: object, kwargs: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A job's ``args`` and ``kwargs`` checked and copied as JSON values (`JobSpec`'s)."""
    if not isinstance(args, list | tuple):
        raise JobSpecError(f"args must be a list or tuple, got {args!r}")
    if not isinstance(kwargs, Mapping):
        raise JobSpecError(f"kwargs must be a dict, got {kwargs!r}")
    copied: dict[str, Any] = {}
    for k, v in kwargs.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise JobSpecError(f"kwargs keys must be identifiers, got {k!r}")
        copied[k] = _json_copy(v, f"kwargs[{k!r}]")
    return tuple(_json_copy(a, f"args[{i}]") for i, a in enumerate(args)), copied


#: Import paths already found well-formed (many jobs share a few functions; a spec is
#: checked again each time a store reads it). Bounded: cleared when full.
_GOOD_PATHS: Final[set[str]] = set()


def _check_func_path(path: object) -> tuple[str, list[str]]:
    """Split ``"package.module:qualname"`` into the module and the attribute chain."""
    rule = "func must be an import path 'package.module:function'"
    if not isinstance(path, str):
        raise JobSpecError(f"{rule}, got {path!r}")
    module, sep, qualname = path.partition(":")
    parts = qualname.split(".")
    if path in _GOOD_PATHS:
        return module, parts
    if (
        not sep
        or not all(p.isidentifier() for p in module.split("."))
        or not all(p.isidentifier() for p in parts)
    ):
        raise JobSpecError(f"{rule}, got {path!r}")
    if len(_GOOD_PATHS) >= 4096:
        _GOOD_PATHS.clear()
    _GOOD_PATHS.add(path)
    return module, parts


def resolve_func(path: str) -> Callable[..., object]:
    """Import ``"package.module:function"`` and return the callable it names.

    The scheduler calls this when a job is added (so a typo fails there, changing
    nothing) and again before each run. Stores never import anything.

    Args:
        path: ``module:qualname``; the qualname may be dotted (``mod:Class.method``).

    Returns:
        The callable.

    Raises:
        JobSpecError: Bad syntax, the module does not import, the attribute is missing,
            or it is not callable. The message names the path and why.

    """
    module_name, parts = _check_func_path(path)
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # an import can raise anything; the message says what
        raise JobSpecError(
            f"func {path!r} cannot be imported: {type(exc).__name__}: {exc}"
        ) from exc
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            owner = module_name if i == 0 else f"{module_name}:{'.'.join(parts[:i])}"
            raise JobSpecError(
                f"func {path!r} cannot be resolved: {owner} has no {part!r}"
            ) from exc
    if not callable(obj):
        raise JobSpecError(f"func {path!r} must name a callable, got {obj!r}")
    return obj


#: A concurrency pool's name: as a jobs file's job name.
_POOL_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,99}")


def pool_name_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` as a pool's name (``name``: the argument), or None."""
    if isinstance(value, str) and _POOL_NAME.fullmatch(value):
        return None
    return (
        f"{name} must be a pool name of 1-100 letters, digits or '_.@:-', starting with a"
        f" letter or digit, got {value!r}"
    )


def _job_id(value: object, name: str = "id") -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_ID or not value.isprintable():
        raise JobSpecError(
            f"{name} must be a non-empty printable string of at most {_MAX_ID} characters,"
            f" got {value!r}"
        )
    return value


# -- the declared job ------------------------------------------------------------------


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
        _job_id(self.id)
        _check_func_path(self.func)
        if self.schedule is not None and not isinstance(self.schedule, _SCHEDULE_TYPES):
            raise JobSpecError(
                f"schedule must be a tickwork At, Every, Cron or Once, got {self.schedule!r}"
            )
        # H fields and a stable jitter hash the job's id unless the schedule has a seed.
        if self.schedule is not None:
            object.__setattr__(self, "schedule", self.schedule._seeded(self.id))
        args, kwargs = call_arguments(self.args, self.kwargs)
        if (problem := overlap_problem(self.overlap)) is not None:
            raise JobSpecError(problem)
        _choice("missed", self.missed, MISSED_POLICIES)
        if isinstance(self.missed_cap, bool) or not isinstance(self.missed_cap, int):
            raise JobSpecError(f"missed_cap must be an int >= 1, got {self.missed_cap!r}")
        if self.missed_cap < 1:
            raise JobSpecError(f"missed_cap must be an int >= 1, got {self.missed_cap!r}")
        grace = self.grace
        if grace is not None:
            grace = _number("grace", grace)
            if grace < 0.0:
                raise JobSpecError(
                    f"grace must be a finite number >= 0 or None, got {self.grace!r}"
                )
        _choice("delivery", self.delivery, DELIVERIES)
        if not isinstance(self.paused, bool):
            raise JobSpecError(f"paused must be a bool, got {self.paused!r}")
        if self.pool is not None and (problem := pool_name_problem("pool", self.pool)):
            raise JobSpecError(problem)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", MappingProxyType(kwargs))
        object.__setattr__(self, "grace", grace)
        if self.after != ():  # chains: the upstream jobs, read into (id, on) pairs
            object.__setattr__(self, "after", after_arg(self.after, self.id))
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
        return hash(spec_to_json(self))

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


_SPEC_KEYS: Final = frozenset(JobSpec("x", "m:f", At(0.0)).to_dict())


def spec_to_json(spec: JobSpec) -> str:
    """Encode a spec as canonical JSON text (sorted keys, no spaces), the stored form.

    Two equal specs encode to the same text, so stores compare declarations by it.
    """
    return json.dumps(
        spec.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def schedule_json(spec: JobSpec) -> str:
    """The stored ``schedule`` column: the schedule's JSON (chains: ``null`` for none)."""
    plan = None if spec.schedule is None else spec.schedule.to_dict()
    return json.dumps(plan, sort_keys=True, separators=(",", ":"))


def spec_from_json(text: str | bytes) -> JobSpec:
    """Decode a spec stored by `spec_to_json` (any version this tickwork knows).

    Args:
        text: The stored JSON text.

    Returns:
        The spec.

    Raises:
        SchemaVersionError: It was written by a newer tickwork (``"v"`` too high).
        StoreError: It is not a valid encoded spec; the message says what is wrong.

    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StoreError(f"stored job spec is not valid JSON: {exc}: {text!r:.200}") from exc
    if not isinstance(data, dict):
        raise StoreError(f"stored job spec must be a JSON object, got {text!r:.200}")
    version = data.get("v")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise StoreError(f"stored job spec has no valid 'v' version field, got {version!r}")
    if version > SPEC_VERSION:
        raise SchemaVersionError(
            f"stored job spec {data.get('id')!r} has version {version}; this tickwork reads"
            f" up to {SPEC_VERSION}: upgrade tickwork"
        )
    # Version 2 added the optional "attempts" object (retries and time limits).
    attempts = data.pop("attempts", {}) if version >= 2 else {}
    after = data.pop("after", ())  # optional (chains): absent unless declared
    # "pool" is optional too: absent unless the job is in a concurrency pool.
    if set(data) - {"pool"} != _SPEC_KEYS or not isinstance(attempts, dict):
        raise StoreError(
            f"stored job spec {data.get('id')!r} has keys {sorted(data)}, expected"
            f" {sorted(_SPEC_KEYS)}"
        )
    spec = None if attempts or after else _plain_spec(data)
    if spec is not None:
        return spec
    try:
        return JobSpec(
            data["id"],
            data["func"],
            None if data["schedule"] is None else schedule_from_dict(data["schedule"]),
            args=data["args"],
            kwargs=data["kwargs"],
            overlap=data["overlap"],
            missed=data["missed"],
            missed_cap=data["missed_cap"],
            grace=data["grace"],
            delivery=data["delivery"],
            paused=data["paused"],
            after=after_from_json(after, data["id"]) if after else (),
            pool=data.get("pool"),
            **attempts,
        )
    except (JobSpecError, TypeError) as exc:  # TypeError: an unknown attempts key
        raise StoreError(f"stored job spec {data.get('id')!r} is invalid: {exc}") from exc


def _plain_spec(data: dict[str, Any]) -> JobSpec | None:
    """The spec of decoded ``data`` built without `JobSpec`'s constructor, or ``None``.

    Stores decode a spec at every claim, and a one-shot's text is never seen twice, so
    this is on the path of every durable run. It makes the same checks as the
    constructor (and `schedule_from_dict`) on the values `json` yields, only cheaper:
    exact types instead of ABCs, the spec written field by field. Anything it does not
    recognise at once (another schedule kind, a value that needs converting or is
    invalid) gives ``None``, and `spec_from_json` takes the full path, which builds the
    same spec or raises with its message. ``data`` has exactly the spec's keys.
    """
    schedule = data["schedule"]
    if type(schedule) is not dict or len(schedule) != 2 or schedule.get("kind") != "at":
        return None
    if "pool" in data:  # the full path checks the pool's name
        return None
    at = schedule.get("at")
    if type(at) is not float or not math.isfinite(at):
        return None
    job_id, func = data["id"], data["func"]
    if (
        type(job_id) is not str
        or not job_id
        or len(job_id) > _MAX_ID
        or not job_id.isprintable()
        or type(func) is not str
        or func not in _GOOD_PATHS  # well-formed paths only (checked before)
        or data["overlap"] not in OVERLAP_POLICIES
        or data["missed"] not in MISSED_POLICIES
        or data["delivery"] not in DELIVERIES
        or type(data["missed_cap"]) is not int
        or data["missed_cap"] < 1
        or type(data["paused"]) is not bool
    ):
        return None
    args, kwargs, grace = data["args"], data["kwargs"], data["grace"]
    if type(args) is not list or type(kwargs) is not dict:
        return None
    if grace is not None and (type(grace) is not float or not 0.0 <= grace < math.inf):
        return None
    try:
        args = [_json_copy(a, f"args[{i}]") for i, a in enumerate(args)] if args else ()
        for k in kwargs:
            if not k.isidentifier():  # json keys are always str
                return None
        kwargs = {k: _json_copy(v, f"kwargs[{k!r}]") for k, v in kwargs.items()}
    except JobSpecError:
        return None
    when = object.__new__(At)
    put = object.__setattr__
    put(when, "when", at)
    spec = object.__new__(JobSpec)
    put(spec, "id", job_id)
    put(spec, "func", func)
    put(spec, "schedule", when)
    put(spec, "args", tuple(args))
    put(spec, "kwargs", MappingProxyType(kwargs))
    put(spec, "overlap", data["overlap"])
    put(spec, "missed", data["missed"])
    put(spec, "missed_cap", data["missed_cap"])
    put(spec, "grace", grace)
    put(spec, "delivery", data["delivery"])
    put(spec, "paused", data["paused"])
    put(spec, "after", ())
    put(spec, "pool", None)
    for name, value in _PLAIN_POLICY.items():
        put(spec, name, value)
    return spec


#: The default attempt policy's fields, set on a spec `_plain_spec` builds.
_PLAIN_POLICY: Final = {
    "retries": 0,
    "retry_backoff": DEFAULT_RETRY_BACKOFF,
    "retry_backoff_max": DEFAULT_RETRY_BACKOFF_MAX,
    "timeout": None,
    "kill_grace": DEFAULT_KILL_GRACE,
    "isolation": "thread",
}


# -- live state ------------------------------------------------------------------------


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


def check_start(value: object) -> Start:
    """A `Start` with a held claim and a valid time, else `TypeError` / `ValueError`."""
    if not isinstance(value, Start):
        raise TypeError(f"starts must hold Start values, got {value!r}")
    check_claim(value.claim)
    check_time("started", value.started)
    return value


def check_finish(value: object) -> Finish:
    """A `Finish` whose fields `Store.finish` would accept, else `TypeError` / `ValueError`."""
    if not isinstance(value, Finish):
        raise TypeError(f"finishes must hold Finish values, got {value!r}")
    check_claim(value.claim)
    check_outcome(value.outcome)
    check_time("ended", value.ended)
    if value.error is not None and not isinstance(value.error, str):
        raise TypeError(f"error must be a str or None, got {value.error!r}")
    if value.next_run is not KEEP:
        check_optional_time("next_run", value.next_run)
    if value.output is not None and not isinstance(value.output, str):
        raise TypeError(f"output must be a str or None, got {value.output!r}")
    if isinstance(value.attempt, bool) or not isinstance(value.attempt, int) or value.attempt < 1:
        raise ValueError(f"attempt must be an int >= 1, got {value.attempt!r}")
    if value.started is not None:
        check_time("started", value.started)
    return value


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


def check_actor(value: object) -> str:
    """An actor: non-empty text without control characters, else `TypeError` / `ValueError`."""
    if not isinstance(value, str):
        raise TypeError(f"by must be a str (who acts, e.g. 'ops@host'), got {value!r}")
    if not value.strip() or len(value) > 200 or any(ord(c) < 32 for c in value):
        raise ValueError(
            f"by must be 1 to 200 printable characters (who acts, e.g. 'ops@host'), got {value!r}"
        )
    return value


def check_note(value: object) -> str | None:
    """A note: text (cut to `MAX_NOTE` characters) or ``None``, else `TypeError`."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"note must be a str or None, got {value!r}")
    value = value.strip()
    if not value:
        return None
    return value if len(value) <= MAX_NOTE else value[: MAX_NOTE - 1] + "\u2026"


#: The caller's policy, called by `Store.claim_due` inside its transaction as
#: ``advance(state, now)`` for every job it claims; returns the job's new next run
#: (``None``: no further run planned, e.g. a one-shot).
AdvanceFn: TypeAlias = Callable[[JobState, float], float | None]

#: The caller's choice of claims to record as started by the claim itself, called by a
#: `tickwork.stores.BatchRecorder` store's ``claim_due(..., start=)`` as ``start(state)``
#: after ``advance`` for each newly claimed job (never for retries): True records the
#: claim started at ``now`` in the same transaction (no separate `Store.start`).
StartNowFn: TypeAlias = Callable[[JobState], bool]


# -- argument checks shared by the store implementations --------------------------------


def check_time(name: str, value: object) -> float:
    """``value`` as a finite float (seconds), else `ValueError`/`TypeError` naming it."""
    return seconds(name, value)


def check_optional_time(name: str, value: object) -> float | None:
    """Like `check_time`, but ``None`` passes."""
    return None if value is None else check_time(name, value)


def check_positive(name: str, value: object) -> float:
    """A finite number of seconds > 0."""
    return seconds(name, value, bound="> 0")


def check_job_id(value: object) -> str:
    """A valid job id, else `ValueError` naming ``job_id``."""
    try:
        return _job_id(value, "job_id")
    except JobSpecError as exc:
        raise ValueError(str(exc)) from None


def check_owner(value: object) -> str:
    """A non-empty owner name."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"owner must be a non-empty string, got {value!r}")
    return value


def check_limit(value: object) -> int:
    """A claim batch size, an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"limit must be an int >= 1, got {value!r}")
    return value


def check_outcome(value: object) -> Outcome:
    """One of `OUTCOMES`."""
    if not isinstance(value, str) or value not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(map(repr, OUTCOMES))}, got {value!r}")
    return value


def check_spec(value: object) -> JobSpec:
    """A `JobSpec`, else `TypeError`."""
    if not isinstance(value, JobSpec):
        raise TypeError(f"spec must be a JobSpec, got {value!r}")
    return value


def check_claim(value: object) -> Claim:
    """A `Claim` someone holds, else `TypeError` (or `ValueError` for a pending retry)."""
    if not isinstance(value, Claim):
        raise TypeError(f"claim must be a Claim from claim_due(), got {value!r}")
    if not value.owner:
        raise ValueError(
            "claim must be a Claim from claim_due(), got a pending retry nobody holds"
            f" (owner '') of job {value.job_id!r} scheduled {value.scheduled!r}:"
            " claim_due() hands it out"
        )
    return value


#: Names of the first durable releases, kept importable with a `DeprecationWarning`:
#: the schedule values are the core's own (`tickwork.At`, `Every`, `Cron`), and the
#: callback types of `Store.claim_due` say they are functions.
_DEPRECATED: Final[dict[str, tuple[str, str]]] = {
    "AtSchedule": ("_stored_at", "tickwork.At"),
    "EverySchedule": ("_stored_every", "tickwork.Every"),
    "CronSchedule": ("_stored_cron", "tickwork.Cron"),
    "Advance": ("AdvanceFn", "tickwork.stores.contract.AdvanceFn"),
    "GiveUp": ("GiveUpFn", "tickwork.stores.contract.GiveUpFn"),
    "StartNow": ("StartNowFn", "tickwork.stores.contract.StartNowFn"),
}


def deprecated(module: str, name: str) -> Any:
    """The value behind a deprecated name of ``module``, after a `DeprecationWarning`.

    Raises:
        AttributeError: ``name`` is not a deprecated name either.

    """
    if name not in _DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    target, instead = _DEPRECATED[name]
    warnings.warn(f"{module}.{name} is deprecated; use {instead}", DeprecationWarning, stacklevel=3)
    return globals()[target]


def __getattr__(name: str) -> Any:
    """Resolve a deprecated name (see `deprecated`)."""
    return deprecated(__name__, name)
