"""The recipes of docs/recipes.md run for real: web servers, their workers, one SQLite file.

Each recipe starts its real server (gunicorn with 4 sync workers, with and without
``--preload``; uWSGI with 4 workers; Flask under gunicorn; FastAPI under uvicorn with 2
workers; Django served by gunicorn while two ``manage.py tickwork`` processes run the
jobs) on a Unix socket, lets a 1-s job run until the slot ledger holds several runs,
stops the server with SIGTERM and checks:

* the ledger: every slot from the first to the last recorded has exactly one entry
  (no gap, none twice), and the job's own record of its runs (a line per run, or a row
  written through Django's ORM) names exactly the slots the ledger says ran ``ok``;
* the stop: the server exits 0, every scheduler said it stopped (uWSGI: after a graceful
  shutdown, which examples/uwsgi.ini makes of SIGTERM), no process of the
  server is left, no claim is held and no node that ran a slot is still alive.

All recipes start together (one module-scoped fixture) and each test waits for its own
with a generous deadline, so the module costs about one recipe's time, not five.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tickwork.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DJANGO = ROOT / "examples" / "django_site"
EVERY = 1.0
WANT_RUNS = 5  # ok runs to wait for before stopping
DEADLINE = 120.0  # seconds; generous for a loaded 2-core machine


@dataclass
class Recipe:
    """One recipe's processes and files."""

    name: str
    dir: Path
    job: str
    commands: list[list[str]]
    cwd: Path
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.dir / "state.db"

    @property
    def runs(self) -> Path:
        return self.dir / "runs.txt"

    @property
    def sock(self) -> Path:
        return self.dir / "http.sock"

    def log(self, i: int = 0) -> str:
        return (self.dir / f"proc{i}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(self.log(i) for i in range(len(self.commands)))


#: Each recipe's commands exactly as docs/recipes.md shows them (the test adds only where
#: to listen, and turns gunicorn's control socket off so that servers do not share one).
#: uWSGI is pyuwsgi's ``uwsgi`` (the dev extra pins it).
COMMANDS = {
    "gunicorn": ["gunicorn -c examples/gunicorn.conf.py -w 4 examples.wsgi_app:app"],
    "gunicorn-preload": [
        "gunicorn -c examples/gunicorn.conf.py -w 4 --preload examples.wsgi_app:app"
    ],
    "uwsgi": ["uwsgi --ini examples/uwsgi.ini --http-socket 127.0.0.1:8000"],
    "flask": ["gunicorn -c examples/gunicorn.conf.py -w 2 'examples.flask_app:create_app()'"],
    "fastapi": ["uvicorn --workers 2 examples.fastapi_app:app"],
    "django": [
        "gunicorn site_config.wsgi",
        "python manage.py tickwork",
        "python manage.py tickwork",
    ],
}
#: The examples' token for tickwork's pages (TICKWORK_HTTP_TOKEN, named "admin").
TOKEN = "recipe-token-0123456789"
JOBS = {"django": "record-tick"}  # the job each recipe's test watches; default "tick"
DJANGO_SETUP = "python manage.py migrate"


def _argv(line: str, sock: Path | None) -> list[str]:
    """A documented command line as run here: this venv's programs, a Unix socket."""
    program, *args = shlex.split(line)
    if program == "python":
        return [sys.executable, *args]
    if program == "uwsgi" and sock is not None:  # the same socket option, our socket
        where = args.index("--http-socket") + 1
        args[where] = str(sock)
    if program == "uwsgi":
        return [str(BIN / "uwsgi"), *args]
    if program == "gunicorn":
        where = [] if sock is None else ["-b", f"unix:{sock}"]
        return [str(BIN / "gunicorn"), "--no-control-socket", *where, *args]
    assert program == "uvicorn", line
    return [str(BIN / "uvicorn"), *([] if sock is None else ["--uds", str(sock)]), *args]


def _recipes(base: Path) -> list[Recipe]:
    made = []
    for name, lines in COMMANDS.items():
        cwd = DJANGO if name == "django" else ROOT
        folder = base / name
        folder.mkdir()
        env = {
            **os.environ,
            "TICKWORK_STATE": str(folder / "state.db"),
            "TICKWORK_EVERY": str(EVERY),
            "TICKWORK_RUNS": str(folder / "runs.txt"),
            "DJANGO_DB": str(folder / "django.db"),
            "TICKWORK_HTTP_TOKEN": TOKEN,
            "PYTHONUNBUFFERED": "1",
        }
        sock = folder / "http.sock"
        commands = [_argv(line, sock if i == 0 else None) for i, line in enumerate(lines)]
        made.append(Recipe(name, folder, JOBS.get(name, "tick"), commands, cwd, env))
    return made


def _launch(recipe: Recipe) -> None:
    if recipe.name == "django":
        subprocess.run(
            [*_argv(DJANGO_SETUP, None), "-v", "0"],
            cwd=recipe.cwd,
            env=recipe.env,
            check=True,
            timeout=120,
        )
    for i, command in enumerate(recipe.commands):
        with open(recipe.dir / f"proc{i}.log", "wb") as log:
            recipe.procs.append(
                subprocess.Popen(
                    command,
                    cwd=recipe.cwd,
                    env=recipe.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: strays are findable
                )
            )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(scope="module")
def recipes() -> Iterator[dict[str, Recipe]]:
    # A short folder: a Unix socket's path is limited to about 100 bytes.
    base = Path(tempfile.mkdtemp(prefix="twrecipes-", dir="/tmp"))
    made = {r.name: r for r in _recipes(base)}
    try:
        for recipe in made.values():
            _launch(recipe)
        yield made
    finally:
        for recipe in made.values():
            for proc in recipe.procs:
                _kill_group(proc.pid)  # only what a failed test left running
                proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=30)
        self._path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self._path)


