"""A crontab as a jobs file (`tickwork._daemon.jobsfile.crontab`): every construct, line by line.

The fixtures in ``tests/crontabs/`` are real-world crontabs (Debian's /etc/crontab with
cron.d lines, a user crontab with every construct, one saved on Windows); each ``.toml``
beside them is the expected translation, read by people: to regenerate one after a
deliberate change, run ``tickwork import crontab`` on its crontab (``--system`` for
``debian-etc``, ``--keep-going`` for all) and review the diff.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from tickwork._core.errors import ConfigError
from tickwork._core.schedules import Cron
from tickwork._daemon.jobsfile.config import Config, parse_config
from tickwork._daemon.jobsfile.crontab import (
    CrontabOptions,
    crontab_config,
    load_crontab,
    toml_string,
    translate_crontab,
)

CRONTABS = Path(__file__).parent / "crontabs"
FIXTURES = {
    "debian-etc": CrontabOptions(system=True, users=False),
    "user": CrontabOptions(),
    "windows": CrontabOptions(),
}


def fixture(name: str) -> str:
    with open(CRONTABS / f"{name}.crontab", encoding="utf-8", newline="") as f:
        return f.read()


def translate(text: str, **options: bool) -> tuple[Config, str, list[str]]:
    """The config, the TOML and the notes (``line: message``) of a crontab's text."""
    config, translation = crontab_config(text, path="t", options=CrontabOptions(**options))
    notes = [f"{n.line}: {n.message}" for n in translation.notes]
    return config, translation.toml, notes


def one_job(text: str, **options: bool) -> tuple[tuple[str, ...], dict[str, str], Cron]:
    config, _, _ = translate(text, **options)
    (job,) = config.jobs
    assert isinstance(job.command, tuple)
    assert isinstance(job.schedule, Cron)
    return job.command, dict(job.env), job.schedule


# -- the fixtures: golden files, validation, fire times --------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_translates_to_its_golden_file(name: str) -> None:
    translation = translate_crontab(fixture(name), path=f"{name}.crontab", options=FIXTURES[name])
    golden = (CRONTABS / f"{name}.toml").read_text(encoding="utf-8")
    assert translation.toml == golden
    # the golden file is a valid jobs file: the same validator as `tickwork validate`,
    # but for the working directories, which are the crontab's host's (its HOME)
    text = (CRONTABS / f"{name}.toml").read_text(encoding="utf-8")
    config = parse_config(text, path=f"{name}.toml", base_dir=CRONTABS, check_host=False)
    assert len(config.jobs) == translation.jobs > 0


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_translation_is_stable_across_imports(name: str) -> None:
    first = translate_crontab(fixture(name), options=FIXTURES[name])
    again = translate_crontab(fixture(name), options=FIXTURES[name])
    assert first == again


