"""One-offs from outside the app: what ``tickwork enqueue`` and ``/api/enqueue`` share.

Both take the same fields, as JSON values (the verb's options become them; the API's
body is them), check them with the same words, and never import the function: a
producer may not have the app's code, so `enqueue_paths` checks the path's form only,
and the one-off runs on a node that allows its function (``allowed_modules``). The
counts per function (`OneOffCounts`) are shown here the same way to ``tickwork jobs``,
the status page and the API.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from tickwork._core.schedules import parse_duration
from tickwork._core.text import iso_due
from tickwork._daemon.when import parse_since
from tickwork._durable.oneoffs import Enqueued, OneOff, enqueue_paths, oneoff_id
from tickwork.stores import Store
from tickwork.stores.contract import OneOffCounts, OneOffQueue

__all__ = [
    "COUNTED",
    "FIELDS",
    "EnqueueError",
    "answer",
    "cancel",
    "counts",
    "counts_table",
    "enqueue",
    "parse_at",
]

#: The fields of an enqueue request.
FIELDS: Final = ("func", "args", "kwargs", "at", "delay", "key", "options")
#: The counts of each function's one-offs, in the order they are shown.
COUNTED: Final = ("pending", "running", "done", "failed", "dropped")
#: The options given in seconds, which may also be written as durations (``"30s"``).
_SECONDS: Final = frozenset(
    {"retry_backoff", "retry_backoff_max", "timeout", "kill_grace", "grace"}
)


class EnqueueError(ValueError):
    """A request to enqueue refused: the message names the field and shows the value."""


def enqueue(store: Store, fields: Mapping[str, Any], *, now: float) -> Enqueued:
    """Enqueue the one-off ``fields`` describe (see `FIELDS`), due from ``now``.

    Raises:
        EnqueueError: A field is missing, unknown or bad (nothing is stored); so do
            the checks of `OneOff` and `JobSpec` (`ValueError`, `TypeError`).
        StoreError: The store failed (nothing is stored).

    """
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise EnqueueError(
            f"an enqueue takes the fields {', '.join(FIELDS)}; got an unknown field {unknown[0]!r}"
        )
    func = fields.get("func")
    if not isinstance(func, str) or not func:
        raise EnqueueError(f"func must be an import path 'package.module:function', got {func!r}")
    item = OneOff(
        func,
        _typed(fields, "args", list, "a JSON array", []),
        _typed(fields, "kwargs", dict, "a JSON object", {}),
        parse_at(fields.get("at")),
        fields.get("delay"),
        fields.get("key"),
        _options(_typed(fields, "options", dict, "a JSON object", {})),
    )
    return enqueue_paths(store, [item], now=now)[0]


def answer(done: Enqueued) -> dict[str, Any]:
    """What an enqueue says: the id, when it is due (ISO time), whether it was added."""
    return {"id": done.id, "run_at": iso_due(done.run_at), "created": done.created, "key": done.key}


def cancel(store: Store, ref: str, *, now: float, by: str) -> str | None:
    """Cancel the pending one-off ``ref`` names (its id, or its key); its id, or None.

    None: no such one-off is pending (it never was, it ended, or a node runs it now).

    Raises:
        EnqueueError: ``ref`` is neither an id nor a key.

    """
    try:
        job_id = oneoff_id(ref)
    except ValueError as exc:
        raise EnqueueError(f"give a one-off's id (~...) or its key: {exc}") from None
    if not isinstance(store, OneOffQueue):
        return None
    return job_id if store.cancel_oneoff(job_id, at=now, by=by) else None


def counts(store: Store) -> list[OneOffCounts]:
    """Every function's one-off counts (none in a store that keeps no one-offs)."""
    return store.oneoff_counts() if isinstance(store, OneOffQueue) else []


def counts_table(rows: Sequence[OneOffCounts]) -> list[list[str]]:
    """The counts as a table's rows of text, its header first."""
    return [["ONE-OFFS", *(c.upper() for c in COUNTED)]] + [
        [r.queue, *(str(getattr(r, c)) for c in COUNTED)] for r in rows
    ]


def _typed(fields: Mapping[str, Any], name: str, kind: type, words: str, default: Any) -> Any:
    value = fields.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise EnqueueError(f"{name} must be {words}, got {value!r}")
    return value


def parse_at(value: Any) -> Any:
    """``at`` as POSIX seconds when it is text (an ISO 8601 time, local without offset)."""
    if not isinstance(value, str):
        return value  # a number or null: `OneOff` checks it
    try:
        datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        return parse_since(value)
    except (ValueError, argparse.ArgumentTypeError):
        raise EnqueueError(
            "at must be an ISO 8601 date-time (2026-12-04T18:00, 2026-12-04T17:00Z;"
            f" local time without an offset) or POSIX seconds, got {value!r}"
        ) from None


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """The run's options, those in seconds read from durations given as text."""
    out = dict(options)
    for name in _SECONDS & out.keys():
        if isinstance(out[name], str):
            try:
                out[name] = parse_duration(out[name])
            except ValueError as exc:
                raise EnqueueError(f"options.{name}: {exc}") from None
    return out
