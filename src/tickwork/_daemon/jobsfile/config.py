"""The jobs file of ``tickwork run``: parse and validate TOML into `JobConfig` values.

The file is a list of ``[[job]]`` tables, with an optional ``[defaults]`` table whose
options apply to every job that does not set them (``docs/daemon.md`` is the
reference)::

    [defaults]
    timeout = "5m"

    [[job]]
    name = "rotate"
    command = ["sh", "-c", "mv app.log app.log.1"]
    cron = "0 3 * * *"
    timezone = "Europe/Berlin"

Validation collects every problem in one pass and raises one `ConfigError`; each
`ConfigIssue` names the file, the line, the job and the dotted key. ``tomllib`` reports
positions only for syntax errors, so `_Locator` scans the source text once to map a key
path such as ``("job", 2, "every")`` to the line that wrote it.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast

from tickwork._core.args import in_calendar, too_long
from tickwork._core.attempts import MAX_RETRIES
from tickwork._core.calendars import Calendar
from tickwork._core.errors import ConfigError, ConfigIssue, CronError
from tickwork._core.schedules import At, Cron, Every, Once, Schedule, parse_duration
from tickwork._core.vocabulary import (
    ISOLATIONS,
    JOBS_FILE_OVERLAP_POLICIES,
    MISSED_POLICIES,
    Isolation,
    JobsFileOverlap,
    Missed,
)
from tickwork._daemon.jobsfile.calendar_config import (
    CALENDAR_DEFAULT_KEYS,
    CALENDAR_JOB_KEYS,
    check_calendar,
    parse_calendars,
    with_calendar,
)
from tickwork._daemon.jobsfile.chains import chain_problems, read_after
from tickwork._daemon.jobsfile.pools import check_pools
from tickwork._daemon.mail import MAIL_COMMAND, check_mail_command, check_mail_to, check_smtp
from tickwork._daemon.process.jobprocess import (
    UNLIMITED,
    check_group,
    check_limit,
    check_user,
    parse_cpu,
    parse_files,
    parse_size,
    parse_umask,
    read_env_file,
)
from tickwork.stores import DELIVERIES, Delivery
from tickwork.stores.contract import Edges, pool_name_problem

__all__ = [
    "JOB_KEYS",
    "OUTPUT_LIMIT",
    "Alert",
    "Config",
    "JobConfig",
    "Missed",
    "Overlap",
    "load_config",
    "parse_config",
]

Output = Literal["log", "tail", "discard"]
#: A jobs file's overlap policies: the library's, and ``"replace"`` (commands only).
Overlap = JobsFileOverlap

#: The default ``output_limit``: the most output lines one attempt writes to the log.
OUTPUT_LIMIT: Final = 1000
_MAX_OUTPUT_LIMIT: Final = 1_000_000_000

_OVERLAP: Final = JOBS_FILE_OVERLAP_POLICIES
_MISSED: Final = MISSED_POLICIES
_OUTPUT: Final = ("log", "tail", "discard")
_SCHEDULE_KEYS: Final = ("every", "cron", "at", "in")

#: The dead-man alert keys (``alert_if_missed`` a bool, the others durations).
DEAD_MAN_KEYS: Final = (
    "alert_if_no_success",
    "alert_if_missed",
    "alert_if_late",
    "alert_if_running",
)

#: Options that may appear in ``[defaults]`` as well as in a job.
DEFAULT_KEYS: Final = frozenset(
    {
        "overlap",
        "missed",
        "delivery",
        "grace",
        "jitter",
        "timeout",
        "kill_grace",
        "retries",
        "retry_backoff",
        "retry_backoff_max",
        "env",
        "cwd",
        "enabled",
        "timezone",
        "output",
        "output_limit",
        "on_failure",
        "on_success",
        "mail_to",
        "mail_command",
        "smtp",
        "keep_ok",
        "keep_failed",
        "working_dir",
        "env_file",
        "user",
        "group",
        "umask",
        "limit_memory",
        "limit_cpu",
        "limit_files",
        *DEAD_MAN_KEYS,
        *CALENDAR_DEFAULT_KEYS,
        "pool",
    }
)
#: Every key a ``[[job]]`` table may have.
JOB_KEYS: Final = DEFAULT_KEYS | {
    "name",
    "after",  # chains: run after other jobs of the file (_daemon/jobsfile/chains.py)
    "at_start",  # one run queued at each start of a daemon (cron's @reboot)
    "command",
    "shell",
    "call",
    "args",
    "kwargs",
    "isolation",
    "fixed_delay",
    "first",
    "until",
    *_SCHEDULE_KEYS,
    *CALENDAR_JOB_KEYS,
}
_TOP_KEYS: Final = ("job", "defaults", "calendar", "pool", "max_running")

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,99}")
_IMPORT_PATH: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_MAX_RETRIES: Final = MAX_RETRIES
_MAX_KEEP: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class JobConfig:
    """One validated job of a jobs file: what to run, when, and how.

    Exactly one of `command` and `call` is set. Values are immutable; two configs are
    equal when every option is equal (the source line is not compared), so a reload
    can tell changed jobs from unchanged ones with ``==``.
    """

    name: str
    """Unique within the file; the job's identity in logs and in the state."""
    schedule: Schedule | None
    """`Every`, `Cron`, `At` or `Once` (jitter is part of `Every` and `Cron`); ``None``
    for a job that runs only after others (`after`) or at the daemon's start
    (`at_start`)."""
    command: tuple[str, ...] | str | None = None
    """The argv to run, or the shell script when `shell` is true."""
    shell: bool = False
    """Run `command` with ``/bin/sh -c``."""
    call: str | None = None
    """A Python callable as ``"package.module:function"``, run in-process."""
    args: tuple[Any, ...] = field(default=(), hash=False)
    """Positional arguments for `call` (JSON-compatible values)."""
    kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    """Keyword arguments for `call` (JSON-compatible values)."""
    isolation: Isolation = "thread"
    """Where `call` runs: in a worker ``"thread"`` of the daemon, or in a child
    ``"process"`` killed at `timeout`, its output handled as a command's."""
    overlap: Overlap = "skip"
    """When a run is due while the previous one still runs: skip it, queue it, allow
    both to run at once, or (commands) replace the running one: end its process group
    as a timeout would and start the new run."""
    missed: Missed = "skip"
    """Runs the daemon is behind on (down or busy: the next slot has also come, or later
    than `grace`): skip them, run once for all of them, or run each one."""
    delivery: Delivery = "at_most_once"
    """A run cut off by its daemon's death (``kill -9``, a crash, a lost host): recorded
    ``abandoned`` and not run again (``"at_most_once"``), or run again from the start
    once recovered (``"at_least_once"``). Scheduled, triggered and chained runs alike."""
    grace: float = 60.0
    """Seconds a run may start late and still count as on time (if its next slot has not
    come yet)."""
    timeout: float | None = None
    """Seconds one attempt may run: a command's process group is then terminated; a
    call is recorded ``timeout`` (its thread goes on, the slot held until it returns;
    with ``isolation = "process"`` its child process is terminated)."""
    kill_grace: float = 10.0
    """Seconds between SIGTERM and SIGKILL when a command (or a call's child process)
    is terminated."""
    retries: int = 0
    """Further attempts after a failed one."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubled for each further one."""
    retry_backoff_max: float = 300.0
    """The cap on the doubled backoff."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    """Variables set over the daemon's environment for a command."""
    cwd: str | None = None
    """Working directory of a command (absolute; relative paths in the file are resolved
    against the file's directory). A leading ``-``: the directory if it exists when a
    run starts, else ``/`` (as cron's ``chdir`` to ``HOME``; see `optional_dir`)."""
    enabled: bool = True
    """A disabled job is validated but never scheduled."""
    on_failure: Alert | None = None
    """Who to tell when the job keeps failing, and when it recovers (see `Alert`)."""
    output: Output = "log"
    """What becomes of what a run writes: ``"log"`` its lines to the run log (bounded
    per run) and its tail to the slot ledger, ``"tail"`` only the tail to the ledger,
    ``"discard"`` neither (a failure's tail still goes into its error)."""
    output_limit: int = OUTPUT_LIMIT
    """With ``output = "log"``: the most lines of one attempt written to the log; the
    rest are counted (lines and bytes) and one line says so."""
    on_success: Alert | None = None
    """Who to tell when a run succeeds (not the run ``on_failure`` reports as recovered)."""
    mail_to: tuple[str, ...] = ()
    """Addresses each failed run's output is mailed to, as cron's ``MAILTO`` (`mail`)."""
    mail_command: tuple[str, ...] = MAIL_COMMAND
    """The sendmail-compatible command a mail goes to (unless `smtp` is set)."""
    smtp: str | None = None
    """``host:port`` of an SMTP server to send the mail to instead of `mail_command`."""
    keep_ok: int | None = None
    """Slot-ledger entries of ``ok`` runs kept for this job (``None``: the store's own)."""
    keep_failed: int | None = None
    """Slot-ledger entries of failed runs (``failed``, ``timeout``, ``abandoned``) kept."""
    env_file: str | None = None
    """The file (absolute) whose ``KEY=VALUE`` lines were merged into `env`, under the
    job's own ``env``."""
    user: str | None = None
    """Run the command as this user (the daemon runs as root)."""
    group: str | None = None
    """Run the command with this group (default: the user's)."""
    umask: int | None = None
    """The command's file mode creation mask (default: the daemon's)."""
    limit_memory: int | None = None
    """The command's address space in bytes (``RLIMIT_AS``)."""
    limit_cpu: int | None = None
    """The command's CPU seconds (``RLIMIT_CPU``): SIGXCPU there, SIGKILL a second on."""
    limit_files: int | None = None
    """How many files the command may have open at once (``RLIMIT_NOFILE``)."""
    alert_if_no_success: float | None = None
    """Dead-man alert (through `on_failure`): no ok run has ended for this many seconds."""
    alert_if_missed: bool = False
    """Dead-man alert: the job's newest slot was missed or skipped."""
    alert_if_late: float | None = None
    """Dead-man alert: a run started (or a due slot is still not started) this late."""
    alert_if_running: float | None = None
    """Dead-man alert: a run is still going this many seconds after it started."""
    after: Edges = ()
    """Chains: ``((job name, "ok" | "any"), ...)``: run once each time a slot of one of
    these jobs of the file ends (``ok``, or with ``any`` also failed or timed out)."""
    pool: str | None = None
    """The concurrency pool its runs count against (a ``[pool.<name>]`` of the file)."""
    at_start: bool = False
    """Each start of a daemon with this file queues one run, as ``tickwork trigger``
    does (cron's ``@reboot``); with no schedule, the job runs only then."""
    line: int = field(default=0, compare=False)
    """The line of the job's ``[[job]]`` header, for messages."""

    @property
    def jitter(self) -> float:
        """The schedule's jitter in seconds (0 for one-shot schedules)."""
        return cast(float, getattr(self.schedule, "jitter", 0.0))


