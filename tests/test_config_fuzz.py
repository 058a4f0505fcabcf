"""Bad jobs files never crash the validator: a `ConfigError` with ``file:line``, or a config.

Hypothesis mutates valid jobs files (every key given a value of the wrong type, huge
numbers, odd unicode, deep nesting, tables removed or added, text cut or spliced) and
reads each as ``tickwork validate`` and ``tickwork run`` do before they touch a store:
`parse_config`, then `spec_for` of each job. Either the file is valid, or every problem
is a `ConfigIssue` whose line is in the file. Two subprocess checks hold the CLI to it:
exit status 2 and no traceback.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork._core.errors import ConfigError
from tickwork._daemon.declare import spec_for
from tickwork._daemon.jobsfile.config import parse_config

#: Valid jobs files, as the data TOML reads them into: every kind of table and key.
BASES: list[dict[str, Any]] = [
    {
        "max_running": 4,
        "defaults": {"timeout": "5m", "retries": 1, "env": {"A": "1"}, "jitter": "1s"},
        "pool": {"db": {"limit": 2}},
        "calendar": {"work": {"weekdays": ["sat", "sun"], "dates": ["2026-12-24"]}},
        "job": [
            {
                "name": "rotate",
                "command": ["logrotate", "/etc/logrotate.conf"],
                "every": "1h",
                "fixed_delay": True,
                "first": "10s",
                "until": datetime(2030, 1, 1, tzinfo=UTC),
                "pool": "db",
                "env": {"B": "2"},
                "on_failure": {"command": ["alert"], "after": 2, "timeout": "5s"},
                "alert_if_late": "5m",
            },
            {
                "name": "report",
                "shell": True,
                "command": "echo hi",
                "cron": "H 7 * * 1-5",
                "timezone": "Europe/Berlin",
                "calendar": "work",
                "shift": "next",
                "stable_jitter": True,
                "keep_ok": 10,
                "on_success": {"webhook": "https://example.com/ok"},
            },
            {
                "name": "once",
                "call": "pkg.mod:func",
                "args": [1, "two", [3.5]],
                "kwargs": {"flag": True},
                "isolation": "process",
                "at": datetime(2026, 12, 2, 17, 0, tzinfo=UTC),
            },
            {
                "name": "after-report",
                "command": ["true"],
                "after": ["report", {"job": "rotate", "on": "any"}],
            },
        ],
    },
    {"job": [{"name": "a", "command": ["true"], "in": "0s", "overlap": "replace"}]},
]

# -- writing data as TOML ----------------------------------------------------------------


def toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_str(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_str(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def toml_table(path: list[str], table: dict[str, Any], out: list[str]) -> None:
    """``table`` with headers for its sub-tables, as a person writes a jobs file."""
    for key, value in table.items():
        if not isinstance(value, dict) and not _tables(value):
            out.append(f"{toml_str(key)} = {toml_value(value)}")
    for key, value in table.items():
        here = [*path, toml_str(key)]
        if isinstance(value, dict):
            out.append(f"[{'.'.join(here)}]")
            toml_table(here, value, out)
        elif _tables(value):
            for item in value:
                out.append(f"[[{'.'.join(here)}]]")
                toml_table(here, item, out)


def to_toml(doc: dict[str, Any]) -> str:
    out: list[str] = []
    toml_table([], doc, out)
    return "\n".join(out) + "\n"


# -- mutations ---------------------------------------------------------------------------

ODD_TEXT = st.text(
    st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S", "Z", "Cc", "Cf")),
    max_size=12,
)
SCALARS = st.one_of(
    ODD_TEXT,
    st.sampled_from(["", "0", "1s", "-1s", "* * * * *", "infinity", "db", "report", "nobody"]),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 10**18, 2**63 - 1]),
    st.floats(),
    st.booleans(),
    st.datetimes(timezones=st.just(UTC)) | st.datetimes(),
    st.dates(),
    st.times(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT, inner, max_size=3),
    max_leaves=6,
)
KEYS = st.sampled_from(
    [
        *("name", "command", "shell", "call", "args", "kwargs", "isolation", "every", "cron"),
        *("at", "in", "after", "pool", "calendar", "shift", "seed", "stable_jitter", "jitter"),
        *("timezone", "timeout", "retries", "env", "env_file", "working_dir", "cwd", "user"),
        *("group", "umask", "limit_memory", "limit_cpu", "limit_files", "on_failure"),
        *("on_success", "keep_ok", "keep_failed", "alert_if_late", "alert_if_missed"),
        *("overlap", "missed", "grace", "output", "output_limit", "first", "until"),
        *("fixed_delay", "enabled", "limit", "weekdays", "holidays", "dates", "at_start"),
        *("job", "defaults", "pool", "calendar", "max_running", "x"),
    ]
)


def tables(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every table in ``doc``."""
    found = [path] if isinstance(doc, dict) else []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        found += tables(value, (*path, key))
    return found


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def mutated_docs(draw: st.DrawFn) -> dict[str, Any]:
    """A base file with a few keys set to anything, removed, or added."""
    doc: dict[str, Any] = to_data(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        table = at(doc, draw(st.sampled_from(tables(doc))))
        action = draw(st.sampled_from(["set", "set", "drop", "add"]))
        if action == "drop" and table:
            del table[draw(st.sampled_from(sorted(table)))]
        elif action == "set" and table:
            table[draw(st.sampled_from(sorted(table)))] = draw(VALUES)
        else:
            table[draw(KEYS)] = draw(VALUES)
    return doc


def to_data(doc: Any) -> Any:
    """A deep copy of plain data (datetimes are immutable)."""
    if isinstance(doc, dict):
        return {k: to_data(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [to_data(v) for v in doc]
    return doc


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    """A valid file's text, nested deep, cut, or spliced with odd text at some line."""
    lines = to_toml(draw(st.sampled_from(BASES))).split("\n")
    where = draw(st.integers(0, len(lines)))
    kind = draw(st.sampled_from(["nest", "nest-inline", "cut", "splice"]))
    if kind == "nest":
        depth = draw(st.sampled_from([1, 50, 200, 500, 2000]))
        key = draw(st.sampled_from(["x", "name", "command", "args"]))
        lines.insert(where, f"{key} = {'[' * depth}1{']' * depth}")
    elif kind == "nest-inline":
        depth = draw(st.sampled_from([1, 50, 200, 500, 2000]))
        lines.insert(where, "kwargs = " + "{a = " * depth + "1" + "}" * depth)
    elif kind == "cut":
        text = "\n".join(lines)
        return text[: draw(st.integers(0, len(text)))]
    else:
        lines.insert(where, draw(ODD_TEXT | st.sampled_from(['"', "[[", "[job", "a.b.c = 1"])))
    return "\n".join(lines)


def read_as_the_cli_does(text: str, base_dir: Path) -> None:
    """Validate ``text``; every problem names a line of it. A valid file makes its specs."""
    try:
        config = parse_config(text, path="jobs.toml", base_dir=base_dir)
    except ConfigError as exc:
        errors = exc.errors
    else:
        for job in config.jobs:
            spec_for(job, namespace="ns", now=1.8e9)
        return
    assert errors
    last = max(1, text.count("\n") + 1)
    for issue in errors:
        assert 1 <= issue.line <= last, issue
        assert re.match(r"jobs\.toml:\d+: \S", str(issue)), str(issue)


FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(doc=mutated_docs())
def test_mutated_files_are_valid_or_say_where_they_are_wrong(doc: dict[str, Any]) -> None:
    read_as_the_cli_does(to_toml(doc), Path("/nonexistent-base"))


@FUZZ
@given(text=mutated_texts())
def test_mangled_text_is_valid_or_says_where_it_is_wrong(text: str) -> None:
    read_as_the_cli_does(text, Path("/nonexistent-base"))


def test_the_bases_are_valid() -> None:
    for doc in BASES:
        parse_config(to_toml(doc), path="jobs.toml")


JOB = '[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1m"\n'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            f"{JOB}args = {'[' * 500}{']' * 500}\n",
            5,
            "invalid TOML: arrays or inline tables nested too deeply to read",
        ),
        (
            JOB.replace('name = "a"', "name = []"),
            2,
            "job #1: name: must be 1-100 letters, digits or '_.@:-', starting with a letter"
            " or digit, got []",
        ),
    ],
)
def test_the_crashes_of_issue_39_are_config_errors(text: str, line: int, message: str) -> None:
    """The two files that showed a traceback in issue 39: a `ConfigError` at their line."""
    with pytest.raises(ConfigError) as exc:
        parse_config(text, path="jobs.toml")
    assert [str(e) for e in exc.value.errors] == [f"jobs.toml:{line}: {message}"]


def _tickwork(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_validate_and_run_exit_2_without_a_traceback(tmp_path: Path) -> None:
    files = {
        "deep.toml": '[[job]]\nname = "a"\ncommand = ["true"]\nevery = "1m"\n'
        f"args = {'[' * 600}{']' * 600}\n",
        "name.toml": '[pool.p]\nlimit = 1\n[[job]]\nname = []\ncommand = ["true"]\nevery = "1m"\n'
        'pool = "p"\n',
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        for verb in (["validate"], ["run", "--state", str(tmp_path / "s.db"), "--for", "5s"]):
            proc = _tickwork(*verb, str(path))
            assert proc.returncode == 2, (verb, name, proc.stderr)
            assert "Traceback" not in proc.stderr, proc.stderr
            assert re.search(rf"^{re.escape(str(path))}:\d+: ", proc.stderr, re.M), proc.stderr
