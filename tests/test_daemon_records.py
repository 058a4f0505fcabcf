"""Every line ``tickwork run`` writes is one record, and ``--for`` bounds the whole run.

Through the real daemon (``python -m tickwork run``): a store that cannot be opened
(PostgreSQL at a closed port, whose driver's message holds a newline and a tab), a
broken jobs file, and jobs whose error text holds line breaks and tabs; every stderr
line must parse as JSON (``--log-format json``) or hold no raw control character
(text). Then the pieces: the escapes, the daemon's log formatter, other libraries'
warnings and an exception no thread caught.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from tickwork._daemon.logline import escape_controls, json_line, one_line, say, setup_logging

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

CONTROLS = {chr(c) for c in range(32)} | {chr(0x7F), "\x85", "\u2028", "\u2029"}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed


def tickwork_run(*args: str, timeout: float = 120.0, cwd: Path | None = None) -> tuple[int, str]:
    env = None if cwd is None else {**os.environ, "PYTHONPATH": str(cwd)}
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", "run", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.stdout == ""
    return proc.returncode, proc.stderr


def json_records(stderr: str) -> list[dict[str, object]]:
    records = []
    for line in stderr.splitlines():
        assert not CONTROLS & set(line), line
        record = json.loads(line)  # every line is one JSON object
        assert isinstance(record, dict), line
        records.append(record)
    assert records
    return records


def text_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    for line in lines:
        assert not CONTROLS & set(line), line
    assert lines
    return lines


def jobs_file(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "tick"\ncommand = ["true"]\nevery = "1h"\n')
    return jobs


def unreachable(tmp_path: Path, fmt: str) -> tuple[int, str, float]:
    dsn = f"postgresql://nobody@127.0.0.1:{closed_port()}/nothing"
    began = time.monotonic()
    code, err = tickwork_run(
        str(jobs_file(tmp_path)), "--database", dsn, "--for", "2s", "--log-format", fmt
    )
    return code, err, time.monotonic() - began


def test_json_store_that_cannot_be_opened_every_line_a_record(tmp_path: Path) -> None:
    code, err, _ = unreachable(tmp_path, "json")
    assert code == 1, err
    records = json_records(err)
    final = records[-1]
    assert final["level"] == "error" and final["event"] == "log"
    message = str(final["message"])
    assert "cannot use the database" in message
    assert "\n" in message  # the driver's two lines, kept inside the one record
    assert any(r["logger"] == "tickwork.stores" for r in records[:-1])  # the retries


def test_text_store_that_cannot_be_opened_one_line_per_message(tmp_path: Path) -> None:
    code, err, _ = unreachable(tmp_path, "text")
    assert code == 1, err
    lines = text_lines(err)
    final = lines[-1]
    assert final.startswith("tickwork run: --database postgresql://nobody@127.0.0.1:")
    assert "cannot use the database" in final and "\\n" in final  # escaped, same line


def test_for_bounds_the_opening_of_the_store(tmp_path: Path) -> None:
    # With the 30 s a store gets to come up, `--for 2s` used to run for 26 s.
    code, err, took = unreachable(tmp_path, "text")
    assert code == 1, err
    assert took < 20.0, f"--for 2s took {took:.1f} s"
    assert "stopped trying within the 2.0 s --for left" in err.splitlines()[-1]


def test_json_broken_file_every_problem_a_record(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "a"\ncommand = ["true"]\nevery = "soon"\nbogus = 1\n')
    code, err = tickwork_run(str(jobs), "--state", str(tmp_path / "s.db"), "--log-format", "json")
    assert code == 2, err
    records = json_records(err)
    assert len(records) >= 3
    assert all(r["level"] == "error" for r in records)
    assert "fix the file first" in str(records[-1]["message"])


FAILING = """\
[[job]]
name = "shout"
command = ["sh", "-c", "printf 'first\\tcolumn\\nsecond line\\n' >&2; exit 3"]
every = "1h"
first = 0

