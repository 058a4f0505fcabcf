"""The status pages and the control API, mounted in your own web app (ASGI, WSGI or Django).

The same pages, buttons and JSON API that ``tickwork run --http`` serves, over the jobs
of a store your app already uses, under a path of your choosing::

    from tickwork import web

    app.mount("/ops/tickwork", web.asgi_app(scheduler, tokens={"ana": SECRET}))  # FastAPI
    app.wsgi_app = DispatcherMiddleware(                                          # Flask
        app.wsgi_app, {"/ops/tickwork": web.wsgi_app(store, user=who_is_signed_in)}
    )
    path("ops/tickwork/", include(web.django_urls(store, user=django_user)))      # Django

Who may read and act: tickwork's named ``tokens`` (a bearer header for programs,
``/login`` and a session for people), or your app's own login through ``user``, a
function given your framework's request (ASGI: the scope; WSGI: the environ; Django:
the ``HttpRequest``) that returns the signed-in user's name or ``None``; or both. The
name is recorded as who acted. With neither, reading is open and nobody may act.
``user`` acts through the pages only: their forms carry a form token bound to that
name and must come from the page's own origin; the JSON API acts only for a bearer
token. No framework is imported here: the apps are plain ASGI 3 and WSGI callables.
See docs/observability.md, "Mounted in your app".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, Unpack

from tickwork._daemon.web.api import Api
from tickwork._daemon.web.gateways import ASGIApp, WSGIApp, django_view
from tickwork._daemon.web.httpauth import Tokens
from tickwork._daemon.web.webapp import ANY_HOST, WebApp
from tickwork.stores import Store

__all__ = [
    "ASGIApp",
    "MountOptions",
    "WSGIApp",
    "WebOptions",
    "asgi_app",
    "django_urls",
    "wsgi_app",
]

_HINT = 'give host_names=[NAME] to tickwork.web (or ["*"] if the app checks Host itself)'


class MountOptions(TypedDict, total=False):
    """The keywords every mounted app takes (all optional); `django_urls` takes these.

    Attributes:
        tokens: Named tokens, ``{name: secret}``: who may read and act (the name is
            recorded as who acted). ``None`` (the default) and no ``user``: reading
            open, acting off.
        user: Your app's own login: given your framework's request (ASGI: the scope,
            with what your middleware put in it, such as ``scope["user"]``; WSGI: the
            environ; Django: the ``HttpRequest``), the signed-in user's name or ``None``.
        title: What the pages are about (default ``"tickwork"``).
        namespace: Only a daemon's jobs (``namespace/name``), by name; ``None`` (the
            default): every job of the store, by its id.
        refresh: Seconds between the pages' live refreshes (default 10; at least 1).

    """

    tokens: Mapping[str, str] | None
    user: Callable[[Any], str | None] | None
    title: str
    namespace: str | None
    refresh: int


class WebOptions(MountOptions, total=False):
    """The keywords of `asgi_app` and `wsgi_app`: `MountOptions` and these.

    Attributes:
        prefix: A path a proxy adds in front of the app's own mount point (the
            ``root_path``), when it does not say so in ``X-Forwarded-Prefix``
            (default ``""``).
        host_names: Names the ``Host`` header may give besides IP addresses and
            ``localhost`` (DNS rebinding); ``["*"]``: any (the app checks it). Default:
            none.

    """

    prefix: str
    host_names: Iterable[str]


def _later(find: Callable[[], Any]) -> Callable[[], Store | None]:
    """The store of what ``find`` returns at each request (``None``: not open yet)."""

    def store() -> Store | None:
        found = find()
        found = getattr(found, "store", found)
        if found is not None and not isinstance(found, Store):
            raise TypeError(f"the jobs function must return a store or a scheduler, got {found!r}")
        return found

    return store


def _known(caller: str, options: Mapping[str, Any], allowed: Any) -> None:
    """Refuse a keyword ``caller`` does not take (a `TypedDict` is not checked at run time)."""
    unknown = sorted(set(options) - allowed.__required_keys__ - allowed.__optional_keys__)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")


def _web_app(jobs: Any, options: WebOptions) -> WebApp:
    """The app of the pages and the API over the store of ``jobs``, ``options`` checked."""
    store: Any = getattr(jobs, "store", jobs)
    if not isinstance(store, Store) and callable(store):
        store = _later(store)
    elif not isinstance(store, Store):
        raise TypeError(
            "jobs must be a store, a scheduler with a store (DurableScheduler,"
            f" AsyncDurableScheduler) or a function returning one, got {jobs!r}"
        )
    tokens, user = options.get("tokens"), options.get("user")
    title = options.get("title", "tickwork")
    if tokens is not None and not isinstance(tokens, Mapping):
        raise TypeError(f"tokens must be a mapping of names to secrets, got {tokens!r}")
    if user is not None and not callable(user):
        raise TypeError(f"user must be a function of the request or None, got {user!r}")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {title!r}")
    refresh = options.get("refresh", 10)
    if isinstance(refresh, bool) or not isinstance(refresh, int) or refresh < 1:
        raise ValueError(f"refresh must be a whole number of seconds >= 1, got {refresh!r}")
    keys = Tokens(tokens.items()) if tokens else None
    users = user is not None
    api = Api(store, options.get("namespace"), title, keys, users=users, refresh=refresh)
    host_names = options.get("host_names", ())
    names = [host_names] if isinstance(host_names, str) else list(host_names)
    return WebApp(api, host_names=names, prefix=options.get("prefix", ""), host_hint=_HINT)


def asgi_app(jobs: Any, **options: Unpack[WebOptions]) -> ASGIApp:
    """An ASGI 3 app of the pages and the control API, to mount under any path.

    Args:
        jobs: The store the jobs live in, or a `tickwork.DurableScheduler` or
            `tickwork.AsyncDurableScheduler` (its store), or a function that returns
            one at each request (``None`` while it is not open: 503), for an app that
            opens its store later (``lambda: app.state.scheduler`` in a lifespan).
        **options: `WebOptions`: ``tokens``, ``user`` (given the ASGI scope),
            ``title``, ``namespace``, ``prefix``, ``host_names``.

    Raises:
        TypeError: ``jobs`` has no store, an option is unknown or of the wrong type.
        ValueError: Tokens with a name or secret twice, or a bad ``prefix``.

    """
    _known("asgi_app", options, WebOptions)
    return ASGIApp(_web_app(jobs, options), options.get("user"))


def wsgi_app(jobs: Any, **options: Unpack[WebOptions]) -> WSGIApp:
    """A WSGI app of the pages and the control API; its mount point is ``SCRIPT_NAME``.

    As `asgi_app` (the same `WebOptions`), with ``user`` given the WSGI environ. Inside
    a Flask view (``return app`` answers with it), the view's request context is live,
    so ``user`` may read ``flask.session`` or ``flask_login.current_user``; give
    ``prefix`` the view's path then, as the environ's ``SCRIPT_NAME`` does not have it.

    Raises:
        TypeError: As `asgi_app`.
        ValueError: As `asgi_app`.

    """
    _known("wsgi_app", options, WebOptions)
    return WSGIApp(_web_app(jobs, options), options.get("user"))


def django_urls(jobs: Any, **options: Unpack[MountOptions]) -> list[Any]:
    """Django URL patterns of the pages and the API: ``path("ops/", include(django_urls(...)))``.

    As `asgi_app`, with `MountOptions` (``user`` given the ``HttpRequest``:
    ``request.user``). Django checks the ``Host`` (``ALLOWED_HOSTS``); the pages carry
    their own form tokens, so Django's CSRF middleware leaves the view alone.

    Raises:
        TypeError: As `asgi_app`.
        ValueError: As `asgi_app`.

    """
    from django.urls import re_path  # type: ignore[import-untyped]

    _known("django_urls", options, MountOptions)
    app = _web_app(jobs, WebOptions(**options, prefix="", host_names=[ANY_HOST]))
    return [re_path(r"^(?P<rest>.*)$", django_view(app, options.get("user")))]
