"""``GET /ticks/``: the rows the ``record-tick`` job wrote through the ORM; tickwork's pages.

``/ops/tickwork/``: the status page, a page per job and the control API
(`tickwork.web`), over the state the ``manage.py tickwork`` processes run. The token
``TICKWORK_HTTP_TOKEN`` (named ``admin``) logs in and is a program's bearer token;
without it the pages are read-only. To use Django's own login instead (with
``django.contrib.auth`` and its middleware)::

    def user(request):
        return request.user.get_username() if request.user.is_authenticated else None

    web.django_urls(_store, user=user)
"""

import os
from functools import cache

from django.conf import settings
from django.urls import include, path
from ticks.views import ticks

from tickwork import web
from tickwork.stores.sqlite import SQLiteStore


@cache
def _store() -> SQLiteStore:
    """The jobs' state, opened at the first request, in the worker that serves it."""
    return SQLiteStore(settings.TICKWORK["STATE"])


_secret = os.environ.get("TICKWORK_HTTP_TOKEN")
urlpatterns = [
    path("ticks/", ticks),
    path(
        "ops/tickwork/",
        include(
            web.django_urls(
                _store, tokens={"admin": _secret} if _secret else None, title="the Django example"
            )
        ),
    ),
]
