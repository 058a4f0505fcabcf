"""`PostgresStore`'s listening connection: the changes and the looks it hears.

`wait_for_change` (`ChangeNotifier`) waits on a connection of its own that
``LISTEN``s on the store's two channels: its changes, and the looks other schedulers
announce (`LookNotices`) with the promises they make to look (`LookCover`, kept by a
`LookBoard`). A socket pair lets any thread cut a wait short (`interrupt_wait`).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import sql

from tickwork.stores._errors import StoreError

from ._checks import check_time
from ._looks import MUTE_AFTER, LookBoard, runs_key

__all__ = ["ListenMixin"]

_log = logging.getLogger("tickwork.stores")

Cursor = psycopg.Cursor[Any]


class ListenMixin:
    """`ChangeNotifier`, `LookNotices` and `LookCover` for `PostgresStore`."""

    _closed: bool
    _dsn: str
    _connect_kwargs: dict[str, Any]
    _redacted: str
    _backoff_min: float
    _backoff_max: float
    _channel: str
    _looks_channel: str
    _owner: str | None
    _owner_key: tuple[int, int] | None
    _run: Callable[..., Any]
    _scrub: Callable[[str], str]
    _runnable: Callable[[], tuple[Any, ...]]

    def _init_listener(self) -> None:
        """The listener's state: its connection (opened on first use), the looks heard."""
        self._board = LookBoard()  # the others' looks heard, and our announcements
        # The key the listening connection holds (it is tagged by its own thread).
        self._listen_key: tuple[int, int] | None = None
        self._listen_lock = threading.Lock()
        self._listen_conn: psycopg.Connection[Any] | None = None
        self._muted = False  # it does not listen on `channel` now (`_mute`)
        # A socket pair to interrupt its wait.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    def _tag(self, conn: psycopg.Connection[Any], key: tuple[int, int]) -> None:
        """Mark ``conn``'s session with the owner's lock ``key`` (`tag_sessions`)."""
        raise NotImplementedError

    def wait_for_change(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change announced on `channel`.

        See `tickwork.stores.ChangeNotifier.wait_for_change`. The first call opens a
        second connection that ``LISTEN``s and returns True at once (changes before it
        were not watched). A lost listening connection is reopened by the next call,
        which then returns True; while the database is unreachable, a call waits out its
        timeout (retrying with backoff) and returns False. Calls from several threads
        take turns.

        Raises:
            StoreError: The store is closed.
            ValueError: ``timeout`` is negative or not finite.

        """
        timeout = check_time("timeout", timeout)
        if timeout < 0:
            raise ValueError(f"timeout must be a finite number >= 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        with self._listen_lock:
            if self._closed:
                raise StoreError("cannot wait for changes: the store is closed")
            if self._take_wakeup():
                return True
            if self._listen_conn is None:
                return self._start_listening(deadline)
            conn = self._listen_conn
            try:
                key = self._owner_key
                if key is not None and key != self._listen_key:  # tagged since it connected
                    self._tag(conn, key)
                    self._listen_key = key
                if self._heard(conn) | self._mute(conn):
                    return True
                while True:
                    remaining = deadline - time.monotonic()
                    wait = min(remaining, self._mute_left()) if self._muted else remaining
                    ready, _, _ = select.select(
                        [conn.fileno(), self._wake_r.fileno()], [], [], max(0.0, wait)
                    )
                    if self._wake_r.fileno() in ready:
                        self._take_wakeup()
                        return True
                    if (bool(ready) and self._heard(conn)) | self._mute(conn):
                        return True
                    if remaining <= 0:
                        return False
            except (psycopg.Error, OSError, ValueError) as exc:
                if self._closed:
                    raise StoreError("cannot wait for changes: the store is closed") from None
                _log.warning(
                    "lost the listening connection to %r (%s); reconnecting",
                    self._redacted,
                    self._scrub(f"{type(exc).__name__}: {exc}"),
                )
                self._drop_listener()
                return True

    def _start_listening(self, deadline: float) -> bool:
        """Open the listening connection (called with the listen lock held)."""
        delay = self._backoff_min
        while True:
            try:
                conn = psycopg.connect(self._dsn, **{**self._connect_kwargs, "autocommit": True})
            except psycopg.Error as exc:
                remaining = deadline - time.monotonic()
                _log.warning(
                    "cannot listen for changes on %r (%s); retrying in %.2f s",
                    self._redacted,
                    self._scrub(f"{type(exc).__name__}: {exc}"),
                    min(delay, max(remaining, 0.0)),
                )
                if remaining <= 0:
                    return False
                ready, _, _ = select.select([self._wake_r], [], [], min(delay, remaining))
                if ready or self._closed:
                    self._take_wakeup()
                    return True
                delay = min(delay * 2, self._backoff_max)
                continue
            key = self._owner_key
            try:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._looks_channel)))
                if key is not None:
                    self._tag(conn, key)
            except psycopg.Error:
                conn.close()
                return True  # the next call tries again
            self._listen_conn = conn
            self._listen_key = key
            self._muted = False
            return True

    def _mute_left(self) -> float:
        """Seconds left of a steady promise that covers this store's changes (0.0: none).

        A promise of another scheduler that runs what this one runs (`runs_key`),
        unbroken for `MUTE_AFTER` seconds: that one hears every change and looks for it.
        """
        if self._owner is None:
            return 0.0
        return self._board.covered(self._owner, runs_key(self._runnable()), MUTE_AFTER)

    def _mute(self, conn: psycopg.Connection[Any]) -> bool:
        """Stop hearing `channel` while `_mute_left`, hear it again after; True if again.

        Each notification costs every listening session a short transaction, and a
        scheduler that a steady promise covers would only sleep on at it: three nodes
        at 300 enqueues a second paid three of those per enqueue. When the promise
        ends (withdrawn or lapsed), the changes made meanwhile were not heard: the
        caller looks (True).
        """
        held = self._mute_left() > 0.0
        if held == self._muted:
            return False
        verb = "UNLISTEN {}" if held else "LISTEN {}"
        conn.execute(sql.SQL(verb).format(sql.Identifier(self._channel)))
        self._muted = held
        return not held

    def _heard(self, conn: psycopg.Connection[Any]) -> bool:
        """Take the notifications that arrived: whether any announced a change.

        A look another scheduler announced (`LookNotices`) is noted, not a change; the
        withdrawal of a promise this store deferred to (`LookCover`) is one.
        """
        changed = False
        for note in conn.notifies(timeout=0):
            if note.channel != self._looks_channel or self._board.heard(self._owner, note.payload):
                changed = True
        return changed

    def look_elsewhere(self) -> tuple[int, float, float | None] | None:
        """The latest look another scheduler announced (`LookNotices`), or None."""
        return self._board.latest()

    def _announce_look(self, cur: Cursor, owner: str, wake: float | None) -> None:
        """Tell the other schedulers' listeners that ``owner`` took runs (on commit).

        Each announcement costs every listening session a short transaction, so they
        are spaced, and carry this scheduler's promise when it makes one (`LookBoard`).
        """
        payload = self._board.announcement(owner, wake, runs_key(self._runnable()))
        if payload is not None:
            cur.execute("SELECT pg_notify(%s, %s)", (self._looks_channel, payload))

    def cover(self, able: bool) -> bool:
        """Whether this scheduler can look at every due time; whether it promises it.

        See `tickwork.stores.contract.LookCover`. A withdrawal is announced at once, in
        a transaction of its own; if that fails, the promise lapses on its own within
        `COVER_FOR` seconds.
        """
        owner = self._owner
        if owner is None:
            return False
        if self._board.cover(owner, able):
            payload = self._board.withdrawal(owner)

            def body(cur: Cursor) -> None:
                cur.execute("SELECT pg_notify(%s, %s)", (self._looks_channel, payload))

            try:
                self._run("withdraw a promise to look", body)
            except StoreError as exc:
                _log.debug("could not withdraw the promise to look: %s", exc)
        return self._board.covering()

    def covered(self, *, alike: bool = False) -> float:
        """Seconds left of another scheduler's promise this one defers to (`LookCover`)."""
        runs = runs_key(self._runnable()) if alike else None
        return self._board.covered(self._owner, runs)

    def _drop_listener(self) -> None:
        self._board.forget()  # a withdrawal may be missed until the next connection
        conn, self._listen_conn = self._listen_conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken
                _log.debug("closing the listening connection failed", exc_info=True)

    def _take_wakeup(self) -> bool:
        """Consume pending `interrupt_wait` calls; whether there were any."""
        woken = False
        with suppress(OSError):  # BlockingIOError: drained
            while self._wake_r.recv(4096):
                woken = True
        return woken

    def interrupt_wait(self) -> None:
        """Make the current (or next) `wait_for_change` return True promptly; any thread."""
        # Fails only when a wake-up is pending already, or the store is closed.
        with suppress(OSError):
            self._wake_w.send(b"\0")
