"""``GET /ticks/``: the rows the ``record-tick`` job wrote through the ORM."""

from django.urls import path
from ticks.views import ticks

urlpatterns = [path("ticks/", ticks)]
