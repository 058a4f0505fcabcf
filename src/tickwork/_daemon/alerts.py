"""Failure alerts of ``tickwork run``: ``on_failure`` commands and webhooks.

A job with ``on_failure`` is "failing" once it has failed ``after`` times in a row
(counted from the slot ledger, so every daemon sharing the state counts the same runs);
the alert fires then, once, and once more on the first success after it ("recovered").
Alerts go out on a thread of their own, from a bounded queue: a slow webhook never
delays a run, and an alert that cannot be delivered is logged, never dropped silently.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from tickwork._core.text import iso
from tickwork._daemon.config import Alert

__all__ = ["AlertSender", "Notice"]

_log = logging.getLogger("tickwork.daemon")

#: Alerts waiting to be sent at most; beyond it a new one is logged as not sent.
QUEUE_SIZE: Final = 1000
#: Characters of the run's error and output in an alert.
_TEXT: Final = 2000


@dataclass(frozen=True, slots=True)
class Notice:
    """One alert to send: what happened to which job."""

    alert: Alert
    event: str
    """``"failing"`` or ``"recovered"``."""
    payload: dict[str, Any]
    """The JSON document (and the source of the environment variables)."""


def _where(url: str) -> str:
    """A webhook URL for logs: scheme and host only (paths and queries hold secrets)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}{f':{parts.port}' if parts.port else ''}/..."


class AlertSender:
    """Decides when a job's ``on_failure`` fires, and sends it off the run's thread.

    Args:
        host: Named in every alert (which daemon saw it).
        wall: The clock for the alert's time.
        sleep: How to wait between webhook attempts (cut short by `close`).

    """

    def __init__(
        self,
        *,
        host: str | None = None,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self._host = host or socket.gethostname()
        self._wall = wall
        self._closing = threading.Event()
        self._sleep = sleep or self._closing.wait
        self._queue: queue.Queue[Notice | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the sending thread."""
        self._thread = threading.Thread(target=self._run, name="tickwork-alerts", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued within ``timeout`` seconds, then stop; log what is left."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._closing.set()  # cut retry waits short
            self._thread.join(5.0)
        left = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left += 1
                _log.error(
                    "alert %s for job %r not sent: the daemon stopped first",
                    item.event,
                    item.payload["job"],
                )
        self._thread = None
        if left:
            _log.error("%d alert(s) not sent", left)

    def run_ended(
        self,
        job: str,
        alert: Alert | None,
        *,
        ok: bool,
        failures_before: int,
        scheduled: float,
        status: str,
        error: str | None = None,
        output: str = "",
    ) -> str | None:
        """A run of ``job`` ended; queue its alert if this run makes or ends a failing streak.

        Args:
            job: The job's name.
            alert: Its ``on_failure`` (``None``: nothing to do).
            ok: Whether this run succeeded.
            failures_before: Failures in a row before this run (from the ledger).
            scheduled: The run's due time (POSIX seconds).
            status: How it ended (``"ok"``, ``"exit=3"``, ...).
            error: Why it failed.
            output: The end of what it wrote.

        Returns:
            The event queued (``"failing"`` or ``"recovered"``), or ``None``.

        """
        if alert is None:
            return None
        if not ok and failures_before + 1 == alert.after:
            event, streak = "failing", failures_before + 1
        elif ok and failures_before >= alert.after:
            event, streak = "recovered", failures_before
        else:
            return None
        payload = {
            "event": event,
            "job": job,
            "outcome": "ok" if ok else "failed",
            "status": status,
            "consecutive_failures": streak,
            "scheduled": iso(scheduled, millis=True),
            "time": iso(self._wall(), millis=True),
            "host": self._host,
            "error": (error or "")[-_TEXT:] or None,
            "output": output[-_TEXT:] or None,
        }
        try:
            self._queue.put_nowait(Notice(alert, event, payload))
        except queue.Full:
            _log.error(
                "alert %s for job %r not sent: %d alerts are already waiting",
                event,
                job,
                QUEUE_SIZE,
            )
            return None
        return event

    # -- the sending thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._send(item)
            except Exception:  # never let one alert end the thread
                _log.exception("alert %s for job %r failed", item.event, item.payload["job"])

    def _send(self, notice: Notice) -> None:
        alert, payload = notice.alert, notice.payload
        body = json.dumps(payload, ensure_ascii=False).encode()
        if alert.command is not None:
            self._command(alert, payload, body)
        if alert.webhook is not None:
            self._webhook(alert, payload, body)

    def _command(self, alert: Alert, payload: dict[str, Any], body: bytes) -> None:
        assert alert.command is not None
        env = dict(os.environ)
        for key in ("event", "job", "outcome", "status", "consecutive_failures", "scheduled"):
            env[f"TICKWORK_{key.upper()}"] = str(payload[key])
        env["TICKWORK_HOST"] = payload["host"]
        what = f"alert {payload['event']} for job {payload['job']!r}: command {alert.command[0]!r}"
        try:
            proc = subprocess.run(
                list(alert.command),
                input=body,
                env=env,
                capture_output=True,
                timeout=alert.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            _log.error("%s did not finish within %gs (killed)", what, alert.timeout)
            return
        except OSError as exc:
            _log.error("%s could not start: %s", what, exc)
            return
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip()[-300:]
            _log.error(
                "%s failed with exit=%d%s", what, proc.returncode, f": {tail}" if tail else ""
            )
        else:
            _log.info("%s sent", what)

    def _webhook(self, alert: Alert, payload: dict[str, Any], body: bytes) -> None:
        assert alert.webhook is not None
        where = _where(alert.webhook)
        what = f"alert {payload['event']} for job {payload['job']!r} to {where}"
        reason = ""
        for attempt in range(alert.retries + 1):
            if attempt:
                self._sleep(min(60.0, 2.0 ** (attempt - 1)))
                if self._closing.is_set():
                    break
            request = urllib.request.Request(
                alert.webhook,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "tickwork"},
            )
            try:
                with urllib.request.urlopen(request, timeout=alert.timeout) as response:
                    if 200 <= response.status < 300:
                        _log.info("%s sent", what)
                        return
                    reason = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                reason = str(getattr(exc, "reason", exc))
        _log.error("%s not delivered after %d attempt(s): %s", what, alert.retries + 1, reason)
