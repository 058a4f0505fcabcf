"""What a PostgreSQL store hears of the other schedulers' looks, and what it tells them.

Schedulers sharing a PostgreSQL store announce their looks that took runs on a channel
of their own (`LookNotices`), so that the others need not all look at every due time.
An announcement is a ``NOTIFY``, and PostgreSQL runs a short transaction in every
listening session for each one it delivers: they are spaced (`ANNOUNCE_GAP`,
`ANNOUNCE_ALONE`).

A look's announcement may also carry a promise (`LookCover`): the scheduler that makes
it has a worker free and undertakes to look at every due time itself for the next
`COVER_FOR` seconds. It renews the promise at least every `COVER_RENEW` seconds while it
keeps taking runs, and withdraws it with an announcement of its own the moment it
cannot keep it (every worker busy at a look). While one holds, the others look only
for their own work and once per ``LOOK_AT_LEAST`` second: on three nodes at 100 runs a
second, two nodes that took nothing used to look about 33 times a second each.

A promise is never taken on trust for long: it lapses `COVER_FOR` seconds after it was
heard unless renewed, so a scheduler that dies or stalls while promising delays the
others' looks by that much at most. Two schedulers that promise at the same moment
settle it by owner name: the one with the greater name withdraws.

A promise covers the changes the others hear too (an enqueue, a trigger: each store
transaction that makes a run due sooner notifies every listening scheduler): a scheduler
that hears one while a promise holds leaves it to the promising one, which hears it as
well and looks at once, but only when the two run the same work (`runs`: the same
functions and modules allowed, a fingerprint of them in the announcement). On three nodes
at 400 enqueues a second, each enqueue used to bring on a look on every node, two of
which found nothing. Once such a promise has held without a break for `MUTE_AFTER`
seconds, the others stop hearing the changes at all (``UNLISTEN``, `ListenMixin._mute`):
PostgreSQL runs a transaction in every listening session for each notification, three
per enqueue on three nodes. When the promise ends they listen again and look once, for
the changes made meanwhile.

The payload of an announcement is ``"<owner> <wake> covers=<seconds> runs=<fingerprint>"``
(``wake``: the ``repr`` of the next wake-up the look found, a POSIX time, or ``None``), and
that of a withdrawal ``"<owner> withdraws"``. A release before this one sends ``"<owner>
<wake> covers=<seconds>"`` (a promise that covers due times, not changes) or ``"<owner>
<wake>"`` (a look that promises nothing).

The words look, announce, cover mean what docs/architecture.md, "Glossary", says.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from typing import Final

__all__ = [
    "ANNOUNCE_ALONE",
    "ANNOUNCE_GAP",
    "COVER_FOR",
    "COVER_RENEW",
    "MUTE_AFTER",
    "LookBoard",
    "runs_key",
]

#: A scheduler's looks that took runs are announced at most this often (seconds):
#: while the latest is younger than the scheduler's ``DEFER`` (25 ms), the others
#: sleep on.
ANNOUNCE_GAP: Final = 0.01
#: ...and at most this often while no other scheduler has been heard for as long.
ANNOUNCE_ALONE: Final = 1.0
#: A promise to look at every due time holds this many seconds after it is heard...
COVER_FOR: Final = 0.8
#: ...and a scheduler that keeps it announces a look at least this often while it
#: takes runs, renewing it.
COVER_RENEW: Final = 0.5

#: A scheduler stops hearing the store's changes while a promise that covers them (of a
#: scheduler that runs the same work) holds, once renewed this long after it was made.
#: At sparse rates a promise lapses between runs, and muting would cost more (a LISTEN
#: and an UNLISTEN per promise) than the notifications it saves.
MUTE_AFTER: Final = COVER_RENEW

_COVERS = "covers="
_RUNS = "runs="
_WITHDRAWS = "withdraws"


def _wake_of(text: str) -> float | None:
    """The wake-up in a look's announcement (``repr`` of a float, or ``None``)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _cover_of(text: str) -> float:
    """The seconds a look's announcement promises (0.0: none, or unreadable)."""
    try:
        value = float(text[len(_COVERS) :])
    except ValueError:
        return 0.0
    return min(value, COVER_FOR) if math.isfinite(value) and value > 0 else 0.0


