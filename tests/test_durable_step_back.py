"""A wall clock set back does not lose the slot it passes before it is noticed (issue 26, 11).

The scheduler notices a step of the wall clock at its next look, up to ``poll`` seconds
after the step. A ``* * * * *`` slot that the stepped-back clock passes in between is
due when the step is noticed: the in-memory `tickwork.Scheduler` (and Vixie cron) runs
it at once, and so must `DurableScheduler`, on SQLite and on PostgreSQL alike. Before
the fix the durable one moved the next run to the first fire time after the moment it
noticed the step and so gave that slot up: a whole real minute with no run.

On PostgreSQL the scheduler's wall clock is the database server's (see
``_durable/storetime.py``), carried forward on this host's monotonic clock and read
again every 30 s: a step of the *server's* clock is seen at that read, as a step of
the same size then, and handled the same way. Here both stores get the step from a
`FakeClock` given as ``wall_clock``, which is what the store clock turns into.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.durable_jobs import CALLS
from tickwork import Cron, DurableScheduler, Scheduler
from tickwork.stores import JobSpec
from tickwork.testing import FakeClock, InlineExecutor

#: 2024-01-01 12:00:00 UTC.
NOON = datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp()
POLL = 10.0  # the daemon's default safety poll


def _durable(store: Any, clock: FakeClock) -> DurableScheduler:
    return DurableScheduler(
        store,
        executor=InlineExecutor(),
        max_workers=2,
        poll=POLL,
        wall_clock=clock.wall,
        monotonic_clock=clock,
    )


def test_the_slot_passed_before_a_step_back_is_noticed_runs_at_once(
    open_either_store: Callable[..., Any],
) -> None:
    CALLS.clear()
    clock = FakeClock(1000.0, wall_start=NOON + 50)  # 12:00:50
    ds = _durable(open_either_store(), clock)
    ds.declare(JobSpec("minute", "tests.durable_jobs:record", Cron("* * * * *")))
    state = ds.get("minute")
    assert state is not None and state.next_run == NOON + 60  # 12:01:00
    sleep = ds.step()  # the last look before the step, at 12:00:50
    assert sleep == POLL
    clock.advance(5.0)
    clock.jump_wall(-60.0)  # 12:00:55 -> 11:59:55: the clock is set back a minute
    clock.advance(5.0)  # the next look comes at the poll: the wall reads 12:00:00
    ds.step()
    # 12:00:00 came on the stepped clock between the step and this look: it ran now.
    assert [c[2] for c in CALLS] == [NOON]
    state = ds.get("minute")
    assert state is not None and state.next_run == NOON + 60
    # And 12:01:00 comes a real minute later, not two.
    clock.advance(60.0)
    ds.step()
    assert [c[2] for c in CALLS] == [NOON, NOON + 60]
    ds.stop()


def test_the_in_memory_scheduler_does_the_same() -> None:
    """The behaviour the durable scheduler now matches (`_core/scheduler._sync_wall`)."""
    clock = FakeClock(1000.0, wall_start=NOON + 50)
    s = Scheduler(clock)
    ran: list[float] = []
    s.add(Cron("* * * * *"), lambda: ran.append(clock.wall()))
    s.run_pending()  # a look at 12:00:50
    clock.advance(5.0)
    clock.jump_wall(-60.0)
    clock.advance(5.0)
    assert s.run_pending() == 1
    assert ran == [pytest.approx(NOON)]
