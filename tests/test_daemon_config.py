"""`run_daemon(DaemonConfig(...))`: the whole of ``tickwork run`` in one call."""

from __future__ import annotations

import io
import os
import signal
import socket
import threading
from pathlib import Path

import pytest

from tests.test_daemon_e2e import Run, wait_until
from tickwork._daemon.start import DaemonConfig, run_daemon
from tickwork._daemon.state import default_state_path
from tickwork.stores.sqlite import SQLiteStore

#: Only reached when something is broken; a loaded machine is merely slow.
PATIENCE = 60.0


def test_one_config_one_call_runs_the_file_until_a_signal(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        f'[[job]]\nname = "mark"\ncommand = ["touch", "{marker}"]\nevery = "1h"\nfirst = "0s"\n'
    )
    state = tmp_path / "state.db"
    stopped = threading.Event()

    def stop_when_marked() -> None:
        # A condition, not a delay: the job's file appears, then the daemon is stopped.
        waiter = threading.Event()
        for _ in range(int(PATIENCE / 0.02)):
            if marker.exists() or stopped.is_set():
                break
            waiter.wait(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=stop_when_marked)
    killer.start()
    err = io.StringIO()
    try:
        status = run_daemon(DaemonConfig(str(jobs), state=str(state)), err=err)
    finally:
        stopped.set()
        killer.join()
    assert status == 0, err.getvalue()
    assert marker.exists()
    store = SQLiteStore(state)
    try:
        [job] = store.jobs()
        assert job.id.endswith("/mark")
        assert job.last_run is not None and job.last_run.outcome == "ok"
    finally:
        store.close()
    assert "running 1 job from" in err.getvalue()


