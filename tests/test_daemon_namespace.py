"""Daemons sharing one namespace of one state: one jobs file (issue 39, point 4).

A second ``tickwork run`` on the namespace with another file used to remove the first
daemon's jobs, and the first then recorded the second's slots ``failed``. Now the second
is refused while the first lives, naming both files; the same file (several nodes) and
a newer version of it (more or fewer jobs) are let in; a daemon never records a failure
for a job its file does not have. Real daemons, on both stores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import forked

from .test_daemon_e2e import Run, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The store options of one state, and the namespace every daemon here shares."""
    if request.param == "sqlite":
        store = ["--state", str(tmp_path / "state.sqlite3")]
    else:
        store = ["--database", request.getfixturevalue("fresh_database")]
    return [*store, "--namespace", "shared"]


def jobs_file(path: Path, *names: str) -> Path:
    body = "".join(
        f"""
        [[job]]
        name = "{name}"
        command = ["true"]
        every = "300ms"
        """
        for name in names
    )
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def tickwork(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, forked warm (tests/forked.py; stdin /dev/null)."""
    return forked.tickwork(*argv, timeout=120)


def outcomes(where: list[str], name: str) -> list[str]:
    shown = tickwork("history", name, *where, "--json", "--limit", "1000")
    assert shown.returncode == 0, shown.stderr
    return [item["outcome"] for item in json.loads(shown.stdout) if item["kind"] == "slot"]


def test_another_file_is_refused_while_a_daemon_holds_the_namespace(
    tmp_path: Path, where: list[str]
) -> None:
    filea = jobs_file(tmp_path / "filea.toml", "a1")
    fileb = jobs_file(tmp_path / "fileb.toml", "b1")
    first = Run(filea, where, "--poll", "200ms")
    try:
        first.wait_line("running 1 job")
        refused = tickwork("run", str(fileb), *where, "--for", "3s")
        assert refused.returncode == 1, refused.stderr
        line = refused.stderr.splitlines()[-1]
        assert f"runs {filea} on namespace 'shared'" in line and str(fileb) in line, line
        assert "not started" in line and "Traceback" not in refused.stderr
        # The same file (another node) and a newer version of it (one more job) run.
        for again in (filea, jobs_file(tmp_path / "v2" / "filea.toml", "a1", "a2")):
            alongside = tickwork("run", str(again), *where, "--for", "1s")
            assert alongside.returncode == 0, alongside.stderr
        # The first daemon's job was never removed: it still runs.
        seen = len(outcomes(where, "a1"))
        wait_until("another run of a1", lambda: len(outcomes(where, "a1")) > seen)
    finally:
        first.stop()
    assert first.proc.returncode == 0, first.text()
    # Once it has stopped, the other file takes the namespace over.
    taken = tickwork("run", str(fileb), *where, "--for", "1s")
    assert taken.returncode == 0, taken.stderr
    assert "1 created, 2 removed" in taken.stderr, taken.stderr  # a1 and a2 are gone


def test_a_job_not_in_the_file_is_never_recorded_failed(tmp_path: Path, where: list[str]) -> None:
    filea = jobs_file(tmp_path / "filea.toml", "a1")
    first = Run(filea, where, "--poll", "200ms")
    try:
        first.wait_line("running 1 job")
        # A newer version of the file (one more job) ran on another node, and stopped:
        # its job "extra" stays in the state, and the first daemon claims its slots.
        newer = jobs_file(tmp_path / "v2" / "filea.toml", "a1", "extra")
        assert tickwork("run", str(newer), *where, "--for", "1s").returncode == 0
        first.wait_line("job 'extra' is not in")
        wait_until("a slot of extra given up", lambda: "cancelled" in outcomes(where, "extra"))
    finally:
        first.stop()
    assert "failed" not in outcomes(where, "extra")
    assert first.proc.returncode == 0, first.text()
