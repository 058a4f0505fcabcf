"""What the README and the docs show is true.

The code shown to users runs (every README example; the imports of every ```python block
of the README and the docs, which use public modules only); relative links reach their
files and headings; and no tracked file points to a file that is not in the repository.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _readme_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 130


def test_readme_python_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Core, thread driver, cron, durable jobs: each block runs as shown and prints this."""
    monkeypatch.chdir(tmp_path)
    core, thread, cron, durable = _readme_blocks("python")
    outputs = []
    for name, example in [("core", core), ("thread", thread), ("cron", cron), ("durable", durable)]:
        exec(compile(example, f"README.md ({name})", "exec"), {"__name__": "__readme__"})
        outputs.append(capsys.readouterr().out.splitlines())
    assert outputs[0] == ["rotate logs", "probe"]
    assert outputs[1][0] == "rotate logs" and set(outputs[1][1:]) <= {"probe"}  # loaded CI: >= 0
    assert outputs[2] == ["2026-03-30 09:00:00+02:00"]  # a Friday in CET; 09:00 CEST on Monday
    assert set(outputs[3]) <= {"hello"}


def test_readme_daemon_example_validates_and_runs(tmp_path: Path) -> None:
    [jobs] = _readme_blocks("toml")
    (tmp_path / "jobs.toml").write_text(jobs)
    tickwork = [sys.executable, "-m", "tickwork"]
    check = subprocess.run(
        [*tickwork, "validate", "jobs.toml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert (check.returncode, check.stdout) == (0, "ok: 2 jobs\n"), check.stderr
    run = subprocess.run(
        [*tickwork, "run", "jobs.toml", "--for", "1s", "--state", "state.db"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "running 2 jobs from jobs.toml" in run.stderr + run.stdout


def _quick_start_commands() -> list[list[str]]:
    """The README quick start's ``sh`` blocks, each a list of commands (comments cut)."""
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quick, re.DOTALL)
    return [[line.split("#")[0].strip() for line in b.splitlines() if line.strip()] for b in blocks]


def test_readme_quick_start_has_exactly_two_commands() -> None:
    first, *then = _quick_start_commands()
    assert first == ["python3 dev.py demo", "python3 dev.py test"]
    # What follows uses what those two made: the CLI in .venv.
    assert all(c.startswith(".venv/bin/tickwork ") for block in then for c in block), then


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
    assert broken_links([*PAGES, ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"]) == []


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


# -- nothing points outside the repository --------------------------------------------------

# The contract's old home, outside the repository. Built from pieces so that this file
# does not match what it looks for.
SPEC, SHARED = "SPEC" + ".md", "sha" + "red"
OUTSIDE = re.compile(rf"{re.escape(SPEC)}|\.\./{SHARED}|\b{SHARED}/")
MD_NAME = re.compile(r"(?<![\w.-])((?:\.\./|[\w-]+/)*[\w.-]+\.md)\b")


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [name for name in out.split("\0") if name]


def dangling_references(root: Path, files: list[str], md_names: set[str]) -> list[str]:
    """Mentions of the contract's old home outside the repository, or of a missing ``.md``.

    A ``*.md`` name counts as present when it resolves from the file's folder or from the
    repository's root, or, written without a folder, when some tracked page has that name
    (``concepts.md`` in a docstring means ``docs/concepts.md``).
    """
    bad: list[str] = []
    for name in files:
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary (docs/status.png), or deleted in the work tree
        for number, line in enumerate(text.splitlines(), 1):
            for found in OUTSIDE.findall(line):
                bad.append(f"{name}:{number}: {found}")
            for ref in MD_NAME.findall(re.sub(r"https?://\S+", "", line)):
                if (path.parent / ref).exists() or (root / ref).exists():
                    continue
                if "/" not in ref and ref in md_names:
                    continue
                bad.append(f"{name}:{number}: {ref} (no such file)")
    return bad


def test_no_tracked_file_points_to_a_file_that_is_not_there() -> None:
    files = _tracked("README.md", "docs", "src", "tests", "bench", "examples")
    md_names = {Path(name).name for name in _tracked() if name.endswith(".md")}
    # This file's own link-check test names made-up pages (a.md, c.md); it is still
    # searched for the old pointers.
    own = "tests/test_docs.py"
    assert dangling_references(ROOT, [f for f in files if f != own], md_names) == []
    assert [
        ref for ref in dangling_references(ROOT, [own], md_names) if "no such file" not in ref
    ] == []


def test_the_reference_check_finds_what_it_should(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cron.md").write_text("# Cron\n")
    (tmp_path / "mod.py").write_text(
        '"""See docs/cron.md and cron.md, https://x.y/NOTES.md."""\n'
        f"# the contract is {SPEC}, in ../{SHARED}/ or in {SHARED}/x\n"
        "# see docs/gone.md and research/cron.md\n"
    )
    assert dangling_references(tmp_path, ["mod.py"], {"cron.md"}) == [
        f"mod.py:2: {SPEC}",
        f"mod.py:2: ../{SHARED}",
        f"mod.py:2: {SHARED}/",
        f"mod.py:2: {SPEC} (no such file)",
        "mod.py:3: docs/gone.md (no such file)",
        "mod.py:3: research/cron.md (no such file)",
    ]


# -- the imports the docs teach ------------------------------------------------------------


def doc_imports(pages: list[Path]) -> list[tuple[str, str, list[str]]]:
    """``(page, module, names)`` for every tickwork import in a ```python block."""
    found: list[tuple[str, str, list[str]]] = []
    for page in pages:
        for block in BLOCK.findall(page.read_text(encoding="utf-8")):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [alias.name for alias in node.names]
                    found.append((page.name, node.module, names))
                elif isinstance(node, ast.Import):
                    found += [(page.name, alias.name, []) for alias in node.names]
    return [
        (page, module, names) for page, module, names in found if module.split(".")[0] == "tickwork"
    ]


def test_the_docs_import_only_public_modules_and_names_that_exist() -> None:
    imports = doc_imports(PAGES)
    assert len(imports) >= 20  # README and docs together; the parse found them
    private = [
        f"{page}: {module}"
        for page, module, _ in imports
        if any(part.startswith("_") for part in module.split("."))
    ]
    assert private == []
    lines = sorted(
        {
            f"from {module} import {', '.join(names)}" if names else f"import {module}"
            for _, module, names in imports
        }
    )
    script = "\n".join(
        f"try:\n    {line}\nexcept Exception as exc:\n    print({line!r}, '->', repr(exc))"
        for line in lines
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_import_check_finds_a_private_module(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```python\nimport os\nfrom tickwork._daemon import run_daemon\n"
        "import tickwork.metrics\n```\n"
    )
    assert doc_imports([page]) == [
        ("p.md", "tickwork._daemon", ["run_daemon"]),
        ("p.md", "tickwork.metrics", []),
    ]


# -- docs/recipes.md: its code is the code the recipe tests run ------------------------------


def blocks_not_in_examples(page: Path, examples: list[Path]) -> list[str]:
    """The ```python blocks of ``page`` that are not, verbatim, part of an example file."""
    sources = [path.read_text(encoding="utf-8") for path in examples]
    return [
        block.splitlines()[0]
        for block in BLOCK.findall(page.read_text(encoding="utf-8"))
        if not any(block in source for source in sources)
    ]


def test_every_recipe_block_is_an_excerpt_of_a_tested_example() -> None:
    """tests/test_recipes.py runs the examples; the page shows parts of them, unchanged."""
    page = ROOT / "docs" / "recipes.md"
    assert len(BLOCK.findall(page.read_text())) >= 6
    examples = sorted((ROOT / "examples").rglob("*.py"))
    assert blocks_not_in_examples(page, examples) == []


def test_the_excerpt_check_finds_a_block_that_differs(tmp_path: Path) -> None:
    (tmp_path / "ex.py").write_text("def f() -> int:\n    return 1\n\n\nX = 2\n")
    page = tmp_path / "p.md"
    page.write_text("```python\ndef f() -> int:\n    return 1\n```\n```python\nX = 3\n```\n")
    assert blocks_not_in_examples(page, [tmp_path / "ex.py"]) == ["X = 3"]


# -- docs/migrating.md: the tickwork side of every mapping runs ------------------------------

MYAPP_TASKS = """
def send_report(to): pass
def probe(): pass
def backup(): pass
def sync_users(): pass
def rollup(): pass
def refresh(): pass
def migrate_once(): pass
def send_reminder(user_id): pass
def deliver(url, event): pass
"""


def test_migrating_tickwork_blocks_run_and_the_others_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ```python blocks (tickwork) run in order; the ```py blocks (Celery, APScheduler)
    are not runnable here (no broker, no APScheduler) but must be valid Python."""
    from tickwork.stores.contract import OneOffCounts
    from tickwork.stores.sqlite import SQLiteStore

    text = (ROOT / "docs" / "migrating.md").read_text()
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "tasks.py").write_text(MYAPP_TASKS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    theirs = re.findall(r"```py\n(.*?)```", text, re.DOTALL)
    assert len(theirs) >= 3
    for n, block in enumerate(theirs):
        compile(block, f"docs/migrating.md (py block {n})", "exec")
    ours = BLOCK.findall(text)
    assert len(ours) >= 5
    namespace: dict[str, object] = {"__name__": "__migrating__"}
    try:
        for n, block in enumerate(ours):
            exec(compile(block, f"docs/migrating.md (python block {n})", "exec"), namespace)
        with SQLiteStore(str(tmp_path / "jobs.db")) as check:
            jobs = {job.id: job for job in check.jobs()}
            assert set(jobs) == {
                "send-report",
                "probe",
                "backup",
                "sync-users",
                "rollup",
                "refresh",
                "launch",
            }
            assert jobs["probe"].paused is False  # paused, then resumed
            assert jobs["rollup"].spec.grace == 300 and jobs["refresh"].spec.overlap == "allow"
            actions = [(a.action, a.actor) for a in check.actions("probe")]  # newest first
            assert actions == [("resume", "alice"), ("pause", "alice")]
            assert check.oneoff_counts() == [  # the delayed jobs: one cancelled
                OneOffCounts("myapp.tasks:deliver", pending=1),
                OneOffCounts("myapp.tasks:send_reminder", pending=4, dropped=1),
            ]
    finally:
        store = namespace.get("store")
        if isinstance(store, SQLiteStore):
            store.close()
        sys.modules.pop("myapp.tasks", None)
        sys.modules.pop("myapp", None)


def test_a_newcomer_gets_from_the_two_commands_to_the_jobs_and_the_status_page(
    tmp_path: Path,
) -> None:
    """The quick start as typed, in order, from the clone: the demo (shortened with
    --for), then each command after it and the example file's own suggestions."""
    [two, after] = _quick_start_commands()
    demo, _test = two  # the whole suite is this suite
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),  # where the demo's state is kept
        "HOUSEKEEPING_DIR": str(tmp_path / "files"),
    }

    def run(command: str, *more: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command) + list(more)
        argv[0] = sys.executable if argv[0] == "python3" else argv[0]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    shown = run(demo, "--for", "10s")
    assert shown.returncode == 0, shown.stderr
    assert " tickwork: --for time is up: shutting down" in shown.stderr
    # The demo ends by naming the commands the README shows next.
    assert [c in shown.stdout for c in after] == [True] * len(after), shown.stdout
    jobs, history, serve = after
    listed = run(jobs)
    assert listed.returncode == 0, listed.stderr
    names = ("rotate-logs", "probe-api", "clean-tmp", "berlin-report", "weekday-digest")
    assert all(f"\n{name} " in listed.stdout for name in names), listed.stdout
    ran = run(history)
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr  # the demo's runs
    header = (ROOT / "examples" / "housekeeping.toml").read_text().split("\n\n", 1)[0]
    for line in re.findall(r"^#     (tickwork (?:validate|jobs) .*?)(?:   #.*)?$", header, re.M):
        suggested = run(".venv/bin/" + line)
        assert suggested.returncode == 0, (line, suggested.stdout, suggested.stderr)
    _status_page_answers(serve, env, tmp_path / "serve.log")


def _status_page_answers(serve: str, env: dict[str, str], log: Path) -> None:
    """``serve`` (``run --http :PORT``) on a free port: its status page lists the jobs.

    A port found free can be taken by another test's server before the daemon binds it
    (the suite runs in parallel): the daemon then says so and exits, and another port
    is tried.
    """
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if _serve_once(serve, env, log, port):
            return
    raise AssertionError(f"no free port in 5 tries: {log.read_text()}")


def _serve_once(serve: str, env: dict[str, str], log: Path, port: int) -> bool:
    """`_status_page_answers` on ``port``; False if the port was taken meanwhile."""
    argv = shlex.split(re.sub(r":\d+\b", f":{port}", serve))
    url = f"http://127.0.0.1:{port}/"
    with log.open("w") as out, subprocess.Popen(argv, cwd=ROOT, env=env, stderr=out) as proc:
        try:
            give_up = time.monotonic() + 120  # only a hang gets there
            while f"status page at {url}," not in log.read_text():
                if proc.poll() is not None and "Address already in use" in log.read_text():
                    return False
                assert proc.poll() is None and time.monotonic() < give_up, log.read_text()
                time.sleep(0.1)
            with urllib.request.urlopen(url, timeout=60) as reply:
                page = reply.read().decode()
            assert reply.status == 200 and "rotate-logs" in page and "weekday-digest" in page
            proc.send_signal(signal.SIGINT)  # Ctrl-C
            assert proc.wait(120) == 0, log.read_text()
        finally:
            proc.kill()
    return True
