"""A plain WSGI application whose durable jobs run in every worker (see docs/recipes.md).

Serve it with gunicorn, from the repository's root; the config file starts the
scheduler in each worker after fork and stops it when the worker exits::

    gunicorn -c examples/gunicorn.conf.py -w 4 examples.wsgi_app:app
    gunicorn -c examples/gunicorn.conf.py -w 4 --preload examples.wsgi_app:app

Importing this module opens nothing: with ``--preload`` it is imported in the server's
master process, before the fork.
``GET /`` answers with each job's last outcome and this worker's pid.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from examples import webjobs


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The WSGI callable: each job's last outcome, read from the store."""
    scheduler = webjobs.scheduler()
    jobs = [] if scheduler is None else scheduler.jobs()
    body = json.dumps(
        {
            "pid": os.getpid(),
            "jobs": {j.id: None if j.last_run is None else j.last_run.outcome for j in jobs},
        }
    ).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
