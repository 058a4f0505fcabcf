"""Delayed jobs that web views enqueue, and the worker that runs them (docs/recipes.md).

The web processes only enqueue: `producer()` gives each process a `DurableScheduler`
that is never started, so it runs nothing; ``enqueue`` writes the one-off into the
store, in the view's own transaction when it is given ``connection=``. The jobs run in
a process of their own, `run_worker()` (``python -m examples.delayed``, one or more,
on any host that reaches the database), which allows this module's functions: it
enqueued none of them itself.

Settings from the environment: ``TICKWORK_DATABASE`` (a PostgreSQL URL) and
``TICKWORK_SCHEMA`` (the schema of tickwork's tables, default ``public``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from tickwork import DurableScheduler
from tickwork.stores.postgres import PostgresStore

log = logging.getLogger("examples.delayed")

_lock = threading.Lock()
_producer: DurableScheduler | None = None
_pid = 0
_inherited: list[DurableScheduler] = []


def send_receipt(order_id: int) -> None:
    """The delayed job: mail the receipt of an order (here: a log line)."""
    log.warning("receipt sent for order %d", order_id)


def deliver_webhook(url: str, event: dict[str, object]) -> None:
    """The delayed job of the Flask recipe: post an event to a subscriber (a log line)."""
    log.warning("webhook %s delivered to %s", event.get("id"), url)


def open_store() -> PostgresStore:
    """The store every process opens (after fork: never at import time)."""
    return PostgresStore(os.environ["TICKWORK_DATABASE"], schema=os.environ.get("TICKWORK_SCHEMA"))


def producer() -> DurableScheduler:
    """This process's scheduler for enqueueing: opened on first use, never started."""
    global _producer, _pid
    with _lock:
        if _producer is None or _pid != os.getpid():  # none yet, or a parent's (fork)
            if _producer is not None:  # never closed here: its connection is the parent's
                _inherited.append(_producer)
            _producer, _pid = DurableScheduler(open_store()), os.getpid()
        return _producer


def worker(store: PostgresStore, **options: Any) -> DurableScheduler:
    """The scheduler that runs the enqueued jobs: it allows this module's functions."""
    return DurableScheduler(store, allowed_modules=["examples.delayed"], **options)


def run_worker() -> None:
    """Run the enqueued jobs until SIGTERM or Ctrl-C."""
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    with open_store() as store, worker(store):
        stopping.wait()


if __name__ == "__main__":
    run_worker()
