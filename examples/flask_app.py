"""A Flask application whose durable jobs run in its gunicorn workers (docs/recipes.md).

    gunicorn -c examples/gunicorn.conf.py -w 2 'examples.flask_app:create_app()'

The app factory opens nothing: gunicorn's hooks (examples/gunicorn.conf.py) start one
scheduler per worker after the fork and stop it when the worker exits, so the app works
with and without ``--preload``. The views read and steer the jobs through this worker's
scheduler; every change goes through the store, so all workers see it.
"""

from __future__ import annotations

from examples import webjobs
from flask import Flask, abort, jsonify
from flask.typing import ResponseReturnValue


def create_app() -> Flask:
    """The Flask application: ``GET /jobs`` lists the jobs, ``POST /jobs/<id>/run`` runs one now."""
    app = Flask(__name__)

    @app.get("/jobs")
    def jobs() -> ResponseReturnValue:
        scheduler = webjobs.scheduler()
        if scheduler is None:
            abort(503, "the scheduler is not running in this process")
        return jsonify(
            {
                j.id: {
                    "next_run": j.next_run,
                    "last": None if j.last_run is None else j.last_run.outcome,
                }
                for j in scheduler.jobs()
            }
        )

    @app.post("/jobs/<job_id>/run")
    def run_now(job_id: str) -> ResponseReturnValue:
        scheduler = webjobs.scheduler()
        if scheduler is None:
            abort(503, "the scheduler is not running in this process")
        if scheduler.get(job_id) is None:
            abort(404, f"no job {job_id!r}")
        return jsonify({"job": job_id, "run": scheduler.trigger(job_id, by="flask")})

    return app
