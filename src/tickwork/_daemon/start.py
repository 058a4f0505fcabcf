"""The daemon's start: from a `DaemonConfig` to a serving `Daemon`, one step after another.

`run_daemon` is the one path ``tickwork run`` (and an embedding program) takes; each
part is built once, in the step that names it, by the room that owns it:

1. the file read and checked with the options that need no store (`_checked`): the jobs
   (`jobsfile`), the namespace and the state (`state.place_of`), ``--http``
   (`web.endpoint.check_http`): status 2 if wrong;
2. the log set up on ``err`` (`logline.setup_logging`), a crontab's remarks logged;
3. the store opened (`state.Place.open`, bounded by ``run_for``): status 1 if it
   cannot be used;
4. the `DurableScheduler` built on it, and the `Daemon` over that (its parts: the
   runner's process groups, alerts, dead-man alerts, liveness, skips);
5. the HTTP server, if asked, built over the daemon and started
   (`web.endpoint.serve_http`): an address that cannot be bound stops the start
   before anything is declared;
6. the jobs built over the daemon and taken (`FileJobs`, then `FileJobs.take`: the
   state checked, the namespace held, the file applied, ``at_start`` runs queued, a
   killed daemon's runs ended, what runs from where logged), the daemon's signals
   caught meanwhile;
7. `Daemon.serve` those jobs until a stop signal or ``run_for``: each turn follows the
   file (`FileJobs.follow`), and the shutdown ends the runs (`process.stopping`).

A step that stops the start raises `_NotStarted` from its cause; `run_daemon` says why,
once.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO, TypedDict

from tickwork._core.errors import ConfigError, TickworkError
from tickwork._daemon.daemon import Daemon
from tickwork._daemon.filejobs import FileJobs
from tickwork._daemon.jobsfile.config import Config, load_config
from tickwork._daemon.jobsfile.crontab import CrontabOptions, load_crontab
from tickwork._daemon.logline import say, setup_logging
from tickwork._daemon.runlog import LogFormat, RunLog
from tickwork._daemon.state import DaemonError, Place, place_of, store_location
from tickwork._daemon.web.endpoint import Endpoint, check_http, serve_http
from tickwork._durable.engine import DEFAULT_WORKERS
from tickwork._durable.scheduler import DurableScheduler

__all__ = ["DaemonConfig", "run_daemon"]

_log = logging.getLogger("tickwork.daemon")


class _SchedulerOptions(TypedDict):
    """The `DurableScheduler` keywords a `DaemonConfig` sets."""

    lease: float
    poll: float
    max_workers: int
    health_after: float
    allowed_modules: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Everything `run_daemon` needs to run a jobs file: what ``tickwork run`` parses.

    Build it from code to embed the daemon (tests do), or from ``tickwork run``'s
    options (`tickwork._cli.run`). Only ``jobs_file`` is required.
    """

    jobs_file: str
    """The TOML jobs file (docs/daemon.md)."""
    state: str | None = None
    """The SQLite state file; default: next to the jobs file (`default_state_path`)."""
    database: str | None = None
    """A PostgreSQL DSN instead of a state file (several hosts share one schedule)."""
    namespace: str | None = None
    """The id prefix of this file's jobs; default: from the file's name."""
    log_format: LogFormat = "text"
    """``"text"`` or ``"json"`` lines on ``err``."""
    shutdown_grace: float = 30.0
    """Seconds running jobs get after SIGTERM before they are killed."""
    lease: float = 30.0
    """The scheduler's lease (seconds); see `DurableScheduler`."""
    poll: float = 10.0
    """The scheduler's safety poll (seconds): changes by other processes wake it sooner
    (PostgreSQL's NOTIFY, SQLite's change check)."""
    workers: int = DEFAULT_WORKERS
    """How many runs may go at once."""
    watch: bool = False
    """Reload the file when it changes (SIGHUP always reloads)."""
    health_after: float = 5.0
    """Seconds the store may leave a look unanswered before the log says so and
    ``/healthz`` answers 503 (``--health-after``); also how much past ``poll`` the
    last look may be."""
    run_for: float | None = None
    """Stop after this many seconds (``--for``); ``None``: until a signal."""
    http: str | None = None
    """Serve the pages, the API, ``/metrics`` and ``/healthz`` on this ``HOST:PORT``
    (``--http``); ``/metrics`` needs the ``metrics`` extra. ``None``: no HTTP endpoint."""
    http_token: str | None = None
    """With ``http``: the bearer token every path but ``/healthz`` requires."""
    http_tokens: tuple[str, ...] = ()
    """With ``http``: more tokens, each ``NAME=SECRET`` (``--http-token``, repeatable);
    any token also acts on the jobs over HTTP, recorded as its name."""
    http_token_file: str | None = None
    """With ``http``: a file of ``NAME=SECRET`` lines (``--http-token-file``)."""
    http_host_names: tuple[str, ...] = ()
    """With ``http``: more names the ``Host`` header may give (``--http-host-name``);
    an IP address, ``localhost`` and the bound host always may, any other is refused."""
    http_public_reads: bool = False
    """With ``http`` beyond loopback and no token: serve anyway, readable by anyone who
    can connect (``--http-public-reads``); otherwise the start is refused."""
    http_prefix: str = ""
    """With ``http``: the path a proxy serves the pages under (``--http-prefix
    /ops/tickwork``): every link starts with it, and a request's path may or may not."""
    http_refresh: int = 10
    """With ``http``: seconds between the pages' live refreshes (``--http-refresh``)."""
    allowed_modules: tuple[str, ...] = ()
    """Module prefixes whose functions the daemon runs as one-offs (``--allow-module``:
    enqueued with ``tickwork enqueue`` or ``POST /api/enqueue``); none: a one-off it
    takes fails, not allowed. ``"*"``: any module."""
    crontab: CrontabOptions | None = None
    """``jobs_file`` is a crontab, read with these options (``--crontab``): it runs as
    `tickwork import crontab` translates it (docs/daemon.md, "Coming from cron")."""

    def _scheduler_options(self) -> _SchedulerOptions:
        """The `DurableScheduler` keywords these options set (``--lease``, ``--poll``, ...)."""
        return {
            "lease": self.lease,
            "poll": self.poll,
            "max_workers": self.workers,
            "health_after": self.health_after,
            "allowed_modules": self.allowed_modules or None,
        }

    def store_location(self) -> tuple[str | None, str | None]:
        """``(state, database)``: the database when given, else the state file."""
        return store_location(self.jobs_file, self.state, self.database)


