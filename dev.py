#!/usr/bin/env python3
"""Developer entry point: the only commands a fresh clone needs.

    python3 dev.py demo     run tickwork's main job: examples/housekeeping.toml for 20 s
    python3 dev.py test     run the whole test suite on 4 workers (--fast: without the soak tier)
    python3 dev.py lint     ruff (lint + format check) and mypy --strict on src/
    python3 dev.py mutate   mutation testing (mutmut) of the run policy and due-time arithmetic
    python3 dev.py package  build the sdist and the wheel, check them, install and run them
                            in fresh venvs, the core suite on the newest Python here

Each command creates ``.venv`` next to this file on first use (stdlib ``venv``
and ``pip`` only) and reinstalls the project into it whenever ``pyproject.toml``
changes. Extra arguments after ``test`` go to pytest, after ``demo`` to ``tickwork run``.

``test`` runs pytest with `TEST_WORKERS` (pytest-xdist, ``--dist loadfile``: each file
whole in one worker, its module fixtures once); each worker starts its own throwaway
PostgreSQL. ``-n 0`` (or any ``-n``/``--numprocesses`` of your own) replaces that. It
runs both tiers in one session, as CI does; ``test --fast`` leaves out the soak tier
(tests marked ``slow``: crash loops, multi-node runs of thousands of jobs), and
``test -m slow`` runs the soak tier alone (any ``-m`` of your own is passed on).

``mutate`` (not part of CI; minutes, not seconds) mutates the functions in `MUTATE` and runs
the fast tests named in ``pyproject.toml`` (``[tool.mutmut]``) against each mutant, one
at a time, then prints the tally and the surviving mutants (``mutmut show NAME`` shows
one). Arguments: mutant-name globs to run instead of all of `MUTATE`, and options for
``mutmut run`` (``--max-children 2``). Its work folder is ``mutants/``. See
``docs/testing.md``, "Mutation testing".

``package`` (CI runs it) is ``tools/package.py``: see its docstring for every check.

``demo`` runs ``tickwork run examples/housekeeping.toml --for 20s`` (the jobs' files in a
fresh temporary directory) and shows runs, an overlap skip and a failing probe being
retried. Its state is the file's default one (``tickwork run --help``, ``--state``), kept
after the demo, so that ``.venv/bin/tickwork jobs examples/housekeeping.toml`` shows what
it did; a second demo carries on from it. ``python -m tickwork demo`` is a narrated tour
of the in-memory ``Scheduler``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
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

#: What `python3 dev.py mutate` mutates (mutmut's mutant-name globs): the durable run
#: policy, whole, and the core's due-time arithmetic: the schedules' plans, the
#: scheduler's due and next-run steps, and the pooled drivers' next run and wake-up.
MUTATE = (
    "tickwork._durable.decide.*",
    "tickwork._core.schedules.x_next_slot__mutmut_*",
    "tickwork._core.schedules.x\u01c1_*Plan\u01c1*",
    "tickwork._core.schedules.x\u01c1Every\u01c1_plan__mutmut_*",
    "tickwork._core.schedules.x\u01c1Cron\u01c1_plan__mutmut_*",
    *(
        f"tickwork._core.scheduler.x\u01c1Scheduler\u01c1{name}__mutmut_*"
        for name in ("run_pending", "next_run_in", "_advance", "_unpark", "_resume", "_sync_wall")
    ),
    *(
        f"tickwork._core.runs.x\u01c1Policy\u01c1{name}__mutmut_*"
        for name in ("_attach", "resume", "end")
    ),
)


#: What `python3 dev.py test` adds to pytest's arguments unless they choose ``-n`` themselves:
#: 4 workers on any machine. Many tests wait on processes, timers and PostgreSQL, so 2
#: cores keep 4 busy; their waits are for conditions, so a loaded machine is slower, not red.
#: Files go out in collection order, which tests/conftest.py starts with the soak tier's.
TEST_WORKERS = ("-n", "4", "--dist", "loadfile", "--no-loadscope-reorder")


def _test(rest: list[str]) -> int:
    chosen = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in rest)
    tier = ["-m", "not slow"] if "--fast" in rest and "-m" not in rest else []
    rest = [a for a in rest if a != "--fast"]
    env = _compiled_env()
    _run("-m", "compileall", "-q", "-j", "0", "src", "tests", env=env)
    return _run("-m", "pytest", *([] if chosen else TEST_WORKERS), *tier, *rest, env=env)


def _compiled_env() -> dict[str, str]:
    """The suite's environment: bytecode cached in ``.venv/pycache``.

    The cache is written even where ``PYTHONDONTWRITEBYTECODE`` is set (CI sets it to
    keep the tree clean). The suite starts a thousand-odd Python processes (daemons, CLI
    commands, nodes, job children); with no bytecode cache, each compiled the tickwork
    modules it imports again, ~0.25 s of CPU apiece. A prefix outside the tree keeps the
    tree as clean as before.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(VENV / "pycache"))
    return env


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
        run = ["run", "examples/housekeeping.toml", "--for", "20s", *rest]
        print("$ .venv/bin/tickwork", *run, flush=True)
        status = _run("-m", "tickwork", *run, env=env)
    if status == 0:
        print(
            "\nThe demo's state is kept. What it did, and the jobs with their status page:\n"
            "  .venv/bin/tickwork jobs examples/housekeeping.toml\n"
            "  .venv/bin/tickwork history examples/housekeeping.toml\n"
            "  .venv/bin/tickwork run examples/housekeeping.toml --http :9120"
            "   # then open http://127.0.0.1:9120/",
            flush=True,
        )
    return status


def _mutate(rest: list[str]) -> int:
    options = [a for a in rest if a.startswith("-") or a.isdigit()]
    targets = [a for a in rest if a not in options] or list(MUTATE)
    run = [str(BIN / "mutmut"), "run", "--max-children", "1", *options, *targets]
    status = subprocess.run(run, cwd=ROOT).returncode
    return status or _mutation_tally(targets)


def _mutation_tally(targets: list[str]) -> int:
    """Print the tally of the mutants in ``targets`` from mutmut's result files.

    Returns 1 if any of them survived (or was not checked), else 0.
    """
    # mutmut's exit codes (mutmut.stats.status_by_exit_code), the ones that occur here.
    status_of = {1: "killed", 3: "killed", 0: "survived", None: "not checked"}
    status_of |= dict.fromkeys((36, 24, -24, 152, 255), "timeout")
    tally: dict[str, int] = {}
    left = []
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in targets):
                status = status_of.get(code, f"exit code {code}")
                tally[status] = tally.get(status, 0) + 1
                if status not in ("killed", "timeout"):
                    left.append(f"  {status}: {name}")
    print(f"mutants: {sum(tally.values())}", ", ".join(f"{n} {s}" for s, n in tally.items()))
    print("\n".join(left))
    return 1 if left else 0


def main(argv: list[str]) -> int:
    """Run one developer command; return its exit status."""
    if not argv or argv[0] not in {"demo", "test", "lint", "mutate", "package"}:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    _ensure_venv()
    if cmd == "demo":
        return _demo(rest)
    if cmd == "test":
        return _test(rest)
    if cmd == "mutate":
        return _mutate(rest)
    if cmd == "package":
        return subprocess.run([str(PY), str(ROOT / "tools" / "package.py"), *rest]).returncode
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
