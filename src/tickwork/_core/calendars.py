"""Calendars: days a schedule does not fire on, and the rule for a slot that falls on one.

A `Calendar` is a plain value: explicit dates and ranges, a weekly pattern (the days of
the week it excludes) and, optionally, the public holidays of a country or subdivision.
The holidays come from the `holidays` package (``pip install 'tickwork[holidays]'``),
imported lazily the first time a calendar with ``holidays`` is made, never by the core
otherwise: the rest of tickwork has no use for it, and we keep no table of our own.

A cron schedule takes ``calendar=`` and ``shift=``: a slot on an excluded day is
skipped (``"skip"``), or moved to the same wall time on the nearest day the calendar
allows before it (``"previous"``) or after it (``"next"``). The arithmetic lives in
`tickwork._core.cron` (`CronExpression`), so every place that asks a cron schedule for
its next slot (the in-memory plans, the durable scheduler, backfill, ``tickwork next``)
sees the same days.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from typing import Any, Final, Literal, TypeAlias, get_args

__all__ = ["SHIFTS", "WEEKDAYS", "Calendar", "CalendarError", "Shift"]

#: What a cron slot on an excluded day does: dropped, or moved to the nearest allowed
#: day before or after it (same wall time).
Shift: TypeAlias = Literal["skip", "previous", "next"]
SHIFTS: Final[tuple[Shift, ...]] = get_args(Shift)
#: The names of the days of the week, Monday first (``date.weekday()`` order).
WEEKDAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_LONG = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_HOLIDAYS_CODE: Final = re.compile(r"([A-Z]{2,3})(?:-([A-Z0-9]{1,3}))?")
_RANGE_SEP: Final = ".."
#: The most days apart the two ends of one range may be (about 100 years).
_MAX_RANGE_DAYS: Final = 36525


class CalendarError(ValueError):
    """A calendar argument is invalid, or its holidays cannot be looked up."""


def _day(name: str, value: object) -> date:
    if isinstance(value, date) and not hasattr(value, "hour"):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise CalendarError(
        f"{name} must be dates ('2025-12-24') or ranges ('2025-12-24..2026-01-01'), got {value!r}"
    )


def _span(value: object) -> tuple[date, date]:
    """One entry of ``dates``: a day, ``"a..b"`` or a ``(a, b)`` pair; ends included."""
    if isinstance(value, str) and _RANGE_SEP in value:
        first, _, last = value.partition(_RANGE_SEP)
        pair: tuple[object, object] = (first, last)
    elif isinstance(value, tuple | list) and len(value) == 2:
        pair = (value[0], value[1])
    else:
        one = _day("dates", value)
        return one, one
    start, end = _day("dates", pair[0]), _day("dates", pair[1])
    if end < start or (end - start).days > _MAX_RANGE_DAYS:
        raise CalendarError(
            "dates: a range must end on or after its start and span at most 100 years,"
            f" got {value!r}"
        )
    return start, end


def _weekday(value: object) -> int:
    if isinstance(value, str):
        key = value.strip().lower()
        if key in WEEKDAYS:
            return WEEKDAYS.index(key)
        if key in _LONG:
            return _LONG.index(key)
    raise CalendarError(
        f"weekdays must be day names {', '.join(repr(d) for d in WEEKDAYS)}, got {value!r}"
    )


def _holidays_code(value: object) -> tuple[str, str | None]:
    """``"DE"`` or ``"DE-BY"`` (ISO 3166 country, optional subdivision) as a pair."""
    match = _HOLIDAYS_CODE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise CalendarError(
            "holidays must be a country code, optionally with a subdivision, such as"
            f" 'DE', 'DE-BY', 'US' or 'GB-ENG', got {value!r}"
        )
    return match.group(1), match.group(2)


def _holidays_module() -> Any:
    try:
        return importlib.import_module("holidays")
    except ImportError:
        raise CalendarError(
            "holidays needs the 'holidays' package: pip install 'tickwork[holidays]'"
        ) from None


@lru_cache(maxsize=256)
def _holiday_days(code: str, year: int) -> frozenset[date]:
    """The public holidays of ``code`` (``"DE-BY"``) in ``year``, observed days included."""
    country, subdiv = _holidays_code(code)
    module = _holidays_module()
    known = module.list_supported_countries()
    if country not in known:
        raise CalendarError(
            f"holidays: the holidays package has no country {country!r}, got {code!r}"
        )
    if subdiv is not None and subdiv not in known[country]:
        raise CalendarError(
            f"holidays: the holidays package has no subdivision {subdiv!r} of {country},"
            f" got {code!r}"
        )
    return frozenset(module.country_holidays(country, subdiv=subdiv, years=year))


@dataclass(frozen=True, slots=True, init=False)
class Calendar:
    """Days excluded from a schedule: dates, ranges, days of the week and public holidays.

    ``Calendar(weekdays=["sat", "sun"], holidays="DE-BY")`` is "business days in
    Bavaria"; `Calendar.business_days` says the same. Give it to a cron schedule
    (``Cron("0 9 1 * *", calendar=cal, shift="next")``: the first business day of the
    month at 09:00); the days are read in the schedule's time zone.

    Args:
        dates: Excluded days: ISO dates (``"2025-12-24"``), `datetime.date` values,
            ranges with both ends included (``"2025-12-24..2026-01-01"`` or a pair).
        weekdays: Excluded days of the week by name (``"sat"``, ``"sunday"``, any case).
        holidays: The public holidays of a country, optionally of a subdivision:
            ``"DE"``, ``"DE-BY"``, ``"US"``, ``"GB-ENG"`` (ISO 3166 codes as the
            `holidays` package knows them; observed days included). Needs
            ``pip install 'tickwork[holidays]'``.

    Raises:
        CalendarError: A value is malformed, every day of the week is excluded, the
            country or subdivision is unknown, or ``holidays`` is set and the package
            is not installed (the message names the extra).
    """

    dates: tuple[str, ...]
    """The excluded days and ranges, as ISO text (``"2025-12-24"``, ``"a..b"``), in order."""
    weekdays: tuple[str, ...]
    """The excluded days of the week, short names in week order (``("sat", "sun")``)."""
    holidays: str | None
    """The holiday code (``"DE-BY"``), or ``None``."""
    _spans: tuple[tuple[date, date], ...]
    _weekly: frozenset[int]

    def __init__(
        self,
        *,
        dates: Iterable[object] = (),
        weekdays: Iterable[str] = (),
        holidays: str | None = None,
    ) -> None:
        if isinstance(dates, str | date) or not isinstance(dates, Iterable):
            raise CalendarError(f"dates must be a list of dates or ranges, got {dates!r}")
        if isinstance(weekdays, str) or not isinstance(weekdays, Iterable):
            raise CalendarError(f"weekdays must be a list of day names, got {weekdays!r}")
        spans = sorted({_span(v) for v in dates})
        weekly = frozenset(_weekday(v) for v in weekdays)
        if len(weekly) == 7:
            raise CalendarError("weekdays must leave at least one day of the week, got all seven")
        if holidays is not None:
            _holidays_code(holidays)
            _holiday_days(holidays, 2000)  # the package is there and knows the code
        text = tuple(a.isoformat() if a == b else f"{a}{_RANGE_SEP}{b}" for a, b in spans)
        set_ = object.__setattr__
        set_(self, "dates", text)
        set_(self, "weekdays", tuple(WEEKDAYS[i] for i in sorted(weekly)))
        set_(self, "holidays", holidays)
        set_(self, "_spans", tuple(spans))
        set_(self, "_weekly", weekly)

    @classmethod
    def business_days(
        cls, holidays: str | None = None, *, dates: Iterable[object] = ()
    ) -> Calendar:
        """Monday to Friday, less the public holidays of ``holidays`` and ``dates``."""
        return cls(dates=dates, weekdays=("sat", "sun"), holidays=holidays)

    def __repr__(self) -> str:
        return (
            f"Calendar(dates={list(self.dates)!r}, weekdays={list(self.weekdays)!r},"
            f" holidays={self.holidays!r})"
        )

    def excludes(self, day: date) -> bool:
        """Whether ``day`` is excluded (a schedule does not fire on it as it is)."""
        if day.weekday() in self._weekly:
            return True
        for start, end in self._spans:
            if start <= day <= end:
                return True
        return self.holidays is not None and day in _holiday_days(self.holidays, day.year)

    def allows(self, day: date) -> bool:
        """Whether ``day`` is a day the calendar lets a schedule fire on."""
        return not self.excludes(day)

    def next_allowed(self, day: date, step: int = 1) -> date | None:
        """The first allowed day from ``day`` on (``step=-1``: back); ``None`` within 3 years."""
        for _ in range(1100):
            if not self.excludes(day):
                return day
            day += timedelta(days=step)
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps; empty parts are left out."""
        out: dict[str, Any] = {}
        if self.dates:
            out["dates"] = list(self.dates)
        if self.weekdays:
            out["weekdays"] = list(self.weekdays)
        if self.holidays is not None:
            out["holidays"] = self.holidays
        return out

    @classmethod
    def from_dict(cls, data: object) -> Calendar:
        """The calendar of a `to_dict` form (also a jobs file's ``[calendar.NAME]`` table).

        Raises:
            CalendarError: Not a table, an unknown key, or a bad value.
        """
        if not isinstance(data, dict):
            raise CalendarError(f"calendar must be a table, got {data!r}")
        unknown = sorted(str(k) for k in data if k not in ("dates", "weekdays", "holidays"))
        if unknown:
            raise CalendarError(
                f"calendar has unknown key {unknown[0]!r} (known: dates, weekdays, holidays)"
            )
        return cls(
            dates=data.get("dates", ()),
            weekdays=data.get("weekdays", ()),
            holidays=data.get("holidays"),
        )


def shift_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a `Shift`, or None."""
    if isinstance(value, str) and value in SHIFTS:
        return None
    return f"shift must be one of {', '.join(repr(s) for s in SHIFTS)}, got {value!r}"
