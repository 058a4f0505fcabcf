"""``tickwork run`` with a state that cannot be written for a while (issue 26, point 1).

A real daemon on a SQLite state whose disk fills up while a run goes on: the run's end
is written once the disk has room again (not recorded ``abandoned``), and a SIGTERM
while the disk is full makes the daemon keep trying for its bound, then exit 1 naming
the run it could not record (it exited 0 leaving the claim).

The disk is a 2 MiB tmpfs filled with a file, when this process may mount one (root,
as on the CI box); elsewhere `tests/daemon_flaky_child.py` runs the same daemon with a
store whose writes fail, as a full disk's do, while a marker file exists.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_daemon_e2e import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LIMIT = 60.0
CHILD = str(Path(__file__).with_name("daemon_flaky_child.py"))


class Disk:
    """Where the state lives, and a way to fill that disk and free it again."""

    def __init__(self, root: Path) -> None:
        self.root = root / "disk"
        self.root.mkdir()
        self.mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(self.root)],
                capture_output=True,
            ).returncode
            == 0
            if os.geteuid() == 0
            else False
        )
        self.filler = self.root / "filler"
        self.marker = root / "disk-full"

    def fill(self) -> None:
        if not self.mounted:
            self.marker.touch()
            return
        chunk = b"\0" * 65536
        with open(self.filler, "ab") as f:
            while True:
                try:
                    f.write(chunk)
                    f.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break

    def free(self) -> None:
        self.marker.unlink(missing_ok=True)
        self.filler.unlink(missing_ok=True)

    def argv(self, *args: str) -> list[str]:
        if self.mounted:
            return [sys.executable, "-m", "tickwork", *args]
        return [sys.executable, CHILD, str(self.marker), "--", *args]

    def close(self) -> None:
        self.free()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], check=False)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    d = Disk(tmp_path)
    yield d
    d.close()


class Daemon:
    def __init__(self, argv: list[str], cwd: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), *sys.path])
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, needle: str, *, after: int = 0) -> int:
        """Wait for a line with ``needle`` after line ``after``; return its index."""

        def find() -> int | None:
            for i in range(after, len(self.lines)):
                if needle in self.lines[i]:
                    return i + 1
            return None

        found: int = wait_until(f"a line with {needle!r}; got:\n{self.text()}", find, LIMIT)
        return found - 1

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def test_a_full_disk_delays_the_record_of_a_run_end_and_sigterm_says_what_it_left(
    tmp_path: Path, disk: Disk
) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "tick"\nevery = "3s"\ncommand = ["sleep", "1.5"]\n')
    state = disk.root / "state.db"
    d = Daemon(
        disk.argv(
            "run", str(jobs), "--state", str(state), "--poll", "1s", "--shutdown-grace", "2s"
        ),
        tmp_path,
    )
    try:
        # 1. The disk fills while a run goes on; it is freed again later.
        at = d.wait_line("tick started")
        disk.fill()
        at = d.wait_line("cannot record the end of job 'jobs/tick'", after=at)
        assert "its lease will expire" not in d.text()
        disk.free()
        at = d.wait_line("recorded the end of job 'jobs/tick'", after=at)
        # 2. Full again during a run, and SIGTERM while it is.
        at = d.wait_line("tick started", after=at)
        disk.fill()
        at = d.wait_line("cannot record the end of job 'jobs/tick'", after=at)
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(LIMIT) == 1
        d._reader.join(5)
        text = d.text()
        assert "stopping without having recorded the end of job 'jobs/tick'" in text
        assert "exiting with status 1" in text
    finally:
        d.close()
    disk.free()
    history = subprocess.run(
        [sys.executable, "-m", "tickwork", "history", "-f", str(jobs), "--state", str(state)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert history.returncode == 0, history.stderr
    # The run whose end waited for the disk in part 1 is recorded ok, never abandoned.
    assert "abandoned" not in history.stdout, history.stdout
    assert " ok" in history.stdout or "ok " in history.stdout, history.stdout
