"""The daemon's word on its own life: systemd's notify protocol, ``/readyz``, a silent store.

Real daemons, real sockets and a real PostgreSQL: a Python AF_UNIX datagram socket as
``$NOTIFY_SOCKET``, the unit file of docs/daemon.md as the test's command line, a
``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`` held from another connection, and a server
of the test's own stopped and started again. Deadlines are generous; only lower bounds
of timing are asserted (a loaded machine only makes things later).
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_daemon_e2e import Run, wait_until

PATIENCE = 60.0
DOCS = Path(__file__).resolve().parent.parent / "docs" / "daemon.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str] | None:
    """``(status, body)``, or None while nothing listens there."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


class Notifications:
    """A datagram socket standing in for systemd's: what the daemon tells it, in order."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.address = address
        self.seen: list[tuple[float, str]] = []

    def next(self, limit: float = PATIENCE) -> str:
        self.sock.settimeout(limit)
        data = self.sock.recv(4096).decode()
        self.seen.append((time.monotonic(), data))
        return data

    def until(self, field: str, limit: float = PATIENCE) -> str:
        """Receive until a message with ``field`` (``READY=1``) comes; that message."""
        give_up = time.monotonic() + limit
        while True:
            message = self.next(max(0.1, give_up - time.monotonic()))
            if field in message.splitlines():
                return message

    def pending(self) -> list[str]:
        """What has come and not been received yet, without waiting."""
        self.sock.setblocking(False)
        out = []
        with contextlib.suppress(BlockingIOError):
            while True:
                out.append(self.sock.recv(4096).decode())
        self.sock.setblocking(True)
        return out


@pytest.fixture
def notifications(tmp_path: Path) -> Iterator[Notifications]:
    n = Notifications(str(tmp_path / "notify.sock"))
    yield n
    n.sock.close()


@pytest.fixture
def abstract_notifications() -> Iterator[Notifications]:
    n = Notifications(f"@tickwork-test-{os.getpid()}-{time.monotonic_ns()}")
    yield n
    n.sock.close()


# -- the unit file of docs/daemon.md -------------------------------------------------------


def doc_unit() -> str:
    """The unit file docs/daemon.md shows (the ``ini`` block naming tickwork.service)."""
    blocks = re.findall(r"```ini\n(.*?)```", DOCS.read_text(), re.S)
    (unit,) = [b for b in blocks if b.startswith("# /etc/systemd/system/tickwork.service")]
    return str(unit)


def service(unit: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit)
    return dict(parser["Service"])


def seconds_of(value: str) -> float:
    """A systemd time span of the forms the unit uses (``30s``, ``1min``, ``60``)."""
    m = re.fullmatch(r"(\d+)(s|min)?", value.strip())
    assert m, value
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def unit_command(unit: str, tmp_path: Path, port: int) -> list[str]:
    """The unit's ``ExecStart``, with this Python's tickwork and the test's own paths."""
    program, *args = shlex.split(service(unit)["ExecStart"])
    assert program.endswith("/tickwork") and args[0] == "run"
    local = {"/etc/tickwork/": tmp_path / "etc", "/var/lib/tickwork/": tmp_path / "var"}
    out = [sys.executable, "-m", "tickwork"]
    for arg in args:
        for prefix, there in local.items():
            if arg.startswith(prefix):
                there.mkdir(exist_ok=True)
                arg = str(there / arg.removeprefix(prefix))
        out.append(re.sub(r"^127\.0\.0\.1:\d+$", f"127.0.0.1:{port}", arg))
    return out


