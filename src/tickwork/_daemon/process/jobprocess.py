"""How a command's process is set up before it starts: user, group, umask, limits, env_file.

The jobs file's ``user``, ``group``, ``umask``, ``limit_memory``, ``limit_cpu``,
``limit_files`` and ``env_file`` are checked here (each check raises `ValueError` with
the rule and the bad value; ``config`` adds the file, line and key). At run time
`process_setup` turns a job's values into a `ProcessSetup`: numbers only (a user looked
up again, so a user removed since the file was read fails the run, saying so), which the
supervisor applies in the command's process just before ``exec`` (see
``supervisor.py``): the limits first (root may raise a hard limit; the user it becomes
may not), then the umask, then the groups, the group id and the user id.
"""

from __future__ import annotations

import grp
import json
import math
import os
import pwd
import re
import resource
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "SETUP_ENV",
    "ProcessSetup",
    "check_group",
    "check_limit",
    "check_user",
    "optional_dir",
    "parse_cpu",
    "parse_files",
    "parse_size",
    "parse_umask",
    "process_setup",
    "read_env_file",
]

#: The variable that hands a `ProcessSetup` (JSON) to the supervisor, which removes it.
SETUP_ENV: Final = "TICKWORK_SETUP"

#: Words that lift a limit set in ``[defaults]``.
UNLIMITED: Final = "infinity"

_UNITS: Final = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
_SIZE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
_MIN_MEMORY: Final = 1 << 20  # no program starts in less
_MAX_MEMORY: Final = 1 << 62
_MIN_FILES: Final = 3  # stdin, stdout and stderr
_MAX_CPU: Final = 10**9
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$", "`": "`"}

#: The resource each limit key sets.
LIMITS: Final = {
    "limit_memory": "RLIMIT_AS",
    "limit_cpu": "RLIMIT_CPU",
    "limit_files": "RLIMIT_NOFILE",
}


def _shown(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def parse_size(value: object) -> int | None:
    """``limit_memory``: bytes from ``"512MiB"``, ``"2G"``, ``"500MB"`` or an integer.

    ``K``, ``M``, ``G``, ``T`` (and ``KiB``...) are powers of 1024, ``KB``, ``MB``...
    powers of 1000; ``"infinity"`` is no limit (``None``).
    """
    if value == UNLIMITED:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"must be a size such as '512MiB' or '2G', got {_shown(value)}")
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.fullmatch(value)
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _UNITS:
            raise ValueError(
                "must be a size such as '512MiB' or '2G' (units B, K/KiB, M/MiB, G/GiB,"
                f" T/TiB, KB, MB, GB, TB) or 'infinity', got {value!r}"
            )
        size = math.ceil(float(m.group(1)) * _UNITS[unit])
    if not _MIN_MEMORY <= size <= _MAX_MEMORY:
        raise ValueError(f"must be from 1MiB to 4EiB (no program starts in less), got {value!r}")
    return size


def parse_cpu(seconds: float | None) -> int | None:
    """``limit_cpu``: a duration (already in seconds) as whole CPU seconds, rounded up."""
    if seconds is None:
        return None
    if not 1 <= seconds <= _MAX_CPU:
        raise ValueError(f"must be a duration of CPU time from 1s, got {seconds:g}s")
    return math.ceil(seconds)


def parse_files(value: object) -> int | None:
    """``limit_files``: how many files the command may have open at once."""
    if value == UNLIMITED:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < _MIN_FILES:
        raise ValueError(
            f"must be an integer >= {_MIN_FILES} (stdin, stdout and stderr count) or"
            f" 'infinity', got {_shown(value)}"
        )
    return value


def check_limit(key: str, value: int) -> None:
    """Refuse a limit this process could not set: above its hard limit when not root.

    Root may raise a hard limit, except the kernel's own ceiling on open files.
    """
    which = getattr(resource, LIMITS[key])
    if os.geteuid() == 0:
        ceiling = _nr_open() if key == "limit_files" else None
        if ceiling is not None and value > ceiling:
            raise ValueError(
                f"is above the kernel's limit on open files (fs.nr_open = {ceiling}), got {value}"
            )
        return
    hard = resource.getrlimit(which)[1]
    if hard != resource.RLIM_INFINITY and value > hard:
        raise ValueError(
            f"is above the hard limit of this process ({hard}); only root can raise it, got {value}"
        )


def _nr_open() -> int | None:
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return None


def parse_umask(value: object) -> int:
    """``umask``: an octal string such as ``"027"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(
            f'must be an octal string such as "027" (quoted: an integer cannot say it is'
            f" octal), got {value}"
        )
    if not isinstance(value, str) or not re.fullmatch(r"0?[0-7]{1,3}", value):
        raise ValueError(
            f'must be an octal string from "000" to "777" such as "027", got {_shown(value)}'
        )
    return int(value, 8)


def _need_root(key: str) -> None:
    if os.geteuid() != 0:
        raise ValueError(
            f"runs the command as another {key} only when the daemon runs as root (this"
            f" process runs as uid {os.geteuid()}); check the file as the daemon's user"
        )


def check_user(value: object, *, host: bool = True) -> str:
    """``user``: a user name (or numeric id) of this host; the daemon must be root.

    ``host=False``: the shape alone (the verbs that only read or act on the state).
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a user name such as 'nobody', got {_shown(value)}")
    if host:
        _need_root("user")
        _user(value)
    return value


