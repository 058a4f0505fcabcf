"""Times and schedules for people: ISO 8601 instants and schedules in words.

`iso` formats POSIX seconds as UTC ISO 8601, in logs, warnings and the CLI. Every
formatter of an instant here takes any float: one that no calendar can show (outside the
years 1 to 9999, which new values are refused; a state may still hold one) comes back as
`out_of_range`'s words, the same on every surface, so that nothing that reads the state
fails on it.
`schedule_words` covers the common shapes of cron expressions (fixed times, steps of
minutes or hours, weekday and month lists and ranges) and says nothing it is not sure
of: for anything else it returns ``None``, and the caller shows the expression.
"""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tickwork._core.cron import _MONTH_NAMES

__all__ = [
    "cron_words",
    "human_duration",
    "iso",
    "iso_due",
    "job_zone",
    "local_and_utc",
    "local_time",
    "out_of_range",
    "plain_seconds",
    "relative_time",
    "run_duration",
    "schedule_words",
    "seconds_fixed",
    "short_duration",
    "utc_time",
    "zoned_time",
]


def out_of_range(ts: float) -> str:
    """What every surface shows for a time no calendar can show.

    ``out of range: 8.64e+15 s since 1970, after the year 9999``: the number, and which
    end of the calendar it is past (never a bare float, which would read as a time).
    """
    if math.isnan(ts):
        return "not a time (nan)"
    side = "after the year 9999" if ts > 0 else "before the year 1"
    return f"out of range: {ts:g} s since 1970, {side}"


def _utc(ts: float) -> datetime | None:
    """``ts`` as an aware UTC `datetime`, or None where no calendar can show it."""
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def iso(ts: float, *, millis: bool = False) -> str:
    """Format POSIX seconds as UTC ISO 8601 with a ``Z``: ``2026-12-02T17:00:00Z``.

    ``millis`` adds milliseconds (``17:00:00.250Z``). A value no calendar can show (out
    of range, not finite) comes back as `out_of_range`'s words, so nothing fails on it.
    """
    moment = _utc(ts)
    if moment is None:
        return out_of_range(ts)
    return moment.isoformat(timespec="milliseconds" if millis else "seconds").replace("+00:00", "Z")


_DAYS: Final = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS: Final = _MONTH_NAMES


def _ints(field: str, low: int, high: int) -> list[int] | None:
    """The numbers of a field made of numbers, ranges and commas; None otherwise."""
    out: list[int] = []
    for part in field.split(","):
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            return None
        first, last = int(a), int(b) if sep else int(a)
        if not low <= first <= last <= high:
            return None
        out.extend(range(first, last + 1))
    return sorted(set(out))


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _days(field: str) -> str | None:
    if field == "*":
        return ""
    if field in ("1-5", "MON-FRI", "mon-fri"):
        return "Monday to Friday"
    numbers = _ints(field, 0, 7)
    if numbers is None:
        return None
    days = sorted({n % 7 for n in numbers}, key=lambda d: (d == 0, d))  # Sunday last
    if days == [6, 0]:
        return "Saturday and Sunday"
    return "on " + _join([_DAYS[d] for d in days])


def _time_of_day(minute: str, hour: str, second: str) -> str | None:
    if second != "0":
        return None
    if minute == "*" and hour == "*":
        return "every minute"
    if minute.startswith("*/") and minute[2:].isdigit() and hour == "*":
        return f"every {int(minute[2:])} minutes"
    minutes = _ints(minute, 0, 59)
    if minutes is None or len(minutes) != 1:
        return None
    m = minutes[0]
    if hour == "*":
        return f"every hour at minute {m}"
    if hour.startswith("*/") and hour[2:].isdigit():
        return f"every {int(hour[2:])} hours at minute {m}"
    hours = _ints(hour, 0, 23)
    if hours is None or len(hours) > 6:
        return None
    return "at " + _join([f"{h:02d}:{m:02d}" for h in hours])


