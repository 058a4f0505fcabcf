"""What a jobs file declares: durable jobs, namespaces and the store that keeps them.

`spec_for` maps a `JobConfig` to the `JobSpec` the daemon declares (its id is
``<namespace>/<name>``, its function the daemon's `ENTRY_POINT`); `open_store` opens the
state an option names; `owner_label` shows a claim's owner as ``host:pid``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import urlsplit, urlunsplit

from tickwork._core.errors import TickworkError
from tickwork._daemon.jobsfile.config import OUTPUT_LIMIT, JobConfig
from tickwork._daemon.mail import MAIL_COMMAND
from tickwork.stores import JobSpec, JobState, Schedule, Store

__all__ = [
    "ENTRY_POINT",
    "DaemonError",
    "check_namespace",
    "default_namespace",
    "default_state_path",
    "fingerprint",
    "job_id",
    "make_state_key",
    "open_store",
    "owned",
    "owner_label",
    "redact_dsn",
    "spec_for",
]

# Stored in every job a jobs file declares: keep it stable. `tickwork._daemon` (the package)
# hands the name to this module, so state written before the folders existed still runs.
ENTRY_POINT: Final = "tickwork._daemon:run_configured_job"
"""The function every daemon job names in the store; the only one the daemon admits."""

_NAMESPACE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,59}")


class DaemonError(TickworkError):
    """The daemon cannot start: a bad option, an unusable store, a foreign state.

    The message names the option and shows the value.
    """


# -- paths, names and stores ------------------------------------------------------------


def default_state_path(config_path: str | os.PathLike[str]) -> Path:
    """Where ``tickwork run FILE`` keeps its state when ``--state`` is not given.

    ``$XDG_STATE_HOME/tickwork/<stem>-<hash>.sqlite3`` (``$XDG_STATE_HOME`` defaults to
    ``~/.local/state``), where ``<hash>`` is 8 hex digits of the file's absolute path:
    two files called ``jobs.toml`` in different directories never share a state.
    """
    path = Path(config_path).resolve()
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return root / "tickwork" / f"{_slug(path.stem)}-{digest}.sqlite3"


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.@:-]+", "-", text).strip("-.")
    return slug[:60] or "jobs"


def default_namespace(config_path: str | os.PathLike[str]) -> str:
    """The namespace of a file's jobs in the store: its stem (``jobs`` for jobs.toml)."""
    return _slug(Path(config_path).stem)


def check_namespace(value: str) -> str:
    """``value`` if it is a valid namespace, else `DaemonError` naming ``--namespace``."""
    if not _NAMESPACE.fullmatch(value):
        raise DaemonError(
            "--namespace must be 1-60 letters, digits or '_.@:-', starting with a letter or"
            f" digit, got {value!r}"
        )
    return value


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``, for messages."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return "<unparsable DSN>"
    if parts.password is None:
        return dsn
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def make_state_key(namespace: str, where: str) -> str:
    """16 hex digits naming one state (``where``: a file path or a DSN) and namespace.

    Every run a daemon starts carries it (see `tickwork._daemon.process.runner.MARKER_ENV`), so a
    daemon restarted on the same state finds the runs a killed one left behind, and
    leaves alone those of daemons running other states or namespaces.
    """
    return hashlib.sha256(f"{namespace}\0{where}".encode()).hexdigest()[:16]


