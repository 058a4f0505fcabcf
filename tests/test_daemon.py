"""The daemon's mapping of a jobs file to durable jobs, its store options and CLI errors.

In-process and fast: the scheduler is never started; `Daemon.apply` is called on a
SQLite file as a (re)started daemon would.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwork import At, Cron, DurableScheduler, Every
from tickwork.__main__ import main
from tickwork._daemon.daemon import Daemon, run_configured_job
from tickwork._daemon.declare import ENTRY_POINT, fingerprint, spec_for
from tickwork._daemon.filejobs import FileJobs
from tickwork._daemon.jobsfile.config import Config, parse_config
from tickwork._daemon.runlog import RunLog
from tickwork._daemon.state import (
    DaemonError,
    default_namespace,
    default_state_path,
    open_store,
    place_of,
    redact_dsn,
)
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

NOW = 1_800_000_000.0

FILE = """
[[job]]
name = "a"
every = "30s"
command = ["true"]

[[job]]
name = "b"
cron = "0 3 * * *"
timezone = "Europe/Berlin"
overlap = "queue"
missed = "once"
grace = "5m"
command = ["true"]

[[job]]
name = "c"
in = "10s"
command = ["true"]

[[job]]
name = "d"
at = 2027-01-01T00:00:00Z
call = "os:getcwd"
enabled = false
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "s.sqlite3")
    yield s
    s.close()


def daemon(store: SQLiteStore, namespace: str = "jobs", now: float = NOW) -> Daemon:
    return Daemon(
        "jobs.toml",
        DurableScheduler(store, wall_clock=lambda: now),
        place=place_of("jobs.toml", namespace=namespace),
        log=RunLog(sys.stderr),
    )


def file_jobs(d: Daemon) -> FileJobs:
    """The file's jobs over ``d``, as `run_daemon` builds them where it takes them."""
    return FileJobs(d.config_path, d.scheduler, place=d.place, dead_man=d.dead_man)


def test_each_job_maps_to_one_durable_spec() -> None:
    config = parse_config(FILE)
    a, b, c, d = (spec_for(j, namespace="ns", now=NOW) for j in config.jobs)
    assert a.id == "ns/a" and a.func == ENTRY_POINT
    assert a.schedule == Every(30.0)
    assert dict(a.kwargs) == {"job": "a", "fingerprint": fingerprint(config.jobs[0])}
    assert (a.overlap, a.missed, a.grace, a.delivery) == ("skip", "skip", 60.0, "at_most_once")
    assert b.schedule == Cron("0 3 * * *", "Europe/Berlin")
    assert (b.overlap, b.missed, b.grace) == ("queue", "once", 300.0)
    assert c.schedule == At(NOW + 10)
    assert d.schedule == At(1_798_761_600.0) and d.paused


def test_fingerprint_changes_with_any_option_and_not_with_the_line() -> None:
    one = parse_config(FILE).jobs[0]
    moved = parse_config("\n\n" + FILE).jobs[0]
    assert moved.line != one.line and fingerprint(moved) == fingerprint(one)
    changed = parse_config(FILE.replace('command = ["true"]', 'command = ["false"]', 1)).jobs[0]
    assert fingerprint(changed) != fingerprint(one)
    env = parse_config(FILE.replace("[[job]]", '[[job]]\nenv = { A = "1" }', 1)).jobs[0]
    assert fingerprint(env) != fingerprint(one)


def test_apply_is_idempotent_and_a_restart_keeps_a_one_shots_time(store: SQLiteStore) -> None:
    config = parse_config(FILE)
    first = file_jobs(daemon(store)).apply(config)
    assert first.created == ("a", "b", "c", "d") and first.summary() == "4 created"
    c_time = store.get("jobs/c")
    assert c_time is not None and c_time.next_run == NOW + 10
    # A restart 5 s later with the same file: nothing changes, `in` is not re-anchored.
    again = file_jobs(daemon(store, now=NOW + 5)).apply(config)
    assert again.unchanged == ("a", "b", "c", "d") and again.summary() == "4 unchanged"
    c_again = store.get("jobs/c")
    assert c_again is not None and c_again.next_run == NOW + 10


def test_apply_updates_changed_jobs_and_removes_only_its_own(store: SQLiteStore) -> None:
    file_jobs(daemon(store)).apply(parse_config(FILE))
    store.upsert(JobSpec("other/a", ENTRY_POINT, Every(1)), NOW)  # another namespace
    store.upsert(JobSpec("lib-job", "os:getcwd", Every(1)), NOW)  # not a daemon job
    changed = FILE.replace('every = "30s"', 'every = "45s"').split('[[job]]\nname = "c"')[0]
    result = file_jobs(daemon(store, now=NOW + 1)).apply(parse_config(changed))
    assert (result.updated, result.unchanged, result.removed) == (("a",), ("b",), ("c", "d"))
    assert sorted(s.id for s in store.jobs()) == ["jobs/a", "jobs/b", "lib-job", "other/a"]
    a = store.get("jobs/a")
    assert a is not None and a.spec.schedule == Every(45.0) and a.next_run == NOW + 46


