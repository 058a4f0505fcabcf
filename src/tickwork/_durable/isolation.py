"""``isolation="process"``: a job's function called in a child process, killed at its limit.

The child is ``python -m tickwork._durable.child MODULE:FUNCTION`` in a session
(process group) of its own, started with this interpreter and this process's
``sys.path``. Its arguments come as JSON on its stdin (`child_stdin`), never on its
command line, which every local user can read (``ps``, ``/proc/PID/cmdline``). It
imports the function by name, calls it (running a coroutine it returns to the end)
and exits 0, or prints the traceback and exits 1. Its stdout
and stderr are read together; their tail is the attempt's output, as a command's is.
At the time limit the group gets SIGTERM, then SIGKILL after ``kill_grace`` seconds;
when the child ends by itself, what it started in its group gets SIGTERM, as the rest
of a command's group does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from tickwork._core.errors import JobFailed, JobTimedOut

__all__ = [
    "CHILD_MODULE",
    "ChildResult",
    "check_importable",
    "child_command",
    "child_stdin",
    "run_in_child",
]

#: The module a child runs (``python -m``).
CHILD_MODULE: Final = "tickwork._durable.child"
#: Characters of a child's output kept (its end), as for a command.
TAIL: Final = 4000


def child_command(func: str) -> list[str]:
    """The argv of a child process that calls ``func`` with the arguments on its stdin."""
    return [sys.executable, "-m", CHILD_MODULE, func]


def child_stdin(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    """The read end of a pipe that holds the arguments as JSON, for a child's stdin.

    The caller passes it as the child's stdin and closes it once the child started.
    What does not fit the pipe's buffer is written by a thread of its own, which ends
    when the child has read it all or is gone.
    """
    payload = json.dumps({"args": list(args), "kwargs": dict(kwargs)}, allow_nan=False).encode()
    read, write = os.pipe()
    os.set_blocking(write, False)
    sent = 0
    with contextlib.suppress(BlockingIOError):
        while sent < len(payload):
            sent += os.write(write, payload[sent:])
    if sent == len(payload):
        os.close(write)
    else:
        os.set_blocking(write, True)
        threading.Thread(target=_send, args=(write, payload[sent:]), daemon=True).start()
    return read


def _send(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` (a child's stdin) and close it; a child gone stops it."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the child ended without reading it all (EPIPE)
    finally:
        os.close(fd)


def child_env() -> dict[str, str]:
    """This process's environment, with ``sys.path`` so the child imports the same modules."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    return env


def check_importable(func: str, fn: Callable[..., object], *, name: str = "func") -> None:
    """Refuse a function a child process could not import by ``func``'s name.

    Raises:
        ValueError: ``fn`` is a lambda, a nested function (a closure) or lives in
            ``__main__``; the message names ``name`` and shows ``func``.
    """
    rule = (
        f"{name} must name a module-level function for isolation='process' (the child"
        " process imports it by name)"
    )
    module = func.partition(":")[0]
    qualname = getattr(fn, "__qualname__", "")
    if "<lambda>" in qualname:
        raise ValueError(f"{rule}, got {func!r}, a lambda")
    if "<locals>" in qualname:
        raise ValueError(f"{rule}, got {func!r}, a function defined inside another (a closure)")
    if module == "__main__" or getattr(fn, "__module__", None) == "__main__":
        raise ValueError(
            f"{rule}, got {func!r}, in __main__, which a child process cannot import:"
            " move it into a module"
        )


class ChildResult:
    """How a child ended: its error (None: exit 0) and the tail of its output."""

    __slots__ = ("error", "killed", "output", "pid")

    def __init__(self, error: BaseException | None, output: str, pid: int, killed: str) -> None:
        self.error = error
        self.output = output
        self.pid = pid
        self.killed = killed
        """``""``, or the signal that ended it at its limit (``"SIGTERM"``, ``"SIGKILL"``)."""


def _kill(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def run_in_child(
    func: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    timeout: float | None,
    kill_grace: float,
) -> ChildResult:
    """Call ``func`` in a child process; kill its group at ``timeout`` (SIGTERM, SIGKILL)."""
    stdin = child_stdin(args, kwargs)
    try:
        proc = subprocess.Popen(
            child_command(func),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env(),
            start_new_session=True,
        )
    finally:
        os.close(stdin)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read, args=(proc, chunks), daemon=True)
    reader.start()
    killed = ""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        killed = "SIGTERM"
        _kill(proc, signal.SIGTERM)
        try:
            proc.wait(kill_grace)
        except subprocess.TimeoutExpired:
            killed = "SIGKILL"
            _kill(proc, signal.SIGKILL)
            proc.wait()
    # What it started in its group ends with it, as a command's (the daemon's rule).
    _kill(proc, signal.SIGKILL if killed else signal.SIGTERM)
    reader.join(5.0)
    output = b"".join(chunks).decode("utf-8", "replace")[-TAIL:]
    code = proc.returncode
    error: BaseException | None = None
    if killed:
        error = JobTimedOut(
            f"timed out after {timeout:g} s: the child process (pid {proc.pid}) was"
            f" ended with {killed}"
        )
    elif code != 0:
        how = f"exit={code}" if code > 0 else f"killed by {signal.Signals(-code).name}"
        last = output.rstrip().splitlines()[-1:] or [""]
        error = JobFailed(f"{how} (child process pid {proc.pid}) {last[0]}".rstrip())
    return ChildResult(error, output, proc.pid, killed)


def _read(proc: subprocess.Popen[bytes], chunks: list[bytes]) -> None:
    """Read the child's output to its end, keeping only about the last `TAIL` bytes."""
    assert proc.stdout is not None
    size = 0
    with proc.stdout:
        while data := os.read(proc.stdout.fileno(), 65536):
            chunks.append(data)
            size += len(data)
            while size - len(chunks[0]) > 4 * TAIL and len(chunks) > 1:
                size -= len(chunks.pop(0))
