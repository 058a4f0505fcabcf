"""``python manage.py tickwork``: run the jobs of ``settings.TICKWORK`` until SIGTERM.

Run it as its own process beside the web server (a systemd unit, a container, a
Procfile line); run two for failover, on the same SQLite file or PostgreSQL: each slot
still runs once. The web server's processes start no scheduler.
"""

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from tickwork import Cron, DurableScheduler, Every
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore


def job_specs(entries: list[dict[str, Any]]) -> list[JobSpec]:
    """``settings.TICKWORK["JOBS"]`` as `JobSpec`s: "every" or "cron" is the schedule."""
    specs = []
    for entry in entries:
        fields = dict(entry)
        if "every" in fields:
            schedule: Every | Cron = Every(fields.pop("every"))
        else:
            schedule = Cron(fields.pop("cron"), tz=fields.pop("timezone", "UTC"))
        specs.append(JobSpec(fields.pop("id"), fields.pop("func"), schedule, **fields))
    return specs


class Command(BaseCommand):
    """Run the durable jobs declared in settings until SIGTERM or Ctrl-C."""

    help = "Run the durable jobs of settings.TICKWORK until SIGTERM or Ctrl-C."

    def handle(self, *args: Any, **options: Any) -> None:
        """Declare the jobs, run them, stop cleanly on SIGTERM/SIGINT."""
        stopping = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.set())
        config = settings.TICKWORK
        specs = job_specs(config["JOBS"])  # a bad entry fails here, before anything runs
        with SQLiteStore(config["STATE"]) as store, DurableScheduler(store) as scheduler:
            for spec in specs:
                scheduler.declare(spec)
            self.stdout.write(f"tickwork: running {len(specs)} jobs", ending="\n")
            self.stdout.flush()
            stopping.wait()
            self.stdout.write("tickwork: stopping", ending="\n")
        self.stdout.write("tickwork: stopped", ending="\n")
