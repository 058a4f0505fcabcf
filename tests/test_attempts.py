"""Retries and time limits of durable Python jobs (JobSpec retries, timeout, isolation).

Library API on SQLite and PostgreSQL (fake clock, manual pool, ``step()``); real
threads and child processes only where a time limit must be shown, with generous
deadlines and no assertion on durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import durable_jobs, forked
from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import AsyncDurableScheduler, At, DurableScheduler, Every
from tickwork._core.attempts import backoff_delay
from tickwork.stores import JobSpec, JobSpecError, Store
from tickwork.stores._codec import spec_from_json, spec_to_json
from tickwork.stores.contract import AttemptLedger
from tickwork.testing import FakeClock

J = "tests.durable_jobs"
PATIENCE = 60.0
#: The timeout of a process job whose first lines must be kept: past a new interpreter's
#: start and imports on a loaded machine (1 s was not, at a load near 15).
CHILD_TIMEOUT = 10.0

Make = Callable[..., tuple[DurableScheduler, ManualExecutor]]


@pytest.fixture
def make(durable_clock: FakeClock, open_either_store: Callable[..., Store]) -> Make:
    def new(**kw: Any) -> tuple[DurableScheduler, ManualExecutor]:
        pool = ManualExecutor()
        ds = DurableScheduler(
            open_either_store(),
            executor=pool,
            wall_clock=durable_clock.wall,
            monotonic_clock=durable_clock,
            lease=30.0,
            **kw,
        )
        return ds, pool

    return new


@pytest.fixture(autouse=True)
def _fresh() -> None:
    durable_jobs.FLAKY.clear()
    durable_jobs.RELEASE.clear()
    durable_jobs.ENTERED.clear()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


# -- the backoff and the options -----------------------------------------------------


def test_the_backoff_doubles_up_to_its_cap_and_jitters_within_the_upper_half() -> None:
    nominal = [backoff_delay(n, base=1.0, cap=10.0, jitter=False) for n in range(1, 7)]
    assert nominal == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff_delay(3, base=1.0, cap=10.0, rand=lambda: 0.0) == 4.0
    assert backoff_delay(3, base=1.0, cap=10.0, rand=lambda: 0.999) == pytest.approx(2.002)
    assert backoff_delay(10_000, base=1.0, cap=5.0, jitter=False) == 5.0  # no overflow


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"retries": -1}, "retries must be an integer from 0 to 100, got -1"),
        ({"retries": True}, "retries must be an integer from 0 to 100, got True"),
        ({"retry_backoff": 0}, "retry_backoff must be a finite number > 0, got 0"),
        ({"retry_backoff_max": "1m"}, "retry_backoff_max must be a finite number"),
        ({"timeout": -1}, "timeout must be None or a finite number >= 0, got -1"),
        ({"kill_grace": float("nan")}, "kill_grace must be a finite number >= 0, got nan"),
        ({"isolation": "fork"}, "isolation must be one of 'thread', 'process', got 'fork'"),
    ],
)
def test_a_bad_attempt_option_is_refused_naming_it(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(JobSpecError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        JobSpec("j", f"{J}:record", Every(10), **kw)


def test_the_policy_is_stored_only_when_set_and_reads_back() -> None:
    plain = JobSpec("j", f"{J}:record", Every(10), timeout=0)
    assert plain.timeout is None  # 0: no limit
    assert '"v":1' in spec_to_json(plain) and "attempts" not in spec_to_json(plain)
    spec = JobSpec(
        "j", f"{J}:record", Every(10), retries=3, retry_backoff=2, timeout=5, isolation="process"
    )
    text = spec_to_json(spec)
    assert '"v":2' in text and '"attempts":{' in text
    assert spec_from_json(text) == spec
    assert spec_from_json(text).retry_backoff == 2.0


def test_isolation_process_refuses_a_function_a_child_cannot_import(make: Make) -> None:
    ds, _ = make()
    with pytest.raises(JobSpecError, match=r"func must name a module-level function.*a lambda"):
        ds.declare(JobSpec("l", f"{J}:LAMBDA", Every(10), isolation="process"))
    with pytest.raises(JobSpecError, match=r"'tests.durable_jobs:CLOSURE', a function defined"):
        ds.declare(JobSpec("c", f"{J}:CLOSURE", Every(10), isolation="process"))
    assert ds.jobs() == []


# -- retries ------------------------------------------------------------------------


def test_each_failed_attempt_is_in_the_ledger_then_the_retry_that_worked(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    spec = JobSpec("r", f"{J}:flaky", Every(10), args=["r", 2], retries=3, retry_backoff=0.001)
    ds.declare(spec)
    durable_clock.advance(10)
    drain(ds, pool)
    entries = list(reversed(ds.history("r")))
    assert [(e.outcome, e.attempt) for e in entries] == [("failed", 1), ("failed", 2), ("ok", 3)]
    assert {e.scheduled for e in entries} == {DURABLE_START + 10}
    assert "flaky failure 1" in (entries[0].error or "")
    assert entries[1].output == "attempt 2 output"
    assert len(ds.errors) == 2  # each failed attempt reported
    state = ds.get("r")
    assert state is not None and state.last_run is not None and state.last_run.outcome == "ok"


def test_each_failed_attempt_is_written_through_the_store_s_attempt_ledger(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    store = ds.store
    assert isinstance(store, AttemptLedger)
    written: list[tuple[str, int]] = []
    own = store.record_attempt

    def record_attempt(claim: Any, **kw: Any) -> bool:
        written.append((kw["outcome"], kw["attempt"]))
        return own(claim, **kw)

    store.record_attempt = record_attempt  # type: ignore[method-assign]
    ds.declare(JobSpec("r", f"{J}:flaky", Every(10), args=["r", 2], retries=3))
    durable_clock.advance(10)
    drain(ds, pool)
    assert written == [("failed", 1), ("failed", 2)]  # the last one: the run's finish
    assert [(e.outcome, e.attempt) for e in reversed(ds.history("r"))] == [
        ("failed", 1), ("failed", 2), ("ok", 3),
    ]  # fmt: skip


@pytest.mark.parametrize("fails", [1, 3], ids=["then-ok", "used-up"])
def test_each_attempt_in_the_ledger_has_its_own_start_and_end(
    make: Make, durable_clock: FakeClock, fails: int
) -> None:
    # Issue 39: the last attempt showed the run's first start (6.5 s for a 3 s attempt).
    ds, pool = make()
    durable_jobs.CLOCK = durable_clock
    try:
        spec = JobSpec(
            "s", f"{J}:slow_flaky", Every(60), args=["s", fails, 3.0], retries=2,
            retry_backoff=0.001,
        )  # fmt: skip
        ds.declare(spec)
        durable_clock.advance(60)
        drain(ds, pool)
    finally:
        durable_jobs.CLOCK = None
    entries = list(reversed(ds.history("s")))
    assert len(entries) == min(fails + 1, 3)
    for before, after in itertools.pairwise(entries):
        assert after.started is not None and before.ended is not None
        assert after.started >= before.ended  # an attempt starts after the one before it
    for e in entries:
        assert e.started is not None and e.ended is not None
        assert e.ended - e.started == pytest.approx(3.0)  # each its own duration


def test_retries_used_up_end_the_slot_failed_each_attempt_recorded_once(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(JobSpec("b", f"{J}:boom", Every(10), retries=2, retry_backoff=0.001))
    durable_clock.advance(10)
    drain(ds, pool)
    entries = list(reversed(ds.history("b")))
    assert [(e.outcome, e.attempt) for e in entries] == [
        ("failed", 1),
        ("failed", 2),
        ("failed", 3),
    ]
    durable_clock.advance(10)  # the next slot starts its own attempts from 1
    drain(ds, pool)
    assert [e.attempt for e in ds.history("b")][:3] == [3, 2, 1]
    # A failure streak counts runs, not attempts (on_failure's `after`, the metric).
    from tickwork.stores._streak import failure_streak

    assert failure_streak(ds, "b")[0] == 2
    assert failure_streak(ds, "b", excluding=DURABLE_START + 20)[0] == 1


# -- time limits --------------------------------------------------------------------


def test_a_thread_past_its_limit_is_recorded_timeout_and_holds_its_slot(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(JobSpec("t", f"{J}:blocked", Every(10), timeout=0.2, overlap="skip"))
    durable_clock.advance(10)
    ds.step()
    worker = threading.Thread(target=pool.run_all, daemon=True)
    worker.start()
    try:
        _until(lambda: any(e.outcome == "timeout" for e in ds.history("t")), "the timeout entry")
        (entry,) = ds.history("t")
        assert entry.attempt == 1 and "cannot be stopped" in (entry.error or "")
        assert any("timed out after 0.2 s" in e for e in ds.errors)
        # The thread goes on: the next slot must not start while it runs.
        durable_clock.advance(10)
        ds.step()
        assert not pool.queue
        assert ds.running() == {"t": 1}
    finally:
        durable_jobs.RELEASE.set()
        worker.join(PATIENCE)
    assert not worker.is_alive()
    # Its end was written at the bound: freeing the slot writes no second entry.
    _until(lambda: ds.running() == {}, "the slot freed")
    assert [e.outcome for e in ds.history("t")].count("timeout") == 1
    state = ds.get("t")
    assert state is not None and state.last_run is not None
    assert state.last_run.outcome == "timeout"
    for _ in range(2):  # the slot is free again: a next run is claimed and runs
        durable_clock.advance(10)
        drain(ds, pool)
    assert "ok" in [e.outcome for e in ds.history("t")]


def test_a_retry_after_a_thread_s_timeout_starts_only_once_the_thread_returned(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(JobSpec("rt", f"{J}:blocked", Every(10), timeout=0.2, retries=1, retry_backoff=0.01))
    durable_clock.advance(10)
    ds.step()
    worker = threading.Thread(target=pool.run_all, daemon=True)
    worker.start()
    try:
        _until(lambda: bool(ds.history("rt")), "the first attempt's timeout entry")
        assert [(e.outcome, e.attempt) for e in ds.history("rt")] == [("timeout", 1)]
        assert [c[0] for c in durable_jobs.CALLS] == []  # attempt 1 still blocked, no retry
    finally:
        durable_jobs.RELEASE.set()
        worker.join(PATIENCE)
    drain(ds, pool)
    entries = list(reversed(ds.history("rt")))
    assert [(e.outcome, e.attempt) for e in entries] == [("timeout", 1), ("ok", 2)]
    assert [c[0] for c in durable_jobs.CALLS] == [("blocked",), ("blocked",)]


def test_a_process_past_its_limit_is_killed_and_its_output_kept(
    make: Make, durable_clock: FakeClock, tmp_path: Path
) -> None:
    ds, pool = make()
    marker = tmp_path / "pid"
    ds.declare(
        JobSpec(
            "p",
            f"{J}:sleeper",
            Every(10),
            args=[120, str(marker)],
            timeout=CHILD_TIMEOUT,
            kill_grace=0.5,
            isolation="process",
        )
    )
    durable_clock.advance(10)
    drain(ds, pool)
    (entry,) = ds.history("p")
    assert entry.outcome == "timeout"
    assert "child says hello" in (entry.output or "")
    assert "child complains" in (entry.output or "")
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_process_that_fails_is_retried_and_its_traceback_kept(
    make: Make, durable_clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(
        JobSpec(
            "f", f"{J}:child_fails", Every(10), isolation="process", retries=1, retry_backoff=0.01
        )
    )
    durable_clock.advance(10)
    drain(ds, pool)
    entries = list(reversed(ds.history("f")))
    assert [(e.outcome, e.attempt) for e in entries] == [("failed", 1), ("failed", 2)]
    assert "exit=1" in (entries[1].error or "")
    assert "ValueError: child broke" in (entries[1].output or "")
    assert "about to fail" in (entries[0].output or "")


def test_a_process_job_that_works_is_ok(
    make: Make, durable_clock: FakeClock, tmp_path: Path
) -> None:
    ds, pool = make()
    out = tmp_path / "out"
    ds.declare(
        JobSpec("ok", f"{J}:child_ok", Every(10), args=[str(out), "done"], isolation="process")
    )
    durable_clock.advance(10)
    drain(ds, pool)
    assert [e.outcome for e in ds.history("ok")] == ["ok"]
    assert out.read_text() == "done"


def test_a_coroutine_past_its_limit_is_cancelled_and_recorded_timeout(
    open_either_store: Callable[..., Store],
) -> None:
    async def main() -> list[str]:
        store = open_either_store()
        try:
            async with AsyncDurableScheduler(store) as scheduler:
                await scheduler.declare(
                    JobSpec("c", f"{J}:slow_coro", At(time.time()), args=[120], timeout=0.2)
                )
                deadline = time.monotonic() + PATIENCE
                while time.monotonic() < deadline:
                    entries = await scheduler.history("c")
                    if entries:
                        return [e.outcome for e in entries]
                    await asyncio.sleep(0.02)
                raise AssertionError("the coroutine's run was never recorded")
        finally:
            store.close()

    assert asyncio.run(main()) == ["timeout"]
    assert "slow_coro" not in [c[0][0] for c in durable_jobs.CALLS if c[0]]


# -- through the daemon -------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def daemon_state(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        return ["--state", str(tmp_path / "s.sqlite3")]
    return ["--database", request.getfixturevalue("fresh_database")]


def _history(jobs: Path, state: list[str]) -> list[dict[str, Any]]:
    proc = forked.tickwork("history", str(jobs), *state, "--json", timeout=60)  # forked warm
    assert proc.returncode == 0, proc.stderr
    return list(reversed(json.loads(proc.stdout)))


def test_the_daemon_retries_a_call_and_kills_an_isolated_one_each_attempt_recorded(
    tmp_path: Path, daemon_state: list[str]
) -> None:
    from tests.test_daemon_e2e import Run

    counter, marker = tmp_path / "count", tmp_path / "pid"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f"""
