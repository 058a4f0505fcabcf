"""The daemon's dead-man alerts: the jobs file's ``alert_if_*`` keys, sent by ``on_failure``.

`DeadMan` holds the daemon's `tickwork.AlertWatch`: on each (re)load it watches every
enabled job of the file by its ``alert_if_no_success``, ``alert_if_missed``,
``alert_if_late`` and ``alert_if_running``, and it delivers each message the watch
wins through the job's ``on_failure`` (`AlertSender.dead_man`). Every daemon on a
state runs the same file, so every one watches every job and the store picks the one
that sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tickwork._daemon.alerts import AlertSender
from tickwork._daemon.declare import job_id
from tickwork._daemon.jobsfile.config import JobConfig
from tickwork._durable.scheduler import DurableScheduler
from tickwork._durable.watch import AlertRules, AlertWatch, WatchAlert

__all__ = ["DeadMan", "rules_for"]


def rules_for(job: JobConfig) -> AlertRules:
    """The dead-man rules of one job of the file (nothing on when it has none)."""
    if job.on_failure is None or not job.enabled:
        return AlertRules()
    return AlertRules(
        no_success=job.alert_if_no_success,
        missed=job.alert_if_missed,
        late=job.alert_if_late,
        running=job.alert_if_running,
    )


class DeadMan:
    """The daemon's dead-man watch (see the module's docstring).

    Args:
        scheduler: The daemon's scheduler (its store, name and clock).
        sender: Sends through a job's ``on_failure``.
        job: The current `JobConfig` of a job name (``None``: not in the file).

    """

    def __init__(
        self,
        scheduler: DurableScheduler,
        sender: AlertSender,
        job: Callable[[str], JobConfig | None],
    ) -> None:
        self._sender = sender
        self._job = job
        self.watch = AlertWatch(scheduler, on_alert=self._deliver)
        self._started = False

    def apply(self, namespace: str, jobs: Iterable[JobConfig]) -> None:
        """Watch the jobs of the file just loaded, by their keys; stop watching the rest."""
        wanted = {job_id(namespace, job.name): rules_for(job) for job in jobs}
        for jid in set(self.watch.watched()) - set(wanted):
            self.watch.unwatch(jid)
        for jid, rules in wanted.items():
            self.watch.watch(jid, rules)

    def start(self) -> None:
        """Start the watch's thread (a look with no job to watch reads nothing)."""
        self.watch.start()
        self._started = True

    def stop(self) -> None:
        """Stop watching (a message being sent is finished first)."""
        if self._started:
            self.watch.stop()
            self._started = False

    def _deliver(self, message: WatchAlert) -> None:
        job = self._job(message.job_id.partition("/")[2])
        if job is None or job.on_failure is None:
            return  # gone from the file since the look: nobody to tell
        self._sender.dead_man(job.on_failure, message)