class LookBoard:
    """The looks and promises a store heard, and its own announcements (thread-safe).

    The listening thread feeds it (`heard`); the timing thread asks it what to announce
    (`announcement`, `cover`) and whether to sleep on (`latest`, `covered`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._looks: tuple[int, float, float | None] = (0, 0.0, None)  # (heard, when, wake)
        self._announced = -math.inf  # time.monotonic() of our last announced look
        self._able = False  # a worker was free at our last look: we may promise
        self._promised = -math.inf  # time.monotonic() until which our promise holds
        # another owner -> until when its promise holds, what it runs ("": unknown), since
        # when it has held without a break, and when it was last renewed
        self._promises: dict[str, tuple[float, str, float, float]] = {}

    def heard(self, me: str | None, payload: str) -> bool:
        """Note one announcement; True when it withdrew the last promise ``me`` deferred to.

        That withdrawal is news the scheduler must act on at once (a change): the due
        times it left to the other are its own again.
        """
        head, _, last = payload.rpartition(" ")
        if last == _WITHDRAWS:
            if head == me:
                return False
            mono = time.monotonic()
            with self._lock:
                before = self._deferred_to(me, mono)
                self._promises.pop(head, None)
                return before > 0.0 and self._deferred_to(me, mono) <= 0.0
        runs = ""
        if last.startswith(_RUNS):
            runs = last[len(_RUNS) :]
            head, _, last = head.rpartition(" ")
        cover = 0.0
        if last.startswith(_COVERS):
            cover = _cover_of(last)
            head, _, last = head.rpartition(" ")
        if head == me:  # our own looks are no news
            return False
        mono = time.monotonic()
        with self._lock:
            self._looks = (self._looks[0] + 1, mono, _wake_of(last))
            if cover > 0.0:
                held = self._promises.get(head)
                since = held[2] if held and held[0] > mono and held[1] == runs else mono
                self._promises[head] = (mono + cover, runs, since, mono)
            else:
                self._promises.pop(head, None)  # it looked, and promised nothing
        return False

    def latest(self) -> tuple[int, float, float | None] | None:
        """The latest look another scheduler announced (`LookNotices.look_elsewhere`)."""
        with self._lock:
            count, heard, wake = self._looks
        return None if not count else (count, time.monotonic() - heard, wake)

    def forget(self) -> None:
        """The listening connection was lost: a withdrawal may have been missed."""
        with self._lock:
            self._promises.clear()

    def announcement(self, me: str, wake: float | None, runs: str = "") -> str | None:
        """The payload to announce for a look of ``me`` that took runs, or None (spaced).

        ``runs``: the fingerprint of what ``me`` runs (`runs_key`; "": say nothing of it).

        It promises when a worker was free at the look and no other promise holds that
        ``me`` defers to. A new promise is announced within `ANNOUNCE_GAP` seconds of
        the last announcement; one that holds is renewed every `COVER_RENEW` seconds, no
        more often (the others sleep on). A look that promises nothing is announced at
        most every `ANNOUNCE_GAP` seconds, or every `ANNOUNCE_ALONE` while no other
        scheduler was heard for as long.
        """
        mono = time.monotonic()
        with self._lock:
            count, heard, _ = self._looks
            promise = self._able and self._deferred_to(me, mono) <= 0.0
            if promise and self._promised > mono:
                gap = COVER_RENEW  # the others sleep on: more would only cost them
            elif promise:
                gap = ANNOUNCE_GAP  # a new promise: told at the next look
            elif not count or mono - heard > ANNOUNCE_ALONE:
                gap = ANNOUNCE_ALONE  # nobody else heard for as long
            else:
                gap = ANNOUNCE_GAP
            if mono - self._announced < gap:
                return None
            self._announced = mono
            if promise:
                self._promised = mono + COVER_FOR
        said = f"{me} {wake!r} {_COVERS}{COVER_FOR if promise else 0.0!r}"
        return f"{said} {_RUNS}{runs}" if runs else said

    def cover(self, me: str, able: bool) -> bool:
        """Whether ``me`` must withdraw its promise now (see `LookCover.cover`).

        ``able``: a worker was free at its look. It withdraws when it was not, or when
        another promise holds that it defers to (one made at the same moment).
        """
        mono = time.monotonic()
        with self._lock:
            self._able = able
            if self._promised <= mono:
                return False
            if able and self._deferred_to(me, mono) <= 0.0:
                return False
            self._promised = -math.inf
            return True

    def covering(self) -> bool:
        """Whether a promise of this store's scheduler holds now."""
        with self._lock:
            return self._promised > time.monotonic()

    def covered(self, me: str | None, runs: str | None = None, steady: float = 0.0) -> float:
        """Seconds left of the promise of another scheduler that ``me`` defers to (0.0: none).

        ``runs``: only a promise of a scheduler that announced this fingerprint counts
        (one that runs what ``me`` runs, and so covers the changes ``me`` hears).
        ``steady``: only one renewed this many seconds or more after it was made, and
        held without a break since (a promise made once may lapse any moment: a node
        taking one run a second promises for 0.8 s at each).
        """
        with self._lock:
            return self._deferred_to(me, time.monotonic(), runs, steady)

    def withdrawal(self, me: str) -> str:
        """The payload withdrawing ``me``'s promise."""
        return f"{me} {_WITHDRAWS}"

    def _deferred_to(
        self, me: str | None, mono: float, runs: str | None = None, steady: float = 0.0
    ) -> float:
        """`covered`, with the lock held: while ``me`` promises, only a lesser owner's counts."""
        mine = self._promised > mono
        left = 0.0
        for owner, (until, theirs, since, renewed) in self._promises.items():
            if (runs is not None and theirs != runs) or renewed - since < steady:
                continue
            if until > mono and owner != me and (not mine or me is None or owner < me):
                left = max(left, until - mono)
        return left


def runs_key(runnable: object) -> str:
    """The fingerprint of what a scheduler runs (its store's allowed functions and modules).

    Two schedulers with the same fingerprint claim the same one-offs and jobs, so each
    looks for the changes the other hears. Short, and free of spaces (a payload's words).
    """
    return hashlib.blake2s(repr(runnable).encode(), digest_size=6).hexdigest()