def run_daemon(config: DaemonConfig, *, err: TextIO | None = None) -> int:
    """Run the jobs of ``config.jobs_file`` until a signal or ``run_for``; the exit status.

    One call does what ``tickwork run`` does: read and check the file (its problems,
    each with its line, go to ``err``: status 2), set up logging on ``err``, open the
    store (status 1 if it cannot be used), declare the jobs, log what runs where, and
    serve until SIGTERM/SIGINT or ``config.run_for`` (status 0). ``run_for`` bounds the
    whole run, the store's opening included. Every line on ``err`` is one record in
    ``config.log_format``. Call it from the main thread (it installs signal handlers).
    """
    err = sys.stderr if err is None else err
    end = None if config.run_for is None else time.monotonic() + config.run_for
    remarks = _Remarks()
    try:
        checked = _checked(config, remarks)
        return _serve(config, checked, remarks, err, end)
    except (_NotStarted, KeyboardInterrupt) as exc:  # SIGINT before the daemon's handlers
        status = exc.status if isinstance(exc, _NotStarted) else 130
        cause = exc.__cause__
        issues = cause.errors if isinstance(cause, ConfigError) else ()
        for issue in issues:  # as `tickwork validate` prints them: file:line: ...
            say(err, config.log_format, str(issue), prefix="")
        if issues:
            message = f"{config.jobs_file}: not started, fix the file first"
        elif isinstance(cause, OSError):  # the --http address cannot be bound
            message = f"--http {config.http}: cannot listen: {cause}"
        else:  # a DaemonError, a StoreError; ValueError: an --http option
            message = str(cause) if cause is not None else _INTERRUPTED
        say(err, config.log_format, message)
        return status


_INTERRUPTED = "interrupted before the daemon started; not started"


