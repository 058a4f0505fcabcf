from __future__ import annotations

from collections.abc import Callable

import pytest

from tickwork import Scheduler
from tickwork.testing import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sched(clock: FakeClock) -> Scheduler:
    return Scheduler(clock)


class Log(list[str]):
    """The SPEC's ``log``: ``log.job(name)`` is a job that appends ``name``."""

    def job(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.append(name)

        run.__qualname__ = f"job({name!r})"
        return run


@pytest.fixture
def log() -> Log:
    return Log()
