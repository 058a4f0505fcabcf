"""``python3 dev.py package``: the sdist and the wheel, built, checked, installed and run.

CI runs it after the tests (``.ci/run``). Everything happens in one temporary folder
(under ``TMPDIR``), removed at the end; each step prints what it checked:

1. build the sdist, and the wheel from it (``python -m build``: hatchling, isolated);
2. check both file lists against the allow-lists below (no tests, benches or stray files
   in the wheel; no .venv, mutants/ or caches in the sdist) and the wheel's metadata
   (summary, license, project URLs, a classifier for each supported Python);
3. install the wheel alone into a fresh venv (no dev tools) and there: only the runtime
   dependencies are installed, ``import tickwork`` works, ``tickwork --version`` says the
   version, and ``tickwork run`` runs a two-job file for a few seconds, both jobs running;
4. install ``wheel[postgres,metrics,otel]`` into another venv and import the extras there;
5. run the core suite (`CORE_TESTS`, stdlib + pytest) against the installed wheel on the
   newest Python >= 3.11 found here, in its own venv. Finding only 3.11 fails the step,
   after running the suite there: the classifiers claim newer versions nobody tested.

Exit status 0 when every check passed, else 1 (each failure printed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]
VERSION = PYPROJECT["project"]["version"]
SUPPORTED = ("3.11", "3.12", "3.13")

#: What the wheel may hold: the package's modules, its typing marker, its metadata.
WHEEL_ALLOWED = (
    r"tickwork/([a-z_]+/){0,2}[a-z_]+\.py",  # sub-packages such as _daemon/web
    r"tickwork/py\.typed",
    rf"tickwork-{re.escape(VERSION)}\.dist-info/(METADATA|WHEEL|RECORD|entry_points\.txt)",
    rf"tickwork-{re.escape(VERSION)}\.dist-info/licenses/LICENSE",
)
#: What the sdist may hold (below its top folder): the source with its tests and docs.
SDIST_ALLOWED = (
    r"(src/tickwork|tests|bench|tools|examples)/.+\.(py|toml|txt|md|crontab|json|sh|ini)",
    r"bench/[a-z_]+\.js",  # the pg-boss side of bench/peers.py (Node.js)
    r"src/tickwork/py\.typed",
    r"tests/crontabs/.+",
    r"tests/fixtures/upgrade/[a-z0-9-]+\.(sqlite|sql)",  # states written by old releases
    r"docs/.+\.(md|png)",
    r"(README|CHANGELOG)\.md|LICENSE|pyproject\.toml|dev\.py|PKG-INFO|\.gitignore",
)
#: Never in either: what a working clone accumulates.
STRAY = re.compile(r"(^|/)(\.venv|mutants|__pycache__|\.\w+_cache|\.hypothesis|build|dist)/|\.pyc$")

#: The core suite for the newest Python: tests that need the standard library and the
#: test tools below only (no database server, no extras).
CORE_TESTS = (
    "tests/test_scheduler.py",
    "tests/test_scheduler_model.py",
    "tests/test_schedules.py",
    "tests/test_cron.py",
    "tests/test_due_times.py",
    "tests/test_clock_steps.py",
    "tests/test_job_kinds.py",
    "tests/test_task_api.py",
    "tests/test_thread.py",
    "tests/test_asyncio.py",
    "tests/test_testing_drivers.py",
    "tests/test_args.py",
    "tests/test_decide.py",
    "tests/test_durable.py",
    "tests/test_store_sqlite.py",
    "tests/test_exports.py",
    "tests/test_daemon_config.py",
    "tests/test_timefmt.py",
)
#: The dev pins the core suite needs (versions read from pyproject.toml); mypy: a test
#: checks that the public API types under mypy --strict on that Python too.
CORE_TOOLS = ("pytest", "pytest-timeout", "hypothesis", "croniter", "mypy")

TWO_JOBS = """\
[[job]]
name = "first"
command = ["sh", "-c", "echo ran >> {out}/first.txt"]
every = "1s"

[[job]]
name = "second"
command = ["sh", "-c", "echo ran >> {out}/second.txt"]
every = "1s"
"""


class Failed(Exception):
    """A check failed; its message says which and why."""


def _say(text: str) -> None:
    print(f"package: {text}", flush=True)


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run a command; its stdout, or `Failed` with its output if it fails."""
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise Failed(f"{' '.join(str(a) for a in args)} exited {done.returncode}:\n{tail}")
    return done.stdout


