"""Stable spreading: Jenkins' ``H`` in cron fields, and a stable jitter, from a job's name.

A thousand jobs written ``0 * * * *`` all start in the same second. Written ``H * * *
*`` each job gets its own minute, hashed from a *seed* (its name): the same on every
restart, process and node, because the hash is SHA-256 of the seed's UTF-8 text (never
Python's `hash`, which changes with each process). The forms, per field (Jenkins'):

* ``H``: one value in the field's range (day-of-month: 1-28, so every month has it);
* ``H/n``: every ``n`` from a hashed start in ``0 .. n-1`` (``H/15``: 7, 22, 37, 52);
* ``H(a-b)``: one value in ``a-b``;
* ``H(a-b)/n``: every ``n`` in ``a-b`` from a hashed start in ``a .. a+n-1``.

Each field hashes ``seed`` with its own index, so a job's minute and hour are independent.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from tickwork._core.errors import CronError

__all__ = ["expand_h", "has_h", "stable_fraction"]

#: The range ``H`` picks from in each field (seconds, then the five classic fields).
_RANGES: Final = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 28),
    "month": (1, 12),
    "day-of-week": (0, 6),
}
_H: Final = re.compile(r"H(?:\((\d+)-(\d+)\))?(?:/(\d+))?")


def _is_h(part: str) -> bool:
    return any(item.startswith("H") for item in part.split(","))


def has_h(expr: str) -> bool:
    """Whether ``expr`` uses ``H`` in a field (aliases such as ``@hourly`` never do)."""
    return isinstance(expr, str) and any(_is_h(part) for part in expr.split())


def _number(seed: str, salt: str) -> int:
    digest = hashlib.sha256(f"{salt}\0{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def stable_fraction(seed: str, salt: str = "jitter") -> float:
    """A number in ``[0, 1)`` fixed by ``seed`` (and ``salt``), the same in every process."""
    return _number(seed, salt) / 2.0**64


def _item(item: str, field: str, seed: str, expr: str) -> str:
    match = _H.fullmatch(item)
    if match is None:
        raise CronError(
            f"{field}: H must be written H, H/n, H(a-b) or H(a-b)/n, got `{item}` in `{expr}`"
        )
    low, high = _RANGES[field]
    if match.group(1) is not None:
        a, b = int(match.group(1)), int(match.group(2))
        top = 31 if field == "day-of-month" else high
        if not low <= a <= b <= top:
            raise CronError(
                f"{field}: H(a-b) needs {low} <= a <= b <= {top}, got `{item}` in `{expr}`"
            )
        low, high = a, b
    value = _number(seed, field)
    if match.group(3) is None:
        return str(low + value % (high - low + 1))
    step = int(match.group(3))
    if not 1 <= step <= high - low + 1:
        raise CronError(
            f"{field}: the step of {item} must be from 1 to {high - low + 1}, got `{item}`"
            f" in `{expr}`"
        )
    return f"{low + value % step}-{high}/{step}"


def expand_h(parts: list[str], seed: str | None, expr: str) -> list[str]:
    """The fields with each ``H`` item replaced by the values ``seed`` hashes to.

    ``parts`` are the fields as split (5, or 6 with seconds first).

    Raises:
        CronError: ``H`` with no seed to hash (the message says where one comes from),
            or an ``H`` item that is malformed (the message names the field).
    """
    names = list(_RANGES)[6 - len(parts) :]
    out: list[str] = []
    for name, part in zip(names, parts, strict=True):
        if not _is_h(part):
            out.append(part)
            continue
        if seed is None:
            raise CronError(
                f"{name}: H needs a seed to hash (the job's name): pass seed='name' (durable"
                f" jobs and jobs files use the job's name) in `{expr}`"
            )
        items = part.split(",")
        out.append(",".join(_item(i, name, seed, expr) if i.startswith("H") else i for i in items))
    return out
