"""A command's process (user, group, umask, limits, working_dir, env_file), ``on_success``
and ``keep_ok``/``keep_failed``: the jobs file's checks, and real daemons running them.

The user test works both ways: as root (CI) it checks that the command runs as
``nobody``; otherwise it checks that validate and the daemon refuse the file, saying why.
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import stat
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.test_alerts import Hook, hook  # noqa: F401  (the fixture)
from tests.test_config import problems
from tests.test_daemon_e2e import LIMIT, Run, wait_until
from tickwork._core.errors import ConfigError
from tickwork._daemon.alerts import AlertSender
from tickwork._daemon.declare import fingerprint
from tickwork._daemon.jobsfile.config import Alert, load_config, parse_config
from tickwork._daemon.process.jobprocess import ProcessSetup, process_setup, read_env_file
from tickwork._daemon.process.runner import ProcessGroups, run_attempt, run_command
from tickwork.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

PATIENCE = 120.0  # for a daemon's runs on a loaded machine; only reached when broken


def tickwork(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tickwork ARGS``, forked warm (tests/forked.py): some are polled."""
    return forked.tickwork(*args, timeout=120)


def ledger(state: Path) -> list[Any]:
    if not state.exists():
        return []
    with SQLiteStore(state) as store:
        return store.history(limit=1000)


def ended(state: Path, name: str) -> Any:
    """The newest ledger entry of job ``name``, or None."""
    return next((e for e in ledger(state) if e.job_id.endswith(f"/{name}")), None)


# -- the jobs file ------------------------------------------------------------------------


def test_the_new_keys_are_parsed_with_defaults_and_env_in_order(tmp_path: Path) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "app.env").write_text("FROM_FILE=file\nSHARED=file\nJOB=file\n")
    (job,) = load_config(_write(tmp_path, """
        [defaults]
        umask = "027"
        limit_files = 64
        keep_ok = 3
        env = { SHARED = "defaults", FROM_DEFAULTS = "1" }
        on_success = { webhook = "http://127.0.0.1:9/ok", retries = 0 }

        [[job]]
        name = "a"
        every = "1m"
        command = ["true"]
        working_dir = "wd"
        env_file = "app.env"
        env = { JOB = "job" }
        limit_memory = "1.5GiB"
        limit_cpu = "90s"
        keep_failed = 7
        """)).jobs  # fmt: skip
    assert job.cwd == str(tmp_path / "wd") and job.env_file == str(tmp_path / "app.env")
    # [defaults] env, then the file, then the job's env
    assert dict(job.env) == {
        "SHARED": "file",
        "FROM_DEFAULTS": "1",
        "FROM_FILE": "file",
        "JOB": "job",
    }
    assert (job.umask, job.limit_files, job.limit_memory, job.limit_cpu) == (
        0o027,
        64,
        1536 << 20,
        90,
    )
    assert (job.keep_ok, job.keep_failed) == (3, 7)
    assert job.on_success == Alert(webhook="http://127.0.0.1:9/ok", retries=0)
    assert (job.user, job.group) == (None, None)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("umask = 27", 'umask: must be an octal string such as "027" (quoted'),
        ('umask = "0999"', 'umask: must be an octal string from "000" to "777"'),
        ('limit_memory = "12 parsecs"', "limit_memory: must be a size such as '512MiB'"),
        ('limit_memory = "100KiB"', "limit_memory: must be from 1MiB"),
        ("limit_memory = -5", "limit_memory: must be from 1MiB"),
        ('limit_cpu = "0.5s"', "limit_cpu: must be a duration of CPU time from 1s, got 0.5s"),
        ('limit_cpu = "soon"', "limit_cpu: duration must look like"),
        ("limit_files = 2", "limit_files: must be an integer >= 3 (stdin, stdout and stderr"),
        ('limit_files = "many"', "limit_files: must be an integer >= 3"),
        ("limit_files = 1_000_000_000_000", "limit_files: is above"),
        ('working_dir = "missing"', "working_dir: '"),
        ('env_file = "missing.env"', "env_file: cannot read '"),
        ('user = "no-such-user-here"', "user: no such user on this host: 'no-such-user-here'"),
        ('group = "no-such-group-here"', "group: no such group on this host"),
        ("keep_ok = -1", "keep_ok: must be a number of entries from 0 to 1,000,000, got -1"),
        ("keep_failed = true", "keep_failed: must be a number of entries from 0"),
        (
            'on_success = { webhook = "http://x/y", failures = 2 }',
            "on_success: 'failures' applies only to on_failure",
        ),
        (
            'on_success = { webhook = "http://x/y", after = 2 }',
            "on_success: 'after' applies only to on_failure",
        ),
        ("on_success = { timeout = 3 }", "on_success: needs a command, a webhook, or both"),
    ],
)
def test_bad_values_are_refused_with_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # user and group: checked as root would
    monkeypatch.chdir(tmp_path)
    found = problems(f'[[job]]\nname = "a"\nevery = "1m"\ncommand = ["true"]\n{line}\n')
    assert len(found) == 1, found
    assert found[0].startswith('jobs.toml:5: job "a": '), found
    assert message in found[0], found


