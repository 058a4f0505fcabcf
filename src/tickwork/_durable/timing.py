"""The timing thread's loop: look at the store, then sleep until the next look is due.

`DurableScheduler` builds a `TimingLoop` and runs `TimingLoop.run` in its timing thread.
Between two looks the thread sleeps on the `RunTable`'s condition: a poke (a run
ending that freed work, a change another process announced, `stop`) wakes it early.

Two things happen around the sleep, both for cost:

- while it sleeps, `RunTable.next_look` says when it wakes, so that a finish can wait
  for a look due within milliseconds, which records it with its claim (`look_near`,
  `Recorder.carry_when`);
- when it wakes on its own, it may sleep on instead of looking, when another
  scheduler on the store announced a look since its own and nothing is left for it to
  do yet (`Claiming.deferred`): several nodes sharing a store then do not all look at
  every due time, only the one that is taking the runs; and when a change another
  process announced wakes it (`RunTable.hear`), while one that runs the same work
  promised to look at every due time: that one heard the change too.

The words look, poke, carry, defer mean what docs/architecture.md, "Glossary", says.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from tickwork._durable.claims import CARRY_FOR, Claiming
from tickwork._durable.engine import RunTable
from tickwork._durable.recovery import Recovery

__all__ = ["STALL_WARN", "TimingLoop"]

#: The timing loop waking this many seconds later than it meant to is a stall of the
#: process (SIGSTOP, a debugger, swapping, a starved host, a suspend): logged.
STALL_WARN = 10.0


class TimingLoop:
    """The timing thread's loop, its sleep and what it tells the workers of it.

    Args:
        table: The runs held, and the condition the thread sleeps on.
        recovery: Store failures (their back-off is not shortened by pokes) and stalls.
        claiming: Whether to sleep on instead of looking (`Claiming.deferred`).
        step: One look at the store; returns seconds to the next (`DurableScheduler`).
        mono: The monotonic clock.

    """

    def __init__(
        self,
        table: RunTable,
        recovery: Recovery,
        claiming: Claiming,
        *,
        step: Callable[[], float],
        mono: Callable[[], float],
    ) -> None:
        self._table = table
        self._recovery = recovery
        self._claiming = claiming
        self._step = step
        self._mono = mono

    def run(self) -> None:
        """Look, sleep, repeat, until `RunTable.stopping`."""
        table = self._table
        try:
            while True:
                table.looking = True  # finishes may wait for the next look (`look_near`)
                table.refill = False  # the look a run's end brought on: this one
                try:
                    timeout = self._step()
                finally:
                    table.looking = False
                # A finish carried after the look checked (before ``looking`` fell)
                # still gets its look within CARRY_FOR: checked again, under its lock.
                timeout = self._claiming.carry_wait(timeout)
                while (slept := self._sleep_until_look(timeout)) is not None:
                    heard, left = slept
                    more = self._claiming.deferred(heard=heard)
                    if more is None:
                        break
                    # Another node is taking the runs: sleep on (after a change heard,
                    # no longer than this look's own time).
                    timeout = min(more, left) if heard else more
                if table.stopping:
                    return
        finally:
            table.next_look = math.inf  # no finish waits for a look that will not come

    def _sleep_until_look(self, timeout: float) -> tuple[bool, float] | None:
        """Sleep up to ``timeout``; then whether a look may be deferred.

        None: look now (a poke, room to claim, a store failure's back-off over, `stop`).
        ``(False, 0.0)``: the time ran out. ``(True, left)``: a change another process
        announced (`RunTable.hear`) ended it ``left`` seconds early.
        """
        table = self._table
        with table.cond:
            if table.stopping:
                return None
            if self._recovery.failures:
                # Back off: wake-ups do not shorten the wait, only stop() does.
                until = time.monotonic() + timeout
                while not table.stopping and (left := until - time.monotonic()) > 0:
                    self._sleep(left)
                table.wake = table.poked = table.refill = table.heard = False
                return None
            # A wake for room that the last look used up is passed over (`RunTable.woken`).
            if table.woken() or timeout <= 0.0:
                table.heard = False
                return None
            if table.heard:  # announced during the look: it may not have seen it
                table.heard = False
                return True, timeout
            until = self._mono() + timeout
            table.next_look = until  # finishes may wait for it
            self._sleep(timeout)
            table.next_look = math.inf
            woken, heard = table.take_wakes()
            if woken or table.stopping:
                return None
            left = until - self._mono()
            return (True, left) if heard and left > 0.0 else (False, 0.0)

    def _sleep(self, timeout: float) -> None:
        """`wait`, and a warning when it ended much later than meant (a stall)."""
        meant = self._mono() + timeout
        self.wait(timeout)
        late = self._mono() - meant
        if late >= STALL_WARN:
            self._recovery.stalled(late, timeout)

    def wait(self, timeout: float) -> None:
        """Wait for a notify or ``timeout`` seconds with the lock held (tests replace it)."""
        self._table.cond.wait(min(timeout, threading.TIMEOUT_MAX))

    def look_near(self) -> bool:
        """Whether the timing thread's next look is due within `CARRY_FOR` (`Recorder`).

        Also while it is looking (a look that finds finishes carried meanwhile is
        followed by the next within `CARRY_FOR`, `Claiming.step`), and once a run's end
        made room in a full pool (`RunTable.refill`): that end brings on a look at once.
        In a backlog every end does, so the finishes of a burst are recorded by the
        claims of the next runs, one transaction for both.
        """
        table = self._table
        if table.stopping:
            return False
        return table.looking or table.refill or table.next_look - self._mono() <= CARRY_FOR
