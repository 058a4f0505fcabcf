"""Durable jobs inside an ASGI application: started and stopped by its lifespan.

Serve it with any ASGI server, from the repository's root::

    pip install uvicorn
    TICKWORK_STATE=/tmp/app.sqlite3 uvicorn examples.asgi_durable:app

The app is plain ASGI (no framework), so it runs as is. With FastAPI or Starlette the
same start and stop go into the ``lifespan`` context manager: examples/fastapi_app.py,
run under ``uvicorn --workers 2`` by tests/test_recipes.py (see docs/recipes.md).

``refresh`` is an ``async def`` job: the scheduler awaits it on the server's event loop,
so it may use the application's async clients. Its runs survive restarts: the schedule
lives in the SQLite file, and a run missed while the server was down follows the job's
``missed`` policy. ``GET /`` answers with every job's last run, read from the store.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tickwork import AsyncDurableScheduler, Every
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: What the job did, for the status answer (a real job would refresh a cache, say).
refreshed: list[str] = []


async def refresh() -> None:
    """The job: awaited on the application's event loop."""
    await asyncio.sleep(0)  # stands for an HTTP call or a database query
    claim = AsyncDurableScheduler.current_claim()
    refreshed.append("" if claim is None else claim.job_id)


def make_app(state: str, every: float = 60.0) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI app whose lifespan runs the durable jobs kept in the file ``state``.

    ``refresh`` runs every ``every`` seconds.
    """
    spec = JobSpec("refresh", "examples.asgi_durable:refresh", Every(every))
    scheduler: AsyncDurableScheduler | None = None
    store: SQLiteStore | None = None

    async def lifespan(receive: Receive, send: Send) -> None:
        nonlocal scheduler, store
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    store = SQLiteStore(state)
                    scheduler = AsyncDurableScheduler(store)
                    await scheduler.declare(spec)
                    await scheduler.start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if scheduler is not None:
                    await scheduler.stop()  # waits for a run being awaited
                if store is not None:
                    store.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http" or scheduler is None:
            return
        jobs = await scheduler.jobs()
        body = json.dumps(
            {
                j.id: None if j.last_run is None else j.last_run.outcome
                for j in jobs  # the last outcome of each job, from the store
            }
        ).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


app = make_app(os.environ.get("TICKWORK_STATE", "tickwork-app.sqlite3"))
