"""One durable scheduler per web-server worker process: the piece every WSGI recipe shares.

A server such as gunicorn runs the application in several worker processes.
Each worker starts its own `DurableScheduler` on the same SQLite file; the store lets
exactly one of them claim each slot, so a job runs once per slot however many workers
there are (see docs/recipes.md).

Two rules make that safe:

* **Open the store after fork, in the worker.** `start()` is meant for a post-fork hook
  (gunicorn's ``post_worker_init``, uWSGI's ``uwsgi.post_fork_hook``), never for module
  import time when the server may import the application before forking
  (``gunicorn --preload``). A store or a scheduler carried
  across ``fork()`` is not used again: `start()` in a child sees that it belongs to
  another process and opens its own.
* **Stop it when the worker exits** (gunicorn's ``worker_exit``, ``uwsgi.atexit``, `atexit` as the
  fallback): `stop()` hands back what has not
  started, waits for the running job, records it and closes the store.

Settings come from the environment so the examples run unchanged under every server:
``TICKWORK_STATE`` (the SQLite file, default ``tickwork-app.sqlite3``), ``TICKWORK_EVERY``
(seconds between runs of the example job, default 60) and ``TICKWORK_RUNS`` (a file the
example job appends one line per run to, default ``tickwork-runs.txt``).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

from tickwork import DurableScheduler, Every
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

log = logging.getLogger("examples.webjobs")

# Re-entrant: uWSGI may exit a worker from a signal handler while its main thread is in
# start(), and then runs uwsgi.atexit (stop()) on that thread; a plain Lock would hang it.
_lock = threading.RLock()
_pid: int | None = None  # the process that opened _store and started _scheduler
_store: SQLiteStore | None = None
_scheduler: DurableScheduler | None = None
_inherited: list[object] = []  # objects of a parent process: kept, never used or closed


def tick(path: str) -> None:
    """The example job: append the slot it runs for and the worker's pid to ``path``.

    A real job would refresh a cache or send a report. ``current_claim()`` names the
    slot, the same in every worker: the line shows which worker ran which slot.
    """
    claim = DurableScheduler.current_claim()
    slot = "?" if claim is None else repr(claim.scheduled)
    with open(path, "a", encoding="utf-8") as out:  # one short write per line: O_APPEND
        out.write(f"{slot} {os.getpid()}\n")


def jobs() -> list[JobSpec]:
    """The jobs this application declares at start-up, in every worker alike."""
    every = float(os.environ.get("TICKWORK_EVERY", "60"))
    runs = os.path.abspath(os.environ.get("TICKWORK_RUNS", "tickwork-runs.txt"))
    # missed="all": a slot that came due while the workers were busy still runs, late.
    return [
        JobSpec("tick", "examples.webjobs:tick", Every(every), kwargs={"path": runs}, missed="all")
    ]


def start() -> DurableScheduler:
    """Start this process's scheduler (once; later calls return it), after fork.

    Declaring is idempotent, so every worker declares the same jobs: the first creates
    them, the others change nothing.
    """
    global _pid, _store, _scheduler
    with _lock:
        if _scheduler is not None and _pid == os.getpid():
            return _scheduler
        if _scheduler is not None:  # started before a fork: the parent's, not ours
            # Keep them referenced so they are never finalized here: closing a SQLite
            # connection inherited across fork() can damage the parent's database.
            _inherited.extend([_scheduler, _store])
        _store = SQLiteStore(os.environ.get("TICKWORK_STATE", "tickwork-app.sqlite3"))
        scheduler = DurableScheduler(_store)
        for spec in jobs():
            scheduler.declare(spec)
        scheduler.start()
        _pid, _scheduler = os.getpid(), scheduler
        atexit.register(stop)  # the fallback; the servers' exit hooks call stop() first
        log.warning("tickwork started in process %d", _pid)
        return scheduler


def stop() -> None:
    """Stop this process's scheduler and close its store; idempotent."""
    global _scheduler, _store
    with _lock:
        if _scheduler is None or _pid != os.getpid():
            return
        _scheduler.stop()  # hands back unstarted claims, waits for the running job
        if _store is not None:
            _store.close()
        _scheduler = _store = None
        log.warning("tickwork stopped in process %d", os.getpid())


def scheduler() -> DurableScheduler | None:
    """This process's running scheduler, or None (not started here, or stopped)."""
    return _scheduler if _pid == os.getpid() else None
