"""The store's closed sets of words: outcomes, origins, deliveries, actions.

Each is a `Literal` type with the tuple of its values, so a check and a type say the
same thing; the records (`_records`) and the checks (`_checks`) use them.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

__all__ = [
    "ACTION_KINDS",
    "DELIVERIES",
    "MAX_NOTE",
    "ORIGINS",
    "OUTCOMES",
    "ActionKind",
    "Delivery",
    "Origin",
    "Outcome",
    "RecoveryAction",
]

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
