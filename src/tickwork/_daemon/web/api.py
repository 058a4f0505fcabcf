"""Control over HTTP: the JSON API and the pages' actions, as the `WebApp` serves them.

`Api` answers every path but ``/metrics`` and the probes, for ``tickwork run --http``
and for an app that mounts the pages (`tickwork.web`): the status page and a page per
job (`tickwork._daemon.web.job_page`), ``/login``, the JSON API under ``/api/`` (described
by ``/api/openapi.json``, `tickwork._daemon.web.openapi`), and the forms the pages post.
Every link, form and redirect starts with the request's ``root``. An action runs
through `tickwork._daemon.actions`, as the ``tickwork`` verbs do, so it refuses what
they refuse with their words; it is recorded with the name of the token that asked
(`tickwork._daemon.web.httpauth`), or the name the app's own login gave.

One-offs: ``POST /api/enqueue`` adds one (201; 200 when its key was pending), ``DELETE
/api/enqueue/<id or key>`` cancels one, ``GET /api/oneoffs`` counts them per function
(`tickwork._daemon.oneoffs`, shared with ``tickwork enqueue``).

Status codes: 400 a bad request (the message says which field and why), 401 no or a
wrong token, 403 a cross-site request, a bad form token, or control off (no token
configured), 404 no such job, pending one-off or path, 405 a method the path does not
take (``OPTIONS`` answers 204 with the same ``Allow``), 409 the job's state refuses (a
paused job's backfill, no such waiting run), 413 a body too large, 415 a body neither
JSON nor a form, 429 too many wrong tokens from the client, 503 the store cannot be
used now.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlencode

from tickwork._core.text import iso_due
from tickwork._daemon.actions import (
    CONFIRM_ABOVE,
    Done,
    Refused,
    backfill,
    cancel_waiting,
    named,
    pause,
    resume,
    skip_next,
    trigger,
    waiting_why,
)
from tickwork._daemon.oneoffs import answer, counts, enqueue
from tickwork._daemon.oneoffs import cancel as cancel_oneoff
from tickwork._daemon.web.httpauth import (
    COOKIE,
    SESSION_LIFE,
    Signer,
    Throttled,
    Tokens,
    cross_site,
)
from tickwork._daemon.web.job_page import (
    HistoryQuery,
    Refusal,
    Viewer,
    confirm_page,
    controls,
    job_page,
    login_page,
    message_page,
)
from tickwork._daemon.web.joblist import (
    history_item,
    merged_history,
    newest_due,
    read_jobs,
    state_row,
)
from tickwork._daemon.web.oneoff_page import oneoff_page
from tickwork._daemon.web.status_page import said_box
from tickwork._daemon.when import parse_future, parse_since, parse_time
from tickwork._durable.control import BackfillError
from tickwork.stores import (
    OUTCOMES,
    JobNotFoundError,
    JobPausedError,
    RuntimeControl,
    SlotLedger,
    StoreError,
)
from tickwork.stores.contract import JobQuery, JobsPage

__all__ = ["ACTIONS", "ASK_ABOVE", "Api", "BadRequest", "Request", "Response"]

#: Each action and the fields its request may carry.
ACTIONS: Final[Mapping[str, frozenset[str]]] = {
    "pause": frozenset({"note", "until"}),
    "resume": frozenset({"note"}),
    "trigger": frozenset({"note"}),
    "skip-next": frozenset({"note"}),
    "backfill": frozenset({"note", "from", "to", "dry_run", "max", "yes"}),
    "cancel": frozenset({"note", "slot", "all_waiting"}),
}
#: A page's backfill of more runs than this asks first (a confirmation step).
ASK_ABOVE: Final = 100
#: Jobs on a page of ``/api/jobs`` unless ``limit`` says otherwise, and the most it may say.
LISTED: Final = 100
MOST_LISTED: Final = 1000
#: Largest request body read (bytes).
MAX_BODY: Final = 65536
_JSON: Final = "application/json"
_FORM: Final = "application/x-www-form-urlencoded"
#: The fields a form sends as checkboxes (``on`` or absent) or hidden ``true``.
_FORM_BOOLS: Final = frozenset({"dry_run", "yes", "all_waiting"})
_HTML: Final = "text/html; charset=utf-8"
#: What ``/api/jobs/NAME/...`` reads besides the job itself.
_VIEWS: Final = frozenset({"history", "waiting"})


class BadRequest(Exception):
    """A request refused: ``status`` and the message that says why."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request, as `tickwork._daemon.web.http` read it."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes = b""
    client: str | None = None
    """The client's address, for `tickwork._daemon.web.httpauth.Tokens`' throttle."""
    root: str = ""
    """The path the pages are served under (``""``: the server's root); ``path`` is
    what follows it. Every link, form and redirect begins with it."""
    user: str | None = None
    """Who the application's own login says asks (`tickwork._daemon.web.webapp.WebApp`'s
    ``user`` hook), or ``None``."""

    def cookies(self) -> dict[str, str]:
        """The request's cookies by name."""
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie") or "")
        except Exception:  # a malformed header: no cookies
            return {}
        return {k: m.value for k, m in jar.items()}

    def html(self) -> bool:
        """Whether the path is a page's (HTML answers) rather than the JSON API's."""
        return not self.path.startswith("/api/")


