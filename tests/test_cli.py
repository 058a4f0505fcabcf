from __future__ import annotations

import io
import subprocess
import sys

import pytest

from tickwork.__main__ import main
from tickwork._cli.demo import run_demo

EXAMPLE_1 = """\
t=0    s.schedule(5, job("backup"))               -> 1
t=0    s.schedule(2, job("rotate"))               -> 2
t=0    s.schedule(3, job("probe"), interval=3)    -> 3
t=0    s.schedule(4, job("noop"))                 -> 4
t=0    s.cancel(4)                                -> True
t=1    s.run_pending()                            -> 0
t=2    s.run_pending()                            -> 1
t=6    s.run_pending()                            -> 2
t=9    s.run_pending()                            -> 1
t=9    s.next_run_in()                            -> 3.0
t=9    s.cancel(3)                                -> True
t=20   s.run_pending()                            -> 0
t=20   s.cancel(3)                                -> False
t=20   s.next_run_in()                            -> None
"""


def test_demo_reproduces_example_1_on_a_real_clock() -> None:
    out = io.StringIO()
    # 20 schedule-seconds in 2 s: each scripted call has 100 ms of slack before the
    # demo's whole-second clock would read the next second (a loaded machine stalls).
    assert run_demo(out, speed=10.0) == 0
    lines = out.getvalue().splitlines()
    calls = "\n".join(line for line in lines if line.startswith("t=")) + "\n"
    assert calls == EXAMPLE_1
    ran = [line.split()[1] for line in lines if line.lstrip().startswith("ran ")]
    assert ran == ["rotate", "probe", "backup", "probe"]
    assert lines[-1] == "log == ['rotate', 'probe', 'backup', 'probe']"


def test_demo_output_holds_when_the_machine_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every sleep overshoots by 1.5 script-seconds, as on a badly loaded machine: the
    # scheduler must still see each scripted moment, not the moment the call came.
    now = [0.0]

    def monotonic() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds + 0.15

    monkeypatch.setattr("tickwork._cli.demo.time.monotonic", monotonic)
    monkeypatch.setattr("tickwork._cli.demo.time.sleep", sleep)
    out = io.StringIO()
    assert run_demo(out, speed=10.0) == 0
    lines = out.getvalue().splitlines()
    calls = "\n".join(line for line in lines if line.startswith("t=")) + "\n"
    assert calls == EXAMPLE_1
    assert lines[-1] == "log == ['rotate', 'probe', 'backup', 'probe']"


def test_help_speaks_to_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    demo = capsys.readouterr().out
    for text in (top, demo):
        assert "SPEC" not in text and "Example 1" not in text
    assert "demo" in top and "scheduler" in top.split("demo", 1)[1].lower()
    assert "tickwork run --help" in " ".join(demo.split())


def test_demo_rejects_bad_speed() -> None:
    with pytest.raises(ValueError, match=r"^speed must be > 0, got 0$"):
        run_demo(io.StringIO(), speed=0)


def test_main_demo_and_module_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", "demo", "--speed", "400"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert "log == ['rotate', 'probe', 'backup', 'probe']" in proc.stdout


def test_main_requires_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_main_next_prints_fire_times(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["next", "0 9 * * 1-5", "--tz", "Europe/Berlin", "-n", "2"]
    assert main([*argv, "--after", "2026-12-02T00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "2026-12-02T09:00:00+01:00" in out
    assert "2026-12-03T08:00:00Z" in out


def test_main_next_bad_expression_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "0 0 30 2 *"]) == 2
    assert capsys.readouterr().err == (
        "tickwork next: error: day-of-month: 30 never occurs in February in `0 0 30 2 *`\n"
    )


def test_a_reader_that_goes_away_ends_the_verb_quietly() -> None:
    # `tickwork next ... | head -1`: the pipe closes after the first line; the verb must
    # stop with SIGPIPE's status and no traceback on stderr. 50,000 lines are 2.8 MB, far
    # past what a pipe holds (64 KiB, 1 MiB at most by default), in a fourth of the CPU
    # that 200,000 took (the verb reckons them all before it writes).
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickwork", "next", "* * * * *", "-n", "50000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"# * * * * *")
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert err == b""
