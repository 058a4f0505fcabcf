"""``output = "log" | "tail" | "discard"``: what a daemon job's output becomes.

A real ``tickwork run`` process; its log lines and the slot ledger of its state are read
back.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.test_daemon_e2e import Run
from tickwork.stores.sqlite import SQLiteStore


def test_output_modes_log_lines_and_keep_tails_in_the_ledger(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "chatty"
            in = "0s"
            command = ["sh", "-c", "echo first line; echo second line"]

            [[job]]
            name = "tailed"
            in = "0s"
            output = "tail"
            command = ["sh", "-c", "echo kept quietly"]

            [[job]]
            name = "silent"
            in = "0s"
            output = "discard"
            command = ["sh", "-c", "echo never kept"]
            """
        )
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state)
    try:
        run.wait_line(" chatty stdout | second line")
        for name in ("tailed", "silent"):
            run.wait_line(f" {name} finished ok")
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    text = run.text()
    assert " chatty stdout | first line" in text
    assert "kept quietly" not in text and "never kept" not in text
    with SQLiteStore(state) as store:
        outputs = {e.job_id.partition("/")[2]: e.output for e in store.history()}
    assert outputs == {
        "chatty": "first line\nsecond line\n",
        "tailed": "kept quietly\n",
        "silent": None,
    }


def test_a_command_over_its_timeout_is_recorded_as_timeout(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "stuck"\nin = "0s"\ntimeout = "300ms"\ncommand = ["sleep", "30"]\n'
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state)
    try:
        run.wait_line(" stuck failed timeout")
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    with SQLiteStore(state) as store:
        (entry,) = store.history()
        (job,) = store.jobs()
    assert entry.outcome == "timeout" and (entry.error or "").startswith("timeout")
    assert job.last_run is not None and job.last_run.outcome == "timeout"
