"""Group commit: the starts and finishes of concurrent workers in one store transaction.

Each durable run records a start and a finish, each a committed (fsynced) transaction
when made alone. `Recorder` lets the worker threads of one `DurableScheduler` share
them: a worker adds its record to a queue; if no transaction is being written, it
becomes the writer, takes everything queued (its own record and whatever others added
meanwhile) and writes it with one `BatchRecorder.record` call, then the next batch,
until nothing is queued; otherwise it waits for the writer that takes its record (a
start: the run may not begin before its start is committed; it waits on a lock of its
own, which the writer releases, so only its own commit wakes it) or returns at once (a
finish: the writer commits it, then calls back). Nothing waits on a timer: a lone
worker writes at once, exactly as a single call would, and while one transaction
commits the next batch gathers. Every record is as durable as a single call.

One exception to "a finish is written at once": while the scheduler's next look at the
store is only milliseconds away (`carry_when`), a finish nobody else is writing waits
for it, and that look records it in its claim's transaction (`CarryingClaim`): at
sparse rates, one transaction per run instead of two. The look takes the carried
finishes (`take_carried`) and reports how they went (`settle`), or has them written
on their own (`write_now`).
"""

from __future__ import annotations

import _thread
import logging
import threading
from collections.abc import Callable
from typing import Final

from tickwork.stores import Claim, Store, StoreError
from tickwork.stores.contract import BatchRecorder, Finish, Start

__all__ = ["MAX_BATCH", "Recorder"]

_log = logging.getLogger("tickwork.durable")

#: The most records one transaction takes; the rest wait for the next one.
MAX_BATCH: Final = 256


class _Op:
    """One queued record and, once written, its result (or what to call with it)."""

    __slots__ = ("done", "error", "item", "result", "then", "waiter")

    def __init__(
        self, item: Start | Finish, then: Callable[[bool | BaseException], None] | None = None
    ) -> None:
        self.item = item
        self.then = then
        self.done = False
        self.result = False
        self.error: BaseException | None = None
        #: Held while its submitter waits for another thread to write it; released
        #: once it is done, or to make that thread the writer (``done`` still false).
        self.waiter: _thread.LockType | None = None


