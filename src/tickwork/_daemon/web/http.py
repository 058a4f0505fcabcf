"""The daemon's HTTP server: `tickwork._daemon.web.webapp.WebApp` on the standard library's.

``tickwork run --http 127.0.0.1:9120`` starts a `StatusServer` beside the scheduler, on a
thread of its own (a `ThreadingHTTPServer`), so a slow scrape never delays a run. It binds
to the loopback interface unless told otherwise; with tokens (``--http-token``,
``--http-token-file``, ``TICKWORK_HTTP_TOKEN``) every path but ``/healthz`` and
``/readyz`` needs one. A connection is kept only for `IDLE_TIMEOUT` seconds of waiting
for its request. What each request is answered is the `WebApp`'s, as for an app that
mounts the pages (`tickwork.web`): this module only reads requests and writes answers.
``/metrics`` needs ``prometheus_client`` (the ``metrics`` extra); the pages do not.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from tickwork._daemon.web.api import MAX_BODY, Api, Request, Response
from tickwork._daemon.web.httpauth import UNNAMED, Tokens
from tickwork._daemon.web.webapp import HEADERS, Probes, WebApp

__all__ = ["IDLE_TIMEOUT", "HealthSource", "StatusServer", "parse_address"]

_log = logging.getLogger("tickwork.daemon")

#: Seconds a connection may take to send its request or wait between two.
IDLE_TIMEOUT: Final = 20.0


class HealthSource(Protocol):
    """What `/healthz` asks: `tickwork.DurableScheduler.health`."""

    def health(self) -> Any: ...


def parse_address(text: str) -> tuple[str, int]:
    """``--http``'s value: ``HOST:PORT``, ``[IPv6]:PORT``, ``:PORT`` or ``PORT``.

    A missing host is ``127.0.0.1``. Port 0 picks a free port (logged at start).

    Raises:
        ValueError: Not an address; the message shows the text.

    """
    if not isinstance(text, str):
        raise TypeError(f"--http must be a str, got {text!r}")
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "", text.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535 or (host and any(c.isspace() for c in host)):
        raise ValueError(f"--http must be HOST:PORT, :PORT or PORT (port 0-65535), got {text!r}")
    return host or "127.0.0.1", port


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StatusServer:
    """Serves the daemon's `WebApp`: the probes, ``/metrics``, the pages and the API.

    Args:
        address: ``(host, port)`` to bind; port 0 picks a free one (see `url`).
        registry: The ``prometheus_client`` registry whose text ``/metrics`` returns;
            ``None``: ``prometheus_client`` is not installed, and ``/metrics`` says so.
        health: The scheduler whose ``health()`` answers ``/healthz``: 200 ``ok``, or
            503 with the reason (for a container's liveness probe).
        ready: Answers ``/readyz``: ``None`` for 200 ``ready``, else the reason, with
            503 (the daemon's: until its jobs are declared, and once it stops).
            Default: ready whenever it serves.
        token: If set, every path but ``/healthz`` needs ``Authorization: Bearer
            <token>`` (401 otherwise).
        tokens: Named tokens (`Tokens`), instead of ``token`` (which is one token named
            ``http-token``).
        api: Answers every other path: the pages, ``/api/``, the actions.
        host_names: More names the ``Host`` header may give (``--http-host-name``);
            besides these, an IP address, ``localhost`` and the bound host. Any other
            is refused (400), so a page on another site cannot read this server through
            a name that resolves here (DNS rebinding).
        idle_timeout: Seconds a connection may take to send a request (`IDLE_TIMEOUT`).
        prefix: The path a proxy serves the pages under (``--http-prefix``, see `WebApp`).
        serving: Start serving at once, as `start` does.

    Raises:
        OSError: The address cannot be bound (in use, not this host's).

    """

    def __init__(
        self,
        address: tuple[str, int],
        registry: Any,
        health: HealthSource,
        *,
        token: str | None = None,
        tokens: Tokens | None = None,
        api: Api | None = None,
        host_names: Iterable[str] = (),
        idle_timeout: float = IDLE_TIMEOUT,
        ready: Callable[[], str | None] = lambda: None,
        prefix: str = "",
        serving: bool = False,
    ) -> None:
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty str or None")
        if token is not None:
            if tokens is not None:
                raise ValueError("give token or tokens, not both")
            tokens = Tokens([(UNNAMED, token)])
        probes = Probes(health.health, ready, None if registry is None else _metrics(registry))
        app = WebApp(
            api,
            tokens=tokens,
            host_names=(*host_names, address[0]),
            prefix=prefix,
            probes=probes,
        )
        handler = type("Handler", (_Handler,), {"app": app, "timeout": idle_timeout})
        self._server = ThreadingHTTPServer(address, handler)
        self._server.daemon_threads = True
        self.metrics = registry is not None
        """Whether ``/metrics`` is served (``prometheus_client`` is installed)."""
        self._thread: threading.Thread | None = None
        if serving:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="tickwork-http", daemon=True
            )
            self._thread.start()

    @property
    def url(self) -> str:
        """``http://host:port`` as bound (the real port when 0 was asked)."""
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"

    def start(self) -> None:
        """Serve on a daemon thread (once)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tickwork-http", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()


def _metrics(registry: Any) -> Callable[[], tuple[bytes, str]]:
    """``/metrics``' answer from a ``prometheus_client`` registry."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)


class _Handler(BaseHTTPRequestHandler):
    """Reads a request into a `Request`, asks the `WebApp`, writes its `Response`."""

    server_version = "tickwork"
    app: WebApp
    #: Seconds a connection may take to send a request, or stay idle between two: a
    #: client that sends half a request is closed then, not left holding a thread.
    timeout = IDLE_TIMEOUT

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_OPTIONS = do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        text = self.headers.get("Content-Length") or "0"
        length = int(text) if text.isdigit() else 0
        body = self.rfile.read(min(length, MAX_BODY + 1)) if length > 0 else b""
        headers = {name: self.headers.get(name) for name in HEADERS}
        request = Request(
            self.command,
            unquote(parts.path),
            parse_qs(parts.query),
            {k: v for k, v in headers.items() if v is not None},
            body,
            self.client_address[0],
        )
        self._send(self.app.handle(request))

    def _send(self, answer: Response) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        if answer.status != 204:  # "No Content" has no length either
            self.send_header("Content-Length", str(len(answer.body)))
        for k, v in answer.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("http %s: " + format, self.address_string(), *args)