def cron_words(expr: str) -> str | None:
    """A 5- or 6-field (seconds first) cron expression in words, or ``None``."""
    fields = expr.split()
    if len(fields) == 5:
        fields.insert(0, "0")
    if len(fields) != 6:
        return None
    second, minute, hour, dom, month, dow = fields
    when = _time_of_day(minute, hour, second)
    days = _days(dow)
    if when is None or days is None:
        return None
    parts = [when]
    if dom != "*":
        numbers = _ints(dom, 1, 31)
        if numbers is None or len(numbers) != 1 or dow != "*":
            return None
        parts.append(f"on day {numbers[0]} of the month")
    if days:
        parts.append(days)
    if month != "*":
        months = _ints(month, 1, 12)
        if months is None:
            return None
        parts.append("in " + _join([_MONTHS[n - 1] for n in months]))
    return ", ".join(parts)


def schedule_words(schedule: Any) -> str:
    """Any schedule value in words; a cron that `cron_words` cannot say shows itself."""
    words: str = schedule.describe()
    return words


def cron_schedule_words(expr: str, zone: str, calendar: Any, shift: str) -> str:
    """A cron schedule in words: its expression said plainly (or shown), zone, calendar."""
    words = cron_words(expr)
    text = f"{words} ({zone})" if words else f"cron '{expr}' ({zone})"
    return text + _calendar_words(calendar, shift)


def interval_words(seconds: float, fixed_delay: bool) -> str:
    """An interval schedule in words (``"every 5 minutes"``)."""
    if seconds % 3600 == 0 and seconds >= 3600:
        text = f"every {seconds / 3600:g} hour{'s' if seconds != 3600 else ''}"
    elif seconds % 60 == 0 and seconds >= 60:
        text = f"every {seconds / 60:g} minute{'s' if seconds != 60 else ''}"
    else:
        text = f"every {seconds:g} second{'s' if seconds != 1 else ''}"
    if fixed_delay:
        text += ", counted from the end of each run"
    return text


def _calendar_words(calendar: Any, shift: str) -> str:
    """``", not on sat, sun, DE-BY holidays (moved to the next allowed day)"``, or ``""``."""
    if calendar is None:
        return ""
    parts = [*calendar.weekdays]
    if calendar.holidays is not None:
        parts.append(f"{calendar.holidays} holidays")
    if calendar.dates:
        n = len(calendar.dates)
        parts.append(f"{n} excluded date{'s' if n != 1 else ''}")
    moved = {
        "previous": " (moved to the previous allowed day)",
        "next": " (moved to the next allowed day)",
    }
    return f", not on {', '.join(parts)}{moved.get(shift, '')}"


# -- instants and durations, as each surface shows them ----------------------------------


def iso_due(ts: float) -> str:
    """A due time for the run log: ISO 8601, milliseconds only when not a whole second."""
    return iso(ts, millis=round(ts, 3) % 1 != 0)


def utc_time(ts: float | None) -> str:
    """``2026-12-02 17:00:00 UTC``; ``-`` for no time (`zoned_time` in UTC)."""
    return zoned_time(ts)


def zoned_time(ts: float | None, zone: str = "UTC") -> str:
    """``2026-12-02 18:00:00 CET``: the pages' one format of an instant, in a job's zone.

    ``zone``: an IANA name (a job's schedule's ``tz``); one this machine does not know is
    read as UTC, so a page never fails on a state written elsewhere. ``-`` for no time.
    """
    if ts is None:
        return "-"
    moment = _utc(ts)
    if moment is None:
        return out_of_range(ts)
    if zone != "UTC":
        with contextlib.suppress(ZoneInfoNotFoundError, ValueError, OverflowError):
            moment = moment.astimezone(ZoneInfo(zone))
    return moment.strftime("%Y-%m-%d %H:%M:%S ") + (moment.tzname() or "UTC")


def job_zone(schedule: Any) -> str:
    """The zone a job's times are shown in: its schedule's ``tz``, else ``UTC``."""
    zone = getattr(schedule, "tz", None)
    return zone if isinstance(zone, str) and zone else "UTC"


