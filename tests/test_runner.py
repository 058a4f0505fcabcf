"""The runner with real processes: process groups, timeouts, output, env, retries."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.waiting import wait_until
from tickwork._daemon.jobsfile.config import parse_config
from tickwork._daemon.process.runner import (
    _SUPERVISOR,
    LINE_LIMIT,
    ProcessGroups,
    RunResult,
    backoff_delay,
    resolve_callable,
    run_call,
    run_command,
    run_job,
    run_with_retries,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

# Writes the pids of itself and of a child it spawned, then hangs ignoring SIGTERM
# (the child too): only SIGKILL to the whole group ends both.
HANG = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(100)"])
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
print("ready", flush=True)
time.sleep(100)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its new parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids: list[int], within: float = 5.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def test_exit_status_and_combined_output() -> None:
    r = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.signal, r.timed_out, r.ok, r.status) == (3, None, False, False, "exit=3")
    assert r.output == "out\nerr\n" and r.output_bytes == 8
    assert run_command(["true"]).status == "ok"


def test_timeout_kills_the_whole_group_even_when_sigterm_is_ignored(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    start = time.monotonic()
    # 3 s: time for two interpreters to start on a loaded machine before the timeout.
    r = run_command([sys.executable, "-c", HANG, str(pids)], timeout=3.0, kill_grace=0.3)
    assert time.monotonic() - start < 15
    assert pids.exists(), f"the hanging job never got going: {r}"
    assert r.timed_out and r.status == "timeout" and not r.ok
    assert r.signal == signal.SIGKILL and r.exit_code is None
    assert "ready" in r.output
    leader, child = map(int, pids.read_text().split())
    assert wait_gone([leader, child]) == []


def test_timeout_sigterm_is_enough_for_a_polite_group() -> None:
    r = run_command(["sh", "-c", "sleep 100 & sleep 100"], timeout=0.2, kill_grace=30)
    assert r.timed_out and r.signal == signal.SIGTERM
    assert r.duration < 10  # did not wait out the kill grace


def test_leftover_children_get_sigterm_when_the_leader_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    r = run_command(["sh", "-c", f"sleep 100 >/dev/null 2>&1 & echo $! > {pidfile}"])
    assert r.ok
    assert wait_gone([int(pidfile.read_text())]) == []


def test_output_tail_is_bounded() -> None:
    code = "import sys\nfor i in range(200000): sys.stdout.write(f'{i}\\n')\nprint('end')"
    r = run_command([sys.executable, "-c", code], tail_bytes=64)
    assert r.ok and r.output.endswith("199999\nend\n")
    assert len(r.output.encode()) <= 64 and r.output_bytes > 1_000_000


def test_each_line_is_handed_over_tagged_with_its_stream_and_size() -> None:
    seen: list[tuple[str, str, int]] = []
    script = "echo out; echo err >&2; printf 'crlf\\r\\n'; echo; printf 'no newline'"
    r = run_command(["sh", "-c", script], on_line=lambda *line: seen.append(line))
    assert r.ok
    assert sorted(seen) == sorted(
        [
            ("stdout", "out", 4),
            ("stderr", "err", 4),
            ("stdout", "crlf", 6),
            ("stdout", "", 1),
            ("stdout", "no newline", 10),
        ]
    )
    assert [text for stream, text, _ in seen if stream == "stdout"] == [
        "out",
        "crlf",
        "",
        "no newline",
    ]


def test_a_long_line_is_cut_with_a_mark_that_says_how_much() -> None:
    seen: list[tuple[str, str, int]] = []
    code = "import sys; sys.stdout.write('a' * 10000 + '\\n' + 'é' * 3000 + '\\nshort\\n')"
    r = run_command([sys.executable, "-c", code], on_line=lambda *line: seen.append(line))
    assert r.ok and len(seen) == 3
    (_, first, size1), (_, second, size2), third = seen
    assert (
        first
        == "a" * LINE_LIMIT + f" [... {10000 - LINE_LIMIT} more byte(s) of this line not shown]"
    )
    assert size1 == 10001
    # The cut falls inside a two-byte character: the half is left out, never garbled.
    kept = "é" * (LINE_LIMIT // 2)
    assert second == kept + f" [... {6000 - LINE_LIMIT} more byte(s) of this line not shown]"
    assert size2 == 6001
    assert third == ("stdout", "short", 6)


def test_a_line_is_handed_over_while_the_command_still_runs() -> None:
    groups = ProcessGroups()
    first = threading.Event()
    results: list[RunResult] = []

    def on_line(stream: str, text: str, size: int) -> None:
        if text == "first":
            first.set()

    thread = threading.Thread(
        target=lambda: results.append(
            run_command(
                ["sh", "-c", "echo first; sleep 300; echo second"],
                groups=groups,
                on_line=on_line,
                kill_grace=5,
                tag="the-run",
            )
        )
    )
    thread.start()
    try:
        assert first.wait(60), "the first line never came"
        assert thread.is_alive() and not results  # the command sleeps for 300 s
    finally:
        groups.replace("the-run")
        thread.join(60)
    (result,) = results
    assert result.replaced and result.cancelled and result.status == "replaced"
    assert not result.ok and result.output == "first\n"


def test_replace_ends_the_group_with_the_kill_grace_of_a_timeout(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    groups = ProcessGroups()
    results: list[RunResult] = []
    thread = threading.Thread(
        target=lambda: results.append(
            run_command(
                [sys.executable, "-c", HANG, str(pids)], groups=groups, kill_grace=0.3, tag=7
            )
        )
    )
    thread.start()
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert groups.replace(8) == 0  # another run: nothing of this one is touched
    groups.forget(8)
    assert groups.replace(7) == 1
    thread.join(60)
    (result,) = results
    assert result.status == "replaced" and result.signal == signal.SIGKILL  # TERM was ignored
    leader, child = map(int, pids.read_text().split())
    assert wait_gone([leader, child]) == []
    # A pending replacement ends an attempt of the same run that starts later, at once...
    late = run_command(["sleep", "300"], groups=groups, tag=7, kill_grace=5)
    assert late.status == "replaced" and late.signal == signal.SIGTERM
    # ...until the run is forgotten.
    groups.forget(7)
    assert run_command(["true"], groups=groups, tag=7).ok
    assert run_command(["true"], groups=groups, tag=8).ok


def test_tail_does_not_start_inside_a_utf8_sequence() -> None:
    r = run_command([sys.executable, "-c", "print('é' * 100, end='')"], tail_bytes=9)
    assert r.output == "éééé"


def test_env_is_merged_over_base_and_cwd_applies(tmp_path: Path) -> None:
    script = 'printf "%s %s %s" "$A" "$B" "$(pwd)"'
    r = run_command(
        ["sh", "-c", script], env={"B": "job"}, cwd=str(tmp_path), base_env={"A": "base", "B": "x"}
    )
    assert r.output == f"base job {tmp_path}"
    os.environ["TICKWORK_TEST_VAR"] = "daemon"
    try:
        assert run_command(["sh", "-c", "echo $TICKWORK_TEST_VAR"]).output == "daemon\n"
    finally:
        del os.environ["TICKWORK_TEST_VAR"]


def test_no_shell_unless_asked() -> None:
    r = run_command(["echo", "$HOME; false"])
    assert r.output == "$HOME; false\n"
    assert run_command("echo a && echo b", shell=True).output == "a\nb\n"
    with pytest.raises(TypeError, match="shell is false"):
        run_command("echo a")


def test_a_command_that_cannot_start_is_a_result(tmp_path: Path) -> None:
    r = run_command(["tickwork-no-such-program"])
    assert r.status == "error" and r.error is not None
    assert r.error.startswith("cannot start 'tickwork-no-such-program': ")
    r = run_command(["true"], cwd=str(tmp_path / "missing"))
    assert r.error is not None and "in '" in r.error


def test_a_supervised_command_ends_as_the_command_ended(tmp_path: Path) -> None:
    groups = ProcessGroups(marker="k:1:2")
    r = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], groups=groups)
    assert (r.exit_code, r.signal, r.output) == (3, None, "out\nerr\n")
    r = run_command(["sh", "-c", "kill -USR1 $$"], groups=groups)
    assert (r.exit_code, r.signal, r.status) == (None, signal.SIGUSR1, "signal=SIGUSR1")
    r = run_command(["sh", "-c", "echo $TICKWORK_SUPERVISED"], groups=groups, job="j:1")
    assert r.output == "k:1:2:j:1\n"
    # The command is the supervisor's child, in the supervisor's group.
    r = run_command(["sh", "-c", "echo $PPID $(ps -o pgid= -p $$)"], groups=groups)
    parent, pgid = map(int, r.output.split())
    assert parent == pgid and parent != os.getpid()
    r = run_command(["tickwork-no-such-program"], groups=groups)
    assert r.status == "error" and r.error is not None
    assert r.error.startswith("cannot start 'tickwork-no-such-program': No such file")
    r = run_command(["true"], cwd=str(tmp_path / "missing"), groups=groups)
    assert r.error is not None and "in '" in r.error
    assert len(groups) == 0


def test_a_supervised_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    groups = ProcessGroups()
    r = run_command(
        [sys.executable, "-c", HANG, str(pids)], timeout=3.0, kill_grace=0.3, groups=groups
    )
    assert pids.exists(), f"the hanging job never got going: {r}"
    assert r.timed_out and r.signal == signal.SIGKILL and "ready" in r.output
    assert wait_gone(list(map(int, pids.read_text().split()))) == []
    # The timeout must come once the command runs (3 s, as above): one that comes while
    # the supervisor itself starts (0.2 s was not enough at a load near 20) ends the group
    # before the command obeys a SIGTERM.
    r = run_command(
        ["sh", "-c", "echo started; sleep 100 & sleep 100"],
        timeout=3.0,
        kill_grace=30,
        groups=groups,
    )
    assert "started" in r.output, r
    assert r.timed_out and r.signal == signal.SIGTERM and r.duration < 10
    pidfile = tmp_path / "pid"
    r = run_command(["sh", "-c", f"sleep 100 >/dev/null 2>&1 & echo $! > {pidfile}"], groups=groups)
    assert r.ok
    assert wait_gone([int(pidfile.read_text())]) == []


def in_group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process groups from /proc")
def test_a_supervisor_whose_daemon_died_as_the_command_started_ends_the_run(
    tmp_path: Path,
) -> None:
    # The daemon is SIGKILLed after it started the supervisor and before the supervisor
    # reports the command's pid: the report meets a closed pipe. The supervisor must
    # still end the run (it once died on the broken pipe and left the command behind).
    err_path = tmp_path / "err"
    lifeline_r, lifeline_w = os.pipe()
    status_r, status_w = os.pipe()
    os.close(lifeline_w)  # the daemon is gone...
    os.close(status_r)  # ...and so is its end of the status pipe
    with err_path.open("wb") as err_file:
        fds = [str(lifeline_r), str(status_w)]
        supervisor = subprocess.Popen(
            [sys.executable, "-I", "-S", _SUPERVISOR, *fds, "--", "sh", "-c", "sleep 100"],
            pass_fds=(lifeline_r, status_w),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        )
    os.close(lifeline_r)
    os.close(status_w)
    left: list[int] = []
    try:
        supervisor.wait(timeout=60)
        # The group's SIGKILL is sent; a loaded kernel may show the command exiting for a
        # moment after the supervisor is reaped, so wait for the group to be gone.
        with contextlib.suppress(AssertionError):
            wait_until("the supervisor's group to end", lambda: not in_group(supervisor.pid))
    finally:
        err = err_path.read_text()
        left = in_group(supervisor.pid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"the run outlived its supervisor: {err!r}"
    assert supervisor.returncode == -signal.SIGKILL, err  # ended with its group


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_command_dies_with_its_supervisor(tmp_path: Path) -> None:
    # A kill of the daemon's whole tree but the command (the supervisor too): the kernel
    # ends the command, which no lifeline can do any more.
    pid_file = tmp_path / "pid"
    lifeline_r, lifeline_w = os.pipe()  # the daemon lives on: no end of file
    status_r, status_w = os.pipe()
    command = ["sh", "-c", f"trap '' TERM; echo $$ > {pid_file}; exec sleep 100"]
    supervisor = subprocess.Popen(
        [sys.executable, "-I", "-S", _SUPERVISOR, str(lifeline_r), str(status_w), "--", *command],
        pass_fds=(lifeline_r, status_w),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )
    os.close(lifeline_r)
    os.close(status_w)
    try:
        give_up = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < give_up, "the command never started"
            time.sleep(0.02)
        command_pid = int(pid_file.read_text())
        supervisor.kill()
        supervisor.wait(60)
        assert wait_gone([command_pid], within=30) == []
    finally:
        for pid in in_group(supervisor.pid):
            os.kill(pid, signal.SIGKILL)
        os.close(lifeline_w)
        os.close(status_r)


def test_terminate_all_ends_running_groups_and_refuses_new_ones() -> None:
    groups = ProcessGroups()
    results: list[RunResult] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                run_command(["sh", "-c", "trap '' TERM; sleep 100"], groups=groups, kill_grace=0.3)
            )
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(groups) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert groups.terminate_all() == 2
    for t in threads:
        t.join(10)
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    # SIGKILL once the trap is set; SIGTERM if the shell had not got that far yet.
    assert all(r.signal in (signal.SIGTERM, signal.SIGKILL) for r in results)
    assert len(groups) == 0 and groups.closed
    late = run_command(["true"], groups=groups)
    assert late.cancelled and late.error == "not started: shutting down"


def job_target(x: int, *, y: int = 0) -> int:
    if x < 0:
        raise ValueError(f"bad x {x}")
    return x + y


async def async_target(box: list[int]) -> None:
    box.append(1)


def test_callables_run_in_process() -> None:
    assert resolve_callable("tests.test_runner:job_target") is job_target
    assert run_call("tests.test_runner:job_target", [1], {"y": 2}).ok
    failed = run_call(job_target, [-1])
    assert failed.status == "error" and failed.error == "ValueError: bad x -1"
    assert failed.output.rstrip().endswith("ValueError: bad x -1")
    box: list[int] = []
    assert run_call(async_target, [box]).ok and box == [1]
    assert run_call(sys.exit, [4]).status == "exit=4"
    missing = run_call("tests.test_runner:nope")
    assert missing.error is not None and missing.error.startswith("AttributeError")
    with pytest.raises(TypeError, match=r"package\.module:function"):
        resolve_callable("no_colon")


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_delay(n, base=1.5, cap=10) for n in range(1, 6)] == [1.5, 3, 6, 10, 10]
    assert backoff_delay(10_000, base=1, cap=300) == 300


def test_retries_with_injected_sleep() -> None:
    delays: list[float] = []
    outcomes = iter([1, 1, 1, 0])

    def attempt(n: int) -> RunResult:
        return RunResult(exit_code=next(outcomes))

    r = run_with_retries(
        attempt, retries=5, backoff=2, backoff_max=5, sleep=delays.append, rand=lambda: 0.0
    )
    assert r.ok and r.attempt == 4 and delays == [2, 4, 5]
    delays.clear()
    r = run_with_retries(
        lambda n: RunResult(exit_code=1),
        retries=2,
        backoff=1,
        sleep=delays.append,
        rand=lambda: 0.0,
    )
    assert r.attempt == 3 and r.status == "exit=1" and delays == [1, 2]
    r = run_with_retries(
        lambda n: RunResult(cancelled=True), retries=2, backoff=1, sleep=delays.append
    )
    assert r.attempt == 1


def test_stop_event_interrupts_a_backoff() -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    calls: list[int] = []
    start = time.monotonic()
    r = run_with_retries(
        lambda n: calls.append(n) or RunResult(exit_code=1), retries=3, backoff=60, stop=stop
    )
    assert time.monotonic() - start < 10
    assert calls == [1] and r.attempt == 1 and not r.ok


def test_run_job_reports_every_attempt(tmp_path: Path) -> None:
    text = f"""
        [[job]]
        name = "flaky"
        every = "1m"
        shell = true
        command = 'n=$(cat count 2>/dev/null || echo 0); echo $((n + 1)) > count; [ $n -ge 2 ]'
        cwd = "{tmp_path}"
        retries = 4
        retry_backoff = "1s"
        env = {{ X = "1" }}
    """
    [job] = parse_config(text).jobs
    events: list[str] = []
    delays: list[float] = []
    r = run_job(
        job,
        sleep=delays.append,
        rand=lambda: 0.0,
        on_start=lambda n: events.append(f"start {n}"),
        on_end=lambda res: events.append(f"end {res.attempt} {res.status}"),
    )
    assert r.ok and r.attempt == 3 and delays == [1, 2]
    assert events == ["start 1", "end 1 exit=1", "start 2", "end 2 exit=1", "start 3", "end 3 ok"]
