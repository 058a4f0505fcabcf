"""The daemon's start: from a `DaemonConfig` to a serving `Daemon`, one step after another.

`run_daemon` is the one path ``tickwork run`` (and an embedding program) takes; each
part is built once, in the step that names it:

1. the file read and checked, with the options that need no store (`_checked`: the
   jobs, the namespace, the ``--http`` address, tokens and exposure): status 2 if wrong;
2. the log set up on ``err`` (`setup_logging`), a crontab's remarks logged;
3. the store opened (`open_store`, bounded by ``run_for``): status 1 if it cannot be used;
4. the `Daemon` built on it (`_daemon_for`): it builds its scheduler and its parts (the
   runner's process groups, alerts, dead-man alerts, liveness, skips) in its constructor;
5. the HTTP server, if asked, built over the daemon (`_status_server`) and started;
6. the jobs declared (`_declare`), tracing turned on if the process set it up;
7. `Daemon.serve` until a stop signal or ``run_for``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tickwork._core.errors import ConfigError, JobFailed, TickworkError
from tickwork._daemon.daemon import Daemon, Reload
from tickwork._daemon.declare import (
    DaemonError,
    check_namespace,
    default_namespace,
    default_state_path,
    make_state_key,
    open_store,
    redact_dsn,
)
from tickwork._daemon.jobsfile.config import Config, load_config
from tickwork._daemon.jobsfile.crontab import CrontabOptions, load_crontab
from tickwork._daemon.logline import json_line, one_line, say
from tickwork._daemon.runlog import LogFormat, RunLog, iso
from tickwork._durable.engine import DEFAULT_WORKERS
from tickwork._durable.events import RUN_FAILED
from tickwork._durable.scheduler import DurableScheduler
from tickwork.stores import Store

if TYPE_CHECKING:
    from tickwork._daemon.web.http import StatusServer
    from tickwork._daemon.web.httpauth import Tokens

__all__ = ["DaemonConfig", "run_daemon", "setup_logging"]

_log = logging.getLogger("tickwork.daemon")


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

    def store_location(self) -> tuple[str | None, str | None]:
        """``(state, database)``: the database when given, else the state file."""
        if self.database is not None:
            return None, self.database
        if self.state is not None:
            return self.state, None
        return str(default_state_path(self.jobs_file)), None


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
    checked = _checked(config, err, remarks)
    if isinstance(checked, int):
        return checked
    undo = setup_logging(err, config.log_format)
    remarks.log()
    try:
        return _open_and_serve(config, err, checked, end)
    except KeyboardInterrupt:  # SIGINT before the daemon's own handlers are in place
        say(err, config.log_format, "interrupted before the daemon started; not started")
        return 130
    finally:
        undo()


# -- 1. the file read and checked ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Http:
    """``--http`` checked: where to listen, with which tokens, and whether it is public."""

    address: tuple[str, int]
    tokens: Tokens | None
    """None: reading is open and nothing can be done over HTTP."""
    public: bool
    """Reachable beyond loopback with no token (``--http-public-reads``)."""


@dataclass(frozen=True, slots=True)
class _Checked:
    """What the file and the options check into before anything is opened."""

    jobs: Config
    namespace: str
    load: Callable[[str], Config]
    """What read the file, and reads it again at each reload."""
    http: _Http | None


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


def _checked(config: DaemonConfig, err: TextIO, remarks: _Remarks) -> _Checked | int:
    """The file's jobs, the namespace and ``--http``, checked; or the exit status 2."""
    fmt = config.log_format
    load = _loader(config, remarks)
    try:
        jobs = load(config.jobs_file)
    except ConfigError as exc:
        for issue in exc.errors:  # as `tickwork validate` prints them: file:line: ...
            say(err, fmt, str(issue), prefix="")
        say(err, fmt, f"{config.jobs_file}: not started, fix the file first")
        return 2
    try:
        namespace = check_namespace(config.namespace or default_namespace(config.jobs_file))
    except DaemonError as exc:
        say(err, fmt, str(exc))
        return 2
    try:
        http = None if config.http is None else _http_checked(config)
    except ValueError as exc:
        say(err, fmt, str(exc))
        return 2
    return _Checked(jobs, namespace, load, http)


def _loader(config: DaemonConfig, warn: Callable[[str], None]) -> Callable[[str], Config]:
    """What reads ``config.jobs_file``: `load_config`, or `load_crontab` with ``--crontab``."""
    options = config.crontab
    if options is None:
        return load_config
    return lambda path: load_crontab(path, options, warn=warn)