def _get(
    sock: Path,
    path: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, bytes]:
    conn = _UnixHTTP(sock)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _ledger(recipe: Recipe) -> list[tuple[float, str, int, str]]:
    """``(scheduled, outcome, slots, node)`` of every entry of the recipe's job, oldest first."""
    if not recipe.state.exists():
        return []
    with SQLiteStore(str(recipe.state)) as store:
        entries = store.history(recipe.job, limit=10_000)
    return sorted((e.scheduled, e.outcome, e.slots, e.node) for e in entries)


def _wait_for_runs(recipe: Recipe) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        for proc in recipe.procs:
            assert proc.poll() is None, f"{recipe.name} exited early:\n{recipe.logs()}"
        if sum(1 for entry in _ledger(recipe) if entry[1] == "ok") >= WANT_RUNS:
            return
        time.sleep(0.2)
    pytest.fail(f"{recipe.name}: fewer than {WANT_RUNS} runs in {DEADLINE} s:\n{recipe.logs()}")


def _stop(recipe: Recipe) -> None:
    """SIGTERM to every process of the recipe; each exits 0 and leaves nothing behind."""
    for proc in recipe.procs:
        proc.send_signal(signal.SIGTERM)
    for proc in recipe.procs:
        code = proc.wait(timeout=DEADLINE)
        assert code == 0, f"{recipe.name}: exit {code}:\n{recipe.logs()}"
        deadline = time.monotonic() + 30
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), f"{recipe.name}: a process was left running"


def _check_ledger(recipe: Recipe, ran: list[float]) -> None:
    """Every slot in the ledger's range exactly once; ``ran`` (the job's own record) = ok."""
    ledger = _ledger(recipe)
    slots: list[float] = []
    for scheduled, _, count, _ in ledger:
        slots += [scheduled + k * EVERY for k in range(count)]
    steps = [round((b - a) / EVERY, 6) for a, b in itertools.pairwise(slots)]
    assert steps == [1.0] * len(steps), f"{recipe.name}: a gap or a repeat: {ledger}"
    ok = [scheduled for scheduled, outcome, _, _ in ledger if outcome == "ok"]
    assert len(ok) >= WANT_RUNS
    assert sorted(ran) == ok, f"{recipe.name}: the job ran {sorted(ran)}, the ledger says {ok}"
    with SQLiteStore(str(recipe.state)) as store:
        held = [c for job in store.jobs() for c in job.claims if c.owner]
        assert held == [], f"{recipe.name}: claims still held after the stop: {held}"
        nodes = {node for *_, node in ledger if node}
        # A node that another one found gone (and holding nothing) was forgotten, its
        # row deleted; `live_owners` cannot judge an unlisted owner and returns it, so
        # only the owners still listed are asked about.
        with contextlib.closing(sqlite3.connect(recipe.state)) as conn:
            listed = {owner for (owner,) in conn.execute("SELECT owner FROM nodes")}
        alive = store.live_owners(nodes & listed)
        assert alive == set(), f"{recipe.name}: a node is still alive: {alive}"


