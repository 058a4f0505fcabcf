"""``on_failure``: when an alert fires, how it is sent, and what a failure to send does.

Webhooks go to a real local HTTP server; commands are real processes; the end-to-end
test runs a real daemon whose job fails, alerts, then recovers and alerts again.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.test_daemon_e2e import LIMIT, Run, wait_until
from tickwork._daemon.alerts import AlertSender
from tickwork._daemon.jobsfile.config import Alert


class Hook:
    """A local webhook receiver: records JSON bodies, answers the queued status codes."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.codes: list[int] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                code = hook.codes.pop(0) if hook.codes else 200
                if code == 200:
                    hook.bodies.append(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/s3cret-token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def ended(sender: AlertSender, alert: Alert | None, ok: bool, before: int) -> str | None:
    return sender.run_ended(
        "backup",
        alert,
        ok=ok,
        failures_before=before,
        scheduled=1_800_000_000.0,
        status="ok" if ok else "exit=3",
        error=None if ok else "exit=3\ndisk full",
        output="copying...\n",
    )


def test_it_fires_on_the_nth_failure_in_a_row_and_once_on_recovery() -> None:
    sender = AlertSender(host="web1")  # not started: only the decisions are looked at
    alert = Alert(webhook="http://127.0.0.1:9/x", failures=2)
    assert ended(sender, alert, ok=False, before=0) is None
    assert ended(sender, alert, ok=False, before=1) == "failing"
    assert ended(sender, alert, ok=False, before=2) is None  # still failing: no repeat
    assert ended(sender, alert, ok=True, before=3) == "recovered"
    assert ended(sender, alert, ok=True, before=0) is None
    assert ended(sender, alert, ok=True, before=1) is None  # never reached "failing"
    assert ended(sender, None, ok=False, before=5) is None


def test_a_webhook_gets_the_json_and_is_retried(
    hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    hook.codes = [500, 503]  # two failures, then 200
    waits: list[float] = []
    sender = AlertSender(host="web1", wall=lambda: 1_800_000_100.0, sleep=waits.append)
    sender.start()
    with caplog.at_level(logging.INFO, "tickwork.daemon"):
        ended(sender, Alert(webhook=hook.url, failures=1, retries=3), ok=False, before=0)
        sender.close()
    (body,) = hook.bodies
    assert body == {
        "event": "failing",
        "job": "backup",
        "outcome": "failed",
        "status": "exit=3",
        "consecutive_failures": 1,
        "scheduled": "2027-01-15T08:00:00.000Z",
        "time": "2027-01-15T08:01:40.000Z",
        "host": "web1",
        "error": "exit=3\ndisk full",
        "output": "copying...\n",
    }
    assert waits == [1.0, 2.0]
    assert "alert failing for job 'backup' to http://127.0.0.1:" in caplog.text
    assert "s3cret-token" not in caplog.text  # the URL's path never reaches the log


def test_an_undeliverable_webhook_is_logged_not_lost_silently(
    hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    hook.codes = [500, 500, 500]
    sender = AlertSender(sleep=lambda s: None)
    sender.start()
    ended(sender, Alert(webhook=hook.url, retries=2), ok=False, before=0)
    sender.close()
    assert hook.bodies == []
    assert "not delivered after 3 attempt(s): HTTP 500" in caplog.text


def test_a_command_gets_the_outcome_in_its_environment_and_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    script = (
        "import json, os, sys; data = json.load(sys.stdin);"
        " data['env'] = {k: v for k, v in os.environ.items() if k.startswith('TICKWORK_')};"
        f" open({str(out)!r}, 'w').write(json.dumps(data))"
    )
    sender = AlertSender(host="web1")
    sender.start()
    ended(sender, Alert(command=(sys.executable, "-c", script)), ok=False, before=0)
    sender.close()
    data = json.loads(out.read_text())
    assert data["event"] == "failing" and data["job"] == "backup"
    inherited = {k for k in os.environ if k.startswith("TICKWORK_")}  # CI sets some
    assert {k: v for k, v in data["env"].items() if k not in inherited} == {
        "TICKWORK_EVENT": "failing",
        "TICKWORK_JOB": "backup",
        "TICKWORK_OUTCOME": "failed",
        "TICKWORK_STATUS": "exit=3",
        "TICKWORK_CONSECUTIVE_FAILURES": "1",
        "TICKWORK_SCHEDULED": "2027-01-15T08:00:00.000Z",
        "TICKWORK_HOST": "web1",
    }


def test_a_failing_command_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    sender = AlertSender()
    sender.start()
    code = "import sys; sys.stderr.write('no route to pager'); sys.exit(4)"
    ended(sender, Alert(command=(sys.executable, "-c", code)), ok=False, before=0)
    ended(sender, Alert(command=("/nonexistent/notify",)), ok=False, before=0)
    sender.close()
    assert "failed with exit=4: no route to pager" in caplog.text
    assert "command '/nonexistent/notify' could not start" in caplog.text


def test_alerts_never_wait_on_the_run_and_unsent_ones_are_logged_at_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    sender = AlertSender(sleep=lambda s: release.wait(30))
    sender.start()
    # a webhook nobody answers: each attempt fails at once, then the sender waits
    alert = Alert(webhook="http://127.0.0.1:9/x", retries=1, timeout=1.0)
    for _ in range(3):
        assert ended(sender, alert, ok=False, before=0) == "failing"  # returns at once
    sender.close(timeout=0.5)
    release.set()
    assert "not sent: the daemon stopped first" in caplog.text


def test_the_daemon_alerts_when_a_job_keeps_failing_and_when_it_recovers(
    tmp_path: Path, hook: Hook
) -> None:
    flag = tmp_path / "healthy"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            f"""
            [defaults.on_failure]
            webhook = "{hook.url}"
            failures = 2

            [[job]]
            name = "probe"
            every = "200ms"
            command = ["sh", "-c", "test -e {flag} || {{ echo down >&2; exit 3; }}"]
            """
        )
    )
    run = Run(jobs, tmp_path / "s.sqlite3")
    try:
        wait_until("the failing alert", lambda: hook.bodies, LIMIT)
        flag.touch()
        wait_until("the recovery alert", lambda: len(hook.bodies) >= 2, LIMIT)
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    failing, recovered = hook.bodies[:2]
    assert failing["event"] == "failing" and failing["consecutive_failures"] == 2
    assert failing["job"] == "probe" and "down" in failing["error"]
    assert recovered["event"] == "recovered" and recovered["outcome"] == "ok"
    assert [b["event"] for b in hook.bodies] == ["failing", "recovered"]