def _http_checked(config: DaemonConfig) -> _Http:
    """``--http``'s address and ``--http-prefix``, the tokens, and whether it is public.

    Raises:
        ValueError: The address is not ``HOST:PORT``, the prefix not a path, a token
            is wrong, or the address is reachable from other hosts without a token
            and without ``--http-public-reads``.
    """
    from tickwork._daemon.web.http import is_loopback, parse_address
    from tickwork._daemon.web.httpauth import load_tokens
    from tickwork._daemon.web.webapp import check_prefix

    assert config.http is not None
    check_prefix(config.http_prefix, where="--http-prefix")
    address = parse_address(config.http)
    texts = (*((config.http_token,) if config.http_token else ()), *config.http_tokens)
    tokens = load_tokens(texts, config.http_token_file)
    public = tokens is None and not is_loopback(address[0])
    if public and not config.http_public_reads:
        host, port = address
        raise ValueError(
            f"--http {host}:{port} is reachable from other hosts and has no --http-token:"
            " give one (--http-token NAME=SECRET or --http-token-file FILE), or add"
            " --http-public-reads to let anyone who can connect read the jobs; not started"
        )
    return _Http(address, tokens, public)


# -- 3. to 7.: the store opened, the daemon and its server built, the jobs declared, served


def _open_and_serve(config: DaemonConfig, err: TextIO, checked: _Checked, end: float | None) -> int:
    """Open the store (giving up when ``end`` comes), declare the jobs, serve until ``end``."""
    fmt = config.log_format
    state, database = config.store_location()
    within = None if end is None else max(0.0, end - time.monotonic())
    try:
        store = open_store(state=state, database=database, within=within)
    except DaemonError as exc:
        say(err, fmt, str(exc))
        return 1
    shown = redact_dsn(database or "")
    daemon = _daemon_for(config, checked, store, state, shown, err)
    server = None
    if checked.http is not None:
        try:
            server = _status_server(daemon, checked.http, config)
        except OSError as exc:
            store.close()
            say(err, fmt, f"--http {config.http}: cannot listen: {exc}")
            return 1
        server.start()  # /readyz: 503 until the jobs are declared and runs start
    try:
        result = _declare(daemon, checked.jobs)
    except TickworkError as exc:  # DaemonError, or a StoreError reading the state
        if server is not None:
            server.close()
        store.close()
        say(err, fmt, str(exc))
        return 1
    _trace_runs(daemon)
    where = f"state {state}" if state is not None else f"database {shown}"
    _announce(config, checked.jobs, result, where, server)
    try:
        return daemon.serve(run_for=None if end is None else max(0.0, end - time.monotonic()))
    finally:
        if server is not None:
            server.close()


def _daemon_for(
    config: DaemonConfig,
    checked: _Checked,
    store: Store,
    state: str | None,
    shown: str,
    err: TextIO,
) -> Daemon:
    """The `Daemon` that ``config`` describes, on ``store`` (at ``state``, or ``shown``)."""
    scheduler = DurableScheduler(
        store,
        lease=config.lease,
        poll=config.poll,
        max_workers=config.workers,
        health_after=config.health_after,
        allowed_modules=config.allowed_modules or None,
    )
    return Daemon(
        config.jobs_file,
        scheduler,
        namespace=checked.namespace,
        log=RunLog(err, format=config.log_format),
        shutdown_grace=config.shutdown_grace,
        watch=config.watch,
        state_key=make_state_key(
            checked.namespace,
            str(Path(state).expanduser().resolve()) if state is not None else shown,
        ),
        load=checked.load,
    )


def _declare(daemon: Daemon, jobs: Config) -> Reload:
    """Take the state for ``jobs``: checked, the namespace held, applied, at_start queued.

    Raises:
        TickworkError: A `DaemonError`, or a `StoreError` reading the state.
    """
    daemon.check_store()
    daemon.hold(jobs)
    result = daemon.apply(jobs)
    daemon.queue_start_runs()
    return result


def _trace_runs(daemon: Daemon) -> None:
    """Make each run an OpenTelemetry span if the process set a tracer provider.

    Set means OpenTelemetry is already imported (``opentelemetry-instrument``, a
    ``sitecustomize``) and its global provider is a real one: nothing is imported or
    paid otherwise. See docs/observability.md, "Tracing and error reporting".
    """
    if "opentelemetry.trace" not in sys.modules:
        return
    from tickwork.tracing import RunTracer, tracer_configured

    if tracer_configured():
        prefix = daemon.namespace + "/"
        RunTracer(job_label=lambda job: job.removeprefix(prefix)).watch(daemon.scheduler)
        daemon.traced = True
        _log.info("tracing runs with OpenTelemetry (the global tracer provider)")


