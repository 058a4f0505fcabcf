"""Who may act over HTTP: named tokens, browser sessions, and the cross-site checks.

``tickwork run --http`` takes tokens as ``NAME=SECRET`` (``--http-token``, repeatable)
or from a file of such lines (``--http-token-file``). A program sends ``Authorization:
Bearer SECRET``; a browser logs in once at ``/login`` and then carries a session cookie:
a random id, new at each login, that ends at logout, after `SESSION_LIFE` seconds, or
when the process ends (sessions are kept in memory only). Every secret is compared in
constant time, the name of the token that matched is who acted, as the state records
it, and a client that gives `FAILURES_ALLOWED` wrong secrets within `FAILURE_WINDOW`
seconds is refused (`Throttled`) until the oldest of them ages out.

A write from a browser must come from the page itself: `cross_site` refuses a request
whose ``Sec-Fetch-Site``, ``Origin`` or ``Referer`` names another site, and each page
carries its own form token (`Signer.form_token`), bound to the session's name and good
for `FORM_TOKEN_LIFE` seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "COOKIE",
    "FAILURES_ALLOWED",
    "FAILURE_WINDOW",
    "FORM_TOKEN_LIFE",
    "MAX_SESSIONS",
    "SESSION_LIFE",
    "UNNAMED",
    "Signer",
    "Throttled",
    "Tokens",
    "cross_site",
    "load_tokens",
    "parse_token",
    "read_token_file",
]

#: The session cookie's name.
COOKIE: Final = "tickwork_session"
#: Seconds a page's form token stays good.
FORM_TOKEN_LIFE: Final = 12 * 3600
#: Seconds a browser session lasts from its login.
SESSION_LIFE: Final = 12 * 3600
#: Sessions kept at once: a login past it ends the oldest.
MAX_SESSIONS: Final = 10_000
#: Wrong secrets a client may give within `FAILURE_WINDOW` seconds before it waits.
FAILURES_ALLOWED: Final = 10
#: Seconds a wrong secret counts against its client.
FAILURE_WINDOW: Final = 60.0
#: Clients whose wrong secrets are remembered at once: past it, the oldest are forgotten.
_CLIENTS: Final = 10_000
#: The name of a token given without one (``--http-token SECRET``, ``TICKWORK_HTTP_TOKEN``).
UNNAMED: Final = "http-token"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")


def parse_token(text: str, *, where: str = "--http-token") -> tuple[str, str]:
    """``NAME=SECRET`` as ``(name, secret)``; a secret alone is named `UNNAMED`.

    A text with no valid name before its first ``=``, or nothing but ``=`` after it
    (base64's padding), is a secret alone.

    Raises:
        ValueError: An empty secret, or one with spaces or control characters.

    """
    if not isinstance(text, str):
        raise TypeError(f"{where} must be a str, got {text!r}")
    name, sep, secret = text.partition("=")
    if not sep or not _NAME.fullmatch(name) or not secret.strip("="):  # base64's padding
        name, secret = UNNAMED, text
    if not secret or any(c.isspace() or ord(c) < 32 for c in secret):
        shown = f"{name}=..." if name != UNNAMED else "..."
        raise ValueError(
            f"{where} must be NAME=SECRET (NAME: letters, digits, _.@+-; SECRET: no spaces),"
            f" got {shown!r} with {'an empty' if not secret else 'a spaced'} secret"
        )
    return name, secret


def read_token_file(path: str) -> list[tuple[str, str]]:
    """The tokens of a file: one ``NAME=SECRET`` a line; blank lines and ``#`` comments skipped.

    Raises:
        ValueError: The file cannot be read, others (neither its owner nor its group)
            may read it, or a line has no name or no secret; the message names the file
            and line.

    """
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--http-token-file {path}: cannot read it: {exc}") from None
    if mode & stat.S_IRWXO:
        raise ValueError(
            f"--http-token-file {path}: others may read it (mode {stat.S_IMODE(mode):o});"
            f" chmod o= {path}"
        )
    tokens: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"--http-token-file {path}:{number}"
        name, secret = parse_token(line, where=where)
        if name == UNNAMED:
            raise ValueError(f"{where}: must be NAME=SECRET, the line has no name")
        tokens.append((name, secret))
    if not tokens:
        raise ValueError(f"--http-token-file {path}: holds no NAME=SECRET line")
    return tokens


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


class Throttled(Exception):
    """A client gave too many wrong secrets: it may try again in ``retry_after`` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(
            f"too many wrong tokens from this client: try again in {retry_after:.0f} s"
        )
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class _Session:
    name: str
    ends: float
    write: bool


class Tokens:
    """The named tokens of one server, and the sessions and form tokens made from them.

    Args:
        tokens: ``(name, secret)`` pairs; names and secrets must each be unique.

    Raises:
        ValueError: No token, or a name or secret given twice.

    """

    def __init__(self, tokens: Iterable[tuple[str, str]]) -> None:
        pairs = list(tokens)
        if not pairs:
            raise ValueError("tokens must hold at least one (name, secret) pair")
        names = [n for n, _ in pairs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"token names must be unique, got {twice[0]!r} twice")
        if len({s for _, s in pairs}) != len(pairs):
            raise ValueError("token secrets must be unique: two names share one secret")
        self._secrets = {name: secret.encode() for name, secret in pairs}
        self._lock = threading.Lock()  # the server answers on many threads
        self._sessions: dict[str, _Session] = {}  # by id, oldest first
        self._failures: dict[str, deque[float]] = {}  # by client, oldest first

    @property
    def names(self) -> list[str]:
        """The tokens' names, sorted."""
        return sorted(self._secrets)

    def by_secret(
        self, given: str, client: str | None = None, now: float | None = None
    ) -> str | None:
        """The name of the token whose secret is ``given``; every secret is compared.

        With ``client`` (its address), a wrong secret counts against it.

        Raises:
            Throttled: ``client`` gave `FAILURES_ALLOWED` wrong secrets in the last
                `FAILURE_WINDOW` seconds (then even a right one is not checked).

        """
        at = time.time() if now is None else now
        if client is not None:
            self._throttle(client, at)
        found = None
        raw = given.encode()
        for name, secret in self._secrets.items():
            if hmac.compare_digest(raw, secret):
                found = name
        if found is None and client is not None:
            with self._lock:
                self._failures.setdefault(client, deque()).append(at)
                if len(self._failures) > _CLIENTS:
                    del self._failures[next(iter(self._failures))]
        return found

    def _throttle(self, client: str, now: float) -> None:
        with self._lock:
            times = self._failures.get(client)
            while times and times[0] <= now - FAILURE_WINDOW:
                times.popleft()
            if times is not None and not times:
                del self._failures[client]
            elif times is not None and len(times) >= FAILURES_ALLOWED:
                raise Throttled(times[0] + FAILURE_WINDOW - now)

    def bearer(
        self, header: str | None, client: str | None = None, now: float | None = None
    ) -> str | None:
        """The token named by an ``Authorization: Bearer SECRET`` header, or ``None``.

        Raises:
            Throttled: As `by_secret`.

        """
        if not header or not header.startswith("Bearer "):
            return None
        return self.by_secret(header[len("Bearer ") :].strip(), client, now)

    def login(self, name: str, *, write: bool = True, now: float | None = None) -> str:
        """A new session of the token ``name``: a random id, the cookie's value.

        It lasts `SESSION_LIFE` seconds; ``write=False`` makes one that may read only
        (a ``?token=`` link's).
        """
        at = time.time() if now is None else now
        sid = secrets.token_urlsafe(32)
        with self._lock:
            while self._sessions:  # oldest first: they end in that order too
                first = next(iter(self._sessions))
                if self._sessions[first].ends > at and len(self._sessions) < MAX_SESSIONS:
                    break
                del self._sessions[first]
            self._sessions[sid] = _Session(name, at + SESSION_LIFE, write)
        return sid

    def logout(self, cookies: Mapping[str, str]) -> None:
        """End the session of the cookie, if any."""
        with self._lock:
            self._sessions.pop(cookies.get(COOKIE, ""), None)

    def from_cookie(
        self, cookies: Mapping[str, str], *, write: bool = True, now: float | None = None
    ) -> str | None:
        """The token name of the cookie's live session, or ``None``.

        ``write=True`` (the default) takes only a session that may act.
        """
        found = self._sessions.get(cookies.get(COOKIE, ""))
        at = time.time() if now is None else now
        if found is None or found.ends <= at or (write and not found.write):
            return None
        return found.name


class Signer:
    """This process's key: the messages an action leaves in a link, and the pages' form tokens.

    A form token is bound to the name of who was shown the page (a token's, or the
    name the application's own login gives), so a page elsewhere cannot post a form
    for that name. The key is random at each start: restarting ends every form token.
    """

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def sign(self, text: str) -> str:
        """A MAC of ``text`` by this process (a message carried in a link, see `signed`)."""
        return _mac(self._key, "said:" + text)

    def signed(self, text: str, mac: str) -> bool:
        """Whether ``mac`` is `sign`'s for ``text``."""
        return hmac.compare_digest(mac.encode(), self.sign(text).encode())

    def form_token(self, name: str, now: float | None = None) -> str:
        """A new form token for one page shown to the session of ``name``."""
        nonce = secrets.token_hex(8)
        at = int(time.time() if now is None else now)
        return f"{nonce}.{at}.{_mac(self._key, f'{nonce}.{at}.{name}')}"

    def form_token_ok(self, token: str, name: str, now: float | None = None) -> bool:
        """Whether ``token`` was made by `form_token` for ``name``, less than a day ago."""
        nonce, _, rest = token.partition(".")
        at, _, mac = rest.partition(".")
        if not at.isdigit():
            return False
        good = _mac(self._key, f"{nonce}.{at}.{name}")
        age = (time.time() if now is None else now) - int(at)
        return hmac.compare_digest(mac.encode(), good.encode()) and -60 <= age <= FORM_TOKEN_LIFE


def cross_site(headers: Mapping[str, str]) -> str | None:
    """Why a request comes from another site (refused with 403), or ``None``.

    ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (a person typing the
    address), or an ``Origin`` (else a ``Referer``) whose host and port are not the
    ``Host`` asked. A client that sends none of them (a program) is not a browser on
    another site.
    """
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a cross-site request (Sec-Fetch-Site: {site}) cannot act"
    host = headers.get("Host") or ""
    origin = headers.get("Origin")
    if origin is not None:
        if origin == "null" or urlsplit(origin).netloc != host:
            return f"a request from another origin ({origin}) cannot act"
        return None
    referer = headers.get("Referer")
    if referer is not None and urlsplit(referer).netloc != host:
        return "a request from another origin (its Referer) cannot act"
    return None


def load_tokens(texts: Iterable[str], token_file: str | None) -> Tokens | None:
    """The tokens of ``--http-token`` texts and a ``--http-token-file``; ``None``: none.

    Raises:
        ValueError: A bad token or file, or a name or secret given twice.

    """
    pairs = [parse_token(t) for t in texts]
    if token_file is not None:
        pairs += read_token_file(token_file)
    if not pairs:
        return None
    try:
        return Tokens(pairs)
    except ValueError as exc:
        raise ValueError(f"--http-token: {exc}") from None
