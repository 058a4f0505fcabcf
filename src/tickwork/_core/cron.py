"""Cron expressions in an IANA time zone, with Debian/Vixie cron's DST rules.

This module is the pure calendar layer: it answers "when does this expression fire
next after instant t?" and nothing else (no clocks, no threads, no I/O).

Design. cronsim parses the expression and enumerates matching *wall-clock* times in
naive mode (it never sees a time zone, so none of its DST code runs). This module maps
wall times to instants itself, walking real time one UTC-offset segment at a time and
applying the rules of Vixie cron's main loop (``cron.c``, as shipped by Debian):

* A job is *wildcard* when its minute or its hour field starts with ``*`` (Vixie's
  ``MIN_STAR``/``HR_STAR`` flags); every other job is *fixed-time*.
* Clock jumps forward by G (a DST gap): if G < 5 minutes every job whose wall time was
  skipped runs once at the jump; if 5 minutes <= G < 3 hours only fixed-time jobs do;
  if G >= 3 hours it is a clock correction and nothing runs for the vanished time.
* Clock goes back by F (a repeated interval): if F <= 3 hours fixed-time jobs do not run
  again in the second pass, wildcard jobs run on every real minute whose wall time
  matches; if F > 3 hours it is a correction and every job runs in both passes.

Steps of the system clock itself (NTP, an administrator, a resume) are not in the zone
data; the schedulers notice them and ask `CronExpression.after_clock_step` where a job
goes: after a step back its rows are the ones above (wildcard jobs follow real time,
fixed-time jobs do too only for a correction of more than 3 hours); after a step forward
a slot carried past runs once, late, as after a suspend (``docs/cron.md``).

cronsim is only touched here, so it can be replaced without changing the contract.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from tickwork._core.calendars import Calendar, Shift, shift_problem
from tickwork._core.errors import CronError
from tickwork._core.spread import expand_h

__all__ = ["CronExpression"]

FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Vixie cron's thresholds (cron.c, "wakeupKind"), in seconds of wall-clock change.
_SMALL_GAP = 5 * 60  # a forward jump below this runs every skipped job
_LARGE_GAP = 3 * 3600  # a forward jump of this or more is a clock correction
_MAX_REPEAT = 3 * 3600  # a backward jump above this is a clock correction

# Impossible-expression rule: day matching depends only on the year's calendar type
# (leap or not, weekday of 1 January). Every one of the 14 types occurs in any 28
# consecutive years between 1901 and 2099, so an expression with no match from
# 2001-01-01 up to 2029-01-01 never matches at all.
_PROBE_START = datetime(2001, 1, 1)
_PROBE_END = datetime(2029, 1, 1)

_EPOCH = datetime(1970, 1, 1)
_ONE_SECOND = timedelta(seconds=1)

# Offset transitions are found by sampling the zone every hour and bisecting to the
# second. A pair of transitions less than an hour apart that cancel out would be
# missed; no IANA zone has one.
_CHUNK = 365 * 86400
_SAMPLE = 3600

_Transition = tuple[int, int, int]  # (instant, offset before, offset after), seconds


class _Zone:
    """Offset transitions of one zone, computed lazily per 365-day chunk and cached."""

    __slots__ = ("_chunks", "tz")

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self._chunks: dict[int, tuple[_Transition, ...]] = {}

    def offset(self, ts: float) -> int:
        """Return the UTC offset in seconds at POSIX instant ``ts``."""
        off = datetime.fromtimestamp(ts, self.tz).utcoffset()
        assert off is not None
        return off // _ONE_SECOND

    def _chunk(self, k: int) -> tuple[_Transition, ...]:
        got = self._chunks.get(k)
        if got is not None:
            return got
        start = k * _CHUNK
        end = start + _CHUNK
        found: list[_Transition] = []
        lo, off_lo = start - 1, self.offset(start - 1)
        for hi in (*range(start, end, _SAMPLE), end - 1):
            off_hi = self.offset(hi)
            while off_hi != off_lo:
                a, b = lo, hi  # offset(a) == off_lo != offset(b)
                while b - a > 1:
                    mid = (a + b) // 2
                    if self.offset(mid) == off_lo:
                        a = mid
                    else:
                        b = mid
                after = self.offset(b)
                found.append((b, off_lo, after))
                lo, off_lo = b, after
            lo, off_lo = hi, off_hi
        result = tuple(found)
        self._chunks[k] = result
        return result

    def first_between(self, a: float, b: float) -> _Transition | None:
        """Return the first transition at an instant T with ``a < T <= b``."""
        for k in range(math.floor(a / _CHUNK), math.floor(b / _CHUNK) + 1):
            for tr in self._chunk(k):
                if a < tr[0] <= b:
                    return tr
                if tr[0] > b:
                    return None
        return None

    def last_between(self, a: float, b: float) -> _Transition | None:
        """Return the last transition at an instant T with ``a < T <= b``."""
        last = None
        for k in range(math.floor(a / _CHUNK), math.floor(b / _CHUNK) + 1):
            for tr in self._chunk(k):
                if a < tr[0] <= b:
                    last = tr
        return last


_ZONES: dict[ZoneInfo, _Zone] = {}


def _zone(tz: ZoneInfo) -> _Zone:
    z = _ZONES.get(tz)
    if z is None:
        z = _ZONES.setdefault(tz, _Zone(tz))
    return z


def _local_zone() -> ZoneInfo:
    """Return the system's local zone (``TZ``, else ``/etc/localtime``)."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        return _load_zone(name, shown="local")
    path = "/etc/localtime"
    real = os.path.realpath(path)
    marker = "zoneinfo" + os.sep
    if marker in real:
        try:
            return ZoneInfo(real.split(marker, 1)[1])
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    try:
        with open(path, "rb") as f:
            return ZoneInfo.from_file(f, key="localtime")
    except (OSError, ValueError) as exc:
        raise CronError(
            "tz: cannot determine the system local time zone for 'local'; "
            "pass an IANA name such as 'Europe/Berlin'"
        ) from exc