[[job]]
name = "flaky"
call = "{J}:flaky_file"
args = ["{counter}", 2]
in = "0s"
retries = 3
retry_backoff = "50ms"

[[job]]
name = "stuck"
call = "{J}:stuck_child"
args = ["{marker}"]
in = "0s"
isolation = "process"
timeout = "{CHILD_TIMEOUT:g}s"
kill_grace = "1s"
"""
    )
    run = Run(jobs, daemon_state)
    try:
        run.wait_line("flaky finished", limit=PATIENCE)
        run.wait_line("stuck failed timeout", limit=PATIENCE)
    finally:
        run.stop()
    entries = _history(jobs, daemon_state)
    flaky = [(e["outcome"], e["attempt"]) for e in entries if e["job"] == "flaky"]
    assert flaky == [("failed", 1), ("failed", 2), ("ok", 3)]
    first = next(e for e in entries if e["job"] == "flaky")
    assert "flaky call 1" in first["error"]
    (stuck,) = [e for e in entries if e["job"] == "stuck"]
    assert stuck["outcome"] == "timeout" and "stuck child starts" in (stuck["output"] or "")
    with pytest.raises(ProcessLookupError):
        os.kill(int(marker.read_text()), 0)


def test_the_daemon_s_retried_command_shows_each_attempt_s_own_time(
    tmp_path: Path, daemon_state: list[str]
) -> None:
    # Issue 39: the last attempt showed the run's first start and total time.
    from tests.test_daemon_e2e import Run

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        """
[[job]]
name = "retried"
command = ["sh", "-c", "sleep 1; exit 1"]
in = "0s"
retries = 1
retry_backoff = "1s"
"""
    )
    run = Run(jobs, daemon_state)
    try:
        run.wait_line("retried failed exit=1 (attempt 2)", limit=PATIENCE)
    finally:
        run.stop()
    first, last = [e for e in _history(jobs, daemon_state) if e["job"] == "retried"]
    assert (first["attempt"], last["attempt"]) == (1, 2)
    assert last["started"] >= first["ended"]  # ISO times in UTC sort as text
    assert last["duration_seconds"] < first["duration_seconds"] + 1.0  # not both attempts


SECRET = "s3cret-" + os.urandom(8).hex()


def _command_lines() -> list[bytes]:
    """Every process's command line, as ``ps`` shows it to any local user."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes())
            except OSError:
                continue  # it ended meanwhile
    return lines


