"""``tickwork run``: the daemon, from its options to one `DaemonConfig`.

Examples::

    tickwork run examples/housekeeping.toml --for 20s
    tickwork run jobs.toml --database postgresql://tickwork@db/tickwork --log-format json

``run`` exits 0 after SIGTERM, SIGINT or ``--for``; 2 for a broken file or a bad
option; 1 when the store cannot be used. Every line it logs goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from tickwork._cli.options import (
    add_file_argument,
    add_store_options,
    count,
    duration,
    positive_duration,
    take_file,
)

if TYPE_CHECKING:
    from tickwork._daemon.start import DaemonConfig

__all__ = ["add_parser", "daemon_config", "run"]


def add_parser(subparsers: Any) -> None:
    """Add the ``run`` sub-command to an argparse ``subparsers`` object.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
    """
    _add_run_parser(subparsers)


def _add_run_parser(subparsers: Any) -> None:
    """The ``run`` sub-command: the jobs file, the state, and how the daemon runs."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run the jobs of a TOML file until SIGTERM/SIGINT (a cron replacement)",
        description="Run the jobs of a jobs file (see docs/daemon.md) with durable state. "
        "SIGTERM/SIGINT: stop starting runs, wait up to --shutdown-grace, terminate what "
        "is left, exit 0. SIGHUP: reload the file (a broken file keeps the old "
        "configuration). Run log lines go to stderr.",
    )
    add_file_argument(p)
    add_store_options(p)
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text for people (default) or json: one object per line",
    )
    p.add_argument(
        "--shutdown-grace",
        type=duration("--shutdown-grace"),
        default=30.0,
        metavar="DURATION",
        help="after SIGTERM/SIGINT, how long running jobs may go on before their process "
        "groups are terminated (default: 30s)",
    )
    p.add_argument(
        "--for",
        dest="run_for",
        type=positive_duration("--for"),
        metavar="DURATION",
        help="stop by itself after this long, as on SIGTERM (e.g. 20s)",
    )
    _add_serving_options(p)
    _add_tuning_options(p)
    _add_crontab_options(p)
    p.set_defaults(func=run)


def _add_crontab_options(p: argparse.ArgumentParser) -> None:
    """``--crontab``: the file is a crontab, translated as ``tickwork import crontab`` does."""
    from tickwork._cli.import_crontab import add_crontab_options

    group = p.add_argument_group("a crontab instead of a jobs file")
    group.add_argument(
        "--crontab",
        action="store_true",
        help="the file is a crontab: run it as `tickwork import crontab FILE` translates it"
        " (in memory, again at each reload); a line that cannot be imported stops the"
        " start unless --keep-going",
    )
    add_crontab_options(group, when="with --crontab: ")


def _add_serving_options(p: argparse.ArgumentParser) -> None:
    """``run``'s HTTP endpoint: metrics, liveness, the token that guards them."""
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at /metrics, a liveness check at /healthz, a "
        "readiness check at /readyz, the status page at / and a JSON API at /api/ (e.g. "
        "127.0.0.1:9120; :PORT binds to 127.0.0.1); /metrics needs tickwork[metrics]",
    )
    p.add_argument(
        "--health-after",
        type=positive_duration("--health-after"),
        default=5.0,
        metavar="DURATION",
        help="once the state has left a look unanswered this long (a lock, a database "
        "down), the log says so and /healthz answers 503; also how long past --poll the "
        "last look may be (default: 5s)",
    )
    p.add_argument(
        "--http-token",
        metavar="NAME=SECRET",
        action="append",
        default=[],
        help="a token: every path but /healthz and /readyz then needs one ('Authorization: Bearer "
        "SECRET', or /login in a browser), and its holder may act on the jobs over HTTP, "
        "recorded as NAME (repeatable; SECRET alone is named http-token; "
        "default: $TICKWORK_HTTP_TOKEN)",
    )
    p.add_argument(
        "--http-token-file",
        metavar="FILE",
        help="read more tokens from FILE, one NAME=SECRET a line (# comments); others "
        "must not be able to read it",
    )
    p.add_argument(
        "--http-host-name",
        metavar="NAME",
        action="append",
        default=[],
        help="a name the server is reached by (its DNS name, a proxy's); requests whose "
        "Host is not an IP address, localhost, the bound host or such a name are refused "
        "(repeatable)",
    )
    p.add_argument(
        "--http-prefix",
        metavar="PATH",
        default="",
        help="the path a proxy serves the pages under (e.g. /ops/tickwork): every link, "
        "form and redirect starts with it (a proxy may also say it in X-Forwarded-Prefix)",
    )
    p.add_argument(
        "--http-public-reads",
        action="store_true",
        help="serve --http beyond loopback without a token, readable by anyone who can "
        "connect (without it, such a start is refused)",
    )


