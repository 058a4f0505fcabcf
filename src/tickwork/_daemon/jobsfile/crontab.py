"""A crontab as a jobs file: ``tickwork import crontab`` and ``tickwork run --crontab``.

`translate_crontab` reads the text of a crontab as Vixie cron (Debian's ``cron``,
cronie) reads it and writes the equivalent jobs file as TOML text, one ``[[job]]`` a
line, with comments that say where each job came from and what cron did that tickwork
does differently. `crontab_config` also validates that text with `parse_config`, the
jobs file's own validator, so a crontab is checked by the same rules as any jobs file.
Both are pure but for the user this process runs as (see `CrontabOptions.users`):
they read only the text they are given; `load_crontab` reads a file.

What is carried over, line by line (``docs/daemon.md``, "Coming from cron"):

* ``NAME=value`` lines (quoted or not, spaces around ``=``) set the environment of the
  lines *after* them, as in cron: what every job shares goes to ``[defaults] env``,
  the rest to the job's own ``env``. ``SHELL`` is the program that runs the command
  (``[SHELL, "-c", command]``, ``/bin/sh`` by default); ``HOME`` is the working
  directory (cron ``chdir``s there; without it, the home of the user: ``~``, or
  ``~user`` in a system crontab), written ``"-..."``: cron runs the command all the
  same when it is missing, and so does the runner, in ``/``; ``CRON_TZ`` is the zone
  of the schedules (cron's default, the system's zone, is ``timezone = "local"``).
  ``TZ`` only goes to the environment: cron schedules in its own zone whatever a
  crontab sets it to.
  ``MAILTO`` becomes ``mail_to`` of the lines after it (``[defaults]`` when every job
  has the same): a failed run's output is mailed there (`tickwork._daemon.mail`).
* A schedule of five fields (six with ``seconds=True``: a seconds field first) or a
  nickname (``@daily`` ...); ``@reboot`` is ``at_start = true``, a run at each start
  of the daemon (see `_REBOOT`). Fields are checked against cron's own grammar
  (numbers, ``*``, ranges, steps, lists, English month and day names), then by
  `CronExpression`.
* A system crontab's user field: the job's ``user`` when `CrontabOptions.users`
  (by default: when this process runs as root), else a remark on each line of a user
  other than this process's, which runs them all.
* The command: up to the first ``%`` not escaped by a backslash; the rest of the line,
  each further ``%`` a newline, is the command's standard input, written to it by
  ``/bin/sh`` (``printf '%s' "$1" | "$2" -c "$3"``), byte for byte as cron does.
* A job's name comes from its command (the program or script it runs), made unique
  by a hash of the line when two lines would share it, so re-importing the same file
  gives the same names.

Lines cron rejects, and lines that cannot be carried over, are left out with a
`CrontabNote` naming the line and the reason (``skipped``); other notes (MAILTO, a
user field, carriage returns, a last line with no newline) are remarks.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tickwork._core.cron import ALIASES, CronExpression
from tickwork._core.errors import ConfigError, ConfigIssue, CronError
from tickwork._daemon.jobsfile.config import Config, parse_config
from tickwork._daemon.mail import check_mail_to

__all__ = [
    "CrontabNote",
    "CrontabOptions",
    "Translation",
    "crontab_config",
    "load_crontab",
    "translate_crontab",
]

#: What cron runs a command with when the crontab sets no ``SHELL``.
DEFAULT_SHELL: Final = "/bin/sh"

_REBOOT: Final = (
    "@reboot: at_start = true, one run each time the daemon starts (cron: each time the"
    " machine boots); start the daemon at boot, and know that a restart of it runs the"
    " line again (a reload does not)"
)


@dataclass(frozen=True, slots=True)
class CrontabOptions:
    """How to read a crontab."""

    system: bool = False
    """The system crontab format (``/etc/crontab``, ``/etc/cron.d/*``): a user field
    between the schedule and the command."""
    seconds: bool = False
    """Schedules have six fields, a seconds field first (``*/10 * * * * *``), as some
    cron replacements read them; cron itself has five."""
    keep_going: bool = False
    """For `load_crontab`: run the lines that translate when others cannot (each is
    warned about) instead of refusing the crontab."""
    users: bool | None = None
    """With `system`: run each line as the user of its user field (``user =``), which
    only a daemon running as root can; ``False``: every line runs as the daemon's user,
    each line of another user warned about. ``None``: as this process runs as root."""


@dataclass(frozen=True, slots=True)
class CrontabNote:
    """A remark on one line of a crontab, or a line left out (`skipped`)."""

    line: int
    """The 1-based line (0: the whole file)."""
    message: str
    """What is wrong or different, and why."""
    skipped: bool = False
    """The line is not in the jobs file (cron rejects it, or it has no equivalent)."""

    def text(self, path: str) -> str:
        """``path:line: message``, as a jobs file's problems are shown."""
        head = f"{path}:{self.line}" if self.line else path
        return f"{head}: {self.message}"