class Recorder:
    """Writes starts and finishes for many threads, batched into shared transactions.

    Args:
        store: A store with `BatchRecorder.record` (and the single calls, used to
            isolate a malformed record when a batch is refused as a whole).

    """

    def __init__(self, store: BatchRecorder) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"store must implement tickwork.stores.Store, got {store!r}")
        self._store = store
        self._lock = threading.Lock()
        self._queue: list[_Op] = []
        self._writing = False
        self._carry_if: Callable[[], bool] | None = None
        self._carried: list[_Op] = []
        self.batches = 0
        """Transactions written so far (for tests and benchmarks)."""
        self.records = 0
        """Records written so far."""

    def start(self, claim: Claim, started: float) -> bool:
        """`Store.start`, shared with concurrent callers; returns its result or raises."""
        return self._submit(_Op(Start(claim, started)))

    def finish(self, finish: Finish, then: Callable[[bool | BaseException], None]) -> None:
        """`Store.finish`, shared with concurrent callers; ``then`` gets its result.

        ``then(result)`` is called once the finish is committed, with what
        `Store.finish` returned or the exception it raised, on whichever thread wrote
        the transaction (before this returns, when no other thread was writing: a
        single-threaded caller sees the finish recorded when the call returns). While
        another thread writes, this returns at once and that thread writes the finish
        with the next batch: a worker does not wait for its finish to commit, and the
        finishes of a burst share transactions with the starts of the next runs.
        """
        self._submit(_Op(finish, then))

    def carry_when(self, near: Callable[[], bool] | None) -> list[_Op]:
        """Let a finish wait for the next look while ``near()`` says it is close.

        ``None``: never (again); the finishes carried so far are returned, for the
        caller to write (`write_now`). ``near`` is called with this recorder's lock
        held, so a finish is carried only while it is set.
        """
        with self._lock:
            self._carry_if = near
            if near is not None:
                return []
            ops, self._carried = self._carried, []
        return ops

    def take_carried(self) -> list[_Op]:
        """The finishes waiting for this look (they are the caller's to `settle` now)."""
        with self._lock:
            ops, self._carried = self._carried, []
        return ops

    @property
    def carrying(self) -> bool:
        """Whether finishes are waiting for the next look.

        Read under the lock that carries them: a finish carried before this is seen.
        """
        with self._lock:
            return bool(self._carried)

    def settle(self, ops: list[_Op], result: list[bool] | BaseException) -> None:
        """The look wrote the carried ``ops`` (``result``: per op) or failed: call back."""
        for i, op in enumerate(ops):
            if isinstance(result, BaseException):
                op.error = result
            else:
                op.result = result[i]
        if not isinstance(result, BaseException):
            self.batches += 1
            self.records += len(ops)
        self._done(ops)

    def write_now(self, ops: list[_Op]) -> None:
        """Write carried ``ops`` in a transaction of their own (no look can take them)."""
        if ops:
            self._write(ops)

    def _submit(self, op: _Op) -> bool:
        with self._lock:
            if op.then is not None and not self._writing:
                near = self._carry_if
                if near is not None and near():
                    self._carried.append(op)  # the next look records it (see the module)
                    return False
            self._queue.append(op)
            if not self._writing:
                self._writing = True
                waiter = None
            elif op.then is not None:
                return False  # the writing thread takes it with its next batch
            else:
                waiter = op.waiter = _thread.allocate_lock()
                waiter.acquire()
        if waiter is not None:
            # The writer takes everything queued before it stops, so this op's own
            # release is the only wake-up it needs (not done: this thread writes now).
            waiter.acquire()
        if not op.done:
            self._drain()
        if op.error is not None:
            if op.then is not None:
                return False
            raise op.error
        return op.result

    def _drain(self) -> None:
        """Write batches until nothing is queued (a finish nobody waits for included)."""
        lock = self._lock
        queue = self._queue
        try:
            while True:
                with lock:
                    if not queue:
                        self._writing = False
                        return
                    batch = queue[:MAX_BATCH]
                    del queue[:MAX_BATCH]
                self._write(batch)
        except BaseException:
            # Unwinding (a callback raised, an interrupt): a waiting start takes over
            # the writing, or the next submitter does.
            with lock:
                for queued in queue:
                    if queued.waiter is not None:
                        queued.waiter.release()
                        break
                else:
                    self._writing = False
            raise

    def _write(self, batch: list[_Op]) -> None:
        """One transaction for ``batch``; every op ends done, with a result or an error."""
        starts: list[tuple[_Op, Start]] = []
        finishes: list[tuple[_Op, Finish]] = []
        for op in batch:
            if isinstance(op.item, Start):
                starts.append((op, op.item))
            else:
                finishes.append((op, op.item))
        try:
            try:
                started, ended = self._store.record(
                    [item for _, item in starts], [item for _, item in finishes]
                )
            except StoreError as exc:
                # The database failed (the store has retried already): nothing was
                # recorded, and each caller handles it as its single call would.
                for op in batch:
                    op.error = exc
            except Exception:
                if len(batch) == 1:
                    raise
                # A record the store refuses (a bug): write them one by one, so that
                # only the bad one fails.
                _log.warning("a batch of %d records was refused; writing them singly", len(batch))
                for op in batch:
                    self._single(op)
            else:
                for (op, _), ok in zip(starts, started, strict=True):
                    op.result = ok
                for (op, _), ok in zip(finishes, ended, strict=True):
                    op.result = ok
                self.batches += 1
                self.records += len(batch)
        except BaseException as exc:
            for op in batch:
                if op.error is None and not op.done:
                    op.error = exc
        finally:
            self._done(batch)

    @staticmethod
    def _done(batch: list[_Op]) -> None:
        """Mark ``batch`` written: release the waiting starts, call the finishes back."""
        for op in batch:
            op.done = True
            if op.waiter is not None:
                op.waiter.release()  # its start is committed: the run may begin
        for op in batch:
            if op.then is not None:
                try:
                    op.then(op.error if op.error is not None else op.result)
                except Exception:
                    _log.exception("handling a recorded finish failed")

    def _single(self, op: _Op) -> None:
        store = self._store
        assert isinstance(store, Store)
        item = op.item
        try:
            if isinstance(item, Start):
                op.result = store.start(item.claim, started=item.started)
            else:
                op.result = store.finish(
                    item.claim,
                    outcome=item.outcome,
                    ended=item.ended,
                    error=item.error,
                    next_run=item.next_run,
                )
        except Exception as exc:
            op.error = exc
