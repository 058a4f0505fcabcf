"""A Flask view that enqueues a delayed job with retries, idempotent by key (docs/recipes.md).

    TICKWORK_DATABASE=postgresql://... gunicorn -w 2 'examples.enqueue_flask:create_app()'

The view writes nothing of its own, so the one-off goes in in tickwork's own transaction
(no ``connection=``): durable when ``enqueue`` returns. The key makes a repeated request
(a client retrying its POST) enqueue nothing more while the first is pending.
`examples.delayed` runs the jobs.
"""

from __future__ import annotations

from examples import delayed
from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue


def create_app() -> Flask:
    """The app: ``POST /events/<id>`` delivers the event to its subscriber in 30 s."""
    app = Flask(__name__)

    @app.post("/events/<event_id>")
    def publish(event_id: str) -> ResponseReturnValue:
        ref = delayed.producer().enqueue(
            delayed.deliver_webhook,
            request.json["url"],
            {"id": event_id, "data": request.json["data"]},
            delay=30,
            key=f"webhook:{event_id}",
            retries=5,  # a failed delivery is tried again: 1 s, 2 s, 4 s, ... later
            timeout=10,
        )
        return jsonify({"job": ref.id, "new": ref.created}), 202 if ref.created else 200

    return app