def test_the_unit_file_in_the_docs_passes_systemd_analyze(tmp_path: Path) -> None:
    unit = doc_unit()
    svc = service(unit)
    assert svc["Type"] == "notify"
    assert seconds_of(svc["WatchdogSec"]) > 0
    assert svc["KillMode"] == "mixed"
    assert "--http" in shlex.split(svc["ExecStart"])
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # the unit's content is checked above, and run by the next test
    # verify checks that the program exists: this installation's tickwork stands in.
    program = shlex.split(svc["ExecStart"])[0]
    here = shutil.which("tickwork", path=str(Path(sys.executable).parent)) or sys.executable
    (tmp_path / "tickwork.service").write_text(unit.replace(program, here))
    proc = subprocess.run(
        [analyze, "verify", str(tmp_path / "tickwork.service")],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_the_docs_unit_runs_the_daemon_ready_pinging_and_stopping(
    tmp_path: Path, notifications: Notifications
) -> None:
    unit = doc_unit()
    port = free_port()
    argv = unit_command(unit, tmp_path, port)
    jobs = Path(argv[argv.index("run") + 1])
    out = tmp_path / "env-seen"
    jobs.write_text(
        textwrap.dedent(
            f"""
            [[job]]
            name = "env"
            in = "0s"
            command = ["sh", "-c", "echo ${{NOTIFY_SOCKET-unset}} ${{WATCHDOG_USEC-unset}} > {out}"]
            """
        )
    )
    # The unit's WatchdogSec, shortened so the test sees several pings in a few seconds.
    assert seconds_of(service(unit)["WatchdogSec"]) > 0
    usec = 1_000_000
    env = {**os.environ, "NOTIFY_SOCKET": notifications.address, "WATCHDOG_USEC": str(usec)}
    env["WATCHDOG_PID"] = ""  # systemd sets it to the main pid; empty: not checked
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ready = notifications.until("READY=1")
        base = f"http://127.0.0.1:{port}"
        assert get(base + "/readyz") == (200, "ready\n")
        state = argv[argv.index("--state") + 1]
        from tickwork.stores.sqlite import SQLiteStore

        store = SQLiteStore(state)
        try:  # READY=1 came after the jobs were declared
            assert [s.id for s in store.jobs()] == ["jobs/env"]
        finally:
            store.close()
        assert "STATUS=" in ready
        notifications.pending()  # from here on each ping is received as it comes
        start = len(notifications.seen)
        pings = [notifications.until("WATCHDOG=1") for _ in range(6)]
        assert pings == ["WATCHDOG=1"] * 6
        times = [t for t, _ in notifications.seen[start:]]
        mean = (times[-1] - times[0]) / (len(times) - 1)
        # Every half WATCHDOG_USEC (0.5 s): not faster (the first ping's delay on a
        # loaded machine is spread over five gaps), and not ten times slower.
        assert 0.4 <= mean <= 5.0, times
        wait_until("the job's output", lambda: out.exists() and out.read_text())
        assert out.read_text() == "unset unset\n"  # the jobs do not inherit systemd's socket
        proc.send_signal(signal.SIGTERM)
        assert notifications.until("STOPPING=1").startswith("STOPPING=1")
        assert proc.wait(PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()


# -- PostgreSQL: a lock, a server stopped -----------------------------------------------------


def _jobs(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "tick"\nevery = "1s"\ncommand = ["true"]\n')
    return jobs


@contextlib.contextmanager
def locked_jobs_table(dsn: str) -> Iterator[Callable[[], None]]:
    """``LOCK TABLE tickwork_jobs IN ACCESS EXCLUSIVE MODE`` from another connection.

    Yields the function that releases it (also released at the end).
    """
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute("LOCK TABLE tickwork_jobs IN ACCESS EXCLUSIVE MODE")
        yield conn.rollback
        conn.rollback()


def _make_schema(dsn: str) -> None:
    from tickwork.stores.postgres import PostgresStore

    PostgresStore(dsn).close()


def test_readyz_waits_for_the_jobs_to_be_declared(
    tmp_path: Path, fresh_database: str, abstract_notifications: Notifications
) -> None:
    _make_schema(fresh_database)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "NOTIFY_SOCKET": abstract_notifications.address}
    with locked_jobs_table(fresh_database) as release:
        run = Run(
            _jobs(tmp_path), ["--database", fresh_database], "--http", f"127.0.0.1:{port}", env=env
        )
        try:
            answer = wait_until("the HTTP endpoint", lambda: get(base + "/readyz"), PATIENCE)
            assert answer[0] == 503 and answer[1].startswith("not ready: starting"), answer
            assert abstract_notifications.pending() == []  # no READY=1 while it cannot declare
            release()
            abstract_notifications.until("READY=1")
            assert get(base + "/readyz") == (200, "ready\n")
            run.wait_line("running 1 job")
            run.signal(signal.SIGTERM)
            abstract_notifications.until("STOPPING=1")
            assert run.wait(PATIENCE) == 0
        finally:
            run.kill()


def _healthz(base: str, status: int) -> Callable[[], str | None]:
    def check() -> str | None:
        answer = get(base + "/healthz")
        return answer[1] if answer is not None and answer[0] == status else None

    return check


def test_a_locked_jobs_table_is_logged_and_healthz_fails_until_it_is_released(
    tmp_path: Path, fresh_database: str
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run = Run(
        _jobs(tmp_path),
        ["--database", fresh_database],
        *("--http", f"127.0.0.1:{port}", "--poll", "1s", "--health-after", "3s"),
    )
    try:
        run.wait_line("running 1 job", limit=PATIENCE)
        wait_until("a healthy daemon", _healthz(base, 200), PATIENCE)
        mark = len(run.lines)
        with locked_jobs_table(fresh_database):
            line = run.wait_line("the store has not answered for", after=mark, limit=PATIENCE)
            assert "a look at the due runs" in line
            reason = wait_until("/healthz 503", _healthz(base, 503), PATIENCE)
            assert reason.startswith("unhealthy: the store has not answered for"), reason
        line = run.wait_line("the store answered again after", after=mark, limit=PATIENCE)
        wait_until("/healthz 200 again", _healthz(base, 200), PATIENCE)
        run.signal(signal.SIGTERM)
        assert run.wait(PATIENCE) == 0
    finally:
        run.kill()


def test_a_stopped_server_is_logged_and_healthz_fails_until_it_is_back(tmp_path: Path) -> None:
    from tests import pg_server

    bindir = pg_server.find_bindir()
    assert bindir is not None, "no PostgreSQL server binaries"
    server = pg_server.Server(bindir)
    try:
        server.start()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        run = Run(
            _jobs(tmp_path),
            ["--database", server.dsn],
            *("--http", f"127.0.0.1:{port}", "--poll", "1s", "--health-after", "3s"),
        )
        try:
            run.wait_line("running 1 job", limit=PATIENCE)
            wait_until("a healthy daemon", _healthz(base, 200), PATIENCE)
            mark = len(run.lines)
            server.halt()
            run.wait_line("the store has not answered for", after=mark, limit=PATIENCE)
            reason: Any = wait_until("/healthz 503", _healthz(base, 503), PATIENCE)
            assert reason.startswith("unhealthy: "), reason
            server.resume()
            run.wait_line("the store answered again after", after=mark, limit=2 * PATIENCE)
            wait_until("/healthz 200 again", _healthz(base, 200), PATIENCE)
            run.signal(signal.SIGTERM)
            assert run.wait(PATIENCE) == 0
        finally:
            run.kill()
    finally:
        server.stop(mode="immediate")