@dataclass(frozen=True, slots=True)
class Translation:
    """A crontab as a jobs file: the TOML text and what to tell the operator."""

    toml: str
    """The jobs file (with a comment above each job naming its crontab line)."""
    jobs: int
    """How many jobs it has."""
    notes: tuple[CrontabNote, ...] = ()
    """Remarks and left-out lines, in line order."""

    @property
    def skipped(self) -> tuple[CrontabNote, ...]:
        """The notes of lines that are not in the jobs file."""
        return tuple(note for note in self.notes if note.skipped)


# -- reading the lines -----------------------------------------------------------------


@dataclass(slots=True)
class _Job:
    """One crontab line that is a job, with what was in effect at that line."""

    line: int
    source: str
    schedule: str
    command: str
    stdin: str | None
    user: str | None
    env: dict[str, str]
    shell: str
    zone: str
    cwd: str
    name: str = ""


@dataclass(slots=True)
class _State:
    """What the lines read so far set: cron's environment for the lines that follow."""

    options: CrontabOptions
    me: str = ""
    """The user this process runs as (the daemon's)."""
    users: bool = False
    """Each line runs as its user (`CrontabOptions.users`, resolved)."""
    env: dict[str, str] = field(default_factory=dict)
    zone: str = "local"
    zone_line: int = 0
    bad_zone: int = 0
    mailto: list[tuple[int, str]] = field(default_factory=list)
    jobs: list[_Job] = field(default_factory=list)
    notes: list[CrontabNote] = field(default_factory=list)
    left_out: list[tuple[int, str, str]] = field(default_factory=list)

    def note(self, line: int, message: str) -> None:
        self.notes.append(CrontabNote(line, message))

    def skip(self, line: int, source: str, message: str) -> None:
        """Leave line ``line`` (its text ``source``) out of the jobs file, saying why."""
        self.notes.append(CrontabNote(line, message, skipped=True))
        self.left_out.append((line, source, message))


_BLANKS: Final = " \t"


def translate_crontab(
    text: str, *, path: str = "<stdin>", options: CrontabOptions | None = None
) -> Translation:
    """The jobs file equivalent to the crontab ``text`` (see the module's docstring).

    Args:
        text: The crontab.
        path: Its name, for the comments.
        options: How to read it (default: a user crontab of five-field schedules).

    Returns:
        The TOML text, its number of jobs, and every note.
    """
    options = options or CrontabOptions()
    users = options.users if options.users is not None else os.geteuid() == 0
    state = _State(options, me=_whoami(), users=users)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        state.note(
            len(lines),
            "no newline at the end of the file: cron ignores such a last line (and"
            " `crontab` refuses the file); imported anyway",
        )
    crlf = [n for n, line in enumerate(lines, 1) if line.endswith("\r")]
    if crlf:
        state.note(
            crlf[0],
            f"{len(crlf)} line{'s' if len(crlf) != 1 else ''} end with CRLF (a carriage"
            " return, as written on Windows):"
            " the carriage returns are dropped; cron would have passed them to the shell"
            " as the last character of each command",
        )
    for number, raw in enumerate(lines, 1):
        _read_line(state, number, raw.removesuffix("\r"))
    _name_jobs(state.jobs)
    notes = tuple(sorted(state.notes, key=lambda note: note.line))
    toml = _Writer(state, path).document()
    return Translation(toml, len(state.jobs), notes)


