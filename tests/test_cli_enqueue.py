"""``tickwork enqueue``: one-offs from the command line, on both stores, in-process.

- what the verb enqueues runs once on a node that allows its function, with the
  arguments, time, key and run options given; the verb never imports the function;
- ``--key`` is idempotent; ``--cancel`` takes an id or a key;
- bad input is exit 2 with one line that names the option (no traceback, nothing stored).
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import durable_jobs
from tests.executors import drain, manual_scheduler
from tickwork.__main__ import build_parser
from tickwork.stores.contract import OneOffCounts
from tickwork.testing import FakeClock

AT = 2_000_000_000.0  # 2033-05-18T03:33:20Z
REC = "tests.durable_jobs:record"

Where = tuple[list[str], Callable[[], Any]]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Where]:
    """The state options of the verb, and how to open the same store (it exists)."""
    opened: list[Any] = []
    if request.param == "sqlite":
        from tickwork.stores.sqlite import SQLiteStore

        path = tmp_path / "s.sqlite3"

        def open_store() -> Any:
            opened.append(SQLiteStore(path))
            return opened[-1]

        argv = ["--state", str(path)]
    else:
        from tickwork.stores.postgres import PostgresStore

        dsn = request.getfixturevalue("fresh_database")

        def open_store() -> Any:
            opened.append(PostgresStore(dsn))
            return opened[-1]

        argv = ["--database", dsn]
    open_store()  # the state exists, as `tickwork run` left it
    yield argv, open_store
    for store in opened:
        store.close()


def cli(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["enqueue", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = int(args.func(args, out=out, err=err))
    return code, out.getvalue(), err.getvalue()


def test_what_the_verb_enqueues_runs_once_with_its_arguments_and_options(where: Where) -> None:
    argv, open_store = where
    code, out, err = cli(
        *argv, REC, "--args", '[1, "a"]', "--kwargs", '{"k": 2}', "--at", "2033-05-18T03:33:20Z",
        "--key", "order-7", "--retries", "2", "--timeout", "30s", "--pool", "mail",
    )  # fmt: skip
    assert (code, out, err) == (0, "~key:order-7\n", "")
    code, out, err = cli(*argv, REC, "--key", "order-7", "--json")
    assert code == 0 and json.loads(out) == {
        "id": "~key:order-7",
        "run_at": json.loads(out)["run_at"],
        "created": False,
        "key": "order-7",
    }
    store = open_store()
    state = store.get("~key:order-7")
    spec = state.spec
    assert (spec.func, spec.args, dict(spec.kwargs)) == (REC, (1, "a"), {"k": 2})
    assert (spec.retries, spec.timeout, spec.pool, state.next_run) == (2, 30.0, "mail", AT)
    durable_jobs.CALLS.clear()
    clock = FakeClock(wall_start=AT - 5)
    ds, pool = manual_scheduler(store, clock)
    drain(ds, pool)
    assert durable_jobs.CALLS == []  # not due yet
    clock.advance(5)
    drain(ds, pool)
    assert durable_jobs.CALLS == [((1, "a"), {"k": 2}, AT)]
    assert ds.oneoffs() == [OneOffCounts(REC, done=1)]


def test_the_verb_never_imports_the_function(where: Where) -> None:
    argv, open_store = where
    assert "nowhere_app_xyz" not in sys.modules
    code, out, _ = cli(*argv, "nowhere_app_xyz.tasks:send", "--in", "1h", "--args", "[3]")
    assert code == 0 and out.startswith("~") and len(out.strip()) == 29
    assert "nowhere_app_xyz" not in sys.modules
    [counts] = open_store().oneoff_counts()
    assert counts == OneOffCounts("nowhere_app_xyz.tasks:send", pending=1)
    due = open_store().get(out.strip()).next_run
    assert abs(due - (time.time() + 3600)) < 600


def test_cancel_by_key_or_id(where: Where) -> None:
    argv, open_store = where
    cli(*argv, REC, "--in", "1h", "--key", "k")
    _, out, _ = cli(*argv, REC, "--in", "1h")
    assert cli(*argv, "--cancel", "k", "--by", "ops") == (0, "cancelled ~key:k\n", "")
    assert cli(*argv, "--cancel", out.strip()) == (0, f"cancelled {out.strip()}\n", "")
    code, _, err = cli(*argv, "--cancel", "k")
    assert code == 1 and err == (
        "tickwork enqueue: no one-off 'k' is pending (it ended, never was, or a node is"
        " running it)\n"
    )
    [entry] = open_store().history("~key:k")
    assert (entry.outcome, entry.node) == ("cancelled", "ops")
    assert open_store().oneoff_counts() == [OneOffCounts(REC, dropped=2)]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["bad path"], "func must be an import path 'package.module:function', got 'bad path'"),
        ([REC, "--args", "{"], "--args must be JSON: Expecting property name"),
        ([REC, "--args", '{"a": 1}'], "args must be a JSON array, got {'a': 1}"),
        ([REC, "--kwargs", "[1]"], "kwargs must be a JSON object, got [1]"),
        ([REC, "--at", "tomorrow"], "--at must be an ISO 8601 date-time"),
        ([REC, "--in", "soon"], "--in: duration must look like '30s'"),
        ([REC, "--retries", "500"], "retries must be an integer from 0 to 100, got 500"),
        ([REC, "--key", "a\nb"], "key must be a non-empty printable string"),
        ([REC, "--cancel", "k"], "give --cancel or a function to enqueue, not both"),
        ([], "give the function to run, 'package.module:function'"),
    ],
)
def test_bad_input_is_exit_2_in_one_line_and_stores_nothing(
    where: Where, given: list[str], message: str
) -> None:
    argv, open_store = where
    code, out, err = cli(*argv, *given)
    assert (code, out) == (2, "")
    assert err.startswith("tickwork enqueue: ") and message in err, err
    assert err.count("\n") == 1
    assert open_store().oneoff_counts() == []


def test_a_state_must_be_named_and_exist(tmp_path: Path) -> None:
    code, _, err = cli(REC)
    assert code == 2 and "give the jobs file (FILE or -f FILE), --state PATH" in err
    code, _, err = cli("--state", str(tmp_path / "none.sqlite3"), REC)
    assert code == 1 and "no state at" in err


def test_jobs_counts_the_one_offs_per_function_after_its_table(where: Where) -> None:
    from tickwork._cli.jobs import run_jobs

    argv, _ = where

    def jobs(*more: str) -> str:
        args = build_parser().parse_args(["jobs", *argv, *more])
        out = io.StringIO()
        assert run_jobs(args, out=out, err=io.StringIO()) == 0
        return out.getvalue()

    assert jobs() == "no jobs in the state\n"  # no one-offs: no summary
    for _ in range(3):
        cli(*argv, REC, "--in", "1h")
    cli(*argv, "app.mail:send", "--in", "1h", "--key", "k")
    cli(*argv, "--cancel", "k")
    assert jobs() == (
        "no jobs in the state\n"
        "\n"
        "ONE-OFFS                   PENDING  RUNNING  DONE  FAILED  DROPPED\n"
        "app.mail:send              0        0        0     0       1\n"
        "tests.durable_jobs:record  3        0        0     0       0\n"
    )
    assert jobs("--long").endswith("tests.durable_jobs:record  3        0        0     0       0\n")
    assert json.loads(jobs("--json")) == []  # the jobs alone: /api/oneoffs has the counts


def test_a_daemon_runs_the_one_offs_of_the_modules_it_allows(where: Where, tmp_path: Path) -> None:
    from tests.test_daemon_e2e import Run
    from tests.waiting import wait_until

    argv, open_store = where
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "tick"\nevery = "1h"\ncommand = ["true"]\n')
    made, refused = tmp_path / "made", tmp_path / "refused"
    run = Run(jobs, argv, "--allow-module", "os", "--shutdown-grace", "1s")
    try:
        run.wait_line("running 1 job")
        # The refused one first: once the allowed one ran, the refused one was passed over.
        assert cli(*argv, "shutil:rmtree", "--args", json.dumps([str(refused)]))[0] == 0
        code, mkdir, _ = cli(*argv, "os:mkdir", "--args", json.dumps([str(made)]))
        assert code == 0
        gone = tmp_path / "never-made"
        code, rmdir, _ = cli(*argv, "os:rmdir", "--args", json.dumps([str(gone)]))
        assert code == 0
        store = open_store()
        counts = lambda: {  # noqa: E731
            c.queue: (c.pending, c.done, c.failed) for c in store.oneoff_counts()
        }
        wait_until(
            "the allowed one-offs ended",
            lambda: (
                counts()
                == {"os:mkdir": (0, 1, 0), "os:rmdir": (0, 0, 1), "shutil:rmtree": (1, 0, 0)}
            ),
        )
        # in the run log as a job's run is, named by its id and function
        ran = f" {mkdir.strip()} (os:mkdir) "
        started = run.wait_line(ran + "started")
        run.wait_line(ran + "finished ok in ", after=run.lines.index(started))
        assert not any("shutil:rmtree" in line for line in run.lines)  # never taken
        # A failing one-off's error is said once, by the run log's line, not again by
        # the engine's error record (a command's failure is said once too).
        run.wait_line("(os:rmdir) failed error in ")
        said = [line for line in run.lines if "No such file or directory" in line]
        assert len(said) == 1 and "(os:rmdir) failed error" in said[0], said
    finally:
        run.stop()
    assert made.is_dir()  # run in the daemon
    # the refused one was never claimed: the one failure is the rmdir's
    assert [e.job_id for e in store.history(None, outcome="failed")] == [rmdir.strip()]
    store.close()


def test_allow_module_takes_module_names(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "jobs.toml", "--allow-module", "my app"])
    args = build_parser().parse_args(
        ["run", "j.toml", "--allow-module", "a.b", "--allow-module", "*"]
    )
    from tickwork._cli.run import daemon_config

    assert daemon_config(args).allowed_modules == ("a.b", "*")
