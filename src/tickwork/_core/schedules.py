"""Schedules as values: `Once`, `At`, `Every` and `Cron`.

A schedule is a small immutable value that answers "when is the next run?". It is
plain data (a store can save it, the CLI can parse it) and knows nothing about tasks.
When a schedule is given to a scheduler, it makes a *plan*: the per-task mutable state
(the current grid slot, the current jitter draw, the current wall-clock target) that the
core consults after each run. Plans are private; the core calls them only off its fast
path (plain one-shots and plain fixed-rate intervals never make one).

Two clocks meet here. Due times in the core are on its monotonic clock; calendar
schedules (`At`, `Cron`) are about the wall clock. A plan is told ``offset``, the wall
clock minus the monotonic clock at the current tick, to convert between the two; when
that offset jumps (NTP step, suspend/resume) the core re-anchors wall plans with it, and
each plan applies the clock-step rules of ``docs/cron.md`` ("Steps of the system clock").
"""

from __future__ import annotations

import math
import random
import re
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import UTC, datetime, time, timedelta
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar
from zoneinfo import ZoneInfo

from tickwork._core.args import bounded, in_calendar, instant_rule, seconds, too_long
from tickwork._core.calendars import Calendar, CalendarError, Shift
from tickwork._core.spread import has_h, stable_fraction

if TYPE_CHECKING:
    from tickwork._core.cron import CronExpression

__all__ = [
    "At",
    "Cron",
    "Every",
    "Grid",
    "Once",
    "Schedule",
    "ScheduleDecorators",
    "parse_duration",
]

F = TypeVar("F", bound=Callable[..., object])


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)


#: A duration as a schedule takes it: seconds, a `timedelta`, or text as the jobs file
#: writes it (``"10s"``, ``"1h30m"``, `parse_duration`).
Duration = float | str | timedelta


def seconds_arg(name: str, value: object, *, positive: bool) -> float:
    """Validate a duration argument and return it as a float.

    Raises:
        TypeError: ``value`` is not a real number (a `bool` is refused too).
        ValueError: ``value`` is negative (or zero when ``positive``), NaN or infinite.
    """
    return seconds(name, value, bound="> 0" if positive else ">= 0")


def duration_arg(name: str, value: object, *, positive: bool) -> float:
    """Validate a schedule's `Duration` argument and return it as float seconds.

    Raises:
        TypeError: ``value`` is not a number, `timedelta` or string (a `bool` is refused).
        ValueError: ``value`` is negative (or zero when ``positive``), NaN or infinite,
            or text that is not a duration; the message names ``name`` and shows it.
    """
    given = value
    if isinstance(value, timedelta):
        value = value.total_seconds()
    elif isinstance(value, str):
        try:
            value = parse_duration(value)
        except DurationTooLong:
            raise ValueError(
                f"{name} must be at most 365000 days (about 1000 years), got {given!r}"
            ) from None
        except ValueError:
            raise ValueError(
                f"{name} must be a number of seconds, a timedelta or a duration like '10s',"
                f" '5m' or '1h30m', got {given!r}"
            ) from None
    try:
        return seconds_arg(name, value, positive=positive)
    except ValueError as exc:
        if given is value:
            raise
        raise ValueError(f"{str(exc).rsplit(', got ', 1)[0]}, got {given!r}") from None


_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d|w)")


class DurationTooLong(ValueError):
    """A well-formed duration longer than 365,000 days (`tickwork._core.args.MAX_SECONDS`)."""


def parse_duration(text: str) -> float:
    """Parse a human duration such as ``"30s"``, ``"5m"``, ``"1h30m"`` or ``"250ms"``.

    Units: ``ms``, ``s``, ``m``, ``h``, ``d``, ``w``; parts add up. A bare number is
    seconds. At most 365,000 days (about 1,000 years), so that now plus the duration is
    a time a calendar can show.

    Raises:
        DurationTooLong: A duration, too long; the message shows the text.
        ValueError: the text is not a duration; the message shows it.
    """
    if not isinstance(text, str):
        raise TypeError(f"duration must be a string like '30s', got {text!r}")
    s = text.strip().replace(" ", "")
    try:
        total = float(s)
    except ValueError:
        total = math.nan
    if total == math.inf and any(c.isdigit() for c in s):
        pass  # a number too large for a float ("1e400"): too long, said below
    elif not (math.isfinite(total) and total >= 0):
        pos, total = 0, 0.0
        for m in _DURATION.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ValueError(
                f"duration must look like '30s', '5m', '1h30m' or '250ms', got {text!r}"
            )
    if too_long(total):  # ``inf`` too: ``"1e400"``, 400 nines and a unit
        raise DurationTooLong(
            f"duration must be at most 365000 days (about 1000 years), got {text!r}"
        )
    return total


def _jitter_arg(value: object) -> float:
    return duration_arg("jitter", value, positive=False)


def instant_arg(name: str, value: object) -> float:
    """An aware `datetime` or finite POSIX seconds, as POSIX seconds (UTC).

    The instant must fall in the years 1 to 9999 (UTC), where every surface can show it.

    Raises:
        TypeError: Neither a `datetime` nor a finite real number (a `bool` is refused).
        ValueError: A naive `datetime` (no time zone): its instant would depend on the
            host; or an instant outside the years 1 to 9999.
    """
    if type(value) is float and in_calendar(value):  # the common case (NaN is not in it)
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime (with a time zone), got {value!r}")
        number = value.timestamp()
    elif isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be an aware datetime or finite POSIX seconds, got {value!r}")
    else:
        number = float(value)
    if not in_calendar(number) and bounded():
        raise ValueError(f"{instant_rule(name)}, got {value!r}")
    return number


