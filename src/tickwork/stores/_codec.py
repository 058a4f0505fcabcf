"""The stored form of schedules and `JobSpec`: versioned JSON text, never pickle.

A writable database must not become code execution, so a spec is stored as plain
JSON (`spec_to_json`) and read back through `JobSpec`'s own checks (`spec_from_json`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Final

from tickwork._core.args import in_calendar, stored_values
from tickwork._core.calendars import Calendar
from tickwork._core.errors import CronError
from tickwork._core.schedules import At, Cron, Every, Once
from tickwork._core.vocabulary import field_names
from tickwork.stores._after import after_from_json
from tickwork.stores._errors import JobSpecError, SchemaVersionError, StoreError
from tickwork.stores._fields import finite_number
from tickwork.stores._jobspec import SPEC_VERSION, JobSpec, Schedule
from tickwork.stores._records import AdvanceFn as AdvanceFn
from tickwork.stores._records import GiveUpFn as GiveUpFn
from tickwork.stores._records import StartNowFn as StartNowFn

__all__ = ["deprecated", "schedule_from_dict", "schedule_json", "spec_from_json", "spec_to_json"]


def _stored_at(at: float) -> At:
    """The `tickwork.At` of a stored ``{"kind": "at"}`` schedule, with the store's messages.

    Raises:
        JobSpecError: ``at`` is not a finite number.

    """
    return At(finite_number("schedule.at", at))


def _stored_every(seconds: float, fixed_delay: bool = False) -> Every:
    """The `tickwork.Every` of a stored ``{"kind": "every"}`` schedule, with the store's messages.

    Raises:
        JobSpecError: ``seconds`` is not a finite number > 0, or ``fixed_delay`` not a bool.

    """
    number = finite_number("schedule.seconds", seconds)
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
    if type(data) is dict and data.get("kind") == "at" and len(data) == 2:
        at = data.get("at")  # a one-shot's, read at every claim
        if type(at) is float and in_calendar(at):  # finite, and no bound to lift
            return At(at)
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
            base = Once(finite_number("schedule.delay", data["delay"]))
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
