"""Times as operators type them: ``--since``, ``--until``, ``--from`` / ``--to``, ``--slot``.

The ``tickwork`` commands read them through argparse and the HTTP API (`tickwork._daemon.web.api`)
from its JSON fields, with the same rules and the same messages: a duration from now, an
ISO 8601 date-time (local time unless it has an offset or ``Z``), within the years 1 to
9999. A bad text raises `argparse.ArgumentTypeError` whose message states the rule and
shows the text.
"""

from __future__ import annotations

import argparse
import math
import time
from datetime import datetime

from tickwork._core.args import in_calendar
from tickwork._core.schedules import DurationTooLong, parse_duration

__all__ = ["in_calendar_or_refuse", "parse_future", "parse_since", "parse_time"]


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: a duration back from now (``90m``, ``2h``, ``7d``) or an ISO 8601 time.

    A date-time without an offset is read in local time, as a person at this terminal
    means it. The time must fall in the years 1 to 9999 (UTC).

    Raises:
        argparse.ArgumentTypeError: Neither, or out of that range; the message shows
            the text.

    """
    try:
        ago = parse_duration(text)
    except DurationTooLong as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except (ValueError, TypeError):
        pass
    else:
        return in_calendar_or_refuse((time.time() if now is None else now) - ago, text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a duration back from now (90m, 2h, 7d) or an ISO 8601 date-time"
            f" (2026-12-04T09:00, 2026-12-04T08:00Z), got {text!r}"
        ) from None
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # local time
        ts = moment.timestamp()
    except (OverflowError, OSError, ValueError):
        ts = math.nan
    return in_calendar_or_refuse(ts, text)


def in_calendar_or_refuse(ts: float, text: str) -> float:
    """``ts``, the time ``text`` names, if it falls in the years 1 to 9999 (UTC).

    Raises:
        argparse.ArgumentTypeError: It does not; the message shows the text.

    """
    if not in_calendar(ts):
        raise argparse.ArgumentTypeError(f"must fall in the years 1 to 9999 (UTC), got {text!r}")
    return ts


def parse_future(text: str) -> float:
    """``--until``: a duration from now (``30m``, ``2h``) or an ISO 8601 time.

    Raises:
        argparse.ArgumentTypeError: Neither; the message shows the text.

    """
    try:
        ahead = parse_duration(text)
    except DurationTooLong as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except (ValueError, TypeError):
        pass
    else:
        return in_calendar_or_refuse(time.time() + ahead, text)
    try:
        datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a duration from now (30m, 2h, 1d) or an ISO 8601 date-time"
            f" (2026-12-04T18:00, 2026-12-04T17:00Z), got {text!r}"
        ) from None
    return parse_since(text)  # a date-time: read there, the years 1 to 9999 checked


def parse_time(text: str) -> float:
    """``--from`` / ``--to``: ``now``, an ISO 8601 time, or a duration back from now."""
    if text.strip().lower() == "now":
        return time.time()
    return parse_since(text)