@dataclass(frozen=True, slots=True)
class Alert:
    """A job's ``on_failure``: a command and/or a webhook, fired by the daemon.

    Fired once when the job has failed ``failures`` times in a row, and once more on the
    first success after that (recovery). The outcome goes to the command as ``TICKWORK_*``
    environment variables and as JSON on its stdin, and to the webhook as a JSON POST.
    """

    command: tuple[str, ...] | None = None
    """The argv to run (no shell)."""
    webhook: str | None = None
    """An ``http://`` or ``https://`` URL to POST the JSON to."""
    failures: int = 1
    """Failures in a row that make the job "failing" (the file's ``failures``; ``after``
    there is its old name, still read)."""
    timeout: float = 10.0
    """Seconds each attempt (the command, or one POST) may take."""
    retries: int = 3
    """Further attempts of a failed webhook POST (1 s, 2 s, 4 s, ... apart)."""

    def __repr__(self) -> str:
        """The text a job's fingerprint holds (`declare.fingerprint`).

        ``failures`` keeps its first name there, ``after``, so that no declared job's
        fingerprint changes.
        """
        return (
            f"Alert(command={self.command!r}, webhook={self.webhook!r},"
            f" after={self.failures!r}, timeout={self.timeout!r}, retries={self.retries!r})"
        )


_ALERT_KEYS: Final = ("command", "webhook", "failures", "timeout", "retries")
#: The old name of an alert's ``failures`` (``after`` now means a chain only), still read.
_OLD_FAILURES: Final = "after"


def _success_hook(value: object) -> Alert:
    for key in ("failures", _OLD_FAILURES):
        if isinstance(value, dict) and key in value:
            raise _Invalid(f"{key!r} applies only to on_failure: on_success fires on every ok run")
    return _alert(value, keys=tuple(k for k in _ALERT_KEYS if k != "failures"))


