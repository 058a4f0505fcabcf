"""``tickwork backfill`` and ``tickwork cancel`` as operators run them: real processes.

Issue 26, point 3: ``backfill cronmin --from 30d --to now --force`` on a job declared
minutes before queued 43,194 runs, and nothing could take them back. Here the state is
written by a real ``tickwork run`` (``--for``), the commands run as subprocesses, and
the question above ``--max`` is answered on a real terminal (a pty). With a live daemon
on both stores: tests/test_control_races.py.
"""

from __future__ import annotations

import os
import pty
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import forked

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and ptys")


def tickwork(*args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tickwork``; with ``answer``, its stdin is a terminal that types it."""
    command = [sys.executable, "-m", "tickwork", *args]
    if answer is None:  # forked warm (tests/forked.py), stdin /dev/null
        return forked.tickwork(*args, timeout=120)
    parent, child = pty.openpty()
    try:
        proc = subprocess.Popen(
            command, stdin=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        os.close(child)
        child = -1
        os.write(parent, answer.encode() + b"\n")
        out, err = proc.communicate(timeout=120)
    finally:
        if child >= 0:
            os.close(child)
        os.close(parent)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


@pytest.fixture
def jobs(tmp_path: Path) -> list[str]:
    """A jobs file with a per-minute cron job, declared by a real daemon: ``-f`` and ``--state``."""
    path = tmp_path / "jobs.toml"
    path.write_text(
        textwrap.dedent(
            """\
            [[job]]
            name = "cronmin"
            command = ["true"]
            cron = "* * * * *"
            """
        )
    )
    where = ["-f", str(path), "--state", str(tmp_path / "state.sqlite3")]
    ran = tickwork("run", str(path), *where[2:], "--for", "1s")
    assert ran.returncode == 0, ran.stderr
    return where


def as_if_old(where: list[str]) -> None:
    """Make the job look stored by a tickwork before first slots (first_slot NULL)."""
    with sqlite3.connect(where[-1]) as conn:
        conn.execute("UPDATE jobs SET first_slot = NULL")


def waiting(where: list[str]) -> str:
    listed = tickwork("cancel", "cronmin", *where, "--list", "--limit", "2")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def test_a_backfill_reaching_before_the_job_existed_is_clipped_and_says_so(
    jobs: list[str],
) -> None:
    # The command: 30 days of a job declared seconds ago. The slots before its
    # first slot are left out, counted, and no confirmation is needed for what is left.
    dry = tickwork("backfill", "cronmin", *jobs, "--from", "30d", "--to", "now", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "left out 43,1" in dry.stdout or "left out 43,2" in dry.stdout, dry.stdout
    assert "before the job's first slot" in dry.stdout
    assert dry.stdout.rstrip().endswith("dry run: nothing was queued")
    done = tickwork("backfill", "cronmin", *jobs, "--from", "30d", "--to", "now", "--force")
    assert done.returncode == 0, done.stderr
    assert "before the job's first slot" in done.stdout
    queued = 0 if done.stdout.startswith("no slot") else int(done.stdout.split()[1])
    assert queued <= 1  # the job is seconds old: at most the minute it was declared in
    assert waiting(jobs).startswith("cronmin has no waiting run" if not queued else "cronmin: 1")


def test_a_large_backfill_is_counted_first_and_asked_for(jobs: list[str]) -> None:
    as_if_old(jobs)  # when it was declared is not known: nothing is left out
    # Three whole hours ending a minute ago: the same 181 slots however slowly the
    # commands run (a loaded machine may cross minutes between them).
    end = (int(time.time()) // 60 - 1) * 60
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    window = ["--from", time.strftime(stamp, time.gmtime(end - 3 * 3600))]
    window += ["--to", time.strftime(stamp, time.gmtime(end))]
    dry = tickwork("backfill", "cronmin", *jobs, *window, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would queue 181 slot(s) of cronmin, "), dry.stdout
    count = 181
    assert "when cronmin was first declared is not recorded" in dry.stdout
    assert waiting(jobs) == "cronmin has no waiting run\n"
    # Above --max without a terminal: refused, saying how to go on.
    refused = tickwork("backfill", "cronmin", *jobs, *window, "--max", "100")
    assert refused.returncode == 2, refused.stderr
    assert f"would queue {count:,} runs of cronmin" in refused.stderr
    assert "more than --max 100. Nothing was queued" in refused.stderr
    assert "--dry-run" in refused.stderr and "--yes" in refused.stderr
    assert waiting(jobs) == "cronmin has no waiting run\n"
    # On a terminal it asks; "n" queues nothing, "y" queues them.
    declined = tickwork("backfill", "cronmin", *jobs, *window, "--max", "100", answer="n")
    assert declined.returncode == 1, declined.stderr
    assert f"queue {count:,} runs of cronmin" in declined.stderr and "[y/N]" in declined.stderr
    assert "nothing queued" in declined.stderr
    assert waiting(jobs) == "cronmin has no waiting run\n"
    agreed = tickwork("backfill", "cronmin", *jobs, *window, "--max", "100", answer="y")
    assert agreed.returncode == 0, agreed.stderr
    assert agreed.stdout.startswith(f"queued {count} slot(s) of cronmin"), agreed.stdout
    queued = count
    listed = waiting(jobs)
    assert listed.startswith(f"cronmin: {queued} waiting run(s) ({queued} backfill), ")
    first = listed.splitlines()[1].split()[0]
    assert listed.splitlines()[-1] == f"  ... and {queued - 2} more (--limit to show more)"
    # Cancel one by its slot as listed, then all; each is recorded.
    one = tickwork("cancel", "cronmin", *jobs, "--slot", first, "--by", "ana@ops")
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith(f"cancelled 1 waiting run(s) of cronmin, {first}")
    again = tickwork("cancel", "cronmin", *jobs, "--slot", first)
    assert again.returncode == 1
    assert "cronmin has no waiting run due" in again.stderr and "--list" in again.stderr
    rest = tickwork("cancel", "cronmin", *jobs, "--all-waiting", "--note", "wrong window")
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.startswith(f"cancelled {queued - 1} waiting run(s) of cronmin")
    assert waiting(jobs) == "cronmin has no waiting run\n"
    shown = tickwork("history", "cronmin", *jobs, "--limit", "10")
    assert shown.returncode == 0, shown.stderr
    assert "[cancel]  by ana@ops  1 waiting run(s) cancelled (1 backfill)" in shown.stdout
    assert f"{queued - 1} waiting run(s) cancelled ({queued - 1} backfill)" in shown.stdout
    assert "note: wrong window" in shown.stdout
    assert f"{first}  cronmin  cancelled  (backfill)" in shown.stdout
    # Cancelled slots never ran: under --max they are queued again without a question.
    redo = tickwork("backfill", "cronmin", *jobs, *window, "--max", "1000")
    assert redo.returncode == 0, redo.stderr
    assert redo.stdout.startswith("queued "), redo.stdout


def test_cancel_says_what_it_needs(jobs: list[str]) -> None:
    bare = tickwork("cancel", "cronmin", *jobs)
    assert bare.returncode == 2
    assert "one of the arguments --list --all-waiting --slot is required" in bare.stderr
    nothing = tickwork("cancel", "cronmin", *jobs, "--all-waiting")
    assert (nothing.returncode, nothing.stdout) == (0, "cronmin has no waiting run; nothing done\n")
    unknown = tickwork("cancel", "nope", *jobs, "--list")
    assert unknown.returncode == 1 and "no job 'nope' in" in unknown.stderr
    bad = tickwork("cancel", "cronmin", *jobs, "--slot", "yesterday")
    assert bad.returncode == 2 and "got 'yesterday'" in bad.stderr
    limit = tickwork("backfill", "cronmin", *jobs, "--from", "1h", "--to", "now", "--max", "0")
    assert limit.returncode == 2 and "--max: must be an integer >= 1, got 0" in limit.stderr


def test_a_paused_job_is_refused_saying_why(jobs: list[str]) -> None:
    assert tickwork("pause", "cronmin", *jobs).returncode == 0
    refused = tickwork("backfill", "cronmin", *jobs, "--from", "10m", "--to", "now")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "tickwork backfill: job 'cronmin' is paused, and a paused job is not backfilled"
        " (its slots would wait for the resume): resume it first, then backfill\n"
    )
