"""Who may act over HTTP: named tokens, browser sessions, and the cross-site checks.

``tickwork run --http`` takes tokens as ``NAME=SECRET`` (``--http-token``, repeatable)
or from a file of such lines (``--http-token-file``). A program sends ``Authorization:
Bearer SECRET``; a browser logs in once at ``/login`` and then carries a session cookie
derived from the secret (it ends when the secret changes). Every secret is compared in
constant time, and the name of the token that matched is who acted, as the state
records it.

A write from a browser must come from the page itself: `cross_site` refuses a request
whose ``Sec-Fetch-Site``, ``Origin`` or ``Referer`` names another site, and each page
carries its own form token (`Tokens.form_token`), bound to the session's name and good
for `FORM_TOKEN_LIFE` seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import time
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "COOKIE",
    "FORM_TOKEN_LIFE",
    "UNNAMED",
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
        self._key = secrets.token_bytes(32)  # this process's form tokens only

    @property
    def names(self) -> list[str]:
        """The tokens' names, sorted."""
        return sorted(self._secrets)

    def by_secret(self, given: str) -> str | None:
        """The name of the token whose secret is ``given``; every secret is compared."""
        found = None
        raw = given.encode()
        for name, secret in self._secrets.items():
            if hmac.compare_digest(raw, secret):
                found = name
        return found

    def bearer(self, header: str | None) -> str | None:
        """The token named by an ``Authorization: Bearer SECRET`` header, or ``None``."""
        if not header or not header.startswith("Bearer "):
            return None
        return self.by_secret(header[len("Bearer ") :].strip())

    def session(self, name: str) -> str:
        """The session cookie's value for a logged-in token: its name and a MAC of it."""
        return f"{name}.{_mac(self._secrets[name], 'tickwork-session:' + name)}"

    def from_cookie(self, cookies: Mapping[str, str]) -> str | None:
        """The name of a good session cookie, or ``None``."""
        value = cookies.get(COOKIE, "")
        name, _, mac = value.rpartition(".")
        secret = self._secrets.get(name)
        if secret is None:
            return None
        good = _mac(secret, "tickwork-session:" + name)
        return name if hmac.compare_digest(mac.encode(), good.encode()) else None

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