def _secret_kept(marker: Path) -> int:
    """Wait for `durable_jobs.keep_secret` to start; check its arguments; its pid."""
    deadline = time.monotonic() + PATIENCE
    while not marker.exists():
        assert time.monotonic() < deadline, "the isolated call never started"
        time.sleep(0.05)
    pid, got, stdin = marker.read_text().split("\n")
    assert (got, stdin) == (SECRET, "''")  # its arguments came; its own stdin is empty
    assert [line for line in _command_lines() if SECRET.encode() in line] == []
    return int(pid)


def test_an_isolated_calls_arguments_are_not_on_any_command_line(
    make: Make, durable_clock: FakeClock, tmp_path: Path
) -> None:
    ds, pool = make()
    marker = tmp_path / "pid"
    ds.declare(
        JobSpec(
            "s",
            f"{J}:keep_secret",
            Every(10),
            args=[str(marker), SECRET],
            timeout=60.0,
            kill_grace=0.5,
            isolation="process",
        )
    )
    durable_clock.advance(10)
    ds.step()
    worker = threading.Thread(target=pool.run_all)
    worker.start()
    try:
        pid = _secret_kept(marker)
    finally:
        with contextlib.suppress(ValueError, ProcessLookupError, FileNotFoundError):
            os.killpg(int(marker.read_text().split()[0]), 9)
        worker.join(PATIENCE)
    drain(ds, pool)
    (entry,) = ds.history("s")
    assert entry.outcome == "failed" and f"pid {pid}" in (entry.error or "")


