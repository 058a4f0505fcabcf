"""Run one job of a jobs file: a command in its own process group, or a Python callable.

A command runs in a new session (``start_new_session=True``), so it leads its own
process group and everything it spawns can be signalled together. Its stdout and
stderr go to two pipes that are read as they arrive: each line is handed to
``on_line`` (tagged ``stdout`` or ``stderr``, cut at `LINE_LIMIT` bytes with a mark)
as soon as it is complete, and only the last ``tail_bytes`` of the two together are
kept, so a chatty job never costs more than that much memory.

Ending a command (a timeout, `ProcessGroups.terminate_all` at shutdown, or
`ProcessGroups.replace` for ``overlap = "replace"``): SIGTERM
to the whole group, then SIGKILL after ``kill_grace``. When the command exits on its
own, the rest of its group gets SIGTERM too, and SIGKILL if it still holds the output
pipe after ``kill_grace``: a run owns its process group, and nothing of it outlives
the run unless it left the group (``setsid``).

The main process is not reaped until the end (``waitid(..., WNOWAIT)`` sees its
exit), so its pid, which is the group id, cannot be reused while we signal the group.

With a `ProcessGroups` (as the daemon runs them), a command is started through a small
supervisor process (``_supervisor.py``) that leads the group, runs the command as its
child and ends the way the command ended. The supervisor holds the read end of a
*lifeline* pipe whose write end only this process holds: if this process dies, even by
SIGKILL, the pipe ends and the supervisor kills the group at once (SIGKILL). Each
supervised process carries ``TICKWORK_SUPERVISED`` in its environment, naming the daemon
that started it, so a restarted daemon can find (with `find_survivors`) and end
(`end_survivors`) runs whose supervisor was killed too; and ``TICKWORK_OWNER``, naming
its scheduler's owner, so that a store recovering that owner's claims on this host kills
them first (`tickwork.stores._procs.end_leftovers`).

`run_with_retries` is the attempt loop: exponential backoff with an injectable sleep,
interrupted by a stop event so that shutdown never waits out a backoff.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from tickwork._core.attempts import backoff_delay as jittered_backoff
from tickwork._daemon.jobsfile.config import JobConfig
from tickwork._daemon.process.jobprocess import SETUP_ENV, ProcessSetup, optional_dir, process_setup
from tickwork._durable.attempts import call_bounded
from tickwork._durable.isolation import child_command, child_env, child_stdin
from tickwork.stores.contract import OWNER_ENV, proc_stat

__all__ = [
    "LINE_LIMIT",
    "MARKER_ENV",
    "TAIL_BYTES",
    "OnLine",
    "ProcessGroups",
    "RunResult",
    "backoff_delay",
    "daemon_marker",
    "resolve_callable",
    "run_attempt",
    "run_call",
    "run_command",
    "run_job",
    "run_with_retries",
]

TAIL_BYTES: Final = 4096
"""How much of a command's combined output a `RunResult` keeps (the end of it)."""

LINE_LIMIT: Final = 4096
"""The most bytes of one output line handed to ``on_line``; the rest is cut, with a mark
that says how much."""

OnLine = Callable[[str, str, int], object]
"""Takes each output line as it is written: ``(stream, text, size)``, where ``stream`` is
``"stdout"`` or ``"stderr"``, ``text`` the line without its newline (cut, with a mark,
beyond `LINE_LIMIT` bytes) and ``size`` the bytes the command wrote for it, newline
included."""

_READ_CHUNK: Final = 65536
_POLL: Final = 0.05  # only where pidfd_open is missing (macOS): how often to look for exit
_DRAIN: Final = 1.0  # after SIGKILL, how long to wait for the pipe to close
_SUPERVISOR: Final = str(Path(__file__).with_name("supervisor.py"))

