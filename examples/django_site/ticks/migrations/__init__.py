"""Migrations of the ``ticks`` app."""