def test_a_missing_working_dir_and_env_file_are_named_by_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "bad.env").write_text("# fine\nGOOD=1\nnot a pair\n")
    text = """
        [[job]]
        name = "a"
        every = "1m"
        command = ["true"]
        working_dir = "file"
        env_file = "bad.env"

        [[job]]
        name = "b"
        every = "1m"
        command = ["true"]
        cwd = "/"
        working_dir = "/"
        """
    with pytest.raises(ConfigError) as exc:
        load_config(_write(tmp_path, text))
    assert str(exc.value).splitlines() == [
        f"{tmp_path}/jobs.toml:6: job \"a\": working_dir: '{tmp_path}/file' is not a directory",
        f'{tmp_path}/jobs.toml:7: job "a": env_file: {tmp_path}/bad.env line 3: expected'
        " KEY=VALUE, got 'not a pair'",
        f'{tmp_path}/jobs.toml:13: job "b": cwd: set working_dir or cwd (its older name), not both',
    ]


def test_call_jobs_refuse_what_only_a_process_of_their_own_could_have() -> None:
    keys = ["user", "group", "umask", "limit_memory", "limit_cpu", "limit_files"]
    values = ['"nobody"', '"nogroup"', '"022"', '"1GiB"', '"1m"', "100"]
    lines = "".join(f"{k} = {v}\n" for k, v in zip(keys, values, strict=True))
    text = f'[[job]]\nname = "c"\nevery = "1m"\ncall = "os:getcwd"\n{lines}env_file = "x"\n'
    found = problems(text)
    for key in [*keys, "env_file"]:
        assert any(f"{key}: applies only to command jobs" in p for p in found), (key, found)
    # from [defaults], they pass a call job by
    (job,) = parse_config(
        '[defaults]\numask = "022"\nlimit_files = 100\n[[job]]\nname = "c"\nevery = "1m"\n'
        'call = "os:getcwd"\n'
    ).jobs
    assert (job.umask, job.limit_files) == (None, None)


def test_user_and_group_are_refused_unless_the_daemon_is_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    found = problems(
        '[defaults]\ngroup = "nogroup"\n[[job]]\nname = "a"\nevery = "1m"\ncommand = ["id"]\n'
        'user = "nobody"\n'
    )
    assert found == [
        "jobs.toml:2: defaults: group: runs the command as another group only when the daemon"
        " runs as root (this process runs as uid 1000); check the file as the daemon's user",
        'jobs.toml:7: job "a": user: runs the command as another user only when the daemon'
        " runs as root (this process runs as uid 1000); check the file as the daemon's user",
    ]


def test_a_limit_above_the_hard_limit_is_refused_unless_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (64, 128))
    text = '[[job]]\nname = "a"\nevery = "1m"\ncommand = ["true"]\nlimit_files = 129\n'
    assert problems(text) == [
        'jobs.toml:5: job "a": limit_files: is above the hard limit of this process (128);'
        " only root can raise it, got 129"
    ]
    (job,) = parse_config(text.replace("129", "128")).jobs
    assert job.limit_files == 128
    # the CPU limit's hard limit is a second later, where the hard limit allows it
    setup = process_setup(limit_cpu=127)
    assert setup is not None and setup.limits == (("RLIMIT_CPU", 127, 128),)
    setup = process_setup(limit_cpu=128)
    assert setup is not None and setup.limits == (("RLIMIT_CPU", 128, 128),)


def test_keep_limits_that_would_hide_the_failure_streak_are_refused() -> None:
    found = problems(
        '[defaults]\nkeep_ok = 0\n[[job]]\nname = "a"\nevery = "1m"\ncommand = ["true"]\n'
        'keep_failed = 2\non_failure = { webhook = "http://x/y", failures = 3 }\n'
    )
    assert found == [
        'jobs.toml:2: job "a": keep_ok: is 0, but on_failure counts the failure streak from'
        " the slot ledger and needs the newest ok run, where the failure streak starts kept:"
        " set keep_ok to at least 1",
        'jobs.toml:7: job "a": keep_failed: is 2, but on_failure counts the failure streak'
        " from the slot ledger and needs on_failure.failures = 3 failed runs kept: set keep_failed"
        " to at least 3",
    ]


