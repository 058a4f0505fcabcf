from __future__ import annotations

import io
import json
import signal
from datetime import UTC, datetime

import pytest

from tickwork._core.errors import JobTimedOut
from tickwork._core.events import EventKind, RunEvent
from tickwork._daemon import runlog
from tickwork._daemon.process.runner import RunResult
from tickwork._daemon.runlog import JSON_KEYS, OneOffLines, RunLog, iso

T = datetime(2026, 12, 2, 17, tzinfo=UTC).timestamp()


class Stream(io.StringIO):
    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def events(log: RunLog) -> None:
    log.started("rotate", T)
    log.finished("rotate", T, RunResult(exit_code=0, duration=0.123))
    log.started("probe", T, attempt=2)
    log.finished(
        "probe",
        T,
        RunResult(exit_code=3, duration=1.25, output="connecting\nrefused\n", attempt=2),
    )
    log.finished(
        "hang",
        T,
        RunResult(signal=signal.SIGKILL, timed_out=True, duration=65.4, output="ready\n"),
    )
    log.finished("missing", T, RunResult(error="cannot start 'x': No such file or directory"))
    log.finished("stopped", T, RunResult(cancelled=True, signal=signal.SIGTERM, duration=0.5))
    log.skipped("slow", T, reason="overlap")


def test_text_lines() -> None:
    out = Stream()
    events(RunLog(out, wall=lambda: T + 3723.0))
    assert out.getvalue().splitlines() == [
        "2026-12-02T18:02:03Z rotate started (1h02m03s late)",
        "2026-12-02T18:02:03Z rotate finished ok in 0.12s",
        "2026-12-02T18:02:03Z probe started (attempt 2)",  # a retry waits on purpose
        "2026-12-02T18:02:03Z probe failed exit=3 (attempt 2) in 1.25s: connecting | refused",
        "2026-12-02T18:02:03Z hang failed timeout in 1m05s: ended by SIGKILL | ready",
        "2026-12-02T18:02:03Z missing failed error in 0.00s: cannot start 'x': No such file or"
        " directory",
        "2026-12-02T18:02:03Z stopped failed cancelled in 0.50s",
        "2026-12-02T18:02:03Z slow skipped the run due 2026-12-02T17:00:00Z (overlap: the"
        " previous run is still running)",
    ]
    assert out.flushes == 8


def test_text_on_time_start_has_no_lateness_and_long_output_is_cut() -> None:
    out = io.StringIO()
    log = RunLog(out, wall=lambda: T + 0.5)
    log.started("a", T)
    log.finished("a", T, RunResult(exit_code=1, output="x" * 1000 + "\nlast words\n"))
    first, second = out.getvalue().splitlines()
    assert first == "2026-12-02T17:00:00Z a started"
    assert second.endswith("| last words") and len(second) < 400


def test_json_lines_parse_with_stable_keys() -> None:
    out = Stream()
    events(RunLog(out, format="json", wall=lambda: T + 2.5))
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(records) == 8 and out.flushes == 8
    assert all(list(r) == list(JSON_KEYS) for r in records)
    assert all(r["time"] == "2026-12-02T17:00:02.500Z" for r in records)
    assert all(r["scheduled"] == "2026-12-02T17:00:00.000Z" for r in records)
    assert [r["event"] for r in records] == [
        "started",
        "finished",
        "started",
        "failed",
        "failed",
        "failed",
        "failed",
        "skipped",
    ]
    assert records[0] | {"time": None, "scheduled": None} == dict.fromkeys(JSON_KEYS) | {
        "event": "started",
        "job": "rotate",
        "attempt": 1,
        "late": 2.5,
    }
    assert records[1]["status"] == "ok" and records[1]["output"] is None
    assert records[3] | {"time": None, "scheduled": None} == dict.fromkeys(JSON_KEYS) | {
        "event": "failed",
        "job": "probe",
        "attempt": 2,
        "status": "exit=3",
        "exit_code": 3,
        "duration": 1.25,
        "output": "connecting\nrefused\n",
    }
    assert (records[4]["status"], records[4]["signal"]) == ("timeout", "SIGKILL")
    assert records[5]["error"].startswith("cannot start")
    assert (records[7]["event"], records[7]["reason"]) == ("skipped", "overlap")
    assert records[7]["count"] == 1 and records[0]["count"] is None


