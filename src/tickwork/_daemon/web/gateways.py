"""The `WebApp` behind an ASGI server, a WSGI server and a Django view: requests in, answers out.

Each gateway reads its server's request into a `tickwork._daemon.web.api.Request` (the
path after the mount point, the mount point as its ``root``, the headers the app
reads, the body up to one byte past `MAX_BODY`, the client's address, and who the
application's own login says asks, through the ``user`` hook), asks the one `WebApp`,
and writes its answer back. None imports a framework: Django's response class is
imported when the view first answers. The ASGI gateway answers on a worker thread, so
reading the store never holds up the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from tickwork._daemon.web.api import MAX_BODY, Request, Response
from tickwork._daemon.web.webapp import HEADERS, WebApp

__all__ = ["ASGIApp", "UserHook", "WSGIApp", "django_view"]

#: Who the application's login says asks, from its own request (ASGI: the scope;
#: WSGI: the environ; Django: the ``HttpRequest``); ``None``: nobody signed in.
UserHook = Callable[[Any], "str | None"]
_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _user(hook: UserHook | None, native: Any) -> str | None:
    """The hook's name for the request, checked: a non-empty str or ``None``."""
    if hook is None:
        return None
    name = hook(native)
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"the user hook must return a non-empty str or None, got {name!r}")
    return name


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


class ASGIApp:
    """An ASGI 3 application over a `WebApp` (``lifespan`` accepted, ``websocket`` refused)."""

    def __init__(self, app: WebApp, user: UserHook | None = None) -> None:
        self._app = app
        self._user = user

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise ValueError(f"tickwork's pages answer HTTP only, got a {scope['type']!r} scope")
        body = b""
        while True:  # a body larger than MAX_BODY is read no further: 413
            message = await receive()
            if len(body) <= MAX_BODY:
                body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        root = scope.get("root_path", "")
        path = scope["path"]
        if root and path.startswith(root):  # the spec's path has the mount point in it
            path = path[len(root) :]
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            name = raw_name.decode("latin-1").title()
            if name in HEADERS:
                headers[name] = raw_value.decode("latin-1")
        client = scope.get("client")
        request = Request(
            scope["method"],
            path,
            parse_qs(scope.get("query_string", b"").decode("latin-1")),
            headers,
            body,
            None if not client else client[0],
            root=root,
            user=_user(self._user, scope),
        )
        answer = await asyncio.to_thread(self._app.handle, request)
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(k.lower().encode(), v.encode()) for k, v in _headers(answer)],
            }
        )
        out = b"" if scope["method"] == "HEAD" else answer.body
        await send({"type": "http.response.body", "body": out})


async def _lifespan(receive: _Receive, send: _Send) -> None:
    """Served alone: nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _headers(answer: Response) -> list[tuple[str, str]]:
    """An answer's headers: its content type and length, then its own."""
    out = [("Content-Type", answer.content_type)]
    if answer.status != 204:
        out.append(("Content-Length", str(len(answer.body))))
    return out + list(answer.headers.items())


class WSGIApp:
    """A WSGI application over a `WebApp` (mounted with ``SCRIPT_NAME`` as its root)."""

    def __init__(self, app: WebApp, user: UserHook | None = None) -> None:
        self._app = app
        self._user = user

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        def text(key: str) -> str:  # WSGI's strings are bytes as latin-1
            return str(environ.get(key, "")).encode("latin-1").decode("utf-8", "replace")

        size = str(environ.get("CONTENT_LENGTH") or "0")
        length = int(size) if size.isdigit() else 0
        body = environ["wsgi.input"].read(min(length, MAX_BODY + 1)) if length > 0 else b""
        headers = {}
        for name in HEADERS:
            key = name.upper().replace("-", "_")
            value = environ.get(key if key == "CONTENT_TYPE" else "HTTP_" + key)
            if value is not None:
                headers[name] = str(value)
        request = Request(
            str(environ.get("REQUEST_METHOD", "GET")),
            text("PATH_INFO"),
            parse_qs(str(environ.get("QUERY_STRING", ""))),
            headers,
            body,
            environ.get("REMOTE_ADDR"),
            root=text("SCRIPT_NAME"),
            user=_user(self._user, environ),
        )
        answer = self._app.handle(request)
        start_response(_status_line(answer.status), _headers(answer))
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else answer.body]


def django_view(app: WebApp, user: UserHook | None = None) -> Callable[..., Any]:
    """A Django view over a `WebApp`, for ``re_path(r"^(?P<rest>.*)$", view)`` in an include.

    The part of the path before ``rest`` is the root. Django's own ``Host`` check
    (``ALLOWED_HOSTS``) runs first; Django's CSRF middleware is told to leave the view
    alone, since the pages carry their own form tokens and check the ``Origin``.
    """

    def view(request: Any, rest: str = "") -> Any:
        from django.http import HttpResponse  # type: ignore[import-untyped]

        host = request.get_host()  # raises DisallowedHost (400) unless ALLOWED_HOSTS has it
        full = request.path
        root = full[: len(full) - len(rest)].rstrip("/") if rest else full.rstrip("/")
        headers = {name: request.headers[name] for name in HEADERS if name in request.headers}
        headers["Host"] = host  # as Django sees it (SERVER_NAME without a Host header)
        query = {k: request.GET.getlist(k) for k in request.GET}
        body = request.body[: MAX_BODY + 1] if request.method == "POST" else b""
        asked = Request(
            request.method,
            "/" + rest,
            query,
            headers,
            body,
            request.META.get("REMOTE_ADDR"),
            root=root,
            user=_user(user, request),
        )
        answer = app.handle(asked)
        response = HttpResponse(answer.body, status=answer.status, content_type=answer.content_type)
        for k, v in answer.headers.items():
            if k == "Set-Cookie":  # where Django (and its test client) keeps cookies
                response.cookies.load(v)
            else:
                response[k] = v
        return response

    view.csrf_exempt = True  # type: ignore[attr-defined]
    return view
