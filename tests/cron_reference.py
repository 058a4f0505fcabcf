"""A brute-force reference for cron semantics, independent of tickwork and cronsim.

It replays Vixie cron's main loop (cron.c, as in Debian): one step per real minute,
reading the local wall clock through zoneinfo, keeping Vixie's "virtual time" and
classifying each change of the wall clock the way cron does:

* +1 minute: normal, run every job matching the wall minute;
* +2..+5 minutes: run every job for each skipped wall minute;
* +6..+180 minutes (a DST gap): wildcard jobs for the current minute only, fixed-time
  jobs for each skipped minute (all at this real minute);
* -179..0 minutes (a repeated interval): wildcard jobs only, virtual time unchanged;
* anything larger: a clock correction, jump virtual time and run the current minute.

The field matcher only understands plain numbers, names, ``*``, ranges, steps and lists.
It is slow on purpose: it is the oracle, not the product.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_EPOCH = datetime(1970, 1, 1)


def _value(text: str, names: list[str], base: int) -> int:
    text = text.upper()
    if text in names:
        return names.index(text) + base
    return int(text)


def _field(text: str, lo: int, hi: int, names: list[str] | None = None, base: int = 0) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        step = 1
        if "/" in item:
            item, step_text = item.split("/")
            step = int(step_text)
        if item == "*":
            a, b = lo, hi
        elif "-" in item:
            x, y = item.split("-")
            a, b = _value(x, names or [], base), _value(y, names or [], base)
        else:
            a = b = _value(item, names or [], base)
        out.update(range(a, b + 1, step))
    return out


class Matcher:
    """Vixie field matching for one 5-field expression."""

    def __init__(self, expr: str) -> None:
        m, h, dom, mon, dow = expr.split()
        self.minutes = _field(m, 0, 59)
        self.hours = _field(h, 0, 23)
        self.doms = _field(dom, 1, 31)
        self.months = _field(mon, 1, 12, _MONTHS, 1)
        self.dows = {d % 7 for d in _field(dow, 0, 7, _DAYS, 0)}
        # Vixie: a day field starting with '*' makes day-of-month AND day-of-week.
        self.day_and = dom.startswith("*") or dow.startswith("*")
        self.wildcard = m.startswith("*") or h.startswith("*")

    def __call__(self, w: datetime) -> bool:
        if w.minute not in self.minutes or w.hour not in self.hours:
            return False
        if w.month not in self.months:
            return False
        dom_ok = w.day in self.doms
        dow_ok = (w.isoweekday() % 7) in self.dows
        return (dom_ok and dow_ok) if self.day_and else (dom_ok or dow_ok)


def _wall_minute(u: int, tz: ZoneInfo) -> int:
    local = datetime.fromtimestamp(u, tz).replace(tzinfo=None)
    return (local - _EPOCH) // timedelta(minutes=1)


def _wall(minute: int) -> datetime:
    return _EPOCH + timedelta(minutes=minute)


def reference_fires(expr: str, tz: str, after: float, horizon: float) -> list[float]:
    """Return every fire instant (POSIX seconds) in ``(after, after + horizon]``."""
    match = Matcher(expr)
    zone = ZoneInfo(tz)
    u = int(after // 60 * 60) - 4 * 3600  # pre-roll so virtual time has its history
    virtual = _wall_minute(u, zone)
    out: list[float] = []
    end = after + horizon
    while u < end:
        u += 60
        now = _wall_minute(u, zone)
        diff = now - virtual
        if diff == 1:
            virtual = now
            fires = match(_wall(now))
        elif 1 < diff <= 5:
            fires = any(match(_wall(x)) for x in range(virtual + 1, now + 1))
            virtual = now
        elif 5 < diff <= 180:
            if match.wildcard:
                fires = match(_wall(now))
            else:
                fires = any(match(_wall(x)) for x in range(virtual + 1, now + 1))
            virtual = now
        elif -180 < diff <= 0:
            fires = match.wildcard and match(_wall(now))
        else:
            virtual = now
            fires = match(_wall(now))
        if fires and after < u <= end:
            out.append(float(u))
    return out


def transitions(tz: str, start: datetime, end: datetime) -> list[float]:
    """Instants (POSIX seconds) where ``tz`` changes offset, found minute by minute."""
    zone = ZoneInfo(tz)
    out: list[float] = []
    t = int(start.timestamp()) // 3600 * 3600
    stop = end.timestamp()
    prev = datetime.fromtimestamp(t, zone).utcoffset()
    while t < stop:
        nxt = datetime.fromtimestamp(t + 3600, zone).utcoffset()
        if nxt != prev:
            m = t
            while datetime.fromtimestamp(m, zone).utcoffset() == prev:
                m += 60
            out.append(float(m))
        prev = nxt
        t += 3600
    return out
