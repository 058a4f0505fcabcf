"""``tickwork import crontab`` and ``tickwork run --crontab`` through the real CLI.

Each daemon test waits for the files and log lines it expects with generous limits
(never a fixed sleep as the proof); the schedules have a seconds field (``--seconds``)
so that a run comes within a second or two of the start.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.test_crontab import CRONTABS, fixture
from tests.test_daemon_e2e import Run, wait_until
from tickwork._daemon.jobsfile.crontab import CrontabOptions, translate_crontab
from tickwork._daemon.state import default_state_path

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def tickwork(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> tuple[int, str, str]:
    if stdin is None:  # its own process, forked warm (tests/forked.py), stdin /dev/null
        done = forked.tickwork(*args, timeout=120, cwd=cwd)
        return done.returncode, done.stdout, done.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


# -- tickwork import crontab ----------------------------------------------------------------


def test_import_from_stdin_writes_the_jobs_file_to_stdout() -> None:
    text = fixture("user")
    code, out, err = tickwork("import", "crontab", "-", stdin=text.encode())
    assert out == translate_crontab(text, path="<stdin>").toml
    assert code == 1  # lines were left out, and --keep-going was not given
    assert "<stdin>:35: minute: invalid value `61`" in err
    assert "<stdin>:28: @reboot: at_start = true, one run each time the daemon starts" in err
    assert err.splitlines()[-1] == (
        "tickwork import crontab: 15 jobs from <stdin>; 7 lines not imported"
    )
    code, out_again, _ = tickwork("import", "crontab", "-", "--keep-going", stdin=text.encode())
    assert code == 0
    assert out_again == out  # the same names and text at each import


def test_import_from_stdin_keeps_crlf_to_say_so() -> None:
    code, out, err = tickwork("import", "crontab", "-", stdin=fixture("windows").encode())
    assert code == 0
    assert "<stdin>:1: 5 lines end with CRLF" in err
    assert "\r" not in out


def test_import_a_file_to_a_file_that_validates(tmp_path: Path) -> None:
    target = tmp_path / "jobs.toml"
    source = CRONTABS / "debian-etc.crontab"
    code, out, err = tickwork(
        "import", "crontab", str(source), "--system", "--keep-going", "-o", str(target)
    )
    assert code == 0, err
    assert out == ""
    text = target.read_text()
    options = CrontabOptions(system=True)
    assert text == translate_crontab(fixture("debian-etc"), path=str(source), options=options).toml
    assert f"{source}:29: expected the user field" in err
    assert err.splitlines()[-1].endswith(f"7 jobs from {source} to {target}; 1 line not imported")
    mode = stat.S_IMODE(target.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # as `> jobs.toml` would create it
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind
    # Validated on this host: the crontab's HOMEs are "-~root", "-~www-data", which may
    # be missing (cron runs the line all the same); as root, www-data is its user.
    code, out, err = tickwork("validate", str(target))
    assert (code, out) == (0, "ok: 7 jobs\n"), err
    assert ('user = "www-data"' in text) == (os.geteuid() == 0)


def test_import_exit_statuses(tmp_path: Path) -> None:
    code, _, err = tickwork("import", "crontab", str(tmp_path / "missing"))
    assert code == 2
    assert f"cannot read {tmp_path / 'missing'}" in err
    empty = tmp_path / "empty"
    empty.write_text("# nothing\nMAILTO=root\n0 0 31 2 * /opt/never\n")
    target = tmp_path / "jobs.toml"
    code, out, err = tickwork("import", "crontab", str(empty), "-o", str(target), "--keep-going")
    assert code == 1
    assert f"{empty}: no job to import from this crontab" in err
    assert "nothing written" in err
    assert not target.exists() and out == ""
    good = tmp_path / "good"
    good.write_text("@daily /opt/backup\n")
    code, out, err = tickwork("import", "crontab", str(good))
    assert code == 0
    assert 'name = "backup"' in out
    assert err == f"tickwork import crontab: 1 job from {good}\n"


def test_a_seconds_line_without_seconds_is_not_run_as_a_glob(tmp_path: Path) -> None:
    """Read as five fields, ``*/10 * * * * * cmd`` would run the file names ``*`` expands to."""
    crontab = _crontab(tmp_path, "*/10 * * * * * /opt/tick", "@daily /opt/backup")
    code, out, err = tickwork("import", "crontab", str(crontab))
    assert code == 1
    assert f"{crontab}:1: the command starts with '*', which looks like a sixth" in err
    assert "# NOT IMPORTED, line 1: */10 * * * * * /opt/tick" in out
    code, out, err = tickwork("import", "crontab", str(crontab), "--seconds")
    assert code == 0 and 'cron = "*/10 * * * * *"' in out
    state = tmp_path / "state.sqlite3"
    code, _, err = tickwork("run", "--crontab", str(crontab), "--state", str(state), "--for", "1s")
    assert code == 2 and f"{crontab}:1: the command starts with '*'" in err
    assert "Traceback" not in err and not state.exists()


def test_help_says_what_import_and_run_do_with_a_crontab() -> None:
    code, out, _ = tickwork("import", "crontab", "--help")
    assert code == 0
    for words in ("--system", "--seconds", "--keep-going", "-o FILE", "@reboot", "MAILTO"):
        assert words in out
    code, out, _ = tickwork("run", "--help")
    assert code == 0
    assert "--crontab" in out and "with --crontab:" in out


# -- tickwork run --crontab --------------------------------------------------------------


def _crontab(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "app.crontab"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_run_crontab_runs_each_line_with_its_input_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    crontab = _crontab(
        tmp_path,
        "# written for cron, run by tickwork",
        "SHELL=/bin/bash",
        'GREETING = "hello there"',
        f"*/1 * * * * * {{ echo $GREETING; cat; }} > {out}.tmp && mv {out}.tmp {out}%"
        "line one%50\\% off",
    )
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    daemon = Run(crontab, [], "--crontab", "--seconds")
    try:
        daemon.wait_line(f"running 1 job from {crontab}")
        wait_until("the job's output", out.exists)
        assert out.read_text() == "hello there\nline one\n50% off"
        daemon.wait_line("finished ok")
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    finally:
        daemon.kill()
    # the state is where `tickwork run` keeps a jobs file's: derived from the path
    assert default_state_path(crontab).is_relative_to(tmp_path / "xdg")
    assert default_state_path(crontab).exists()
    started = [line for line in daemon.lines if " started" in line]
    assert started and started[0].split()[1] == "cat"


def test_run_crontab_refuses_lines_it_cannot_import_unless_keep_going(tmp_path: Path) -> None:
    out = tmp_path / "out"
    crontab = _crontab(tmp_path, f"* * * * * * touch {out}", "61 * * * * * never", "0 0 0 31 2 * x")
    state = tmp_path / "state.sqlite3"
    code, _, err = tickwork(
        "run", "--crontab", str(crontab), "--seconds", "--state", str(state), "--for", "1s"
    )
    assert code == 2
    assert f"{crontab}:2: second: invalid value `61`" in err
    assert f"{crontab}:3: day-of-month" in err
    assert "pass --keep-going to run the others" in err
    assert "not started, fix the file first" in err
    assert not state.exists()
    daemon = Run(crontab, state, "--crontab", "--seconds", "--keep-going", "--log-format", "json")
    try:
        daemon.wait_line("running 1 job")
        wait_until("the imported line's run", out.exists)
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    finally:
        daemon.kill()
    warnings = [
        record["message"]
        for record in map(json.loads, daemon.lines)
        if record.get("level") == "warning"
    ]
    assert warnings[0].startswith(f"{crontab}:2: second: invalid value `61`")
    assert warnings[1].startswith(f"{crontab}:3: day-of-month")


def test_run_crontab_system_runs_a_line_as_its_user_in_its_home_or_in_root(
    tmp_path: Path,
) -> None:
    """A ``nobody`` line: as ``nobody`` by a root daemon (else warned about), and in ``/``
    when nobody's HOME (``/nonexistent``) is missing, as cron runs it."""
    nobody = pwd.getpwnam("nobody")
    where = nobody.pw_dir if os.path.isdir(nobody.pw_dir) else "/"
    crontab = _crontab(tmp_path, '*/1 * * * * * nobody echo "as $(id -un) in $(pwd)"')
    daemon = Run(crontab, tmp_path / "state.sqlite3", "--crontab", "--system", "--seconds")
    try:
        daemon.wait_line("running 1 job")
        if os.geteuid() == 0:
            daemon.wait_line(f"stdout | as nobody in {where}")
        else:
            me = pwd.getpwuid(os.geteuid()).pw_name
            daemon.wait_line(f"{crontab}:1: cron ran this line as user nobody; tickwork runs")
            daemon.wait_line(f"stdout | as {me} in {where}")
        daemon.wait_line("finished ok")
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    finally:
        daemon.kill()
    assert "cannot start" not in daemon.text()