def _alert(value: object, keys: tuple[str, ...] = _ALERT_KEYS) -> Alert:
    if not isinstance(value, dict):
        raise _Invalid(f"must be a table with command and/or webhook, got {_show(value)}")
    problems = [
        f"unknown key {key!r} (known: {', '.join(keys)})"
        for key in sorted(set(value) - {*keys, _OLD_FAILURES})
    ]
    command = value.get("command")
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(a, str) and a for a in command)
    ):
        problems.append(
            f"command must be a non-empty array of strings (an argv), got {_show(command)}"
        )
    webhook = value.get("webhook")
    if webhook is not None and (
        not isinstance(webhook, str) or not webhook.startswith(("http://", "https://"))
    ):
        problems.append(f"webhook must be an http:// or https:// URL, got {_show(webhook)}")
    if command is None and webhook is None:
        problems.append("needs a command, a webhook, or both")
    if "failures" in value and _OLD_FAILURES in value:
        problems.append("give failures only: after is its old name, not a second key")
    key = _OLD_FAILURES if _OLD_FAILURES in value else "failures"
    failures = value.get(key, 1)
    if isinstance(failures, bool) or not isinstance(failures, int) or not 1 <= failures <= 1000:
        problems.append(f"{key} must be an integer from 1 to 1000, got {_show(failures)}")
    timeout = 10.0
    try:
        timeout = _duration(value.get("timeout", 10.0), positive=True)
    except _Invalid as exc:
        problems.append(f"timeout {exc}")
    retries = value.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
        problems.append(f"retries must be an integer from 0 to 10, got {_show(retries)}")
    if problems:  # every one, in one message: they share the key's line
        raise _Invalid("; ".join(problems))
    return Alert(
        tuple(command) if command is not None else None, webhook, failures, timeout, retries
    )


@dataclass(frozen=True, slots=True)
class Config:
    """A validated jobs file: its path and its jobs in file order."""

    path: str
    """The file, as named to `load_config`."""
    jobs: tuple[JobConfig, ...]
    """Every job, enabled or not, in file order."""
    pools: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Each ``[pool.<name>]``'s ``limit``: runs of its jobs at once, over every node."""
    max_running: int | None = None
    """The top-level ``max_running``: runs of all jobs at once, over every node."""

    def job(self, name: str) -> JobConfig:
        """The job called ``name``.

        Raises:
            KeyError: no job has that name.
        """
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)


def load_config(path: str | os.PathLike[str], *, check_host: bool = True) -> Config:
    """Read and validate a jobs file.

    Relative ``cwd`` values are resolved against the file's directory.

    Args:
        path: The TOML file.
        check_host: As for `parse_config` (``False``: the verbs that read or act on
            the state, which must work while a job's user or directory is gone).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or breaks a rule; `errors`
            lists every problem.
    """
    shown = os.fspath(path)
    try:
        text = Path(shown).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            [ConfigIssue(shown, 0, "", "", f"cannot read the file: {reason}")]
        ) from exc
    base_dir = Path(shown).resolve().parent
    return parse_config(text, path=shown, base_dir=base_dir, check_host=check_host)