def test_env_files_take_comments_export_and_quotes(tmp_path: Path) -> None:
    path = tmp_path / "app.env"
    path.write_text(
        "# a comment\n\n"
        "DATABASE_URL=postgresql://report@db/reports\n"
        'export GREETING="hello\\tworld \\"quoted\\" \\$HOME"   # a comment\n'
        "PATTERN='a $literal \\n'\n"
        "PLAIN = spaces around are dropped  # and this\n"
        "EMPTY=\n"
        "TWICE=1\nTWICE=2\n"
    )
    assert read_env_file(str(path)) == {
        "DATABASE_URL": "postgresql://report@db/reports",
        "GREETING": 'hello\tworld "quoted" $HOME',
        "PATTERN": "a $literal \\n",
        "PLAIN": "spaces around are dropped",
        "EMPTY": "",
        "TWICE": "2",
    }
    path.write_text('OK=1\nOPEN="no end\n')
    with pytest.raises(ValueError, match=r"app.env line 2: OPEN: no closing \" \(a value"):
        read_env_file(str(path))
    path.write_text("1BAD=x\n")
    with pytest.raises(ValueError, match=r"app\.env line 1: expected KEY=VALUE, got '1BAD=x'"):
        read_env_file(str(path))


def test_the_new_keys_leave_old_fingerprints_and_change_them_when_set(tmp_path: Path) -> None:
    base = '[[job]]\nname="backup"\ncron="0 3 * * *"\ncommand=["backup.sh", "--all"]\nretries=2\n'
    (job,) = parse_config(base).jobs
    assert fingerprint(job) == "9df165fb8933"  # as before these keys existed
    (tmp_path / "e.env").write_text("A=1\n")
    seen = {fingerprint(job)}
    for line in [
        'umask = "077"',
        'limit_memory = "1GiB"',
        'limit_cpu = "1m"',
        "limit_files = 100",
        "keep_ok = 5",
        "keep_failed = 5",
        'on_success = { webhook = "http://x/y" }',
        f'env_file = "{tmp_path}/e.env"',
        'on_failure = { command = ["true"] }\nalert_if_late = "5m"',
    ]:
        (changed,) = parse_config(base + line + "\n").jobs
        seen.add(fingerprint(changed))
    assert len(seen) == 10


def test_on_failure_counts_failures_and_still_reads_after_its_old_name() -> None:
    base = '[[job]]\nname="backup"\ncron="0 3 * * *"\ncommand=["backup.sh"]\non_failure = '
    (new,) = parse_config(base + '{ webhook = "http://x/y", failures = 2 }\n').jobs
    (old,) = parse_config(base + '{ webhook = "http://x/y", after = 2 }\n').jobs
    assert new.on_failure == old.on_failure == Alert(webhook="http://x/y", failures=2)
    # The fingerprint a file with ``after = 2`` had before the rename: no job changes.
    assert fingerprint(new) == fingerprint(old) == "f03744a35fa1"
    assert problems(base + '{ webhook = "http://x/y", failures = 2, after = 2 }\n') == [
        'jobs.toml:5: job "backup": on_failure: give failures only: after is its old name,'
        " not a second key"
    ]
    assert problems(base + '{ webhook = "http://x/y", failures = 0 }\n') == [
        'jobs.toml:5: job "backup": on_failure: failures must be an integer from 1 to 1000, got 0'
    ]


# -- on_success: when it fires ---------------------------------------------------------------


def test_on_success_fires_on_ok_runs_but_not_for_the_recovery_on_failure_reports() -> None:
    sender = AlertSender(host="web1")  # not started: only the decisions are looked at
    failure = Alert(webhook="http://127.0.0.1:9/f", failures=2)
    success = Alert(webhook="http://127.0.0.1:9/s")

    def run(ok: bool, before: int, last: object, alert: Alert | None = failure) -> str | None:
        return sender.run_ended(
            "backup",
            alert,
            ok=ok,
            failures_before=before,
            scheduled=1_800_000_000.0,
            status="ok" if ok else "exit=3",
            on_success=success,
            last_success=last,
        )

    assert run(True, 0, None) == "succeeded"
    assert run(False, 0, "t1") is None
    assert run(False, 1, "t1") == "failing"
    assert run(False, 1, "t1") is None  # a second run read the same streak: reported once
    assert run(True, 2, "t1") == "recovered"  # on_failure's; on_success stays quiet
    assert run(True, 2, "t1") == "succeeded"  # the same streak again: already recovered
    assert run(True, 0, "t2") == "succeeded"
    assert run(False, 1, "t3") == "failing"  # a new streak (after t3) is a new one
    assert run(True, 3, "t3") == "recovered"
    # without on_failure, the first ok run after failures is on_success's
    assert run(True, 4, "t4", alert=None) == "succeeded"


