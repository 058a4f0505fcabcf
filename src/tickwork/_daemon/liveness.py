"""What the daemon says of its own life: to systemd, to ``/readyz``, and of a silent store.

- `notify` sends one sd_notify message (``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``) as
  a datagram to ``$NOTIFY_SOCKET`` (a path, or ``@name`` in the abstract namespace),
  which is all systemd's ``Type=notify`` and ``WatchdogSec=`` ask; no library needed.
- `Liveness` is told by the daemon when the jobs are declared and runs start
  (`Liveness.ready`) and when the shutdown begins (`Liveness.stopping`). From ready to
  `Liveness.close` a thread of its own beats: it pings the watchdog every half of
  ``$WATCHDOG_USEC`` while the timing thread lives, and logs the moment the store has
  not answered a look for ``health_after`` seconds and the moment it answers again. Not
  the main thread: that one reads the store too (skips passing while a run goes on), so
  it would fall silent, and the watchdog with it, exactly while the store does.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Final

from tickwork._core.text import plain_seconds
from tickwork._durable.scheduler import Health

__all__ = ["Liveness", "notify"]

_log = logging.getLogger("tickwork.daemon")

#: What the systemd service manager gives the process it watches (and not its children).
SYSTEMD_VARIABLES: Final = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
#: Longest gap between two looks at the store's health (seconds).
_BEAT: Final = 1.0


def notify(address: str | None, message: str) -> bool:
    """Send ``message`` to the sd_notify socket ``address``; whether it went out.

    ``address`` is ``$NOTIFY_SOCKET``'s value: a path, or ``@name`` for the abstract
    namespace. ``None`` or an empty one (not under systemd) sends nothing. A failure is
    logged, never raised: the jobs run on without systemd's hearing of them.
    """
    if not address:
        return False
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message.encode(), target)
    except OSError as exc:
        _log.warning("cannot notify systemd at NOTIFY_SOCKET=%s: %s", address, exc)
        return False
    return True


class Liveness:
    """Readiness, systemd's notifications and watchdog, and the store's silences.

    Args:
        health: The scheduler's `tickwork.DurableScheduler.health`.
        health_after: Seconds of a look unanswered before it is logged.
        environ: Where ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID`` are
            read; they are taken out of it, so the jobs' commands do not inherit them.
        clock: The monotonic clock of the beats.
    """

    def __init__(
        self,
        health: Callable[[], Health],
        *,
        health_after: float,
        environ: MutableMapping[str, str] = os.environ,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        given = {name: environ.pop(name, "") for name in SYSTEMD_VARIABLES}
        self._health = health
        self._after = health_after
        self._clock = clock
        self._socket = given["NOTIFY_SOCKET"] or None
        self._ping_every: float | None = None
        usec, pid = given["WATCHDOG_USEC"], given["WATCHDOG_PID"]
        if usec.isdigit() and int(usec) > 0 and pid in ("", str(os.getpid())):
            self._ping_every = int(usec) / 2e6  # sd_watchdog_enabled's advice: half
        self._next_ping = -float("inf")
        self._silent_since: float | None = None  # when the store stopped answering
        self._state = "starting: the store is open, the jobs are not declared yet"
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def readiness(self) -> str | None:
        """``None`` when ready (``/readyz`` 200), else why not (503)."""
        return self._state or None

    def ready(self, status: str) -> None:
        """The jobs are declared and runs start: ``/readyz`` 200, ``READY=1``, the beats."""
        self._state = ""
        notify(self._socket, f"READY=1\nSTATUS={status}")
        self._thread = threading.Thread(target=self._beats, name="tickwork-liveness", daemon=True)
        self._thread.start()

    def stopping(self) -> None:
        """The shutdown began: ``/readyz`` 503 again, systemd's ``STOPPING=1``."""
        self._state = "stopping"
        notify(self._socket, "STOPPING=1\nSTATUS=stopping")

    def close(self) -> None:
        """Stop the beats (the daemon is about to exit)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _beats(self) -> None:
        while not self._halt.wait(self.beat()):
            pass

    def beat(self) -> float:
        """Ping the watchdog and log the store's silences as due; seconds to the next beat."""
        now = self._clock()
        health = self._health()
        self._watch_store(health, now)
        wait = min(_BEAT, self._after / 2)
        if self._ping_every is None:
            return wait
        if now >= self._next_ping and "timing thread died" not in (health.reason or ""):
            notify(self._socket, "WATCHDOG=1")
            self._next_ping = now + self._ping_every
        return max(0.0, min(wait, self._next_ping - now))

    def _watch_store(self, health: Health, now: float) -> None:
        """Log when a look has waited ``health_after`` s, and when a look succeeds again."""
        waiting = health.store_waiting
        if self._silent_since is None:
            if waiting is not None and waiting >= self._after:
                self._silent_since = now - waiting
                _log.warning(
                    "the store has not answered for %s: a look at the due runs (claims,"
                    " lease renewals) is waiting for it; no run starts meanwhile",
                    plain_seconds(int(waiting)),
                )
            return
        if health.store_failures or (waiting is not None and waiting >= self._after):
            return  # still silent, or its look failed (logged): a look has to succeed
        age = health.last_look_age
        answered = now - (age or 0.0)
        if age is None or answered <= self._silent_since:
            return
        _log.warning(
            "the store answered again after %s",
            plain_seconds(round(answered - self._silent_since, 1)),
        )
        self._silent_since = None
