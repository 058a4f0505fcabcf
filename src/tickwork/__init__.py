"""tickwork: delayed and recurring jobs on a deterministic, tick-driven core."""

from __future__ import annotations

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
