"""The daemon's HTTP endpoint: ``/metrics``, ``/healthz`` (liveness), ``/readyz``, ``/`` (status).

``tickwork run --http 127.0.0.1:9120`` starts a `StatusServer` beside the scheduler, on a
thread of its own (a `ThreadingHTTPServer`), so a slow scrape never delays a run. It binds
to the loopback interface unless told otherwise; with tokens (``--http-token``,
``--http-token-file``, ``TICKWORK_HTTP_TOKEN``) every path but ``/healthz`` and
``/readyz`` needs one.
A request is served only if its ``Host`` names this server (DNS rebinding), and only
for `IDLE_TIMEOUT` seconds of waiting for it.
The pages, the JSON API under ``/api/`` and the actions are `tickwork._daemon.api`'s.
Needs ``prometheus_client`` (the ``metrics`` extra).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import parse_qs, urlsplit

from tickwork._daemon.httpauth import UNNAMED, Throttled, Tokens

if TYPE_CHECKING:
    from tickwork._daemon.api import Api

__all__ = ["IDLE_TIMEOUT", "HealthSource", "StatusServer", "parse_address"]

_log = logging.getLogger("tickwork.daemon")

#: Seconds a connection may take to send its request or wait between two.
IDLE_TIMEOUT: Final = 20.0
#: The pages are the server's own HTML and inline styles: no script, nothing from
#: elsewhere, no frame around them, forms posted only here.
_CSP: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:;"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


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
        ready: Answers ``/readyz``: ``None`` for 200 ``ready``, else the reason, with
            503 (the daemon's: until its jobs are declared, and once it stops).
            Default: ready whenever it serves.
        token: If set, every path but ``/healthz`` needs ``Authorization: Bearer
            <token>`` (401 otherwise); the status page also takes ``?token=<token>``,
            for a browser.
        page: Renders the status page served at ``/`` (``None``: no page) when there is
            no ``api``.
        tokens: Named tokens (`Tokens`), instead of ``token`` (which is one token named
            ``http-token``).
        api: Answers every other path: the pages, ``/api/``, the actions.
        host_names: More names the ``Host`` header may give (``--http-host-name``);
            besides these, an IP address, ``localhost`` and the bound host. Any other
            is refused (400), so a page on another site cannot read this server through
            a name that resolves here (DNS rebinding).
        idle_timeout: Seconds a connection may take to send a request (`IDLE_TIMEOUT`).

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
        tokens: Tokens | None = None,
        api: Api | None = None,
        host_names: Iterable[str] = (),
        idle_timeout: float = IDLE_TIMEOUT,
        ready: Callable[[], str | None] = lambda: None,
    ) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty str or None")
        if token is not None:
            if tokens is not None:
                raise ValueError("give token or tokens, not both")
            tokens = Tokens([(UNNAMED, token)])
        render: Callable[[], bytes] = lambda: generate_latest(registry)  # noqa: E731
        handler = _handler(render, CONTENT_TYPE_LATEST, (health, ready), tokens, page, api)
        handler.host_names = frozenset(n.lower().rstrip(".") for n in (*host_names, address[0]))
        handler.timeout = idle_timeout
        self._server = ThreadingHTTPServer(address, handler)
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


class _Base(BaseHTTPRequestHandler):
    """Every method goes to ``_serve`` once its ``Host`` is known; answers go out by ``_send``."""

    server_version = "tickwork"
    host_names: frozenset[str] = frozenset()
    #: Seconds a connection may take to send a request, or stay idle between two: a
    #: client that sends half a request is closed then, not left holding a thread.
    timeout = IDLE_TIMEOUT

    def do_GET(self) -> None:
        self._checked("GET")

    def do_HEAD(self) -> None:
        self._checked("GET")  # `_send` leaves the body out

    def do_OPTIONS(self) -> None:
        self._checked("OPTIONS")

    def do_POST(self) -> None:
        self._checked("POST")

    def do_PUT(self) -> None:
        self._checked("PUT")

    def do_DELETE(self) -> None:
        self._checked("DELETE")

    def do_PATCH(self) -> None:
        self._checked("PATCH")

    def _checked(self, method: str) -> None:
        host = self.headers.get("Host")
        if host is None or _known_host(host, self.host_names):
            self._serve(method)
            return
        why = (
            f"the Host header {host!r} is not a name of this server;"
            " start tickwork run with --http-host-name NAME to serve it"
        )
        if urlsplit(self.path).path.startswith("/api/"):
            self._send(400, (json.dumps({"error": why}) + "\n").encode(), "application/json")
        else:
            self._send(400, why.encode() + b"\n", "text/plain; charset=utf-8")

    def _serve(self, method: str) -> None:
        raise NotImplementedError

    def _bearer(self, tokens: Tokens, given: str | None = None) -> str | None:
        """The token of the ``Authorization`` header (or ``given``); a throttled client's: none."""
        try:
            if given is not None:
                return tokens.by_secret(given, self.client_address[0])
            return tokens.bearer(self.headers.get("Authorization"), self.client_address[0])
        except Throttled:
            return None

    def _only_get(self, method: str) -> None:
        """A path that takes GET alone: OPTIONS says so (204), another method is 405."""
        allow = {"Allow": "GET, HEAD, OPTIONS"}
        if method == "OPTIONS":
            self._send(204, b"", "text/plain; charset=utf-8", allow)
        else:
            self._send(405, b"only GET here\n", "text/plain; charset=utf-8", allow)

    def _unauthorized(self) -> None:
        self._send(
            401,
            b"a bearer token is needed\n",
            "text/plain; charset=utf-8",
            {"WWW-Authenticate": 'Bearer realm="tickwork"'},
        )

    def _send(
        self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        if code != 204:  # "No Content" has no length either
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", _CSP)
        self.send_header("Referrer-Policy", "same-origin")  # a ?token= link stays here
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("http %s: " + format, self.address_string(), *args)


def _handler(
    render: Callable[[], bytes],
    content_type: str,
    probes: tuple[HealthSource, Callable[[], str | None]],
    tokens: Tokens | None,
    page: Callable[[], str] | None,
    api: Api | None,
) -> type[_Base]:
    class Handler(_Base):
        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            path = parts.path
            if path in ("/healthz", "/readyz", "/metrics") and method != "GET":
                self._only_get(method)
            elif path == "/healthz":
                h = probes[0].health()
                self._probe(None if h.ok else f"unhealthy: {h.reason}", b"ok\n")
            elif path == "/readyz":
                why = probes[1]()
                self._probe(None if why is None else f"not ready: {why}", b"ready\n")
            elif path == "/metrics":
                if tokens is not None and self._bearer(tokens) is None:
                    self._unauthorized()
                else:
                    self._send(200, render(), content_type)
            elif api is not None:
                self._api(method, path, parts.query)
            else:
                self._page(method, path, parts.query)

        def _probe(self, failed: str | None, ok: bytes) -> None:
            if failed is None:
                self._send(200, ok, "text/plain; charset=utf-8")
            else:
                self._send(503, f"{failed}\n".encode(), "text/plain; charset=utf-8")

        def _api(self, method: str, path: str, query: str) -> None:
            from tickwork._daemon.api import MAX_BODY, Request

            assert api is not None
            text = self.headers.get("Content-Length") or "0"
            length = int(text) if text.isdigit() else 0
            body = self.rfile.read(min(length, MAX_BODY + 1)) if length > 0 else b""
            request = Request(
                method, path, parse_qs(query), _headers(self.headers), body, self.client_address[0]
            )
            answer = api.handle(request)
            self._send(answer.status, answer.body, answer.content_type, answer.headers)

        def _page(self, method: str, path: str, query: str) -> None:
            """Without an `Api`: the status page alone, read with a token if there are any."""
            if tokens is not None:
                given = parse_qs(query).get("token", [""])[0]
                who = self._bearer(tokens)
                if who is None and path == "/" and given:
                    who = self._bearer(tokens, given)
                if who is None:
                    self._unauthorized()
                    return
            if path == "/" and page is not None and method == "GET":
                self._send(200, page().encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics or /healthz\n", "text/plain")

    return Handler


def _known_host(header: str, names: frozenset[str]) -> bool:
    """Whether a ``Host`` header names this server: an IP address, localhost, or ``names``."""
    try:
        host = (urlsplit("//" + header.strip()).hostname or "").rstrip(".")
    except ValueError:  # an unclosed "[" of an IPv6 address
        return False
    if any(c in header for c in "@/\\"):
        return False
    if host == "localhost" or host.endswith(".localhost") or host in names:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _headers(message: Any) -> dict[str, str]:
    """A request's headers by their usual spelling (the last of a repeated one)."""
    known = ("Authorization", "Content-Type", "Cookie", "Host", "Origin", "Referer")
    out = {name: message.get(name) for name in (*known, "Sec-Fetch-Site", "X-Forwarded-Proto")}
    return {k: v for k, v in out.items() if v is not None}
