"""A throwaway PostgreSQL server for one test session, on a Unix socket in a temporary folder.

Used by ``tests/conftest.py`` when ``TICKWORK_PG_DSN`` is not set. The test process starts
this file as a keeper process::

    python tests/pg_server.py BINDIR

The keeper creates a fresh folder (``tw-pg-XXXX`` under the temporary directory), runs
``initdb`` and ``pg_ctl start`` there with TCP switched off (``listen_addresses = ''``), prints
one line, ``ready <DSN>`` or ``error <reason>``, and then waits for its standard input to
close. When it does, whether the test session ended normally, was interrupted or was killed,
the keeper stops the server and removes the folder. It runs in a session of its own, so a
Ctrl-C in the terminal reaches pytest (which then closes the pipe) and not the keeper. A
server whose keeper was itself killed is stopped and removed by the next keeper to start.

``initdb`` and ``pg_ctl`` refuse to run as root: run as root (CI, containers), the keeper runs
them as the ``postgres`` account and hands it the folder. The server trusts local
connections; the DSN connects as the superuser ``postgres`` to the database ``postgres``.
Each session has its own folder and socket, so parallel test sessions never collide.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

SUPERUSER = "postgres"
PORT = 5432  # only names the socket file: nothing listens on TCP
SERVER_SETTINGS = {
    "listen_addresses": "''",
    "port": str(PORT),
    "max_connections": "200",
    # A throwaway server: durability buys nothing, and fsyncs are slow on a busy disk.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}


def find_bindir() -> Path | None:
    """A folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None if there is none.

    Looks on ``PATH`` first, then at ``pg_config --bindir``, then in Debian/Ubuntu's
    ``/usr/lib/postgresql/<version>/bin`` (newest first), where they are not on ``PATH``.
    """
    candidates: list[Path] = []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            candidates.append(Path(out))

    def version(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in p.parent.name.split(".") if x.isdigit())

    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        candidates.extend(sorted(debian.glob("*/bin"), key=version, reverse=True))
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(bindir: Path) -> None:
    """Stop and remove servers left behind by keepers that were killed (SIGKILL, OOM).

    Each keeper writes its pid to ``keeper.pid`` in its folder; a folder whose keeper is
    gone is an orphan. Servers of live keepers (other test sessions) are left alone.
    """
    for base in Path(tempfile.gettempdir()).glob("tw-pg-*"):
        try:
            pid = int((base / "keeper.pid").read_text())
        except (OSError, ValueError):
            continue  # being created, or not ours
        if _alive(pid):
            continue
        orphan = Server.__new__(Server)
        orphan.bindir, orphan.base = bindir, base
        orphan.data, orphan.logfile = base / "data", base / "server.log"
        orphan.started = True
        orphan.run_as = Server.account()
        try:
            orphan.stop(mode="immediate")
        except (RuntimeError, OSError, subprocess.SubprocessError):
            shutil.rmtree(base, ignore_errors=True)


class Server:
    """One server in its own folder: ``start()`` then ``stop()`` (which also removes it)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="tw-pg-"))
        self.data = self.base / "data"
        self.logfile = self.base / "server.log"
        self.started = False
        (self.base / "keeper.pid").write_text(str(os.getpid()))
        self.run_as = self.account()
        if self.run_as:
            os.chown(self.base, self.run_as["user"], self.run_as["group"])
        os.chmod(self.base, 0o755)  # the socket folder: readable by the test processes

    @staticmethod
    def account() -> dict[str, Any]:
        """How to run initdb and pg_ctl: as ``postgres`` under root (they refuse root)."""
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return {}
        import pwd

        try:
            account = pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise RuntimeError(
                "running as root, and initdb refuses root: there is no 'postgres' account"
                " to run the throwaway server as (set TICKWORK_PG_DSN instead)"
            ) from None
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    @property
    def dsn(self) -> str:
        """A ``postgresql://`` URL (``tickwork run --database`` wants one) for the socket."""
        host = quote(str(self.base), safe="")
        return f"postgresql://{SUPERUSER}@/postgres?host={host}&port={PORT}"

    def _tool(self, *args: str, timeout: float = 120) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        proc = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.base,  # the postgres account may not be able to enter the caller's cwd
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            **self.run_as,
        )
        if proc.returncode != 0:
            log = self.logfile.read_text(errors="replace") if self.logfile.exists() else ""
            raise RuntimeError(
                f"{args[0]} failed ({proc.returncode}): {proc.stdout}{proc.stderr}{log}".strip()
            )

    def start(self) -> None:
        """Create the cluster and start the server; raises RuntimeError if it cannot."""
        self._tool(
            "initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        )  # fmt: skip
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# tests/pg_server.py: a throwaway server on a Unix socket only\n")
            conf.write(f"unix_socket_directories = '{self.base}'\n")
            for key, value in SERVER_SETTINGS.items():
                conf.write(f"{key} = {value}\n")
        self.started = True
        self._tool(
            "pg_ctl", "start", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", "120"
        )

    def halt(self) -> None:
        """Stop the server (fast shutdown), keeping its folder: `resume` starts it again."""
        self._tool("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w")

    def resume(self) -> None:
        """Start the server `halt` stopped, on the same socket."""
        self._tool(
            "pg_ctl", "start", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", "120"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (fast shutdown: clients are disconnected) and remove its folder."""
        try:
            if self.started and (self.data / "postmaster.pid").exists():
                try:
                    self._tool("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w")
                except (RuntimeError, subprocess.TimeoutExpired):
                    self._tool("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Keep one server alive while standard input stays open; see the module docstring."""
    # Stop and clean up however the session ends: on EOF (the usual way, also when the test
    # process dies), on SIGTERM/SIGHUP; a Ctrl-C is for pytest, which then closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def stop_now(signum: int, frame: object) -> None:
        raise SystemExit(1)

    signal.signal(signal.SIGTERM, stop_now)
    signal.signal(signal.SIGHUP, stop_now)
    bindir = Path(argv[0]) if argv else find_bindir()
    if bindir is None:
        print("error no PostgreSQL server binaries (initdb, pg_ctl) found", flush=True)
        return 1
    try:
        sweep_orphans(bindir)
        server = Server(bindir)
    except (RuntimeError, OSError) as exc:
        print(f"error {exc}".replace("\n", " "), flush=True)
        return 1
    try:
        try:
            server.start()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"error {exc}".replace("\n", " "), flush=True)
            return 1
        print(f"ready {server.dsn}", flush=True)
        sys.stdin.read()  # until the test session closes the pipe (or dies)
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
