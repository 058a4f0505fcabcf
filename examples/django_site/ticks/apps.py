"""The recipe's app. Its ``ready()`` starts nothing: ``manage.py tickwork`` runs the jobs."""

from django.apps import AppConfig


class TicksConfig(AppConfig):
    """The ``ticks`` app: a model, two jobs and the ``tickwork`` management command."""

    name = "ticks"