def _until_arg(value: object) -> float | None:
    return None if value is None else instant_arg("until", value)


class Schedule:
    """Base class of the schedule values; use `Once`, `At`, `Every` or `Cron`.

    The protocol every kind answers, so that no caller asks which kind it has: its first
    run (`first_run`), the slot after one of its slots (`next_after`), its slots in a
    range (`grid`), whether it repeats (`repeats`) and whether its next run is counted
    from the end of a run (`after_finish`); what a jobs file may add to it
    (`takes_calendar`, `takes_shift`, `with_calendar`) and the form a store keeps of it
    (`declared`). Times are POSIX seconds (UTC).
    """

    __slots__ = ()

    #: Whether the schedule is about the wall clock (re-anchored when it jumps).
    wall: ClassVar[bool] = False
    #: Whether the schedule has more than one slot (`Once` and `At` have one).
    repeats: ClassVar[bool] = True
    #: Whether it takes a calendar, a stable jitter and a seed (`with_calendar`).
    takes_calendar: ClassVar[bool] = False
    #: Whether its calendar may move a slot on an excluded day (a shift but ``"skip"``).
    takes_shift: ClassVar[bool] = False

    @property
    def period(self) -> float | None:
        """The seconds between its slots when it counts them in seconds (an interval's)."""
        return None

    @property
    def after_finish(self) -> bool:
        """Whether the next run is counted from the end of a run (fixed-delay)."""
        return False

    @property
    def fixed_time(self) -> bool:
        """Whether its slots are times of day that a short clock step leaves alone."""
        return False

    def describe(self) -> str:
        """The schedule in words, for people (``"every 5 minutes"``)."""
        raise NotImplementedError

    def first_run(self, now: float) -> float | None:
        """The first due time if declared at ``now``; ``None``: it ended (its ``until``).

        Raises:
            CronError: A cron expression or its zone is invalid here.
            CalendarError: A calendar leaves no allowed day.
        """
        raise NotImplementedError

    def next_after(self, slot: float) -> float | None:
        """The slot after ``slot``; ``None`` for a one-shot, or one after the ``until``.

        A fixed-delay interval's is one interval later, as if a run ended at ``slot``.
        """
        return None

    def grid(self, through: float) -> Grid | None:
        """Its grid of slots, laid through the slot ``through``.

        ``None`` for a schedule without one (`Once`, a fixed-delay interval); `At`'s
        has its one instant.
        """
        return None

    @property
    def cron_expression(self) -> CronExpression | None:
        """The parsed cron expression its slots follow (a `Cron`'s); else None."""
        return None

    def declared(self, now: float) -> Schedule:
        """The schedule a store keeps when it is declared at ``now``.

        Itself, but one counted from ``now`` (`Once`) becomes the instant it is due (`At`).
        """
        return self

    def with_calendar(
        self, calendar: Calendar | None, shift: Shift, tz: str, **spread: Any
    ) -> Schedule:
        """This schedule with ``calendar`` (``None``: its days unchanged) and ``spread``.

        ``shift`` is for a kind that `takes_shift`, ``tz`` (the zone its days are read
        in) for one without a zone of its own; ``spread`` sets ``stable_jitter`` and
        ``seed``. Only for a kind that `takes_calendar`.

        Raises:
            TypeError: This kind takes no calendar.
        """
        raise TypeError(f"calendar: {self!r} takes no calendar, stable jitter or seed")

    def _plan(self, rng: random.Random) -> _Plan:
        raise NotImplementedError

    def _seeded(self, name: str | None) -> Schedule:
        """This schedule with ``name`` as its seed when it needs one and has none."""
        return self


def _seed_arg(value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"seed must be a non-empty str (a job's name) or None, got {value!r}")
    return value


def _stable_arg(value: object) -> bool:
    if value is not True and value is not False:
        raise TypeError(f"stable_jitter must be a bool, got {value!r}")
    return value


def _unseeded(schedule: Schedule) -> ValueError:
    return ValueError(
        f"{schedule!r} needs a seed (H in its expression or stable_jitter): pass seed='name',"
        " or name= when adding it to a scheduler"
    )


def stable_offset(jitter: float, seed: str | None) -> float | None:
    """The fixed jitter of a ``stable_jitter`` schedule, in ``[0, jitter)``; else None."""
    return None if seed is None else stable_fraction(seed) * jitter


def jitter_delay(schedule: object, rng: random.Random | None = None) -> float:
    """How long a run of ``schedule`` waits for its jitter: stable or a fresh draw."""
    jitter: float = getattr(schedule, "jitter", 0.0)
    if not jitter:
        return 0.0
    if getattr(schedule, "stable_jitter", False):
        return stable_fraction(getattr(schedule, "seed", None) or "") * jitter
    return (rng or random).uniform(0.0, jitter)