def _read_line(state: _State, number: int, raw: str) -> None:
    """One line: blank, comment, environment setting or job (cron's order of tries)."""
    line = raw.lstrip(_BLANKS)
    if not line or line.startswith("#"):
        return
    setting = _env_setting(line)
    if setting is not None:
        _set(state, number, line, *setting)
        return
    if state.bad_zone:
        state.skip(number, line, f"its CRON_TZ (line {state.bad_zone}) is not a time zone")
        return
    try:
        job = _job(state, number, line)
    except _Never as exc:
        state.skip(number, line, f"{exc} (cron accepts this line and never runs it)")
        return
    except _Rejected as exc:
        state.skip(number, line, f"{exc} (cron rejects this line)")
        return
    except _Refused as exc:
        state.skip(number, line, str(exc))
        return
    if job is None:
        return
    if job.user is not None and job.user != state.me and not state.users:
        state.note(
            number,
            f"cron ran this line as user {job.user}; tickwork runs it as the daemon's user"
            f" ({state.me}): only a daemon running as root runs each line as its user",
        )
    if job.command.endswith("\\"):
        state.note(
            number,
            "the line ends with a backslash: cron has no line continuation, so the"
            " backslash goes to the shell as it is and the next line is a line of its own",
        )
    state.jobs.append(job)


def _whoami() -> str:
    """The name of the user this process runs as (its uid when it has none)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


class _Rejected(Exception):
    """A line cron itself would not accept; the message says why."""


class _Refused(Exception):
    """A line cron would run, but not as its author meant; the message says why."""


class _Never(Exception):
    """A schedule cron accepts that matches no date (February 31); the message says so."""


def _env_setting(line: str) -> tuple[str, str] | None:
    """``(name, value)`` if cron reads ``line`` as an environment setting, else None.

    Vixie cron's ``load_env``: a name (quoted or not) and a value (quoted or not) around
    ``=`` with optional blanks; an unquoted value runs to the end of the line less its
    trailing blanks; after a closing quote only blanks may follow.
    """
    m = re.fullmatch(
        r"""(?:"([^"=]*)"|'([^'=]*)'|([^\s=]+))[ \t]*=[ \t]*(.*)""", line, flags=re.DOTALL
    )
    if m is None:
        return None
    name = next(g for g in m.groups()[:3] if g is not None)
    if not name:
        return None
    rest = m.group(4)
    if rest[:1] in ("'", '"'):
        quote = rest[0]
        end = rest.find(quote, 1)
        if end < 0 or rest[end + 1 :].strip(_BLANKS):
            return None
        return name, rest[1:end]
    return name, rest.rstrip(" \t\v\f")


def _set(state: _State, number: int, source: str, name: str, value: str) -> None:
    if name == "MAILTO":
        state.mailto.append((number, value))
    elif name == "CRON_TZ":
        try:
            CronExpression("0 0 * * *", tz=value or "local")
        except CronError as exc:
            state.skip(number, source, f"CRON_TZ: {str(exc).removeprefix('tz: ')}")
            state.bad_zone = number
            return
        state.zone, state.zone_line, state.bad_zone = value or "local", number, 0
    else:
        if name == "TZ" and not any(n == "TZ" for n in state.env):
            state.note(
                number,
                "TZ is set in the jobs' environment only: cron schedules in the system's"
                " zone whatever TZ the crontab sets (timezone stays as it was); write"
                " CRON_TZ= to schedule in another zone",
            )
        state.env[name] = value


def _take(text: str, n: int) -> tuple[list[str], str]:
    """The first ``n`` blank-separated words of ``text`` and the rest (its blanks skipped)."""
    words: list[str] = []
    rest = text
    for _ in range(n):
        rest = rest.lstrip(_BLANKS)
        m = re.match(r"[^ \t]+", rest)
        if m is None:
            break
        words.append(m.group())
        rest = rest[m.end() :]
    return words, rest.lstrip(_BLANKS)