def _load_zone(name: str, *, shown: str | None = None) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        what = f"{shown!r} (resolved to {name!r})" if shown else repr(name)
        raise CronError(
            f"tz: unknown time zone {what}; expected an IANA name such as "
            "'Europe/Berlin', 'UTC' or 'local'"
        ) from exc


def _resolve_tz(tz: object) -> ZoneInfo:
    if isinstance(tz, ZoneInfo):
        return tz
    if not isinstance(tz, str):
        raise TypeError(f"tz must be an IANA zone name (str) or a ZoneInfo, got {tz!r}")
    if tz == "local":
        return _local_zone()
    return _load_zone(tz)


def _fields(expr: str) -> list[str]:
    """Split ``expr`` into its five fields, mapping aliases; raise CronError if bad."""
    text = expr.strip()
    if text.startswith("@"):
        key = text.lower()
        if key == "@reboot":
            raise CronError(
                "expr: @reboot is not a calendar schedule and is not supported; "
                "run the job once at start-up instead"
            )
        if key not in ALIASES:
            known = ", ".join(ALIASES)
            raise CronError(f"expr: unknown alias `{text}` (known: {known})")
        text = ALIASES[key]
    parts = text.split()
    if len(parts) not in (5, 6):
        raise CronError(
            f"expr: expected 5 fields (minute hour day-of-month month day-of-week), or 6"
            f" with a seconds field first, got {len(parts)} in `{expr}`"
        )
    return parts


def _split_seconds(parts: list[str]) -> tuple[str | None, list[str]]:
    """``(seconds field or None, the five classic fields)`` of a 5- or 6-field split."""
    if len(parts) == 6:
        return parts[0], parts[1:]
    return None, parts


