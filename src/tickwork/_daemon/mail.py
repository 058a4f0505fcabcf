"""Mail of a failed run, as cron's ``MAILTO``: the jobs file's ``mail_to`` keys.

A job with ``mail_to`` (in ``[defaults]`` or its own table; a crontab's ``MAILTO``
becomes it) gets one mail for each run that fails (after its last attempt): the job,
its slot, how it ended, its error and the end of its output. The mail goes to a
sendmail-compatible command (``mail_command``, default ``/usr/sbin/sendmail -t -i``:
the message on its standard input, the recipients in its ``To:`` header) or, with
``smtp = "host:port"``, straight to that SMTP server (plain SMTP, no login: a local
relay). `tickwork._daemon.alerts.AlertSender` sends it off the run's thread; a mail
that cannot be sent is logged.
"""

from __future__ import annotations

import re
import shlex
import smtplib
import subprocess
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Final

__all__ = ["MAIL_COMMAND", "Mail", "check_mail_command", "check_mail_to", "check_smtp"]

#: The command a mail goes to when neither ``mail_command`` nor ``smtp`` is set.
MAIL_COMMAND: Final = ("/usr/sbin/sendmail", "-t", "-i")
#: Seconds a mail command or an SMTP exchange may take.
TIMEOUT: Final = 30.0
#: One address: a local user (``root``) or ``user@host``; nothing a header could split on.
_ADDRESS: Final = re.compile(r"[^\s<>,;:\"'()\\\[\]]+(@[A-Za-z0-9.-]+)?")


def check_mail_to(value: object) -> tuple[str, ...]:
    """``mail_to``: addresses (a string, comma-separated as cron's MAILTO, or an array).

    ``""`` (or ``[]``) is no mail, as ``MAILTO=""`` is in cron.
    """
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"must be an address or an array of addresses, got {value!r}")
    out = tuple(i.strip() for i in items)
    if out == ("",):
        return ()
    for address in out:
        if not _ADDRESS.fullmatch(address):
            raise ValueError(
                f"must be addresses such as 'ops@example.com' (or a local user), got {value!r}"
            )
    return out


def check_mail_command(value: object) -> tuple[str, ...]:
    """``mail_command``: a sendmail-compatible command, as a string or an argv array.

    A string is split as a shell would split it; no shell runs it.
    """
    try:
        argv = shlex.split(value) if isinstance(value, str) else value
    except ValueError:
        argv = None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise ValueError(
            f"must be a command such as '/usr/sbin/sendmail -t -i' or an argv array, got {value!r}"
        )
    return tuple(argv)


def check_smtp(value: object) -> str:
    """``smtp``: ``"host:port"`` (or ``"host"``: port 25) of the SMTP server to send to."""
    host, _, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if isinstance(value, str) and not host:
        host, port = value, "25"
    if not (host and port.isdigit() and 0 < int(port) < 65536 and not re.search(r"\s", host)):
        raise ValueError(f"must be 'host:port' of an SMTP server, got {value!r}")
    return f"{host}:{int(port)}"


@dataclass(frozen=True, slots=True)
class Mail:
    """Where a job's failed runs are mailed: its ``mail_to``, ``mail_command``, ``smtp``."""

    to: tuple[str, ...]
    command: tuple[str, ...] = MAIL_COMMAND
    smtp: str | None = None

    def message(self, payload: dict[str, Any]) -> EmailMessage:
        """The mail of one failed run (``payload``: the alert's fields)."""
        msg = EmailMessage()
        msg["From"] = f"tickwork <tickwork@{payload['host']}>"
        msg["To"] = ", ".join(self.to)
        msg["Subject"] = f"tickwork {payload['host']}: job {payload['job']} {payload['status']}"
        text = [
            f"job:       {payload['job']}",
            f"due:       {payload['scheduled']}",
            f"ended:     {payload['status']}",
            f"host:      {payload['host']}",
            "",
            payload["error"] or "",
        ]
        if payload["output"]:
            text += ["", "the end of its output:", payload["output"]]
        msg.set_content("\n".join(text) + "\n")
        return msg

    def send(self, payload: dict[str, Any]) -> str | None:
        """Send the mail of one failed run; None if it was taken, else why not."""
        msg = self.message(payload)
        if self.smtp is not None:
            host, _, port = self.smtp.rpartition(":")
            try:
                with smtplib.SMTP(host, int(port), timeout=TIMEOUT) as server:
                    server.send_message(msg)
            except (OSError, smtplib.SMTPException) as exc:
                return f"SMTP {self.smtp}: {exc}"
            return None
        try:
            proc = subprocess.run(
                list(self.command), input=msg.as_bytes(), capture_output=True, timeout=TIMEOUT
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"command {self.command[0]!r}: {exc}"
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip()[-300:]
            return f"command {self.command[0]!r} exit={proc.returncode}: {tail}"
        return None
