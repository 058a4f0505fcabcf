"""Where a benchmark's CPU goes: run a command, sample the machine's CPU by process kind.

Run ``python bench/cpu_split.py -- COMMAND...``, for example::

    python bench/cpu_split.py -- .venv/bin/python bench/postgres.py \\
        --baseline none --workloads burst --nodes 3

Every ``--every`` seconds (default 0.5) it reads ``/proc``: how busy the whole machine
was, and how many cores each kind of process used (``postgres``: server processes;
``node``: the benchmark's scheduler node processes, ``bench/pg_node.py``, or
bench/peers.py's ``bench/peer_node.py`` and ``bench/peer_pgboss.js``; ``bench``: the
command's own Python; ``other``: everything else, including other users of the
machine). When the command ends it prints the samples in which the machine was at
least ``--busy`` percent busy (default 80) and their mean per kind: during a burst that
keeps every core busy, that is the split of the cores between the database server and
the schedulers, i.e. what bounds the burst's throughput. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")
KINDS = ("postgres", "node", "bench", "other")


def _kind(pid: str) -> tuple[str, int] | None:
    """The kind of process ``pid`` and its CPU time so far, in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:  # ended meanwhile
        return None
    comm, _, rest = stat.partition("(")[2].rpartition(")")
    fields = rest.split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    if any(name in cmd for name in ("pg_node", "peer_node", "peer_pgboss")):
        kind = "node"
    elif "bench/postgres.py" in cmd or "bench/peers.py" in cmd:
        kind = "bench"
    elif comm.startswith("postgres"):
        kind = "postgres"
    else:
        kind = "other"
    return kind, ticks


def _processes() -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (found := _kind(pid)) is not None:
            out[pid] = found
    return out


def _machine() -> tuple[int, int]:
    """Total and idle (idle + iowait) jiffies of all CPUs."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]


def main() -> None:
    """Run the command and print the CPU split while the machine was busy."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--busy", type=float, default=80.0, help="busy %% a sample must reach")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    cpus = os.cpu_count() or 1
    child = subprocess.Popen(command)
    before, (total0, idle0) = _processes(), _machine()
    stamp0 = time.monotonic()
    samples: list[tuple[float, dict[str, float]]] = []
    while child.poll() is None:
        time.sleep(args.every)
        after, (total1, idle1) = _processes(), _machine()
        stamp1 = time.monotonic()
        seconds = stamp1 - stamp0
        cores = dict.fromkeys(KINDS, 0.0)
        for pid, (kind, ticks) in after.items():
            old = before.get(pid)
            cores[kind] += (ticks - (old[1] if old is not None else 0)) / HZ / seconds
        busy = 100.0 * (1.0 - (idle1 - idle0) / max(1, total1 - total0))
        samples.append((busy, cores))
        before, total0, idle0, stamp0 = after, total1, idle1, stamp1
    hot = [cores for busy, cores in samples if busy >= args.busy]
    print(
        f"\ncpu_split: {len(samples)} samples of {args.every:g} s on {cpus} CPUs;"
        f" {len(hot)} with the machine >= {args.busy:g}% busy",
        file=sys.stderr,
    )
    if hot:
        split = ", ".join(f"{kind} {statistics.mean(c[kind] for c in hot):.2f}" for kind in KINDS)
        print(f"cpu_split: cores used while busy (mean): {split}", file=sys.stderr)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
