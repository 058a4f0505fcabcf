from __future__ import annotations

import re
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tickwork import At, Cron, Every, Once
from tickwork._core.errors import ConfigError, ConfigIssue
from tickwork._daemon.jobsfile.config import JOB_KEYS, load_config, parse_config

ROOT = Path(__file__).resolve().parent.parent


def problems(text: str, *, path: str = "jobs.toml") -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_config(textwrap.dedent(text), path=path)
    assert str(exc.value) == "\n".join(str(e) for e in exc.value.errors)
    return [str(e) for e in exc.value.errors]


def test_full_job_and_defaults(tmp_path: Path) -> None:
    text = """\
        [defaults]
        timeout = "5m"
        retries = 2
        env = { SHARED = "1", OVERRIDE = "default" }
        cwd = "work"

        [[job]]
        name = "rotate"
        command = ["logrotate", "/etc/logrotate.conf"]
        every = "1h30m"
        fixed_delay = true
        jitter = "10s"
        overlap = "queue"
        missed = "once"
        grace = "2m"
        kill_grace = "3s"
        retry_backoff = "2s"
        retry_backoff_max = "1m"
        env = { OVERRIDE = "job" }
        enabled = false

        [[job]]
        name = "report"
        shell = true
        command = "echo hi | tr a-z A-Z"
        cron = "0 7 * * 1-5"
        timezone = "Europe/Berlin"
        timeout = 0

        [[job]]
        name = "once"
        call = "pkg.mod:func"
        args = [1, "two", [3]]
        kwargs = { flag = true }
        at = 2026-12-02T17:00:00+01:00

        [[job]]
        name = "soon"
        command = ["true"]
        in = "250ms"
        """
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(text))
    (tmp_path / "work").mkdir()  # a working directory must exist
    config = load_config(path)
    rotate, report, once, soon = config.jobs
    assert rotate.schedule == Every(5400.0, fixed_delay=True, jitter=10.0)
    assert rotate.command == ("logrotate", "/etc/logrotate.conf")
    assert (rotate.overlap, rotate.missed, rotate.grace) == ("queue", "once", 120.0)
    assert (rotate.timeout, rotate.kill_grace, rotate.retries) == (300.0, 3.0, 2)
    assert (rotate.retry_backoff, rotate.retry_backoff_max) == (2.0, 60.0)
    assert dict(rotate.env) == {"SHARED": "1", "OVERRIDE": "job"}
    assert rotate.cwd == str(tmp_path / "work")
    assert rotate.enabled is False and rotate.jitter == 10.0 and rotate.line == 7
    assert report.schedule == Cron("0 7 * * 1-5", tz="Europe/Berlin")
    assert (report.command, report.shell, report.timeout) == ("echo hi | tr a-z A-Z", True, None)
    assert once.schedule == At(datetime(2026, 12, 2, 16, tzinfo=UTC).timestamp())
    assert (once.call, once.args, dict(once.kwargs)) == (
        "pkg.mod:func",
        (1, "two", [3]),
        {"flag": True},
    )
    assert once.timeout is None and once.cwd is None and dict(once.env) == {}
    assert soon.schedule == Once(0.25) and soon.retries == 2 and soon.enabled
    assert config.job("soon") is soon
    with pytest.raises(KeyError):
        config.job("nope")