def _pin(name: str) -> str:
    """The ``name==version`` pin of the dev extra."""
    for req in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        if re.split(r"[=\[]", req)[0].lower() == name:
            return str(req)
    raise Failed(f"no pin for {name} in pyproject.toml's dev extra")


def _build(out: Path) -> tuple[Path, Path]:
    python = ROOT / ".venv" / "bin" / "python"
    # No --sdist/--wheel: the wheel is built from the sdist, which shows the sdist is whole.
    _run(python, "-m", "build", "--outdir", out, ROOT, cwd=ROOT)
    [sdist] = out.glob("*.tar.gz")
    [wheel] = out.glob("*.whl")
    _say(f"built {sdist.name} and {wheel.name}")
    return sdist, wheel


def _check_files(kind: str, names: list[str], allowed: tuple[str, ...]) -> None:
    bad = [n for n in names if STRAY.search(n) or not any(re.fullmatch(a, n) for a in allowed)]
    if bad:
        raise Failed(f"{kind} holds files outside its allow-list: {bad[:20]}")
    _say(f"{kind}: {len(names)} files, all on the allow-list")


def _check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        meta = Parser().parsestr(z.read(f"tickwork-{VERSION}.dist-info/METADATA").decode())
    _check_files("wheel", names, WHEEL_ALLOWED)
    if not any(n.startswith("tickwork/_daemon/") for n in names):
        raise Failed("wheel: tickwork/_daemon/ is missing")
    problems = []
    if not meta["Summary"]:
        problems.append("no Summary")
    if meta["License-Expression"] != "MIT":
        problems.append(f"License-Expression is {meta['License-Expression']!r}")
    urls = {u.split(",")[0].strip() for u in meta.get_all("Project-URL") or []}
    if missing := {"Homepage", "Documentation", "Changelog", "Issues"} - urls:
        problems.append(f"no project URL for {sorted(missing)}")
    classifiers = set(meta.get_all("Classifier") or [])
    for v in SUPPORTED:
        if f"Programming Language :: Python :: {v}" not in classifiers:
            problems.append(f"no classifier for Python {v}")
    if meta["Requires-Python"] != f">={SUPPORTED[0]}":
        problems.append(f"Requires-Python is {meta['Requires-Python']!r}")
    if problems:
        raise Failed("wheel metadata: " + "; ".join(problems))
    _say(
        f"wheel metadata: summary, license MIT, {len(urls)} project URLs,"
        f" classifiers for Python {', '.join(SUPPORTED)}"
    )


def _check_sdist(sdist: Path) -> None:
    top = sdist.name.removesuffix(".tar.gz") + "/"
    with tarfile.open(sdist) as t:
        names = [m.name.removeprefix(top) for m in t.getmembers() if m.isfile()]
    _check_files("sdist", names, SDIST_ALLOWED)
    for needed in ("pyproject.toml", "LICENSE", "src/tickwork/__init__.py", "tests/conftest.py"):
        if needed not in names:
            raise Failed(f"sdist: {needed} is missing")


def _venv(where: Path, python: str = sys.executable) -> Path:
    """A fresh venv at ``where`` (by ``python``); its python."""
    if python == sys.executable:
        venv.EnvBuilder(with_pip=True, clear=True).create(where)
    else:
        _run(python, "-m", "venv", "--clear", where)
    return where / "bin" / "python"


def _pip(python: Path, *args: str | Path) -> None:
    _run(python, "-m", "pip", "--disable-pip-version-check", "-q", "install", *args)


