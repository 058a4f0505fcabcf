"""``tickwork run`` end to end: real daemons (``python -m tickwork``), real files, signals.

Each test polls for the files and log lines it expects (never a fixed sleep as the
proof), with generous limits for a loaded 2-core machine; intervals are 200-300 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.waiting import DEADLINE, wait_until
from tickwork._daemon.runlog import JSON_KEYS
from tickwork.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

LIMIT = DEADLINE  # seconds to wait for anything that should happen in well under one


def lines_of(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def stopped(pid: int) -> bool:
    """Every thread of the process has stopped (a SIGSTOP reaches threads one by one)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            continue
    return bool(states) and all(state in ("T", "t") for state in states)


class Run:
    """One ``tickwork run`` process; its stderr lines are collected as they come.

    ``state``: the SQLite state file, or the store options themselves (``["--database",
    DSN]``, say).
    """

    def __init__(
        self,
        jobs: Path,
        state: Path | list[str],
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> None:
        where = ["--state", str(state)] if isinstance(state, Path) else state
        args = ["run", str(jobs), *where, *extra]
        self.proc: subprocess.Popen[str] | forked.Child
        if env is None:
            # Forked warm (tests/forked.py): its own process, without Python's start-up.
            self.proc = forked.daemon(args)
        else:  # an environment read at start-up (PYTHONPATH, say): a Python of its own
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tickwork", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, needle: str, *, after: int = 0, limit: float = LIMIT) -> str:
        """The first log line from ``after`` on holding ``needle``, waited for.

        Fails at once, with the daemon's exit code and output, if it has exited without it.
        """

        def find() -> str | None:
            ended = self.proc.poll() is not None
            if ended:
                self._reader.join(5)  # its last lines read
            line = next((line for line in self.lines[after:] if needle in line), None)
            if line is None and ended:
                raise AssertionError(
                    f"the daemon exited (code {self.proc.returncode}) without a log line"
                    f" with {needle!r}; its output:\n{self.text()}"
                )
            return line

        found: str = wait_until(f"a log line with {needle!r}; got:\n{self.text()}", find, limit)
        return found

    def text(self) -> str:
        return "\n".join(self.lines)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, limit: float = LIMIT) -> int:
        code = self.proc.wait(limit)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def stop(self) -> None:
        """SIGTERM and wait for the orderly stop (SIGKILL after 30 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        self.kill()


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:
        run.kill()


@pytest.fixture
def start(tmp_path: Path, runs: list[Run]) -> Callable[..., Run]:
    def start(*extra: str, jobs: Path | None = None) -> Run:
        run = Run(jobs or tmp_path / "jobs.toml", tmp_path / "state" / "s.sqlite3", *extra)
        runs.append(run)
        return run

    return start


def write_jobs(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text('[defaults]\ncwd = "."\n\n' + textwrap.dedent(text))
    return path


def jobs_json(tmp_path: Path) -> dict[str, dict[str, Any]]:
    # Forked warm (tests/forked.py): callers poll it while a daemon runs.
    proc = forked.tickwork("jobs", "--state", str(tmp_path / "state" / "s.sqlite3"), "--json",
                           timeout=30)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {row["job"]: row for row in json.loads(proc.stdout)}


def test_waiting_for_a_line_of_a_daemon_that_exited_fails_at_once_with_its_output(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    """A config error ends the daemon: `Run.wait_line` says so, not after its whole limit."""
    run = start(jobs=write_jobs(tmp_path, '[[job]]\nname = "x"\ncommand = ["true"]\n'))
    with pytest.raises(AssertionError) as failed:
        run.wait_line("scheduler started")
    said = str(failed.value)
    assert said.startswith("the daemon exited (code 2)") and "'scheduler started'" in said
    assert "missing a schedule" in said.split("its output:\n", 1)[1]


def test_schedules_fire_json_logs_parse_and_for_ends_by_itself(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    write_jobs(
        tmp_path,
        """
        # Under load a run may outlast its interval: "ok" and "bad" queue such slots and
        # catch up once, so every claim of theirs runs and their last outcome is a run's.
        [[job]]
        name = "ok"
        every = "200ms"
        overlap = "queue"
        missed = "once"
        command = ["sh", "-c", "echo run >> ok.txt"]

        [[job]]
        name = "bad"
        every = "300ms"
        overlap = "queue"
        missed = "once"
        command = ["sh", "-c", "echo broken pipe dream >&2; exit 3"]

        [[job]]
        name = "slow"
        every = "200ms"
        overlap = "skip"
        command = ["sleep", "0.5"]
        """,
    )
    began = time.monotonic()
    run = start("--for", "2s", "--log-format", "json")
    assert run.wait() == 0
    assert 2.0 <= time.monotonic() - began < LIMIT  # it ended, and not before its time
    records = [json.loads(line) for line in run.lines]  # every line is JSON
    runs = [r for r in records if r["event"] != "log"]
    assert all(tuple(r) == JSON_KEYS for r in runs)
    events = {(r["job"], r["event"]) for r in runs}
    assert {("ok", "started"), ("ok", "finished"), ("bad", "failed")} <= events
    # A loaded machine may also give up slots it looked at late ("missed", of any job):
    # "slow" skips a slot because its run still goes on at least once.
    skips = {r["reason"] for r in runs if (r["job"], r["event"]) == ("slow", "skipped")}
    assert "overlap" in skips, skips
    failure = next(r for r in runs if r["event"] == "failed")
    assert failure["exit_code"] == 3 and "broken pipe dream" in failure["output"]
    assert len(lines_of(tmp_path / "ok.txt")) >= 2  # it repeats
    assert any(r["event"] == "log" and "shutting down" in r["message"] for r in records)

    state = jobs_json(tmp_path)
    # A claim the stop finds still queued for a worker (a loaded machine) is handed back
    # and recorded "cancelled" as the job's last run; every other last run is the real one.
    assert state["ok"]["outcome"] in ("ok", "cancelled") and state["ok"]["next_run"] is not None
    assert state["bad"]["outcome"] in ("failed", "cancelled")
    if state["bad"]["outcome"] == "failed":
        error = state["bad"]["error"]
        assert error.startswith("exit=3") and "broken pipe dream" in error

    text = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "jobs",
            str(tmp_path / "jobs.toml"),
            "--state",
            str(tmp_path / "state" / "s.sqlite3"),
            "--long",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "bad\n  schedule  every 0.3 seconds\n" in text
    if state["bad"]["outcome"] == "failed":
        assert "  outcome   failed\n  error     exit=3\n" in text


def test_timeout_kills_a_hanging_command_and_its_children(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "hang"
        in = "100ms"
        timeout = "3s"  # room for the supervisor and sh to start on a loaded machine
        kill_grace = "500ms"
        # Ignores SIGTERM (and so does its child): only SIGKILL ends them.
        shell = true
        command = 'trap "" TERM; sleep 300 & echo $! > child.pid; echo ready; wait; wait'
        """,
    )
    run = start()
    line = run.wait_line("hang failed")
    assert "failed timeout" in line and "ended by SIGKILL" in line and "ready" in line
    child = int((tmp_path / "child.pid").read_text())
    wait_until(f"the child {child} to be gone", lambda: gone(child))
    run.signal(signal.SIGTERM)
    assert run.wait() == 0


