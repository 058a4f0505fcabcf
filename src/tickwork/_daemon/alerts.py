"""Alerts of ``tickwork run``: ``on_failure`` and ``on_success`` commands and webhooks.

A job with ``on_failure`` is "failing" once it has failed ``failures`` times in a row
(counted from the slot ledger, so every daemon sharing the state counts the same runs);
the alert fires then, once, and once more on the first success after it ("recovered").
A job with ``on_success`` reports each ok run ("succeeded"), except the one
``on_failure`` reports as recovered: a recovery is reported once, by ``on_failure``.
Two runs that end together and read the same streak (``overlap = "allow"``) report
its "failing" or its recovery once: the streak is known by the last ok run before it.
Dead-man alerts (`AlertSender.dead_man`, decided by `tickwork.AlertWatch` from the
shared state) go out through the same ``on_failure``, on the watch's thread.
A job's ``mail_to`` mails each failed run (`tickwork._daemon.mail`) from the same queue.
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
from tickwork._daemon.jobsfile.config import Alert
from tickwork._daemon.mail import Mail
from tickwork._durable.watch import WatchAlert

__all__ = ["AlertNotSent", "AlertSender", "Notice"]

_log = logging.getLogger("tickwork.daemon")

#: Alerts waiting to be sent at most; beyond it a new one is logged as not sent.
QUEUE_SIZE: Final = 1000
#: Characters of the run's error and output in an alert.
_TEXT: Final = 2000
#: `AlertSender.run_ended`'s ``last_success`` when not given.
_UNKNOWN: Final = object()


class AlertNotSent(Exception):
    """A dead-man alert that its command or webhook did not take."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One alert to send: what happened to which job."""

    alert: Alert | Mail
    event: str
    """``"failing"``, ``"recovered"``, ``"succeeded"`` or ``"mail"``."""
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
        self._reported: dict[tuple[str, str], object] = {}  # (job, event) -> its streak
        self._reported_lock = threading.Lock()

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
        on_success: Alert | None = None,
        last_success: object = _UNKNOWN,
    ) -> str | None:
        """A run of ``job`` ended; queue its alert if this run makes or ends a failing streak.

        Or, with ``on_success``, if it succeeded (and is not a recovery ``alert`` reports).

        Args:
            job: The job's name.
            alert: Its ``on_failure`` (``None``: nothing to do).
            ok: Whether this run succeeded.
            failures_before: Failures in a row before this run (from the ledger).
            scheduled: The run's due time (POSIX seconds).
            status: How it ended (``"ok"``, ``"exit=3"``, ...).
            error: Why it failed.
            output: The end of what it wrote.
            on_success: Its ``on_success`` (``None``: no report of ok runs).
            last_success: When the last ok run before this one ended, as the ledger has
                it (``None``: never): names the streak, so that two runs reading the
                same streak report it once. Not given: no such check.

        Returns:
            The event queued (``"failing"``, ``"recovered"`` or ``"succeeded"``), or
            ``None``.

        """
        event, hook = self._decide(job, alert, on_success, ok, failures_before, last_success)
        if event is None or hook is None:
            return None
        streak = failures_before + (event == "failing")
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
        return event if self._put(Notice(hook, event, payload)) else None

    def mail_failed(
        self, job: str, mail: Mail, *, scheduled: float, status: str, error: str, output: str
    ) -> bool:
        """Queue the mail of a failed run of ``job`` (its ``mail_to``); whether it was queued."""
        payload = {
            "job": job,
            "status": status,
            "scheduled": iso(scheduled, millis=True),
            "host": self._host,
            "error": error,
            "output": output,
        }
        return self._put(Notice(mail, "mail", payload))

    def _put(self, notice: Notice) -> bool:
        try:
            self._queue.put_nowait(notice)
        except queue.Full:
            _log.error(
                "alert %s for job %r not sent: %d alerts are already waiting",
                notice.event,
                notice.payload["job"],
                QUEUE_SIZE,
            )
            return False
        return True

    def _decide(
        self,
        job: str,
        alert: Alert | None,
        on_success: Alert | None,
        ok: bool,
        failures_before: int,
        last_success: object,
    ) -> tuple[str | None, Alert | None]:
        """The event this run makes, and the hook that reports it."""
        event: str | None = None
        if alert is not None and not ok and failures_before + 1 == alert.failures:
            event = "failing"
        elif alert is not None and ok and failures_before >= alert.failures:
            event = "recovered"
        if event is not None and last_success is not _UNKNOWN:
            with self._reported_lock:
                if self._reported.get((job, event), _UNKNOWN) == last_success:
                    event = None  # another run reported this streak already
                else:
                    self._reported[(job, event)] = last_success
        if event is not None:
            return event, alert
        if ok and on_success is not None:
            return "succeeded", on_success
        return None, None

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

    def dead_man(self, alert: Alert, message: WatchAlert) -> None:
        """Send a dead-man alert or its recovery through ``alert`` now, on this thread.

        Called by the daemon's `tickwork.AlertWatch`, which has won the right to send it.

        Raises:
            AlertNotSent: The command or the webhook did not take it (the watch sends it
                again once its lease ends).

        """
        payload = {
            "event": "dead-man" if message.event == "alert" else "dead-man-recovered",
            "job": message.job_id.partition("/")[2] or message.job_id,
            "condition": message.kind,
            "detail": message.detail,
            "since": iso(message.since, millis=True),
            "time": iso(message.at, millis=True),
            "host": self._host,
        }
        if not self._send(Notice(alert, payload["event"], payload)):
            raise AlertNotSent(f"{payload['event']} alert for job {payload['job']!r} not delivered")

    def _send(self, notice: Notice) -> bool:
        """Send one alert; whether every one of its hooks took it."""
        alert, payload = notice.alert, notice.payload
        if isinstance(alert, Mail):
            why = alert.send(payload)
            if why is None:
                _log.info(
                    "mail of job %r's failed run sent to %s", payload["job"], ", ".join(alert.to)
                )
            else:
                _log.error("mail of job %r's failed run not sent: %s", payload["job"], why)
            return why is None
        body = json.dumps(payload, ensure_ascii=False).encode()
        ok = True
        if alert.command is not None:
            ok = self._command(alert, payload, body)
        if alert.webhook is not None:
            ok = self._webhook(alert, payload, body) and ok
        return ok

    def _command(self, alert: Alert, payload: dict[str, Any], body: bytes) -> bool:
        assert alert.command is not None
        env = dict(os.environ)
        for key in (
            "event",
            "job",
            "outcome",
            "status",
            "consecutive_failures",
            "scheduled",
            "condition",
            "detail",
            "since",
        ):
            if key in payload:
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
            return False
        except OSError as exc:
            _log.error("%s could not start: %s", what, exc)
            return False
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip()[-300:]
            _log.error(
                "%s failed with exit=%d%s", what, proc.returncode, f": {tail}" if tail else ""
            )
            return False
        _log.info("%s sent", what)
        return True

    def _webhook(self, alert: Alert, payload: dict[str, Any], body: bytes) -> bool:
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
                        return True
                    reason = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                reason = str(getattr(exc, "reason", exc))
        _log.error("%s not delivered after %d attempt(s): %s", what, alert.retries + 1, reason)
        return False