def test_run_crontab_runs_a_reboot_line_once_when_it_starts(tmp_path: Path) -> None:
    out, ticks = tmp_path / "out", tmp_path / "ticks"
    crontab = _crontab(tmp_path, f"@reboot echo booted >> {out}", f"*/1 * * * * * echo >> {ticks}")
    daemon = Run(crontab, tmp_path / "state.sqlite3", "--crontab", "--seconds")
    try:
        daemon.wait_line(f"{crontab}:1: @reboot: at_start = true, one run each time")
        daemon.wait_line("running 2 jobs")
        wait_until("the @reboot line's run", out.exists)
        wait_until("two ticks", lambda: ticks.exists() and len(ticks.read_text()) >= 2)
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    finally:
        daemon.kill()
    assert out.read_text() == "booted\n"


def test_run_crontab_reloads_the_crontab_on_sighup(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    crontab = _crontab(tmp_path, f"* * * * * * touch {first}")
    daemon = Run(crontab, tmp_path / "state.sqlite3", "--crontab", "--seconds")
    try:
        daemon.wait_line("running 1 job")
        wait_until("the first line's run", first.exists)
        with crontab.open("a") as f:
            f.write(f"* * * * * * touch {second}\n")
        daemon.signal(signal.SIGHUP)
        daemon.wait_line(f"reloaded {crontab}: 1 created")
        wait_until("the added line's run", second.exists)
        # a broken crontab keeps the running configuration, naming the line
        with crontab.open("a") as f:
            f.write("* * 99 * * * broken\n")
        daemon.signal(signal.SIGHUP)
        daemon.wait_line(f"{crontab}:3: hour: invalid value `99`")
        daemon.wait_line("still running the previous configuration")
        daemon.signal(signal.SIGTERM)
        assert daemon.wait() == 0
    finally:
        daemon.kill()


def test_run_crontab_options_need_crontab(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "a"\nevery = "1h"\ncommand = ["true"]\n')
    code, _, err = tickwork("run", str(jobs), "--system", "--for", "1s")
    assert code == 2
    assert "tickwork run: --system applies only with --crontab" in err