def test_a_rate_limited_skip_line_says_how_many() -> None:
    out = io.StringIO()
    log = RunLog(out, wall=lambda: T + 2.0)
    log.skipped("tick", T + 0.1, reason="overlap", count=10, last=T + 1.0)
    log.skipped("tick", T + 1.1, reason="overlap", count=3)
    assert out.getvalue().splitlines() == [
        "2026-12-02T17:00:02Z tick skipped 10 runs due 2026-12-02T17:00:00.100Z to"
        " 2026-12-02T17:00:01Z (overlap: the previous run is still running)",
        "2026-12-02T17:00:02Z tick skipped 3 runs due from 2026-12-02T17:00:01.100Z"
        " (overlap: the previous run is still running)",
    ]
    out = io.StringIO()
    RunLog(out, format="json", wall=lambda: T).skipped("tick", T, reason="overlap", count=10)
    record = json.loads(out.getvalue())
    assert (record["event"], record["count"], record["scheduled"]) == (
        "skipped",
        10,
        "2026-12-02T17:00:00.000Z",
    )


def test_iso_and_bad_format() -> None:
    assert iso(T) == "2026-12-02T17:00:00Z"
    assert iso(T + 0.25, millis=True) == "2026-12-02T17:00:00.250Z"
    with pytest.raises(ValueError, match=r"^format must be 'text' or 'json', got 'xml'$"):
        RunLog(io.StringIO(), format="xml")  # type: ignore[arg-type]


def test_output_lines_are_logged_tagged_until_the_limit_then_counted_exactly() -> None:
    out = Stream()
    log = RunLog(out, wall=lambda: T)
    lines = log.output("chatty", T, attempt=2, limit=2)
    lines.line("stdout", "one", 4)
    assert out.getvalue().splitlines() == ["2026-12-02T17:00:00Z chatty stdout | one"]
    lines.line("stderr", "", 1)  # a blank line is a line too
    lines.line("stdout", "three", 6)
    lines.line("stderr", "four", 5)
    lines.end()
    assert out.getvalue().splitlines() == [
        "2026-12-02T17:00:00Z chatty stdout | one",
        "2026-12-02T17:00:00Z chatty stderr |",  # an empty line: trailing space dropped
        "2026-12-02T17:00:00Z chatty output_limit reached (2 line(s)): the rest of this run's"
        " output is counted, not logged",
        "2026-12-02T17:00:00Z chatty output: 2 line(s), 11 byte(s) not logged"
        " (over output_limit = 2)",
    ]
    assert out.flushes == 4  # each line as it comes
    quiet = Stream()
    under = RunLog(quiet, wall=lambda: T).output("quiet", T, limit=5)
    under.line("stdout", "fine", 5)
    under.end()
    assert quiet.getvalue().splitlines() == ["2026-12-02T17:00:00Z quiet stdout | fine"]


def test_output_lines_in_json() -> None:
    out = io.StringIO()
    log = RunLog(out, format="json", wall=lambda: T)
    lines = log.output("report", T, attempt=3, limit=1)
    lines.line("stderr", "done: 3 rows", 13)
    lines.line("stdout", "more", 5)
    lines.line("stdout", "and more", 9)
    lines.end()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(list(record) == list(JSON_KEYS) for record in records)
    picked = [
        (r["event"], r["job"], r["attempt"], r["stream"], r["output"], r["count"], r["bytes"])
        for r in records
    ]
    assert picked == [
        ("output", "report", 3, "stderr", "done: 3 rows", None, None),
        ("output_limit", "report", 3, None, None, 1, None),
        ("output_dropped", "report", 3, None, None, 2, 14),
    ]


def test_a_run_an_operator_asked_for_says_so() -> None:
    out = Stream()
    log = RunLog(out, wall=lambda: T + 0.25)
    log.started("report", T, origin="manual")
    log.started("report", T, origin="backfill", attempt=2)
    log.started("report", T)
    assert out.getvalue().splitlines() == [
        f"{iso(T + 0.25)} report started (manual)",
        f"{iso(T + 0.25)} report started (backfill, attempt 2)",
        f"{iso(T + 0.25)} report started",
    ]


