"""The jobs file's calendars and spreading: ``[calendar.NAME]`` tables, job keys.

The job keys are ``calendar``, ``shift``, ``seed`` and ``stable_jitter``.

```toml
[calendar.work]
weekdays = ["sat", "sun"]
holidays = "DE-BY"
dates = ["2026-12-24..2026-12-31"]

[[job]]
name = "report"
cron = "0 9 1 * *"      # the first business day of the month at 09:00
calendar = "work"
shift = "next"
```

A cron job using ``H`` and a job with ``stable_jitter = true`` hash the job's name
unless ``seed`` says otherwise, so the same file gives the same minutes on every host.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from tickwork._core.calendars import SHIFTS, Calendar, CalendarError, shift_problem
from tickwork._core.errors import CronError
from tickwork._core.schedules import Schedule

__all__ = [
    "CALENDAR_DEFAULT_KEYS",
    "CALENDAR_JOB_KEYS",
    "check_calendar",
    "parse_calendars",
    "with_calendar",
]

#: The keys of this module a ``[defaults]`` table may set.
CALENDAR_DEFAULT_KEYS: Final = frozenset({"calendar", "shift", "stable_jitter"})
#: The keys of this module a ``[[job]]`` table may set.
CALENDAR_JOB_KEYS: Final = CALENDAR_DEFAULT_KEYS | {"seed"}

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

_Path = tuple[str | int, ...]
Add = Callable[[str, _Path, str, str], None]


def parse_calendars(add: Add, doc: Mapping[str, Any]) -> dict[str, Calendar]:
    """The ``[calendar.NAME]`` tables of a jobs file, by name; problems go to ``add``."""
    raw = doc.get("calendar", {})
    if not isinstance(raw, dict):
        add("", ("calendar",), "calendar", "must be tables: write each one as [calendar.NAME]")
        return {}
    out: dict[str, Calendar] = {}
    for name, table in raw.items():
        where = f'calendar "{name}"'
        at: _Path = ("calendar", name)
        if not _NAME.fullmatch(name):
            add(where, at, "calendar", "a calendar's name must be 1-100 letters, digits or '_.-'")
            continue
        if not isinstance(table, dict):
            add(where, at, "calendar", f"must be a table [calendar.{name}]")
            continue
        try:
            out[name] = Calendar.from_dict(table)
        except CalendarError as exc:
            message = str(exc)
            key = next((k for k in ("dates", "weekdays", "holidays") if message.startswith(k)), "")
            add(where, (*at, key) if key in table else at, key or "calendar", message)
    return out


def _given(table: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> Any:
    return table.get(key, defaults.get(key))


def _calendar_problems(
    schedule: Schedule, cal_name: object, shift: object, calendars: Mapping[str, Calendar]
) -> tuple[list[tuple[str, str]], Calendar | None]:
    problems: list[tuple[str, str]] = []
    calendar: Calendar | None = None
    if cal_name is not None and not schedule.takes_calendar:
        problems.append(("calendar", "applies only to every and cron schedules"))
    elif cal_name is not None:
        calendar = calendars.get(cal_name) if isinstance(cal_name, str) else None
        if calendar is None:
            known = ", ".join(sorted(calendars)) or "none"
            problems.append(
                (
                    "calendar",
                    f"must name a [calendar.NAME] table (defined: {known}), got {cal_name!r}",
                )
            )
    if shift is not None:
        if (problem := shift_problem(shift)) is not None:
            problems.append(("shift", problem.removeprefix("shift ")))
        elif cal_name is None:
            problems.append(("shift", f"needs a calendar (shift is one of {', '.join(SHIFTS)})"))
        elif not schedule.takes_shift and shift != "skip":
            problems.append(
                ("shift", "applies only to cron schedules (an interval skips excluded days)")
            )
    return problems, calendar


def _spread_problems(schedule: Schedule, stable: object, seed: object) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if stable is not None and not isinstance(stable, bool):
        problems.append(("stable_jitter", f"must be true or false, got {stable!r}"))
    elif stable and not schedule.takes_calendar:
        problems.append(("stable_jitter", "applies only to every and cron schedules"))
    elif stable and not getattr(schedule, "jitter", 0.0):
        problems.append(("stable_jitter", "needs a jitter to keep stable"))
    if seed is not None and (not isinstance(seed, str) or not seed):
        problems.append(("seed", f"must be a non-empty string, got {seed!r}"))
    elif seed is not None and not schedule.takes_calendar:
        problems.append(("seed", "applies only to every and cron schedules"))
    return problems


def check_calendar(
    add: Add,
    where: str,
    at: _Path,
    job: tuple[Mapping[str, Any], Mapping[str, Any], str],
    schedule: Schedule,
    calendars: Mapping[str, Calendar],
) -> Calendar | Literal[False] | None:
    """Report the problems of the job's calendar keys for its kind of ``schedule``.

    Returns the job's calendar (``None`` for none), or ``False`` when a problem was
    reported. ``schedule`` may stand in for one whose own value is wrong: only what its
    kind takes (`Schedule.takes_calendar`, ``takes_shift``) and its jitter are read, so
    the schedule's problem hides none of these.
    """
    table, defaults, _ = job
    if not schedule.takes_calendar:
        defaults = {}
    cal_name, shift = _given(table, defaults, "calendar"), _given(table, defaults, "shift")
    stable, seed = _given(table, defaults, "stable_jitter"), table.get("seed")
    problems, calendar = _calendar_problems(schedule, cal_name, shift, calendars)
    problems += _spread_problems(schedule, stable, seed)
    for key, message in problems:
        add(where, (*at, key) if key in table else at, key, message)
    return False if problems else calendar


def with_calendar(
    add: Add,
    where: str,
    at: _Path,
    job: tuple[Mapping[str, Any], Mapping[str, Any], str],
    schedule: Schedule,
    calendars: Mapping[str, Calendar],
) -> Schedule | None:
    """``schedule`` with the job's calendar, shift, seed and stable jitter; None on a problem.

    ``job`` is the job's table, the ``[defaults]`` and the job's name (the default seed).
    The ``[defaults]`` do not apply to one-shots (``at``, ``in``), as ``jitter``'s.
    """
    table, defaults, name = job
    calendar = check_calendar(add, where, at, job, schedule, calendars)
    if calendar is False or not schedule.takes_calendar:
        return None if calendar is False else schedule
    shift, seed = _given(table, defaults, "shift"), table.get("seed")
    spread: dict[str, Any] = {}
    if _given(table, defaults, "stable_jitter"):
        spread["stable_jitter"] = True
    if seed is not None:
        spread["seed"] = seed
    tz = _given(table, defaults, "timezone") or "UTC"
    try:
        return schedule.with_calendar(calendar, shift or "skip", tz, **spread)._seeded(name)
    except (CronError, CalendarError) as exc:
        add(where, at, "cron", str(exc))
        return None
    except ValueError as exc:  # an every job's timezone, with its calendar
        add(where, at, "timezone", str(exc))
        return None