def _parse(expr: str, parts: list[str], seconds: str | None = None) -> CronSim:
    """Parse with cronsim; translate its errors into messages naming the field.

    ``parts`` are the five classic fields; ``seconds`` the optional seconds field.
    """
    line = " ".join(parts) if seconds is None else f"{seconds} {' '.join(parts)}"
    try:
        return CronSim(line, _PROBE_START)
    except CronSimError as exc:
        msg = str(exc)
        if msg == "Bad second" and seconds is not None:
            raise CronError(f"second: invalid value `{seconds}` in `{expr}`") from exc
        names = [f"Bad {name}" for name in FIELD_NAMES]
        if msg not in names:
            raise CronError(f"expr: cannot parse `{expr}`: {msg}") from exc
        idx = names.index(msg)
        name = FIELD_NAMES[idx]
        if idx == 2:
            # cronsim also reports a day-of-month that no chosen month has as "Bad
            # day-of-month"; tell that apart from a syntax error and say which.
            months = _months_or_none(parts)
            if months is not None:
                days = _days_or_none(parts)
                if days is not None:
                    shown = _join_months(months)
                    raise CronError(
                        f"day-of-month: {parts[2]} never occurs in {shown} in `{expr}`"
                    ) from exc
        raise CronError(f"{name}: invalid value `{parts[idx]}` in `{expr}`") from exc


def _months_or_none(parts: list[str]) -> list[int] | None:
    try:
        probe = CronSim(f"0 0 1 {parts[3]} *", _PROBE_START)
    except CronSimError:
        return None
    return sorted(probe.months)


def _days_or_none(parts: list[str]) -> set[int] | None:
    try:
        probe = CronSim(f"0 0 {parts[2]} * *", _PROBE_START)
    except CronSimError:
        return None
    return {d for d in probe.days if d > 0}


def _join_months(months: list[int]) -> str:
    names = [_MONTH_NAMES[m - 1] for m in months]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _check_possible(expr: str, parts: list[str], template: CronSim) -> None:
    """Raise CronError unless the expression matches some date (bounded search)."""
    probe = copy.copy(template)
    probe.dt = _PROBE_START
    try:
        first = next(probe)
    except StopIteration:
        first = None
    if first is not None and first < _PROBE_END:
        return
    dom, month, dow = parts[2], parts[3], parts[4]
    where = "" if month == "*" else f" in month {month}"
    raise CronError(
        f"day-of-month: {dom} never falls on day-of-week {dow}{where} in `{expr}` "
        "(no match in a full 28-year calendar cycle)"
    )


def _to_wall(x: float) -> datetime:
    return _EPOCH + timedelta(seconds=x)


def _from_wall(dt: datetime) -> float:
    return (dt - _EPOCH) / _ONE_SECOND