@dataclass(frozen=True, slots=True)
class Once(Schedule):
    """Run once, ``delay`` seconds after the task is added (on the monotonic clock)."""

    delay: float
    """Seconds from now (finite, >= 0); given as a `Duration` (``Once("5m")``, a
    `timedelta`), kept as seconds."""

    if TYPE_CHECKING:

        def __init__(self, delay: Duration) -> None: ...

    repeats: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "delay", duration_arg("delay", self.delay, positive=False))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps: ``{"kind": "once", "delay": seconds}``."""
        return {"kind": "once", "delay": self.delay}

    def describe(self) -> str:
        """``"once, 5 s after it was declared"``."""
        return f"once, {self.delay:g} s after it was declared"

    def first_run(self, now: float) -> float | None:
        """``delay`` seconds after ``now``."""
        return now + self.delay

    def declared(self, now: float) -> Schedule:
        """`At` ``delay`` seconds after ``now``."""
        return At(now + self.delay)

    def _plan(self, rng: random.Random) -> _Plan:
        return _OncePlan(self.delay)


@dataclass(frozen=True, slots=True, init=False)
class At(Schedule):
    """Run once at a wall-clock instant (an aware `datetime` or POSIX seconds).

    ``At(datetime.now(timezone.utc) + timedelta(minutes=5))`` or ``At(1767225600)``. A
    naive `datetime` (no time zone) is refused: its instant would depend on the host.
    If the instant is already past when the task is added, it runs at the next tick.
    The run follows the wall clock: if the system time is stepped, the task moves with it.

    Raises:
        TypeError: ``when`` is neither a `datetime` nor a real number.
        ValueError: A naive `datetime`, or a number that is not finite.
    """

    when: float
    """POSIX seconds (UTC); an aware `datetime` is converted on construction."""

    wall: ClassVar[bool] = True
    repeats: ClassVar[bool] = False

    def __init__(self, when: float | datetime) -> None:
        object.__setattr__(self, "when", instant_arg("when", when))

    @property
    def at(self) -> float:
        """Deprecated: `when` (the name durable schedules used before `At` was shared)."""
        _renamed("At.at", "At.when")
        return self.when

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps: ``{"kind": "at", "at": seconds}``."""
        return {"kind": "at", "at": self.when}

    def describe(self) -> str:
        """``"once, at <ISO time>"``."""
        from tickwork._core.text import iso

        return f"once, at {iso(self.when)}"

    def first_run(self, now: float) -> float | None:
        """Its instant (one already past is due at once, as late)."""
        return self.when

    def grid(self, through: float) -> Grid | None:
        """The one slot, its instant."""
        return _PointGrid(self.when)

    def _plan(self, rng: random.Random) -> _Plan:
        return _AtPlan(self.when)


