"""``overlap = "replace"``: a real ``tickwork run`` ends a job's running process group
when its next run is due, and starts the new run; the slot ledger says so.

Also what refuses it: the jobs file's validation (calls, fixed-delay jobs) and the
library (a thread cannot be stopped).
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_config import problems
from tests.test_daemon_e2e import Run, gone, wait_until
from tickwork import Every
from tickwork._daemon.jobsfile.config import parse_config
from tickwork.stores import JobSpec, JobSpecError
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_replace_ends_the_running_group_and_starts_the_next_run(tmp_path: Path) -> None:
    rep_sh = tmp_path / "rep.sh"
    rep_sh.write_text(
        # The trap is set before the start is written: a run seen started has it.
        f"trap 'echo $$ >> {tmp_path}/terms; exit 143' TERM\n"
        f"echo $$ >> {tmp_path}/starts\n"
        f"sleep 300 & echo $! >> {tmp_path}/children\n"
        "wait\n"
    )
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            f"""
            [[job]]
            name = "rep"
            every = "1s"
            overlap = "replace"
            kill_grace = "10s"
            command = ["sh", "{rep_sh}"]

            [[job]]
            name = "stubborn"
            every = "2s"
            overlap = "replace"
            kill_grace = "1s"
            command = ["sh", "-c", "trap '' TERM; echo $$ >> {tmp_path}/stubborn; sleep 300"]
            """
        )
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state, "--shutdown-grace", "1s")
    try:
        wait_until("three runs of rep", lambda: len(pids(tmp_path / "starts")) >= 3, 120)
        run.wait_line(" stubborn failed replaced", limit=120)
        run.signal(15)
        assert run.wait(60) == 0
    finally:
        run.kill()
    text = run.text()
    assert 'overlap = "replace"' in text
    started = pids(tmp_path / "starts")
    # Each replaced run got SIGTERM (its trap wrote its pid) and its group went with it.
    replaced = pids(tmp_path / "terms")
    assert set(started[:2]) <= set(replaced)
    every_pid = [*started, *pids(tmp_path / "children"), *pids(tmp_path / "stubborn")]
    wait_until("every process of every run to be gone", lambda: all(map(gone, every_pid)))
    with SQLiteStore(state) as store:
        history = sorted(store.history(), key=lambda e: e.scheduled)
    rep = [e for e in history if e.job_id.endswith("/rep") and e.started is not None]
    cancelled = [e for e in rep if e.outcome == "cancelled"]
    assert len(cancelled) >= 2
    for entry in cancelled:
        assert "replaced by the run due" in (entry.error or "")
    # One run at a time: each run started once the one it replaced had ended.
    for before, after in itertools.pairwise(rep):
        assert before.ended is not None and after.started is not None
        assert before.ended <= after.started
    # The one that ignores SIGTERM was ended by SIGKILL after its kill grace.
    stubborn = [e for e in history if e.job_id.endswith("/stubborn") and e.outcome == "cancelled"]
    assert stubborn and (stubborn[0].error or "").startswith("replaced")
    assert stubborn[0].ended - stubborn[0].started >= 1.0  # type: ignore[operator]
    line = next(x for x in run.lines if " stubborn failed replaced" in x)
    assert "replaced by the run due" in line
    assert f"signal={signal.SIGKILL.name}" not in line  # its status is replaced, not the signal


def test_validate_refuses_replace_where_it_cannot_work() -> None:
    assert problems(
        """\
        [defaults]
        overlap = "replace"

        [[job]]
        name = "py"
        every = "1m"
        call = "os:getcwd"

        [[job]]
        name = "fd"
        every = "1m"
        fixed_delay = true
        overlap = "replace"
        command = ["true"]

        [[job]]
        name = "lim"
        every = "1m"
        output_limit = 0
        command = ["true"]

        [[job]]
        name = "pylim"
        every = "1m"
        overlap = "skip"
        output_limit = 10
        call = "os:getcwd"
        """
    ) == [
        "jobs.toml:2: job \"py\": overlap: 'replace' applies only to command jobs (from"
        " [defaults]; set overlap on this job): it ends the running command's process group,"
        " and an in-process call cannot be stopped",
        "jobs.toml:13: job \"fd\": overlap: 'replace' cannot apply to a fixed_delay job: its"
        " runs never overlap (the next is due only after the previous ends)",
        'jobs.toml:19: job "lim": output_limit: must be a number of lines from 1 to'
        " 1000000000, got 0",
        'jobs.toml:26: job "pylim": output_limit: applies to a call only with isolation ='
        ' "process" (a call in the daemon\'s process has no output of its own)',
    ]
    config = parse_config(
        '[defaults]\noverlap = "replace"\noutput_limit = 5\n\n'
        '[[job]]\nname = "a"\nevery = "1m"\ncommand = ["true"]\n'
    )
    (job,) = config.jobs
    assert (job.overlap, job.output_limit) == ("replace", 5)


def test_the_library_refuses_replace_and_says_why() -> None:
    why = r"overlap='replace' is only for command jobs of a tickwork run jobs file"
    with pytest.raises(JobSpecError, match=why):
        JobSpec("a", "os:getcwd", Every(60), overlap="replace")  # type: ignore[arg-type]
    from tickwork import ThreadScheduler

    with (
        ThreadScheduler(clock=FakeClock()) as scheduler,
        pytest.raises(ValueError, match=why),
    ):
        scheduler.schedule(1, print, 1, overlap="replace")  # type: ignore[arg-type]


def test_a_paused_replace_job_lets_its_run_finish(tmp_path: Path) -> None:
    # Issue 39 B13, tried from outside: a pause taken while a run went on still ended
    # that run for the next slot, which then never ran (the job was paused). The run
    # goes on until the test opens its gate, after the next slot has come due while it
    # was paused; the slots are 10 s apart so that the pause lands first on a loaded
    # machine (the `tickwork pause` process is a whole Python start).
    gate = tmp_path / "gate"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            f"""
            [[job]]
            name = "rep"
            every = "10s"
            overlap = "replace"
            command = ["sh", "-c", "echo $$ >> {tmp_path}/starts; while [ ! -e {gate} ]; do sleep 0.05; done; echo $$ >> {tmp_path}/ends"]
            """  # noqa: E501
        )
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state)
    try:
        wait_until("a run of rep", lambda: pids(tmp_path / "starts"), 120)
        seen = time.time()  # the run's slot came at or before this
        paused = subprocess.run(
            [sys.executable, "-m", "tickwork", "pause", str(jobs), "rep", "--state", str(state)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert paused.returncode == 0, paused.stderr
        assert time.time() < seen + 10, "the pause took longer than a slot: no proof"
        # The next slot comes due while the job is paused and its run goes on.
        wait_until("the next slot to pass", lambda: time.time() > seen + 11.5, 30)
        assert len(pids(tmp_path / "starts")) == 1 and not pids(tmp_path / "ends")
        gate.touch()
        wait_until("a run of rep to finish", lambda: pids(tmp_path / "ends"), 60)
    finally:
        run.stop()
    with SQLiteStore(state) as store:
        ran = sorted((e for e in store.history() if e.started is not None), key=lambda e: e.started)
    assert ran[-1].outcome == "ok", ran[-1]  # type: ignore[arg-type,return-value]