def test_an_isolated_call_gets_arguments_larger_than_a_pipe_holds(
    make: Make, durable_clock: FakeClock, tmp_path: Path
) -> None:
    ds, pool = make()
    out, text = tmp_path / "out", "x" * 300_000  # more than a pipe's 64 KiB
    ds.declare(
        JobSpec("big", f"{J}:child_ok", Every(10), args=[str(out), text], isolation="process")
    )
    durable_clock.advance(10)
    drain(ds, pool)
    assert [e.outcome for e in ds.history("big")] == ["ok"]
    assert out.read_text() == text


def test_the_daemon_keeps_an_isolated_calls_arguments_off_the_command_line(
    tmp_path: Path,
) -> None:
    from tests.test_daemon_e2e import Run

    marker = tmp_path / "pid"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f"""
[[job]]
name = "secret"
call = "{J}:keep_secret"
args = ["{marker}", "{SECRET}"]
in = "0s"
isolation = "process"
kill_grace = "1s"
"""
    )
    run = Run(jobs, tmp_path / "s.sqlite3", "--shutdown-grace", "0s")
    try:
        pid = _secret_kept(marker)
        run.signal(15)  # its run is ended at once (SIGTERM, SIGKILL after kill_grace)
        assert run.wait(PATIENCE) == 0
    finally:
        run.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_daemon_call_in_a_thread_is_timed_out_at_its_bound_and_waited_for() -> None:
    from tickwork._daemon.jobsfile.config import parse_config
    from tickwork._daemon.process.runner import RunResult, run_job

    text = f'[[job]]\nname = "b"\ncall = "{J}:blocked"\nin = "0s"\ntimeout = "200ms"\n'
    [job] = parse_config(text).jobs
    ends: list[RunResult] = []
    done: list[RunResult] = []
    worker = threading.Thread(target=lambda: done.append(run_job(job, on_end=ends.append)))
    worker.start()
    try:
        _until(lambda: bool(ends), "the timeout reported at the bound")
        assert ends[0].timed_out and "cannot be stopped" in (ends[0].error or "")
        assert worker.is_alive() and not done  # the thread goes on: the run is not over
    finally:
        durable_jobs.RELEASE.set()
        worker.join(PATIENCE)
    assert len(ends) == 1 and done[0].timed_out and done[0].status == "timeout"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'command = ["true"]\nisolation = "process"',
            'job "j": isolation: applies only to call jobs',
        ),
        (
            f'call = "{J}:record"\nisolation = "fork"',
            'job "j": isolation: must be one of "thread", "process", got \'fork\'',
        ),
        (
            f'call = "{J}:record"\noutput_limit = 5',
            'job "j": output_limit: applies to a call only with isolation = "process"',
        ),
    ],
)
def test_the_jobs_file_checks_isolation(body: str, message: str) -> None:
    from tickwork._daemon.jobsfile.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as caught:
        parse_config(f'[[job]]\nname = "j"\nevery = "1m"\n{body}\n')
    assert any(message in str(issue) for issue in caught.value.errors), caught.value.errors


