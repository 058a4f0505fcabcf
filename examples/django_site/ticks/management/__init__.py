"""Management commands of the ``ticks`` app."""