_NICKNAMES: Final = tuple(alias.removeprefix("@") for alias in ALIASES)


def _job(state: _State, number: int, line: str) -> _Job | None:
    """The job of a schedule line (@reboot noted); `_Rejected` if cron rejects it."""
    options = state.options
    if line.startswith("@"):
        words, rest = _take(line, 1)
        nickname = words[0][1:]
        if nickname != "reboot" and nickname not in _NICKNAMES:
            known = ", ".join(f"@{n}" for n in ("reboot", *_NICKNAMES))
            raise _Rejected(f"unknown schedule {words[0]!r} (known: {known})")
        schedule = words[0]
    else:
        width = 6 if options.seconds else 5
        words, rest = _take(line, width)
        if len(words) < width or not rest:
            what = "six fields (seconds first)" if options.seconds else "five fields"
            raise _Rejected(f"expected {what}, then the command")
        _check_fields(words, seconds=options.seconds)
        schedule = " ".join(words)
    _check_after_schedule(rest, seconds=options.seconds, system=options.system)
    user = None
    if options.system:
        users, rest = _take(rest, 1)
        if not users or not rest:
            raise _Rejected("expected the user field, then the command (system crontab format)")
        user = users[0]
    command, stdin = _split_percent(rest)
    command = _strip_end(command)
    if not command.strip():
        raise _Rejected("no command")
    zone = state.zone
    try:
        if schedule == "@reboot":
            state.note(number, _REBOOT)
        else:
            CronExpression(schedule, tz=zone)
    except CronError as exc:
        if " never " in str(exc):
            raise _Never(str(exc)) from None
        raise _Rejected(str(exc)) from None
    env = dict(state.env)
    home = state.env.get("HOME") or ("~" if user is None else f"~{user}")
    shell = state.env.get("SHELL") or DEFAULT_SHELL
    return _Job(number, line, schedule, command, stdin, user, env, shell, zone, home)


_NUMBER: Final = r"[0-9]+|[A-Za-z]+"
_ITEM: Final = re.compile(rf"(?:\*|(?:{_NUMBER})(?:-(?:{_NUMBER}))?)(?:/[0-9]+)?")
_FIELDS: Final = ("minute", "hour", "day-of-month", "month", "day-of-week")
_MONTHS: Final = frozenset(
    "jan feb mar apr may jun jul aug sep oct nov dec".split()  # noqa: SIM905
)
_DAYS: Final = frozenset("sun mon tue wed thu fri sat".split())  # noqa: SIM905


def _check_fields(words: list[str], *, seconds: bool) -> None:
    """Refuse what cron's grammar does not have (``L``, ``W``, ``#``, ``?``, long names)."""
    names = (("second",) if seconds else ()) + _FIELDS
    for name, word in zip(names, words, strict=True):
        for item in word.split(","):
            if not _ITEM.fullmatch(item):
                raise _Rejected(f"{name}: {word!r} is not cron syntax (bad item {item!r})")
            allowed = _MONTHS if name == "month" else _DAYS if name == "day-of-week" else ()
            for part in re.findall(r"[A-Za-z]+", item):
                if part.lower() in allowed:
                    continue
                if not allowed:
                    raise _Rejected(
                        f"{name}: {word!r} is not cron syntax (cron reads only numbers, *,"
                        " ranges, steps and lists here)"
                    )
                what = "month" if name == "month" else "day"
                raise _Rejected(
                    f"{name}: {part!r} in {word!r} is not a three-letter English {what} name"
                )


#: A word that reads as a schedule field (a number, ``*``, ``*/10``, ``1-5``, ``?``...).
_FIELD_LIKE: Final = re.compile(r"(?=.*[0-9*?])[0-9*?/,#LW-]+")


