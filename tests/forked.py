"""Child processes forked from a warm parent: real processes, without Python's start-up each time.

The kill loops (tests/test_durable_crash.py, tests/test_oneoff_kills.py) start a node
process again after every SIGKILL. As ``python -m tests.durable_crash_child``, each start spent
~0.3 s of CPU importing tickwork before it touched the store: most of a loop's time, and
CPU the rest of the suite waits for on 2 cores. `start` forks the child instead from a
multiprocessing *forkserver* that imported the child's module once per test worker: the
child is still its own process (its own pid, store sessions, threads and signal handlers;
SIGKILL ends it as abruptly), it runs the module as ``-m`` would (``runpy``, as
``__main__``), and the handle answers like the `subprocess.Popen` it replaces.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent

#: The modules the server imports once; each child then imports only what it adds: the
#: crash loops' node, and the ``tickwork`` command (`tickwork`, tests/test_daemon_kills.py)
#: with both stores and each of its verbs.
PRELOAD = [
    "tests.durable_crash_child",
    "tickwork.stores.postgres",
    "tickwork.stores.sqlite",
    "tickwork._cli.main",
    "tickwork._daemon.start",
    *(f"tickwork._cli.{verb}" for verb in ("run", "control", "history", "jobs", "backfill")),
    *(f"tickwork._cli.{verb}" for verb in ("cancel", "enqueue", "next", "validate")),
]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


class Child:
    """A forked child, handled as a `subprocess.Popen` with ``stdout=PIPE, text=True``.

    (`daemon`'s: ``stderr=PIPE`` instead.)
    """

    def __init__(
        self,
        process: multiprocessing.process.BaseProcess,
        stdout: TextIO | None,
        stderr: TextIO | None = None,
    ) -> None:
        self.process = process
        self.stdout: TextIO | None = stdout
        self.stderr: TextIO | None = stderr

    @property
    def pid(self) -> int:
        """The child's process id."""
        pid = self.process.pid
        assert pid is not None
        return pid

    @property
    def returncode(self) -> int | None:
        """Its exit code once it ended (minus the signal that ended it), else None."""
        return self.process.exitcode

    def poll(self) -> int | None:
        """`returncode`, as `subprocess.Popen.poll`."""
        return self.process.exitcode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless the child already ended."""
        if self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended just now
                os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; its exit code. `subprocess.TimeoutExpired` after ``timeout``."""
        self.process.join(timeout)
        code = self.process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout or 0.0)
        return code


def start(module: str, args: list[str], log: Path, *, stdout: bool = True) -> Child:
    """Run ``python -m module *args`` as a forked child: stdout to a pipe, stderr to ``log``.

    ``stdout=False``: the child's stdout is ``/dev/null`` (``subprocess.DEVNULL``) instead.
    """
    read, write = _context.Pipe(duplex=False)
    target_args = (module, args, write if stdout else None, str(log))
    process = _context.Process(target=_enter, args=target_args, daemon=False)
    process.start()
    write.close()
    if not stdout:
        read.close()
        return Child(process, None)
    out = open(os.dup(read.fileno()), encoding="utf-8")  # noqa: SIM115 (the caller closes it)
    read.close()
    return Child(process, out)


def _enter(module: str, args: list[str], stdout: Connection | None, log: str) -> None:
    """In the child: the streams of ``python -m`` (stdout the pipe, stderr the log), then run."""
    if stdout is None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    else:
        os.dup2(stdout.fileno(), 1)
        stdout.close()
    err = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(err, 2)
    os.close(err)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    os.chdir(ROOT)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def tickwork(
    *args: str,
    timeout: float = 120.0,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, "-m", "tickwork", *args], capture_output=True, text=True)``,
    the command forked warm: no Python start-up and no import of tickwork (~0.3 s of CPU).

    The child gets what the subprocess would: ``env`` (default: this process's environment
    as it is now; ``TZ`` applied) and ``cwd`` (default: this process's working folder),
    stdin from ``/dev/null``, stdout and stderr captured. It runs ``tickwork/__main__.py``
    as ``-m`` does, and exits the same way (its exit status, 1 with the traceback on
    stderr after an uncaught exception).
    After ``timeout`` seconds it is killed and `subprocess.TimeoutExpired` raised.
    """
    argv = [sys.executable, "-m", "tickwork", *args]
    with tempfile.TemporaryDirectory(prefix="tw-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        where = (
            dict(os.environ if env is None else env),
            str(cwd or os.getcwd()),
            str(out),
            str(err),
        )
        process = _context.Process(target=_cli, args=(list(args), *where), daemon=False)
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid or 0, signal.SIGKILL)
            process.join()
            raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text())
        code = process.exitcode
        return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())


def daemon(args: list[str]) -> Child:
    """``subprocess.Popen([python, "-m", "tickwork", *args], stdin=DEVNULL, stdout=DEVNULL,
    stderr=PIPE, text=True)``, forked warm: `tickwork run` as tests/test_daemon_e2e.py's
    `Run` starts it, without the ~0.3 s of CPU of a Python start and its imports.

    The child gets this process's environment as it is now (``TZ`` applied) and its
    working folder; its stderr is the returned handle's ``stderr``, a text pipe the
    caller reads and closes. An environment that Python reads only as it starts
    (``PYTHONPATH``) needs a real ``python -m tickwork``.
    """
    read, write = _context.Pipe(duplex=False)
    where = (dict(os.environ), os.getcwd())
    process = _context.Process(target=_daemon, args=(list(args), *where, write), daemon=False)
    process.start()
    write.close()
    err = open(os.dup(read.fileno()), encoding="utf-8")  # noqa: SIM115 (the caller closes it)
    read.close()
    return Child(process, None, err)


def _daemon(args: list[str], env: dict[str, str], cwd: str, stderr: Connection) -> None:
    """In the child: the caller's environment and folder, stdin and stdout /dev/null, stderr
    the pipe; then ``tickwork`` as ``-m`` runs it."""
    _environment(env, cwd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    os.dup2(stderr.fileno(), 2)
    stderr.close()
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = ["tickwork", *args]
    runpy.run_module("tickwork", run_name="__main__", alter_sys=True)


def _environment(env: dict[str, str], cwd: str) -> None:
    """The caller's environment (its ``TZ`` applied) and folder, first on ``sys.path``."""
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    os.chdir(cwd)
    sys.path.insert(0, cwd)  # as ``-m`` puts it first


def _cli(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the child: the caller's environment and folder, the streams to files, then run."""
    _environment(env, cwd)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
    sys.argv = ["tickwork", *args]
    runpy.run_module("tickwork", run_name="__main__", alter_sys=True)