def _job_lines(toml: str) -> list[int]:
    """The crontab line of each job, from the ``# line N:`` comment above it."""
    return [
        int(line.split(":")[0].removeprefix("# line "))
        for line in toml.splitlines()
        if line.startswith("# line ")
    ]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_job_fires_when_croniter_says_its_crontab_line_does(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Cron value of each job fires at the times croniter reads from the crontab line."""
    monkeypatch.setenv("TZ", "Europe/Paris")  # "local", cron's zone, is the system's
    text = fixture(name)
    lines = text.replace("\r\n", "\n").split("\n")
    config, translation = crontab_config(text, options=FIXTURES[name])
    checked = 0
    for job, number in zip(config.jobs, _job_lines(translation.toml), strict=True):
        schedule = job.schedule
        if job.at_start:  # @reboot: no schedule, a run at each start of the daemon
            assert schedule is None and lines[number - 1].split()[0] == "@reboot"
            continue
        assert isinstance(schedule, Cron)
        words = lines[number - 1].split()  # the line as written, read independently
        expr = words[0] if words[0].startswith("@") else " ".join(words[:5])
        zone = ZoneInfo("Europe/Paris" if schedule.tz == "local" else schedule.tz)
        # mid-January to mid-March: no DST change, where cron and croniter differ
        start = datetime(2027, 1, 14, 12, 34, 56, tzinfo=zone)
        it = croniter(expr, start, implement_cron_bug=True)
        want = [it.get_next(datetime) for _ in range(8)]
        want = [t for t in want if t < datetime(2027, 3, 20, tzinfo=zone)]
        got = schedule.expression.next_n(start, len(want))
        assert got == want, (job.name, expr)
        checked += bool(want)
    assert checked >= 2


def test_debian_system_crontab() -> None:
    translation = translate_crontab(fixture("debian-etc"), options=FIXTURES["debian-etc"])
    config = parse_config(translation.toml, check_host=False)
    names = [job.name for job in config.jobs]
    assert names == [
        "cron.hourly",
        "cron.daily",
        "cron.weekly",
        "cron.monthly",
        "sessionclean",
        "certbot",
        "restore-iptables",  # @reboot
    ]
    hourly = config.job("cron.hourly")
    assert hourly.command == ("/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly")
    assert dict(hourly.env)["PATH"].startswith("/usr/local/sbin:")
    # cron runs it in root's HOME, and all the same if that is missing ("-")
    assert hourly.cwd == "-" + str(Path("~root").expanduser())
    assert config.job("sessionclean").cwd == "-" + str(Path("~www-data").expanduser())
    assert "# cron ran this as user www-data" in translation.toml
    assert all(job.user is None for job in config.jobs)  # users=False: the daemon's user
    me = pwd.getpwuid(os.geteuid()).pw_name
    notes = {n.line: n.message for n in translation.notes}
    users = {line for line, message in notes.items() if message.startswith("cron ran this")}
    # a line of another user than this process's is warned about (root's too, if not root)
    assert users == ({25} if me == "root" else {18, 19, 20, 21, 25, 27, 30})
    assert notes[25] == (
        f"cron ran this line as user www-data; tickwork runs it as the daemon's user ({me}):"
        " only a daemon running as root runs each line as its user"
    )
    assert [n.line for n in translation.notes if n.skipped] == [29]
    assert "expected the user field" in notes[29]


def test_a_root_daemon_runs_each_system_line_as_its_user() -> None:
    options = CrontabOptions(system=True, users=True)
    text = "0 3 * * * root /opt/a\n0 4 * * * nobody /opt/b\n"
    translation = translate_crontab(text, options=options)
    assert not translation.notes
    assert "so does tickwork (`user`), the daemon running as root" in translation.toml
    jobs = translation.toml.split("\n[[job]]\n")[1:]
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert ('user = "root"' in jobs[0]) == (me != "root")
    assert 'user = "nobody"\ncwd = "-~nobody"' in jobs[1]
    if os.geteuid() == 0:  # only root may declare a job's user
        config, _ = crontab_config(text, options=options)
        assert [job.user for job in config.jobs] == [None, "nobody"]


def test_user_crontab_notes_name_each_line_and_why() -> None:
    translation = translate_crontab(fixture("user"))
    skipped = {n.line: n.message for n in translation.notes if n.skipped}
    assert sorted(skipped) == [23, 35, 36, 37, 38, 39, 40]
    assert "minute: invalid value `61`" in skipped[35]
    assert "'L' is not cron syntax" in skipped[36]
    assert "unknown schedule '@Daily'" in skipped[37]
    assert "'monday'" in skipped[38] and "three-letter English day name" in skipped[38]
    assert "expected five fields, then the command" in skipped[39]
    assert "never occurs in February" in skipped[40]
    assert "cron accepts this line and never runs it" in skipped[40]
    assert skipped[35].endswith("(cron rejects this line)")
    remarks = {n.line: n.message for n in translation.notes if not n.skipped}
    assert "ends with a backslash" in remarks[22]
    assert "TZ is set in the jobs' environment only" in remarks[32]
    for line in skipped:
        assert f"# NOT IMPORTED, line {line}: " in translation.toml


def test_windows_crontab_crlf_and_missing_final_newline() -> None:
    text = fixture("windows")
    assert "\r\n" in text and not text.endswith("\n")
    config, toml, notes = translate(text)
    assert "\r" not in toml
    assert [job.name for job in config.jobs] == ["nightly", "poll", "new-year"]
    assert config.job("poll").command == ("/bin/sh", "-c", "/usr/local/bin/poll --quiet")
    assert dict(config.job("new-year").env) == {"PATH": "/usr/bin:/bin", "MSG": "saved with CRLF"}
    assert notes[0].startswith("1: 5 lines end with CRLF")
    assert notes[1].startswith("6: no newline at the end of the file")


# -- environment lines ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name", "value"),
    [
        ("A=b", "A", "b"),
        ("A = b", "A", "b"),
        ("A\t=\tb c  ", "A", "b c"),  # an unquoted value loses its trailing blanks
        ('A="b c  "', "A", "b c  "),  # a quoted one keeps them
        ("A='b \"c\"'", "A", 'b "c"'),
        ('A="b"   ', "A", "b"),
        ('"A"=b', "A", "b"),
        ("A=b # c", "A", "b # c"),  # cron has no comments after a value
        ("A=", "A", ""),
        ('A=""', "A", ""),
        ("A=x=y", "A", "x=y"),
        ("   A=b", "A", "b"),
    ],
)
def test_environment_lines(line: str, name: str, value: str) -> None:
    _, env, _ = one_job(f"{line}\n* * * * * run\n")
    assert env[name] == value


def test_a_quote_followed_by_text_is_no_environment_line() -> None:
    translation = translate_crontab('A="b" c\n* * * * * run\n')
    assert translation.jobs == 1
    assert translation.skipped[0].line == 1  # cron reads it as a schedule, and rejects it


def test_environment_applies_to_the_lines_after_it() -> None:
    config, _, _ = translate("A=1\n* * * * * first\nA=2\nB=3\n* * * * * second\n0 * * * * third\n")
    assert dict(config.job("first").env) == {"A": "1"}
    assert dict(config.job("second").env) == {"A": "2", "B": "3"}
    assert dict(config.job("third").env) == {"A": "2", "B": "3"}


def test_shell_runs_the_command_and_home_is_the_working_directory() -> None:
    command, env, _ = one_job("SHELL=/bin/bash\nHOME=/srv\n* * * * * echo $0\n")
    assert command == ("/bin/bash", "-c", "echo $0")
    assert env == {"SHELL": "/bin/bash", "HOME": "/srv"}
    config, _, _ = translate("HOME=/srv\n* * * * * run\n")
    assert config.jobs[0].cwd == "-/srv"
    config, _, _ = translate("* * * * * run\n")
    assert config.jobs[0].cwd == "-" + str(Path.home())  # "~": cron runs it in HOME


def test_cron_tz_is_the_zone_of_the_lines_after_it() -> None:
    config, _, _ = translate(
        "0 9 * * * a\nCRON_TZ=Asia/Tokyo\n0 9 * * * b\nCRON_TZ=UTC\n0 9 * * * c\n"
    )
    zones = [job.schedule.tz for job in config.jobs]  # type: ignore[attr-defined]
    assert zones == ["local", "Asia/Tokyo", "UTC"]
    assert "CRON_TZ" not in dict(config.jobs[1].env)


def test_an_unknown_cron_tz_leaves_out_the_lines_it_governs() -> None:
    translation = translate_crontab("0 9 * * * a\nCRON_TZ=Mars/Base\n0 9 * * * b\n")
    assert translation.jobs == 1
    assert [(n.line, n.skipped) for n in translation.skipped] == [(2, True), (3, True)]
    assert "Mars/Base" in translation.skipped[0].message
    assert "its CRON_TZ (line 2) is not a time zone" in translation.skipped[1].message


def test_tz_goes_to_the_environment_only() -> None:
    config, _, notes = translate("TZ=Asia/Tokyo\n0 9 * * * a\n")
    assert config.jobs[0].schedule.tz == "local"  # type: ignore[attr-defined]
    assert dict(config.jobs[0].env) == {"TZ": "Asia/Tokyo"}
    assert "write CRON_TZ= to schedule in another zone" in notes[0]


def test_mailto_becomes_mail_to_of_the_lines_after_it() -> None:
    # Issue 39: MAILTO was dropped to a comment. As in cron, it applies to the lines below.
    config, toml, _ = translate(
        "* * * * * before\nMAILTO=ops@example.com\n* * * * * a\n"
        'MAILTO="dev@example.com, root"\n* * * * * b\nMAILTO=""\n* * * * * c\n'
    )
    mails = {job.command[-1]: job.mail_to for job in config.jobs}
    assert mails == {
        "before": (),
        "a": ("ops@example.com",),
        "b": ("dev@example.com", "root"),
        "c": (),  # MAILTO="": no mail, as in cron
    }
    assert "MAILTO" not in dict(config.jobs[1].env)
    assert 'mail_to = "ops@example.com"  # the MAILTO above this line' in toml
    # One MAILTO over every line: in [defaults].
    config, toml, _ = translate("MAILTO=root\n* * * * * run\n")
    assert config.jobs[0].mail_to == ("root",)
    assert toml.index('mail_to = "root"') < toml.index("\n[[job]]")
    # What tickwork cannot mail to is said, not imported.
    config, toml, _ = translate('MAILTO="Ops Team <ops@example.com>"\n* * * * * run\n')
    assert config.jobs[0].mail_to == ()
    assert "(line 1): not addresses tickwork can mail; set mail_to by hand" in toml


# -- schedules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nickname", ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
)
def test_nicknames(nickname: str) -> None:
    _, _, schedule = one_job(f"{nickname} run\n")
    assert schedule.expr == nickname


def test_reboot_is_a_run_at_each_start_of_the_daemon() -> None:
    config, toml, notes = translate("@reboot /opt/warm\n@daily run\n")
    assert notes == [
        "1: @reboot: at_start = true, one run each time the daemon starts (cron: each time"
        " the machine boots); start the daemon at boot, and know that a restart of it runs"
        " the line again (a reload does not)"
    ]
    warm, run = config.jobs
    assert (warm.name, warm.schedule, warm.at_start) == ("warm", None, True)
    assert warm.command == ("/bin/sh", "-c", "/opt/warm")
    assert (run.at_start, isinstance(run.schedule, Cron)) == (False, True)
    assert "at_start = true  # @reboot: one run each time the daemon starts" in toml


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ("0 0 ? * *", "not cron syntax"),
        ("0 0 * * 1#2", "not cron syntax"),
        ("0 0 15W * *", "not cron syntax"),
        ("0 0 * * 5L", "not cron syntax"),
        ("0 0 * january *", "three-letter English month name"),
        ("0 mon * * *", "not cron syntax"),
        ("0 24 * * *", "hour: invalid value `24`"),
        ("*/0 * * * *", "minute: invalid value `*/0`"),
        ("5-1 * * * *", "minute: invalid value `5-1`"),
    ],
)
def test_fields_cron_rejects(fields: str, reason: str) -> None:
    translation = translate_crontab(f"{fields} run\n* * * * * ok\n")
    (note,) = translation.skipped
    assert note.line == 1
    assert reason in note.message


def test_six_fields_only_with_seconds() -> None:
    _, _, schedule = one_job("*/10 * * * * * run\n", seconds=True)
    assert schedule.expr == "*/10 * * * * *"
    # without --seconds, cron reads five fields and would run the sixth as the program
    translation = translate_crontab("*/10 * * * * * run\n")
    assert (translation.jobs, [(n.line, n.skipped) for n in translation.notes]) == (0, [(1, True)])
    assert translation.notes[0].message == (
        "the command starts with '*', which looks like a sixth schedule field: cron reads"
        " five; --seconds reads a seconds field first, and a year field has no equivalent;"
        " as written, '*' would run as the program, the shell expanding it to the names of"
        " files"
    )


@pytest.mark.parametrize(
    ("line", "options", "word"),
    [
        ("0 3 * * * 2026 /backup", {}, "the command starts with '2026'"),
        ("0 0 3 * * * 2026 /backup", {"seconds": True}, "seventh schedule field"),
        ("0 3 * * * ? run", {}, "the command starts with '?'"),
        ("0 3 * * * 1-5 run", {}, "the command starts with '1-5'"),
        ("@daily */5 run", {}, "the command starts with '*/5'"),
        ("0 3 * * * * root run", {"system": True}, "the user field is '*'"),
    ],
)
def test_a_schedule_field_too_many_is_refused(
    line: str, options: dict[str, bool], word: str
) -> None:
    translation = translate_crontab(f"{line}\n", options=CrontabOptions(**options))
    assert translation.jobs == 0
    (note,) = translation.notes
    assert note.skipped and word in note.message, note.message


@pytest.mark.parametrize("command", ["date", "7z a x.7z", "./2026", "run 1 2", "[ -x a ] && a"])
def test_a_command_that_only_has_numbers_later_is_imported(command: str) -> None:
    argv, _, _ = one_job(f"0 3 * * * {command}\n")
    assert argv[-1] == command


def test_fields_are_normalised_but_keep_their_meaning() -> None:
    _, _, schedule = one_job("0,30\t8-18/2 *  JAN-jun\tMon-FRI run\n")
    assert schedule.expr == "0,30 8-18/2 * JAN-jun Mon-FRI"


def test_next_agrees_with_the_crontab_line() -> None:
    """`tickwork next` on the imported expression prints croniter's times for the line."""
    _, _, schedule = one_job("CRON_TZ=UTC\n15 3 * jan,jul mon-fri run\n")
    out = subprocess.run(
        [
            *_tickwork(),
            "next",
            schedule.expr,
            "--tz",
            schedule.tz,
            "-n",
            "4",
            "--after",
            "2027-01-01T00:00Z",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    it = croniter("15 3 * jan,jul mon-fri", datetime(2027, 1, 1, tzinfo=ZoneInfo("UTC")))
    for _ in range(4):
        assert it.get_next(datetime).strftime("%Y-%m-%dT%H:%M:%S+00:00") in out


def _tickwork() -> list[str]:
    import sys

    return [sys.executable, "-m", "tickwork"]


# -- commands: %, trailing blanks, backslashes --------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "stdin"),
    [
        ("date +\\%Y", "date +%Y", None),
        ("cat%a%b", "cat", "a\nb"),
        ("cat%", "cat", ""),
        ("cat%a%", "cat", "a\n"),
        ("cat%50\\% off%", "cat", "50% off\n"),
        ("cat %%", "cat ", "\n"),
        ("echo \\\\%x", "echo \\\\", "x"),  # \\ then %: the % is not escaped
        ("cat%a\\b", "cat", "a\\b"),  # a backslash before anything but % stays
        ("cat%a\\", "cat", "a\\"),
    ],
)
def test_percent_rule(text: str, command: str, stdin: str | None) -> None:
    argv, _, _ = one_job(f"* * * * * {text}\n")
    if stdin is None:
        assert argv == ("/bin/sh", "-c", command)
    else:
        assert argv[-1] == command.rstrip(" \t")
        assert argv[4] == stdin


def test_percent_input_reaches_the_command_byte_for_byte(tmp_path: Path) -> None:
    argv, _, _ = one_job("SHELL=/bin/bash\n* * * * * cat > out; echo $0 > shell%Hi,%%50\\% off\n")
    subprocess.run(argv, cwd=tmp_path, check=True, timeout=30)
    assert (tmp_path / "out").read_bytes() == b"Hi,\n\n50% off"
    assert (tmp_path / "shell").read_text() == "/bin/bash\n"  # run by the crontab's SHELL


def test_percent_keeps_the_exit_status_of_the_command() -> None:
    argv, _, _ = one_job("* * * * * exit 3%input\n")
    assert subprocess.run(argv, timeout=30).returncode == 3


def test_trailing_blanks_are_dropped_unless_escaped() -> None:
    argv, _, _ = one_job("* * * * * run --flag   \n")
    assert argv[-1] == "run --flag"
    argv, _, _ = one_job("* * * * * echo a\\  \n")
    assert argv[-1] == "echo a\\ "  # the backslash makes the space a word


def test_a_backslash_at_the_end_continues_nothing() -> None:
    config, _, notes = translate("* * * * * run --a \\\n--b\n0 * * * * other\n")
    assert config.jobs[0].command == ("/bin/sh", "-c", "run --a \\")
    assert [job.name for job in config.jobs] == ["run", "other"]
    assert notes[0].startswith("1: the line ends with a backslash")
    assert notes[1].startswith("2: expected five fields")


def test_comments_and_blank_lines() -> None:
    config, _, notes = translate("# a\n\n   # b\n\t\n* * * * * run # not a comment\n")
    assert config.jobs[0].command == ("/bin/sh", "-c", "run # not a comment")
    assert notes == []


def test_system_format_needs_the_user_field() -> None:
    config, toml, _ = translate("@daily backup /opt/backup\n", system=True, users=False)
    assert config.jobs[0].command == ("/bin/sh", "-c", "/opt/backup")
    assert "# cron ran this as user backup" in toml
    assert config.jobs[0].cwd == "-" + str(Path("~backup").expanduser())


# -- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("/usr/local/bin/backup.sh --full > /dev/null 2>&1", "backup"),
        ("cd /srv && ./manage.py clearsessions", "manage"),
        ("python3 /srv/app/manage.py clearsessions", "manage"),
        ("python3 -m app.tasks nightly", "app.tasks"),
        ("FOO=1 nice -n 10 ionice -c3 /opt/x.sh", "x"),
        ("flock -n /tmp/l /usr/bin/sync-files", "sync-files"),
        ("timeout 5m /usr/bin/curl -s http://x", "curl"),
        ("sudo -u www-data php artisan schedule:run", "artisan"),
        (
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
            "cron.daily",
        ),
        ('bash -c "cd /x && ./go.sh"', "go"),
        ("date >> /tmp/log", "date"),
        ("echo 'unclosed", "echo"),
        ("'/opt/my tool/run me'", "run-me"),
        ("--weird", "weird"),
    ],
)
def test_names_come_from_the_command(command: str, name: str) -> None:
    config, _, _ = translate(f"* * * * * {command}\n")
    assert config.jobs[0].name == name