def _check_after_schedule(rest: str, *, seconds: bool, system: bool) -> None:
    """Refuse a line whose word after the schedule reads as one more schedule field.

    A seconds field without ``--seconds``, or a year field, leaves a schedule word where
    cron reads the user or the command: cron would run ``*/10`` as a program (the shell
    expanding ``*`` to the names of files first), or look for a user ``*``.
    """
    word = rest.split(maxsplit=1)[0] if rest.strip() else ""
    if not _FIELD_LIKE.fullmatch(word):
        return
    which = "the user field is" if system else "the command starts with"
    nth, read = ("seventh", "six are read") if seconds else ("sixth", "cron reads five")
    hint = "" if seconds else "; --seconds reads a seconds field first"
    glob = ", the shell expanding it to the names of files" if "*" in word or "?" in word else ""
    raise _Refused(
        f"{which} {word!r}, which looks like a {nth} schedule field: {read}{hint}, and a"
        f" year field has no equivalent; as written, {word!r} would run as the"
        f" {'user' if system else 'program'}{glob}"
    )


def _split_percent(text: str) -> tuple[str, str | None]:
    r"""Cron's ``%`` rule: ``(command, standard input or None)``.

    The command ends at the first ``%`` not preceded by a backslash (``\%`` in the
    command is a ``%``); in what follows, each ``%`` is a newline and ``\%`` a ``%``
    (Vixie cron's ``do_command.c``, byte for byte).
    """
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
            if ch == "%":
                out[-1] = "%"
                continue
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            return "".join(out), _stdin(text[i + 1 :])
        out.append(ch)
    return "".join(out), None


def _stdin(data: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in data:
        if escaped:
            if ch != "%":
                out.append("\\")
        elif ch == "%":
            ch = "\n"
        escaped = ch == "\\"
        if not escaped:
            out.append(ch)
    if escaped:
        out.append("\\")
    return "".join(out)


def _strip_end(command: str) -> str:
    """The command less its trailing blanks, unless a backslash makes the last one a word."""
    stripped = command.rstrip(_BLANKS)
    if stripped.endswith("\\") and stripped != command:
        return stripped + command[len(stripped)]
    return stripped


# -- names ----------------------------------------------------------------------------

#: Words that start a shell command but say nothing about what the line runs.
_SKIP: Final = frozenset(
    {"cd", "test", "[", "[[", "true", ":", "sleep", ".", "source", "export", "set", "umask"}
    | {"echo", "printf", "date", "mkdir"}
)
#: Shell keywords before a command (``if``, ``{``, ``!``): passed over.
_KEYWORDS: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "!", "{", "}", "do", "done", "while", "until"}
)
_WRAPPERS: Final = {
    "env": (),
    "exec": (),
    "nice": ("-n",),
    "ionice": ("-c", "-n", "-p"),
    "nohup": (),
    "time": (),
    "sudo": ("-u", "-g"),
    "chronic": (),
    "cronic": (),
    "timeout": ("-s", "-k", "--signal", "--kill-after"),
    "flock": ("-w", "-E", "--timeout", "--conflict-exit-code"),
    "setlock": (),
    "systemd-cat": ("-t", "-p"),
    "run-one": (),
}
_ONE_ARG: Final = frozenset({"timeout", "flock", "setlock"})
_INTERPRETERS: Final = re.compile(
    r"(?:ba|da|k|z)?sh|python[0-9.]*|perl|ruby|php[0-9.]*|node|Rscript|run-parts"
)
_EXTENSIONS: Final = re.compile(r"\.(?:sh|bash|py|pl|rb|php|js)$")
_SEPARATORS: Final = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "|&"})


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the shell will say so; a name is still due
        return command.split()


def _base_name(command: str, depth: int = 0) -> str:
    """What the command runs, as a short word: its program, or the script it runs."""
    segments: list[list[str]] = [[]]
    target = False  # the word after a redirection is its file
    for word in _words(command):
        if word in _SEPARATORS:
            segments.append([])
        elif word.startswith((">", "<")):
            target = True
        elif target:
            target = False
        elif not re.fullmatch(r"[A-Za-z_]\w*=.*|[0-9]*", word):  # an assignment, an fd
            segments[-1].append(word)
    firsts: list[str] = []
    for words in segments:
        name = _program(words, depth)
        if name:
            return name
        firsts += [w for w in words if w not in _KEYWORDS][:1]
    return os.path.basename(firsts[0]) if firsts else ""


