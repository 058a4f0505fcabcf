"""Dead-man alerts through ``tickwork run``: the jobs-file keys, and two daemons on one
PostgreSQL database sending one alert and one recovery between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tickwork._daemon.deadman import rules_for
from tickwork._daemon.jobsfile.config import load_config
from tickwork._durable.watch import AlertRules
from tickwork.stores.postgres import PostgresStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def _wait_for(what: str, check: object, deadline: float = 60.0) -> None:
    give_up = time.monotonic() + deadline
    while not check():  # type: ignore[operator]
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_two_daemons_on_one_database_send_one_alert_and_one_recovery(
    fresh_database: str, tmp_path: Path
) -> None:
    sent = tmp_path / "alerts.txt"
    sent.touch()
    report = f"echo $TICKWORK_EVENT $TICKWORK_JOB $TICKWORK_CONDITION >> {sent}"
    fixed = tmp_path / "fixed"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            f"""\
            [[job]]
            name = "flaky"
            command = ["test", "-e", "{fixed}"]
            every = "300ms"
            alert_if_no_success = "1s"

            [job.on_failure]
            command = ["sh", "-c", "{report}"]
            failures = 1000
            """
        )
    )
    argv = [
        sys.executable, "-m", "tickwork", "run", str(jobs), "--database", fresh_database,
        "--poll", "200ms",
    ]  # fmt: skip
    procs = [
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        _wait_for("the alert", lambda: "dead-man " in sent.read_text())
        time.sleep(1.5)  # both daemons look several times more while it holds
        fixed.touch()
        _wait_for("the recovery", lambda: "dead-man-recovered" in sent.read_text())
        time.sleep(1.5)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        errs = [proc.communicate(timeout=60)[1] for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert sent.read_text().splitlines() == [
        "dead-man flaky no_success",
        "dead-man-recovered flaky no_success",
    ]
    with PostgresStore(fresh_database) as store:
        actions = [(a.action, a.job_id) for a in store.actions("jobs/flaky")]
    assert actions == [("alert-cleared", "jobs/flaky"), ("alert", "jobs/flaky")]
    shown = subprocess.run(
        [sys.executable, "-m", "tickwork", "history", str(jobs), "--database", fresh_database],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (line,) = [x for x in shown.splitlines() if "[alert]" in x]
    assert "  flaky  [alert]  by " in line and "no_success: no successful run yet" in line


def test_the_keys_become_rules(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """\
            [defaults]
            on_failure = { command = ["true"] }
            alert_if_running = "1h"

            [[job]]
            name = "a"
            command = ["true"]
            every = "1m"
            alert_if_no_success = "26h"
            alert_if_missed = true
            alert_if_late = "5m"

            [[job]]
            name = "b"
            command = ["true"]
            every = "1m"
            alert_if_running = 0
            """
        )
    )
    a, b = load_config(str(jobs)).jobs
    assert rules_for(a) == AlertRules(no_success=26 * 3600, missed=True, late=300, running=3600)
    assert rules_for(b) == AlertRules()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'alert_if_late = "5m"',
            'job "a": alert_if_late: needs on_failure (a command and/or webhook): the alert is'
            " sent through it",
        ),
        (
            'alert_if_no_success = "-1h"',
            "job \"a\": alert_if_no_success: duration must look like '30s', '5m', '1h30m' or"
            " '250ms', got '-1h'",
        ),
        (
            'alert_if_missed = "yes"',
            "job \"a\": alert_if_missed: must be true or false, got 'yes'",
        ),
        (
            "alert_if_running = []",
            "job \"a\": alert_if_running: must be a duration such as '30s' or '1h30m', got []",
        ),
    ],
)
def test_validate_refuses_bad_values(tmp_path: Path, line: str, message: str) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f'[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1m"\n{line}\n')
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(jobs)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == f"{jobs}:5: {message}"


def test_the_sender_reports_what_it_could_not_deliver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickwork._daemon.alerts import AlertNotSent, AlertSender
    from tickwork._daemon.jobsfile.config import Alert
    from tickwork._durable.watch import WatchAlert

    # The command inherits this process's environment: CI sets TICKWORK_* variables of
    # its own (TICKWORK_REFUSE_SKIPS, ...), which are not the sender's to check.
    for name in [n for n in os.environ if n.startswith("TICKWORK_")]:
        monkeypatch.delenv(name)

    out = tmp_path / "env.txt"
    message = WatchAlert("jobs/backup", "running", "alert", "stuck", 100.0, 160.0, "node")
    sender = AlertSender(host="web1")
    script = f"env | grep ^TICKWORK_ | sort > {out}; cat >> {out}"
    sender.dead_man(Alert(command=("sh", "-c", script)), message)
    assert out.read_text().splitlines()[:6] == [
        "TICKWORK_CONDITION=running",
        "TICKWORK_DETAIL=stuck",
        "TICKWORK_EVENT=dead-man",
        "TICKWORK_HOST=web1",
        "TICKWORK_JOB=backup",
        "TICKWORK_SINCE=1970-01-01T00:01:40.000Z",
    ]
    assert '"event": "dead-man", "job": "backup", "condition": "running"' in out.read_text()
    with pytest.raises(AlertNotSent, match=r"^dead-man alert for job 'backup' not delivered$"):
        sender.dead_man(Alert(command=("false",)), message)