def test_sigterm_waits_for_running_jobs_then_terminates(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    # "finishes" ends only when the test says so (a "go" file), after the daemon has
    # started waiting: a fixed `sleep` raced the SIGTERM on a loaded machine (it could
    # end before the signal, or outlast a short grace).
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "finishes"
        in = "100ms"
        shell = true
        command = '''
        echo $$ > finishes.pid
        until [ -e go ]; do sleep 0.05; done
        echo done > finishes.done
        '''

        [[job]]
        name = "hangs"
        in = "100ms"
        kill_grace = "1s"
        command = ["sh", "-c", "echo $$ > hangs.pid; exec sleep 300"]
        """,
    )
    run = start("--shutdown-grace", "4s")
    for name in ("finishes.pid", "hangs.pid"):
        wait_until(name, lambda name=name: lines_of(tmp_path / name))
    hangs = int((tmp_path / "hangs.pid").read_text())
    asked = time.monotonic()
    run.signal(signal.SIGTERM)
    run.wait_line("waiting up to 4s for 2 running job(s)")
    (tmp_path / "go").touch()
    assert run.wait(60) == 0
    took = time.monotonic() - asked
    assert 3.9 <= took < 40, took  # waited out the grace, then did not dawdle
    assert (tmp_path / "finishes.done").exists()  # the grace let it finish
    text = run.text()
    assert "finishes finished ok" in text
    assert "hangs failed cancelled" in text
    assert "terminating 1 running command(s)" in text
    wait_until(f"the hanging job {hangs} to be gone", lambda: gone(hangs))


def test_sighup_applies_a_change_and_a_broken_reload_keeps_the_old_config(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    one = """
        [[job]]
        name = "one"
        every = "200ms"
        command = ["sh", "-c", "echo x >> one.txt"]
        """
    jobs = write_jobs(tmp_path, one)
    run = start()
    wait_until("one.txt", lambda: len(lines_of(tmp_path / "one.txt")) >= 2)

    write_jobs(tmp_path, one.replace('"one"', '"two"').replace("one.txt", "two.txt"))
    mark = len(run.lines)
    run.signal(signal.SIGHUP)
    assert "1 created, 1 removed" in run.wait_line("reloaded", after=mark)
    wait_until("two.txt", lambda: len(lines_of(tmp_path / "two.txt")) >= 2)
    ones = len(lines_of(tmp_path / "one.txt"))
    seen = len(lines_of(tmp_path / "two.txt"))
    wait_until("two more runs of two", lambda: len(lines_of(tmp_path / "two.txt")) >= seen + 2)
    assert len(lines_of(tmp_path / "one.txt")) == ones  # removed: runs no more

    good = jobs.read_text()
    jobs.write_text(good.replace('every = "200ms"', 'every = "soon"'))
    mark = len(run.lines)
    run.signal(signal.SIGHUP)
    run.wait_line("still running the previous configuration", after=mark)
    problem = run.wait_line("jobs.toml:7:", after=mark)
    assert 'job "two": every:' in problem and "'soon'" in problem
    seen = len(lines_of(tmp_path / "two.txt"))
    wait_until(
        "runs after the broken reload", lambda: len(lines_of(tmp_path / "two.txt")) >= seen + 2
    )

    run.signal(signal.SIGTERM)
    assert run.wait() == 0


def test_watch_reloads_a_changed_file(tmp_path: Path, start: Callable[..., Run]) -> None:
    job = """
        [[job]]
        name = "w"
        every = "200ms"
        command = ["sh", "-c", "echo x >> before.txt"]
        """
    write_jobs(tmp_path, job)
    run = start("--watch")
    wait_until("before.txt", lambda: lines_of(tmp_path / "before.txt"))
    mark = len(run.lines)
    write_jobs(tmp_path, job.replace("before.txt", "after.txt"))
    assert "1 updated" in run.wait_line("reloaded", after=mark)
    wait_until("after.txt", lambda: lines_of(tmp_path / "after.txt"))
    run.signal(signal.SIGTERM)
    assert run.wait() == 0


def test_state_survives_a_sigkill_restart(tmp_path: Path, start: Callable[..., Run]) -> None:
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "once"
        in = "200ms"
        command = ["sh", "-c", "echo ran >> once.txt"]

        [[job]]
        name = "hourly"
        every = "1h"
        command = ["true"]

        [[job]]
        name = "tick"
        every = "200ms"
        command = ["sh", "-c", "echo x >> tick.txt"]
        """,
    )
    first = start("--lease", "1s")
    wait_until("the one-shot", lambda: lines_of(tmp_path / "once.txt"))
    wait_until("ticks", lambda: len(lines_of(tmp_path / "tick.txt")) >= 2)
    before = jobs_json(tmp_path)
    assert before["once"]["outcome"] == "ok" and before["once"]["next_run"] is None
    first.proc.kill()  # SIGKILL: no shutdown at all
    first.wait()

    ticks = len(lines_of(tmp_path / "tick.txt"))
    second = start("--lease", "1s")
    assert "3 unchanged" in second.wait_line("running 3 jobs")
    wait_until("ticks after the restart", lambda: len(lines_of(tmp_path / "tick.txt")) >= ticks + 3)
    after = jobs_json(tmp_path)
    assert lines_of(tmp_path / "once.txt") == ["ran"]  # never again
    assert after["once"]["last_started"] == before["once"]["last_started"]
    assert after["hourly"]["next_run"] == before["hourly"]["next_run"]  # kept, not reset
    second.signal(signal.SIGINT)
    assert second.wait() == 0


