"""A FastAPI application whose durable jobs start and stop with its lifespan.

    TICKWORK_STATE=/var/lib/myapp/jobs.db uvicorn --workers 2 examples.fastapi_app:app

Every uvicorn worker runs the lifespan, so every worker runs an `AsyncDurableScheduler`
on the same SQLite file; the store lets one of them claim each slot. uvicorn starts its
workers as fresh processes (nothing carried across a fork), and the lifespan opens the
store in the worker itself. ``tick`` is an ``async def`` job: the scheduler awaits it on
the worker's event loop. The same lifespan works in Starlette (``Starlette(lifespan=...)``).
tickwork's pages and control API are mounted at ``/ops/tickwork``. See docs/recipes.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

from fastapi import FastAPI

from tickwork import AsyncDurableScheduler, Every, web
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore


async def tick(path: str) -> None:
    """The example job, awaited on the server's loop: one line per run to ``path``."""
    await asyncio.sleep(0)  # stands for an HTTP call or a database query
    claim = AsyncDurableScheduler.current_claim()
    slot = "?" if claim is None else repr(claim.scheduled)
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{slot} {os.getpid()}\n")


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the store, declare the jobs, run them while the app serves; stop cleanly."""
    every = float(os.environ.get("TICKWORK_EVERY", "60"))
    runs = os.path.abspath(os.environ.get("TICKWORK_RUNS", "tickwork-runs.txt"))
    spec = JobSpec(
        "tick", "examples.fastapi_app:tick", Every(every), kwargs={"path": runs}, missed="all"
    )
    with SQLiteStore(os.environ.get("TICKWORK_STATE", "tickwork-app.sqlite3")) as store:
        async with AsyncDurableScheduler(store) as scheduler:
            await scheduler.declare(spec)
            app.state.scheduler = scheduler
            yield  # the app serves; on shutdown the scheduler stops, then the store closes


app = FastAPI(lifespan=lifespan)
# tickwork's pages and control API, over the scheduler the lifespan opens (asked at each
# request): the status page, a page per job with its charts and buttons, and /api/.
# TICKWORK_HTTP_TOKEN (named "admin") logs a person in and is a program's bearer token;
# without it the pages are read-only. The app's own login instead: user=, a function of
# the ASGI scope (docs/observability.md, "Mounted in your app").
_secret = os.environ.get("TICKWORK_HTTP_TOKEN")
app.mount(
    "/ops/tickwork",
    web.asgi_app(
        lambda: getattr(app.state, "scheduler", None),
        tokens={"admin": _secret} if _secret else None,
        title="the FastAPI example",
    ),
)
