"""Wall time by the store's clock: what a `DurableScheduler` on PostgreSQL judges by.

Nodes on several hosts compare due times and lease ends. With each node's own clock, a
node whose clock runs 30 s ahead runs jobs 30 s early and takes over leases that are
still live. `StoreTime` reads the store's clock (`tickwork.stores.StoreClock`: the
database server's), carries it forward on the node's monotonic clock, and reads it
again every `REFRESH` seconds; the node's own wall clock is only compared with it, to
log the skew.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from tickwork.stores.contract import StoreClock

__all__ = ["REFRESH", "SKEW_WARN", "StoreTime"]

_log = logging.getLogger("tickwork.durable")

#: Seconds between reads of the store's clock (one short read-only query).
REFRESH: Final = 30.0
#: A node clock this far off the store's (seconds) is logged as a warning.
SKEW_WARN: Final = 1.0
#: A later reading this close to the carried-forward time is not applied (seconds): the
#: monotonic clock drifts by microseconds per second, and small corrections would only
#: make the time jitter back and forth by a round trip.
_KEEP: Final = 0.05
#: The skew is logged again when it has moved this far since it was last logged.
_RELOG: Final = 0.5
#: Readings taken at the first read; the one with the shortest round trip is kept.
_FIRST_READS: Final = 3


class StoreTime:
    """A zero-argument clock: the store's time now, in UTC POSIX seconds.

    The first call reads the store (and so may raise `tickwork.stores.StoreError`);
    later calls only read the monotonic clock, except `refresh`, which the timing
    thread calls on every look at the store.

    Args:
        store: A store with a clock of its own.
        monotonic: The node's monotonic clock (seconds of real time, never stepping).
        owner: Named in the log lines.
        node_wall: The node's own wall clock, read only to report the skew
            (default `time.time`, looked up at each call).

    """

    def __init__(
        self,
        store: StoreClock,
        monotonic: Callable[[], float],
        *,
        owner: str,
        node_wall: Callable[[], float] | None = None,
    ) -> None:
        self._store = store
        self._mono = monotonic
        self._owner = owner
        self._node_wall = node_wall
        self._lock = threading.Lock()
        self._base: tuple[float, float] | None = None  # (store time, monotonic) at a read
        self._read_at = 0.0  # monotonic time of the last read
        self._logged: float | None = None  # the skew last logged
        self.skew: float | None = None
        """The node's wall clock minus the store's, at the last read (None: not read)."""

    def __call__(self) -> float:
        base = self._base
        if base is None:
            with self._lock:
                if self._base is None:
                    self._read(_FIRST_READS)
                base = self._base
            assert base is not None
        return base[0] + (self._mono() - base[1])

    def refresh(self) -> None:
        """Read the store's clock again if `REFRESH` seconds have passed since the last read.

        Raises:
            StoreError: The store cannot be reached (the carried-forward time stays).

        """
        if self._base is not None and self._mono() - self._read_at < REFRESH:
            return
        with self._lock:
            self._read(1)

    def _read(self, reads: int) -> None:
        best: tuple[float, float, float] | None = None
        for _ in range(reads):
            reading = self._store.read_clock(self._mono)
            if best is None or reading[2] < best[2]:
                best = reading
        assert best is not None
        store_time, mono, _uncertainty = best
        node_wall = self._node_wall() if self._node_wall is not None else time.time()
        now_mono = self._mono()
        self._read_at = now_mono
        if self._base is None or abs(self._base[0] + (mono - self._base[1]) - store_time) >= _KEEP:
            self._base = (store_time, mono)
        self.skew = node_wall - (store_time + (now_mono - mono))
        self._report(_uncertainty)

    def _report(self, uncertainty: float) -> None:
        skew = self.skew
        assert skew is not None
        if self._logged is not None and abs(skew - self._logged) < _RELOG:
            return
        self._logged = skew
        _log.log(
            logging.WARNING if abs(skew) >= SKEW_WARN else logging.INFO,
            "durable scheduler %r: this node's clock is %+.3f s off the store's"
            " (within %.3f s); due times and leases are judged by the store's clock",
            self._owner,
            skew,
            uncertainty,
        )