MARKER_ENV: Final = "TICKWORK_SUPERVISED"
"""The variable that marks a supervised run: ``KEY:DAEMON_PID:DAEMON_START:JOB``."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one attempt of a job ended.

    A run is `ok` when it exited with status 0 (a callable: returned) in time.
    """

    exit_code: int | None = None
    """The exit status; ``None`` if killed by a signal or if it never ran to the end
    (a callable that raised, a command that could not start)."""
    signal: int | None = None
    """The signal that ended the main process, if one did."""
    timed_out: bool = False
    """The run exceeded its timeout and was terminated."""
    cancelled: bool = False
    """The run was terminated (or never started) because the daemon is stopping, or
    (with `replaced`) to start the next run."""
    replaced: bool = False
    """The run was terminated to start the next one (``overlap = "replace"``)."""
    error: str | None = None
    """Why the job could not run or what it raised: ``"ValueError: bad input"``."""
    duration: float = 0.0
    """Seconds from start to end, including any kill grace (a supervised command: to
    when its supervisor saw it end, however late the daemon looked)."""
    ended: float | None = None
    """When a supervised command ended, as its supervisor saw it: a `time.monotonic`
    reading (``None``: not known; the run ended when the daemon saw it end)."""
    output: str = ""
    """The end of the combined stdout and stderr (a callable: the traceback)."""
    output_bytes: int = 0
    """How many bytes of output there were in all (more than `output` holds if large)."""
    attempt: int = 1
    """Which attempt this was (1 is the first run, 2 the first retry, ...)."""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded."""
        return self.exit_code == 0 and not self.timed_out and not self.cancelled

    @property
    def status(self) -> str:
        """A short word for the outcome.

        One of ``ok``, ``exit=3``, ``signal=SIGKILL``, ``timeout``, ``replaced``,
        ``cancelled``, ``error``.
        """
        if self.timed_out:
            return "timeout"
        if self.replaced:
            return "replaced"
        if self.cancelled:
            return "cancelled"
        if self.exit_code == 0:
            return "ok"
        if self.exit_code is not None:
            return f"exit={self.exit_code}"
        if self.signal is not None:
            return f"signal={_signal_name(self.signal)}"
        return "error"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class ProcessGroups:
    """The commands running now, so that a stopping daemon can end them all.

    Pass the same instance to every `run_command` (or `run_job`). Thread-safe. The
    commands run through the supervisor (see the module docstring), which ends their
    groups if this process dies.

    Args:
        marker: ``KEY:PID:START`` from `daemon_marker`, put (with the job's name) in
            each run's environment as `MARKER_ENV`, for `find_survivors`.
        owner: The scheduler's owner, put in each run's environment as
            ``TICKWORK_OWNER``: a store that finds the owner gone kills its runs on
            this host before it hands their claims on.
    """

    def __init__(self, *, marker: str | None = None, owner: str | None = None) -> None:
        self._lock = threading.Lock()
        self._runs: set[_Run] = set()
        self._replacing: set[object] = set()  # tags of runs to end, started or not yet
        self._closed = False
        self.marker = marker
        self.owner = owner
        self._lifeline: int | None = None  # read end; the write end stays in this process
        self._lifeline_w: int | None = None  # kept open (and referenced) until exit

    def lifeline(self) -> int:
        """The read end of the lifeline pipe (created on first use), for supervisors.

        Its write end is never closed and never inherited, so it ends exactly when this
        process does.
        """
        with self._lock:
            if self._lifeline is None:
                read, write = os.pipe()  # both non-inheritable
                self._lifeline = read
                self._lifeline_w = write
            return self._lifeline

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    @property
    def closed(self) -> bool:
        """Whether `terminate_all` was called with ``close=True``."""
        return self._closed

    def terminate_all(self, *, close: bool = True) -> int:
        """Terminate every running command: SIGTERM to its group, SIGKILL after its grace.

        Returns at once; each run escalates on its own and its `RunResult` says
        ``cancelled``. Wait for the calls that run the commands to return.

        Args:
            close: Also cancel every command started from now on (the default, for
                shutdown), instead of letting it run.

        Returns:
            How many runs were told to stop.
        """
        with self._lock:
            self._closed = self._closed or close
            runs = list(self._runs)
        for run in runs:
            run.cancel()
        return len(runs)

    def replace(self, tag: object) -> int:
        """End the command of the run ``tag`` names, to start the next run in its place.

        Like `terminate_all` for one run: SIGTERM to its group, SIGKILL after its grace;
        its `RunResult` says ``replaced``. A command of that run that starts later (the
        run is between attempts) is ended at once, until `forget` is called.

        Args:
            tag: The ``tag`` the run's commands were started with (`run_command`).

        Returns:
            How many running commands were told to stop (0 or 1).
        """
        with self._lock:
            self._replacing.add(tag)
            runs = [run for run in self._runs if run.tag == tag]
        for run in runs:
            run.cancel(replaced=True)
        return len(runs)

    def forget(self, tag: object) -> None:
        """The run ``tag`` names is over: drop a pending `replace` of it."""
        with self._lock:
            self._replacing.discard(tag)

    def kill_all(self) -> int:
        """SIGKILL every running command's group now, without its grace (a second stop signal).

        Like `terminate_all` (and closes the registry), but the group gets SIGKILL at
        once. Returns how many runs were killed.
        """
        with self._lock:
            self._closed = True
            runs = list(self._runs)
        for run in runs:
            run.cancel(kill=True)
        return len(runs)

    def _add(self, run: _Run) -> None:
        with self._lock:
            self._runs.add(run)
            closed = self._closed
            replaced = run.tag is not None and run.tag in self._replacing
        if closed or replaced:
            run.cancel(replaced=replaced and not closed)

    def _discard(self, run: _Run) -> None:
        with self._lock:
            self._runs.discard(run)


class _Run:
    """One running command's cancel flag and the pipe that wakes its supervisor."""

    def __init__(self, tag: object = None) -> None:
        self._lock = threading.Lock()
        self.tag = tag
        self.cancelled = False
        self.replaced = False
        self.killed = False  # cancelled without a grace: SIGKILL at once
        self.wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._open = True

    def cancel(self, *, replaced: bool = False, kill: bool = False) -> None:
        with self._lock:
            if not self.cancelled:
                self.replaced = replaced
            self.cancelled = True
            self.killed = self.killed or kill
            if self._open:
                with contextlib.suppress(BlockingIOError):  # full: already woken
                    os.write(self._wake_w, b"x")

    def close(self) -> None:
        with self._lock:
            self._open = False
            os.close(self._wake_w)
            os.close(self.wake_r)


class _Tail:
    """The last ``limit`` bytes of a stream, in memory bounded by ``2 * limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > 2 * self.limit:
            del self.buf[: -self.limit]

    def text(self) -> str:
        data = bytes(self.buf[-self.limit :]) if self.limit else b""
        if self.total > len(data):
            # The cut may fall inside a UTF-8 sequence: drop its continuation bytes.
            data = data.lstrip(bytes(range(0x80, 0xC0)))
        return data.decode("utf-8", errors="replace")


class _Lines:
    """Cuts one stream's bytes into lines and hands each to ``on_line`` when complete.

    A line longer than `LINE_LIMIT` bytes keeps its first `LINE_LIMIT` bytes and a mark
    saying how many more it had; memory stays bounded by the limit.
    """

    def __init__(self, stream: str, on_line: OnLine) -> None:
        self.stream = stream
        self.on_line = on_line
        self.buf = bytearray()
        self.cut = 0  # bytes of the current line beyond LINE_LIMIT, not kept

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            self._emit(newline=1)
            start = end + 1
        self._take(data[start:])

    def close(self) -> None:
        """The stream ended: hand over a last line that had no newline."""
        if self.buf or self.cut:
            self._emit(newline=0)

    def _take(self, part: bytes) -> None:
        room = LINE_LIMIT - len(self.buf)
        if len(part) > room:
            self.buf += part[:room]
            self.cut += len(part) - room
        else:
            self.buf += part

    def _emit(self, *, newline: int) -> None:
        raw = bytes(self.buf)
        size = len(raw) + self.cut + newline
        if self.cut:
            # The cut may fall inside a UTF-8 sequence: decode what is whole of it.
            text = _whole_utf8(raw) + f" [... {self.cut} more byte(s) of this line not shown]"
        else:
            text = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
        self.buf.clear()
        self.cut = 0
        self.on_line(self.stream, text, size)


def _whole_utf8(data: bytes) -> str:
    """``data`` decoded, leaving out a UTF-8 sequence its end cut in two."""
    for trim in range(min(3, len(data)) + 1):
        try:
            return data[: len(data) - trim].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(data) - 3:
                break  # invalid earlier on: not a matter of the cut
    return data.decode("utf-8", errors="replace")


def _killpg(pgid: int, sig: int) -> None:
    # Nothing left in the group (PermissionError: macOS, when only a zombie is left).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _has_exited(pid: int) -> bool:
    # WNOWAIT: look without reaping, so the pid (= the group id) stays ours.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def run_command(
    command: Sequence[str] | str,
    *,
    shell: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    kill_grace: float = 10.0,
    tail_bytes: int = TAIL_BYTES,
    groups: ProcessGroups | None = None,
    base_env: Mapping[str, str] | None = None,
    job: str = "",
    on_line: OnLine | None = None,
    tag: object = None,
    setup: ProcessSetup | None = None,
    stdin: int | None = None,
) -> RunResult:
    """Run a command in its own process group and wait for it to end.

    With ``groups``, the command runs under the supervisor, whose group does not
    outlive this process (see the module docstring).

    Args:
        command: The argv, or a shell script when ``shell`` is true.
        shell: Run ``command`` with ``/bin/sh -c``; never implied.
        env: Variables set over ``base_env``.
        cwd: The working directory (default: the daemon's).
        timeout: Seconds before the group gets SIGTERM (``None``: no limit).
        kill_grace: Seconds from SIGTERM to SIGKILL.
        tail_bytes: How much of the end of the output to keep.
        groups: The registry that `ProcessGroups.terminate_all` uses at shutdown.
        base_env: The environment to start from (default: ``os.environ``).
        job: The job's name, recorded in `MARKER_ENV` (with ``groups.marker``).
        on_line: Takes each line of output as soon as it is written (see `OnLine`).
        tag: Names the run for `ProcessGroups.replace` (any hashable value).
        setup: What the supervisor applies just before ``exec`` (needs ``groups``).
        stdin: A file descriptor the command reads as its stdin, closed here once it
            started (default: ``/dev/null``).

    Returns:
        How the command ended. A command that cannot start (no such program or
        directory, a setup step refused) is a result with `RunResult.error` set, not
        an exception.
    """
    _check_arguments(command, shell, setup, groups)
    start = time.monotonic()
    if groups is not None and groups.closed:
        return _shutting_down(stdin)
    argv: list[str] = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    started = _start(argv, _environment(base_env, env, setup), cwd, groups, job, stdin)
    if isinstance(started, OSError):
        return _not_started(command, cwd, started.strerror or str(started), start)
    ending = _Ending(_Run(tag), start, timeout, kill_grace)
    out = _Output(tail_bytes, on_line)
    report = _wait(*started, groups, ending, out)
    if report.startswith("error "):  # the supervisor could not start the command
        return _not_started(command, cwd, report[6:], start, out.tail)
    return ending.result(started[0].returncode, out.tail, _reported_end(report))


def _shutting_down(stdin: int | None) -> RunResult:
    """The result of a command not started: the daemon is shutting down."""
    if stdin is not None:
        os.close(stdin)
    return RunResult(cancelled=True, error="not started: shutting down")


def _check_arguments(
    command: Sequence[str] | str, shell: bool, setup: ProcessSetup | None, groups: object
) -> None:
    if isinstance(command, str) and not shell:
        raise TypeError(f"command is a string but shell is false: {command!r}")
    if setup is not None and groups is None:
        raise ValueError("a process setup needs groups: the supervisor applies it")


def _environment(
    base: Mapping[str, str] | None, env: Mapping[str, str] | None, setup: ProcessSetup | None
) -> dict[str, str]:
    """A command's environment: ``base`` (or ours), the setup's user's, ``env``, the setup."""
    full = dict(os.environ if base is None else base)
    if setup is not None:
        full.update(setup.env)
    full.update(env or {})
    if setup is not None:
        full[SETUP_ENV] = setup.to_json()
    return full


def _not_started(
    command: Sequence[str] | str,
    cwd: str | None,
    reason: str,
    start: float,
    tail: _Tail | None = None,
) -> RunResult:
    """The result of a command that could not start, saying what, where and why."""
    what = command if isinstance(command, str) else command[0]
    where = f" in {cwd!r}" if cwd else ""
    return RunResult(
        error=f"cannot start {what!r}{where}: {reason}",
        duration=time.monotonic() - start,
        output="" if tail is None else tail.text(),
        output_bytes=0 if tail is None else tail.total,
    )


def _start(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    groups: ProcessGroups | None,
    job: str,
    stdin: int | None,
) -> tuple[subprocess.Popen[bytes], int] | OSError:
    """Start ``argv`` in a new session: ``(its process, the status pipe or -1)``.

    With ``groups``, the supervisor starts it and reports on the status pipe. An
    `OSError` is returned, not raised, when it cannot start. ``stdin`` (a file
    descriptor; None: ``/dev/null``) is closed in every case.
    """
    status_r = status_w = -1
    if groups is not None and sys.executable:
        if groups.marker is not None:
            env[MARKER_ENV] = f"{groups.marker}:{job}"
        if groups.owner is not None:
            env[OWNER_ENV] = groups.owner
        lifeline = groups.lifeline()
        status_r, status_w = os.pipe()
        popen_args: list[str] = [
            sys.executable,
            "-I",
            "-S",
            _SUPERVISOR,
            str(lifeline),
            str(status_w),
            "--",
            *argv,
        ]
        pass_fds: tuple[int, ...] = (lifeline, status_w)
    else:
        popen_args, pass_fds = argv, ()
    try:
        proc = subprocess.Popen(
            popen_args,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        if status_r >= 0:
            os.close(status_r)
        return exc
    finally:
        if status_r >= 0:
            os.close(status_w)
        if stdin is not None:
            os.close(stdin)
    return proc, status_r


def _wait(
    proc: subprocess.Popen[bytes],
    status_r: int,
    groups: ProcessGroups | None,
    ending: _Ending,
    out: _Output,
) -> str:
    """Supervise the started ``proc`` (cancellable through ``groups``) until it is over.

    Returns:
        The supervisor's report on ``status_r`` (empty without one).
    """
    run = ending.run
    if groups is not None:
        groups._add(run)
    try:
        _supervise(proc, ending, out)
        for stream in ("stdout", "stderr"):  # a last line left unended (pipe held elsewhere)
            out.close(stream)
        proc.wait()
    finally:
        if groups is not None:
            groups._discard(run)
        run.close()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        report = _read_status(status_r) if status_r >= 0 else ""
    return report


def _reported_end(report: str) -> float | None:
    """The ``end T`` the supervisor reported (`time.monotonic` when the command ended)."""
    for line in report.splitlines():
        if line.startswith("end "):
            try:
                at = float(line[4:])
            except ValueError:
                return None
            # Never later than now (a clock read in another process, same clock).
            return min(at, time.monotonic())
    return None


def _read_status(fd: int) -> str:
    """What the supervisor reported on its status pipe (``pid N`` or ``error TEXT``)."""
    try:
        os.set_blocking(fd, False)
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 4096):
                data += chunk
    finally:
        os.close(fd)
    return data.decode(errors="replace").strip()


class _Output:
    """Where a command's output goes: the kept tail, and each line to ``on_line``."""

    def __init__(self, tail_bytes: int, on_line: OnLine | None) -> None:
        self.tail = _Tail(tail_bytes)
        self.lines = (
            None
            if on_line is None
            else {name: _Lines(name, on_line) for name in ("stdout", "stderr")}
        )

    def feed(self, stream: str, data: bytes) -> None:
        self.tail.feed(data)
        if self.lines is not None:
            self.lines[stream].feed(data)

    def close(self, stream: str) -> None:
        if self.lines is not None:
            self.lines[stream].close()


class _Ending:
    """How a started command is brought to its end, and then how it ended.

    Its group gets SIGTERM at the deadline, at a cancel, or when its leader exited (the
    rest of the group goes with it); SIGKILL ``kill_grace`` seconds later (at once on
    a second stop signal); then its pipes are read for at most `_DRAIN` seconds more.
    """

    def __init__(self, run: _Run, start: float, timeout: float | None, kill_grace: float) -> None:
        self.run = run
        self.start = start
        self.deadline = None if timeout is None else start + timeout
        self.kill_grace = kill_grace
        self.timed_out = self.cancelled = False
        self.kill_at: float | None = None  # set when SIGTERM went out
        self.give_up_at: float | None = None  # set when SIGKILL went out

    def step(self, pgid: int, now: float, *, exited: bool, eof: bool) -> bool:
        """Send the signal due at ``now``; True when the command is over."""
        if self.kill_at is None:
            if exited:  # the rest of its group goes with it
                reason = "exited"
            elif self.deadline is not None and now >= self.deadline:
                reason, self.timed_out = "timeout", True
            elif self.run.cancelled:
                reason, self.cancelled = "cancel", True
            else:
                reason = ""
            if reason:
                _killpg(pgid, signal.SIGTERM)
                self.kill_at = now + self.kill_grace
        if self.run.killed and self.kill_at is not None and self.give_up_at is None:
            self.kill_at = now  # a second stop signal: no grace
        if exited and eof:
            return True
        if self.kill_at is not None and self.give_up_at is None and now >= self.kill_at:
            _killpg(pgid, signal.SIGKILL)
            self.give_up_at = now + _DRAIN
        # Past the drain, something outside the group holds the pipe: stop reading.
        return self.give_up_at is not None and exited and now >= self.give_up_at

    def wait(self, now: float, *, poll: bool) -> float | None:
        """How long to wait for output before the next `step` (``poll``: for the exit too)."""
        waits = [
            t - now
            for t in (
                self.deadline if self.kill_at is None else None,
                self.kill_at if self.give_up_at is None else None,
                self.give_up_at,
            )
            if t is not None
        ]
        if poll:
            waits.append(_POLL)
        return max(0.0, min(waits)) if waits else None

    def result(self, code: int, tail: _Tail, ended: float | None) -> RunResult:
        """How the command ended: its return ``code``, output ``tail``, reported end."""
        cancelled = self.cancelled and not self.timed_out
        return RunResult(
            exit_code=code if code >= 0 else None,
            signal=-code if code < 0 else None,
            timed_out=self.timed_out,
            cancelled=cancelled,
            replaced=cancelled and self.run.replaced,
            duration=(time.monotonic() if ended is None else ended) - self.start,
            ended=ended,
            output=tail.text(),
            output_bytes=tail.total,
        )


def _supervise(proc: subprocess.Popen[bytes], ending: _Ending, out: _Output) -> None:
    """Read output and enforce the deadlines (`_Ending`) until the command is over."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    exited = eof = False
    with selectors.DefaultSelector() as sel:
        for fd, name in streams.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        sel.register(ending.run.wake_r, selectors.EVENT_READ, "wake")
        pidfd = -1
        try:
            pidfd = os.pidfd_open(proc.pid)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):
            pass  # no pidfd (macOS, old Linux): poll for the exit instead
        try:
            while True:
                now = time.monotonic()
                exited = exited or _has_exited(proc.pid)
                if ending.step(proc.pid, now, exited=exited, eof=eof):
                    break
                wait = ending.wait(now, poll=pidfd < 0 and not exited)
                eof = _read_ready(sel, wait, ending.run, out, pidfd)
        finally:
            if pidfd >= 0:
                os.close(pidfd)


def _read_ready(
    sel: selectors.BaseSelector, wait: float | None, run: _Run, out: _Output, pidfd: int
) -> bool:
    """Wait up to ``wait`` s and take what is ready; True once both output pipes ended.

    Output goes to ``out``; a wake-up (a cancel) is consumed; the exit, seen on
    ``pidfd``, is unregistered (`_supervise` reads it with `_has_exited`).
    """
    for key, _ in sel.select(wait):
        if key.data in ("stdout", "stderr"):
            try:
                data = os.read(key.fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if data:
                out.feed(key.data, data)
            else:
                out.close(key.data)
                sel.unregister(key.fd)
        elif key.data == "wake":
            os.read(run.wake_r, 64)
        else:
            sel.unregister(pidfd)
    return not any(key.data in ("stdout", "stderr") for key in sel.get_map().values())


def resolve_callable(target: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` (the part after ``:`` may be dotted).

    Raises:
        ImportError: the module cannot be imported.
        AttributeError: the module has no such attribute.
        TypeError: the attribute is not callable, or ``target`` has no ``:``.
    """
    module_name, sep, qualname = target.partition(":")
    if not sep or not module_name or not qualname:
        raise TypeError(f"call must look like 'package.module:function', got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"call {target!r} is not callable, got {obj!r}")
    return obj  # type: ignore[no-any-return]


def run_call(
    target: str | Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    tail_bytes: int = TAIL_BYTES,
) -> RunResult:
    """Call a Python function in this process; a coroutine it returns is run to the end.

    Its output is not captured (it shares the daemon's streams). An `Exception` it
    raises, or a failure to import it, makes a failed result whose `RunResult.output`
    is the end of the traceback; `SystemExit` counts as an exit status.
    """
    start = time.monotonic()
    try:
        fn = resolve_callable(target) if isinstance(target, str) else target
        value = fn(*args, **dict(kwargs or {}))
        if inspect.iscoroutine(value):
            import asyncio  # only for async jobs: the daemon itself is threads

            asyncio.run(value)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return RunResult(exit_code=code, duration=time.monotonic() - start)
    except Exception as exc:
        trace = "".join(traceback.format_exception(exc))
        return RunResult(
            error=f"{type(exc).__name__}: {exc}",
            duration=time.monotonic() - start,
            output=trace[-tail_bytes:] if tail_bytes else "",
            output_bytes=len(trace.encode()),
        )
    return RunResult(exit_code=0, duration=time.monotonic() - start)


def run_attempt(
    job: JobConfig,
    *,
    groups: ProcessGroups | None = None,
    tail_bytes: int = TAIL_BYTES,
    on_line: OnLine | None = None,
    tag: object = None,
    on_bound: Callable[[RunResult], object] | None = None,
) -> RunResult:
    """Run ``job`` once, as a command or a call, with its options.

    ``on_line`` and ``tag`` are `run_command`'s (a call in a thread has no output of
    its own). A call with ``isolation = "process"`` runs as a command in a child
    Python (`tickwork._durable.isolation`). A call in a thread past its ``timeout``
    gives ``on_bound`` its timed-out result then, and this returns that result once
    the thread has returned (a thread cannot be stopped).
    """
    # What a child process of this job gets whatever it runs: its bounds and its output.
    run = functools.partial(
        run_command,
        timeout=job.timeout,
        kill_grace=job.kill_grace,
        tail_bytes=tail_bytes,
        groups=groups,
        job=job.name,
        on_line=on_line,
        tag=tag,
    )
    if job.call is not None and job.isolation == "process":
        return run(
            child_command(job.call),
            env={"PYTHONPATH": child_env()["PYTHONPATH"]},
            stdin=child_stdin(job.args, job.kwargs),
        )
    if job.call is not None:
        return _call_in_thread(job, tail_bytes, on_bound)
    assert job.command is not None
    try:
        setup = process_setup(
            user=job.user,
            group=job.group,
            umask=job.umask,
            limit_memory=job.limit_memory,
            limit_cpu=job.limit_cpu,
            limit_files=job.limit_files,
        )
    except ValueError as exc:
        what = job.command if isinstance(job.command, str) else job.command[0]
        return RunResult(error=f"cannot start {what!r}: {exc}")
    return run(job.command, shell=job.shell, env=job.env, cwd=optional_dir(job.cwd), setup=setup)


def _call_in_thread(
    job: JobConfig, tail_bytes: int, on_bound: Callable[[RunResult], object] | None
) -> RunResult:
    """`run_call` for a call job; past its ``timeout``, a timed-out result (see `run_attempt`)."""
    assert job.call is not None
    call, timeout = job.call, job.timeout
    if timeout is None:
        return run_call(call, job.args, job.kwargs, tail_bytes=tail_bytes)
    late = RunResult(
        timed_out=True,
        error=f"timed out after {timeout:g} s; a thread cannot be stopped: it went on,"
        " its slot held until it returned",
        duration=timeout,
    )
    result, passed = call_bounded(
        lambda: run_call(call, job.args, job.kwargs, tail_bytes=tail_bytes),
        timeout,
        lambda: on_bound(late) if on_bound is not None else None,
    )
    return late if passed else result


def backoff_delay(retry: int, *, base: float, cap: float) -> float:
    """Seconds to wait before retry number ``retry`` (1-based), before its jitter.

    ``base * 2**(retry-1)``, at most ``cap`` (`tickwork._core.attempts.backoff_delay`,
    which the retries jitter into the upper half of it).
    """
    return jittered_backoff(retry, base=base, cap=cap, jitter=False)


def run_with_retries(
    attempt: Callable[[int], RunResult],
    *,
    retries: int,
    backoff: float,
    backoff_max: float = 300.0,
    stop: threading.Event | None = None,
    sleep: Callable[[float], object] | None = None,
    rand: Callable[[], float] = random.random,
) -> RunResult:
    """Run ``attempt(1)``, then retry failures up to ``retries`` times with backoff.

    Args:
        attempt: Runs attempt number ``n`` (1-based) and returns its result.
        retries: Further attempts after a failure (0: run once).
        backoff: Seconds before the first retry; doubled for each further one.
        backoff_max: The cap on the backoff.
        stop: When set (shutdown), no further attempt starts and a backoff ends at once.
        sleep: Waits the given seconds; returns true if interrupted. The default waits
            on ``stop``. Tests inject one that records the delays.
        rand: Picks each wait's jitter, in ``[0, 1)`` (0: the full doubled wait).

    Returns:
        The last attempt's result, with `RunResult.attempt` set. A cancelled result
        is never retried.
    """
    wait = sleep if sleep is not None else (stop or threading.Event()).wait
    n = 1
    while True:
        result = replace(attempt(n), attempt=n)
        if result.ok or result.cancelled or n > retries or (stop is not None and stop.is_set()):
            return result
        interrupted = wait(jittered_backoff(n, base=backoff, cap=backoff_max, rand=rand))
        if interrupted or (stop is not None and stop.is_set()):
            return result
        n += 1


def run_job(
    job: JobConfig,
    *,
    groups: ProcessGroups | None = None,
    stop: threading.Event | None = None,
    sleep: Callable[[float], object] | None = None,
    on_start: Callable[[int], object] | None = None,
    on_end: Callable[[RunResult], object] | None = None,
    tail_bytes: int = TAIL_BYTES,
    on_line: OnLine | None = None,
    tag: object = None,
    rand: Callable[[], float] = random.random,
) -> RunResult:
    """Run ``job`` with its retries: the whole of one scheduled run.

    Args:
        job: The job.
        groups: Where running commands are registered for `ProcessGroups.terminate_all`.
        stop: Set at shutdown: no new attempt starts and a backoff ends at once.
        sleep: Injectable backoff wait (see `run_with_retries`).
        on_start: Called with the attempt number before each attempt (the run log).
        on_end: Called with each attempt's result.
        tail_bytes: How much of the end of the output to keep.
        on_line: Takes each line a command writes, as it is written (see `OnLine`).
        tag: Names this run for `ProcessGroups.replace`.
        rand: Picks each backoff's jitter (see `run_with_retries`).

    Returns:
        The last attempt's result.
    """

    def attempt(n: int) -> RunResult:
        if on_start is not None:
            on_start(n)
        bounded: list[RunResult] = []

        def at_bound(late: RunResult) -> None:  # the log line and ledger entry, now
            bounded.append(replace(late, attempt=n))
            if on_end is not None:
                on_end(bounded[0])

        result = run_attempt(
            job, groups=groups, tail_bytes=tail_bytes, on_line=on_line, tag=tag, on_bound=at_bound
        )
        if bounded:
            return bounded[0]
        result = replace(result, attempt=n)
        if on_end is not None:
            on_end(result)
        return result

    return run_with_retries(
        attempt,
        retries=job.retries,
        backoff=job.retry_backoff,
        backoff_max=job.retry_backoff_max,
        stop=stop,
        sleep=sleep,
        rand=rand,
    )


# -- the daemon's mark on its runs (`tickwork._daemon.process.stopping` finds them) ---


def daemon_marker(key: str) -> str:
    """``KEY:PID:START`` naming this process (START: its start time, from /proc).

    Args:
        key: Names the state and namespace the daemon runs (hex digits, no ``:``).
    """
    stat = proc_stat(os.getpid())
    return f"{key}:{os.getpid()}:{stat[2] if stat else 0}"
