"""The store methods' argument checks, shared by every store.

Each returns the value it accepts, or raises `TypeError` / `ValueError` naming the
argument and showing the bad value.
"""

from __future__ import annotations

from tickwork._core.args import seconds
from tickwork.stores._errors import JobSpecError
from tickwork.stores._fields import MAX_ID, job_id_arg
from tickwork.stores._jobspec import JobSpec
from tickwork.stores._records import KEEP, Claim, Finish, Start
from tickwork.stores._terms import MAX_NOTE, OUTCOMES, Outcome

__all__ = [
    "check_actor",
    "check_claim",
    "check_finish",
    "check_job_id",
    "check_limit",
    "check_note",
    "check_optional_time",
    "check_outcome",
    "check_owner",
    "check_positive",
    "check_spec",
    "check_start",
    "check_time",
]


def check_time(name: str, value: object) -> float:
    """``value`` as a finite float (seconds), else `ValueError`/`TypeError` naming it."""
    return seconds(name, value)


def check_optional_time(name: str, value: object) -> float | None:
    """Like `check_time`, but ``None`` passes."""
    return None if value is None else check_time(name, value)


def check_positive(name: str, value: object) -> float:
    """A finite number of seconds > 0."""
    return seconds(name, value, bound="> 0")


def check_job_id(value: object, name: str = "job_id", limit: int = MAX_ID) -> str:
    """A valid job id (or, as ``name`` says, a key of at most ``limit`` characters).

    Raises:
        ValueError: It is not; the message names ``name`` and shows ``value``.
    """
    try:
        return job_id_arg(value, name, limit)
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