# -- through a real daemon -------------------------------------------------------------------


def test_limits_umask_working_dir_and_env_file_reach_the_command(tmp_path: Path) -> None:
    py = sys.executable
    wd = tmp_path / "wd"
    wd.mkdir()
    (tmp_path / "app.env").write_text('# the app\nGREETING="hello there"\nexport WHO=tickwork\n')
    jobs = _write(tmp_path, f"""
        [[job]]
        name = "files"
        in = "0s"
        limit_files = 16
        command = ["{py}", "-c", "fs = [open('/dev/null') for _ in range(100)]"]

        [[job]]
        name = "few-files"
        in = "0s"
        limit_files = 16
        command = ["{py}", "-c", "fs = [open('/dev/null') for _ in range(5)]"]

        [[job]]
        name = "memory"
        in = "0s"
        limit_memory = "256MiB"
        command = ["{py}", "-c", "b = bytearray(1 << 30)"]

        [[job]]
        name = "cpu"
        in = "0s"
        limit_cpu = "1s"
        command = ["{py}", "-c", "while True: pass"]

        [[job]]
        name = "umask"
        in = "0s"
        umask = "027"
        working_dir = "wd"
        command = ["sh", "-c", "touch made && mkdir dir"]

        [[job]]
        name = "where"
        in = "0s"
        working_dir = "wd"
        env_file = "app.env"
        env = {{ WHO = "the job" }}
        command = ["sh", "-c", "echo \\"at $(pwd): $GREETING from $WHO\\""]
        """)  # fmt: skip
    assert tickwork("validate", str(jobs)).returncode == 0
    state = tmp_path / "s.sqlite3"
    names = ["files", "few-files", "memory", "cpu", "umask", "where"]
    run = Run(jobs, state)
    try:
        wait_until("every job's run", lambda: all(ended(state, n) for n in names), PATIENCE)
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    entry = {name: ended(state, name) for name in names}
    assert entry["files"].outcome == "failed"
    assert "Too many open files" in entry["files"].output
    assert entry["few-files"].outcome == "ok"
    assert entry["memory"].outcome == "failed" and "MemoryError" in entry["memory"].output
    assert entry["cpu"].outcome == "failed" and "signal=SIGXCPU" in entry["cpu"].error
    assert entry["umask"].outcome == "ok"
    assert stat.S_IMODE((wd / "made").stat().st_mode) == 0o640
    assert stat.S_IMODE((wd / "dir").stat().st_mode) == 0o750
    assert entry["where"].outcome == "ok"
    assert f"where stdout | at {wd}: hello there from the job" in run.text()


