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
