"""Times for people: POSIX seconds as UTC ISO 8601, in logs, warnings and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso"]


def iso(ts: float, *, millis: bool = False) -> str:
    """Format POSIX seconds as UTC ISO 8601 with a ``Z``: ``2026-12-02T17:00:00Z``.

    ``millis`` adds milliseconds (``17:00:00.250Z``). A value no calendar can show (out
    of range, not finite) comes back as its ``repr``, so a log line never fails on it.
    """
    try:
        moment = datetime.fromtimestamp(ts, UTC)
    except (OverflowError, OSError, ValueError):
        return repr(ts)
    return moment.isoformat(timespec="milliseconds" if millis else "seconds").replace("+00:00", "Z")
