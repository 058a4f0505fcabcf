"""Exceptions raised by tickwork."""

from __future__ import annotations

__all__ = ["TickworkError"]


class TickworkError(Exception):
    """Base class of every exception tickwork raises on purpose."""