def _bare(tmp: Path, wheel: Path) -> None:
    """The wheel alone in a fresh venv: its dependencies only, the CLI, a daemon."""
    python = _venv(tmp / "bare")
    _pip(python, wheel)
    listed = json.loads(_run(python, "-m", "pip", "list", "--format=json"))
    names = {p["name"].lower() for p in listed} - {"pip", "setuptools"}
    runtime = {re.split(r"[<>=\[ ]", d)[0].lower() for d in PYPROJECT["project"]["dependencies"]}
    if names != runtime | {NAME}:
        raise Failed(f"bare venv holds {sorted(names)}, not tickwork and {sorted(runtime)}")
    _say(f"bare venv: installed tickwork with {', '.join(sorted(runtime))} and nothing else")
    public = "tickwork, tickwork.daemon, tickwork.stores, tickwork.stores.sqlite, tickwork.testing"
    code = f"import {public}; tickwork.DurableScheduler; print(tickwork.__file__)"
    where = _run(python, "-I", "-c", code)
    if "site-packages" not in where:
        raise Failed(f"import tickwork found {where.strip()}, not the installed wheel")
    _say(f"bare venv: import {public} (from site-packages)")
    said = _run(tmp / "bare" / "bin" / "tickwork", "--version").strip()
    if VERSION not in said:
        raise Failed(f"tickwork --version said {said!r}, not {VERSION}")
    _say(f"bare venv: tickwork --version: {said}")
    out = tmp / "jobs"
    out.mkdir()
    (out / "jobs.toml").write_text(TWO_JOBS.format(out=out))
    tickwork = tmp / "bare" / "bin" / "tickwork"
    _run(tickwork, "run", out / "jobs.toml", "--for", "4s", "--state", out / "state.sqlite3")
    runs = {
        job: len((out / f"{job}.txt").read_text().splitlines())
        if (out / f"{job}.txt").exists()
        else 0
        for job in ("first", "second")
    }
    if not all(runs.values()):
        raise Failed(f"tickwork run for 4 s on two jobs: runs {runs}")
    _say(f"bare venv: tickwork run for 4 s ran both jobs ({runs})")


def _extras(tmp: Path, wheel: Path) -> None:
    python = _venv(tmp / "extras")
    _pip(python, f"{wheel}[postgres,metrics,otel]")
    modules = ("tickwork.stores.postgres", "tickwork.metrics", "tickwork.tracing")
    _run(python, "-c", "; ".join(f"import {m}" for m in modules))
    _say(f"extras venv [postgres,metrics,otel]: imported {', '.join(modules)}")


def _interpreters() -> dict[tuple[int, int], str]:
    """Every Python >= 3.11 found here: on PATH and in pyenv's versions, by version."""
    candidates: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidates += [str(p) for p in Path(folder or ".").glob("python3.1[0-9]")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in pyenv.glob("3.*/bin/python3")]
    found: dict[tuple[int, int], str] = {}
    for exe in candidates:
        try:
            done = subprocess.run(
                [exe, "-c", "import sys; print(*sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if done.returncode == 0 and len(parts := done.stdout.split()) == 2:
            version = (int(parts[0]), int(parts[1]))
            if version >= (3, 11):
                found.setdefault(version, exe)
    return found


def _newest(tmp: Path, wheel: Path) -> None:
    """The core suite against the wheel, on the newest Python found here."""
    found = _interpreters()
    if not found:
        raise Failed("no Python >= 3.11 found on PATH or in pyenv")
    version = max(found)
    shown = ", ".join(f"{a}.{b}" for a, b in sorted(found))
    _say(f"Pythons found: {shown}; the core suite runs on {version[0]}.{version[1]}")
    python = _venv(tmp / "newest", found[version])
    _pip(python, wheel, *(_pin(tool) for tool in CORE_TOOLS))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = _run(
        python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CORE_TESTS, cwd=ROOT, env=env
    )
    _say(
        f"Python {version[0]}.{version[1]}, core suite on the wheel: {out.strip().splitlines()[-1]}"
    )
    if version == (3, 11):
        raise Failed(
            f"only Python 3.11 is here: the classifiers claim {', '.join(SUPPORTED[1:])} too;"
            " install a newer one (pyenv install 3.13) so that they are tested"
        )


def main() -> int:
    """Run every check; 0 if all passed."""
    started = time.monotonic()
    failures = []
    with tempfile.TemporaryDirectory(prefix="tickwork-package-") as name:
        tmp = Path(name)
        try:
            sdist, wheel = _build(tmp / "dist")
            _check_wheel(wheel)
            _check_sdist(sdist)
        except Failed as exc:
            _say(f"FAILED: {exc}")
            return 1
        for step in (_bare, _extras, _newest):
            try:
                step(tmp, wheel)
            except Failed as exc:
                failures.append(step.__name__)
                _say(f"FAILED: {exc}")
        shutil.rmtree(tmp / "newest", ignore_errors=True)
    took = time.monotonic() - started
    _say(f"{'FAILED: ' + ', '.join(failures) if failures else 'all checks passed'} ({took:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
