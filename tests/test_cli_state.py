"""The state every verb opens, through the real command line (issue 39).

A damaged SQLite state (garbage, truncated, pages overwritten) is refused by every verb
that opens it and by the daemon, with one line that names the file, says what is wrong
and how to recover, a non-zero status and the file left as it was.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

#: Every verb that opens the state, with what it needs after the jobs file.
STATE_VERBS = (
    ("run", "--for", "5s"),
    ("jobs",),
    ("history",),
    ("pause", "tick"),
    ("resume", "tick"),
    ("trigger", "tick"),
    ("skip-next", "tick"),
    ("backfill", "tick", "--from", "1h", "--to", "now"),
    ("cancel", "tick", "--list"),
    ("enqueue", "tests.durable_jobs:record"),
)


def tickwork(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tickwork", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def jobs_file(where: Path, extra: str = "") -> Path:
    path = where / "jobs.toml"
    body = """\
        [[job]]
        name = "tick"
        command = ["true"]
        every = "1h"
        """
    path.write_text(textwrap.dedent(body) + extra)
    return path


def overwrite_pages(data: bytes) -> bytes:
    noise = random.Random(39).randbytes(2 * 4096)
    return data[: 2 * 4096] + noise + data[4 * 4096 :]


@pytest.fixture(scope="module")
def good_state(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a state a real daemon wrote for `jobs_file`."""
    where = tmp_path_factory.mktemp("made")
    state = where / "state.sqlite3"
    made = tickwork("run", str(jobs_file(where)), "--state", str(state), "--for", "1s")
    assert made.communicate(timeout=120) and made.returncode == 0
    assert state.stat().st_size > 6 * 4096  # the damage reaches past the schema
    return state.read_bytes()


#: Every verb opens the state the same way: the damages the open used to miss meet
#: every verb, the others a few.
SOME = tuple(v for v in STATE_VERBS if v[0] in ("run", "history", "trigger"))


@pytest.mark.parametrize(
    ("damage", "verbs"),
    [
        pytest.param(lambda b: b"\x5a\xa5" * (len(b) // 2), SOME, id="garbage"),
        pytest.param(lambda b: b[: 5 * 4096], SOME, id="truncated"),
        pytest.param(overwrite_pages, STATE_VERBS, id="pages-overwritten"),
    ],
)
def test_a_damaged_state_is_refused_by_every_verb_in_one_line(
    tmp_path: Path,
    good_state: bytes,
    damage: Callable[[bytes], bytes],
    verbs: tuple[tuple[str, ...], ...],
) -> None:
    path = jobs_file(tmp_path)
    state = tmp_path / "state.sqlite3"
    state.write_bytes(damage(good_state))
    state.chmod(0o600)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    procs = {
        verb[0]: tickwork(verb[0], "-f", str(path), *verb[1:], "--state", str(state))
        for verb in verbs
    }
    ended = {verb: (proc.communicate(timeout=120), proc.returncode) for verb, proc in procs.items()}
    for verb, ((out, err), status) in ended.items():
        assert status == 1, (verb, out, err)
        assert "Traceback" not in err and out == "", (verb, out, err)
        lines = err.splitlines()
        assert len(lines) == 1, (verb, err)
        assert str(state) in lines[0] and "refusing to use it" in lines[0], (verb, err)
        assert "restore it from a backup" in lines[0], (verb, err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_failing_host_check_locks_no_verb_out(tmp_path: Path) -> None:
    """A job's directory, env file (and user, as root) gone: the verbs still work."""
    workdir, env = tmp_path / "work", tmp_path / "job.env"
    workdir.mkdir()
    env.write_text("GREETING=hi\n")
    user = 'user = "{}"\n' if os.geteuid() == 0 else "{}"
    held = f"""
        [[job]]
        name = "held"
        command = ["true"]
        every = "1h"
        working_dir = "{workdir}"
        env_file = "{env}"
        {user}"""
    path = jobs_file(tmp_path, textwrap.dedent(held.format("nobody")))
    state = str(tmp_path / "state.sqlite3")
    made = tickwork("run", str(path), "--state", state, "--for", "1s")
    assert made.communicate(timeout=120) and made.returncode == 0
    # The incident: the directory and the env file are gone, and so is the user.
    workdir.rmdir()
    env.unlink()
    jobs_file(tmp_path, textwrap.dedent(held.format("tw-deleted-user-39")))
    verbs = [
        ("jobs",),
        ("history",),
        ("pause", "tick"),
        ("trigger", "held"),
        ("skip-next", "held"),
        ("cancel", "held", "--list"),
        ("resume", "tick"),
    ]
    procs = [tickwork(v[0], "-f", str(path), *v[1:], "--state", state) for v in verbs]
    procs.append(tickwork("next", "--file", str(path), "--job", "held", "-n", "1"))
    procs.append(tickwork("validate", str(path)))
    ended = [(proc.communicate(timeout=120), proc.returncode) for proc in procs]
    for verb, ((out, err), status) in zip([*verbs, ("next",)], ended, strict=False):
        assert status == 0 and err == "", (verb, out, err)
    (_, err), status = ended[-1]  # validate still checks the host
    assert status == 2 and "does not exist" in err and "cannot read" in err, err