[[job]]
name = "raise"
call = "breaks:fail"
every = "1h"
first = 0
"""

BREAKS = """\
def fail():
    raise ValueError("line one\\n\\tline two")
"""


def failing_jobs(tmp_path: Path) -> Path:
    (tmp_path / "breaks.py").write_text(BREAKS)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FAILING)
    return jobs


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_error_text_with_line_breaks_stays_one_record(tmp_path: Path, fmt: str) -> None:
    jobs = failing_jobs(tmp_path)
    code, err = tickwork_run(
        str(jobs), "--state", str(tmp_path / "s.db"), "--for", "4s", "--log-format", fmt,
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    if fmt == "json":
        failed = {r["job"]: r for r in json_records(err) if r["event"] == "failed"}
        assert set(failed) == {"shout", "raise"}, err
        assert "first\tcolumn\nsecond line" in str(failed["shout"]["output"])
        assert "line one\n\tline two" in str(failed["raise"]["output"])
    else:
        lines = text_lines(err)
        shout = next(line for line in lines if "shout failed" in line)
        assert "first\\tcolumn" in shout and "second line" in shout
        raised = next(line for line in lines if "raise failed" in line)
        assert "line one" in raised and "line two" in raised


# -- the pieces ------------------------------------------------------------------------


def test_escape_controls_names_the_common_ones() -> None:
    assert escape_controls("a\nb\tc\rd\x1be\x7f\u2028") == "a\\nb\\tc\\rd\\x1be\\x7f\\u2028"
    assert one_line("tail\n\n") == "tail"
    assert escape_controls("plain ünïcode") == "plain ünïcode"


def test_json_line_escapes_what_json_dumps_leaves_raw() -> None:
    line = json_line({"m": "a\u2028b\x85c\x7fd\ne"})
    assert not CONTROLS & set(line)
    assert json.loads(line) == {"m": "a\u2028b\x85c\x7fd\ne"}


def test_say_in_either_format() -> None:
    out = io.StringIO()
    say(out, "text", "cannot\n\tdo it")
    say(out, "json", "cannot\n\tdo it")
    text, js = out.getvalue().splitlines()
    assert text == "tickwork run: cannot\\n\\tdo it"
    assert json.loads(js)["message"] == "cannot\n\tdo it"


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_log_records_traceback_warnings_and_thread_crashes(fmt: str) -> None:
    out = io.StringIO()
    hook = threading.excepthook
    undo = setup_logging(out, fmt)  # type: ignore[arg-type]
    saved = logging.getLogger().handlers[:]
    logging.getLogger().handlers.clear()  # as in `tickwork run`: nothing else set up
    try:
        undo()
        undo = setup_logging(out, fmt)  # type: ignore[arg-type]
        try:
            raise RuntimeError("two\nlines")
        except RuntimeError:
            logging.getLogger("tickwork.durable").warning("step\tfailed", exc_info=True)
        logging.getLogger("psycopg").warning("driver says\nthis")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("careful\nnow", UserWarning, stacklevel=1)

        def crash() -> None:
            raise ValueError("thread\nboom")

        t = threading.Thread(target=crash, name="crasher")
        t.start()
        t.join()
    finally:
        undo()
        logging.getLogger().handlers[:] = saved
    text = out.getvalue()
    if fmt == "json":
        records = json_records(text)
        assert len(records) == 4, text
        assert "RuntimeError: two\nlines" in str(records[0]["traceback"])
        assert records[0]["message"] == "step\tfailed: RuntimeError: two\nlines"
        assert records[1]["message"] == "driver says\nthis"
        assert "careful\nnow" in str(records[2]["message"])
        assert "crasher" in str(records[3]["message"])
        assert "ValueError: thread\nboom" in str(records[3]["traceback"])
    else:
        lines = text_lines(text)
        assert len(lines) == 4, text
        assert lines[0].endswith("tickwork warning: step\\tfailed: RuntimeError: two\\nlines")
        assert "crasher" in lines[3] and "thread\\nboom" in lines[3]
    assert threading.excepthook is hook  # undone