@dataclass(slots=True)
class Response:
    """What to answer: status, body, content type, extra headers."""

    status: int
    body: bytes
    content_type: str = _JSON
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, data: Any, headers: dict[str, str] | None = None) -> Response:
    body = (json.dumps(data, indent=2) + "\n").encode()
    return Response(status, body, _JSON, headers or {})


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise BadRequest(400, f"{name} must be true or false, got {value!r}")


def _form_fields(text: str) -> dict[str, Any]:
    """An HTML form's fields, its checkboxes as booleans and ``max`` as a number.

    A form can only send text; a JSON body must send ``true`` and ``5``, not ``"yes"``
    and ``"5"``.
    """
    fields: dict[str, Any] = {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}
    for name in _FORM_BOOLS & fields.keys():
        value = fields[name].lower()
        if value not in ("on", "true", "off", "false", ""):
            raise BadRequest(400, f"{name} must be on or off, got {fields[name]!r}")
        fields[name] = value in ("on", "true")
    most = fields.get("max")
    if most is not None:
        fields["max"] = int(most) if most.strip().isdigit() else most or None
    return fields


def _time_field(fields: Mapping[str, Any], name: str, parse: Callable[[str], float]) -> float:
    value = fields[name]
    if not isinstance(value, str):
        raise BadRequest(400, f"{name} must be a str (a time as the CLI takes it), got {value!r}")
    try:
        return parse(value)
    except argparse.ArgumentTypeError as exc:
        raise BadRequest(400, f"{name} {exc}") from None


def _note(fields: Mapping[str, Any]) -> str | None:
    note = fields.get("note")
    if note is not None and not isinstance(note, str):
        raise BadRequest(400, f"note must be a str or null, got {note!r}")
    return note or None