def _announce(
    config: DaemonConfig, jobs: Config, result: Reload, where: str, server: StatusServer | None
) -> None:
    """Log what runs from where, and where the pages are served."""
    enabled = sum(job.enabled for job in jobs.jobs)
    _log.info(
        "%s",
        f"running {enabled} job{'s' if enabled != 1 else ''} from {config.jobs_file}"
        f" ({result.summary()}; {where}; pid {os.getpid()})",
    )
    if server is not None:
        extra = "" if server.metrics else " (needs prometheus_client: tickwork[metrics])"
        url = server.url + config.http_prefix
        _log.info(
            "%s",
            f"status page at {url}/, metrics at {url}/metrics{extra}, health at {url}/healthz",
        )


def _status_server(daemon: Daemon, http: _Http, config: DaemonConfig) -> StatusServer:
    """The ``--http`` endpoint: metrics, health, the pages and the API of the daemon's jobs.

    Without ``prometheus_client`` (no ``metrics`` extra) the pages are served and
    ``/metrics`` says what to install.
    """
    from tickwork._daemon.web.api import Api
    from tickwork._daemon.web.http import StatusServer

    registry = None
    try:
        import prometheus_client  # noqa: F401  (the metrics extra: /metrics alone needs it)
    except ImportError:
        pass
    else:
        from tickwork.metrics import SchedulerMetrics

        metrics = SchedulerMetrics(job_label=lambda job: job.removeprefix(daemon.namespace + "/"))
        metrics.watch(daemon.scheduler)
        registry = metrics.registry
    if http.public:  # --http-public-reads
        _log.warning(
            "--http %s:%d is reachable from other hosts and has no --http-token: anyone who"
            " can connect reads the job names and figures",
            *http.address,
        )
    return StatusServer(
        http.address,
        registry,
        daemon.scheduler,
        ready=daemon.liveness.readiness,
        tokens=http.tokens,
        host_names=config.http_host_names,
        api=Api(
            daemon.store,
            daemon.namespace,
            str(daemon.config_path),
            http.tokens,
            configured=daemon.job_config,
            refresh=config.http_refresh,
        ),
        prefix=config.http_prefix,
    )


# -- daemon messages in the run log's format --------------------------------------------


class _LogFormatter(logging.Formatter):
    """Daemon messages as one line each, text or JSON, like the run log."""

    def __init__(self, fmt: LogFormat) -> None:
        super().__init__()
        self._json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            message += f": {type(exc).__name__}: {exc}"
        if self._json:
            fields = {
                "time": iso(record.created, millis=True),
                "event": "log",
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": message,
            }
            if exc is not None:  # the whole traceback, in a field of the one record
                fields["traceback"] = "".join(traceback.format_exception(exc)).rstrip()
            return json_line(fields)
        level = "" if record.levelno < logging.WARNING else f" {record.levelname.lower()}"
        return one_line(f"{iso(record.created)} tickwork{level}: {message}")


class _NotJobFailures(logging.Filter):
    """Drop the durable layer's record of a failed run: the run log has said it.

    A command's failure is a `JobFailed`; a one-off's is its function's own exception,
    marked `RUN_FAILED` when it was sent as an event to the run log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, JobFailed) or getattr(record, RUN_FAILED, False))


def setup_logging(stream: TextIO, fmt: LogFormat) -> Callable[[], None]:
    """Send the ``tickwork`` loggers to ``stream`` in ``fmt``; return an undo function.

    So that every line on ``stream`` is one record in ``fmt``, it also takes what would
    otherwise be written there raw: other libraries' warnings (the database driver's)
    and Python warnings when no logging is set up, and an exception no thread caught.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_LogFormatter(fmt))
    handler.addFilter(_NotJobFailures())
    root = logging.getLogger("tickwork")
    durable = logging.getLogger("tickwork.durable")
    saved = (root.level, root.propagate, durable.level)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    durable.setLevel(logging.WARNING)  # its INFO lines repeat the run log's skips
    python_root = logging.getLogger()
    others: logging.Handler | None = None
    if not python_root.handlers:  # else logging's last resort writes them raw
        others = logging.StreamHandler(stream)
        others.setFormatter(_LogFormatter(fmt))
        others.setLevel(logging.WARNING)
        python_root.addHandler(others)
    logging.captureWarnings(True)
    hook = threading.excepthook
    threading.excepthook = _thread_crashed

    def undo() -> None:
        threading.excepthook = hook
        logging.captureWarnings(False)
        if others is not None:
            python_root.removeHandler(others)
        root.removeHandler(handler)
        root.setLevel(saved[0])
        root.propagate = saved[1]
        durable.setLevel(saved[2])

    return undo


def _thread_crashed(args: threading.ExceptHookArgs) -> None:
    """An exception no thread caught, as one log record (not a raw traceback)."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    _log.error("thread %s failed", name, exc_info=(args.exc_type, exc, args.exc_traceback))
