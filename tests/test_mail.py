"""Mail of failed runs (``mail_to``, cron's MAILTO) through the real daemon.

A fake sendmail (a real subprocess that writes its standard input to a file) and a
minimal SMTP sink on a local socket (stdlib only: ``smtpd`` is gone in 3.12) receive
what ``tickwork run`` sends for a failing job; an ok job sends nothing.
"""

from __future__ import annotations

import email
import socket
import sys
import threading
from email.message import Message
from pathlib import Path

import pytest

from tests.test_config import problems
from tests.test_daemon_e2e import Run, lines_of, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX commands")


class SmtpSink:
    """Accepts SMTP sessions on 127.0.0.1 and keeps each message (envelope and data)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.mails: list[tuple[list[str], bytes]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as f:
                self._session(f)

    def _session(self, f: socket.SocketIO | object) -> None:
        def say(text: str) -> None:
            f.write(text.encode() + b"\r\n")  # type: ignore[attr-defined]
            f.flush()  # type: ignore[attr-defined]

        say("220 sink")
        rcpt: list[str] = []
        while line := f.readline():  # type: ignore[attr-defined]
            verb = line[:4].upper()
            if verb in (b"EHLO", b"HELO"):
                say("250 sink")
            elif verb == b"RCPT":
                rcpt.append(line.decode().split(":", 1)[1].strip().strip("<>"))
                say("250 ok")
            elif verb == b"DATA":
                say("354 go on")
                data = b""
                while (chunk := f.readline()) not in (b".\r\n", b""):  # type: ignore[attr-defined]
                    data += chunk
                self.mails.append((rcpt, data))
                rcpt = []
                say("250 kept")
            elif verb == b"QUIT":
                say("221 bye")
                return
            else:  # MAIL FROM, RSET, NOOP
                say("250 ok")

    def close(self) -> None:
        self.server.close()


def test_a_failed_run_is_mailed_through_sendmail_and_smtp_an_ok_one_is_not(
    tmp_path: Path,
) -> None:
    # Issue 39: cron users rely on MAILTO; tickwork mailed nothing.
    inbox = tmp_path / "sendmail-got"
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(f'#!/bin/sh\necho "$*" >> {inbox}.args\ncat >> {inbox}\n')
    sendmail.chmod(0o755)
    sink = SmtpSink()
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f"""
[defaults]
mail_to = "ops@example.com"
mail_command = "{sendmail} -t -i"

[[job]]
name = "broken"
command = ["sh", "-c", "echo disk is full; exit 3"]
in = "0s"

[[job]]
name = "fine"
command = ["sh", "-c", "echo all good"]
in = "0s"

[[job]]
name = "relayed"
command = ["sh", "-c", "echo no route >&2; exit 4"]
in = "0s"
mail_to = ["dev@example.com", "root"]
smtp = "127.0.0.1:{sink.port}"
"""
    )
    run = Run(jobs, tmp_path / "state.db")
    try:
        run.wait_line("fine finished")
        wait_until("the sendmail mail", lambda: "disk is full" in "\n".join(lines_of(inbox)))
        wait_until("the SMTP mail", lambda: sink.mails)
        run.wait_line("mail of job 'relayed''s failed run sent to dev@example.com, root")
    finally:
        run.stop()
        sink.close()
    mail: Message = email.message_from_bytes(inbox.read_bytes())
    assert mail["To"] == "ops@example.com"
    assert mail["Subject"].endswith("job broken exit=3")
    body = mail.get_payload(decode=True).decode()  # type: ignore[union-attr]
    assert "disk is full" in body and "job:       broken" in body
    assert body.count("disk is full") == 1, body  # the output once, not in the error too
    assert lines_of(Path(f"{inbox}.args")) == ["-t -i"]  # one mail: none for "fine"
    ((rcpt, data),) = sink.mails
    assert rcpt == ["dev@example.com", "root"]
    relayed = email.message_from_bytes(data)
    assert relayed["Subject"].endswith("job relayed exit=4")
    assert "no route" in relayed.get_payload(decode=True).decode()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'mail_to = "ops team@example.com"',
            "mail_to: must be addresses such as 'ops@example.com' (or a local user),"
            " got 'ops team@example.com'",
        ),
        ('smtp = "relay:0"', "smtp: must be 'host:port' of an SMTP server, got 'relay:0'"),
        (
            "mail_command = []",
            "mail_command: must be a command such as '/usr/sbin/sendmail -t -i' or an argv"
            " array, got []",
        ),
    ],
)
def test_the_mail_keys_are_checked_naming_the_bad_value(line: str, message: str) -> None:
    text = f'[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1m"\n{line}\n'
    assert any(message in p for p in problems(text)), problems(text)
