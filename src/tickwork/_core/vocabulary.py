"""One vocabulary: the policy words, and the name each schedule field has where it is written.

Each policy's words are defined here once; the in-memory drivers, the durable records
and the jobs file import them. `FIELDS` is the one table of a schedule field's three
names: in a ``tickwork run`` TOML file, on the Python value (`tickwork.Every` and its
siblings) and in the JSON a store keeps. The stored names never change (old state
files must keep opening); the table is how code and docs translate between them.

Words: a *task* is an entry of an in-memory scheduler (`Scheduler`, `ThreadScheduler`,
`AsyncScheduler`; ``schedule()`` returns its id); a *job* is a durable, named job
(`JobSpec`, `DurableScheduler`, a ``[[job]]`` of a jobs file). A *run* is one execution
of either; a *slot* is the scheduled instant a durable run belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, get_args

__all__ = [
    "FIELDS",
    "JOBS_FILE_OVERLAP_POLICIES",
    "MISSED_POLICIES",
    "OVERLAP_POLICIES",
    "Field",
    "JobsFileOverlap",
    "Missed",
    "Overlap",
    "field_names",
    "overlap_problem",
]

#: What to do with a run that comes due while the previous run is still going.
Overlap: TypeAlias = Literal["skip", "queue", "allow"]
#: What to do with durable runs whose time passed while nothing ran the schedule.
Missed: TypeAlias = Literal["skip", "once", "all"]

#: Where a durable job's Python function runs: in the worker ``"thread"`` (it cannot be
#: killed at its time limit), or in a child ``"process"`` (killed at the limit).
Isolation: TypeAlias = Literal["thread", "process"]

#: The overlap policies, in the order error messages list them.
OVERLAP_POLICIES: Final[tuple[Overlap, ...]] = get_args(Overlap)
#: The missed-run policies, in the order error messages list them.
MISSED_POLICIES: Final[tuple[Missed, ...]] = get_args(Missed)
#: The isolation words, in the order error messages list them.
ISOLATIONS: Final[tuple[Isolation, ...]] = get_args(Isolation)

#: The overlap policies of a ``tickwork run`` jobs file: the library's, and
#: ``"replace"`` for commands (stop the running run's process group, then start the new
#: run). Only a command can be stopped from outside, so the library refuses it.
JobsFileOverlap: TypeAlias = Overlap | Literal["replace"]
#: `JobsFileOverlap`'s words, in the order error messages list them.
JOBS_FILE_OVERLAP_POLICIES: Final[tuple[JobsFileOverlap, ...]] = (*OVERLAP_POLICIES, "replace")


def overlap_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a library overlap policy (`Overlap`), or None.

    ``"replace"`` gets its own message: it exists, but only for the commands of a
    ``tickwork run`` jobs file, because a running function cannot be stopped.
    """
    if isinstance(value, str) and value in OVERLAP_POLICIES:
        return None
    choices = ", ".join(repr(p) for p in OVERLAP_POLICIES)
    if value == "replace":
        return (
            "overlap='replace' is only for command jobs of a tickwork run jobs file (it"
            " stops the running command's process group); a running Python function"
            f" cannot be stopped, so use one of {choices}"
        )
    return f"overlap must be one of {choices}, got {value!r}"


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a schedule kind, under each of its three names."""

    kind: Literal["once", "at", "every", "cron"]
    """The schedule kind (the stored ``"kind"``)."""
    python: str
    """The attribute of the Python value (``Every(...).interval``)."""
    toml: str
    """The key in a jobs file's ``[[job]]`` table."""
    stored: str
    """The key in the JSON a store keeps (never renamed)."""


FIELDS: Final[tuple[Field, ...]] = (
    Field("once", "delay", "in", "delay"),
    Field("at", "when", "at", "at"),
    Field("every", "interval", "every", "seconds"),
    Field("every", "fixed_delay", "fixed_delay", "fixed_delay"),
    Field("every", "jitter", "jitter", "jitter"),
    Field("every", "first", "first", "first"),
    Field("every", "until", "until", "until"),
    Field("cron", "expr", "cron", "expr"),
    Field("cron", "tz", "timezone", "tz"),
    Field("cron", "jitter", "jitter", "jitter"),
    Field("cron", "until", "until", "until"),
    Field("cron", "calendar", "calendar", "calendar"),
    Field("cron", "shift", "shift", "shift"),
    Field("cron", "seed", "seed", "seed"),
    Field("cron", "stable_jitter", "stable_jitter", "stable_jitter"),
    Field("every", "seed", "seed", "seed"),
    Field("every", "stable_jitter", "stable_jitter", "stable_jitter"),
    Field("every", "calendar", "calendar", "calendar"),
    Field("every", "tz", "timezone", "tz"),
)


def field_names(kind: str, *, source: str, target: str) -> dict[str, str]:
    """The names of ``kind``'s fields, mapped from one place to another.

    Args:
        kind: ``"once"``, ``"at"``, ``"every"`` or ``"cron"``.
        source: ``"python"``, ``"toml"`` or ``"stored"``: the keys of the result.
        target: The same choices: the values of the result.

    Returns:
        ``{source name: target name}`` for every field of the kind, in table order.

    Raises:
        ValueError: An unknown kind, source or target (the message shows the value).

    """
    places = ("python", "toml", "stored")
    for name, value in (("source", source), ("target", target)):
        if value not in places:
            raise ValueError(f"{name} must be one of {places!r}, got {value!r}")
    rows = [f for f in FIELDS if f.kind == kind]
    if not rows:
        raise ValueError(f"kind must be one of 'once', 'at', 'every', 'cron', got {kind!r}")
    return {getattr(f, source): getattr(f, target) for f in rows}
