"""One way to name the jobs file (issue 26, point 9), through the real command line.

Every verb that takes a jobs file takes it as its first operand or with ``-f/--file``,
anywhere among its options; both at once is refused, and a file given after the job's
name is pointed out. Each case runs ``python -m tickwork`` in a process of its own.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from tests import forked
from tickwork.__main__ import build_parser
from tickwork._cli.options import take_file

#: The verbs that take a jobs file.
VERBS = (
    "run",
    "validate",
    "jobs",
    "history",
    "pause",
    "resume",
    "trigger",
    "backfill",
    "skip-next",
    "enqueue",
)


def tickwork(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, forked warm (tests/forked.py)."""
    return forked.tickwork(*argv, timeout=120, cwd=cwd)


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text('[[job]]\nname = "tick"\nevery = "1h"\ncommand = ["true"]\n')
    return path


@pytest.fixture
def state(tmp_path: Path, jobs: Path) -> str:
    """A state that ``tickwork run -f`` made: the job is declared in it."""
    path = str(tmp_path / "state.sqlite3")
    done = tickwork("run", "-f", str(jobs), "--state", path, "--for", "0.5s")
    assert done.returncode == 0, done.stderr
    return path


def test_run_validate_and_jobs_take_the_file_either_way(jobs: Path, state: str) -> None:
    for form in ([str(jobs)], ["-f", str(jobs)], ["--file", str(jobs)]):
        done = tickwork("validate", *form)
        assert (done.returncode, done.stdout) == (0, "ok: 1 job\n"), done.stderr
        done = tickwork("jobs", *form, "--state", state, "--json")
        assert done.returncode == 0, done.stderr
        assert [row["job"] for row in json.loads(done.stdout)] == ["tick"]
    # The operand may come after the options too.
    done = tickwork("jobs", "--state", state, "--json", str(jobs))
    assert done.returncode == 0 and json.loads(done.stdout)[0]["job"] == "tick"


def test_the_control_verbs_take_the_file_either_way(jobs: Path, state: str) -> None:
    done = tickwork("pause", str(jobs), "tick", "--state", state, "--note", "one")
    assert (done.returncode, done.stdout) == (0, "paused tick\n"), done.stderr
    done = tickwork("resume", "tick", "-f", str(jobs), "--state", state)
    assert (done.returncode, done.stdout) == (0, "resumed tick\n"), done.stderr
    # The file first, the name after an option: still FILE then NAME.
    done = tickwork("pause", str(jobs), "--state", state, "--note", "two", "tick")
    assert (done.returncode, done.stdout) == (0, "paused tick\n"), done.stderr
    done = tickwork("resume", "--file", str(jobs), "tick", "--state", state)
    assert done.returncode == 0, done.stderr
    done = tickwork("trigger", str(jobs), "tick", "--state", state)
    assert done.returncode == 0 and done.stdout.startswith("triggered tick"), done.stderr
    done = tickwork("skip-next", str(jobs), "tick", "--state", state)
    assert done.returncode == 0 and "skipped the run of tick" in done.stdout, done.stderr
    done = tickwork("backfill", str(jobs), "tick", "--state", state, "--from", "2h", "--to", "now")
    assert done.returncode == 0 and "tick" in done.stdout, done.stderr
    # A job that is not in the file named as FILE is refused as with -f.
    done = tickwork("pause", str(jobs), "tock", "--state", state)
    assert done.returncode == 1 and f"no job 'tock' in {jobs}" in done.stderr


def test_history_takes_the_file_and_the_name_either_way(jobs: Path, state: str) -> None:
    def lines(*argv: str) -> list[str]:
        done = tickwork("history", *argv)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    tickwork("trigger", str(jobs), "tick", "--state", state)  # something to list
    every_way = [
        lines(str(jobs), "tick", "--state", state),
        lines(str(jobs), "--state", state, "tick"),
        lines("tick", "-f", str(jobs), "--state", state),
        lines("--state", state, "tick"),  # no file: the lone operand is the name
        lines(str(jobs), "--state", state),  # an existing .toml file: the file
    ]
    assert every_way[0] and all(way == every_way[0] for way in every_way)