def test_a_state_with_foreign_jobs_is_refused(store: SQLiteStore) -> None:
    taken = file_jobs(daemon(store))
    taken.check_store()  # empty: fine
    taken.apply(parse_config(FILE))
    taken.check_store()  # its own jobs: fine
    store.upsert(JobSpec("other/x", ENTRY_POINT, Every(1)), NOW)
    with pytest.raises(DaemonError, match=r"not this file's \(namespace 'jobs'\): 'other/x'\."):
        taken.check_store()


def test_bad_namespace_is_refused(store: SQLiteStore) -> None:
    with pytest.raises(DaemonError, match=r"^--namespace must be .*, got 'a/b'$"):
        daemon(store, namespace="a/b")


def test_the_state_key_is_the_one_earlier_daemons_marked_their_runs_with() -> None:
    # A daemon finds the runs a killed one left by this key (in each run's environment):
    # it must not change from one version to the next. Values of the releases before.
    place = place_of("/etc/t/jobs.toml", state="/var/lib/t/s.db", default_state=True)
    assert (place.namespace, place.key) == ("jobs", "0e73645da4e3802e")
    place = place_of("/etc/t/jobs.toml", state="/x", database="postgresql://u:pw@h/db")
    assert (place.state, place.key) == (None, "5ee15e7f1ba0724a")  # the DSN wins
    assert place.shown == "database postgresql://u:***@h/db"


def test_the_entry_point_refuses_outside_a_daemon() -> None:
    with pytest.raises(RuntimeError, match="runs only inside `tickwork run`"):
        run_configured_job("a")


def test_default_state_path_and_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    path = default_state_path(tmp_path / "my jobs.toml")
    assert path.parent == tmp_path / "xdg" / "tickwork"
    assert path.name.startswith("my-jobs-") and path.suffix == ".sqlite3"
    assert default_state_path(tmp_path / "other" / "my jobs.toml") != path
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")
    assert default_state_path("x.toml").parent == Path.home() / ".local/state/tickwork"
    assert default_namespace("/etc/tickwork/house keeping.toml") == "house-keeping"


def test_open_store_creates_a_private_directory(tmp_path: Path) -> None:
    store = open_store(state=str(tmp_path / "new" / "deeper" / "s.sqlite3"))
    store.close()
    for d in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_database_without_postgres_support_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tickwork.stores.postgres", None)  # as if absent
    with pytest.raises(DaemonError) as exc:
        open_store(database="postgresql://me:secret@db.example/jobs")
    message = str(exc.value)
    assert message.startswith("--database postgresql://me:***@db.example/jobs: PostgreSQL")
    assert "secret" not in message and "--state PATH" in message


def test_database_must_be_postgresql() -> None:
    with pytest.raises(DaemonError, match=r"^--database must be a postgresql:// URL .*'mysql:"):
        open_store(database="mysql://x/y")
    with pytest.raises(DaemonError, match="exactly one of --state and --database"):
        open_store()


def test_redact_dsn() -> None:
    assert redact_dsn("postgresql://u:pw@h:5433/d?x=1") == "postgresql://u:***@h:5433/d?x=1"
    assert redact_dsn("postgresql:///tickwork_test") == "postgresql:///tickwork_test"


def test_run_with_an_unusable_database_exits_1_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tickwork.stores.postgres", None)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FILE)
    assert main(["run", str(jobs), "--database", "postgresql://u:pw@h/d"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tickwork run: --database postgresql://u:***@h/d: PostgreSQL")


def test_run_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FILE)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(jobs), "--for", "soon"])
    assert exc.value.code == 2
    assert "--for: " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(jobs), "--state", "a", "--database", "postgresql:///x"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["run", str(jobs), "--state", str(tmp_path / "s"), "--namespace", "a b"]) == 2
    assert "--namespace must be" in capsys.readouterr().err


def test_jobs_needs_a_source_and_an_existing_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["jobs"]) == 2
    assert "give the jobs file (FILE or -f FILE), --state PATH or --database DSN" in (
        capsys.readouterr().err
    )
    missing = tmp_path / "none.sqlite3"
    assert main(["jobs", "--state", str(missing)]) == 1
    assert f"no state at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_jobs_lists_file_jobs_not_in_the_state_yet(
    tmp_path: Path, store: SQLiteStore, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FILE)
    file_jobs(daemon(store)).apply(parse_config(FILE.split('[[job]]\nname = "d"')[0]))
    state = str(tmp_path / "s.sqlite3")
    assert main(["jobs", str(jobs), "--state", state, "--long"]) == 0
    out = capsys.readouterr().out
    assert "a\n  schedule  every 30 seconds\n  next run  " in out
    assert "b\n  schedule  at 03:00 (Europe/Berlin)\n" in out
    assert (
        "d [paused]\n  paused    in the jobs file (enabled = false)\n  next run  -\n"
        "  last run  - (not in the state yet)\n"
    ) in out