class CronExpression:
    """A cron expression (5 fields, or 6 with seconds first) in one IANA time zone.

    Immutable and hashable. Two expressions are equal when their text (as given) and
    zone name are equal.

    Args:
        expr: Five fields ``minute hour day-of-month month day-of-week`` with lists,
            ranges, steps, month and day names (any case), ``L``/``LW`` in
            day-of-month and ``nL``/``n#k`` in day-of-week, optionally preceded by a
            sixth, seconds field (``0-59``, same syntax: ``*/15 * * * * *``); the DST
            rules are the same (the seconds are part of the wall time, and a job is
            fixed-time or wildcard by its minute and hour fields); or one of ``@yearly``,
            ``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``,
            ``@hourly``.
        tz: An IANA zone name, a ``ZoneInfo``, or ``"local"`` for the system zone
            (resolved once, here). Defaults to ``"UTC"``.
        seed: The text ``H`` items hash (a job's name); needed when a field uses ``H``
            (``H``, ``H/15``, ``H(0-29)``, ``H(0-29)/10``; see `tickwork._core.spread`).
        calendar: Days the expression does not fire on as it is (a `Calendar`), read
            in ``tz``; ``None``: every day.
        shift: A fire time on a day ``calendar`` excludes is dropped (``"skip"``) or
            moved to the same wall time on the nearest allowed day before it
            (``"previous"``) or after it (``"next"``).

    Raises:
        CronError: The expression is malformed or can never fire (the message names
            the field and shows its value), or the zone is unknown (names ``tz``).
        TypeError: ``expr`` is not a string or ``tz`` is neither a string nor a
            ``ZoneInfo``.

    """

    __slots__ = (
        "_fixed",
        "_hash",
        "_template",
        "_zone",
        "calendar",
        "expr",
        "seed",
        "shift",
        "tz",
        "tz_name",
    )

    expr: str
    tz: ZoneInfo
    tz_name: str
    _template: CronSim
    _zone: _Zone
    _fixed: bool
    _hash: int
    seed: str | None
    calendar: Calendar | None
    shift: Shift

    def __init__(
        self,
        expr: str,
        tz: str | ZoneInfo = "UTC",
        *,
        seed: str | None = None,
        calendar: Calendar | None = None,
        shift: Shift = "skip",
    ) -> None:
        if not isinstance(expr, str):
            raise TypeError(f"expr must be a str, got {type(expr).__name__} {expr!r}")
        if seed is not None and not isinstance(seed, str):
            raise TypeError(f"seed must be a str (a job's name) or None, got {seed!r}")
        if calendar is not None and not isinstance(calendar, Calendar):
            raise TypeError(f"calendar must be a tickwork Calendar or None, got {calendar!r}")
        if (problem := shift_problem(shift)) is not None:
            raise CronError(problem)
        zone = _resolve_tz(tz)
        seconds, parts = _split_seconds(expand_h(_fields(expr), seed, expr))
        template = _parse(expr, parts, seconds)
        _check_possible(expr, parts, template)
        set_ = object.__setattr__
        set_(self, "expr", expr)
        set_(self, "tz", zone)
        set_(self, "tz_name", zone.key if zone.key is not None else str(zone))
        set_(self, "_template", template)
        set_(self, "_zone", _zone(zone))
        # Vixie cron: a job is "wildcard" if its minute or hour field starts with '*'.
        set_(self, "_fixed", not (parts[0].startswith("*") or parts[1].startswith("*")))
        set_(self, "seed", seed)
        set_(self, "calendar", calendar)
        set_(self, "shift", shift)
        set_(self, "_hash", hash((expr, self.tz_name, seed, calendar, shift)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CronExpression is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"CronExpression is immutable; cannot delete {name!r}")

    def __repr__(self) -> str:
        extra = "" if self.seed is None else f", seed={self.seed!r}"
        if self.calendar is not None:
            extra += f", calendar={self.calendar!r}, shift={self.shift!r}"
        return f"CronExpression({self.expr!r}, tz={self.tz_name!r}{extra})"

    def _key(self) -> tuple[object, ...]:
        return (self.expr, self.tz_name, self.seed, self.calendar, self.shift)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronExpression):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:
        return (_rebuild, self._key())

    @property
    def is_fixed_time(self) -> bool:
        """Whether DST rules treat this as a fixed-time job (minute and hour not ``*...``)."""
        return self._fixed

    def next_after(self, t: datetime) -> datetime:
        """Return the first fire time strictly after the instant ``t``.

        Args:
            t: An aware datetime, in any zone.

        Returns:
            An aware datetime in ``self.tz`` (with ``fold`` set in repeated hours).

        Raises:
            TypeError: ``t`` is not a datetime or is naive.
            CronError: No fire time exists before year 9999.

        """
        if not isinstance(t, datetime):
            raise TypeError(f"t must be an aware datetime, got {type(t).__name__} {t!r}")
        if t.tzinfo is None or t.utcoffset() is None:
            raise TypeError(f"t must be an aware datetime (with tzinfo), got naive {t!r}")
        return datetime.fromtimestamp(self._next_ts(t.timestamp()), self.tz)

    def next_after_timestamp(self, ts: float) -> float:
        """Return the first fire time strictly after POSIX time ``ts``, in POSIX seconds.

        Args:
            ts: Seconds since the epoch (a finite int or float).

        Returns:
            Seconds since the epoch of the next fire time.

        Raises:
            TypeError: ``ts`` is not a number.
            ValueError: ``ts`` is not finite.
            CronError: No fire time exists before year 9999.

        """
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise TypeError(f"ts must be a number of seconds, got {type(ts).__name__} {ts!r}")
        if not math.isfinite(ts):
            raise ValueError(f"ts must be a finite number of seconds, got {ts!r}")
        return self._next_ts(float(ts))

    def after_clock_step(self, target: float, seen: float, step: float) -> float:
        """Return the fire time to wait for after the system clock was stepped.

        The rules for steps of the system clock (``docs/cron.md``, "Steps of the
        system clock"): after a step back (``step < 0``) a wildcard job follows real
        time, and so does a fixed-time job when the step is a correction (more than 3
        hours back): the answer is the first fire time after ``seen``, the last moment
        known to have passed, read on the stepped clock. Otherwise the job keeps
        waiting for ``target``: a fixed-time slot that a step back of up to 3 hours
        repeats does not run twice, and a slot that a step forward carried past is
        already due (it runs once, late).

        Args:
            target: The fire time the job was waiting for, POSIX seconds.
            seen: POSIX seconds on the stepped clock: the last clock reading before the
                step was noticed, moved by ``step``.
            step: How far the clock moved, in seconds (negative: set back).

        Returns:
            ``target``, or an earlier fire time when the job follows real time.

        Raises:
            TypeError: an argument is not a number.
            ValueError: an argument is not finite.

        """
        for name, value in (("target", target), ("seen", seen), ("step", step)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(
                    f"{name} must be a number of seconds, got {type(value).__name__} {value!r}"
                )
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
        if step >= 0 or (self._fixed and -step <= _MAX_REPEAT):
            return float(target)
        return min(float(target), self._next_ts(float(seen)))

    def iter_after(self, t: datetime) -> Iterator[datetime]:
        """Yield fire times strictly after ``t``, in order, without end.

        Args:
            t: An aware datetime.

        Yields:
            Aware datetimes in ``self.tz``.

        Raises:
            TypeError: ``t`` is naive.

        """
        current = self.next_after(t)
        while True:
            yield current
            current = self.next_after(current)

    def next_n(self, t: datetime, n: int) -> list[datetime]:
        """Return the first ``n`` fire times strictly after ``t``.

        Args:
            t: An aware datetime.
            n: How many fire times (``>= 0``).

        Returns:
            A list of ``n`` aware datetimes in ``self.tz``.

        Raises:
            TypeError: ``t`` is naive.
            ValueError: ``n`` is negative.

        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        out: list[datetime] = []
        it = self.iter_after(t)
        for _ in range(n):
            out.append(next(it))
        return out

    # -- evaluation ---------------------------------------------------------------

    def _naive_after(self, wall: float) -> float | None:
        """First matching wall time strictly after ``wall`` (naive seconds), or None."""
        it = copy.copy(self._template)
        try:
            it.dt = _to_wall(wall).replace(microsecond=0)
            return _from_wall(next(it))
        except (StopIteration, OverflowError, ValueError):
            return None

    def _next_ts(self, t: float) -> float:
        if self.calendar is None:
            return self._base_next(t)
        return _CalendarWalk(self, self.calendar).next(t)

    def _base_next(self, t: float) -> float:
        zone = self._zone
        fixed = self._fixed
        o = zone.offset(t)
        cur = t
        # Search walls strictly after `lo` (naive seconds).
        lo = t + o
        floor = -math.inf  # fixed-time jobs skip walls below this (second pass)
        if fixed:
            back = zone.last_between(t - _MAX_REPEAT - 60, t)
            if back is not None and 0 < back[1] - back[2] <= _MAX_REPEAT:
                floor = back[0] + back[1]
        while True:
            c = self._naive_after(max(lo, floor - 1))
            if c is None:
                raise CronError(
                    f"expr: `{self.expr}` has no fire time after {_to_wall(t)} UTC before year 9999"
                )
            i = c - o
            tr = zone.first_between(cur, i)
            if tr is None:
                return i
            # No matching wall before the transition: cross it.
            when, before, after = tr
            floor = -math.inf
            if after > before:
                gap = after - before
                if gap < _SMALL_GAP or (fixed and gap < _LARGE_GAP):
                    m = self._naive_after(when + before - 1)
                    if m is not None and m < when + after:
                        return float(when)
            elif fixed and before - after <= _MAX_REPEAT:
                floor = when + before
            cur, o, lo = float(when), after, when + after - 1


def _rebuild(
    expr: str, tz: str, seed: str | None, calendar: Calendar | None, shift: Shift
) -> CronExpression:
    return CronExpression(expr, tz, seed=seed, calendar=calendar, shift=shift)


#: How many allowed days a calendar walk looks at before it gives up (about 10 years).
_MAX_WALK_DAYS = 3700


class _CalendarWalk:
    """The next fire time of an expression whose days a calendar filters or moves.

    The fire times on an allowed day A are the expression's own on A, plus, with
    ``shift="next"``, those of the excluded days just before A (moved to A at the same
    wall time), or with ``shift="previous"`` those of the excluded days just after A.
    The walk visits allowed days from the one holding ``t`` on, jumping over stretches
    where the expression has no fire time at all.
    """

    __slots__ = ("cal", "cron", "shift")

    def __init__(self, cron: CronExpression, cal: Calendar) -> None:
        self.cron, self.cal, self.shift = cron, cal, cron.shift

    def _date(self, ts: float) -> date:
        return datetime.fromtimestamp(ts, self.cron.tz).date()

    def _start_of(self, day: date) -> float:
        return datetime.combine(day, time(), tzinfo=self.cron.tz).timestamp()

    def _sources(self, day: date) -> list[date]:
        """``day`` and the excluded days whose fire times move to it."""
        if self.shift == "skip":
            return [day]
        step = -1 if self.shift == "next" else 1
        out = [day]
        other = day + timedelta(days=step)
        while len(out) < 1100 and self.cal.excludes(other):
            out.append(other)
            other += timedelta(days=step)
        return sorted(out)

    def _first_on(self, source: date, day: date, t: float) -> float | None:
        """The first fire time of ``source`` placed on ``day`` that is after ``t``."""
        base = self.cron._base_next
        after = (
            max(t, self._start_of(source) - 1.0) if source == day else self._start_of(source) - 1.0
        )
        if source != day and day == self._date(t):
            # Only the wall times later than t's on this day count.
            clock = datetime.fromtimestamp(t, self.cron.tz).time()
            after = datetime.combine(source, clock, tzinfo=self.cron.tz).timestamp()
        for _ in range(100_000):
            fire = base(after)
            if self._date(fire) != source:
                return None
            if source == day:
                return fire
            wall = datetime.fromtimestamp(fire, self.cron.tz).time()
            moved = datetime.combine(day, wall, tzinfo=self.cron.tz).timestamp()
            if moved > t:
                return moved
            after = fire
        return None

    def _allowed(self, day: date, step: int = 1) -> date:
        found = self.cal.next_allowed(day, step)
        if found is None:
            raise CronError(
                f"calendar: no day the calendar allows within 3 years of {day} for"
                f" `{self.cron.expr}`"
            )
        return found

    def next(self, t: float) -> float:
        day = self._allowed(self._date(t))
        for _ in range(_MAX_WALK_DAYS):
            sources = self._sources(day)
            found = [f for s in sources if (f := self._first_on(s, day, t)) is not None]
            if found:
                return min(found)
            # Jump to the day that holds (or takes) the next fire time after these days.
            fire = self.cron._base_next(
                max(t, self._start_of(sources[-1] + timedelta(days=1)) - 1.0)
            )
            later = self._date(fire)
            if self.shift == "previous" and self.cal.excludes(later):
                target = self._allowed(later, -1)
            else:
                target = self._allowed(later)
            day = max(target, day + timedelta(days=1))
        raise CronError(
            f"calendar: `{self.cron.expr}` has no fire time on a day the calendar allows"
            " within 10 years"
        )
