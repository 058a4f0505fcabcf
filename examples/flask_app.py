"""A Flask application whose durable jobs run in its gunicorn workers (docs/recipes.md).

    TICKWORK_HTTP_TOKEN=$(openssl rand -hex 16) \
        gunicorn -c examples/gunicorn.conf.py -w 2 'examples.flask_app:create_app()'

The app factory opens nothing: gunicorn's hooks (examples/gunicorn.conf.py) start one
scheduler per worker after the fork and stop it when the worker exits, so the app works
with and without ``--preload``. tickwork's pages and control API (`tickwork.web`) are
mounted at ``/ops/tickwork``, over this worker's scheduler: the status page, a page per
job with its charts and buttons, and ``/ops/tickwork/api/``. Every change goes through
the store, so all workers see it. The token ``TICKWORK_HTTP_TOKEN`` (named ``admin``)
logs a person in at ``/ops/tickwork/login`` and is a program's bearer token; without
it the pages are read-only. To use the app's own login instead, give ``user=``: a
function of the WSGI environ that returns who is signed in (docs/observability.md).
"""

from __future__ import annotations

import os

from examples import webjobs
from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from tickwork import web


def create_app() -> Flask:
    """The Flask application, with tickwork's pages and API under ``/ops/tickwork``."""
    app = Flask(__name__)
    secret = os.environ.get("TICKWORK_HTTP_TOKEN")
    pages = web.wsgi_app(
        webjobs.scheduler,  # this worker's, asked at each request (started after the fork)
        tokens={"admin": secret} if secret else None,
        title="the Flask example",
    )
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/ops/tickwork": pages})  # type: ignore[method-assign]
    return app
