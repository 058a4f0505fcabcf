"""Processes on this host: identity (pid and start time) and liveness, from /proc.

Used where a process is judged dead for sure: leftover runs of a killed daemon
(`tickwork._daemon.runner`) and claims whose owner's process is gone (`tickwork.stores.sqlite`).
A pid alone is not an identity (pids are reused); with its start time it is.
"""

from __future__ import annotations

import os
from pathlib import Path


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, pgid, start time in clock ticks)`` of a process, from /proc; or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # After the command name: state, ppid, pgrp, session, ..., starttime (field 22).
    return fields[0], int(fields[2]), int(fields[19])


def process_alive(pid: int, started: int) -> bool:
    """Whether process ``pid`` that started at ``started`` (clock ticks) still runs."""
    stat = proc_stat(pid)
    return stat is not None and stat[2] == started and stat[0] not in ("Z", "X")


def process_scope() -> str | None:
    """What pids of this process can be judged against: host, boot and pid namespace.

    Two processes with the same scope see each other in /proc; a process of another
    scope (another host, a container with its own pid namespace, before a reboot) can't
    be judged from here. None where there is no /proc.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{os.uname().nodename}/{boot}/{namespace}"


def own_identity() -> tuple[int, int] | None:
    """``(pid, start time in clock ticks)`` of this process; None where there is no /proc."""
    stat = proc_stat(os.getpid())
    return None if stat is None else (os.getpid(), stat[2])