@dataclass(frozen=True, slots=True)
class Every(Schedule):
    """Run every ``interval`` seconds, fixed-rate (default) or fixed-delay.

    Fixed-rate keeps a grid (``first``, ``first + interval``, ...); when the scheduler
    is late past the next slot, missed slots are skipped and the task goes to
    ``now + interval``. Fixed-delay starts the next interval when a run finishes.
    """

    interval: float
    """Seconds between runs (finite, > 0). Given as a `Duration` like ``jitter`` and
    ``first`` (``Every("10s")``, ``Every(timedelta(minutes=5))``), kept as seconds."""
    fixed_delay: bool = False
    """Measure ``interval`` from the end of each run instead of from its due time."""
    jitter: float = 0.0
    """Delay each run by a fresh random amount in ``[0, jitter)`` seconds; the grid does
    not drift (the next slot is computed from the un-jittered one)."""
    first: float | None = None
    """Seconds until the first run; default ``interval``."""
    until: float | datetime | None = None
    """No run is due after this instant (an aware `datetime` or POSIX seconds, kept as
    POSIX seconds): the schedule ends there. ``None``: it never ends."""
    _: KW_ONLY
    stable_jitter: bool = False
    """Keep one jitter per job, hashed from `seed`, instead of a fresh draw per run."""
    seed: str | None = None
    """The text a stable jitter hashes (a job's name; durable jobs default to their id)."""
    calendar: Calendar | None = None
    """Days with no slot (`tickwork.Calendar`): a slot on an excluded day is skipped, and
    the grid goes on at its first slot on the next allowed day."""
    tz: str = "UTC"
    """The zone `calendar`'s days are read in (only with a calendar)."""

    if TYPE_CHECKING:

        def __init__(
            self,
            interval: Duration,
            fixed_delay: bool = False,
            jitter: Duration = 0.0,
            first: Duration | None = None,
            until: float | datetime | None = None,
            *,
            stable_jitter: bool = False,
            seed: str | None = None,
            calendar: Calendar | None = None,
            tz: str = "UTC",
        ) -> None: ...

    def __post_init__(self) -> None:
        if self.stable_jitter is not False or self.seed is not None:
            _stable_arg(self.stable_jitter)
            _seed_arg(self.seed)
        if self.calendar is not None or self.tz != "UTC":
            _interval_calendar(self)
        object.__setattr__(self, "interval", duration_arg("interval", self.interval, positive=True))
        if self.fixed_delay is not True and self.fixed_delay is not False:
            raise TypeError(f"fixed_delay must be a bool, got {self.fixed_delay!r}")
        object.__setattr__(self, "jitter", _jitter_arg(self.jitter))
        if self.first is not None:
            object.__setattr__(self, "first", duration_arg("first", self.first, positive=False))
        object.__setattr__(self, "until", _until_arg(self.until))

    @property
    def seconds(self) -> float:
        """Deprecated: `interval` (the name durable schedules used before `Every` was shared)."""
        _renamed("Every.seconds", "Every.interval")
        return self.interval

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps; fields at their defaults are left out.

        ``{"kind": "every", "seconds": s, "fixed_delay": bool}`` plus ``"jitter"``,
        ``"first"`` and ``"until"`` when set (so a schedule without them is stored
        exactly as before they existed).
        """
        out: dict[str, Any] = {
            "kind": "every",
            "seconds": self.interval,
            "fixed_delay": self.fixed_delay,
        }
        _optional(out, self.jitter, self.until, first=self.first)
        _spread(out, self.stable_jitter, self.seed)
        if self.calendar is not None:
            out["calendar"] = self.calendar.to_dict()
        if self.tz != "UTC":
            out["tz"] = self.tz
        return out

    def allowed_slot(self, slot: float) -> float:
        """The first slot of the grid ``slot + k * interval`` (``k >= 0``) on an allowed day.

        ``slot`` and the result are POSIX seconds; ``slot`` itself without a calendar.

        Raises:
            CalendarError: No allowed day within about 3 years.
        """
        calendar = self.calendar
        if calendar is None:
            return slot
        zone = ZoneInfo(self.tz)
        for _ in range(1100):
            day = datetime.fromtimestamp(slot, zone).date()
            allowed = calendar.next_allowed(day)
            if allowed == day:
                return slot
            if allowed is None:
                break
            start = datetime.combine(allowed, time(), tzinfo=zone).timestamp()
            slot += max(1, math.ceil((start - slot) / self.interval)) * self.interval
        raise CalendarError(f"calendar: no allowed day within 3 years of {iso_day(slot)}")

    takes_calendar: ClassVar[bool] = True

    @property
    def after_finish(self) -> bool:
        """`fixed_delay`: the next run is counted from the end of a run."""
        return self.fixed_delay

    @property
    def period(self) -> float | None:
        """`interval`."""
        return self.interval

    def with_calendar(
        self, calendar: Calendar | None, shift: Shift, tz: str, **spread: Any
    ) -> Schedule:
        """With ``calendar`` read in ``tz`` (its slots skip excluded days; no ``shift``)."""
        days: dict[str, Any] = {} if calendar is None else {"calendar": calendar, "tz": tz}
        return replace(self, **days, **spread) if days or spread else self

    def describe(self) -> str:
        """``"every 5 minutes"``, and how it counts a fixed delay."""
        from tickwork._core.text import interval_words

        return interval_words(self.interval, self.fixed_delay)

    def first_run(self, now: float) -> float | None:
        """``first`` (default: one interval) after ``now``, moved to an allowed day."""
        delay = self.interval if self.first is None else self.first
        return _within(self.until, self.allowed_slot(now + delay))

    def next_after(self, slot: float) -> float | None:
        """One interval after ``slot``, moved to an allowed day."""
        return _within(self.until, self.allowed_slot(slot + self.interval))

    def grid(self, through: float) -> Grid | None:
        """Fixed-rate: the slots ``through + k * interval`` on allowed days."""
        if self.fixed_delay:
            return None
        allowed = None if self.calendar is None else self.allowed_slot
        return _StepGrid(through, self.interval, allowed)

    def _seeded(self, name: str | None) -> Schedule:
        if not self.stable_jitter or self.seed is not None:
            return self
        if name is None:
            raise _unseeded(self)
        return replace(self, seed=name)

    def _plan(self, rng: random.Random) -> _Plan:
        first = self.interval if self.first is None else self.first
        until = self.until if isinstance(self.until, float) else None
        if self.stable_jitter and self.seed is None:
            raise _unseeded(self)
        stable = stable_offset(self.jitter, self.seed if self.stable_jitter else None)
        plan = (_DelayPlan if self.fixed_delay else _RatePlan)(
            first, self.interval, self.jitter, rng, until, stable
        )
        if self.calendar is not None:
            plan.allowed = self.allowed_slot
        return plan


@dataclass(frozen=True, slots=True)
class Cron(Schedule):
    """Run at the times a cron expression names (5 fields, or 6 with seconds first).

    ``Cron("0 3 * * *", tz="Europe/Berlin")``. DST follows Debian/Vixie cron (see
    ``docs/cron.md``); after the system clock is set back, wildcard jobs follow real
    time, and after it is set forward a slot carried past runs once, late. The time
    zone defaults to UTC; ``tz="local"`` uses the system's zone, only when asked.

    Raises:
        CronError: the expression or the zone is invalid, or the expression can never
            fire; the message names the field.
    """

    expr: str
    """The expression as given (``"*/5 * * * *"``, ``"@daily"``, ...)."""
    tz: str = "UTC"
    """IANA zone name, or ``"local"``."""
    jitter: float = 0.0
    """Delay each run by a fresh random amount in ``[0, jitter)`` seconds."""
    until: float | datetime | None = None
    """No run is due after this instant (an aware `datetime` or POSIX seconds, kept as
    POSIX seconds): the schedule ends there. ``None``: it never ends."""
    _: KW_ONLY
    calendar: Calendar | None = None
    """Days the schedule does not fire on as it is (`tickwork.Calendar`), read in `tz`."""
    shift: Shift = "skip"
    """A slot on a day `calendar` excludes: ``"skip"`` it, or move it to the same wall
    time on the nearest allowed day before (``"previous"``) or after (``"next"``) it."""
    seed: str | None = None
    """The text ``H`` fields and a stable jitter hash (a job's name; durable jobs default
    to their id, jobs files to the job's name)."""
    stable_jitter: bool = False
    """Keep one jitter per job, hashed from `seed`, instead of a fresh draw per run."""
    expression: CronExpression = field(init=False, repr=False, compare=False)
    """The parsed expression (`next_after`, `iter_after`, ...); with ``H`` and no seed
    yet, it hashes the empty name (a scheduler seeds the schedule before using it)."""

    wall: ClassVar[bool] = True
    takes_calendar: ClassVar[bool] = True
    takes_shift: ClassVar[bool] = True

    def __post_init__(self) -> None:
        from tickwork._core.cron import CronExpression

        tz: object = self.tz
        if isinstance(tz, ZoneInfo):
            tz = tz.key
        if not isinstance(tz, str):
            raise TypeError(f"tz must be an IANA zone name or 'local', got {self.tz!r}")
        object.__setattr__(self, "tz", tz)
        object.__setattr__(self, "seed", _seed_arg(self.seed))
        object.__setattr__(self, "stable_jitter", _stable_arg(self.stable_jitter))
        seed = self.seed if self.seed is not None or not has_h(self.expr) else ""
        expression = CronExpression(
            self.expr, tz, seed=seed, calendar=self.calendar, shift=self.shift
        )
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "jitter", _jitter_arg(self.jitter))
        object.__setattr__(self, "until", _until_arg(self.until))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form a store keeps, with the optional fields when set.

        ``{"kind": "cron", "expr": "...", "tz": "Area/City"}`` without them; then
        ``"jitter"``, ``"until"``, ``"calendar"`` (its `Calendar.to_dict`), ``"shift"``,
        ``"seed"`` and ``"stable_jitter"``.
        """
        out: dict[str, Any] = {"kind": "cron", "expr": self.expr, "tz": self.tz}
        _optional(out, self.jitter, self.until)
        if self.calendar is not None:
            out["calendar"] = self.calendar.to_dict()
        if self.shift != "skip":
            out["shift"] = self.shift
        _spread(out, self.stable_jitter, self.seed)
        return out

    @property
    def fixed_time(self) -> bool:
        """Whether the minute and hour fields are fixed (a short clock step keeps its slot)."""
        return self.expression.is_fixed_time

    def describe(self) -> str:
        """The expression said plainly where it can be (else shown), its zone and calendar."""
        from tickwork._core.text import cron_schedule_words

        return cron_schedule_words(self.expr, self.tz, self.calendar, self.shift)

    def first_run(self, now: float) -> float | None:
        """Its first fire time after ``now``."""
        return self.next_after(now)

    def next_after(self, slot: float) -> float | None:
        """Its first fire time after ``slot``."""
        return _within(self.until, self.expression.next_after_timestamp(slot))

    def grid(self, through: float) -> Grid | None:
        """The fire times of the expression (``through`` changes nothing)."""
        return _CronGrid(through, self.expression.next_after_timestamp)

    def with_calendar(
        self, calendar: Calendar | None, shift: Shift, tz: str, **spread: Any
    ) -> Schedule:
        """With ``calendar`` and ``shift``, read in its own `tz` (``tz`` is not used)."""
        days: dict[str, Any] = {} if calendar is None else {"calendar": calendar, "shift": shift}
        return replace(self, **days, **spread) if days or spread else self

    @property
    def cron_expression(self) -> CronExpression | None:
        """`expression`."""
        return self.expression

    @property
    def needs_seed(self) -> bool:
        """Whether the schedule hashes a seed (``H`` fields or a stable jitter)."""
        return self.stable_jitter or has_h(self.expr)

    def _seeded(self, name: str | None) -> Schedule:
        if self.seed is not None or not self.needs_seed:
            return self
        if name is None:
            raise _unseeded(self)
        return replace(self, seed=name)

    def _plan(self, rng: random.Random) -> _Plan:
        until = self.until if isinstance(self.until, float) else None
        if self.seed is None and self.needs_seed:
            raise _unseeded(self)
        stable = stable_offset(self.jitter, self.seed if self.stable_jitter else None)
        return _CronPlan(self.expression, self.jitter, rng, until, stable)


class ScheduleDecorators:
    """``@scheduler.every("10s")`` and ``@scheduler.cron("0 7 * * *", tz=...)``.

    Each makes the schedule and hands it, with the decorated function, to the
    scheduler's `_decorated` (``add``, or a durable job's declaration); the function
    comes back unchanged, so it can still be called directly. ``options`` go to that
    call: ``name``, ``args``, ``overlap``... (a durable job's `JobSpec` fields).
    """

    __slots__ = ()

    def every(
        self,
        interval: Duration,
        *,
        fixed_delay: bool = False,
        jitter: Duration = 0.0,
        first: Duration | None = None,
        until: float | datetime | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run the function on ``Every(interval, ...)``; see `Every`.

        Raises:
            TypeError, ValueError: As `Every` does for a bad value; as ``add`` does
                for bad ``options`` (when the function is decorated).
        """
        return self._decorator(Every(interval, fixed_delay, jitter, first, until), options)

    def cron(
        self,
        expr: str,
        *,
        tz: str = "UTC",
        jitter: Duration = 0.0,
        until: float | datetime | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run the function on ``Cron(expr, tz=tz, ...)``; see `Cron`.

        Raises:
            CronError: The expression or the zone is invalid (the message names which).
        """
        return self._decorator(Cron(expr, tz, _jitter_arg(jitter), until), options)

    def _decorator(self, schedule: Every | Cron, options: dict[str, Any]) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            self._decorated(schedule, fn, options)
            return fn

        return decorate

    def _decorated(self, schedule: Every | Cron, fn: Callable[..., object], options: Any) -> None:
        add: Callable[..., object] = getattr(self, "add")  # noqa: B009  (every face has one)
        add(schedule, fn, **options)


def iso_day(ts: float) -> str:
    """The UTC day of ``ts``, for messages."""
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


def _interval_calendar(every: Every) -> None:
    """Check (and normalise) an `Every`'s ``calendar`` and ``tz``."""
    tz: object = every.tz
    if isinstance(tz, ZoneInfo):
        tz = tz.key
    if not isinstance(tz, str):
        raise TypeError(f"tz must be an IANA zone name, got {every.tz!r}")
    if every.calendar is not None and not isinstance(every.calendar, Calendar):
        raise TypeError(f"calendar must be a tickwork Calendar or None, got {every.calendar!r}")
    if tz != "UTC":
        if every.calendar is None:
            raise ValueError(f"tz applies only with a calendar (the days it reads), got {tz!r}")
        try:
            ZoneInfo(tz)
        except (ValueError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"tz must be an IANA zone name, got {tz!r}") from exc
        except KeyError as exc:
            raise ValueError(f"tz must be an IANA zone name, got {tz!r}") from exc
    object.__setattr__(every, "tz", tz)


def _spread(out: dict[str, Any], stable_jitter: bool, seed: str | None) -> None:
    if seed is not None:
        out["seed"] = seed
    if stable_jitter:
        out["stable_jitter"] = True


def _optional(
    out: dict[str, Any], jitter: float, until: float | datetime | None, first: float | None = None
) -> None:
    """Add the optional fields of a stored schedule that differ from their defaults."""
    if jitter:
        out["jitter"] = jitter
    if first is not None:
        out["first"] = first
    if until is not None:
        out["until"] = until


def _within(until: object, t: float) -> float | None:
    """``t``, or ``None`` when it lies after ``until`` (the schedule has ended)."""
    return None if isinstance(until, float) and t > until else t


# -- grids: the slots of a repeating schedule in a range, computed once, here ---------------


class Grid:
    """The slots of a repeating schedule, laid through one of them, ``s`` (POSIX seconds).

    The durable engine's decisions, backfills and the daemon's skip lines all count
    slots here, so a calendar is applied the same way everywhere.
    """

    __slots__ = ("s",)

    #: Whether the grid depends on ``s`` (an interval's) or is fixed (a cron expression's).
    anchored: ClassVar[bool] = True

    def __init__(self, s: float) -> None:
        self.s = s

    def after(self, t: float) -> float:
        """The first slot strictly after ``t``."""
        raise NotImplementedError

    def at_or_after(self, t: float) -> float:
        """The first slot at or after ``t``."""
        raise NotImplementedError

    def passed(self, now: float, limit: int) -> int:
        """Slots from ``s`` to ``now`` inclusive (``s <= now``), at most ``limit``."""
        n, t = 1, self.s
        while n < limit:
            t = self.after(t)
            if t > now:
                break
            n += 1
        return n

    def slots(self, start: float, end: float, limit: int) -> list[float]:
        """The slots in ``[start, end]``, oldest first, at most ``limit`` of them."""
        out: list[float] = []
        t = self.at_or_after(start)
        while t <= end and len(out) < limit:
            out.append(t)
            t = self.after(t)
        return out

    def span(self, start: float, end: float, limit: int) -> tuple[int, float | None, float | None]:
        """How many slots lie in ``[start, end]`` (at most ``limit``), the first and the last."""
        slots = self.slots(start, end, limit)
        return (len(slots), slots[0], slots[-1]) if slots else (0, None, None)

    def tail(self, now: float, n: int) -> float:
        """The first of the last ``n`` slots up to ``now`` (more than ``n`` from ``s``)."""
        # No backwards step: walk forward from a start that gallops back from now
        # until the walk sees at least n slots, keeping only the last n.
        span = 60.0
        while True:
            start = max(self.s - 1.0, now - span)
            window: deque[float] = deque(maxlen=n)
            t = start
            while True:
                t = self.after(t)
                if t > now:
                    break
                window.append(t)
            if len(window) == n or start < self.s:
                return window[0]
            span *= 2


class _CronGrid(Grid):
    """A cron expression's fire times (whole seconds)."""

    __slots__ = ("walk",)
    anchored = False

    def __init__(self, s: float, walk: Callable[[float], float]) -> None:
        super().__init__(s)
        self.walk = walk

    def after(self, t: float) -> float:
        return self.walk(t)

    def at_or_after(self, t: float) -> float:
        # A second back: the fire times are whole seconds (one at ``t`` itself is kept,
        # however the fraction is rounded).
        slot = self.walk(t - 1.0)
        while slot < t:
            slot = self.walk(slot)
        return slot


class _PointGrid(Grid):
    """One slot, ``s``."""

    __slots__ = ()
    anchored = False

    def after(self, t: float) -> float:
        return self.s if t < self.s else math.inf

    def at_or_after(self, t: float) -> float:
        return self.s if t <= self.s else math.inf


class _StepGrid(Grid):
    """``s + k * step``; with a calendar (``allowed``), only the slots on allowed days."""

    __slots__ = ("allowed", "step")

    def __init__(self, s: float, step: float, allowed: Callable[[float], float] | None) -> None:
        super().__init__(s)
        self.step, self.allowed = step, allowed

    def _index(self, t: float) -> int:
        """The index ``k`` of the first slot at or after ``t``."""
        s, step = self.s, self.step
        k = math.ceil((t - s) / step)
        while s + k * step < t:  # float rounding, either way
            k += 1
        while s + (k - 1) * step >= t:
            k -= 1
        return k

    def after(self, t: float) -> float:
        k = math.floor((t - self.s) / self.step) + 1
        slot = self.s + k * self.step
        while slot <= t:  # float rounding can land one step short
            k += 1
            slot = self.s + k * self.step
        return slot if self.allowed is None else self.allowed(slot)

    def at_or_after(self, t: float) -> float:
        slot = self.s + self._index(t) * self.step
        return slot if self.allowed is None else self.allowed(slot)

    def passed(self, now: float, limit: int) -> int:
        if self.allowed is not None:
            return super().passed(now, limit)
        return min(limit, math.floor((now - self.s) / self.step) + 1)

    def span(self, start: float, end: float, limit: int) -> tuple[int, float | None, float | None]:
        if self.allowed is not None:
            return super().span(start, end, limit)
        s, step = self.s, self.step
        k0, k1 = self._index(start), math.floor((end - s) / step)
        while s + k1 * step > end:  # float rounding
            k1 -= 1
        if k1 < k0:
            return 0, None, None
        return min(k1 - k0 + 1, limit), s + k0 * step, s + k1 * step

    def tail(self, now: float, n: int) -> float:
        if self.allowed is not None:
            return super().tail(now, n)
        total = math.floor((now - self.s) / self.step) + 1
        return self.s + (total - n) * self.step


# -- plans: per-task state, private to the core -----------------------------------------


def next_slot(slot: float, every: float, now: float) -> float:
    """The first slot of the grid ``slot + k * every`` (``k >= 0``) that is after ``now``.

    For a fixed-rate task resumed after a pause: the slots up to ``now`` are missed, the
    task stays on its grid. Strictly after ``now``, as rule 4 of the core's contract; a
    grid too fine for the clock at ``now`` gives the next representable time.
    """
    if slot > now:
        return slot
    k = math.floor((now - slot) / every) + 1
    nxt = slot + k * every
    if nxt <= now:  # rounding put it on ``now``
        nxt = slot + (k + 1) * every
        if nxt <= now:
            nxt = math.nextafter(now, math.inf)
    return nxt


class _Plan:
    """Per-task schedule state. Times: ``now``/``due`` monotonic; ``offset`` = wall - mono."""

    __slots__ = ("over",)
    #: The schedule's ``until`` has passed: the current slot lies after it, so the task
    #: ends without running it (set by the plans that have an ``until``, per slot).
    over: bool
    repeats: ClassVar[bool] = True
    wall: ClassVar[bool] = False
    after_finish: ClassVar[bool] = False

    @property
    def interval(self) -> float | None:
        """Seconds between runs, for interval plans (shown by `Scheduler.tasks`)."""
        return None

    def first(self, now: float, offset: float) -> float:
        """The first due time, for a task added at ``now``."""
        raise NotImplementedError

    def next(self, due: float, now: float, offset: float) -> float | None:
        """The due time after a run that was due at ``due``; ``None`` when done.

        ``now`` is the tick's clock reading, or the reading after the run for a plan
        whose `after_finish` is true.
        """
        raise NotImplementedError

    def resume(self, due: float, now: float, offset: float) -> float | None:
        """The due time of a task resumed at ``now`` whose due time ``due`` passed while paused.

        The slots that came due while it was paused are missed. By default the task goes
        on as after a run due at ``due`` ended at ``now`` (`next`): a cron schedule at
        its first fire time after ``now``, a fixed-delay one ``interval`` after ``now``.
        ``None``: the schedule ended while it was paused (its ``until`` passed).
        """
        return self.next(due, now, offset)

    def reanchor(self, offset: float, step: float, seen: float, running: bool) -> float:
        """The due time after the wall clock moved against the monotonic clock.

        Args:
            offset: The new wall-minus-monotonic offset.
            step: How far the wall clock jumped between the last two readings, in
                seconds (negative: set back); 0.0 for drift that built up slowly, which
                moves due times but repeats or skips no slot.
            seen: The wall time of the last reading before the jump, on the new wall
                clock (``offset`` + that reading's monotonic time).
            running: The task's run is going on: its current slot has been taken, and
                `next` will be asked for the one after it.
        """
        raise NotImplementedError


class _OncePlan(_Plan):
    __slots__ = ("delay",)
    repeats = False

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.over = False

    def first(self, now: float, offset: float) -> float:
        return now + self.delay

    def next(self, due: float, now: float, offset: float) -> float | None:
        return None

    def resume(self, due: float, now: float, offset: float) -> float | None:
        return now  # a one-shot whose time passed while paused runs at once


class _AtPlan(_Plan):
    __slots__ = ("when",)
    repeats = False
    wall = True

    def __init__(self, when: float) -> None:
        self.when = when
        self.over = False

    def first(self, now: float, offset: float) -> float:
        return self.when - offset

    def next(self, due: float, now: float, offset: float) -> float | None:
        return None

    def resume(self, due: float, now: float, offset: float) -> float | None:
        return now  # a one-shot whose time passed while paused runs at once

    def reanchor(self, offset: float, step: float, seen: float, running: bool) -> float:
        # A wall instant: it moves with the wall clock whatever the step.
        return self.when - offset


class _IntervalPlan(_Plan):
    """Shared state of the two interval plans: first delay, interval, jitter, until."""

    __slots__ = ("_first", "allowed", "due", "every", "jitter", "rng", "slot", "stable", "until")

    def __init__(
        self,
        first: float,
        every: float,
        jitter: float,
        rng: random.Random,
        until: float | None = None,
        stable: float | None = None,
    ) -> None:
        self._first, self.every, self.jitter, self.rng = first, every, jitter, rng
        self.stable = stable
        #: A calendar's rule (`Every.allowed_slot`, on wall seconds), or None.
        self.allowed: Callable[[float], float] | None = None
        self.until = until
        self.over = False
        self.slot = self.due = 0.0

    @property
    def wall(self) -> bool:  # type: ignore[override]  # a class constant elsewhere
        """With an ``until`` (a wall instant) the core keeps this plan's offset current."""
        return self.until is not None or self.allowed is not None

    def _slot(self, slot: float, offset: float) -> float:
        """Note the current slot (monotonic, before jitter) and whether it is after ``until``.

        A calendar moves it along the grid to the first slot on an allowed day first.
        """
        if self.allowed is not None:
            slot = self.allowed(slot + offset) - offset
        self.slot = slot
        until = self.until
        self.over = until is not None and slot + offset > until
        return slot

    def reanchor(self, offset: float, step: float, seen: float, running: bool) -> float:
        # The interval runs on the monotonic clock: a wall step moves no slot; it only
        # changes which slots lie after ``until``.
        self._slot(self.slot, offset)
        return self.due

    @property
    def interval(self) -> float | None:
        return self.every

    def _draw(self) -> float:
        if self.stable is not None:
            return self.stable
        return self.rng.random() * self.jitter if self.jitter else 0.0


class _RatePlan(_IntervalPlan):
    """Fixed-rate with jitter: the grid is kept apart from the jittered due time."""

    __slots__ = ("grid",)  # set by first(), which the core calls before next()

    def first(self, now: float, offset: float) -> float:
        self.grid = self._slot(now + self._first, offset)
        self.due = self.grid + self._draw()
        return self.due

    def next(self, due: float, now: float, offset: float) -> float | None:
        grid = self.grid + self.every
        self.grid = self._slot(grid if grid > now else now + self.every, offset)
        self.due = self.grid + self._draw()
        return None if self.over else self.due

    def resume(self, due: float, now: float, offset: float) -> float | None:
        # Back on its own grid, at the first slot after now (with a fresh jitter draw).
        self.grid = self._slot(next_slot(self.grid, self.every, now), offset)
        self.due = self.grid + self._draw()
        return None if self.over else self.due


class _DelayPlan(_IntervalPlan):
    """Fixed-delay: the next run is due ``interval`` (plus jitter) after a run ends."""

    __slots__ = ()
    after_finish = True

    def first(self, now: float, offset: float) -> float:
        self._slot(now + self._first, offset)
        self.due = self.slot + self._draw()
        return self.due

    def next(self, due: float, now: float, offset: float) -> float | None:
        self._slot(now + self.every, offset)
        self.due = self.slot + self._draw()
        return None if self.over else self.due


class _CronPlan(_Plan):
    """The current target is a wall-clock instant; the due time follows the offset."""

    __slots__ = ("draw", "expression", "jitter", "rng", "stable", "target", "until")
    wall = True

    def __init__(
        self,
        expression: CronExpression,
        jitter: float,
        rng: random.Random,
        until: float | None = None,
        stable: float | None = None,
    ) -> None:
        self.expression, self.jitter, self.rng = expression, jitter, rng
        self.stable = stable
        self.until = until
        self.over = False
        self.target = 0.0
        self.draw = 0.0

    def _aim(self, after_wall: float, offset: float) -> float:
        self.target = self.expression.next_after_timestamp(after_wall)
        self.over = self.until is not None and self.target > self.until
        self.draw = self._draw()
        return self.target - offset + self.draw

    def _draw(self) -> float:
        if self.stable is not None:
            return self.stable
        return self.rng.random() * self.jitter if self.jitter else 0.0

    def first(self, now: float, offset: float) -> float:
        return self._aim(now + offset, offset)

    def next(self, due: float, now: float, offset: float) -> float | None:
        # A late run fired once; the next slot is the first one after now (and after
        # the slot that just ran, should the wall clock have been stepped back).
        due = self._aim(max(now + offset, self.target), offset)
        return None if self.over else due

    def reanchor(self, offset: float, step: float, seen: float, running: bool) -> float:
        # The clock-step rules live beside the DST rules (CronExpression); a target that
        # moves gets a fresh jitter draw, like any new slot.
        target = self.expression.after_clock_step(self.target, seen, step)
        if target != self.target:
            # A running task has taken its slot; `next` then looks for the first slot
            # after the new wall time, not after the old clock's slot.
            self.target = min(target, seen) if running else target
            self.over = self.until is not None and self.target > self.until
            self.draw = self._draw()
        return self.target - offset + self.draw