def test_reload_keeps_the_old_config_when_the_file_or_the_state_fails(
    tmp_path: Path,
    store: SQLiteStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tickwork.stores import StoreError

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FILE)
    scheduler = DurableScheduler(store, wall_clock=lambda: NOW)
    d = Daemon(str(jobs), scheduler, place=place_of(str(jobs)), log=RunLog(sys.stderr))
    taken = file_jobs(d)
    assert taken.reload()
    old = taken.config
    jobs.write_text(FILE.replace('every = "30s"', 'every = "soon"'))
    with caplog.at_level("ERROR", logger="tickwork.daemon"):
        assert not taken.reload()
    assert taken.config is old
    assert "still running the previous configuration" in caplog.text
    assert f'{jobs}:4: job "a": every:' in caplog.text

    jobs.write_text(FILE.replace('every = "30s"', 'every = "45s"'))

    def broken() -> None:
        raise StoreError("database is down")

    monkeypatch.setattr(store, "jobs", broken)
    caplog.clear()
    with caplog.at_level("ERROR", logger="tickwork.daemon"):
        assert not taken.reload()
    assert taken.config is old
    assert "the state cannot be read: database is down" in caplog.text


def test_a_change_made_while_the_file_is_read_is_read_at_the_next_watch_turn(
    tmp_path: Path, store: SQLiteStore
) -> None:
    # The stamp is taken before the file is read: a write that lands while a reload
    # reads the file changes the stamp after it, and the next turn reads it again. (Taken
    # after the read, as before, the stamp already matched the new file: never read.)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(FILE)
    scheduler = DurableScheduler(store, wall_clock=lambda: NOW)
    d = Daemon(str(jobs), scheduler, place=place_of(str(jobs)), log=RunLog(sys.stderr))
    reads: list[str] = []

    def load(path: str) -> Config:
        text = Path(path).read_text()
        reads.append(text)
        if len(reads) == 2:  # the reload's read: the file is written meanwhile
            jobs.write_text(FILE.replace('every = "30s"', 'every = "45s"'))
        return parse_config(text, path=path)

    taken = FileJobs(
        str(jobs), scheduler, place=d.place, dead_man=d.dead_man, load=load, watch=True
    )
    taken.take(load(str(jobs)))
    jobs.write_text(FILE.replace('every = "30s"', 'every = "40s"'))
    os.utime(jobs, ns=(1, 1))  # a stamp of its own, however coarse the file system's clock
    taken.follow(signalled=False)  # reads the "40s" file; "45s" is written meanwhile
    assert len(reads) == 2 and 'every = "40s"' in reads[1]
    taken.follow(signalled=False)
    assert len(reads) == 3 and 'every = "45s"' in reads[2]
    state = store.get("jobs/a")
    assert state is not None and state.spec.schedule == Every(45.0)


def test_a_skip_event_counting_more_slots_than_were_logged_logs_the_rest(
    store: SQLiteStore,
) -> None:
    # Issue 39: the slots the durable layer gave up after the last check_skips were
    # looked for up to math.inf, which an Every grid cannot count (OverflowError): the
    # listener raised and the skip line was lost.
    import io
    import json

    from tickwork._core.events import EventKind, RunEvent
    from tickwork._daemon.skips import _Stretch

    out = io.StringIO()
    d = Daemon(
        "jobs.toml", DurableScheduler(store, wall_clock=lambda: NOW + 50), place=place_of("jobs"),
        log=RunLog(out, format="json"),
    )  # fmt: skip
    # check_skips saw (and logged) the slots at NOW and NOW + 10; three more passed since.
    d.skips._stretches["jobs/a"] = _Stretch(NOW, Every(10), seen_until=NOW + 15, logged=2)
    d._on_event(RunEvent(EventKind.SKIPPED, 0, NOW, job_id="jobs/a", name="jobs/a", missed=5))
    line = json.loads(out.getvalue())
    assert (line["job"], line["count"], line["reason"]) == ("a", 3, "overlap")
    assert line["scheduled"] == "2027-01-15T08:00:20.000Z"  # NOW + 20: the first not logged