def check_group(value: object, *, host: bool = True) -> str:
    """``group``: a group name (or numeric id) of this host; the daemon must be root.

    ``host=False``: the shape alone, as for `check_user`.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a group name such as 'nogroup', got {_shown(value)}")
    if host:
        _need_root("group")
        _group(value)
    return value


def _user(value: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwuid(int(value)) if value.isdigit() else pwd.getpwnam(value)
    except (KeyError, OverflowError):
        raise ValueError(f"no such user on this host: {value!r}") from None


def _group(value: str) -> grp.struct_group:
    try:
        return grp.getgrgid(int(value)) if value.isdigit() else grp.getgrnam(value)
    except (KeyError, OverflowError):
        raise ValueError(f"no such group on this host: {value!r}") from None


def optional_dir(cwd: str | None) -> str | None:
    """A job's working directory as a run starts: a leading ``-`` means "if it exists".

    ``-/nonexistent`` is ``/`` when that directory is missing, as cron's ``chdir`` to a
    ``HOME`` that is not there changes nothing and the command runs all the same.
    """
    if cwd is None or not cwd.startswith("-"):
        return cwd
    return cwd[1:] if os.path.isdir(cwd[1:]) else "/"


def read_env_file(path: str) -> dict[str, str]:
    r"""The variables of an env file: ``KEY=VALUE`` lines.

    Blank lines and lines starting with ``#`` are skipped; ``export`` before a line is
    allowed; a value may be in single quotes (taken as written) or double quotes
    (``\n``, ``\t``, ``\"``, ``\\`` and ``\$`` escapes); an unquoted value ends
    at a `` #`` comment and loses its surrounding blanks. A later line wins.

    Raises:
        ValueError: the file cannot be read, or a line is not ``KEY=VALUE`` (the
            message names the path and the line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"cannot read {path!r}: {reason}") from None
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[7:].lstrip()
        name, eq, rest = line.partition("=")
        name = name.strip()
        if not eq or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{path} line {number}: expected KEY=VALUE, got {raw.strip()!r}")
        try:
            env[name] = _env_value(rest.strip())
        except ValueError as exc:
            raise ValueError(f"{path} line {number}: {name}: {exc}") from None
    return env


def _env_value(text: str) -> str:
    if not text or text[0] not in "'\"":
        return re.split(r"\s+#", text, maxsplit=1)[0].rstrip()
    quote, out, i = text[0], [], 1
    while i < len(text) and text[i] != quote:
        if quote == '"' and text[i] == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    if i >= len(text):
        raise ValueError(f"no closing {quote} (a value cannot span lines)")
    after = text[i + 1 :].strip()
    if after and not after.startswith("#"):
        raise ValueError(f"unexpected text after the closing quote: {after!r}")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class ProcessSetup:
    """What the supervisor applies in the command's process before ``exec``."""

    uid: int | None = None
    """Become this user (``setuid``)."""
    gid: int | None = None
    """With this group id (``setgid``)."""
    groups: tuple[int, ...] | None = None
    """And these supplementary groups (``setgroups``)."""
    umask: int | None = None
    """The file mode creation mask."""
    limits: tuple[tuple[str, int, int], ...] = ()
    """``(RLIMIT_name, soft, hard)`` to set."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set under the job's ``env``: ``HOME``, ``USER``, ``LOGNAME`` of ``uid``."""

    def to_json(self) -> str:
        """The form the supervisor reads from `SETUP_ENV`."""
        data: dict[str, object] = {"limits": [list(limit) for limit in self.limits]}
        for key in ("uid", "gid", "umask"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.groups is not None:
            data["groups"] = list(self.groups)
        return json.dumps(data)


def process_setup(
    *,
    user: str | None = None,
    group: str | None = None,
    umask: int | None = None,
    limit_memory: int | None = None,
    limit_cpu: int | None = None,
    limit_files: int | None = None,
) -> ProcessSetup | None:
    """A job's process setup, looked up now; ``None`` when there is nothing to set.

    Raises:
        ValueError: the user or group no longer exists (the message names it).
    """
    limits = []
    for name, value in (("RLIMIT_AS", limit_memory), ("RLIMIT_NOFILE", limit_files)):
        if value is not None:
            limits.append((name, value, value))
    if limit_cpu is not None:  # SIGXCPU at the limit, SIGKILL one second on
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        room = os.geteuid() == 0 or hard == resource.RLIM_INFINITY or hard > limit_cpu
        limits.append(("RLIMIT_CPU", limit_cpu, limit_cpu + 1 if room else limit_cpu))
    if user is None and group is None and umask is None and not limits:
        return None
    uid = gid = None
    groups: tuple[int, ...] | None = None
    env: dict[str, str] = {}
    if user is not None:
        entry = _user(user)
        uid, gid = entry.pw_uid, entry.pw_gid
        groups = tuple(sorted({gid, *os.getgrouplist(entry.pw_name, gid)}))
        env = {"HOME": entry.pw_dir, "USER": entry.pw_name, "LOGNAME": entry.pw_name}
    if group is not None:
        gid = _group(group).gr_gid
        groups = (gid,) if user is None else tuple(sorted({gid, *(groups or ())}))
    return ProcessSetup(uid, gid, groups, umask, tuple(limits), env)