def test_a_broken_file_does_not_start_and_names_file_and_line(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "x"
        evry = "1s"
        command = ["true"]
        """,
    )
    run = start()
    assert run.wait() == 2
    text = run.text()
    assert f'{tmp_path / "jobs.toml"}:7: job "x": evry: unknown key' in text
    assert "not started, fix the file first" in text
    assert not (tmp_path / "state").exists()  # nothing was created


def test_sigkill_of_the_daemon_ends_its_jobs_process_groups(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "long"
        in = "100ms"
        kill_grace = "1s"
        shell = true
        command = 'sleep 300 & echo $! > child.pid; echo $$ > job.pid; wait'
        """,
    )
    run = start()
    wait_until("job.pid", lambda: lines_of(tmp_path / "job.pid"))
    wait_until("child.pid", lambda: lines_of(tmp_path / "child.pid"))
    job = int((tmp_path / "job.pid").read_text())
    child = int((tmp_path / "child.pid").read_text())
    assert not gone(job) and not gone(child)
    run.proc.kill()  # SIGKILL: the daemon can do nothing about it
    run.wait()
    wait_until(f"the job {job} to be gone", lambda: gone(job))
    wait_until(f"its child {child} to be gone", lambda: gone(child))
    # No daemon is alive: `tickwork jobs` says the run is lost, not running.
    row = jobs_json(tmp_path)["long"]
    assert row["running"] == 0
    [lost] = row["lost"]
    assert lost["owner"].endswith(f":{run.proc.pid}") and "not running" in lost["why"]


