#!/usr/bin/env python3
"""Developer entry point: the only commands a fresh clone needs.

    python3 dev.py demo     run tickwork's main job: examples/housekeeping.toml for 20 s
    python3 dev.py test     run the whole test suite
    python3 dev.py lint     ruff (lint + format check) and mypy --strict on src/

Each command creates ``.venv`` next to this file on first use (stdlib ``venv``
and ``pip`` only) and reinstalls the project into it whenever ``pyproject.toml``
changes. Extra arguments after ``test`` go to pytest, after ``demo`` to ``tickwork run``.

``demo`` runs ``tickwork run examples/housekeeping.toml --for 20s`` with its state and
the jobs' files in a fresh temporary directory, so every demo starts from nothing and
shows runs, an overlap skip and a failing probe being retried. ``python -m tickwork
demo`` is a narrated tour of the in-memory ``Scheduler``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".tickwork-installed"


def _ensure_venv() -> None:
    if not PY.exists():
        print(f"creating {VENV.relative_to(ROOT)} ...", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    print("installing tickwork and its dev tools into .venv ...", flush=True)
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q"]
    if subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]"]).returncode != 0:
        sys.exit("dev.py: installing into .venv failed (see pip's output above)")
    STAMP.write_text(want)


def _run(*args: str, env: dict[str, str] | None = None) -> int:
    return subprocess.run([str(PY), *args], cwd=ROOT, env=env).returncode


def _demo(rest: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="tickwork-demo-") as tmp:
        env = {**os.environ, "HOUSEKEEPING_DIR": tmp}
        example = "examples/housekeeping.toml"
        state = os.path.join(tmp, "state.sqlite3")
        print(f"$ tickwork run {example} --for 20s --state {state}", flush=True)
        args = ["-m", "tickwork", "run", example, "--for", "20s", "--state", state, *rest]
        return _run(*args, env=env)


def main(argv: list[str]) -> int:
    """Run one developer command; return its exit status."""
    if not argv or argv[0] not in {"demo", "test", "lint"}:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    _ensure_venv()
    if cmd == "demo":
        return _demo(rest)
    if cmd == "test":
        return _run("-m", "pytest", *rest)
    status = 0
    for tool in (
        ["-m", "ruff", "check", "."],
        ["-m", "ruff", "format", "--check", "."],
        ["-m", "mypy"],
    ):
        print("$", " ".join(tool[1:]), flush=True)
        status |= _run(*tool)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