def test_a_process_call_in_the_jobs_file_keeps_its_kill_grace_and_defaults_stay_commands() -> None:
    from tickwork._daemon.jobsfile.config import parse_config

    text = f"""
[defaults]
timeout = "5m"

[[job]]
name = "p"
call = "{J}:record"
every = "1m"
isolation = "process"
kill_grace = "2s"
output_limit = 10

[[job]]
name = "t"
call = "{J}:record"
every = "1m"
"""
    p, t = parse_config(text).jobs
    assert (p.isolation, p.kill_grace, p.output_limit, p.timeout) == ("process", 2.0, 10, None)
    assert (t.isolation, t.timeout) == ("thread", None)  # [defaults]' timeout is for commands


def test_an_owed_finish_keeps_its_attempt_number_when_written_later(tmp_path: Path) -> None:
    from tests.test_durable_owed import FlakyStore
    from tickwork.testing import InlineExecutor

    clock = FakeClock(1000.0, wall_start=DURABLE_START)
    store = FlakyStore(tmp_path / "jobs.db")
    try:
        ds = DurableScheduler(
            store, executor=InlineExecutor(), wall_clock=clock.wall, monotonic_clock=clock
        )
        ds.declare(
            JobSpec("o", f"{J}:flaky", Every(10), args=["o", 1], retries=1, retry_backoff=0.001)
        )
        clock.advance(10)
        store.failing = "finish"  # attempt 1's entry is written; the run's end is not
        ds.step()
        assert [job for job, _ in ds.unrecorded()] == ["o"]
        store.failing = None
        ds.step()
        assert ds.unrecorded() == []
        entries = list(reversed(ds.history("o")))
        assert [(e.outcome, e.attempt) for e in entries] == [("failed", 1), ("ok", 2)]
    finally:
        store.close()


def test_keep_failed_must_hold_every_attempt_of_the_streak_on_failure_counts() -> None:
    from tickwork._daemon.jobsfile.config import ConfigError, parse_config

    text = (
        '[[job]]\nname = "j"\nevery = "1m"\ncommand = ["false"]\nretries = 2\nkeep_failed = 5\n'
        '[job.on_failure]\ncommand = ["true"]\nfailures = 2\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert any(
        "needs on_failure.failures = 2 failed runs of 3 attempts each (retries = 2) kept: set"
        " keep_failed to at least 6" in str(issue)
        for issue in caught.value.errors
    ), caught.value.errors
