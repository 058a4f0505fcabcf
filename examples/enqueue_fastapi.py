"""A FastAPI handler that enqueues a delayed job in its SQLAlchemy transaction (docs/recipes.md).

    TICKWORK_DATABASE=postgresql://... uvicorn examples.enqueue_fastapi:app

The handler is a plain ``def`` (FastAPI runs it in its thread pool): the SQLAlchemy
``Session`` is a blocking one, and ``enqueue`` runs its one statement on it, in the
session's transaction. `examples.delayed` runs the jobs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Annotated

import sqlalchemy
from examples import delayed
from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy.orm import Session


@functools.cache
def engine() -> sqlalchemy.Engine:
    """The app's engine, made in the worker process on first use."""
    url = os.environ["TICKWORK_DATABASE"].replace("postgresql://", "postgresql+psycopg://", 1)
    return sqlalchemy.create_engine(url)


def session() -> Iterator[Session]:
    """A session per request."""
    with Session(engine()) as s:
        yield s


class Order(BaseModel):
    """What ``POST /orders`` takes."""

    item: str


app = FastAPI()


@app.post("/orders", status_code=201)
def place_order(order: Order, db: Annotated[Session, Depends(session)]) -> dict[str, int]:
    """Store the order and send its receipt in 10 minutes: both or neither."""
    with db.begin():  # commits at the end of the block, rolls back on an exception
        order_id = db.execute(
            sqlalchemy.text("INSERT INTO shop_order (item) VALUES (:item) RETURNING id"),
            {"item": order.item},
        ).scalar_one()
        delayed.producer().enqueue(
            delayed.send_receipt,
            order_id,
            delay="10m",
            key=f"receipt:{order_id}",
            connection=db,  # the session's transaction
        )
        if order.item == "sold out":
            raise HTTPException(409, "out of stock")  # the order and its receipt roll back
    return {"order": order_id}