def _make_private_dir(directory: Path) -> None:
    """Create ``directory`` (and parents) with mode 0700 for the part that is new."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
        os.chmod(d, 0o700)  # the umask may have taken bits away


#: Seconds the daemon keeps trying to reach PostgreSQL (at start and on each operation).
OPEN_RETRY: Final = 30.0


def open_store(
    *, state: str | None = None, database: str | None = None, within: float | None = None
) -> Store:
    """Open the daemon's store: ``--database`` (PostgreSQL) if given, else ``--state``.

    Args:
        state: SQLite file; its directory is created with mode 0700 if missing.
        database: A ``postgresql://`` (or ``postgres://``) URL.
        within: Give up reaching the database after this many seconds (what is left
            of ``--for``) rather than after `OPEN_RETRY`.

    Returns:
        The open store; the caller closes it.

    Raises:
        DaemonError: Both or neither given, an unsupported URL, PostgreSQL support not
            installed, or the store cannot be opened (the message says which option).
    """
    from tickwork.stores import StoreError

    if (state is None) == (database is None):
        raise DaemonError("give exactly one of --state and --database")
    if database is not None:
        scheme = database.partition(":")[0].lower()
        shown = redact_dsn(database)
        if scheme not in ("postgresql", "postgres"):
            raise DaemonError(
                f"--database must be a postgresql:// URL (SQLite: use --state PATH), got {shown!r}"
            )
        try:
            from tickwork.stores.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise DaemonError(
                f"--database {shown}: PostgreSQL support is not available in this"
                f" installation ({exc}); install tickwork with PostgreSQL support"
                " (pip install 'tickwork[postgres]') or use --state PATH for SQLite"
            ) from exc
        return _open_postgres(PostgresStore, database, shown, within)
    assert state is not None
    from tickwork.stores.sqlite import SQLiteStore

    path = Path(state).expanduser()
    try:
        _make_private_dir(path.parent)
    except OSError as exc:
        raise DaemonError(f"--state {state}: cannot create its directory: {exc}") from exc
    try:
        return SQLiteStore(path)
    except StoreError as exc:
        raise DaemonError(f"--state {state}: {exc}") from exc


def _open_postgres(cls: Any, database: str, shown: str, within: float | None) -> Store:
    """``cls(database)`` (a `PostgresStore`), trying to reach it for at most ``within`` s."""
    retry = OPEN_RETRY if within is None else round(max(0.0, min(OPEN_RETRY, within)), 1)
    try:
        store: Store = cls(
            database,
            reconnect_timeout=retry,
            connect_timeout=max(1.0, min(10.0, retry)),
        )
    except Exception as exc:  # the driver's own connection errors included
        bounded = within is not None and within < OPEN_RETRY
        why = f"; stopped trying within the {retry:.1f} s --for left" if bounded else ""
        raise DaemonError(f"--database {shown}: cannot use the database: {exc}{why}") from exc
    return store


# -- the mapping: JobConfig -> JobSpec ----------------------------------------------------


def _plain(value: object) -> Any:
    """``value`` as JSON data, for fingerprints (schedules by their stored form)."""
    if isinstance(value, Schedule):
        return value.to_dict()  # fields at their defaults left out: stable as fields come
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


#: Options added after the first release, with their defaults: left out of a job's
#: fingerprint while at their default, so an upgrade changes no fingerprint.
_LATER: Final[dict[str, object]] = {
    "output": "log",
    "on_failure": None,
    "output_limit": OUTPUT_LIMIT,
    "isolation": "thread",
    **dict.fromkeys(
        ("on_success", "keep_ok", "keep_failed", "env_file", "user", "group", "umask"), None
    ),
    **dict.fromkeys(("limit_memory", "limit_cpu", "limit_files"), None),
    **dict.fromkeys(("alert_if_no_success", "alert_if_late", "alert_if_running"), None),
    "alert_if_missed": False,
    "after": (),  # chains
    "pool": None,
    "delivery": "at_most_once",
    "mail_to": (),
    "mail_command": MAIL_COMMAND,
    "smtp": None,
    "at_start": False,
}
_NOT_DEFAULT: Final = object()


def fingerprint(job: JobConfig) -> str:
    """12 hex digits that change whenever any option of ``job`` changes.

    Stored in the job's kwargs, so a changed job is an ``UPDATED`` declaration and a
    host running an older file can tell (it logs a warning and runs its own version).
    """
    data = {
        f.name: _plain(getattr(job, f.name))
        for f in fields(job)
        if f.name != "line" and _LATER.get(f.name, _NOT_DEFAULT) != getattr(job, f.name)
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def job_id(namespace: str, name: str) -> str:
    """The store id of job ``name``: ``<namespace>/<name>``."""
    return f"{namespace}/{name}"


def spec_for(
    job: JobConfig, *, namespace: str, now: float, stored: JobState | None = None
) -> JobSpec:
    """The durable declaration of one job of the file.

    Args:
        job: The job.
        namespace: The daemon's namespace (the id prefix).
        now: UTC POSIX seconds; an ``in`` one-shot is due ``now + delay``...
        stored: ...unless the store holds this same job (same fingerprint) already:
            then its stored instant is kept, so a restart never re-runs a one-shot.

    Returns:
        The spec to `DurableScheduler.declare`.
    """
    fp = fingerprint(job)
    s = job.schedule
    # Chains: a job that runs only after others has none. Else the file's values are the
    # stored ones (jitter and until included), but an "in" one-shot becomes its instant,
    # or the one stored for this same job. (`declared` gives one of the stored kinds.)
    schedule = None if s is None else cast("Schedule", s.declared(now))
    if (
        schedule is not s
        and stored is not None
        and stored.spec.kwargs.get("fingerprint") == fp
        and type(stored.spec.schedule) is type(schedule)
    ):
        schedule = stored.spec.schedule
    return JobSpec(
        job_id(namespace, job.name),
        ENTRY_POINT,
        schedule,
        kwargs={"job": job.name, "fingerprint": fp},
        # "replace" is the daemon's: the store queues the slot that comes due while a
        # run goes on, and the daemon ends that run so the queued one starts.
        overlap="queue" if job.overlap == "replace" else job.overlap,
        missed=job.missed,
        grace=job.grace,
        pool=job.pool,
        delivery=job.delivery,
        paused=not job.enabled,
        # Chains: the file's names become the state's job ids.
        after=tuple((job_id(namespace, name), on) for name, on in job.after),
    )


def owned(state: JobState, namespace: str) -> bool:
    """Whether a stored job belongs to the daemon of ``namespace``."""
    return state.spec.func == ENTRY_POINT and state.id.startswith(namespace + "/")


def owner_label(owner: str) -> str:
    """A claim's owner as ``host:pid`` (the durable scheduler adds a random suffix)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"{host}:{pid}" if pid else owner
