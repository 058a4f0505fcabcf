"""Argument checks shared by every layer: a number of seconds, named in its error.

One implementation of "a finite number of seconds" for the core, the drivers, the
stores and the daemon, so every message reads the same: it names the argument, states
the rule and shows the bad value (``delay must be a finite number >= 0, got nan``).

**What a calendar can hold.** An instant must fall in the years 1 to 9999 (UTC), the
range of Python's `datetime`, so that every log line, page and listing can show it; a
duration (a number of seconds ``>= 0`` or ``> 0``) is at most `MAX_SECONDS`, 365,000
days (about 1,000 years), so that now plus any duration stays in that range for
thousands of years. Values read back from a store are not held to these bounds
(`stored_values`): a state written before them, or by hand, must still read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from numbers import Real
from typing import Final, Literal, overload

__all__ = [
    "MAX_INSTANT",
    "MAX_SECONDS",
    "MIN_INSTANT",
    "Bound",
    "bounded",
    "in_calendar",
    "instant_rule",
    "seconds",
    "stored_values",
    "too_long",
]

#: The lowest value allowed: any finite number, zero and above, or above zero.
Bound = Literal["finite", ">= 0", "> 0"]

_RULES: Final[dict[str, str]] = {"finite": "", ">= 0": " >= 0", "> 0": " > 0"}

#: The longest duration, in seconds: 365,000 days (about 1,000 years).
MAX_SECONDS: Final = 365_000 * 86_400.0
#: The first and the last instant a `datetime` can show, in POSIX seconds (UTC): the
#: start of the year 1 and the last whole second of the year 9999 (a float can hold no
#: microsecond that late; the fraction would round into the year 10000).
MIN_INSTANT: Final = datetime(1, 1, 1, tzinfo=UTC).timestamp()
MAX_INSTANT: Final = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()

_STORED: ContextVar[bool] = ContextVar("tickwork_stored_values", default=False)


@contextmanager
def stored_values() -> Iterator[None]:
    """Within it, durations and instants are not held to the calendar's bounds.

    For values read back from a store: what an older tickwork (or a hand) wrote must
    still read, so that every listing can show it and say what is wrong with it.
    """
    token = _STORED.set(True)
    try:
        yield
    finally:
        _STORED.reset(token)


def in_calendar(ts: float) -> bool:
    """Whether POSIX seconds ``ts`` fall in the years 1 to 9999 (UTC)."""
    return MIN_INSTANT <= ts <= MAX_INSTANT


def instant_rule(name: str) -> str:
    """The rule an instant breaks, for messages: ``until must fall in the years 1 to ...``."""
    return f"{name} must fall in the years 1 to 9999 (UTC)"


def bounded() -> bool:
    """Whether new values are held to the calendar's bounds (not in `stored_values`)."""
    return not _STORED.get()


def too_long(number: float) -> bool:
    """Whether a duration is longer than `MAX_SECONDS` (outside `stored_values`)."""
    return number > MAX_SECONDS and not _STORED.get()


def _rule(bound: Bound, optional: bool) -> str:
    """What `seconds` asks of a value, for its messages."""
    return f"{'None or ' if optional else ''}a finite number{_RULES[bound]}"


@overload
def seconds(
    name: str,
    value: object,
    *,
    bound: Bound = ...,
    optional: Literal[False] = ...,
    error: type[Exception] = ...,
    type_error: type[Exception] = ...,
) -> float: ...
@overload
def seconds(
    name: str,
    value: object,
    *,
    bound: Bound = ...,
    optional: Literal[True],
    error: type[Exception] = ...,
    type_error: type[Exception] = ...,
) -> float | None: ...
def seconds(
    name: str,
    value: object,
    *,
    bound: Bound = "finite",
    optional: bool = False,
    error: type[Exception] = ValueError,
    type_error: type[Exception] = TypeError,
) -> float | None:
    """``value`` as a float number of seconds, checked against ``bound``.

    Args:
        name: The argument's name, for the message.
        value: What the caller gave: an `int`, `float` or other real number (a `bool`
            is refused: ``schedule(True, fn)`` is a bug, not a one-second delay).
        bound: ``"finite"``, ``">= 0"`` or ``"> 0"``; NaN and infinities never pass.
            A duration (``">= 0"``, ``"> 0"``) is also at most `MAX_SECONDS`.
        optional: ``None`` passes (and comes back), and the message says so.
        error: Raised for a number out of bounds.
        type_error: Raised for a value that is not a number.

    Returns:
        The value as a `float` (``None`` for a ``None`` that ``optional`` allows).

    Raises:
        Exception: ``type_error`` (`TypeError` by default) for a non-number, ``error``
            (`ValueError` by default) for a number out of bounds; each message names
            ``name``, states the rule and shows the value.

    """
    if value is None and optional:
        return None
    if type(value) is float or type(value) is int:
        number = float(value)
    elif isinstance(value, bool) or not isinstance(value, Real):
        if type_error is error:
            raise error(f"{name} must be {_rule(bound, optional)}, got {value!r}")
        raise type_error(f"{name} must be a number of seconds, got {value!r}")
    else:
        number = float(value)
    if bound == "> 0":
        ok = 0.0 < number < math.inf
    elif bound == ">= 0":
        ok = 0.0 <= number < math.inf
    else:
        ok = math.isfinite(number)
    if not ok:
        raise error(f"{name} must be {_rule(bound, optional)}, got {value!r}")
    if bound != "finite" and too_long(number):
        raise error(f"{name} must be at most 365000 days (about 1000 years), got {value!r}")
    return number
