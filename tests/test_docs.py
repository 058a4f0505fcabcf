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


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken_links(pages: list[Path]) -> list[str]:
    """Relative links in ``pages`` to a file that does not exist or a heading it lacks."""
    bad: list[str] = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", link):
                continue  # https:, mailto:
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                bad.append(f"{page.name}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
                bad.append(f"{page.name}: {link} (no such heading in {target.name})")
    return bad


def test_every_relative_link_in_the_docs_reaches_its_file_and_heading() -> None:
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"]
    pages += sorted((ROOT / "docs").glob("*.md"))
    assert broken_links(pages) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Runtime control: pause, resume\n\n## `tickwork run`\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#runtime-control-pause-resume) [ok](a.md#tickwork-run) [web](https://x.y/z)"
        " [gone](c.md) [short](a.md#runtime-control)\n```\n[code](nowhere.md)\n```\n"
    )
    assert broken_links([page]) == [
        "b.md: c.md (no such file)",
        "b.md: a.md#runtime-control (no such heading in a.md)",
    ]