def _runs_file(recipe: Recipe) -> tuple[list[float], set[int]]:
    lines = [line.split() for line in recipe.runs.read_text().splitlines()]
    return [float(slot) for slot, _ in lines], {int(pid) for _, pid in lines}


def _started_and_stopped(recipe: Recipe, workers: int) -> None:
    log = recipe.logs()
    assert log.count("tickwork started in process") == workers, log
    assert log.count("tickwork stopped in process") == workers, log


@pytest.mark.parametrize("name", ["gunicorn", "gunicorn-preload"])
def test_gunicorn_four_workers_run_each_slot_once(recipes: dict[str, Recipe], name: str) -> None:
    recipe = recipes[name]
    _wait_for_runs(recipe)
    status, body = _get(recipe.sock, "/")
    assert status == 200 and b'"tick": "ok"' in body, body
    _stop(recipe)
    _started_and_stopped(recipe, 4)
    ran, _ = _runs_file(recipe)
    _check_ledger(recipe, ran)


def test_uwsgi_four_workers_run_each_slot_once_and_stop_gracefully(
    recipes: dict[str, Recipe],
) -> None:
    recipe = recipes["uwsgi"]
    _wait_for_runs(recipe)
    status, body = _get(recipe.sock, "/")
    assert status == 200 and b'"tick": "ok"' in body, body
    _stop(recipe)  # SIGTERM: examples/uwsgi.ini makes it a graceful shutdown
    log = recipe.logs()
    assert "graceful shutdown triggered" in log and "goodbye to uWSGI." in log, log
    _started_and_stopped(recipe, 4)  # every worker ran uwsgi.atexit to its end
    ran, _ = _runs_file(recipe)
    _check_ledger(recipe, ran)


def test_the_uwsgi_config_in_docs_recipes_is_the_tested_file() -> None:
    text = (ROOT / "docs" / "recipes.md").read_text()
    shown = re.findall(r"```ini\n(.*?)```", text, re.DOTALL)
    assert shown == [(ROOT / "examples" / "uwsgi.ini").read_text()]


