from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tickwork.__main__ import main

ROOT = Path(__file__).resolve().parent.parent

BROKEN = """\
[[job]]
name = "rotate"
command = ["true"]
every = "30 sec"

[[job]]
name = "rotate"
cron = "* * * * *"
shell = true
command = ["true"]
"""


def test_validate_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1s"\n\n'
        '[[job]]\nname = "b"\ncommand = ["true"]\nin = "1s"\nenabled = false\n'
    )
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr() == ("ok: 2 jobs (1 disabled)\n", "")


def test_validate_reports_every_problem_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(BROKEN)
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}:4: job \"rotate\": every: duration must look like '30s', '5m', '1h30m' or"
        " '250ms', got '30 sec'",
        f'{path}:7: job "rotate": name: duplicate job name (first defined on line 2)',
        f'{path}:10: job "rotate": command: with shell = true, must be a non-empty string,'
        " got ['true']",
        "tickwork validate: 3 problems found",
    ]


def test_validate_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "nope.toml")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{tmp_path / 'nope.toml'}: cannot read the file: No such file or directory",
        "tickwork validate: 1 problem found",
    ]


def test_validate_the_example_as_a_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(ROOT / "examples/housekeeping.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok: 6 jobs\n", "")


HIDDEN = """\
[[job]]
name = "load"
command = ["true"]
every = "1m"

[[job]]
name = "report"
command = ["true"]
at = 2026-12-02T17:00:00
after = ["lod"]

[[job]]
name = "spread"
command = ["true"]
cron = "H 25 * * *"
stable_jitter = true
calendar = "work"

[[job]]
name = "alert"
shell = "yes"
command = ["true"]
every = "1m"
args = [1]
on_failure = { command = [], failures = 0 }
"""


def test_validate_reports_every_problem_of_a_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A bad schedule hides neither ``after`` nor the calendar keys; nor one key another."""
    path = tmp_path / "jobs.toml"
    path.write_text(HIDDEN)
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f'{path}:9: job "report": at: needs a UTC offset (2026-12-02T17:00:00Z or +01:00),'
        " got 2026-12-02T17:00:00",
        f'{path}:10: job "report": after: unknown job "lod" (did you mean "load"?): name a job'
        " of this file",
        f'{path}:15: job "spread": cron: hour: invalid value `25` in `H 25 * * *`',
        f'{path}:16: job "spread": stable_jitter: needs a jitter to keep stable',
        f'{path}:17: job "spread": calendar: must name a [calendar.NAME] table (defined: none),'
        " got 'work'",
        f"{path}:21: job \"alert\": shell: must be true or false, got 'yes'",
        f'{path}:24: job "alert": args: applies only to call jobs',
        f'{path}:25: job "alert": on_failure: command must be a non-empty array of strings (an'
        " argv), got []; failures must be an integer from 1 to 1000, got 0",
        "tickwork validate: 8 problems found",
    ]