def local_and_utc(ts: float | None) -> str:
    """ISO 8601 in local time with its offset, then UTC: for people reading the state.

    Once (``...Z``) where local time is UTC at that instant: the same text twice says
    nothing more.
    """
    if ts is None:
        return "-"
    utc = iso(ts)
    try:
        moment = datetime.fromtimestamp(ts).astimezone()
    except (OverflowError, OSError, ValueError):
        return utc  # out of range, or in UTC only (the local year would be 0 or 10000)
    if not moment.utcoffset():
        return utc
    return f"{moment.isoformat(timespec='seconds')} ({utc})"


def local_time(ts: float | None) -> str:
    """``2026-12-02 18:00:00 CET`` in local time, for a table of jobs; ``-`` for none.

    A value no calendar can show comes back as `iso` shows it (`out_of_range`'s words).
    """
    if ts is None:
        return "-"
    try:
        moment = datetime.fromtimestamp(ts).astimezone()
    except (OverflowError, OSError, ValueError):
        return iso(ts)
    return moment.strftime("%Y-%m-%d %H:%M:%S ") + (moment.tzname() or moment.strftime("%z"))


def relative_time(now: float, ts: float | None) -> str:
    """``in 5 s`` / ``3 min ago`` / ``in 4 h 10 min`` / ``30 d ago``: ``ts`` seen from ``now``.

    Empty for no time, and for one no calendar can show.
    """
    if ts is None or _utc(ts) is None:
        return ""
    delta = ts - now
    word = "in" if delta >= 0 else "ago"
    s = abs(delta)
    text = f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else human_duration(s)
    return f"{word} {text}" if word == "in" else f"{text} {word}"


#: Beyond this many seconds (about 31,700 years, longer than any time a calendar holds),
#: a number of seconds is shown in exponent form: only a corrupt state holds one.
_ABSURD: Final = 1e12


def seconds_fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals (``0.250``); an absurd one as ``1e+300``."""
    return f"{value:.{digits}f}" if abs(value) < _ABSURD else f"{value:g}"


def run_duration(value: float) -> str:
    """How long a run took, for the run log: ``0.25s``, ``12.5s``, ``4m05s``, ``1h02m03s``."""
    if not abs(value) < _ABSURD:
        return f"{value:g}s"
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(round(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def short_duration(value: float | None) -> str:
    """A lateness or a run's length on the status page: ``250 ms``, ``1.50 s``, ``30 d``; ``-``."""
    if value is None:
        return "-"
    return human_duration(value)


def plain_seconds(value: float) -> str:
    """A duration as the options write it: ``30s``, ``0.5s``."""
    return f"{value:g}s"


#: The levels of `human_duration` from one minute on: (larger unit, smaller unit, the
#: larger in the smaller, words), each used while the span is below the next level.
_LEVELS: Final = ((60, 1, 60, "min", "s"), (3600, 60, 60, "h", "min"), (86400, 3600, 24, "d", "h"))


def human_duration(value: float) -> str:
    """A span of time as a person reads it: ``250 ms``, ``4 h 10 min``, ``30 d``.

    Also ``1.50 s``, ``42 s``, ``4 min 10 s``, ``2 d 3 h``: at most two units from one
    minute on, the smaller rounded (``2591807.85`` seconds is ``30 d``). A negative
    value is shown as its size; one that is not finite as its ``repr`` with ``s``, so
    a page never fails on it.
    """
    s = abs(value)
    if not s < _ABSURD:  # not finite, or only in a corrupt state
        return f"{value:g} s"
    if round(s * 1000) < 1000:
        return f"{s * 1000:.0f} ms"
    if round(s, 2) < 10:
        return f"{s:.2f} s"
    if round(s) < 60:
        return f"{s:.0f} s"
    for i, (_, small, per, word, small_word) in enumerate(_LEVELS):
        count = round(s / small)  # in the smaller unit
        if i + 1 < len(_LEVELS) and count >= _LEVELS[i + 1][0] // small:
            continue  # rounds up into the next level
        big, rest = divmod(count, per)
        return f"{big} {word}" + (f" {rest} {small_word}" if rest else "")
    raise AssertionError("unreachable")  # pragma: no cover