# -- one-offs: their lines come from the scheduler's events ------------------------------


def oneoff_event(kind: str, job_id: str = "~key:remind:42", **kw: object) -> RunEvent:
    return RunEvent(EventKind(kind), 0, T, job_id=job_id, func="app.mail:remind", **kw)  # type: ignore[arg-type]


def raised(exc: Exception) -> Exception:
    """``exc`` with a traceback, as a job's error has one."""
    try:
        raise exc
    except Exception as caught:
        return caught


def test_a_one_off_s_attempts_are_lines_named_by_its_id_and_function() -> None:
    out = io.StringIO()
    lines = OneOffLines(RunLog(out, wall=lambda: T + 0.5), dict)
    lines.observe(oneoff_event("started", started=T))
    lines.observe(
        oneoff_event("failed", duration=0.25, error=raised(ValueError("no such user 42")))
    )
    lines.observe(oneoff_event("started", started=T + 2))  # its retry
    lines.observe(oneoff_event("finished", duration=0.5))
    lines.observe(oneoff_event("started", job_id="jobs/tick"))  # a job's: the daemon's own
    lines.observe(oneoff_event("failed", job_id="~" + "a" * 20, error=JobTimedOut("30 s")))
    text = out.getvalue().splitlines()
    assert text[0] == "2026-12-02T17:00:00Z ~key:remind:42 (app.mail:remind) started"
    assert text[1].startswith(
        "2026-12-02T17:00:00Z ~key:remind:42 (app.mail:remind) failed error in 0.25s:"
        " ValueError: no such user 42 | "
    )
    assert text[1].endswith("in raised |     raise exc | ValueError: no such user 42")
    assert text[2:4] == [
        "2026-12-02T17:00:00Z ~key:remind:42 (app.mail:remind) started (attempt 2)",
        "2026-12-02T17:00:00Z ~key:remind:42 (app.mail:remind) finished ok (attempt 2) in 0.50s",
    ]
    assert text[4].startswith(f"2026-12-02T17:00:00Z ~{'a' * 20} (app.mail:remind) failed timeout")
    assert len(text) == 5
    lines._check()


def test_a_one_off_s_json_lines_carry_its_id_and_function() -> None:
    out = io.StringIO()
    lines = OneOffLines(RunLog(out, format="json", wall=lambda: T + 0.5), dict)
    lines.observe(oneoff_event("started", started=T))
    lines.observe(
        oneoff_event("failed", duration=0.25, error=raised(ValueError("no such user 42")))
    )
    started, failed = (json.loads(line) for line in out.getvalue().splitlines())
    assert list(started) == list(JSON_KEYS) and list(failed) == list(JSON_KEYS)
    assert started | {"time": None, "scheduled": None} == dict.fromkeys(JSON_KEYS) | {
        "event": "started",
        "job": "~key:remind:42",
        "func": "app.mail:remind",
        "attempt": 1,
        "late": 0.5,
    }
    assert (failed["event"], failed["status"], failed["func"]) == (
        "failed",
        "error",
        "app.mail:remind",
    )
    assert failed["error"] == "ValueError: no such user 42" and "Traceback" in failed["output"]


def test_the_attempt_counts_of_one_offs_that_ended_failing_are_dropped() -> None:
    running: dict[str, int] = {}
    lines = OneOffLines(RunLog(io.StringIO(), wall=lambda: T), lambda: running)
    for k in range(200):  # each fails for good: no finish takes its count
        lines.observe(oneoff_event("started", job_id=f"~{k:020x}"))
        lines.observe(oneoff_event("failed", job_id=f"~{k:020x}", error=ValueError("x")))
        assert len(lines._attempts) <= runlog._PRUNE_AT
    assert lines.pruned == 200 - len(lines._attempts)
    running["~key:slow"] = 1  # one waits for its retry: its count stays
    lines.observe(oneoff_event("started", job_id="~key:slow"))
    lines.observe(oneoff_event("failed", job_id="~key:slow", error=ValueError("x")))
    for k in range(200, 400):
        lines.observe(oneoff_event("started", job_id=f"~{k:020x}"))
        lines.observe(oneoff_event("failed", job_id=f"~{k:020x}", error=ValueError("x")))
    assert lines._attempts[("~key:slow", T)] == 1
    lines._check()
