"""Exceptions raised by the durable stores and their records."""

from __future__ import annotations

from tickwork._core.errors import TickworkError

__all__ = [
    "JobNotFoundError",
    "JobPausedError",
    "JobSpecError",
    "SchemaVersionError",
    "StoreError",
]


class StoreError(TickworkError):
    """A store cannot do what was asked: closed, unreachable, corrupt or foreign data.

    A store that raises this has changed nothing (every state change is one transaction).
    """


class SchemaVersionError(StoreError):
    """The database was written by a newer tickwork (a schema this version does not know).

    The database is left untouched; upgrade tickwork to open it.
    """


class JobNotFoundError(StoreError, LookupError):
    """No job with the given id exists in the store."""


class JobPausedError(StoreError):
    """The job is paused, and the operation runs only jobs that are not (a trigger)."""


class JobSpecError(TickworkError, ValueError):
    """A job declaration is invalid: the message names the field and shows the bad value."""