def test_slots_passing_while_a_run_is_held_are_counted_on_the_grid() -> None:
    from tickwork._daemon.skips import _slots_between

    every = Every(0.1)
    assert _slots_between(every, 100.0, None, 100.35) == (4, 100.0, pytest.approx(100.3))
    count, first, last = _slots_between(every, 100.0, 100.35, 101.0)
    assert (count, first, last) == (7, pytest.approx(100.4), pytest.approx(101.0))
    assert _slots_between(every, 100.0, 101.0, 101.05) == (0, None, None)
    assert _slots_between(Every(1, fixed_delay=True), 0.0, None, 10.0) == (0, None, None)
    cron = Cron("*/5 * * * *", "UTC")
    start = 1_800_000_000.0  # 2027-01-15T08:00:00Z, on the grid
    assert _slots_between(cron, start, None, start + 601) == (3, start, start + 600)
    assert _slots_between(cron, start, start + 1, start + 601) == (2, start + 300, start + 600)
    assert _slots_between(At(start), start, None, start + 60) == (0, None, None)


def test_slots_passing_while_a_run_is_held_skip_the_days_of_the_calendar() -> None:
    # Issue 40: an hourly job on weekdays, held from Friday 12:00 to Monday 12:00, has
    # 25 slots in that span (Friday 12:00-23:00, Monday 00:00-12:00), as the decision
    # counts them; counting the bare grid said 73.
    from datetime import UTC, datetime

    from tickwork import Calendar
    from tickwork._daemon.skips import _slots_between

    every = Every(3600, calendar=Calendar(weekdays=["sat", "sun"]))
    friday = datetime(2026, 1, 9, 12, tzinfo=UTC).timestamp()
    monday = datetime(2026, 1, 12, 12, tzinfo=UTC).timestamp()
    assert _slots_between(every, friday, None, monday) == (25, friday, monday)
    saturday = friday + 12 * 3600
    late = (10, friday + 7200, saturday - 3600)  # 14:00 to 23:00: Saturday 00:00 has none
    assert _slots_between(every, friday, friday + 3600, saturday) == late
    assert _slots_between(every, friday, saturday, saturday + 86400) == (0, None, None)


def test_a_default_output_leaves_the_fingerprint_of_earlier_versions() -> None:
    # Computed by tickwork before `output` existed: an upgrade re-declares nothing.
    text = '[[job]]\nname="backup"\ncron="0 3 * * *"\ncommand=["backup.sh", "--all"]\nretries=2\n'
    (job,) = parse_config(text).jobs
    assert fingerprint(job) == "9df165fb8933"
    (tail,) = parse_config(text + 'output = "tail"\n').jobs
    assert fingerprint(tail) != fingerprint(job)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_job_back_in_the_file_while_its_run_goes_on_keeps_its_enabled(
    store: SQLiteStore, enabled: bool
) -> None:
    """A job gone from the file with a run going is paused until the run ends; back in the
    file before that, it is resumed only if the file enables it (``enabled = false``
    keeps it paused: resuming it would run a job the file disables)."""
    one = '[[job]]\nname = "a"\nevery = "30s"\ncommand = ["true"]\n'
    other = '[[job]]\nname = "o"\nevery = "1h"\ncommand = ["true"]\n'
    taken = file_jobs(daemon(store))
    taken.apply(parse_config(one + other))
    (claim,) = [c for c in store.claim_due(NOW + 60, owner="n", lease_seconds=60, limit=10,
                                           advance=lambda s, now: NOW + 90)
                if c.job_id == "jobs/a"]  # fmt: skip
    assert store.start(claim, started=NOW + 60)
    taken.apply(parse_config(other))  # gone, its run goes on: paused, not removed
    state = store.get("jobs/a")
    assert state is not None and state.paused
    back = one if enabled else one.replace("every", "enabled = false\nevery")
    taken.apply(parse_config(back + other))
    state = store.get("jobs/a")
    assert state is not None and state.paused is (not enabled)


def test_a_stop_signal_while_the_jobs_are_taken_stops_the_daemon_cleanly(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGTERM between the start of `tickwork run` and its serving: a clean stop.

    The signals are caught before the jobs are taken (`Daemon.signals`), so the signal
    is kept and `serve` stops at once: nothing is started, the status is 0. Before,
    the handlers came with `serve`, and a SIGTERM while the state was taken (a second
    daemon told to stop as it started, under load) killed the process (status -15).
    """
    import logging
    import signal

    d = daemon(store)
    caplog.set_level(logging.INFO, logger="tickwork")
    before = signal.getsignal(signal.SIGTERM)
    with d.signals():
        taken = file_jobs(d)
        taken.take(parse_config(FILE))
        signal.raise_signal(signal.SIGTERM)  # caught: this process goes on
        status = d.serve(taken, run_for=600)
    assert status == 0
    assert d.scheduler._thread is None  # never started: nothing ran
    assert "got SIGTERM: shutting down" in caplog.text and "stopped" in caplog.text
    assert signal.getsignal(signal.SIGTERM) is before  # given back as it was
