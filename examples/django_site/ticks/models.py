"""What the ``record-tick`` job writes: one row per slot, unique by slot."""

from typing import ClassVar

from django.db import models


class Tick(models.Model):
    """One run of a job: its slot (the scheduled time) and the process that ran it."""

    job = models.CharField(max_length=200)
    slot = models.FloatField()
    pid = models.IntegerField()
    written = models.DateTimeField(auto_now_add=True)

    class Meta:
        """One row per slot: a slot run twice would fail its insert."""

        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["job", "slot"], name="one_row_per_slot")
        ]
