"""The small process between the daemon and a command's process group.

``tickwork run`` starts each command through this script (run by path with
``python -I -S``, so it imports nothing but the standard library and starts fast)::

    python -I -S _supervisor.py LIFELINE_FD STATUS_FD -- ARGV...

It is started in a new session, so it leads the run's process group; the command is
its child in that same group, with the supervisor's stdin, stdout and stderr. It:

- writes ``pid N`` (or ``error TEXT`` when the command cannot start, then exits 127)
  to ``STATUS_FD``, then lets go of the output pipes (stdout and stderr), so each ends
  when the command and what it started have closed it;
- writes ``end T`` to ``STATUS_FD`` when the command has exited, ``T`` being
  `time.monotonic` then (the system's clock, the daemon's too): the daemon records
  that as the run's end, even when it reaps the supervisor later (it was stopped
  with SIGSTOP, say);
- ends the way the command ended: the same exit status, or killed by the same signal.
  The daemon waits for the supervisor as it would for the command itself;
- applies the job's process setup, when ``TICKWORK_SETUP`` (JSON, taken out of the
  environment) holds one, in the command's process just before ``exec``: resource
  limits, then the umask, then the groups, the group id and the user id (see
  ``jobprocess.py``); a step that fails is reported as ``error`` with the step named;
- ignores SIGTERM, SIGINT and SIGHUP: the daemon ends a run by signalling the whole
  group, which reaches the command; the supervisor follows when the command exits, or
  dies with the group's SIGKILL;
- watches ``LIFELINE_FD``, the read end of a pipe whose write end only the daemon
  holds. When the daemon dies, however it dies (SIGKILL included), the kernel closes
  that end and the read sees end-of-file: the supervisor then sends SIGKILL to its
  group, itself included, at once. No ``kill_grace``: the dead daemon's claim is
  recovered by another node within a second, and its run must be over by then;
- on Linux, has the kernel send SIGKILL to the command when the supervisor dies
  (``PR_SET_PDEATHSIG``, set in the command's process after the user change that
  would clear it): a supervisor killed with its daemon takes its command along.
  What the command started is not reached that way; the store's recovery ends it
  (`tickwork.stores._procs.end_leftovers`).

See ``docs/daemon.md`` ("When the daemon is killed").
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

_POLL = 0.05  # where pidfd_open is missing (macOS): how often to look for the exit
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # by this process, not the command


def _mirror(status: int) -> None:
    """End this process the way the command ended (status from ``waitpid``)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # its core, not ours
        except (ImportError, ValueError, OSError):
            pass
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not end a process: say which
    os._exit(os.waitstatus_to_exitcode(status))


def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl`` (loaded before the fork: the child only calls it), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    return prctl


def _setup(report_w: int) -> Callable[[], None]:
    """The ``preexec_fn``: ``TICKWORK_SETUP``'s steps, then death with this process.

    It runs in the child between fork and exec (this process has one thread, so that is
    safe); a setup step that fails writes its name and reason to ``report_w`` and raises.
    The parent-death signal comes last: a change of user clears it.
    """
    raw = os.environ.pop("TICKWORK_SETUP", None)
    setup = json.loads(raw) if raw else {}
    prctl, parent = _prctl(), os.getpid()

    def apply() -> None:
        # The command gets these signals as the daemon sends them, even one sent while
        # it starts (blocked until now: this process's handler would swallow it here).
        for sig in _IGNORED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _IGNORED)
        step = "setup"
        try:
            import resource

            for name, soft, hard in setup.get("limits", ()):
                step = f"{name} = {soft}"
                resource.setrlimit(getattr(resource, name), (soft, hard))
            if "umask" in setup:
                os.umask(setup["umask"])
            if "groups" in setup:
                step = f"setgroups {setup['groups']}"
                os.setgroups(setup["groups"])
            if "gid" in setup:
                step = f"setgid {setup['gid']}"
                os.setgid(setup["gid"])
            if "uid" in setup:
                step = f"setuid {setup['uid']}"
                os.setuid(setup["uid"])
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            os.write(report_w, f"{step}: {reason}".encode())
            raise
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the supervisor died before that: follow it
                os._exit(128 + signal.SIGKILL)

    return apply


def _start(command: list[str]) -> subprocess.Popen[bytes] | str:
    """Start the command with its setup: the child, or why it could not start."""
    report_r, report_w = os.pipe()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _IGNORED)
    try:
        return subprocess.Popen(command, preexec_fn=_setup(report_w))
    except (OSError, subprocess.SubprocessError) as exc:
        os.close(report_w)
        report_w = -1
        detail = os.read(report_r, 4096).decode(errors="replace")
        return detail or (getattr(exc, "strerror", None) or str(exc))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if report_w >= 0:
            os.close(report_w)
        os.close(report_r)


def main(argv: list[str]) -> None:
    """Run the supervisor (see the module docstring); never returns."""
    lifeline, status_fd = int(argv[1]), int(argv[2])
    command = argv[4:]
    # A handler, not SIG_IGN: the command must not inherit an ignored SIGTERM, and an
    # exec resets handled signals to their default.
    for sig in _IGNORED:
        signal.signal(sig, lambda signum, frame: None)
    child = _start(command)
    if isinstance(child, str):
        with contextlib.suppress(OSError):
            os.write(status_fd, f"error {child}\n".encode())
        os._exit(127)
    # A broken pipe here means the daemon died as the command started: the lifeline
    # says so too, and the loop below ends the run. Dying on the error would not.
    with contextlib.suppress(OSError):
        os.write(status_fd, f"pid {child.pid}\n".encode())
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the command holds the output pipe, not us
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        pidfd = -1
    while True:
        try:
            ready, _, _ = select.select(
                [fd for fd in (pidfd, lifeline) if fd >= 0], [], [], None if pidfd >= 0 else _POLL
            )
        except InterruptedError:
            ready = []
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        if pid:
            # When it ended, for the daemon (which may read this much later).
            with contextlib.suppress(OSError):
                os.write(status_fd, f"end {time.monotonic()!r}\n".encode())
            _mirror(status)
        if lifeline in ready and not os.read(lifeline, 64):
            break  # end of file: the daemon is gone
    # Orphaned: its claim goes to another node within a second, so the run ends now,
    # without the kill_grace a timeout gives (a run's processes never outlive it).
    os.killpg(0, signal.SIGKILL)
    os._exit(137)  # not reached: SIGKILL ends this process too


if __name__ == "__main__":
    main(sys.argv)
