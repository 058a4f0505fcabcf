"""Where a daemon's jobs live: the namespace, the state file or database, the store opened.

`place_of` checks ``--namespace`` and settles ``--state``/``--database`` into one `Place`
before anything is opened (a bad value is a `DaemonError` naming the option);
`Place.open` then opens its store (`open_store`), and `Place.key` names the state and
namespace in every run the daemon starts, so that a daemon restarted on the same state
finds the runs a killed one left behind. The CLI's other verbs use the same defaults
(`default_state_path`, `default_namespace`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from tickwork._core.errors import TickworkError
from tickwork.stores import Store

__all__ = [
    "OPEN_RETRY",
    "DaemonError",
    "Place",
    "check_namespace",
    "default_namespace",
    "default_state_path",
    "make_state_key",
    "open_store",
    "place_of",
    "redact_dsn",
    "store_location",
]

_NAMESPACE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,59}")


class DaemonError(TickworkError):
    """The daemon cannot start: a bad option, an unusable store, a foreign state.

    The message names the option and shows the value.
    """


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


# -- the place, settled once ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Place:
    """A daemon's namespace and store, checked: what `place_of` settles from the options."""

    namespace: str
    """The id prefix of the file's jobs (checked by `check_namespace`)."""
    state: str | None
    """The SQLite state file, or None with ``database``."""
    database: str | None
    """The PostgreSQL DSN, or None with ``state``."""
    key: str
    """`make_state_key` of the namespace and the state (its resolved path, or the DSN
    without its password): every run the daemon starts carries it."""

    @property
    def shown(self) -> str:
        """The state for messages: ``state <path>`` or ``database <dsn without password>``."""
        if self.state is not None:
            return f"state {self.state}"
        return f"database {redact_dsn(self.database or '')}"

    def open(self, within: float | None = None) -> Store:
        """The store, opened (`open_store`); give up reaching it after ``within`` seconds."""
        return open_store(state=self.state, database=self.database, within=within)


def store_location(
    jobs_file: str, state: str | None, database: str | None
) -> tuple[str | None, str | None]:
    """``(state, database)``: ``database`` when given, else ``state``, else the default state.

    The default is `default_state_path` of ``jobs_file``.
    """
    if database is not None:
        return None, database
    if state is not None:
        return state, None
    return str(default_state_path(jobs_file)), None


def place_of(
    jobs_file: str,
    *,
    namespace: str | None = None,
    state: str | None = None,
    database: str | None = None,
    default_state: bool = False,
) -> Place:
    """The `Place` of ``jobs_file``'s jobs: ``namespace`` checked (default: the file's stem).

    ``state`` and ``database`` are the options as given: ``database`` wins, and with
    ``default_state`` a missing state is `default_state_path` of the file
    (`store_location`). Neither, without ``default_state``: a place that names no
    store, for a `Daemon` built on a store at hand.

    Raises:
        DaemonError: ``namespace`` is not a valid namespace (`check_namespace`).
    """
    name = check_namespace(namespace or default_namespace(jobs_file))
    if default_state or database is not None:
        state, database = store_location(jobs_file, state, database)
    where = (
        str(Path(state).expanduser().resolve()) if state is not None else redact_dsn(database or "")
    )
    return Place(name, state, database, make_state_key(name, where))