def test_user_and_group_drop_to_nobody_as_root_or_are_refused(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    jobs = _write(tmp_path, """
        [[job]]
        name = "who"
        in = "0s"
        user = "nobody"
        command = ["sh", "-c", "echo \\"uid=$(id -u) gid=$(id -g) home=$HOME user=$USER\\""]
        """)  # fmt: skip
    state = tmp_path / "s.sqlite3"
    if os.geteuid() != 0:  # the refusal, where the daemon is not root
        checked = tickwork("validate", str(jobs))
        assert checked.returncode == 2
        why = "user: runs the command as another user only when the daemon runs as root"
        assert why in checked.stderr
        started = tickwork("run", str(jobs), "--state", str(state), "--for", "1s")
        assert started.returncode != 0 and why in started.stderr
        return
    assert tickwork("validate", str(jobs)).returncode == 0
    run = Run(jobs, state)
    try:
        run.wait_line(" who stdout | uid=", limit=PATIENCE)
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    expected = (
        f"who stdout | uid={nobody.pw_uid} gid={nobody.pw_gid} home={nobody.pw_dir} user=nobody"
    )
    assert expected in run.text()


def test_on_success_fires_on_ok_runs_and_a_recovery_is_reported_once(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    healthy = tmp_path / "healthy"
    healthy.touch()
    said = tmp_path / "said"
    jobs = _write(tmp_path, f"""
        [defaults.on_success]
        webhook = "{hook.url}"
        command = ["sh", "-c", "echo $TICKWORK_EVENT $TICKWORK_JOB >> {said}"]

        [[job]]
        name = "probe"
        every = "300ms"
        command = ["sh", "-c", "test -e {healthy} || {{ echo down >&2; exit 3; }}"]
        on_failure = {{ webhook = "{hook.url}", failures = 2 }}
        """)  # fmt: skip
    run = Run(jobs, tmp_path / "s.sqlite3")

    def events() -> list[str]:
        return [b["event"] for b in hook.bodies]

    try:
        wait_until("a success report", lambda: "succeeded" in events(), LIMIT)
        healthy.unlink()
        wait_until("the failing alert", lambda: "failing" in events(), LIMIT)
        healthy.touch()
        wait_until(
            "two success reports after the recovery",
            lambda: events()[events().index("failing") :].count("succeeded") >= 2,
            LIMIT,
        )
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    seen = events()
    start = seen.index("failing")
    assert set(seen[:start]) == {"succeeded"}
    # the first ok run after the streak is on_failure's "recovered", once, then successes
    assert seen[start : start + 2] == ["failing", "recovered"]
    assert set(seen[start + 2 :]) == {"succeeded"}
    recovered = hook.bodies[start + 1]
    assert recovered["consecutive_failures"] >= 2 and recovered["outcome"] == "ok"
    success_slots = {b["scheduled"] for b in hook.bodies if b["event"] == "succeeded"}
    assert recovered["scheduled"] not in success_slots
    first = next(b for b in hook.bodies if b["event"] == "succeeded")
    assert first["outcome"] == "ok" and first["job"] == "probe"
    wait_until("the command's reports", lambda: said.exists() and said.read_text(), LIMIT)
    assert set(said.read_text().splitlines()) == {"succeeded probe"}


def test_keep_ok_and_keep_failed_leave_exactly_those_counts_in_history(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter};"
        " [ $((n % 2)) -eq 0 ]"
    )  # odd runs fail, even runs succeed
    text = f"""
        [[job]]
        name = "rec"
        every = "EVERY"
        keep_ok = 2
        keep_failed = 5
        command = ["sh", "-c", "{script}"]
        """
    jobs = _write(tmp_path, text.replace("EVERY", "200ms"))
    state = tmp_path / "s.sqlite3"

    def counts() -> Counter[str]:
        shown = tickwork("history", "rec", "-f", str(jobs), "--state", str(state), "--json",
                         "--limit", "1000")  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        return Counter(e["outcome"] for e in json.loads(shown.stdout))

    run = Run(jobs, state)
    try:
        runs = lambda: int(counter.read_text() or 0) if counter.exists() else 0  # noqa: E731
        wait_until("16 runs", lambda: runs() >= 16, PATIENCE)
        _write(tmp_path, text.replace("EVERY", "1h"))  # no more runs: what is kept stays
        run.signal(1)
        run.wait_line("reloaded", limit=PATIENCE)
        wait_until("the ledger trimmed to 2 ok and 5 failed", lambda: (
            (c := counts())["ok"] == 2 and c["failed"] == 5), PATIENCE)  # fmt: skip
        assert runs() >= 16  # more ran than is kept, of each kind
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    final = counts()  # given-up slots (skipped under load) are left to the overall limits
    assert (final["ok"], final["failed"]) == (2, 5)


# -- the supervisor's steps ------------------------------------------------------------------


def test_a_setup_step_the_system_refuses_fails_the_run_naming_the_step() -> None:
    groups = ProcessGroups()
    beyond = 1 << 40  # above fs.nr_open: refused to root too
    setup = ProcessSetup(limits=(("RLIMIT_NOFILE", 64, beyond),))
    result = run_command(["true"], groups=groups, setup=setup)
    assert not result.ok and result.exit_code is None
    assert result.error is not None
    assert result.error.startswith("cannot start 'true': RLIMIT_NOFILE = 64: "), result.error
    with pytest.raises(ValueError, match="a process setup needs groups"):
        run_command(["true"], setup=setup)


def test_a_user_gone_since_the_file_was_read_fails_the_run_saying_so() -> None:
    (job,) = parse_config('[[job]]\nname = "a"\nevery = "1m"\ncommand = ["true"]\n').jobs
    result = run_attempt(replace(job, user="no-such-user-here"), groups=ProcessGroups())
    assert result.error == "cannot start 'true': no such user on this host: 'no-such-user-here'"
