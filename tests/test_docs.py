"""The code shown to users runs: every ```python block of the README and the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    [example] = BLOCK.findall((ROOT / "README.md").read_text())
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out == "rotate logs\nprobe\n"


def test_readme_quick_start_has_exactly_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", quick, re.DOTALL)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["python3 dev.py demo", "python3 dev.py test"]


def test_drivers_pause_resume_trigger_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "drivers.md").read_text()
    section = text.split("## Pause, resume and trigger a task", 1)[1].split("\n## ", 1)[0]
    [example] = BLOCK.findall(section)
    exec(compile(example, "docs/drivers.md", "exec"), {})
    assert capsys.readouterr().out == (
        "probe at 10.0\nTrue backend maintenance\nprobe at 35.0\n5.0\nprobe at 40.0\n"
    )
