"""Job functions for the durable scheduler tests, named by import path."""

from __future__ import annotations

from typing import Any

from tickwork import DurableScheduler
from tickwork.testing import FakeClock

#: (args, kwargs, scheduled) of every call, in order.
CALLS: list[tuple[tuple[Any, ...], dict[str, Any], float | None]] = []
#: The test's clock, for jobs that take (fake) time.
CLOCK: FakeClock | None = None


def record(*args: Any, **kwargs: Any) -> None:
    """Note the call and the slot it runs."""
    claim = DurableScheduler.current_claim()
    CALLS.append((args, kwargs, None if claim is None else claim.scheduled))


def slow(seconds: float) -> None:
    """A job that takes ``seconds`` of the test's fake time."""
    assert CLOCK is not None
    CLOCK.advance(seconds)
    record(seconds)


def boom() -> None:
    """A job that fails."""
    raise RuntimeError("boom")


def reported() -> None:
    """A job that reports its own failure, already described."""
    from tickwork._core.errors import JobFailed

    raise JobFailed("exit=3\nthe end of its output")


def noisy(text: str) -> None:
    """A job that keeps ``text`` as its output (`DurableScheduler.record_output`)."""
    DurableScheduler.record_output(text)
    record(text)


def noisy_fail(text: str) -> None:
    """A job that keeps ``text`` as its output, then fails."""
    DurableScheduler.record_output(text)
    raise RuntimeError("after the output")


def too_slow() -> None:
    """A job that gives up as timed out."""
    raise TimeoutError("the export took more than 30 s")


def cancelled() -> None:
    """A run stopped on purpose, as ``overlap = "replace"`` stops one."""
    from tickwork._core.errors import JobCancelled

    raise JobCancelled("cancelled (made way for the next run)")


#: Calls of `flaky` per key, and how many of them fail before one succeeds.
FLAKY: dict[str, int] = {}


def slow_flaky(key: str, fails: int, seconds: float) -> None:
    """Takes ``seconds`` of the test's fake time, and fails as `flaky` does."""
    assert CLOCK is not None
    CLOCK.advance(seconds)
    flaky(key, fails)


def flaky(key: str, fails: int) -> None:
    """Fails the first ``fails`` calls for ``key``, then succeeds."""
    FLAKY[key] = FLAKY.get(key, 0) + 1
    if FLAKY[key] <= fails:
        DurableScheduler.record_output(f"attempt {FLAKY[key]} output")
        raise RuntimeError(f"flaky failure {FLAKY[key]}")
    record(key)


#: Released by a test to let `blocked` return.
RELEASE = __import__("threading").Event()
#: Set by `blocked` when it starts.
ENTERED = __import__("threading").Event()


def blocked() -> None:
    """Blocks (a real thread) until the test sets `RELEASE`."""
    ENTERED.set()
    if not RELEASE.wait(60):
        raise RuntimeError("never released")
    record("blocked")


#: Runs of `crowd` going on now ("now") and the most at once ("peak"), under `CROWD_SEEN`.
CROWD = {"now": 0, "peak": 0}
#: Notified whenever `CROWD` changes.
CROWD_SEEN = __import__("threading").Condition()
#: Released by a test to let the runs of `crowd` return.
CROWD_GO = __import__("threading").Event()


def crowd() -> None:
    """Counts itself among the runs going at once, then blocks until `CROWD_GO`."""
    with CROWD_SEEN:
        CROWD["now"] += 1
        CROWD["peak"] = max(CROWD["peak"], CROWD["now"])
        CROWD_SEEN.notify_all()
    try:
        if not CROWD_GO.wait(60):
            raise RuntimeError("never released")
    finally:
        with CROWD_SEEN:
            CROWD["now"] -= 1
            CROWD_SEEN.notify_all()


def sleeper(seconds: float, marker: str) -> None:
    """For isolation="process": writes its pid to ``marker``, prints, then sleeps."""
    import os
    import sys
    import time

    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    print("child says hello", flush=True)
    print("child complains", file=sys.stderr, flush=True)
    time.sleep(seconds)


def child_fails() -> None:
    """For isolation="process": prints, then fails."""
    print("about to fail", flush=True)
    raise ValueError("child broke")


def child_ok(path: str, text: str) -> None:
    """For isolation="process": writes ``text`` to ``path``."""
    with open(path, "w") as f:
        f.write(text)


async def slow_coro(seconds: float) -> None:
    """A coroutine job that sleeps ``seconds`` (real time)."""
    import asyncio

    await asyncio.sleep(seconds)
    record("slow_coro")


LAMBDA = lambda: None  # noqa: E731  (a lambda reached by name: refused for isolation="process")


def flaky_file(path: str, fails: int) -> None:
    """Fails the first ``fails`` calls (counted in the file ``path``: another process)."""
    from pathlib import Path

    counter = Path(path)
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n <= fails:
        raise RuntimeError(f"flaky call {n}")


def stuck_child(marker: str) -> None:
    """For isolation="process" in the daemon: writes its pid to ``marker``, then hangs."""
    import os
    import time

    print("stuck child starts", flush=True)
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)


def _make_closure() -> Any:
    def inner() -> None:
        pass

    return inner


CLOSURE = _make_closure()  # a closure reached by name: refused for isolation="process"


def keep_secret(marker: str, secret: str) -> None:
    """For isolation="process": writes its pid and ``secret`` to ``marker``, then hangs."""
    import os
    import sys
    import time

    with open(marker + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n{secret}\n{sys.stdin.read()!r}")
    os.replace(marker + ".tmp", marker)
    time.sleep(600)