class _NotStarted(Exception):
    """A step stopped the start with this exit status; its cause says why.

    `run_daemon` says it: a `ConfigError`'s problems and that the file must be fixed,
    an `OSError` as ``--http`` that cannot listen, any other cause as it reads.
    """

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


# -- 1. the file read and checked ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Checked:
    """What the file and the options check into before anything is opened."""

    jobs: Config
    place: Place
    load: Callable[[str], Config]
    """What read the file, and reads it again at each reload."""
    http: Endpoint | None


class _Remarks:
    """A crontab's remarks on what it translated: held until the log is set up."""

    def __init__(self) -> None:
        self._held: list[str] | None = []

    def __call__(self, text: str) -> None:
        if self._held is None:
            _log.warning("%s", text)
        else:
            self._held.append(text)

    def log(self) -> None:
        """Log the remarks held; from now on (a reload's) they are logged as they come."""
        held, self._held = self._held or [], None
        for text in held:
            _log.warning("%s", text)


def _checked(config: DaemonConfig, remarks: _Remarks) -> _Checked:
    """The file's jobs, the namespace and state, and ``--http``, checked.

    Raises:
        _NotStarted: Status 2: the file, the namespace or an ``--http`` option is wrong.
    """
    options = config.crontab
    load = load_config if options is None else _crontab_loader(options, remarks)
    try:
        jobs = load(config.jobs_file)
    except ConfigError as exc:
        raise _NotStarted(2) from exc
    first = (config.http_token,) if config.http_token else ()
    try:
        place = place_of(
            config.jobs_file,
            namespace=config.namespace,
            state=config.state,
            database=config.database,
            default_state=True,
        )
        http = None
        if config.http is not None:
            http = check_http(
                config.http,
                prefix=config.http_prefix,
                tokens=(*first, *config.http_tokens),
                token_file=config.http_token_file,
                public_reads=config.http_public_reads,
            )
    except (DaemonError, ValueError) as exc:
        raise _NotStarted(2) from exc
    return _Checked(jobs, place, load, http)


def _crontab_loader(
    options: CrontabOptions, warn: Callable[[str], None]
) -> Callable[[str], Config]:
    """What reads a crontab with ``--crontab``: `load_crontab` with ``options``."""
    return lambda path: load_crontab(path, options, warn=warn)


# -- 3. to 7.: the store opened, the daemon and its server built, the jobs taken, served


def _serve(
    config: DaemonConfig, checked: _Checked, remarks: _Remarks, err: TextIO, end: float | None
) -> int:
    """Set up the log, open the store (giving up when ``end`` comes), build, serve.

    Raises:
        _NotStarted: Status 1: the store cannot be used, ``--http`` cannot listen, or
            the jobs cannot be taken (a foreign state, a clashing daemon).
    """
    options = config._scheduler_options()
    undo = setup_logging(err, config.log_format)
    remarks.log()
    try:
        try:
            store = checked.place.open(None if end is None else max(0.0, end - time.monotonic()))
        except DaemonError as exc:
            raise _NotStarted(1) from exc
        daemon = Daemon(
            config.jobs_file,
            DurableScheduler(store, **options),
            place=checked.place,
            log=RunLog(err, format=config.log_format),
            shutdown_grace=config.shutdown_grace,
        )
        server, said = None, ""
        if checked.http is not None:
            hosts, refresh = config.http_host_names, config.http_refresh
            try:
                server, said = serve_http(daemon, checked.http, host_names=hosts, refresh=refresh)
            except OSError as exc:  # the address cannot be bound
                store.close()
                raise _NotStarted(1) from exc
        try:
            with daemon.signals():  # a stop signal while the jobs are taken: a clean stop
                jobs = FileJobs(
                    config.jobs_file,
                    daemon.scheduler,
                    place=checked.place,
                    dead_man=daemon.dead_man,
                    load=checked.load,
                    watch=config.watch,
                )
                try:
                    jobs.take(checked.jobs, also=said)
                except TickworkError as exc:  # a DaemonError, or a StoreError reading it
                    store.close()
                    raise _NotStarted(1) from exc
                left = None if end is None else max(0.0, end - time.monotonic())
                return daemon.serve(jobs, run_for=left)
        finally:
            if server is not None:
                server.close()
    finally:
        undo()