def parse_config(
    text: str, *, path: str = "<string>", base_dir: Path | None = None, check_host: bool = True
) -> Config:
    """Validate the text of a jobs file.

    Args:
        text: The TOML source.
        path: The name shown in messages.
        base_dir: The directory relative ``cwd`` values are resolved against (default:
            the current directory).
        check_host: Refuse a ``working_dir`` that is not a directory on this host, a
            ``user`` or ``group`` it does not have (or a daemon that is not root), an
            ``env_file`` it cannot read (``False``: none of these is looked up, and an
            ``env_file`` is not read: a file translated for another host, such as an
            imported crontab whose ``HOME`` is the other host's, or a verb that only
            needs the jobs' names; runs then fail on what is missing).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: the text is not TOML or breaks a rule; `errors` lists every problem.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_syntax_issue(path, text, exc)]) from None
    except RecursionError:
        raise ConfigError([_too_deep(path, text)]) from None
    checker = _Checker(path, _Locator(text), base_dir or Path.cwd(), check_host=check_host)
    jobs = checker.document(doc)
    pools, max_running = check_pools(doc, jobs, checker.add)
    if checker.issues:
        raise ConfigError(sorted(checker.issues, key=lambda issue: issue.line))
    return Config(path, tuple(jobs), MappingProxyType(pools), max_running)


def _too_deep(path: str, text: str) -> ConfigIssue:
    """The problem of a file nested too deep for ``tomllib`` to read, at its line.

    That line ends the shortest run of first lines that is already too deep: ``tomllib``
    reads from left to right, so a longer run is too deep as well.
    """
    lines = text.split("\n")
    lo, hi = 1, len(lines)
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            tomllib.loads("\n".join(lines[:mid]))
        except RecursionError:
            hi = mid
            continue
        except tomllib.TOMLDecodeError:
            pass
        lo = mid + 1
    return ConfigIssue(
        path, hi, "", "", "invalid TOML: arrays or inline tables nested too deeply to read"
    )


def _syntax_issue(path: str, text: str, exc: tomllib.TOMLDecodeError) -> ConfigIssue:
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if m:
        line = int(m.group(1))
        message = f"{message[: m.start()]} (column {m.group(2)})"
    else:
        line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        message = re.sub(r"\s*\(at end of document\)$", " (at the end of the file)", message)
    return ConfigIssue(path, line, "", "", f"invalid TOML: {message}")


# -- the checker: one pass, every problem --------------------------------------------------

_Path = tuple[str | int, ...]


class _Invalid(Exception):
    """A value failed its check; the message is the rule and the bad value."""


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


def _duration(value: object, *, positive: bool = False, zero_means_none: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _Invalid(f"must be a duration such as '30s' or '1h30m', got {_show(value)}")
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        rule = "> 0" if positive else ">= 0"
        raise _Invalid(f"must be a duration {rule}, got {_show(value)}")
    if too_long(seconds):
        raise _Invalid(f"must be at most 365000 days (about 1000 years), got {_show(value)}")
    return seconds


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value not in options:
            listed = ", ".join(repr(o) for o in options)
            raise _Invalid(f"must be one of {listed}, got {_show(value)}")
        return value

    return check


def _from_value_error(check: Callable[[object], object]) -> Callable[[object], object]:
    """``check``, its `ValueError` reported as a problem of the key (the mail keys')."""

    def checked(value: object) -> object:
        try:
            return check(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None

    return checked


#: The mail keys (`tickwork._daemon.mail`), checked by that module's rules.
_MAIL_CHECKS: Final = {
    "mail_to": _from_value_error(check_mail_to),
    "mail_command": _from_value_error(check_mail_command),
    "smtp": _from_value_error(check_smtp),
}


def _pool_name(value: object) -> str:
    if (problem := pool_name_problem("pool", value)) is not None:
        raise _Invalid(problem.removeprefix("pool "))
    return cast(str, value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"must be true or false, got {_show(value)}")
    return value


def _retries(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_RETRIES:
        raise _Invalid(f"must be an integer from 0 to {_MAX_RETRIES}, got {_show(value)}")
    return value


def _output_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_OUTPUT_LIMIT:
        raise _Invalid(
            f"must be a number of lines from 1 to {_MAX_OUTPUT_LIMIT}, got {_show(value)}"
        )
    return value


def _dead_man_bound(value: object) -> float | None:
    """A dead-man alert's bound: a duration > 0, or ``0`` for none."""
    return _duration(value) or None


def _keep(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_KEEP:
        raise _Invalid(f"must be a number of entries from 0 to {_MAX_KEEP:,}, got {_show(value)}")
    return value


def _checked(parse: Callable[[object], Any]) -> Callable[[object], Any]:
    """A `jobprocess` check as a config check (its ValueError made `_Invalid`)."""

    def check(value: object) -> Any:
        try:
            return parse(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None

    return check


def _limit(key: str, parse: Callable[[object], int | None]) -> Callable[[object], Any]:
    def check(value: object) -> int | None:
        limit = parse(value)
        if limit is not None:
            check_limit(key, limit)
        return limit

    return _checked(check)


def _cpu(value: object) -> int | None:
    if value == UNLIMITED:
        return None
    try:
        seconds = _duration(value, positive=True)
    except _Invalid as exc:
        raise ValueError(f"{exc} (or 'infinity')") from None
    return parse_cpu(seconds)


#: The checks of the options that set up a command's process (see `jobprocess`).
_PROCESS_CHECKS: Final[dict[str, Callable[[object], Any]]] = {
    "user": _checked(check_user),
    "group": _checked(check_group),
    "umask": _checked(parse_umask),
    "limit_memory": _limit("limit_memory", parse_size),
    "limit_cpu": _limit("limit_cpu", _cpu),
    "limit_files": _limit("limit_files", parse_files),
}

#: Without the host's checks: a user's and a group's shape, not whether this host has it.
_SHAPE_CHECKS: Final = {
    **_PROCESS_CHECKS,
    "user": _checked(lambda v: check_user(v, host=False)),
    "group": _checked(lambda v: check_group(v, host=False)),
}


def _zone_name(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be an IANA zone name such as 'Europe/Berlin', got {_show(value)}")
    try:
        Cron("0 0 * * *", tz=value)
    except CronError as exc:
        raise _Invalid(str(exc).removeprefix("tz: ")) from None
    return value


#: The check of each shared option, in the order problems are reported.
_OPTION_CHECKS: Final[dict[str, Callable[[object], object]]] = {
    "overlap": _choice(_OVERLAP),
    "missed": _choice(_MISSED),
    "delivery": _choice(DELIVERIES),
    "output": _choice(_OUTPUT),
    "output_limit": _output_limit,
    "on_failure": _alert,
    "on_success": _success_hook,
    **_MAIL_CHECKS,
    "keep_ok": _keep,
    "keep_failed": _keep,
    **_PROCESS_CHECKS,
    "grace": _duration,
    "jitter": _duration,
    "timeout": _duration,
    "kill_grace": _duration,
    "retries": _retries,
    "retry_backoff": lambda v: _duration(v, positive=True),
    "retry_backoff_max": lambda v: _duration(v, positive=True),
    "enabled": _bool,
    "timezone": _zone_name,
    "alert_if_missed": _bool,
    "alert_if_no_success": _dead_man_bound,
    "alert_if_late": _dead_man_bound,
    "alert_if_running": _dead_man_bound,
    "pool": _pool_name,
}
#: The same without the host's checks (each key keeps its place).
_OPTION_SHAPE_CHECKS: Final = {**_OPTION_CHECKS, **_SHAPE_CHECKS}


def _json_value(value: object) -> bool:
    if isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, list):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(_json_value(v) for v in value.values())
    return False


class _Checker:
    def __init__(
        self, path: str, locator: _Locator, base_dir: Path, *, check_host: bool = True
    ) -> None:
        self.path = path
        self.locator = locator
        self.base_dir = base_dir
        self.check_host = check_host  # directories, users, env files checked here, or not
        self.issues: list[ConfigIssue] = []
        self.calendars: dict[str, Calendar] = {}
        self.edges: dict[str, Edges] = {}  # each job's after, by name, for chains_fit

    def add(self, where: str, at: _Path, key: str, message: str) -> None:
        self.issues.append(ConfigIssue(self.path, self.locator.line(at), where, key, message))

    def unknown_keys(self, where: str, at: _Path, table: dict[str, Any], known: Any) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                self.add(where, (*at, key), key, f"unknown key{hint}")

    def document(self, doc: dict[str, Any]) -> list[JobConfig]:
        self.unknown_keys("", (), doc, _TOP_KEYS)
        defaults: dict[str, Any] = {}
        raw_defaults = doc.get("defaults", {})
        if not isinstance(raw_defaults, dict):
            self.add("", ("defaults",), "defaults", "must be a table ([defaults])")
        else:
            self.unknown_keys("defaults", ("defaults",), raw_defaults, DEFAULT_KEYS)
            defaults = {k: v for k, v in raw_defaults.items() if k in DEFAULT_KEYS}
            # Check the defaults once, where they are written, not once per job.
            self.options("defaults", ("defaults",), defaults, kind=None)
        self.calendars = parse_calendars(self.add, doc)
        raw_jobs = doc.get("job", [])
        if not isinstance(raw_jobs, list) or not all(isinstance(j, dict) for j in raw_jobs):
            self.add("", ("job",), "job", "must be an array of tables: write each job as [[job]]")
            return []
        if not raw_jobs:
            self.add("", (), "job", "no jobs: add at least one [[job]] table")
        jobs: list[JobConfig] = []
        first_line: dict[str, int] = {}
        for index, table in enumerate(raw_jobs):
            job = self.job(index, table, defaults, first_line)
            if job is not None:
                jobs.append(job)
        self.chains_fit(raw_jobs)
        return jobs

    def job(
        self,
        index: int,
        table: dict[str, Any],
        defaults: dict[str, Any],
        first_line: dict[str, int],
    ) -> JobConfig | None:
        at: _Path = ("job", index)
        before = len(self.issues)
        name = table.get("name")
        where = self.job_name(at, table, first_line)
        self.unknown_keys(where, at, table, JOB_KEYS)
        kind = self.target(where, at, table)
        after, at_start = self.triggers(where, at, table)
        schedule = self.schedule(where, at, table, defaults)
        # A bad name is reported above; any seed lets the other checks go on.
        job = (table, defaults, name if isinstance(name, str) and name else "job")
        if schedule is not None:
            schedule = with_calendar(self.add, where, at, job, schedule, self.calendars)
        elif (stand_in := _stand_in(table, defaults)) is not None:
            check_calendar(self.add, where, at, job, stand_in, self.calendars)
        merged = {**{k: v for k, v in defaults.items() if k != "env"}, **table}
        options = self.options(where, at, table, kind=kind, merged=merged)
        if options.get("overlap") == "replace":
            self.replace_fits(where, at, table, kind=kind)
        env = dict(self.options_env(defaults)) if kind == "command" else {}
        env.update(cast(Mapping[str, str], options.pop("env_file_vars", {})))
        env.update(cast(Mapping[str, str], options.pop("env", {})))
        self.retention_fits(where, at, table, options)
        self.dead_man_fits(where, at, table, options)
        if len(self.issues) > before or (schedule is None and not (after or at_start)):
            return None
        if kind is None:
            return None
        return JobConfig(
            name=cast(str, name),
            schedule=schedule,
            after=after,
            at_start=at_start,
            env=MappingProxyType(env),
            line=self.locator.line(at),
            **_target_fields(kind, table),
            **options,
        )

    def job_name(self, at: _Path, table: dict[str, Any], first_line: dict[str, int]) -> str:
        """Check the job's name (unique in the file); return how messages call the job."""
        name = table.get("name")
        where = f"job #{cast(int, at[1]) + 1}"
        if "name" not in table:
            self.add(where, at, "name", "missing: every job needs a name")
        elif not isinstance(name, str) or not _NAME.fullmatch(name):
            self.add(
                where,
                (*at, "name"),
                "name",
                "must be 1-100 letters, digits or '_.@:-', starting with a letter or digit,"
                f" got {_show(name)}",
            )
        else:
            where = f'job "{name}"'
            if name in first_line:
                self.add(
                    where,
                    (*at, "name"),
                    "name",
                    f"duplicate job name (first defined on line {first_line[name]})",
                )
            else:
                first_line[name] = self.locator.line((*at, "name"))
        return where

    def triggers(self, where: str, at: _Path, table: dict[str, Any]) -> tuple[Edges, bool]:
        """What starts the job besides its schedule: ``after`` (chains) and ``at_start``."""
        name = table.get("name")
        after: Edges = ()
        if "after" in table:  # chains: the names are checked across the file later
            after, key, problem = read_after(table["after"], str(name))
            if problem is not None:
                self.add(where, (*at, "after"), key, problem)
            elif isinstance(name, str):  # checked across the file, whatever else is wrong
                self.edges.setdefault(name, after)
        at_start = table.get("at_start", False)
        if not isinstance(at_start, bool):
            self.add(
                where,
                (*at, "at_start"),
                "at_start",
                f"must be true or false, got {_show(at_start)}",
            )
        return after, at_start is True

    def chains_fit(self, raw_jobs: list[dict[str, Any]]) -> None:
        """Chains across the file: each ``after`` names a job of it, and no cycle."""
        index = {t.get("name"): i for i, t in enumerate(raw_jobs) if isinstance(t.get("name"), str)}
        edges = {name: after for name, after in self.edges.items() if after}
        for name, problem in chain_problems(edges, [n for n in index if isinstance(n, str)]):
            self.add(f'job "{name}"', ("job", index[name], "after"), "after", problem)

    def retention_fits(
        self, where: str, at: _Path, table: dict[str, Any], options: dict[str, Any]
    ) -> None:
        """Refuse ``keep_ok``/``keep_failed`` that would hide ``on_failure``'s streak.

        The streak is counted from the slot ledger: it needs the newest ok entry and at
        least ``failures`` failed runs' entries (one per attempt with ``retries``).
        """
        alert = options.get("on_failure")
        if alert is None:
            return
        tries = 1 + options.get("retries", 0)  # each failed attempt is an entry
        of = f" of {tries} attempts each (retries = {tries - 1})" if tries > 1 else ""
        for key, least, why in (
            (
                "keep_failed",
                alert.failures * tries,
                f"on_failure.failures = {alert.failures} failed runs{of}",
            ),
            ("keep_ok", 1, "the newest ok run, where the failure streak starts"),
        ):
            keep = options.get(key)
            if keep is not None and keep < least:
                key_at = (*at, key) if key in table else ("defaults", key)
                self.add(
                    where,
                    key_at,
                    key,
                    f"is {keep}, but on_failure counts the failure streak from the slot"
                    f" ledger and needs {why} kept: set {key} to at least {least}",
                )

    def dead_man_fits(
        self, where: str, at: _Path, table: dict[str, Any], options: dict[str, Any]
    ) -> None:
        """Refuse a dead-man alert key on a job with no ``on_failure`` to send it through."""
        if options.get("on_failure") is not None:
            return
        for key in DEAD_MAN_KEYS:
            if options.get(key) not in (None, False):
                key_at = (*at, key) if key in table else ("defaults", key)
                self.add(
                    where,
                    key_at,
                    key,
                    "needs on_failure (a command and/or webhook): the alert is sent through it",
                )

    def replace_fits(
        self, where: str, at: _Path, table: dict[str, Any], *, kind: str | None
    ) -> None:
        """Refuse ``overlap = "replace"`` (written here or in defaults) where it cannot work."""
        key_at = (*at, "overlap") if "overlap" in table else ("defaults", "overlap")
        source = "" if "overlap" in table else " (from [defaults]; set overlap on this job)"
        if kind == "call":
            self.add(
                where,
                key_at,
                "overlap",
                f"'replace' applies only to command jobs{source}: it ends the running"
                " command's process group, and an in-process call cannot be stopped",
            )
        elif table.get("fixed_delay") is True:
            self.add(
                where,
                key_at,
                "overlap",
                f"'replace' cannot apply to a fixed_delay job{source}: its runs never"
                " overlap (the next is due only after the previous ends)",
            )

    def options_env(self, defaults: dict[str, Any]) -> Mapping[str, str]:
        env = defaults.get("env", {})
        return (
            env if isinstance(env, dict) and all(isinstance(v, str) for v in env.values()) else {}
        )

    def target(self, where: str, at: _Path, table: dict[str, Any]) -> str | None:
        """Check command/shell/call/args/kwargs; return "command", "call" or None."""
        has_command, has_call = "command" in table, "call" in table
        if has_command == has_call:
            self.add(
                where,
                at if not has_call else (*at, "call"),
                "command" if has_command else "",
                "set exactly one of command and call"
                if has_command
                else "missing: set command (a program to run) or call (a Python callable)",
            )
            return None
        ok = self._command(where, at, table) if has_command else self._call(where, at, table)
        return ("command" if has_command else "call") if ok else None

    def _command(self, where: str, at: _Path, table: dict[str, Any]) -> bool:
        """Check a command job's command/shell (and that it has no args/kwargs)."""
        ok = True
        shell = table.get("shell", False)
        command = table["command"]
        if not isinstance(shell, bool):
            self.add(where, (*at, "shell"), "shell", f"must be true or false, got {_show(shell)}")
            ok = False
        elif shell:
            if not isinstance(command, str) or not command.strip():
                self.add(
                    where,
                    (*at, "command"),
                    "command",
                    f"with shell = true, must be a non-empty string, got {_show(command)}",
                )
                ok = False
        elif isinstance(command, str):
            self.add(
                where,
                (*at, "command"),
                "command",
                f"a string runs only with shell = true; give an argv array such as"
                f' ["sh", "-c", "..."] or set shell = true, got {command!r}',
            )
            ok = False
        elif (
            not isinstance(command, list)
            or not command
            or not all(isinstance(a, str) for a in command)
            or not command[0]
        ):
            self.add(
                where,
                (*at, "command"),
                "command",
                f"must be a non-empty array of strings (argv), got {_show(command)}",
            )
            ok = False
        for key in ("args", "kwargs", "isolation"):
            if key in table:
                self.add(where, (*at, key), key, "applies only to call jobs")
                ok = False
        return ok

    def _call(self, where: str, at: _Path, table: dict[str, Any]) -> bool:
        """Check a call job's call/args/kwargs (and that it has no shell)."""
        ok = True
        call = table["call"]
        if not isinstance(call, str) or not _IMPORT_PATH.fullmatch(call):
            self.add(
                where,
                (*at, "call"),
                "call",
                f'must be an import path "package.module:function", got {_show(call)}',
            )
            ok = False
        if "shell" in table:
            self.add(where, (*at, "shell"), "shell", "applies only to command jobs")
            ok = False
        isolation = table.get("isolation", "thread")
        if not isinstance(isolation, str) or isolation not in ISOLATIONS:
            choices = ", ".join(f'"{i}"' for i in ISOLATIONS)
            self.add(
                where,
                (*at, "isolation"),
                "isolation",
                f"must be one of {choices}, got {_show(isolation)}",
            )
            ok = False
        args = table.get("args", [])
        if not isinstance(args, list) or not _json_value(args):
            self.add(
                where,
                (*at, "args"),
                "args",
                f"must be an array of JSON-compatible values, got {_show(args)}",
            )
            ok = False
        kwargs = table.get("kwargs", {})
        if not isinstance(kwargs, dict) or not _json_value(kwargs):
            self.add(
                where,
                (*at, "kwargs"),
                "kwargs",
                "must be a table of JSON-compatible values (no dates or times)",
            )
            ok = False
        return ok

    def schedule(
        self, where: str, at: _Path, table: dict[str, Any], defaults: dict[str, Any]
    ) -> Schedule | None:
        """The job's schedule (``every``, ``cron``, ``at`` or ``in``), or None if it is wrong."""
        key = self._schedule_key(where, at, table)
        if key is None:
            return None
        extras_ok = self._extras_fit(where, at, table, key)
        bounds = self._bounds(where, at, table, defaults, key)
        try:
            schedule = _build_schedule(key, table[key], table, defaults, bounds)
        except _Invalid as exc:
            self.add(where, (*at, key), key, str(exc))
            return None
        return schedule if extras_ok and bounds.ok else None

    def _schedule_key(self, where: str, at: _Path, table: dict[str, Any]) -> str | None:
        """The one schedule key the job sets (None: none or several, reported if wrong)."""
        given = [k for k in _SCHEDULE_KEYS if k in table]
        if len(given) == 1:
            return given[0]
        if given:
            listed = ", ".join(given)
            self.add(where, (*at, given[1]), given[1], f"set exactly one schedule, got {listed}")
        elif "after" not in table and table.get("at_start") is not True:  # only then
            self.add(where, at, "", "missing a schedule: set every, cron, at or in")
        return None

    def _extras_fit(self, where: str, at: _Path, table: dict[str, Any], key: str) -> bool:
        """The keys that go with one schedule kind are set only with that kind."""
        ok = True
        for extra, only in (("fixed_delay", "every"), ("timezone", "cron"), ("first", "every")):
            if extra in table and key != only and not _zone_for_calendar(extra, key, table):
                self.add(where, (*at, extra), extra, f"applies only to {only} schedules")
                ok = False
        for extra in ("jitter", "until"):
            if extra in table and key in ("at", "in"):
                self.add(where, (*at, extra), extra, "applies only to every and cron schedules")
                ok = False
        return ok

    def _bounds(
        self, where: str, at: _Path, table: dict[str, Any], defaults: dict[str, Any], key: str
    ) -> _Bounds:
        """Read ``first``, ``until``, ``jitter`` and ``fixed_delay`` for the schedule ``key``."""
        ok = True
        first: float | None = None
        until: float | None = None
        try:
            if "first" in table and key == "every":
                first = _duration(table["first"])
        except _Invalid as exc:
            self.add(where, (*at, "first"), "first", str(exc))
            ok = False
        try:
            if "until" in table and key in ("every", "cron"):
                until = _instant(table["until"]).timestamp()
        except _Invalid as exc:
            self.add(where, (*at, "until"), "until", str(exc))
            ok = False
        jitter = 0.0
        try:
            jitter = _duration(table.get("jitter", defaults.get("jitter", 0)))
        except _Invalid:
            ok = False  # reported by options()
        fixed = table.get("fixed_delay", False)
        if key == "every" and not isinstance(fixed, bool):
            self.add(
                where,
                (*at, "fixed_delay"),
                "fixed_delay",
                f"must be true or false, got {_show(fixed)}",
            )
            ok = False
        return _Bounds(first, until, jitter, fixed is True, ok)

    def options(
        self,
        where: str,
        at: _Path,
        table: dict[str, Any],
        *,
        kind: str | None,
        merged: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Check the shared options written in ``table``; return the values for a job.

        ``merged`` is the job's table over the defaults; the result is built from it,
        while problems are reported only for keys written in ``table`` itself.
        """
        source = merged if merged is not None else table
        out = self._option_values(where, at, table, source)
        if kind == "call":
            self._call_options(where, at, table, out)
        if "env" in table:
            self._env(where, at, table["env"], kind, out)
        if kind != "call":
            self._working_dir(where, at, table, source, out)
        if "env_file" in source:
            self._env_file(where, at, table, source["env_file"], out)
        if kind == "call":
            for key in ("cwd", "env_file", "env_file_vars"):
                out.pop(key, None)
        return out

    def _option_values(
        self, where: str, at: _Path, table: dict[str, Any], source: dict[str, Any]
    ) -> dict[str, Any]:
        """Each option of ``source`` through its check (see `_OPTION_CHECKS`)."""
        out: dict[str, Any] = {}
        checks = _OPTION_CHECKS if self.check_host else _OPTION_SHAPE_CHECKS
        for key, check in checks.items():
            if key not in source:
                continue
            try:
                value = check(source[key])
            except _Invalid as exc:
                if key in table:
                    self.add(where, (*at, key), key, str(exc))
                continue
            if key in ("jitter", "timezone"):
                continue  # part of the schedule
            if key == "timeout":
                value = value or None  # 0 means no timeout, as in systemd
            out[key] = value
        return out

    def _call_options(
        self, where: str, at: _Path, table: dict[str, Any], out: dict[str, Any]
    ) -> None:
        """A call job: refuse the options of commands (and of a child process without one)."""
        for key, why in _COMMAND_ONLY.items():
            if key in table:
                self.add(where, (*at, key), key, f"applies only to command jobs ({why})")
        process = table.get("isolation") == "process"
        for key, why in () if process else _CHILD_ONLY.items():
            if key in table:
                self.add(where, (*at, key), key, why)
        for key in (*(() if process else _CHILD_ONLY), *_PROCESS_CHECKS):
            out.pop(key, None)
        if "timeout" not in table:  # [defaults]' timeout is for commands
            out.pop("timeout", None)

    def _working_dir(
        self,
        where: str,
        at: _Path,
        table: dict[str, Any],
        source: dict[str, Any],
        out: dict[str, Any],
    ) -> None:
        """``working_dir`` (or its older name ``cwd``): a directory that exists.

        A leading ``-`` (systemd's ``WorkingDirectory=-``) lets it be missing: kept in
        the value, which the runner resolves when a run starts (`optional_dir`).
        """
        if "working_dir" in table and "cwd" in table:
            self.add(
                where, (*at, "cwd"), "cwd", "set working_dir or cwd (its older name), not both"
            )
            return
        key = next((k for k in ("working_dir", "cwd") if k in table), None)
        key = key or next((k for k in ("working_dir", "cwd") if k in source), None)
        if key is None:
            return
        value = source[key]
        optional = isinstance(value, str) and value.startswith("-")
        if not isinstance(value, str) or not value.removeprefix("-"):
            if key in table:
                self.add(where, (*at, key), key, f"must be a directory path, got {_show(value)}")
            return
        path = str(self.base_dir / os.path.expanduser(value.removeprefix("-")))
        if optional:
            path = f"-{path}"
        elif self.check_host and not os.path.isdir(path):
            if key in table:
                why = "is not a directory" if os.path.exists(path) else "does not exist"
                self.add(where, (*at, key), key, f"{path!r} {why}")
            return
        out["cwd"] = path

    def _env_file(
        self, where: str, at: _Path, table: dict[str, Any], value: object, out: dict[str, Any]
    ) -> None:
        """``env_file``: read now; its variables go under the job's ``env``."""
        if not isinstance(value, str) or not value:
            if "env_file" in table:
                self.add(
                    where, (*at, "env_file"), "env_file", f"must be a file path, got {_show(value)}"
                )
            return
        path = str(self.base_dir / os.path.expanduser(value))
        try:
            out["env_file_vars"] = read_env_file(path) if self.check_host else {}
        except ValueError as exc:
            if "env_file" in table:
                self.add(where, (*at, "env_file"), "env_file", str(exc))
            return
        out["env_file"] = path

    def _env(
        self, where: str, at: _Path, env: object, kind: str | None, out: dict[str, Any]
    ) -> None:
        """Check an ``env`` table; for a job (``kind`` not None) it also goes into ``out``."""
        if not isinstance(env, dict):
            self.add(where, (*at, "env"), "env", f"must be a table of strings, got {_show(env)}")
        else:
            for name, value in env.items():
                if not name or "=" in name or "\0" in name:
                    self.add(
                        where,
                        (*at, "env", name),
                        f"env.{name}",
                        f"is not a valid variable name: {name!r}",
                    )
                elif not isinstance(value, str):
                    self.add(
                        where,
                        (*at, "env", name),
                        f"env.{name}",
                        f'must be a string (quote it: "{value}"), got {_show(value)}',
                    )
            if kind is not None:
                out["env"] = env


#: Options of a ``call`` job only with ``isolation = "process"``, with why.
_CHILD_ONLY: Final = {
    "kill_grace": 'applies to a call only with isolation = "process" (a thread cannot be'
    " killed: at its timeout the run is recorded timeout and the thread goes on)",
    "output_limit": 'applies to a call only with isolation = "process" (a call in the'
    " daemon's process has no output of its own)",
}
#: Options of command jobs only, with why a ``call`` job cannot have them.
_COMMAND_ONLY: Final = {
    "env": "a call runs inside the daemon's process",
    "cwd": "a call runs inside the daemon's process",
    "working_dir": "a call runs inside the daemon's process",
    "env_file": "a call runs inside the daemon's process",
    **{
        key: "a call runs inside the daemon's process, which it cannot change for one job"
        for key in ("user", "group", "umask", "limit_memory", "limit_cpu", "limit_files")
    },
}


def _target_fields(kind: str, table: dict[str, Any]) -> dict[str, Any]:
    """The `JobConfig` fields of a checked command or call."""
    if kind == "command":
        shell = table.get("shell", False)
        command = table["command"]
        return {"command": command if shell else tuple(command), "shell": shell}
    return {
        "call": table["call"],
        "args": tuple(table.get("args", ())),
        "kwargs": MappingProxyType(dict(table.get("kwargs", {}))),
        "isolation": table.get("isolation", "thread"),
    }


@dataclass(frozen=True, slots=True)
class _Bounds:
    """What bounds a schedule besides its own value, and whether all of it reads well."""

    first: float | None
    until: float | None
    jitter: float
    fixed_delay: bool
    ok: bool


def _build_schedule(
    key: str, value: object, table: dict[str, Any], defaults: dict[str, Any], bounds: _Bounds
) -> Schedule | None:
    """The schedule ``key = value`` writes (None: a cron zone that options() reports)."""
    if key == "every":
        return Every(
            _duration(value, positive=True),
            fixed_delay=bounds.fixed_delay,
            jitter=bounds.jitter,
            first=bounds.first,
            until=bounds.until,
        )
    if key == "cron":
        tz = table.get("timezone", defaults.get("timezone", "UTC"))
        if not isinstance(value, str):
            raise _Invalid(f"must be a string such as '0 3 * * *', got {_show(value)}")
        if not isinstance(tz, str):
            return None  # reported by options()
        try:
            return Cron(value, tz=tz, jitter=bounds.jitter, until=bounds.until)
        except CronError as exc:
            if str(exc).startswith("tz:"):
                return None  # reported by options(), where the zone is written
            raise _Invalid(str(exc)) from None
    if key == "at":
        return At(_instant(value).timestamp())
    return Once(_duration(value))


def _stand_in(table: dict[str, Any], defaults: dict[str, Any]) -> Schedule | None:
    """A schedule of the kind the job wrote, with its jitter, when its own value is wrong.

    It lets the keys that depend on the kind be checked all the same (None: no single
    schedule key, or a bad jitter, which is reported by itself).
    """
    given = [k for k in _SCHEDULE_KEYS if k in table]
    try:
        jitter = _duration(table.get("jitter", defaults.get("jitter", 0)))
    except _Invalid:
        return None
    if given == ["every"]:
        return Every(60.0, jitter=jitter)
    if given == ["cron"]:
        return Cron("0 0 * * *", jitter=jitter)
    return At(0.0) if given == ["at"] else Once(0.0) if given == ["in"] else None


def _zone_for_calendar(extra: str, key: str, table: dict[str, Any]) -> bool:
    """An ``every`` job with a ``calendar`` reads its days in its ``timezone``."""
    return extra == "timezone" and key == "every" and "calendar" in table


def _instant(value: object) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise _Invalid(
                f"must be an RFC 3339 date-time with an offset such as"
                f" '2026-12-02T17:00:00Z', got {value!r}"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise _Invalid(
                f"needs a UTC offset (2026-12-02T17:00:00Z or +01:00), got {value.isoformat()}"
            )
        if not in_calendar(value.timestamp()):
            raise _Invalid(f"must fall in the years 1 to 9999 (UTC), got {value.isoformat()}")
        return value
    if isinstance(value, (date, time)):
        raise _Invalid(f"needs a date, a time and a UTC offset, got {value.isoformat()}")
    raise _Invalid(f"must be a date-time with an offset, got {_show(value)}")


# -- the locator: key paths to source lines ----------------------------------------------


class _Locator:
    """Maps key paths (``("job", 2, "env", "PORT")``) to the line that wrote them.

    It scans text that ``tomllib`` has already accepted, so it only has to tell keys
    and table headers from the inside of values (strings, arrays, comments). A path
    it does not know falls back to its longest known prefix (an inline table's keys
    report the line of the table), then to line 1.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[_Path, int] = {}
        self._arrays: dict[_Path, int] = {}
        self._scan(text)

    def line(self, path: _Path) -> int:
        """The line of ``path``, or of its longest known prefix, else 1."""
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return 1

    def _scan(self, text: str) -> None:
        i, n, line = 0, len(text), 1
        table: _Path = ()
        while i < n:
            while i < n and text[i] in " \t\r":
                i += 1
            if i >= n:
                break
            c = text[i]
            if c == "\n":
                line += 1
                i += 1
            elif c == "#":
                i = _eol(text, i)
            elif c == "[":
                array = text.startswith("[[", i)
                keys, i = _keys(text, i + (2 if array else 1))
                table = self._header(keys, array)
                self._lines.setdefault(table, line)
                i = _eol(text, i)
            else:
                keys, i = _keys(text, i)
                if not keys:
                    i = _eol(text, i)
                    continue
                self._lines.setdefault((*table, *keys), line)
                while i < n and text[i] in " \t=":
                    i += 1
                i, line = _skip_value(text, i, line)

    def _header(self, keys: list[str], array: bool) -> _Path:
        path: _Path = ()
        for k, key in enumerate(keys):
            path = (*path, key)
            if array and k == len(keys) - 1:
                index = self._arrays.get(path, -1) + 1
                self._arrays[path] = index
                path = (*path, index)
            elif path in self._arrays:
                path = (*path, self._arrays[path])
        return path


_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")


def _eol(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _keys(text: str, i: int) -> tuple[list[str], int]:
    """Read a dotted key at ``i``; return its parts and the index after it."""
    keys: list[str] = []
    n = len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] in "\"'":
            quote = text[i]
            j = i + 1
            while j < n and text[j] != quote:
                j += 2 if quote == '"' and text[j] == "\\" else 1
            raw = text[i : j + 1]
            keys.append(cast(str, tomllib.loads(f"k = {raw}")["k"]))
            i = j + 1
        else:
            m = _BARE_KEY.match(text, i)
            if not m:
                break
            keys.append(m.group())
            i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == ".":
            i += 1
            continue
        break
    return keys, i


def _skip_value(text: str, i: int, line: int) -> tuple[int, int]:
    """Skip a value from ``i`` to the newline that ends it; return (index, line)."""
    n, depth = len(text), 0
    while i < n:
        c = text[i]
        if c == "\n":
            if depth == 0:
                return i, line
            line += 1
            i += 1
        elif c == "#":
            i = _eol(text, i)
        elif c in "\"'":
            triple = text.startswith(c * 3, i)
            i += 3 if triple else 1
            while i < n:
                if c == '"' and text[i] == "\\":
                    line += text[i + 1 : i + 2] == "\n"
                    i += 2
                elif triple and text.startswith(c * 3, i):
                    i += 3
                    while i < n and text[i] == c:  # up to two quotes may end the content
                        i += 1
                    break
                elif not triple and text[i] == c:
                    i += 1
                    break
                else:
                    line += text[i] == "\n"
                    i += 1
        elif c in "[{":
            depth += 1
            i += 1
        elif c in "]}":
            depth -= 1
            i += 1
        else:
            i += 1
    return i, line
