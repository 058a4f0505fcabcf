"""The WSGI app of examples/wsgi_app.py under uWSGI, a durable scheduler in every worker.

    uwsgi --ini examples/uwsgi.ini --http-socket 127.0.0.1:8000

uWSGI (without ``lazy-apps``) imports this module once in its master and then forks the
workers, so nothing is opened here. The scheduler starts in ``uwsgi.post_fork_hook``,
which uWSGI calls in each worker after the fork, and stops in ``uwsgi.atexit``, which it
calls as a worker exits (examples/uwsgi.ini makes SIGTERM a graceful shutdown, so it
does). The ``uwsgi`` module exists only inside a uWSGI process.
"""

from __future__ import annotations

import uwsgi
from examples import webjobs
from examples.wsgi_app import app

__all__ = ["app"]

uwsgi.post_fork_hook = webjobs.start  # in each worker, after the fork
uwsgi.atexit = webjobs.stop  # in each worker, as it exits