class Api:
    """The pages, the JSON API and the actions of the jobs of one store.

    Args:
        store: The store the jobs live in: it is read, and it carries the actions out;
            or a function that returns it, asked at each request (an app that opens
            its store after the app is made, in a lifespan or a worker's start).
        namespace: A daemon's namespace: its jobs are ``namespace/name``, shown by name;
            ``None``: every job of the store, by its id.
        title: What the pages are about (the jobs file, the application).
        tokens: Who may act (and, when set, read); ``None`` and no ``users``: reading
            is open, acting off.
        users: Whether the application's own login may say who asks (`Request.user`):
            then a page's reader is who it says, and acts through the pages' forms.
        configured: The daemon's jobs file entry of a job by its name, or ``None``
            (its command, time limit and retries, shown on the job's page).
        refresh: Seconds between the pages' live refreshes.

    """

    def __init__(
        self,
        store: Any,
        namespace: str | None,
        title: str,
        tokens: Tokens | None,
        *,
        users: bool = False,
        configured: Callable[[str], Any] | None = None,
        refresh: int = 10,
    ) -> None:
        self._source = store
        self._refresh = refresh
        self._configured = configured
        self._namespace = namespace
        self._prefix = "" if namespace is None else namespace + "/"
        self._title = title
        self._tokens = tokens
        self._users = users
        self._signer = Signer()

    @property
    def _store(self) -> Any:
        from tickwork.stores import Store

        source = self._source
        store = source if isinstance(source, Store) or not callable(source) else source()
        if store is None:
            raise StoreError("the jobs' store is not open (yet) in this process")
        return store

    # -- who asks --------------------------------------------------------------------

    def reader(self, request: Request) -> tuple[str | None, bool]:
        """Who reads: the app's user or the token's name; ``""``: reading is open; ``None``: no.

        And whether a page's ``?token=`` said so (then a read-only session is started,
        so that the page's links work).
        """
        if request.user is not None:
            return request.user, False
        if self._tokens is None:
            return (None if self._users else ""), False
        who = self._tokens.bearer(request.headers.get("Authorization"), request.client)
        if who is not None or not request.html():
            return who, False
        who = self._tokens.from_cookie(request.cookies(), write=False)
        given = request.query.get("token", [""])[0]
        if who is None and given:
            return self._tokens.by_secret(given, request.client), True
        return who, False

    def _writer(self, request: Request, fields: Mapping[str, Any]) -> str:
        """Who acts (the token's name), or `BadRequest` (401, 403)."""
        if self._tokens is None and not self._users:
            raise BadRequest(
                403,
                "control over HTTP is off: start `tickwork run` with --http-token NAME=SECRET"
                " or --http-token-file FILE (a mounted app: tokens= or user=)",
            )
        why = cross_site(request.headers)
        if why is not None:
            raise BadRequest(403, why)
        if not request.html():  # never a cookie or the app's login: no forged form acts
            tokens = self._tokens
            who = None
            if tokens is not None:
                who = tokens.bearer(request.headers.get("Authorization"), request.client)
            if who is None:
                raise _unauthorized("a bearer token is needed: Authorization: Bearer SECRET")
            return who
        who = self._page_user(request)
        if who is None:
            where = "log in first (" + request.root + "/login)"
            raise _unauthorized(where if self._tokens is not None else "log in to the app first")
        form = fields.get("csrf")
        if not isinstance(form, str) or not self._signer.form_token_ok(form, who):
            raise BadRequest(403, "the page's form token is missing or stale: reload the page")
        return who

    def _page_user(self, request: Request) -> str | None:
        """Who may act from a page: the app's login, else a token's session; or ``None``."""
        if request.user is not None:
            return request.user
        return None if self._tokens is None else self._tokens.from_cookie(request.cookies())

    # -- dispatch ----------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        """Answer one request (never raises for a bad request: it answers 4xx)."""
        try:
            return self._route(request)
        except Throttled as exc:
            wait = {"Retry-After": str(max(1, round(exc.retry_after)))}
            return self._refused(request, BadRequest(429, str(exc), wait))
        except BadRequest as exc:
            return self._refused(request, exc)
        except StoreError as exc:
            return _json(503, {"error": f"the state cannot be used now: {exc}"})

    def _refused(self, request: Request, exc: BadRequest) -> Response:
        if request.html():
            page = message_page(self._title, exc.status, str(exc), root=request.root)
            return Response(exc.status, page.encode(), _HTML, exc.headers)
        return _json(exc.status, {"error": str(exc)}, exc.headers)

    def _route(self, request: Request) -> Response:
        parts = [p for p in request.path.split("/") if p]
        method = request.method
        allow = _allow(parts)
        if allow is None:
            raise BadRequest(404, f"not found: {request.path}")
        if method == "OPTIONS":
            return Response(204, b"", "text/plain", {"Allow": allow})
        if method not in allow.split(", "):
            takes = f": {parts[-1]} takes POST" if allow.startswith("POST") else ""
            raise BadRequest(405, f"{method} is not allowed here{takes}", {"Allow": allow})
        if parts == ["login"] or parts == ["logout"]:
            return self._login(request, parts[0])
        api = bool(parts) and parts[0] == "api"
        route = parts[1:] if api else parts
        if api and route[:1] == ["enqueue"]:
            return self._enqueue(request, route)
        if method == "POST":
            return self._post_action(request, "/".join(route[1:-1]), route[-1])
        if api and route == ["openapi.json"]:
            from tickwork._daemon.web.openapi import document

            return _json(200, document())
        who, by_link = self.reader(request)
        if who is None:
            if request.html():
                page = login_page(self._title, status=401, root=request.root, app=self._app_only)
                return Response(401, page.encode(), _HTML, _challenge())
            raise _unauthorized("a bearer token is needed: Authorization: Bearer SECRET")
        answer = self._get(request, route, api)
        if by_link and self._tokens is not None:  # the page's links then work too
            answer.headers["Set-Cookie"] = _cookie(request, self._tokens.login(who, write=False))
        return answer

    def _get(self, request: Request, route: list[str], api: bool) -> Response:
        if not api and not route:
            return Response(200, self._render_status(request).encode(), _HTML)
        if route == ["history"] and api:
            return _json(200, {"items": self._history(None, request.query)})
        if route == ["oneoffs"] and api:
            return _json(200, {"oneoffs": [asdict(c) for c in counts(self._store)]})
        if route == ["oneoffs"]:
            span = request.query.get("span", ["hour"])[0]
            page = oneoff_page(self._store, self._title, root=request.root, span=span)
            return Response(200, page.encode(), _HTML)
        if not route or route[0] != "jobs":
            raise BadRequest(404, f"not found: {request.path}")
        if len(route) == 1 and api:
            return _json(200, self._jobs(request.query, request.root))
        # A job's name may hold "/" (an app's job id): all of the rest, unless it ends in
        # a view of the API and is no job's name as a whole.
        name, view = "/".join(route[1:]), None
        viewed = api and route[-1] in _VIEWS and len(route) > 2
        if viewed and self._store.get(self._prefix + name) is None:
            name, view = "/".join(route[1:-1]), route[-1]
        job_id = self._job_id(name)
        if not api:
            return Response(200, self._render_job(request, name, job_id).encode(), _HTML)
        if view is None:
            return _json(200, self._row(job_id))
        if view == "history":
            return _json(200, {"items": self._history(job_id, request.query)})
        return _json(200, self._waiting(name, job_id))

    # -- reading -----------------------------------------------------------------------

    @property
    def _app_only(self) -> bool:
        """Whether only the application's own login says who asks (no tokens)."""
        return self._users and self._tokens is None

    def _job_id(self, name: str) -> str:
        job_id = self._prefix + name
        if not name or self._store.get(job_id) is None:
            raise BadRequest(
                404, named(JobNotFoundError(f"no job with id {job_id!r}"), job_id, name)
            )
        return job_id

    def _rows(self, query: JobQuery) -> tuple[list[dict[str, Any]], JobsPage]:
        import socket

        states, live, now, summaries, listed = read_jobs(self._store, self._namespace, query)
        host = socket.gethostname()
        rows = [state_row(s, now, host, live, summaries[s.id]) for s in states]
        return [{k: v for k, v in row.items() if not k.startswith("_")} for row in rows], listed

    def _jobs(self, query: Mapping[str, list[str]], root: str) -> dict[str, Any]:
        """``/api/jobs``: a page of the jobs, the counts, and the link to the next page."""
        asked = _listing(query, api=True)
        rows, listed = self._rows(asked)
        end = asked.offset + len(listed.jobs)
        after = None
        if end < listed.total:
            fields = {"q": asked.search, "state": asked.state, "limit": asked.limit, "offset": end}
            after = f"{root}/api/jobs?" + urlencode({k: v for k, v in fields.items() if v})
        return {
            "jobs": rows,
            "total": listed.total,
            "counts": dict(listed.counts),
            "offset": asked.offset,
            "limit": asked.limit,
            "next": after,
        }

    def _row(self, job_id: str) -> dict[str, Any]:
        rows, _ = self._rows(JobQuery(prefix=job_id, limit=None))  # and ids it begins
        for row in rows:
            if row["id"] == job_id:
                return row
        raise BadRequest(404, f"no job with id {job_id.removeprefix(self._prefix)!r}")

    def _history(self, job_id: str | None, query: Mapping[str, list[str]]) -> list[dict[str, Any]]:
        limit_text = query.get("limit", ["50"])[0]
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise BadRequest(400, f"limit must be an integer >= 1, got {limit_text!r}")
        limit = min(int(limit_text), 10_000)
        outcome = query.get("outcome", [None])[0]
        if outcome is not None and outcome not in OUTCOMES:
            raise BadRequest(400, f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        since = None
        if "since" in query:
            since = _time_field({"since": query["since"][0]}, "since", parse_since)
        store = self._store
        namespace = self._namespace if job_id is None else None  # None: every job
        entries = []
        if isinstance(store, SlotLedger):
            entries = newest_due(
                store, job_id, since=since, outcome=outcome, limit=limit, namespace=namespace
            )
        acts = []
        if outcome is None and isinstance(store, RuntimeControl):
            acts = store.actions(job_id, since=since, limit=limit)
            acts = [a for a in acts if a.job_id.startswith(self._prefix)]
        return [history_item(i) for i in merged_history(entries, acts, limit)]

    def _waiting(self, name: str, job_id: str) -> dict[str, Any]:
        state = self._store.get(job_id)
        waiting = () if state is None else state.waiting
        runs = [
            {"scheduled": iso_due(c.scheduled), "origin": c.origin, "why": waiting_why(c)}
            for c in waiting
        ]
        return {"job": name, "waiting": runs}

    def _render_status(self, request: Request) -> str:
        from tickwork._daemon.web.status_page import page

        viewer = self._viewer(request)
        return page(
            self._store,
            self._namespace,
            self._title,
            controls=lambda view: controls(view, viewer),
            banner=viewer.banner() + said_box(self._said(request)),
            listing=_listing(request.query, api=False),
            root=request.root,
            refresh=self._refresh,
        )

    def _render_job(
        self, request: Request, name: str, job_id: str, refused: Refusal | None = None
    ) -> str:
        said = self._said(request)
        viewer, span = self._viewer(request), request.query.get("span", ["day"])[0]
        asked = _history_query(request.query)
        job = None if self._configured is None else self._configured(name)
        return job_page(
            self._store, self._title, name, job_id, viewer, said, span, asked, job, refused,
            self._refresh,
        )  # fmt: skip

    def _said(self, request: Request) -> str:
        """What the action that led here did (``?said=``), if this process signed it."""
        said = request.query.get("said", [""])[0]
        mac = request.query.get("sig", [""])[0]
        return said if self._signer.signed(said, mac) else ""  # never a link's own text

    def _viewer(self, request: Request) -> Viewer:
        """Who looks at a page, and the form token its forms carry."""
        root = request.root
        if self._tokens is None and not self._users:
            return Viewer(None, None, control=False, root=root)
        who = self._page_user(request)
        token = None if who is None else self._signer.form_token(who)
        app = request.user is not None or self._app_only
        return Viewer(who, token, control=True, root=root, app_login=app)

    # -- acting ------------------------------------------------------------------------

    def _post_action(self, request: Request, name: str, action: str) -> Response:
        fields = _fields(request)
        who = self._writer(request, fields)
        job_id = self._job_id(name)
        known = ACTIONS[action] | ({"csrf", "back", "confirm"} if request.html() else set())
        unknown = sorted(set(fields) - known)
        if unknown:
            raise BadRequest(
                400,
                f"{action} takes the fields {', '.join(sorted(ACTIONS[action]))};"
                f" got an unknown field {unknown[0]!r}",
            )
        try:
            if request.html() and fields.get("confirm") != "1":
                question = self._ask_first(action, name, job_id, fields, who)
                if question is not None:
                    viewer = self._viewer(request)
                    page = confirm_page(self._title, name, action, question, fields, viewer)
                    return Response(200, page.encode(), _HTML)
            elif request.html() and action == "backfill":
                fields = dict(fields) | {"yes": True}  # confirmed: past max too
            done = self._act(action, name, job_id, fields, who)
        except BadRequest as exc:
            if not request.html() or exc.status not in (400, 409):
                raise
            # The page again, its form as typed and why: not a bare error page.
            refused = Refusal(action, str(exc), fields)
            page = self._render_job(request, name, job_id, refused)
            return Response(exc.status, page.encode(), _HTML)
        if not request.html():
            return _json(
                200,
                {"job": name, "action": action, "by": who, "message": "\n".join(done.lines)}
                | done.result,
            )
        root = request.root
        back = f"{root}/jobs/{quote(name)}" if fields.get("back") != "/" else f"{root}/"
        said = "; ".join(done.lines)
        query = urlencode({"said": said, "sig": self._signer.sign(said)})
        return Response(303, b"", _HTML, {"Location": f"{back}?{query}"})

    def _ask_first(
        self, action: str, name: str, job_id: str, fields: Mapping[str, Any], who: str
    ) -> str | None:
        """What a page's destructive action would do, to ask first; ``None``: just do it.

        Cancelling all waiting runs (when there are some), and a backfill (not a dry run)
        of more than `ASK_ABOVE` runs, counted with a dry run. Changes nothing.
        """
        if action == "cancel" and fields.get("all_waiting") is True:
            state = self._store.get(job_id)
            n = 0 if state is None else state.waiting_runs
            return f"cancel all {n:,} waiting runs of {name}?" if n else None
        if action != "backfill" or fields.get("dry_run") is True:
            return None
        dry = self._act(action, name, job_id, dict(fields) | {"dry_run": True, "yes": True}, who)
        n = dry.result["queued"]
        if n <= ASK_ABOVE:
            return None
        first, last = dry.result["first"], dry.result["last"]
        return f"queue {n:,} runs of {name}, due {first} to {last}?"

    def _enqueue(self, request: Request, route: list[str]) -> Response:
        """``POST /api/enqueue``: 201 and the id (200 when its key was pending already).

        ``DELETE /api/enqueue/<id or key>``: cancel that pending one-off (404: none).
        The function is not imported here (`tickwork._daemon.oneoffs`).
        """
        fields = _fields(request) if request.method == "POST" else {}
        who = self._writer(request, fields)
        now = time.time()
        try:
            if request.method == "DELETE":
                ref = "/".join(route[1:])  # the path comes unquoted
                job_id = cancel_oneoff(self._store, ref, now=now, by=who)
                if job_id is None:
                    raise BadRequest(
                        404,
                        f"no one-off {ref!r} is pending (it ended, never was, or a node is"
                        " running it)",
                    )
                return _json(200, {"id": job_id, "cancelled": True, "by": who})
            done = enqueue(self._store, fields, now=now)
        except (ValueError, TypeError) as exc:  # EnqueueError, JobSpecError among them
            raise BadRequest(400, str(exc)) from None
        return _json(201 if done.created else 200, answer(done) | {"by": who})

    def _act(
        self, action: str, name: str, job_id: str, fields: Mapping[str, Any], who: str
    ) -> Done:
        note = _note(fields)
        store = self._store
        try:
            if action == "pause":
                until = (
                    None if not fields.get("until") else _time_field(fields, "until", parse_future)
                )
                return pause(store, job_id, name, by=who, note=note, until=until)
            if action == "resume":
                return resume(store, job_id, name, by=who, note=note)
            if action == "trigger":
                return trigger(store, job_id, name, by=who, note=note)
            if action == "skip-next":
                return skip_next(store, job_id, name, by=who, note=note)
            if action == "backfill":
                return self._backfill(name, job_id, fields, who, note)
            return self._cancel(name, job_id, fields, who, note)
        except (JobNotFoundError, JobPausedError) as exc:
            status = 404 if isinstance(exc, JobNotFoundError) else 409
            raise BadRequest(status, named(exc, job_id, name)) from None
        except Refused as exc:
            raise BadRequest(400 if exc.status == 2 else 409, str(exc)) from None
        except (BackfillError, ValueError, TypeError) as exc:
            raise BadRequest(400, named(exc, job_id, name)) from None

    def _backfill(
        self, name: str, job_id: str, fields: Mapping[str, Any], who: str, note: str | None
    ) -> Done:
        for needed in ("from", "to"):
            if not fields.get(needed):
                raise BadRequest(
                    400, f"backfill needs the field {needed!r} (a time, as --{needed} takes it)"
                )
        start = _time_field(fields, "from", parse_time)
        end = _time_field(fields, "to", parse_time)
        most = fields.get("max")
        most = CONFIRM_ABOVE if most is None else most
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise BadRequest(400, f"max must be an integer >= 1, got {most!r}")
        dry = _bool(fields.get("dry_run", False), "dry_run")
        yes = _bool(fields.get("yes", False), "yes")
        return backfill(
            self._store,
            job_id,
            name,
            start,
            end,
            by=who,
            note=note,
            dry_run=dry,
            most=None if yes else most,
        )

    def _cancel(
        self, name: str, job_id: str, fields: Mapping[str, Any], who: str, note: str | None
    ) -> Done:
        every = _bool(fields.get("all_waiting", False), "all_waiting")
        slot_text = fields.get("slot")
        if every == bool(slot_text):
            raise BadRequest(
                400,
                "cancel needs exactly one of all_waiting (true) and slot (a time),"
                " as --all-waiting and --slot",
            )
        slot = None if every else _time_field(fields, "slot", parse_since)
        return cancel_waiting(self._store, job_id, name, slot=slot, by=who, note=note)

    # -- logging in --------------------------------------------------------------------

    def _login(self, request: Request, which: str) -> Response:
        root = request.root
        if request.method in ("GET", "HEAD"):
            page = login_page(self._title, root=root, app=self._app_only)
            return Response(200, page.encode(), _HTML)
        why = cross_site(request.headers)
        if why is not None:
            raise BadRequest(403, why)
        if which == "logout":
            if self._tokens is not None:
                self._tokens.logout(request.cookies())
            gone = _cookie(request, "", 0)
            return Response(303, b"", _HTML, {"Location": f"{root}/login", "Set-Cookie": gone})
        fields = _fields(request)
        given = fields.get("token")
        who = (
            None
            if self._tokens is None or not isinstance(given, str)
            else self._tokens.by_secret(given.strip(), request.client)
        )
        if self._tokens is None or who is None:
            wrong = self._tokens is not None
            page = login_page(self._title, status=401, wrong=wrong, root=root, app=self._app_only)
            return Response(401, page.encode(), _HTML)
        cookie = _cookie(request, self._tokens.login(who))
        return Response(303, b"", _HTML, {"Location": f"{root}/", "Set-Cookie": cookie})


def _cookie(request: Request, value: str, life: int = SESSION_LIFE) -> str:
    """The session cookie's header; ``Secure`` when the request came over HTTPS.

    The daemon serves plain HTTP, so HTTPS means a TLS proxy's ``X-Forwarded-Proto``.
    Believing it costs nothing: a client that lies only loses its own cookie over HTTP.
    """
    proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    secure = "; Secure" if proto == "https" else ""
    path = request.root or "/"  # the session is the pages', not the rest of an app's
    return f"{COOKIE}={value}; Path={path}; Max-Age={life}; HttpOnly; SameSite=Strict{secure}"


def _challenge() -> dict[str, str]:
    return {"WWW-Authenticate": 'Bearer realm="tickwork"'}


def _unauthorized(message: str) -> BadRequest:
    return BadRequest(401, message, _challenge())


def _listing(query: Mapping[str, list[str]], *, api: bool) -> JobQuery:
    """The listing a query asks for: ``q``, ``state``, and the page.

    The API's ``limit`` (up to `MOST_LISTED`) and ``offset``, or the status page's
    ``page`` (of `PER_PAGE` jobs each, from 1).
    """
    from tickwork._daemon.web.status_page import PER_PAGE

    def number(name: str, default: int, least: int) -> int:
        text = query.get(name, [str(default)])[-1].strip()
        if not text.isdigit() or int(text) < least:
            raise BadRequest(400, f"{name} must be an integer >= {least}, got {text!r}")
        return int(text)

    search = query.get("q", [""])[-1].strip()
    state = query.get("state", [""])[-1].strip() or None
    if api:
        limit = min(number("limit", LISTED, 1), MOST_LISTED)
        offset = number("offset", 0, 0)
    else:
        limit, offset = PER_PAGE, (min(number("page", 1, 1), 10**9) - 1) * PER_PAGE
    try:
        return JobQuery(search=search, state=state, offset=offset, limit=limit)
    except ValueError as exc:
        raise BadRequest(400, str(exc)) from None


def _history_query(query: Mapping[str, list[str]]) -> HistoryQuery:
    """The ledger page a job's page asks for: ``outcome``, ``since``, ``before`` or ``after``.

    ``before`` and ``after`` are ledger seqs (paging back and forward); one at most.
    """
    outcome = query.get("outcome", [""])[-1].strip() or None
    if outcome is not None and outcome not in OUTCOMES:
        raise BadRequest(400, f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    since_text = query.get("since", [""])[-1].strip()
    since = None if not since_text else _time_field({"since": since_text}, "since", parse_since)
    before, after = _seq(query, "before"), _seq(query, "after")
    if before is not None and after is not None:
        raise BadRequest(
            400, f"give before or after (a page's cursor), not both; got {before} and {after}"
        )
    return HistoryQuery(outcome, since, since_text, before, after)


def _seq(query: Mapping[str, list[str]], name: str) -> int | None:
    """The ledger seq a query gives as ``name`` (``None``: not given)."""
    text = query.get(name, [""])[-1].strip()
    if text and not (text.isdigit() and len(text) < 19):
        raise BadRequest(400, f"{name} must be a ledger seq (an integer >= 0), got {text!r}")
    return int(text) if text else None


def _allow(parts: list[str]) -> str | None:
    """The methods a path takes (its ``Allow``), or ``None``: no such path."""
    if parts in (["login"], ["logout"]):
        return "GET, HEAD, POST, OPTIONS" if parts == ["login"] else "POST, OPTIONS"
    route = parts[1:] if parts and parts[0] == "api" else parts
    if len(route) >= 3 and route[0] == "jobs" and route[-1] in ACTIONS:
        return "POST, OPTIONS"
    if parts[:2] == ["api", "enqueue"]:  # a key may hold "/": all of the rest
        return "POST, OPTIONS" if len(parts) == 2 else "DELETE, OPTIONS"
    if route == ["oneoffs"]:
        return "GET, HEAD, OPTIONS"
    if (
        not parts
        or route in (["jobs"], ["history"], ["openapi.json"])
        or (len(route) >= 2 and route[0] == "jobs")
    ):
        return "GET, HEAD, OPTIONS"
    return None


def _fields(request: Request) -> dict[str, Any]:
    """The request body's fields: a JSON object, or an HTML form's (urlencoded)."""
    if len(request.body) > MAX_BODY:
        raise BadRequest(413, f"the request body must be at most {MAX_BODY} bytes")
    ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    text = request.body.decode("utf-8", errors="replace")
    if ctype == _FORM:
        return _form_fields(text)
    if not text.strip():
        return {}
    if ctype not in (_JSON, ""):
        raise BadRequest(415, f"the body must be JSON ({_JSON}) or a form ({_FORM}), got {ctype!r}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadRequest(400, f"the body must be a JSON object: {exc}") from None
    except RecursionError:
        raise BadRequest(400, "the body must be a JSON object: it is nested too deep") from None
    if not isinstance(data, dict):
        raise BadRequest(400, f"the body must be a JSON object, got {type(data).__name__}")
    return data
