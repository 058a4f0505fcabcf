"""``output = "log" | "tail" | "discard"``: what a daemon job's output becomes.

A real ``tickwork run`` process; its log lines and the slot ledger of its state are read
back.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from tests.test_daemon_e2e import Run
from tickwork.stores.sqlite import SQLiteStore


def test_output_modes_log_lines_and_keep_tails_in_the_ledger(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "chatty"
            in = "0s"
            command = ["sh", "-c", "echo first line; echo second line"]

            [[job]]
            name = "tailed"
            in = "0s"
            output = "tail"
            command = ["sh", "-c", "echo kept quietly"]

            [[job]]
            name = "silent"
            in = "0s"
            output = "discard"
            command = ["sh", "-c", "echo never kept"]
            """
        )
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state)
    try:
        run.wait_line(" chatty stdout | second line")
        for name in ("tailed", "silent"):
            run.wait_line(f" {name} finished ok")
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    text = run.text()
    assert " chatty stdout | first line" in text
    assert "kept quietly" not in text and "never kept" not in text
    with SQLiteStore(state) as store:
        outputs = {e.job_id.partition("/")[2]: e.output for e in store.history()}
    assert outputs == {
        "chatty": "first line\nsecond line\n",
        "tailed": "kept quietly\n",
        "silent": None,
    }


def test_a_command_over_its_timeout_is_recorded_as_timeout(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "stuck"\nin = "0s"\ntimeout = "300ms"\ncommand = ["sleep", "30"]\n'
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state)
    try:
        run.wait_line(" stuck failed timeout")
        run.signal(15)
        assert run.wait() == 0
    finally:
        run.kill()
    with SQLiteStore(state) as store:
        (entry,) = store.history()
        (job,) = store.jobs()
    assert entry.outcome == "timeout" and (entry.error or "").startswith("timeout")
    assert job.last_run is not None and job.last_run.outcome == "timeout"


def test_lines_reach_the_log_as_written_tagged_by_stream(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "slow"
            in = "0s"
            command = ["sh", "-c", "echo first line; echo to stderr >&2; sleep 300; echo never"]

            [[job]]
            name = "steps"
            in = "0s"
            command = ["sh", "-c", "echo step one; sleep 1; echo step two >&2"]
            """
        )
    )
    run = Run(jobs, tmp_path / "s.sqlite3", "--shutdown-grace", "1s")
    try:
        # The job sleeps 300 s after its first lines: seeing them now proves they were
        # logged as written, not at the end of the run.
        run.wait_line(" slow stdout | first line", limit=60)
        run.wait_line(" slow stderr | to stderr", limit=60)
        run.wait_line(" steps finished ok", limit=60)
        text = run.text()
        assert " slow finished" not in text and " slow failed" not in text
        steps = [line.split(" ", 1)[1] for line in run.lines if " steps " in line]
        # A start more than a second after its slot says so: "steps started (1.07s late)".
        late = re.fullmatch(r"steps started( \(\S+ late\))?", steps[0])
        assert late is not None, steps
        assert steps[1:] == ["steps stdout | step one", "steps stderr | step two", steps[-1]]
        assert steps[-1].startswith("steps finished ok")
        run.signal(15)
        assert run.wait(60) == 0
    finally:
        run.kill()
    assert " slow stdout | never" not in run.text()


def seq_bytes(first: int, last: int) -> int:
    """What ``seq`` writes for ``first..last``, newlines included."""
    return sum(len(str(i)) + 1 for i in range(first, last + 1))


def test_a_flood_of_output_is_cut_at_the_limit_and_counted_exactly(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent(
            """
            [[job]]
            name = "flood"
            in = "0s"
            command = ["seq", "1", "100000"]

            [[job]]
            name = "capped"
            in = "0s"
            output_limit = 7
            command = ["sh", "-c", "seq 1 50 >&2; seq 51 100000"]
            """
        )
    )
    state = tmp_path / "s.sqlite3"
    run = Run(jobs, state, "--log-format", "json")
    try:
        for name in ("flood", "capped"):
            run.wait_line(f'"event": "finished", "job": "{name}"', limit=120)
        run.signal(15)
        assert run.wait(60) == 0
    finally:
        run.kill()
    records = [json.loads(line) for line in run.lines]
    flood = [r for r in records if r.get("job") == "flood"]
    logged = [r["output"] for r in flood if r["event"] == "output"]
    assert logged == [str(i) for i in range(1, 1001)]  # the default output_limit
    assert all(r["stream"] == "stdout" for r in flood if r["event"] == "output")
    (dropped,) = [r for r in flood if r["event"] == "output_dropped"]
    assert (dropped["count"], dropped["bytes"]) == (99_000, seq_bytes(1001, 100_000))
    events = [r["event"] for r in flood]
    assert events.index("output_limit") == 1001 and events[-2:] == ["output_dropped", "finished"]
    capped = [r for r in records if r.get("job") == "capped"]
    shown = [(r["stream"], r["output"]) for r in capped if r["event"] == "output"]
    # The limit counts both streams' lines as they are read. Two pipes have no order
    # between them: a reader that comes late (a loaded machine) finds both full and may
    # take stdout's first; each stream's lines come in their own order.
    assert len(shown) == 7
    err = [int(text) for stream, text in shown if stream == "stderr"]
    out = [int(text) for stream, text in shown if stream == "stdout"]
    assert err == list(range(1, len(err) + 1)) and out == list(range(51, 51 + len(out)))
    (dropped,) = [r for r in capped if r["event"] == "output_dropped"]
    kept = sum(len(text) + 1 for _, text in shown)
    assert (dropped["count"], dropped["bytes"]) == (100_000 - 7, seq_bytes(1, 100_000) - kept)
    with SQLiteStore(state) as store:
        outputs = {e.job_id.partition("/")[2]: e.output for e in store.history()}
    assert (outputs["flood"] or "").endswith("99999\n100000\n")  # the ledger tail as before