def _check_mounted_pages(recipe: Recipe) -> None:
    """tickwork's pages and API at /ops/tickwork: the token reads and acts, nobody else."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    job = recipe.job
    status, body = _get(recipe.sock, f"/ops/tickwork/api/jobs/{job}", headers=bearer)
    assert status == 200 and json.loads(body)["outcome"] == "ok", body
    status, body = _get(recipe.sock, "/ops/tickwork/", headers=bearer)
    assert status == 200 and f'href="/ops/tickwork/jobs/{job}"'.encode() in body, body[-500:]
    assert _get(recipe.sock, "/ops/tickwork/")[0] == 401
    # An action that leaves the ledger as it is: a backfill's dry run.
    path, asked = (
        f"/ops/tickwork/api/jobs/{job}/backfill",
        b'{"from": "1m", "to": "now", "dry_run": true}',
    )
    json_body = {"Content-Type": "application/json"}
    assert _get(recipe.sock, path, "POST", json_body, asked)[0] == 401
    status, body = _get(recipe.sock, path, "POST", json_body | bearer, asked)
    assert status == 200 and json.loads(body)["by"] == "admin", body


def test_flask_under_gunicorn(recipes: dict[str, Recipe]) -> None:
    recipe = recipes["flask"]
    _wait_for_runs(recipe)
    _check_mounted_pages(recipe)
    _stop(recipe)
    _started_and_stopped(recipe, 2)
    ran, _ = _runs_file(recipe)
    _check_ledger(recipe, ran)


def test_fastapi_lifespan_under_uvicorn_workers(recipes: dict[str, Recipe]) -> None:
    recipe = recipes["fastapi"]
    _wait_for_runs(recipe)
    _check_mounted_pages(recipe)
    _stop(recipe)
    log = recipe.logs()
    assert log.count("Application startup complete.") == 2, log
    assert log.count("Application shutdown complete.") == 2, log
    ran, _ = _runs_file(recipe)
    _check_ledger(recipe, ran)


def test_django_command_runs_the_settings_jobs_through_the_orm(
    recipes: dict[str, Recipe],
) -> None:
    recipe = recipes["django"]
    _wait_for_runs(recipe)
    status, body = _get(recipe.sock, "/ticks/")
    assert status == 200 and b'"job": "record-tick"' in body, body
    _check_mounted_pages(recipe)
    _stop(recipe)
    for i in (1, 2):  # both manage.py tickwork processes
        said = [line for line in recipe.log(i).splitlines() if line.startswith("tickwork: ")]
        assert said == [
            "tickwork: running 2 jobs",
            "tickwork: stopping",
            "tickwork: stopped",
        ], recipe.log(i)
    db = sqlite3.connect(recipe.dir / "django.db")
    try:
        rows = db.execute("SELECT job, slot FROM ticks_tick").fetchall()
    finally:
        db.close()
    assert {job for job, _ in rows} == {"record-tick"}
    _check_ledger(recipe, [slot for _, slot in rows])
    with SQLiteStore(str(recipe.state)) as store:
        assert {job.id for job in store.jobs()} == {"record-tick", "prune-ticks"}


def test_the_commands_in_docs_recipes_are_the_ones_tested() -> None:
    """Every command line of docs/recipes.md's sh blocks is one these tests run."""
    text = (ROOT / "docs" / "recipes.md").read_text()
    tested = {line for lines in COMMANDS.values() for line in lines} | {DJANGO_SETUP}
    shown = [
        re.sub(r"^(\w+=\S+ )+", "", line)  # without the environment it is given
        for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
        if line.strip()
    ]
    assert len(shown) >= 7
    assert [line for line in shown if line not in tested] == []
    assert tested <= set(shown)


def test_webjobs_start_leaves_a_parents_scheduler_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a forked child sees: a scheduler started by another process is not used,
    stopped or closed (closing an inherited SQLite connection can harm the parent's
    database); the child opens its own, and stops only its own."""
    from examples import webjobs

    monkeypatch.setenv("TICKWORK_STATE", str(tmp_path / "state.db"))
    monkeypatch.setenv("TICKWORK_RUNS", str(tmp_path / "runs.txt"))
    parents = webjobs.start()
    try:
        assert webjobs.start() is parents  # once per process
        parents_store = webjobs._store
        monkeypatch.setattr(webjobs, "_pid", -1)  # as if started before a fork
        assert webjobs.scheduler() is None
        ours = webjobs.start()
        assert ours is not parents and webjobs.scheduler() is ours
        assert webjobs._inherited[-2:] == [parents, parents_store]
        webjobs.stop()
        assert webjobs.scheduler() is None
        assert [j.id for j in parents.jobs()] == ["tick"]  # the parent's store still open
    finally:
        webjobs.stop()  # ours, if the test failed before
        parents.stop()
        assert parents_store is not None
        parents_store.close()
        webjobs._inherited.clear()


def test_webjobs_stop_from_a_signal_during_start_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uWSGI exits a worker from its signal handler, on whatever the main thread was doing,
    and runs ``uwsgi.atexit`` there: a SIGTERM in the first moments of a worker can call
    stop() while start() holds the lock on the same thread. It must return, not hang."""
    from examples import webjobs

    monkeypatch.setenv("TICKWORK_STATE", str(tmp_path / "state.db"))
    monkeypatch.setenv("TICKWORK_RUNS", str(tmp_path / "runs.txt"))
    stopped = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: stopped.append(webjobs.stop()))
    try:
        with webjobs._lock:  # as start() holds it
            os.kill(os.getpid(), signal.SIGUSR1)
            deadline = time.monotonic() + 30
            while not stopped and time.monotonic() < deadline:
                time.sleep(0.01)  # the handler runs on this thread, between bytecodes
        assert stopped == [None]
        webjobs.start()
        os.kill(os.getpid(), signal.SIGUSR1)  # and a stop of a started scheduler, too
        deadline = time.monotonic() + 30
        while len(stopped) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert webjobs.scheduler() is None
    finally:
        signal.signal(signal.SIGUSR1, previous)
        webjobs.stop()
