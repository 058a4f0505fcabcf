"""The jobs of one file in the state: taken at the start, applied again at each reload.

`FileJobs` is the daemon's hold on its jobs file. At the start it checks the state
holds nothing foreign, holds the namespace, declares every job of the file (pools
first, upstream jobs before their chains) and queues the ``at_start`` runs (`take`);
on SIGHUP or a changed file it reads the file again and applies it (`reload`): the
jobs declared again, the ones gone from the file removed, or paused until a run of
theirs that is still going has ended (`tickwork._daemon.leaving`). What a file's job
becomes in the state is `tickwork._daemon.declare`'s. It is built where the jobs are
taken, after the `Daemon` (whose dead-man checks it is given); `Daemon.serve` follows
the file with it and asks it for the jobs' current options (`job_config`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from tickwork._core.errors import ConfigError
from tickwork._daemon.deadman import DeadMan
from tickwork._daemon.declare import declare_file, job_id, owned, owner_label
from tickwork._daemon.jobsfile.config import Config, JobConfig, load_config
from tickwork._daemon.jobsfile.pools import declare_pools
from tickwork._daemon.leaving import Leaving
from tickwork._daemon.process.stopping import end_left_behind
from tickwork._daemon.skips import SKIP_CHECK
from tickwork._daemon.state import DaemonError, Place
from tickwork._durable.scheduler import DurableScheduler
from tickwork.stores import OutcomeRetention, Upsert
from tickwork.stores.contract import NamespaceHolders, SessionLiveness

__all__ = ["FileJobs", "Reload"]

_log = logging.getLogger("tickwork.daemon")


@dataclass(frozen=True, slots=True)
class Reload:
    """What applying a configuration did to the store, by job name."""

    created: tuple[str, ...] = ()
    """Jobs new to the store."""
    updated: tuple[str, ...] = ()
    """Jobs whose options changed."""
    unchanged: tuple[str, ...] = ()
    """Jobs stored exactly as declared."""
    removed: tuple[str, ...] = ()
    """Jobs gone from the file, removed from the store."""
    failed: tuple[str, ...] = ()
    """Jobs the store refused (logged); they keep their previous declaration."""

    def summary(self) -> str:
        """``"2 created, 1 updated, 3 unchanged, 1 removed"`` (empty parts left out)."""
        parts = [
            f"{len(names)} {word}"
            for word, names in (
                ("created", self.created),
                ("updated", self.updated),
                ("unchanged", self.unchanged),
                ("removed", self.removed),
                ("failed", self.failed),
            )
            if names
        ]
        return ", ".join(parts) or "no jobs"


class FileJobs:
    """One jobs file's jobs in the state of a `DurableScheduler`.

    Args:
        path: The jobs file (read again by `reload`).
        scheduler: The daemon's scheduler; its store is the state.
        place: The namespace of the file's jobs in the state (`Place`).
        dead_man: The daemon's dead-man checks, given each applied file's jobs.
        load: Reads ``path`` into a `Config` (default: `load_config`; ``tickwork run
            --crontab`` passes one that translates a crontab).
        watch: Also reload when the file changes (`follow`).
    """

    def __init__(
        self,
        path: str,
        scheduler: DurableScheduler,
        *,
        place: Place,
        dead_man: DeadMan,
        load: Callable[[str], Config] = load_config,
        watch: bool = False,
    ) -> None:
        self.path = path
        self.scheduler = scheduler
        self.store = scheduler.store
        self.namespace = place.namespace
        self.place = place
        self._dead_man = dead_man
        self._load = load
        self._jobs: dict[str, JobConfig] = {}
        self._leaving = Leaving()  # jobs gone from the file, a run of theirs still going
        self._config: Config | None = None
        self.watch = watch
        self._stamp = self._stat()

    @property
    def config(self) -> Config | None:
        """The configuration being run (``None`` before the first `apply`)."""
        return self._config

    @property
    def kill_graces(self) -> dict[str, float]:
        """Each job's ``kill_grace``, by name (the file applied last)."""
        return {job.name: job.kill_grace for job in self._jobs.values()}

    def job_config(self, name: str) -> JobConfig | None:
        """The running file's job ``name`` (``None``: none of that name)."""
        return self._jobs.get(name)

    def follow(self, *, signalled: bool) -> float | None:
        """One turn of the daemon's loop: reload if asked or changed, remove what left.

        ``signalled``: a SIGHUP came (the file is read again whatever its stamp).
        With ``watch``, a file whose modification time, size or inode changed is read
        again too. Jobs gone from the file whose last run has ended are removed.

        Returns:
            How soon this wants the next turn (``None``: only when something happens).
        """
        stamp = self._stat()  # before the file is read: a change while it is, is seen next
        changed = self.watch and stamp is not None and stamp != self._stamp
        if signalled or changed:
            _log.info(
                "got SIGHUP: reloading %s" if signalled else "%s changed: reloading", self.path
            )
            self._stamp = stamp
            self.reload()
        waits = [1.0] if self.watch else []
        if self._leaving:
            self._leaving.remove_ended(self.scheduler)
            waits.append(SKIP_CHECK)
        return min(waits, default=None)

    def _stat(self) -> tuple[int, int, int] | None:
        """The file's modification time, size and inode (``None``: cannot be read)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    # -- the start ----------------------------------------------------------------------

    def take(self, config: Config, *, also: str = "") -> Reload:
        """Take the state for ``config`` at the start, and log what runs from where.

        The state checked (`check_store`), the namespace held (`hold`), the file
        applied (`apply`), one run of each enabled ``at_start`` job queued (as
        ``tickwork trigger`` queues one, under the job's overlap policy), and the runs
        a killed daemon of this state left behind ended (`end_left_behind`: before any
        run starts). ``also``: a line to log after that one (where the ``--http``
        server serves).

        Raises:
            TickworkError: A `DaemonError`, or a `StoreError` reading the state.
        """
        self.check_store()
        self.hold(config)
        result = self.apply(config)
        for job in config.jobs:  # at_start: this daemon has just started (a reload queues none)
            if job.at_start and job.enabled:
                done = self.scheduler.trigger(
                    job_id(self.namespace, job.name), by="at_start", note="the daemon started"
                )
                why = "" if done == "queued" else ": skipped, a run of it is going or waiting"
                _log.info("%s", f"job {job.name!r}: its at_start run is {done}{why}")
        end_left_behind(self.place.key, self.kill_graces)
        enabled = sum(job.enabled for job in config.jobs)
        _log.info(
            "%s",
            f"running {enabled} job{'s' if enabled != 1 else ''} from {self.path}"
            f" ({result.summary()}; {self.place.shown}; pid {os.getpid()})",
        )
        if also:
            _log.info("%s", also)
        return result

    def check_store(self) -> None:
        """Refuse a store that holds jobs this daemon would claim but cannot run.

        Every daemon on one store claims every due run in it, so the store must hold
        only this file's jobs: jobs of another namespace or other programs' durable
        jobs would be claimed here and fail.

        Raises:
            DaemonError: The store holds such jobs; the message lists some.
        """
        foreign = [s.id for s in self.store.jobs() if not owned(s, self.namespace)]
        if foreign:
            shown = ", ".join(repr(i) for i in foreign[:5])
            more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
            raise DaemonError(
                f"the state holds jobs that are not this file's (namespace"
                f" {self.namespace!r}): {shown}{more}. Every daemon on a state runs the"
                " same jobs file; use another --state/--database, or pass the other"
                " file's --namespace to take its jobs over (jobs not in this file are"
                " then removed)"
            )

    def hold(self, config: Config) -> None:
        """Hold the namespace in the state for this file, or refuse a clashing live daemon.

        Every daemon on one namespace runs one file (several, for several nodes): a
        daemon is refused while a live one on the namespace runs jobs that are not a
        version of this file's (neither all of this file's jobs nor only some of them).
        The state keeps each live daemon's file (`tickwork.stores._holders`).

        Raises:
            DaemonError: Such a daemon runs; the message names both files.
        """
        store = self.store
        if not isinstance(store, NamespaceHolders):
            return
        if isinstance(store, SessionLiveness):  # live from now, for the next one to judge
            store.tag_sessions(self.scheduler.owner)
        names = sorted(job.name for job in config.jobs)
        path = os.path.abspath(self.path)
        mine = json.dumps({"file": path, "jobs": names, "pid": os.getpid()})
        clashes = store.hold_namespace(
            self.namespace, self.scheduler.owner, mine, lambda h: _clash(h, set(names))
        )
        if clashes:
            owner, text = clashes[0]
            raise DaemonError(
                f"another daemon ({owner_label(owner)}) runs {json.loads(text)['file']} on"
                f" namespace {self.namespace!r} of this state, with jobs that are not those"
                f" of {path}: not started. Every daemon on a namespace runs the same file;"
                " give this one another --namespace (or another state), or stop the other"
                " first (this one then takes the namespace over)"
            )

    # -- applying a file ----------------------------------------------------------------

    def apply(self, config: Config) -> Reload:
        """Make the store match ``config``: declare every job, remove the ones gone.

        Idempotent: applying the same configuration again changes nothing. The new
        options take effect for runs that start from now on; a running run keeps the
        options it started with.
        """
        declare_pools(self.store, config)  # before the jobs that name the pools
        now = self.scheduler.now()
        stored = {s.id: s for s in self.store.jobs() if owned(s, self.namespace)}
        self._jobs = {job.name: job for job in config.jobs}
        self._config = config
        declared = declare_file(
            self.scheduler,
            config.jobs,
            namespace=self.namespace,
            now=now,
            stored=stored,
        )
        done: dict[Upsert | None, list[str]] = {u: [] for u in (*Upsert, None)}
        for job, result in declared:
            if isinstance(result, Exception):
                _log.error("job %r cannot be declared: %s", job.name, result)
                done[None].append(job.name)
                continue
            done[result].append(job.name)
            if isinstance(self.store, OutcomeRetention):  # keep_ok, keep_failed
                self.store.set_job_retention(
                    job_id(self.namespace, job.name),
                    keep_ok=job.keep_ok,
                    keep_failed=job.keep_failed,
                )
        self._dead_man.apply(self.namespace, config.jobs)
        wanted = {job_id(self.namespace, job.name): job.enabled for job in config.jobs}
        gone = [stored[jid] for jid in sorted(stored.keys() - wanted.keys())]
        self._leaving.remove_gone(self.scheduler, gone, path=self.path)
        self._leaving.keep_back(self.scheduler, wanted)  # back in the file before its run ended
        return Reload(
            created=tuple(done[Upsert.CREATED]),
            updated=tuple(done[Upsert.UPDATED]),
            unchanged=tuple(done[Upsert.UNCHANGED]),
            removed=tuple(state.id.partition("/")[2] for state in gone),
            failed=tuple(done[None]),
        )

    def reload(self) -> bool:
        """Read the file again and apply it; a broken file keeps the running configuration.

        Returns:
            Whether the new file was applied.
        """
        try:
            config = self._load(self.path)
        except ConfigError as exc:
            n = len(exc.errors)
            _log.error(
                "reload of %s failed (%d problem%s); still running the previous configuration",
                self.path,
                n,
                "" if n == 1 else "s",
            )
            for issue in exc.errors:
                _log.error("%s", issue)
            return False
        try:
            result = self.apply(config)
        except Exception as exc:  # the state is unreachable (a database restart, say)
            _log.error(
                "reload of %s failed: the state cannot be read: %s; still running the"
                " previous configuration",
                self.path,
                exc,
            )
            return False
        _log.info("reloaded %s: %s", self.path, result.summary())
        return True


def _clash(holder: str, names: set[str]) -> bool:
    """Whether a live daemon's file (``holder``) is not a version of one with ``names``."""
    try:
        theirs = set(json.loads(holder)["jobs"])
    except (ValueError, KeyError, TypeError):
        return False  # written by another tickwork: not judged
    return not (theirs <= names or names <= theirs)
