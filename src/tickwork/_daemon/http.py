"""The daemon's HTTP endpoint: ``/metrics`` (Prometheus), ``/healthz`` (liveness), ``/`` (status).

``tickwork run --http 127.0.0.1:9120`` starts a `StatusServer` beside the scheduler, on a
thread of its own (a `ThreadingHTTPServer`), so a slow scrape never delays a run. It binds
to the loopback interface unless told otherwise; with ``--http-token`` (or
``TICKWORK_HTTP_TOKEN``) every path but ``/healthz`` needs ``Authorization: Bearer
<token>``. Needs ``prometheus_client`` (the ``metrics`` extra).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

__all__ = ["HealthSource", "StatusServer", "parse_address"]

_log = logging.getLogger("tickwork.daemon")


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
    """Serves ``/metrics`` from a Prometheus registry and ``/healthz`` from a scheduler.

    Args:
        address: ``(host, port)`` to bind; port 0 picks a free one (see `url`).
        registry: The ``prometheus_client`` registry whose text ``/metrics`` returns.
        health: The scheduler whose ``health()`` answers ``/healthz``: 200 ``ok``, or
            503 with the reason (for a container's liveness probe).
        token: If set, every path but ``/healthz`` needs ``Authorization: Bearer
            <token>`` (401 otherwise); the status page also takes ``?token=<token>``,
            for a browser.
        page: Renders the status page served at ``/`` (``None``: no page).

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
        page: Callable[[], str] | None = None,
    ) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty str or None")
        render: Callable[[], bytes] = lambda: generate_latest(registry)  # noqa: E731
        self._server = ThreadingHTTPServer(
            address, _handler(render, CONTENT_TYPE_LATEST, health, token, page)
        )
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` as bound (the real port when 0 was asked)."""
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"

    def start(self) -> None:
        """Serve on a daemon thread."""
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


def _handler(
    render: Callable[[], bytes],
    content_type: str,
    health: HealthSource,
    token: str | None,
    page: Callable[[], str] | None,
) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode() if token is not None else None

    class Handler(BaseHTTPRequestHandler):
        server_version = "tickwork"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                h = health.health()
                if h.ok:
                    self._send(200, b"ok\n", "text/plain; charset=utf-8")
                else:
                    text = f"unhealthy: {h.reason}\n".encode()
                    self._send(503, text, "text/plain; charset=utf-8")
                return
            if expected is not None:
                given = (self.headers.get("Authorization") or "").encode()
                query = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
                if path == "/" and query:
                    given = f"Bearer {query}".encode()
                if not hmac.compare_digest(given, expected):
                    self._send(
                        401,
                        b"a bearer token is needed\n",
                        "text/plain; charset=utf-8",
                        {"WWW-Authenticate": 'Bearer realm="tickwork"'},
                    )
                    return
            if path == "/metrics":
                self._send(200, render(), content_type)
            elif path == "/" and page is not None:
                self._send(200, page().encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics or /healthz\n", "text/plain")

        def _send(
            self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("http %s: " + format, self.address_string(), *args)

    return Handler