def test_first_and_until_shape_the_schedule() -> None:
    text = (
        '[[job]]\nname = "a"\ncommand = ["x"]\nevery = "1m"\nfirst = "5s"\n'
        "until = 2027-01-01T00:00:00Z\n\n"
        '[[job]]\nname = "b"\ncommand = ["x"]\ncron = "0 3 * * *"\n'
        'until = "2027-01-01T01:00:00+01:00"\n'
    )
    a, b = parse_config(text).jobs
    end = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    assert a.schedule == Every(60.0, first=5.0, until=end)
    assert b.schedule == Cron("0 3 * * *", until=end)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[job]]\nname = "a"\ncommand = ["x"]\nin = "1m"\nuntil = 2027-01-01T00:00:00Z\n',
            ['jobs.toml:5: job "a": until: applies only to every and cron schedules'],
        ),
        (
            '[[job]]\nname = "a"\ncommand = ["x"]\ncron = "@daily"\nfirst = "5s"\n',
            ['jobs.toml:5: job "a": first: applies only to every schedules'],
        ),
        (
            '[[job]]\nname = "a"\ncommand = ["x"]\nevery = "1m"\nuntil = "2027-01-01T00:00"\n',
            [
                'jobs.toml:5: job "a": until: needs a UTC offset (2026-12-02T17:00:00Z or'
                " +01:00), got 2027-01-01T00:00:00"
            ],
        ),
    ],
)
def test_first_and_until_mistakes_are_pinned(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


def test_defaults_when_nothing_is_set() -> None:
    [job] = parse_config('[[job]]\nname = "a"\ncommand = ["true"]\nevery = 30\n').jobs
    assert job.schedule == Every(30.0)
    assert (job.overlap, job.missed, job.grace, job.timeout) == ("skip", "skip", 60.0, None)
    assert (job.kill_grace, job.retries, job.retry_backoff, job.retry_backoff_max) == (
        10.0,
        0,
        1.0,
        300.0,
    )
    assert (job.shell, job.cwd, job.enabled, job.call) == (False, None, True, None)


def test_configs_compare_by_value_not_by_line() -> None:
    a = parse_config('[[job]]\nname = "a"\ncommand = ["true"]\nevery = "5s"\n').jobs[0]
    b = parse_config('\n\n[[job]]\nname = "a"\nevery = "5s"\ncommand = ["true"]\n').jobs[0]
    c = parse_config('[[job]]\nname = "a"\ncommand = ["true"]\nevery = "6s"\n').jobs[0]
    assert a == b and a.line != b.line and hash(a) == hash(b)
    assert a != c
    with pytest.raises(TypeError):
        a.env["X"] = "1"  # type: ignore[index]


def test_every_error_in_one_pass_with_lines_and_keys() -> None:
    text = """\
        [defaults]
        timeout = "soon"

        [[job]]
        name = "rotate"
        command = ["sh", "-c", "echo"]
        every = "30 sec"

        [[job]]
        name = "rotate"
        command = "echo x"
        cron = "0 0 30 2 *"
        evry = 3

        [[job]]
        call = "pkg.mod:f"
        in = "5s"
        kill_grace = "3s"

        [[job]]
        name = "env"
        command = ["true"]
        at = 2026-12-02T17:00:00
        retries = -1
          [job.env]
          PORT = 8080
        """
    assert problems(text) == [
        "jobs.toml:2: defaults: timeout: duration must look like '30s', '5m', '1h30m' or "
        "'250ms', got 'soon'",
        "jobs.toml:7: job \"rotate\": every: duration must look like '30s', '5m', '1h30m' or "
        "'250ms', got '30 sec'",
        'jobs.toml:10: job "rotate": name: duplicate job name (first defined on line 5)',
        'jobs.toml:11: job "rotate": command: a string runs only with shell = true; give an '
        'argv array such as ["sh", "-c", "..."] or set shell = true, got \'echo x\'',
        'jobs.toml:12: job "rotate": cron: day-of-month: 30 never occurs in February in '
        "`0 0 30 2 *`",
        'jobs.toml:13: job "rotate": evry: unknown key (did you mean "every"?)',
        "jobs.toml:15: job #3: name: missing: every job needs a name",
        "jobs.toml:18: job #3: kill_grace: applies to a call only with isolation = "
        '"process" (a thread cannot be killed: at its timeout the run is recorded timeout '
        "and the thread goes on)",
        'jobs.toml:23: job "env": at: needs a UTC offset (2026-12-02T17:00:00Z or +01:00), '
        "got 2026-12-02T17:00:00",
        'jobs.toml:24: job "env": retries: must be an integer from 0 to 100, got -1',
        'jobs.toml:26: job "env": env.PORT: must be a string (quote it: "8080"), got 8080',
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[job]]\nname = "a"\ncommand = ["true"]\n',
            ['jobs.toml:1: job "a": missing a schedule: set every, cron, at or in'],
        ),
        (
            '[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1s"\ncron = "* * * * *"\n',
            ['jobs.toml:5: job "a": cron: set exactly one schedule, got every, cron'],
        ),
        (
            '[[job]]\nname = "a"\nevery = "1s"\n',
            [
                'jobs.toml:1: job "a": missing: set command (a program to run) or call '
                "(a Python callable)"
            ],
        ),
        (
            '[[job]]\nname = "a"\nevery = "1s"\ncommand = ["x"]\ncall = "m:f"\n',
            ['jobs.toml:5: job "a": command: set exactly one of command and call'],
        ),
        (
            '[[job]]\nname = "a"\nevery = "0s"\ncommand = []\nshell = "yes"\n',
            [
                "jobs.toml:3: job \"a\": every: must be a duration > 0, got '0s'",
                "jobs.toml:5: job \"a\": shell: must be true or false, got 'yes'",
            ],
        ),
        (
            '[[job]]\nname = "a"\nevery = "1s"\ncommand = ["x", 1]\n',
            [
                'jobs.toml:4: job "a": command: must be a non-empty array of strings (argv), '
                "got ['x', 1]"
            ],
        ),
        (
            '[[job]]\nname = "a b"\nin = "1s"\ncall = "not a path"\n',
            [
                "jobs.toml:2: job #1: name: must be 1-100 letters, digits or '_.@:-', "
                "starting with a letter or digit, got 'a b'",
                'jobs.toml:4: job #1: call: must be an import path "package.module:function", '
                "got 'not a path'",
            ],
        ),
        (
            '[[job]]\nname = "a"\nat = "tomorrow"\ncommand = ["x"]\nfixed_delay = true\n'
            'overlap = "never"\n',
            [
                'jobs.toml:3: job "a": at: must be an RFC 3339 date-time with an offset such '
                "as '2026-12-02T17:00:00Z', got 'tomorrow'",
                'jobs.toml:5: job "a": fixed_delay: applies only to every schedules',
                "jobs.toml:6: job \"a\": overlap: must be one of 'skip', 'queue', 'allow', "
                "'replace', got 'never'",
            ],
        ),
        (
            '[[jobs]]\nname = "a"\n',
            [
                'jobs.toml:1: jobs: unknown key (did you mean "job"?)',
                "jobs.toml:1: job: no jobs: add at least one [[job]] table",
            ],
        ),
        (
            '[[job]]\nname = "a"\ncommand = ["x"]\nevery = "1m"\n\n[job.env]\nA = "1"\n'
            '"B=C" = "2"\n',
            ["jobs.toml:8: job \"a\": env.B=C: is not a valid variable name: 'B=C'"],
        ),
        (
            '[[job]]\nname = "a"\ncommand = ["x"]\ncron = "* * * * *"\ntimezone = "Mars/Base"\n',
            [
                "jobs.toml:5: job \"a\": timezone: unknown time zone 'Mars/Base'; expected an "
                "IANA name such as 'Europe/Berlin', 'UTC' or 'local'"
            ],
        ),
    ],
)
def test_pinned_messages(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


def test_locator_is_not_fooled_by_strings_arrays_and_comments() -> None:
    text = '''\
        # [[job]] in a comment
        [[job]]
        name = "a"
        command = [
          "sh",  # every = "not a key"
          "-c",
          """
        [[job]]
        retries = 7
        """,
        ]
        'every' = "1s"
        "retries" = "x"
        '''
    assert problems(text) == [
        "jobs.toml:13: job \"a\": retries: must be an integer from 0 to 100, got 'x'"
    ]


def test_syntax_error_has_the_line() -> None:
    # tomllib's wording may change between Python versions; the place must not.
    [message] = problems('[[job]]\nname = "a"\nevery = 30s\n')
    assert re.fullmatch(r"jobs\.toml:3: invalid TOML: \w.* \(column \d+\)", message), message
    assert problems('[[job]]\nname = "a"\nname = "b"\n')[0].startswith("jobs.toml:3: invalid TOML")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path / "missing.toml")
    [issue] = exc.value.errors
    assert issue == ConfigIssue(
        str(tmp_path / "missing.toml"), 0, "", "", "cannot read the file: No such file or directory"
    )
    assert (
        str(issue)
        == f"{tmp_path / 'missing.toml'}: cannot read the file: No such file or directory"
    )