OVERLAP_CHECK = """
prev=$(tail -n 1 pids 2>/dev/null)
if [ -n "$prev" ] && [ -e "/proc/$prev" ] && ! grep -q '^State:.Z' "/proc/$prev/status"; then
  echo "$$ started beside $prev" >> overlap.txt
fi
sleep 300 &
echo $! >> pids
echo $PPID >> parents
wait
"""


def test_a_restarted_daemon_ends_survivors_before_any_run(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    jobs = write_jobs(
        tmp_path,
        """
        [[job]]
        name = "one"
        every = "300ms"
        overlap = "skip"
        kill_grace = "1s"
        shell = true
        command = '''PLACEHOLDER'''
        """,
    )
    jobs.write_text(jobs.read_text().replace("PLACEHOLDER", OVERLAP_CHECK))
    first = start("--lease", "1s")
    wait_until("the first run", lambda: lines_of(tmp_path / "parents"))
    survivor = int(lines_of(tmp_path / "pids")[0])
    supervisor = int(lines_of(tmp_path / "parents")[0])
    assert supervisor != first.proc.pid  # the run goes through a supervisor
    # The whole tree dies at once (the supervisor cannot end the run): freeze the
    # daemon so that it cannot react, kill the supervisor, then the daemon.
    first.signal(signal.SIGSTOP)
    wait_until("the daemon to be stopped", lambda: stopped(first.proc.pid))
    os.kill(supervisor, signal.SIGKILL)
    wait_until("the supervisor to be gone", lambda: gone(supervisor))
    first.proc.kill()
    first.wait()
    # The shell died with its supervisor (the parent-death signal); its child survived
    # both, and no other daemon looks at this state: only a restart can end it.
    assert not gone(survivor), first.text()

    second = start("--lease", "1s", "--shutdown-grace", "1s")
    line = second.wait_line("is still going")
    assert "job 'one'" in line and "ending it before any run starts" in line
    wait_until(f"the survivor {survivor} to be gone", lambda: gone(survivor))
    wait_until("a run of the restarted daemon", lambda: len(lines_of(tmp_path / "pids")) >= 2)
    assert lines_of(tmp_path / "overlap.txt") == []
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_skips_of_a_hung_job_are_logged_as_they_pass(
    tmp_path: Path, start: Callable[..., Run], fmt: str
) -> None:
    # Only the first run hangs (until its timeout); later runs end at once.
    write_jobs(
        tmp_path,
        """
        [[job]]
        name = "hung"
        every = "100ms"
        overlap = "skip"
        timeout = "3s"
        kill_grace = "200ms"
        shell = true
        command = 'if [ -e hung.pid ]; then exit 0; fi; echo $$ > hung.pid; exec sleep 300'
        """,
    )
    run = start("--log-format", fmt, "--shutdown-grace", "1s")
    wait_until("the hung run", lambda: lines_of(tmp_path / "hung.pid"))
    hung = int(lines_of(tmp_path / "hung.pid")[0])
    run.wait_line("skipped")
    assert not gone(hung)  # logged while the blocking run is still going
    run.wait_line("failed" if fmt == "json" else "hung failed timeout")
    mark = len(run.lines)
    run.wait_line("started", after=mark)  # the schedule goes on after the hung run
    run.signal(signal.SIGTERM)
    assert run.wait(60) == 0
    # (A loaded machine may claim the first slots late: "missed" lines, by policy.)
    if fmt == "text":
        end = next(i for i, line in enumerate(run.lines) if "hung failed timeout" in line)
        overlap = "(overlap: the previous run is still running)"
        during = [line for line in run.lines[:end] if " hung skipped " in line and overlap in line]
        duration = float(run.lines[end].split(" in ")[1].split("s")[0])
        assert any(" runs due " in line for line in during)  # a count, not a line per slot
        assert len(during) <= duration + 2  # about one line a second
        return
    records = [json.loads(line) for line in run.lines]
    assert all(tuple(r) == JSON_KEYS for r in records if r["event"] != "log")
    ended = next(r for r in records if r["event"] == "failed")
    end = records.index(ended)
    began = next(r for r in records if r["event"] == "started")  # the hung run
    skips = [
        r
        for r in records
        if r["event"] == "skipped" and began["scheduled"] < r["scheduled"] < ended["time"]
    ]
    assert all(r["count"] >= 1 for r in skips)
    during = [r for r in records[:end] if r["event"] == "skipped" and r["reason"] == "overlap"]
    assert during and len(during) <= ended["duration"] + 2  # about one line a second
    # Every slot that passed during the hung run is counted once: as it passed, or
    # (the last few) when the run ended. None twice. A late start adds its slots.
    slots = ended["duration"] / 0.1
    late = began["late"] / 0.1
    total = sum(r["count"] for r in skips)
    assert slots - 4 <= total <= slots + late + 4, ([r["count"] for r in skips], ended, began)


ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_shows_every_kind_of_job_it_announces(tmp_path: Path) -> None:
    # What `python3 dev.py demo` runs: the example for 20 s on a fresh state. The
    # example's header promises each of these, every time.
    example = ROOT / "examples" / "housekeeping.toml"
    state = tmp_path / "state.sqlite3"
    env = {**os.environ, "HOUSEKEEPING_DIR": str(tmp_path)}
    run = Run(example, state, "--for", "20s", env=env)
    try:
        run.proc.wait(90)
    finally:
        run.kill()
    assert run.proc.returncode == 0, run.text()
    text = run.text()
    for job in ("rotate-logs", "probe-api", "clean-tmp", "berlin-report", "slow-sync"):
        assert f" {job} started" in text, f"{job} never started:\n{text}"
        assert f" {job} finished ok" in text or job == "probe-api", f"{job}:\n{text}"
    assert " probe-api failed exit=1" in text  # nothing listens on its port...
    assert " probe-api started (attempt 2" in text  # ...so it is retried
    assert " slow-sync skipped the run due " in text  # overlap = "skip"
    listing = subprocess.run(
        [sys.executable, "-m", "tickwork", "jobs", str(example), "--state", str(state), "--long"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    # The slot ledger of the same run, through `tickwork history`.
    history = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tickwork",
                "history",
                "-f",
                str(example),
                "--state",
                str(state),
                "--limit",
                "1000",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )
    seen = {(e["job"], e["outcome"]) for e in history}
    assert {("rotate-logs", "ok"), ("probe-api", "failed"), ("slow-sync", "skipped")} <= seen
    assert all(e["id"].startswith("housekeeping/") for e in history)
    failed = next(e for e in history if e["job"] == "probe-api")
    assert failed["error"] and failed["node"] and failed["lateness_seconds"] is not None
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "history",
            "probe-api",
            "-f",
            str(example),
            "--state",
            str(state),
            "--outcome",
            "failed",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert probe and all("  probe-api  failed  " in line for line in probe[::2]), probe
    after = listing.split("\nweekday-digest\n", 1)[1].splitlines()
    ends = [i for i, line in enumerate(after) if not line.startswith(" ")]
    digest = "\n".join(after[: ends[0] if ends else len(after)])
    assert "at 07:00, Monday to Friday (Europe/Berlin)" in digest and "next run  20" in digest


def test_a_job_removed_while_it_runs_ends_is_recorded_then_goes(
    tmp_path: Path, start: Callable[..., Run]
) -> None:
    stay = """
        [[job]]
        name = "stay"
        every = "1h"
        command = ["true"]
        """
    leaving = """
        [[job]]
        name = "leaving"
        in = "100ms"
        shell = true
        command = 'echo $$ > started; while [ ! -e go ]; do sleep 0.05; done; echo done'
        """
    write_jobs(tmp_path, stay + leaving)
    run = start("--lease", "1s")
    wait_until("the run", lambda: lines_of(tmp_path / "started"))
    write_jobs(tmp_path, stay)
    run.signal(signal.SIGHUP)
    line = run.wait_line("is gone from")
    assert "job 'leaving'" in line and "runs to its end and is recorded" in line, run.text()
    assert "1 removed" in run.wait_line("reloaded")
    with SQLiteStore(tmp_path / "state" / "s.sqlite3") as store:
        state = store.get("jobs/leaving")
        assert state is not None and state.paused  # nothing new starts meanwhile
        [claim] = state.claims
        # Its lease (1 s) is renewed past the reload: the claim stays this daemon's.
        wait_until(
            "a renewal",
            lambda: (
                (s := store.get("jobs/leaving")) is not None
                and s.claims[0].lease_until > claim.lease_until + 0.5
            ),
        )
        (tmp_path / "go").touch()
        run.wait_line("job 'leaving' removed: its last run has ended")
        [entry] = store.history("jobs/leaving")
        assert entry.outcome == "ok" and entry.output is not None and "done" in entry.output
        assert store.get("jobs/leaving") is None
    text = run.text()
    assert "leaving finished ok" in text
    assert "lost the claim" not in text and "claim was gone" not in text, text
    run.signal(signal.SIGTERM)
    assert run.wait() == 0


def test_no_run_is_logged_started_after_the_shutdown_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run begun just before `--for` ends (its claim recorded it started) still runs;
    # its start line must come before "shutting down", however slow its worker thread
    # (here every start line takes 0.5 s to write: a loaded machine).
    import io

    from tickwork._daemon.runlog import RunLog
    from tickwork.daemon import DaemonConfig, run_daemon

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "tick"\nevery = "100ms"\noverlap = "allow"\ncommand = ["true"]\n'
    )
    write = RunLog.started

    def slow(self: RunLog, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.5)
        write(self, *args, **kwargs)

    monkeypatch.setattr(RunLog, "started", slow)
    err = io.StringIO()
    config = DaemonConfig(str(jobs), state=str(tmp_path / "s.db"), run_for=2.0, shutdown_grace=20)
    assert run_daemon(config, err=err) == 0, err.getvalue()
    lines = err.getvalue().splitlines()
    [stop] = [i for i, line in enumerate(lines) if "--for time is up: shutting down" in line]
    assert any(" tick started" in line for line in lines[:stop]), lines
    assert not [line for line in lines[stop:] if " started" in line], lines[stop - 3 :]
