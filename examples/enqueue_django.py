"""A Django view that enqueues a delayed job in its own transaction (docs/recipes.md).

The order and its receipt's one-off commit together or not at all: Django's
``connection`` is passed to ``enqueue``, so the one-off is inserted inside
``transaction.atomic()``. The database is PostgreSQL (the Django project's, which
holds tickwork's tables too); `examples.delayed` runs the jobs.
"""

from __future__ import annotations

import json

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from examples import delayed


class OutOfStock(Exception):
    """The order cannot be placed: everything written for it is rolled back."""


def place_order(request: HttpRequest) -> JsonResponse:
    """``POST {"item": ...}``: store the order, send its receipt in 10 minutes."""
    item = json.loads(request.body)["item"]
    try:
        with transaction.atomic():
            with connection.cursor() as cur:  # or Order.objects.create(): the same connection
                cur.execute("INSERT INTO shop_order (item) VALUES (%s) RETURNING id", [item])
                order_id = cur.fetchone()[0]
            delayed.producer().enqueue(
                delayed.send_receipt,
                order_id,
                delay="10m",
                key=f"receipt:{order_id}",
                connection=connection,  # in this transaction: no order, no receipt
            )
            if item == "sold out":
                raise OutOfStock(item)  # the order and its receipt are rolled back
    except OutOfStock:
        return JsonResponse({"error": "out of stock"}, status=409)
    return JsonResponse({"order": order_id}, status=201)