def _program(words: list[str], depth: int) -> str:
    i = 0
    while i < len(words) and words[i] in _KEYWORDS:
        i += 1
    while i < len(words):
        prog = os.path.basename(words[i])
        if prog in _SKIP or not prog:
            return ""
        if prog not in _WRAPPERS:
            break
        takes_value, i = _WRAPPERS[prog], i + 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in takes_value else 1
        i += 1 if prog in _ONE_ARG else 0
    if i >= len(words):
        return ""
    prog = os.path.basename(words[i])
    if not _INTERPRETERS.fullmatch(prog):
        return prog
    args = words[i + 1 :]
    if args[:1] == ["-c"] and len(args) > 1:
        return _base_name(args[1], depth + 1) if depth < 2 else ""
    if args[:1] == ["-m"] and len(args) > 1:
        return args[1]
    if args[:1] in (["-e"], ["-E"], ["-r"]):
        return ""  # inline code (perl -e, php -r): the name comes from another command
    positional = [a for a in args if not a.startswith("-")]
    if not positional:
        return ""
    return os.path.basename((positional[-1] if prog == "run-parts" else positional[0]).rstrip("/"))


def _slug(text: str) -> str:
    name = _EXTENSIONS.sub("", text)
    name = re.sub(r"[^A-Za-z0-9_.@:-]+", "-", name)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name).rstrip("-.")
    return name[:80] or "job"


def _name_jobs(jobs: list[_Job]) -> None:
    """Give each job a name from its command, unique and the same at each import.

    The first job (in file order) of a base name keeps it; the others add six hex
    digits of a hash of their line (and ``-2``, ``-3`` for identical lines), so adding
    a line at the end never renames a job.
    """
    taken: set[str] = set()
    for job in jobs:
        base = _slug(_base_name(job.command))
        name = base
        if name in taken:
            digest = hashlib.sha256(f"{job.schedule}\0{job.command}".encode()).hexdigest()
            name = f"{base}-{digest[:6]}"
            n = 2
            while name in taken:
                name = f"{base}-{digest[:6]}-{n}"
                n += 1
        taken.add(name)
        job.name = name


# -- writing the jobs file -------------------------------------------------------------


def toml_string(text: str) -> str:
    """``text`` as a TOML string: ``"..."``, or ``'...'`` when it has a quote or backslash."""
    if not re.search(r'[\x00-\x08\x0a-\x1f\x7f"\\]', text):
        return f'"{text}"'
    if "'" not in text and not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", text):
        return f"'{text}'"
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else toml_string(name)


def _table(values: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{_key(k)} = {toml_string(v)}" for k, v in values.items()) + " }"


def _argv(job: _Job) -> list[str]:
    if job.stdin is None:
        return [job.shell, "-c", job.command]
    return [DEFAULT_SHELL, "-c", _FEED, "sh", job.stdin, job.shell, job.command]


#: How a ``%`` line's input reaches its command: /bin/sh writes it into a pipe.
_FEED: Final = 'printf \'%s\' "$1" | "$2" -c "$3"'


