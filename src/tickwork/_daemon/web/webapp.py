"""The one web app of the pages, the control API and the probes: a request in, an answer out.

`WebApp` answers every request, whichever server took it: ``tickwork run --http``'s
own (`tickwork._daemon.web.http`), an ASGI or a WSGI server, or a Django view
(`tickwork._daemon.web.gateways`; the public face is `tickwork.web`). It finds the path
the pages are served under (the server's mount point, the ``prefix`` setting, a
proxy's ``X-Forwarded-Prefix``), refuses a ``Host`` that is not a name of the server
(DNS rebinding), answers ``/healthz``, ``/readyz`` and ``/metrics`` where it was given
them, hands every other path to `tickwork._daemon.web.api.Api`, and puts the same security
headers on every answer.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import quote, urlsplit

from tickwork._daemon.web.api import Api, Request, Response
from tickwork._daemon.web.httpauth import Throttled, Tokens
from tickwork._daemon.web.status_page import LIVE_HASH

__all__ = ["ANY_HOST", "HEADERS", "SECURITY", "Probes", "WebApp", "check_prefix"]

#: The request headers the app reads, by their usual spelling.
HEADERS: Final = (
    "Authorization",
    "Content-Type",
    "Cookie",
    "Host",
    "Origin",
    "Referer",
    "Sec-Fetch-Site",
    "X-Forwarded-Prefix",
    "X-Forwarded-Proto",
)
#: In ``host_names``: any ``Host`` is served (a framework in front checks it, as
#: Django's ``ALLOWED_HOSTS`` does).
ANY_HOST: Final = "*"
#: The pages are the app's own HTML and inline styles, and one script known by its hash
#: (the live refresh, which reads the page again from here): nothing from elsewhere, no
#: frame around them, forms posted only here.
_CSP: Final = (
    f"default-src 'none'; style-src 'unsafe-inline'; script-src {LIVE_HASH};"
    " connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none';"
    " base-uri 'none'"
)
#: The headers on every answer.
SECURITY: Final = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": _CSP,
    "Referrer-Policy": "same-origin",  # a ?token= link stays here
}
_TEXT: Final = "text/plain; charset=utf-8"
_NO_METRICS: Final = b"/metrics needs prometheus_client: pip install 'tickwork[metrics]'\n"
_PATH: Final = re.compile(r"(?:/[A-Za-z0-9._~!$'()*+,=:@%-]+)+")
#: What a path may keep unquoted in a link, a ``Location`` and a cookie's ``Path``.
_SAFE: Final = "/-._~!$'()*+,=:@"


def check_prefix(prefix: str, *, where: str = "prefix") -> str:
    """A ``prefix`` setting: ``""`` or a path such as ``/ops/tickwork`` (no ``/`` at the end).

    Raises:
        ValueError: Anything else; the message names ``where`` and shows the value.

    """
    if not isinstance(prefix, str):
        raise TypeError(f"{where} must be a str, got {prefix!r}")
    if prefix and not _PATH.fullmatch(prefix):
        raise ValueError(
            f"{where} must be a path such as /ops/tickwork (a leading /, none at the end,"
            f" letters, digits and -._~), got {prefix!r}"
        )
    return prefix


def _root(text: str) -> str:
    """A path the pages are under, fit for a link, a ``Location`` and a cookie's ``Path``.

    Quoted (no ``&``, ``"``, ``;`` or backslash is left), and with its slashes collapsed, so
    that a header's ``//elsewhere.example`` cannot make a redirect leave the site.
    """
    quoted = quote(text, safe=_SAFE + "%")
    return re.sub("/+", "/", "/" + quoted).rstrip("/")


@dataclass(frozen=True, slots=True)
class Probes:
    """What the daemon answers besides the pages: ``/healthz``, ``/readyz``, ``/metrics``.

    ``health``: the scheduler's `tickwork.DurableScheduler.health`. ``ready``: ``None``
    for ready, else why not. ``metrics``: the Prometheus text and its content type;
    ``None``: ``prometheus_client`` is not installed (``/metrics`` says so, 501).
    """

    health: Callable[[], Any]
    ready: Callable[[], str | None] = lambda: None
    metrics: Callable[[], tuple[bytes, str]] | None = None


class WebApp:
    """The pages, the control API and (for the daemon) the probes, behind one ``handle``.

    Args:
        api: Answers the pages, ``/login`` and ``/api/`` (``None``: the probes alone).
        tokens: Guard ``/metrics`` (the `Api` has its own).
        host_names: Names a ``Host`` header may give besides an IP address and
            ``localhost`` (`ANY_HOST`: any); any other is refused with 400.
        prefix: The path the pages are under before the server's own mount point: a
            request whose path begins with it has it taken off (a proxy that passes
            the whole path), and every link begins with it.
        probes: The daemon's ``/healthz``, ``/readyz`` and ``/metrics``.
        host_hint: How to allow a refused ``Host`` (ends the refusal).

    Raises:
        ValueError: A bad ``prefix``.

    """

    def __init__(
        self,
        api: Api | None,
        *,
        tokens: Tokens | None = None,
        host_names: Iterable[str] = (),
        prefix: str = "",
        probes: Probes | None = None,
        host_hint: str = "start tickwork run with --http-host-name NAME to serve it",
    ) -> None:
        self._api = api
        self._tokens = tokens
        self._names = frozenset(n.lower().rstrip(".") for n in host_names)
        self._prefix = check_prefix(prefix)
        self._probes = probes
        self._hint = host_hint

    def handle(self, request: Request) -> Response:
        """Answer one request (a ``HEAD`` as its ``GET``: the server leaves the body out)."""
        request = self._placed(request)
        host = request.headers.get("Host")
        if host is None or ANY_HOST in self._names or _known_host(host, self._names):
            answer = self._route(request)
        else:
            why = f"the Host header {host!r} is not a name of this server; {self._hint}"
            answer = self._error(request, 400, why)
        answer.headers = SECURITY | answer.headers
        return answer

    def _placed(self, request: Request) -> Request:
        """The request with the path the pages are under (``root``) and the path after it."""
        path = request.path or "/"
        if self._prefix and (path == self._prefix or path.startswith(self._prefix + "/")):
            path = path[len(self._prefix) :] or "/"
        base = _root(request.root + self._prefix)
        given = request.headers.get("X-Forwarded-Prefix", "").split(",")[0].strip()
        told = _root(given) if given else ""
        # A proxy's prefix comes before the mount point, unless a middleware in front
        # (werkzeug's ProxyFix) has already put it there.
        root = base if base.startswith(told) else told + base
        method = "GET" if request.method == "HEAD" else request.method
        return replace(request, method=method, path=path, root=root)

    def _route(self, request: Request) -> Response:
        path, probes = request.path, self._probes
        if probes is not None and path in ("/healthz", "/readyz", "/metrics"):
            if request.method != "GET":
                return _only_get(request.method)
            if path == "/healthz":
                h = probes.health()
                return _probe(None if h.ok else f"unhealthy: {h.reason}", b"ok\n")
            if path == "/readyz":
                why = probes.ready()
                return _probe(None if why is None else f"not ready: {why}", b"ready\n")
            if self._tokens is not None and not self._bearer(request):
                return self._error(request, 401, "a bearer token is needed")
            if probes.metrics is None:
                return Response(501, _NO_METRICS, _TEXT)
            body, ctype = probes.metrics()
            return Response(200, body, ctype)
        if self._api is None:
            return Response(404, b"not found: try /metrics or /healthz\n", _TEXT)
        return self._api.handle(request)

    def _bearer(self, request: Request) -> bool:
        assert self._tokens is not None
        try:
            header = request.headers.get("Authorization")
            return self._tokens.bearer(header, request.client) is not None
        except Throttled:
            return False

    @staticmethod
    def _error(request: Request, status: int, why: str) -> Response:
        headers = {"WWW-Authenticate": 'Bearer realm="tickwork"'} if status == 401 else {}
        if request.path.startswith("/api/"):
            body = (json.dumps({"error": why}) + "\n").encode()
            return Response(status, body, "application/json", headers)
        return Response(status, why.encode() + b"\n", _TEXT, headers)


def _probe(failed: str | None, ok: bytes) -> Response:
    if failed is None:
        return Response(200, ok, _TEXT)
    return Response(503, f"{failed}\n".encode(), _TEXT)


def _only_get(method: str) -> Response:
    """A path that takes GET alone: OPTIONS says so (204), another method is 405."""
    allow = {"Allow": "GET, HEAD, OPTIONS"}
    if method == "OPTIONS":
        return Response(204, b"", _TEXT, allow)
    return Response(405, b"only GET here\n", _TEXT, allow)


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
