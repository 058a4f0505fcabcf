"""``tickwork next``: print the next fire times of a cron expression.

Example::

    python -m tickwork next "0 9 * * 1-5" --tz Europe/Berlin -n 5 --after 2026-12-02T00:00Z
    python -m tickwork next "0 9 1 * *" --tz Europe/Berlin --holidays DE-BY \
        --exclude-weekdays sat,sun --shift next        # the first business day
    python -m tickwork next --file jobs.toml --job report   # a job's calendar and H

Exit status: 0 on success, 2 for a bad expression, zone or argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from tickwork._cli.options import count
from tickwork._core.calendars import Calendar, CalendarError
from tickwork._core.cron import CronExpression
from tickwork._core.errors import ConfigError, CronError
from tickwork._core.text import schedule_words
from tickwork._daemon.jobsfile.config import JobConfig, load_config
from tickwork._durable.decide import planned_slots

__all__ = ["add_parser", "main", "run"]

_PROG = "tickwork next"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``next`` sub-command to an argparse ``subparsers`` object.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The new sub-parser; its ``func`` default is :func:`run`.

    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "next",
        help="print the next fire times of a cron expression",
        description="Print the next fire times of a cron expression (5 fields, or 6 with"
        " seconds first), in its "
        "time zone and in UTC.",
    )
    p.add_argument("expr", nargs="?", help='cron expression, e.g. "0 9 * * 1-5" or @daily')
    p.add_argument("--tz", default="UTC", help="IANA time zone or 'local' (default: UTC)")
    p.add_argument(
        "-n",
        "--count",
        type=count,
        default=5,
        help="how many fire times to print (default: 5)",
    )
    p.add_argument(
        "--after",
        metavar="ISO8601",
        help="start strictly after this instant (default: now); a time without an "
        "offset is read as wall time in --tz",
    )
    _calendar_options(p)
    p.set_defaults(func=run)
    return p


def _calendar_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", help="the job name that H fields hash (e.g. 'H * * * *')")
    p.add_argument(
        "--holidays", metavar="CODE", help="exclude public holidays: DE, DE-BY, US, GB-ENG"
    )
    p.add_argument("--exclude-weekdays", metavar="DAYS", help="exclude days of the week: sat,sun")
    p.add_argument(
        "--exclude",
        metavar="DATE[..DATE]",
        action="append",
        default=[],
        help="exclude a date or a range (repeatable)",
    )
    p.add_argument(
        "--shift",
        default="skip",
        help="a slot on an excluded day: skip (default), previous or next allowed day",
    )
    p.add_argument("--file", metavar="JOBS_TOML", help="with --job: a jobs file")
    p.add_argument("--job", metavar="NAME", help="show the job NAME of --file (any schedule)")


_DEFAULTS: dict[str, Any] = {
    "seed": None,
    "holidays": None,
    "exclude_weekdays": None,
    "exclude": [],
    "shift": "skip",
    "file": None,
    "job": None,
}


def _expression(args: argparse.Namespace) -> CronExpression | JobConfig:
    """The expression the arguments name (the flags), or the job of a jobs file."""
    for name, default in _DEFAULTS.items():  # a Namespace built by hand has only expr...
        if not hasattr(args, name):
            setattr(args, name, default)
    if args.job is not None or args.file is not None:
        if args.job is None or args.file is None or args.expr is not None:
            raise CronError("--file and --job go together, instead of an expression")
        try:
            job = load_config(args.file, check_host=False).job(args.job)
        except KeyError:
            raise CronError(f"--job: no job named {args.job!r} in {args.file}") from None
        expression = None if job.schedule is None else job.schedule.cron_expression
        if expression is None:
            return job  # no expression of its own to show: its planned slots (_job_slots)
        args.expr = expression.expr
        return expression
    if args.expr is None:
        raise CronError("give a cron expression, or --file and --job")
    calendar = None
    weekdays = [d for d in (args.exclude_weekdays or "").split(",") if d.strip()]
    if args.holidays or weekdays or args.exclude:
        calendar = Calendar(dates=args.exclude, weekdays=weekdays, holidays=args.holidays)
    return CronExpression(args.expr, args.tz, seed=args.seed, calendar=calendar, shift=args.shift)


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``tickwork next`` for parsed arguments.

    Args:
        args: Namespace with ``expr``, ``tz``, ``count`` and ``after``.
        out: Stream for results (default: ``sys.stdout``).
        err: Stream for errors (default: ``sys.stderr``).

    Returns:
        0 on success, 2 if the expression, zone or ``--after`` is invalid.

    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        cron = _expression(args)
    except (CronError, CalendarError, ConfigError) as exc:
        print(f"{_PROG}: error: {exc}", file=err)
        return 2
    if isinstance(cron, JobConfig):
        return _job_slots(cron, args, out, err)
    start = _start(args, cron.tz, err)
    if start is None:
        return 2
    print(f"# {args.expr}  (tz {cron.tz_name}){_extras(cron)}", file=out)
    for fire in cron.next_n(start, args.count):
        utc = fire.astimezone(UTC)
        print(
            f"{fire.isoformat()}  {fire:%a} {fire.tzname()}  {utc:%Y-%m-%dT%H:%M:%SZ}",
            file=out,
        )
    return 0


def _start(args: argparse.Namespace, zone: tzinfo, err: TextIO) -> datetime | None:
    """The instant to start after: ``--after``, or now.

    ``--after`` without an offset is wall time in ``zone``; None when it is not a
    date-time (said on ``err``).
    """
    if args.after is None:
        return datetime.now(UTC)
    try:
        start = datetime.fromisoformat(args.after)
    except ValueError:
        print(
            f"{_PROG}: error: --after must be an ISO 8601 date-time, got {args.after!r}", file=err
        )
        return None
    return start.replace(tzinfo=zone) if start.tzinfo is None else start


def _job_slots(job: JobConfig, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the next slots of a jobs-file job whose schedule is not cron.

    As if it were declared at ``--after`` (default: now): an interval's first run is
    one interval (or its ``first``) later, and its calendar skips excluded days.
    """
    schedule = job.schedule
    if schedule is None:  # chains: it runs when the jobs it follows end
        names = ", ".join(name for name, _ in job.after)
        print(f"# job {job.name}: no schedule of its own, it runs after {names}", file=out)
        return 0
    zone = ZoneInfo(getattr(schedule, "tz", "UTC"))
    start = _start(args, zone, err)
    if start is None:
        return 2
    print(f"# job {job.name}: {schedule_words(schedule)}  (tz {zone.key})", file=out)
    for t in planned_slots(schedule, start.timestamp(), args.count):
        fire = datetime.fromtimestamp(t, zone)
        utc = fire.astimezone(UTC)
        print(f"{fire.isoformat()}  {fire:%a} {fire.tzname()}  {utc:%Y-%m-%dT%H:%M:%SZ}", file=out)
    return 0


def _extras(cron: CronExpression) -> str:
    out = "" if cron.seed is None else f"  seed {cron.seed!r}"
    if cron.calendar is not None:
        parts = [f"{k}={v}" for k, v in cron.calendar.to_dict().items()]
        out += f"  calendar {' '.join(parts)}  shift {cron.shift}"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``next`` arguments, without the sub-command) and run.

    Args:
        argv: Arguments after ``tickwork next``; defaults to ``sys.argv[1:]``.

    Returns:
        The exit status (argparse usage errors exit with status 2).

    """
    parser = argparse.ArgumentParser(prog="tickwork")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_parser(subparsers)
    args = parser.parse_args(["next", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
