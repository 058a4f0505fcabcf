"""``tickwork run --http``: its options checked before the start, its server built after.

`check_http` settles ``--http``, ``--http-prefix`` and the tokens into an `Endpoint`
before anything is opened (a bad value is a `ValueError` naming the option, and a
start that would serve the jobs beyond this host to anyone is refused); `serve_http`
builds the `StatusServer` over a built daemon (``/metrics`` when ``prometheus_client``
is installed, the probes, the pages and the API), starts it and says where it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwork._daemon.daemon import Daemon
    from tickwork._daemon.web.http import StatusServer
    from tickwork._daemon.web.httpauth import Tokens
    from tickwork._durable.scheduler import DurableScheduler

__all__ = ["Endpoint", "check_http", "serve_http"]

_log = logging.getLogger("tickwork.daemon")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """``--http`` checked: where to listen, with which tokens, and whether it is public."""

    address: tuple[str, int]
    tokens: Tokens | None
    """None: reading is open and nothing can be done over HTTP."""
    public: bool
    """Reachable beyond loopback with no token (``--http-public-reads``)."""
    prefix: str
    """``--http-prefix``: the path a proxy serves the pages under."""


def check_http(
    address: str,
    *,
    prefix: str = "",
    tokens: Sequence[str] = (),
    token_file: str | None = None,
    public_reads: bool = False,
) -> Endpoint:
    """``--http ADDRESS`` with its ``--http-prefix``, tokens and ``--http-public-reads``.

    Raises:
        ValueError: The address is not ``HOST:PORT``, the prefix not a path, a token
            is wrong, or the address is reachable from other hosts without a token
            and without ``--http-public-reads``.
    """
    # The HTTP surface is imported only by a start that serves it.
    from tickwork._daemon.web.http import is_loopback, parse_address
    from tickwork._daemon.web.httpauth import load_tokens
    from tickwork._daemon.web.webapp import check_prefix

    where = parse_address(address)
    loopback = is_loopback(where[0])
    check_prefix(prefix, where="--http-prefix")
    named = load_tokens(tokens, token_file)
    public = named is None and not loopback
    if public and not public_reads:
        host, port = where
        raise ValueError(
            f"--http {host}:{port} is reachable from other hosts and has no --http-token:"
            " give one (--http-token NAME=SECRET or --http-token-file FILE), or add"
            " --http-public-reads to let anyone who can connect read the jobs; not started"
        )
    return Endpoint(where, named, public, prefix)


def serve_http(
    daemon: Daemon, endpoint: Endpoint, *, host_names: Sequence[str] = (), refresh: int = 10
) -> tuple[StatusServer, str]:
    """The ``--http`` server over ``daemon``, started, and the line that says where.

    It serves the metrics, the probes, the pages and the API; ``/readyz`` answers 503
    until the daemon has taken its jobs and runs start. The line (``status page at
    URL/, ...``) is the daemon's to log once it runs its jobs (`FileJobs.take`).

    Without ``prometheus_client`` (no ``metrics`` extra) the pages are served and
    ``/metrics`` says what to install.

    Raises:
        OSError: The address cannot be bound.
    """
    from tickwork._daemon.web.api import Api
    from tickwork._daemon.web.http import StatusServer

    if endpoint.public:  # --http-public-reads
        _log.warning(
            "--http %s:%d is reachable from other hosts and has no --http-token: anyone who"
            " can connect reads the job names and figures",
            *endpoint.address,
        )
    label = _job_label(daemon.namespace)
    api = Api(
        daemon.store,
        daemon.namespace,
        str(daemon.config_path),
        endpoint.tokens,
        configured=daemon.job_config,
        refresh=refresh,
    )
    server = StatusServer(
        endpoint.address,
        _registry(daemon.scheduler, label),
        daemon.scheduler,
        ready=daemon.liveness.readiness,
        tokens=endpoint.tokens,
        host_names=host_names,
        api=api,
        prefix=endpoint.prefix,
        serving=True,
    )
    extra = "" if server.metrics else " (needs prometheus_client: tickwork[metrics])"
    url = server.url + endpoint.prefix
    said = f"status page at {url}/, metrics at {url}/metrics{extra}, health at {url}/healthz"
    return server, said


def _job_label(namespace: str) -> Callable[[str], str]:
    """A job's label in the metrics: its name in the file (the id without the namespace)."""
    prefix = namespace + "/"
    return lambda job: job.removeprefix(prefix)


def _registry(scheduler: DurableScheduler, label: Callable[[str], str]) -> Any:
    """The metrics registry of ``scheduler``'s runs, or None without ``prometheus_client``."""
    try:
        import prometheus_client  # noqa: F401  (the metrics extra: /metrics alone needs it)
    except ImportError:
        return None
    from tickwork.metrics import SchedulerMetrics

    metrics = SchedulerMetrics(job_label=label)
    metrics.watch(scheduler)
    return metrics.registry