class _Writer:
    """The jobs file of a read crontab, as readable TOML text."""

    def __init__(self, state: _State, path: str) -> None:
        self.state = state
        self.path = path
        self.out: list[str] = []
        jobs = state.jobs
        self.env = _common([job.env for job in jobs])
        self.zone = _commonest([job.zone for job in jobs]) or "local"
        self.cwd = _commonest([job.cwd for job in jobs])
        mails = {self.mail_to(job) for job in jobs}
        self.mail = mails.pop() if len(mails) == 1 else None

    def mail_to(self, job: _Job) -> str | None:
        """The MAILTO set above the job's line (cron's scope), if tickwork can mail it."""
        values = [value for line, value in self.state.mailto if line < job.line]
        try:
            return toml_string(values[-1]) if values and check_mail_to(values[-1]) else None
        except ValueError:
            return None  # noted in the defaults: not an address list tickwork can use

    def document(self) -> str:
        self.header()
        self.defaults()
        items: list[tuple[int, _Job | tuple[str, str]]] = [
            (job.line, job) for job in self.state.jobs
        ]
        items += [(line, (source, why)) for line, source, why in self.state.left_out]
        for line, item in sorted(items, key=lambda pair: pair[0]):
            if isinstance(item, _Job):
                self.job(item)
            else:
                self.out += [
                    "",
                    f"# NOT IMPORTED, line {line}: {_one_line(item[0])}",
                    *_wrap(f"# {item[1]}."),
                ]
        return "\n".join(self.out) + "\n"

    def header(self) -> None:
        options = self.state.options
        flags = (" --system" if options.system else "") + (" --seconds" if options.seconds else "")
        self.out += [
            f"# Imported from the crontab {self.path} by `tickwork import crontab{flags}`;",
            "# each [[job]] is one line of it (its line and text are in the comment above).",
            "# What cron does that this file does differently:",
            "# - cron set HOME, LOGNAME and a short PATH (/usr/bin:/bin) and nothing else;",
            "#   tickwork runs each command in the daemon's environment plus `env`.",
            "# - cron mailed all a job wrote; tickwork logs it (see `output`), and mails a",
            "#   failed run's output to `mail_to` (a MAILTO above the line sets it).",
        ]
        if self.state.users and any(job.user for job in self.state.jobs):
            self.out.append(
                "# - cron ran each line as its user; so does tickwork (`user`), the daemon"
                " running as root."
            )
        elif options.system or any(job.user for job in self.state.jobs):
            self.out.append(
                "# - cron ran each line as its user; tickwork runs every job as the user"
                " the daemon runs as."
            )
        if self.cwd is not None:
            self.out += [
                "# - cron ran each line in HOME, and ran it all the same where HOME is missing:",
                '#   with `cwd = "-..."` a job runs in HOME, or in / where it is missing.',
            ]

    def defaults(self) -> None:
        out = self.out
        out += ["", "[defaults]"]
        out.append(
            f"timezone = {toml_string(self.zone)}"
            + ("  # cron's: the system's time zone" if self.zone == "local" else "")
        )
        out.append('overlap = "allow"  # cron starts a run even if the last one still runs')
        if self.cwd is not None:
            out.append(f"cwd = {toml_string('-' + self.cwd)}  # cron runs commands in HOME")
        for line, value in self.state.mailto:
            try:
                usable = check_mail_to(value) is not None
            except ValueError:
                usable = False
            if not usable:
                out.append(f"# MAILTO = {toml_string(value)} (line {line}): not addresses"
                           " tickwork can mail; set mail_to by hand")  # fmt: skip
        if self.mail is not None:
            out += [
                f"mail_to = {self.mail}  # MAILTO: a failed run's output is mailed here",
                "# (through /usr/sbin/sendmail -t -i; set mail_command or smtp for another way)",
            ]
        if self.env:
            out += _env("defaults", self.env)

    def job(self, job: _Job) -> None:
        out = self.out
        out += ["", f"# line {job.line}: {_one_line(job.source)}"]
        if job.user is not None:
            out.append(f"# cron ran this as user {job.user}")
        if job.stdin is not None:
            out += _wrap(
                "# '%' in the line: what follows the first one is the command's standard"
                " input, each further '%' a newline; /bin/sh writes it into a pipe"
            )
        out += ["[[job]]", f"name = {toml_string(job.name)}"]
        if job.schedule == "@reboot":
            out.append("at_start = true  # @reboot: one run each time the daemon starts")
        else:
            out.append(f"cron = {toml_string(job.schedule)}")
        if job.zone != self.zone and job.schedule != "@reboot":
            out.append(f"timezone = {toml_string(job.zone)}")
        argv = ", ".join(toml_string(a) for a in _argv(job))
        out.append(f"command = [{argv}]")
        if job.user is not None and self.state.users and job.user != self.state.me:
            out.append(f"user = {toml_string(job.user)}")
        if job.cwd != self.cwd:
            out.append(f"cwd = {toml_string('-' + job.cwd)}")
        mail = self.mail_to(job)
        if mail is not None and mail != self.mail:
            out.append(f"mail_to = {mail}  # the MAILTO above this line")
        own = {k: v for k, v in job.env.items() if self.env.get(k) != v}
        if own:
            out += _env("job", own)