def _add_tuning_options(p: argparse.ArgumentParser) -> None:
    """``run``'s timing: file watching, leases, polling, runs at once, the pages' refresh."""
    p.add_argument(
        "--http-refresh",
        metavar="SECONDS",
        type=count,
        default=10,
        help="seconds between the --http pages' live refreshes (default 10)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="also reload when the file changes (checked every second)",
    )
    p.add_argument(
        "--lease",
        type=positive_duration("--lease"),
        default=30.0,
        metavar="DURATION",
        help="how long a claimed run stays reserved for this process; after a crash its "
        "runs are recovered within this time (default: 30s)",
    )
    p.add_argument(
        "--poll",
        type=positive_duration("--poll"),
        default=10.0,
        metavar="DURATION",
        help="the longest the daemon goes without looking at the state; changes by other "
        "processes and hosts (a `tickwork pause`, another daemon) wake it at once "
        "(default: 10s)",
    )
    p.add_argument(
        "--workers",
        type=count,
        default=32,
        metavar="N",
        help="most runs at once (default: 32)",
    )
    p.add_argument(
        "--allow-module",
        action="append",
        type=_module_prefix,
        default=[],
        metavar="PREFIX",
        help="run the one-offs (tickwork enqueue, POST /api/enqueue) of functions in this"
        " module or under it, in-process (repeatable; '*': any); without it a one-off the"
        " daemon takes fails, not allowed",
    )


def _module_prefix(text: str) -> str:
    """``--allow-module``: a dotted module name, or ``*``."""
    if text == "*" or all(part.isidentifier() for part in text.split(".")):
        return text
    raise argparse.ArgumentTypeError(
        f"must be a module name such as myapp.jobs, or '*', got {text!r}"
    )


def daemon_config(args: argparse.Namespace) -> DaemonConfig:
    """The `DaemonConfig` that ``tickwork run``'s parsed options describe."""
    from tickwork._cli.import_crontab import crontab_options
    from tickwork._daemon.start import DaemonConfig

    return DaemonConfig(
        args.file,
        state=args.state,
        database=args.database,
        namespace=args.namespace,
        log_format=args.log_format,
        shutdown_grace=args.shutdown_grace,
        lease=args.lease,
        poll=args.poll,
        workers=args.workers,
        watch=args.watch,
        health_after=args.health_after,
        allowed_modules=tuple(args.allow_module),
        run_for=args.run_for,
        http=args.http,
        http_token=None if args.http_token else os.environ.get("TICKWORK_HTTP_TOKEN") or None,
        http_tokens=tuple(args.http_token),
        http_token_file=args.http_token_file,
        http_host_names=tuple(args.http_host_name),
        http_public_reads=args.http_public_reads,
        http_prefix=args.http_prefix,
        http_refresh=args.http_refresh,
        crontab=crontab_options(args) if args.crontab else None,
    )


def run(args: argparse.Namespace, *, err: TextIO | None = None) -> int:
    """Run ``tickwork run`` for parsed arguments; return the exit status."""
    from tickwork._daemon.start import run_daemon

    status = take_file(args, "run", sys.stderr if err is None else err, required=True)
    if status is not None:
        return status
    if not args.crontab:
        alone = [f"--{o.replace('_', '-')}" for o in ("system", "seconds", "keep_going")]
        given = [o for o in alone if getattr(args, o[2:].replace("-", "_"))]
        if given:
            print(f"tickwork run: {given[0]} applies only with --crontab", file=err or sys.stderr)
            return 2
    return run_daemon(daemon_config(args), err=err)


def _shown(dsn: str | None) -> str:
    from tickwork._daemon.state import redact_dsn

    return redact_dsn(dsn or "")