def test_names_are_unique_and_appending_a_line_renames_nothing() -> None:
    text = "@daily /opt/backup\n@hourly /opt/backup\n@hourly /opt/backup\n"
    config, _, _ = translate(text)
    names = [job.name for job in config.jobs]
    assert names[0] == "backup"
    assert names[1].startswith("backup-") and len(names[1]) == len("backup-") + 6
    assert names[2] == names[1] + "-2"  # the same line twice: cron runs both
    more, _, _ = translate(text + "0 * * * * /opt/backup --check\n")
    assert [job.name for job in more.jobs][:3] == names


# -- loading and failing ----------------------------------------------------------------


def test_load_crontab_refuses_lines_it_cannot_import(tmp_path: Path) -> None:
    path = tmp_path / "tab"
    path.write_text("* * * * * ok\n61 * * * * bad\n0 0 * * * 2026 year\n")
    with pytest.raises(ConfigError) as caught:
        load_crontab(path)
    shown = [str(issue) for issue in caught.value.errors]
    assert shown[0].startswith(f"{path}:2: minute: invalid value `61`")
    assert shown[1].startswith(f"{path}:3: the command starts with '2026'")
    assert "2 lines cannot be imported" in shown[2] and "--keep-going" in shown[2]
    warned: list[str] = []
    config = load_crontab(path, CrontabOptions(keep_going=True), warn=warned.append)
    assert [job.name for job in config.jobs] == ["ok"]
    assert config.path == str(path)
    assert [w.split(":")[1] for w in warned] == ["2", "3"]


def test_nothing_to_import_is_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        crontab_config("# only a comment\nA=b\n0 0 31 2 * x\n")
    shown = [str(issue) for issue in caught.value.errors]
    assert shown[0].startswith("<stdin>:3: day-of-month")
    assert shown[-1] == "<stdin>: no job to import from this crontab"


def test_load_crontab_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the crontab"):
        load_crontab(tmp_path / "missing")


@pytest.mark.parametrize(
    "text", ["plain", 'say "hi"', "it's", "back\\slash", 'it\'s "both"', "tab\tnew\nline\x7f"]
)
def test_toml_strings_read_back(text: str) -> None:
    import tomllib

    assert tomllib.loads(f"k = {toml_string(text)}")["k"] == text
