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
