"""Several ``tickwork run`` daemons sharing one PostgreSQL database: each run happens once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def test_two_daemons_on_one_database_run_each_slot_once(
    fresh_database: str, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            f"""\
            [[job]]
            name = "tick"
            command = ["sh", "-c", "echo run >> {out}"]
            every = "200ms"

            [[job]]
            name = "tock"
            command = ["sh", "-c", "echo run >> {out}"]
            every = "300ms"
            """
        )
    )
    argv = [
        sys.executable, "-m", "tickwork", "run", str(jobs), "--database", fresh_database,
        "--for", "4s", "--poll", "200ms", "--log-format", "json",
    ]  # fmt: skip
    # Started together on a new database: both create-or-open the schema at once.
    procs = [
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    finished: list[tuple[str, str]] = []
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        for line in err.splitlines():
            event = json.loads(line)  # every line is JSON
            if event["event"] == "finished":
                finished.append((event["job"], event["scheduled"]))
    assert len(finished) >= 4  # both jobs ran, and again (a loaded machine skips some slots)
    assert len(set(finished)) == len(finished)  # no slot ran twice, across both daemons
    assert {job for job, _ in finished} == {"tick", "tock"}
    assert len(out.read_text().splitlines()) == len(finished)  # each run executed once
