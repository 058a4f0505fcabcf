"""Exceptions raised by tickwork."""

from __future__ import annotations

__all__ = ["CronError", "TickworkError"]


class TickworkError(Exception):
    """Base class of every exception tickwork raises on purpose."""


class CronError(TickworkError, ValueError):
    """A cron expression or its time zone is invalid, or can never fire.

    The message names the offending field (or ``tz``) and shows the bad value.
    """