def _env(table: str, values: dict[str, str]) -> list[str]:
    """An ``env`` table: inline when it fits on a line, else as ``[defaults.env]``."""
    inline = f"env = {_table(values)}"
    if len(inline) <= 88:
        return [inline]
    return ["", f"[{table}.env]", *(f"{_key(k)} = {toml_string(v)}" for k, v in values.items())]


def _wrap(comment: str) -> list[str]:
    """A long comment as lines of at most 88 characters, each starting with ``# ``."""
    return textwrap.wrap(comment, 88, subsequent_indent="# ", break_on_hyphens=False)


def _one_line(text: str) -> str:
    """A crontab line for a comment (its trailing blanks dropped)."""
    return text.rstrip(_BLANKS)


def _common(envs: list[dict[str, str]]) -> dict[str, str]:
    """The settings every job has, with the same value (in the order first set)."""
    if not envs:
        return {}
    return {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}


def _commonest(values: list[str]) -> str | None:
    """The value most jobs have (the first of them on a tie); None for no jobs."""
    if not values:
        return None
    return max(dict.fromkeys(values), key=values.count)


# -- as a Config -----------------------------------------------------------------------


def crontab_config(
    text: str,
    *,
    path: str = "<stdin>",
    options: CrontabOptions | None = None,
    base_dir: Path | None = None,
) -> tuple[Config, Translation]:
    """The crontab ``text`` as a validated `Config`, and its `Translation`.

    The TOML text of the translation is checked by `parse_config`, as a jobs file is;
    lines left out are only in the translation's notes (see `load_crontab`).

    Raises:
        ConfigError: No line of the crontab is a job that can be imported (the issues
            say why of each line left out), or the translation broke a rule of the jobs
            file.
    """
    translation = translate_crontab(text, path=path, options=options)
    if translation.jobs == 0:
        issues = [ConfigIssue(path, n.line, "", "", n.message) for n in translation.skipped]
        issues.append(ConfigIssue(path, 0, "", "", "no job to import from this crontab"))
        raise ConfigError(issues)
    # A crontab's working directory is its HOME, on the host it came from: not checked
    # here (cron does not check it either; a run where it is missing runs in "/").
    config = parse_config(
        translation.toml, path=f"{path} (as a jobs file)", base_dir=base_dir, check_host=False
    )
    return Config(path, config.jobs), translation


def load_crontab(
    path: str | os.PathLike[str],
    options: CrontabOptions | None = None,
    *,
    warn: Callable[[str], None] | None = None,
) -> Config:
    """Read the crontab at ``path`` as a jobs file: what ``tickwork run --crontab`` runs.

    Args:
        path: The crontab.
        options: How to read it; with ``keep_going`` lines that cannot be imported are
            warned about instead of refusing the file.
        warn: Called with each note (``path:line: message``) of a crontab that loads.

    Raises:
        ConfigError: The file cannot be read, has no job, or (without ``keep_going``)
            has lines that cannot be imported; `errors` names each line and why.
    """
    shown = os.fspath(path)
    options = options or CrontabOptions()
    try:
        with open(shown, encoding="utf-8", newline="") as f:  # CRLF kept, to be noted
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            [ConfigIssue(shown, 0, "", "", f"cannot read the crontab: {reason}")]
        ) from exc
    config, translation = crontab_config(
        text, path=shown, options=options, base_dir=Path(shown).resolve().parent
    )
    skipped = translation.skipped
    if skipped and not options.keep_going:
        issues = [ConfigIssue(shown, n.line, "", "", n.message) for n in skipped]
        n = len(skipped)
        issues.append(
            ConfigIssue(
                shown,
                0,
                "",
                "",
                f"{n} line{'s' if n != 1 else ''} cannot be imported: fix or comment"
                f" {'them' if n != 1 else 'it'} out, or pass --keep-going to run the others",
            )
        )
        raise ConfigError(issues)
    for note in translation.notes:
        if warn is not None:
            warn(note.text(shown))
    return config
