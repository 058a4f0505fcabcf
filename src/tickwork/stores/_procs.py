"""Processes on this host: identity (pid and start time) and liveness, from /proc.

Used where a process is judged dead for sure: leftover runs of a killed daemon
(`tickwork._daemon.process.runner`), claims whose owner's process is gone
(`tickwork.stores.sqlite`), and the runs of a gone owner, killed before its claims are
handed on (`end_leftovers`).
A pid alone is not an identity (pids are reused); with its start time it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Collection
from pathlib import Path
from typing import Final

#: The variable naming the owner (`DurableScheduler.owner`) whose claim a daemon's run
#: process serves: every process of the run inherits it (`tickwork._daemon.process.runner`).
OWNER_ENV: Final = "TICKWORK_OWNER"

_log = logging.getLogger("tickwork.stores")


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


def end_leftovers(owners: Collection[str]) -> set[str]:
    """Kill what is left on this host of the runs of ``owners``; say whose was found.

    ``owners`` are gone (their process or sessions ended). A process belongs to one of
    their runs when `OWNER_ENV` in its environment names it (readable: same user, or
    root). Each such process still alive has its process group killed (SIGKILL), after
    its pid and start time are checked once more, so a recycled pid is never hit.

    Returns:
        The owners a live process was found for: their claims wait for the next look,
        which finds the processes gone. Empty where there is no /proc.
    """
    wanted = {f"{OWNER_ENV}={owner}".encode(): owner for owner in owners}
    if not wanted or not os.path.isdir("/proc"):
        return set()
    found: dict[str, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        owner = next((wanted[v] for v in environ if v in wanted), None)
        stat = None if owner is None else proc_stat(int(entry))
        if owner is None or stat is None or not process_alive(int(entry), stat[2]):
            continue
        with contextlib.suppress(OSError):
            os.killpg(stat[1], signal.SIGKILL)
        found.setdefault(owner, []).append(int(entry))
    for owner, pids in found.items():
        _log.warning(
            "owner %r is gone but %d process(es) of its runs were still alive here (pid %s):"
            " killed them (SIGKILL) before its claims are handed on",
            owner,
            len(pids),
            ", ".join(map(str, sorted(pids))),
        )
    return set(found)
