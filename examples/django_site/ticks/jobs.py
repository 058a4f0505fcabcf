"""The jobs: plain functions that use the ORM, run on the scheduler's worker threads."""

import datetime
import os

from django.db import close_old_connections
from django.utils import timezone

from tickwork import DurableScheduler

from .models import Tick


def record_tick() -> None:
    """Write one row for the slot being run (the claim names it, the same in every process)."""
    close_old_connections()  # a worker thread is reused: drop a connection gone stale
    try:
        claim = DurableScheduler.current_claim()
        assert claim is not None, "record_tick runs as a durable job"
        Tick.objects.create(job=claim.job_id, slot=claim.scheduled, pid=os.getpid())
    finally:
        close_old_connections()


def prune_ticks(keep_days: int) -> None:
    """Delete the rows older than ``keep_days`` days."""
    close_old_connections()
    try:
        cutoff = timezone.now() - datetime.timedelta(days=keep_days)
        Tick.objects.filter(written__lt=cutoff).delete()
    finally:
        close_old_connections()