def test_a_broken_file_is_status_2_with_its_lines(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "x"\ncommand = ["true"]\nevery = "soon"\n')
    err = io.StringIO()
    assert run_daemon(DaemonConfig(str(jobs)), err=err) == 2
    assert "jobs.toml:4" in err.getvalue() and "not started, fix the file first" in err.getvalue()


def _said(err: io.StringIO) -> list[str]:
    return err.getvalue().splitlines()


def test_a_bad_namespace_is_status_2_before_anything_is_opened(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "x"\ncommand = ["true"]\nevery = "1h"\n')
    state = tmp_path / "never" / "s.db"
    err = io.StringIO()
    assert run_daemon(DaemonConfig(str(jobs), state=str(state), namespace="a/b"), err=err) == 2
    [line] = _said(err)
    assert line.startswith("tickwork run: --namespace must be") and line.endswith("got 'a/b'")
    assert not state.parent.exists()  # the state was not opened


def test_an_http_address_in_use_is_status_1_and_closes_the_store(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "x"\ncommand = ["true"]\nevery = "1h"\n')
    state = tmp_path / "s.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = io.StringIO()
        config = DaemonConfig(str(jobs), state=str(state), http=f"127.0.0.1:{port}")
        assert run_daemon(config, err=err) == 1
    [line] = [x for x in _said(err) if x.startswith("tickwork run:")]
    assert line.startswith(f"tickwork run: --http 127.0.0.1:{port}: cannot listen: "), line
    with SQLiteStore(state) as store:  # closed by the start that gave up: opens again
        assert store.jobs() == []  # nothing was declared


def test_a_state_that_is_not_the_files_is_status_1_with_why(tmp_path: Path) -> None:
    from tickwork import Every
    from tickwork._daemon.declare import ENTRY_POINT
    from tickwork.stores import JobSpec

    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "x"\ncommand = ["true"]\nevery = "1h"\n')
    state = tmp_path / "s.db"
    with SQLiteStore(state) as store:
        store.upsert(JobSpec("other/y", ENTRY_POINT, Every(60)), 0.0)
    err = io.StringIO()
    assert run_daemon(DaemonConfig(str(jobs), state=str(state)), err=err) == 1
    [line] = [x for x in _said(err) if x.startswith("tickwork run:")]
    assert "the state holds jobs that are not this file's" in line and "'other/y'" in line
    assert not any("running 1 job" in x for x in _said(err))


def test_an_interrupt_while_the_file_is_read_is_status_130_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tickwork._daemon.start as start

    def interrupted(path: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(start, "load_config", interrupted)
    err = io.StringIO()
    assert run_daemon(DaemonConfig(str(tmp_path / "jobs.toml")), err=err) == 130
    assert _said(err) == ["tickwork run: interrupted before the daemon started; not started"]


@pytest.mark.parametrize(
    ("kw", "where"),
    [
        ({}, "default"),
        ({"state": "/tmp/s.db"}, "state"),
        ({"database": "postgresql:///x", "state": "/tmp/s.db"}, "database"),
    ],
)
def test_the_store_location_prefers_the_database(kw: dict[str, str], where: str) -> None:
    config = DaemonConfig("/etc/tickwork/jobs.toml", **kw)
    state, database = config.store_location()
    if where == "default":
        assert (state, database) == (str(default_state_path("/etc/tickwork/jobs.toml")), None)
    elif where == "state":
        assert (state, database) == ("/tmp/s.db", None)
    else:
        assert (state, database) == (None, "postgresql:///x")


def test_the_daemon_and_the_library_share_one_default_pool_size(tmp_path: Path) -> None:
    from tickwork._cli.main import build_parser
    from tickwork._cli.run import daemon_config
    from tickwork._durable.scheduler import DEFAULT_WORKERS

    args = build_parser().parse_args(["run", str(tmp_path / "jobs.toml")])
    assert daemon_config(args).workers == DEFAULT_WORKERS == DaemonConfig("jobs.toml").workers


def test_at_start_runs_once_at_each_start_of_a_daemon_not_at_a_reload(tmp_path: Path) -> None:
    """``at_start``: each daemon start queues one run, a second daemon's start on the same
    namespace one more, a reload none; a disabled job none (issue 39, B11)."""
    out, ticks, never = tmp_path / "out", tmp_path / "ticks", tmp_path / "never"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f"""\
[[job]]
name = "warm"
at_start = true
command = ["sh", "-c", "echo warm >> {out}"]

[[job]]
name = "off"
at_start = true
enabled = false
command = ["touch", "{never}"]

[[job]]
name = "tick"
every = "200ms"
command = ["sh", "-c", "echo >> {ticks}"]
""")
    state = tmp_path / "state.sqlite3"

    def lines(path: Path) -> int:
        return len(path.read_text().splitlines()) if path.exists() else 0

    first = Run(jobs, state)
    second: Run | None = None
    try:
        first.wait_line("job 'warm': its at_start run is queued", limit=PATIENCE)
        wait_until("the first start's run", lambda: lines(out) == 1, PATIENCE)
        first.signal(signal.SIGHUP)
        first.wait_line(f"reloaded {jobs}", limit=PATIENCE)
        seen = lines(ticks)
        wait_until("three more ticks after the reload", lambda: lines(ticks) >= seen + 3, PATIENCE)
        assert lines(out) == 1  # a reload is no start
        second = Run(jobs, state)  # a second daemon on the same namespace: its own start
        second.wait_line("job 'warm': its at_start run is queued", limit=PATIENCE)
        wait_until("the second daemon's start run", lambda: lines(out) == 2, PATIENCE)
        for run in (first, second):
            run.signal(signal.SIGTERM)
            assert run.wait() == 0
    finally:
        first.kill()
        if second is not None:
            second.kill()
    again = Run(jobs, state)  # a restart is a start
    try:
        wait_until("the restart's run", lambda: lines(out) == 3, PATIENCE)
        again.signal(signal.SIGTERM)
        assert again.wait() == 0
    finally:
        again.kill()
    assert not never.exists()
    assert out.read_text() == "warm\nwarm\nwarm\n"
