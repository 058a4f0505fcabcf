"""Argument checks shared by every layer: a number of seconds, named in its error.

One implementation of "a finite number of seconds" for the core, the drivers, the
stores and the daemon, so every message reads the same: it names the argument, states
the rule and shows the bad value (``delay must be a finite number >= 0, got nan``).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Final, Literal, overload

__all__ = ["Bound", "seconds"]

#: The lowest value allowed: any finite number, zero and above, or above zero.
Bound = Literal["finite", ">= 0", "> 0"]

_RULES: Final[dict[str, str]] = {"finite": "", ">= 0": " >= 0", "> 0": " > 0"}


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
    rule = f"{'None or ' if optional else ''}a finite number{_RULES[bound]}"
    if type(value) is float or type(value) is int:
        number = float(value)
    elif isinstance(value, bool) or not isinstance(value, Real):
        if type_error is error:
            raise error(f"{name} must be {rule}, got {value!r}")
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
        raise error(f"{name} must be {rule}, got {value!r}")
    return number
