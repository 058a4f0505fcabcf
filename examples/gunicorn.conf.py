"""gunicorn settings: one durable scheduler per worker, started after fork.

    gunicorn -c examples/gunicorn.conf.py -w 4 [--preload] examples.wsgi_app:app

Works with or without ``--preload``: the hooks run in the worker process, after the
fork, whether the application was imported by the master or by the worker.
"""

from __future__ import annotations

from typing import Any

from examples import webjobs


def post_worker_init(worker: Any) -> None:
    """In the worker, after fork and after the application was loaded: start."""
    webjobs.start()


def worker_exit(server: Any, worker: Any) -> None:
    """In the worker, as it exits (SIGTERM, a restart, max_requests): stop cleanly."""
    webjobs.stop()