@pytest.mark.parametrize("verb", VERBS)
def test_the_file_both_ways_is_refused(verb: str, jobs: Path, tmp_path: Path) -> None:
    name = [] if verb in ("run", "validate", "jobs") else ["tick"]
    state = ["--state", str(tmp_path / "s.sqlite3")] if verb != "validate" else []
    window = ["--from", "2h", "--to", "now"] if verb == "backfill" else []
    done = tickwork(verb, str(jobs), *name, "-f", str(jobs), *state, *window)
    assert done.returncode == 2
    assert done.stderr == (
        f"tickwork {verb}: the jobs file is given twice, as {str(jobs)!r} and with -f"
        f" {str(jobs)!r}: give it once, as FILE or with -f\n"
    )
    assert not (tmp_path / "s.sqlite3").exists()  # refused before anything was opened


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_says_both_forms_in_its_help(verb: str) -> None:
    done = tickwork(verb, "--help")
    assert done.returncode == 0
    assert "[FILE]" in done.stdout and "-f FILE, --file FILE" in done.stdout


def test_enqueue_takes_the_file_either_way_and_the_function_after_it(
    jobs: Path, state: str
) -> None:
    first = tickwork("enqueue", str(jobs), "tests.durable_jobs:record", "--state", state)
    second = tickwork("enqueue", "--state", state, "-f", str(jobs), "tests.durable_jobs:record")
    assert (first.returncode, second.returncode) == (0, 0), (first.stderr, second.stderr)
    assert first.stdout.startswith("~") and second.stdout.startswith("~")
    assert first.stdout != second.stdout


def test_a_file_after_the_name_is_pointed_out(jobs: Path, state: str) -> None:
    done = tickwork("pause", "tick", str(jobs), "--state", state)
    assert done.returncode == 2
    assert "the jobs file comes first (tickwork pause FILE NAME)" in done.stderr
    done = tickwork("history", "tick", str(jobs), "--state", state)
    assert done.returncode == 2 and "the jobs file comes first" in done.stderr


def test_run_and_validate_need_the_file(tmp_path: Path) -> None:
    for verb in ("run", "validate"):
        done = tickwork(verb, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr == f"tickwork {verb}: give the jobs file (FILE or -f FILE)\n"


def test_take_file_sorts_the_operands_out() -> None:
    """In-process: which operand is the file and which the name, per verb."""

    def taken(*argv: str) -> tuple[str | None, str | None, int | None]:
        args = build_parser().parse_args(list(argv))
        status = take_file(args, argv[0], io.StringIO())
        return args.file, getattr(args, "name", None), status

    assert taken("jobs", "a.toml") == ("a.toml", None, None)
    assert taken("jobs", "-f", "a.toml") == ("a.toml", None, None)
    assert taken("pause", "tick") == (None, "tick", None)
    assert taken("pause", "a.toml", "tick") == ("a.toml", "tick", None)
    assert taken("pause", "a.toml", "--note", "x", "tick") == ("a.toml", "tick", None)
    assert taken("pause", "tick", "-f", "a.toml") == ("a.toml", "tick", None)
    assert taken("history") == (None, None, None)
    assert taken("history", "a.toml") == ("a.toml", None, None)
    assert taken("history", "tick", "-f", "a.toml") == ("a.toml", "tick", None)
    assert taken("history", "--state", "s", "tick") == (None, "tick", None)
    assert taken("history", "a.toml", "--state", "s", "tick") == ("a.toml", "tick", None)
    assert taken("history", "a.toml", "tick", "-f", "b.toml")[2] == 2
    with pytest.raises(SystemExit):  # one operand too many is argparse's usage error
        build_parser().parse_args(["jobs", "a.toml", "b.toml"])