def test_every_documented_key_is_in_the_reference() -> None:
    reference = (ROOT / "docs" / "daemon.md").read_text()
    for key in JOB_KEYS:
        assert f"`{key}`" in reference, key


def test_the_example_is_valid() -> None:
    config = load_config(ROOT / "examples" / "housekeeping.toml")
    names = [job.name for job in config.jobs]
    assert names == [
        "rotate-logs",
        "probe-api",
        "clean-tmp",
        "berlin-report",
        "weekday-digest",
        "slow-sync",
    ]
    assert config.job("weekday-digest").schedule == Cron("0 7 * * 1-5", tz="Europe/Berlin")


def test_output_is_log_by_default_and_may_be_set_in_defaults_or_the_job() -> None:
    config = parse_config(
        textwrap.dedent(
            """
            [defaults]
            output = "tail"

            [[job]]
            name = "a"
            every = "1m"
            command = ["true"]

            [[job]]
            name = "b"
            every = "1m"
            command = ["true"]
            output = "discard"
            """
        )
    )
    assert [j.output for j in config.jobs] == ["tail", "discard"]
    plain = parse_config('[[job]]\nname = "c"\nevery = "1m"\ncommand = ["true"]\n')
    assert plain.jobs[0].output == "log"
    with pytest.raises(ConfigError) as caught:
        parse_config('[[job]]\nname = "d"\nevery = "1m"\ncommand = ["true"]\noutput = "loud"\n')
    assert str(caught.value.errors[0]) == (
        "<string>:5: job \"d\": output: must be one of 'log', 'tail', 'discard', got 'loud'"
    )


def test_a_working_dir_with_a_dash_may_be_missing(tmp_path: Path) -> None:
    """``-PATH`` (systemd's ``WorkingDirectory=-``): not checked; the runner falls back to /."""
    text = """\
        [[job]]
        name = "a"
        command = ["true"]
        every = "1m"
        working_dir = "-/does/not/exist"

        [[job]]
        name = "b"
        command = ["true"]
        every = "1m"
        cwd = "-sub"
        """
    config = parse_config(textwrap.dedent(text), base_dir=tmp_path)
    assert [job.cwd for job in config.jobs] == ["-/does/not/exist", f"-{tmp_path / 'sub'}"]
    assert problems('[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1m"\ncwd = "-"\n') == [
        "jobs.toml:5: job \"a\": cwd: must be a directory path, got '-'"
    ]
