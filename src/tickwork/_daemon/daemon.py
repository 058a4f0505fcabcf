"""The ``tickwork run`` daemon: the jobs of a file as durable jobs, run until a signal.

Each enabled or disabled `JobConfig` of the file becomes one durable job on a
`DurableScheduler` over a store (SQLite by default, PostgreSQL for several hosts), so
the store's state, the missed-run and overlap policy, leases and "a restart neither
loses nor double-runs anything" all come from the durable layer:

- the job id is ``<namespace>/<name>`` (the namespace defaults to the file's stem);
- the function is this module's `run_configured_job`, the only function the daemon's
  scheduler admits, with JSON kwargs naming the job and a fingerprint of its options;
- that entry point looks the job's *current* `JobConfig` up in the running `Daemon`
  and runs it with `run_job` (command or callable, timeout, retries), writing the run
  log lines, and raises `JobFailed` when the run failed so the store records it.

Declarations are upserts keyed by id: a restart with the same file changes nothing, a
changed job is updated, and a job gone from the file is removed from the store (only
ids in the daemon's namespace whose function is the entry point: nothing else in the
store is ever removed). See ``docs/daemon.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Final

from tickwork._core.errors import (
    JobCancelled,
    JobFailed,
    JobTimedOut,
)
from tickwork._core.events import EventKind, RunEvent
from tickwork._core.text import iso_due
from tickwork._daemon.alerts import AlertSender
from tickwork._daemon.deadman import DeadMan
from tickwork._daemon.declare import ENTRY_POINT, fingerprint
from tickwork._daemon.filejobs import FileJobs, Reload
from tickwork._daemon.jobsfile.config import JobConfig
from tickwork._daemon.liveness import Liveness
from tickwork._daemon.mail import Mail
from tickwork._daemon.process.replacing import Replacing
from tickwork._daemon.process.runner import ProcessGroups, RunResult, daemon_marker, run_job
from tickwork._daemon.process.stopping import STOP_SIGNALS, Stopping
from tickwork._daemon.runlog import OneOffLines, RunLog, RunOutput
from tickwork._daemon.skips import SKIP_CHECK, HeldSlots
from tickwork._daemon.state import Place
from tickwork._daemon.web.status_page import failure_summary
from tickwork._durable.attempts import begin_attempt, record_attempt
from tickwork._durable.engine import OUTPUT_LIMIT as LEDGER_TAIL
from tickwork._durable.runnote import note_attempt
from tickwork._durable.scheduler import DurableScheduler
from tickwork.stores import Claim
from tickwork.stores.contract import NamespaceHolders

__all__ = ["Daemon", "Reload", "run_configured_job"]

_log = logging.getLogger("tickwork.daemon")

_ERROR_TAIL: Final = 1000  # characters of output kept in a failed run's stored error


# -- the daemon ------------------------------------------------------------------------

_active: Daemon | None = None
_active_lock = threading.Lock()


def run_configured_job(job: str, fingerprint: str = "") -> None:
    """The durable entry point of every ``tickwork run`` job: run job ``job`` now.

    Called by the daemon's `DurableScheduler` on a worker thread. Outside a running
    daemon it refuses.

    Args:
        job: The job's name in the file.
        fingerprint: The fingerprint of the options it was declared with.

    Raises:
        JobFailed: The run failed (the message is what the store records).
        RuntimeError: No daemon is running in this process.
    """
    daemon = _active
    if daemon is None:
        raise RuntimeError(f"{ENTRY_POINT} runs only inside `tickwork run`")
    daemon.run_one(job, fingerprint)


class Daemon:
    """The jobs of one file on a `DurableScheduler`, with signals, reload and shutdown.

    Create it, take the file's jobs over it (`FileJobs.take`), then `serve` them until
    a signal or the ``run_for`` time ends. One per process (the entry point finds it).

    Args:
        config_path: The jobs file (its jobs, read and followed: `FileJobs`).
        scheduler: The `DurableScheduler` that claims and runs the file's jobs, built
            with the daemon's settings (lease, poll, workers, clocks, the modules its
            one-offs may come from); its store is closed by `serve` when it returns.
        place: The namespace of this file's jobs in the store, and the state's key
            (`tickwork._daemon.state.place_of`): the runs the daemon starts carry the
            key, so that a daemon restarted on the same state finds the runs a killed
            one left behind.
        log: The run log.
        shutdown_grace: Seconds to let running jobs finish after SIGTERM/SIGINT.
    """

    def __init__(
        self,
        config_path: str,
        scheduler: DurableScheduler,
        *,
        place: Place,
        log: RunLog,
        shutdown_grace: float = 30.0,
    ) -> None:
        self.config_path = config_path
        self.scheduler = scheduler
        self.store = store = scheduler.store
        self.place = place
        self.namespace = place.namespace
        self.log = log
        self.shutdown_grace = shutdown_grace
        self.state_key = place.key
        self._groups = ProcessGroups(marker=daemon_marker(place.key), owner=scheduler.owner)
        self._stop = threading.Event()
        self._replacing = Replacing(self._groups, self._stop)
        self._announced = _Announced()  # runs whose start line is written
        self.traced = False  # runs are OpenTelemetry spans: commands get TRACEPARENT
        self.alerts = AlertSender()
        self.liveness = Liveness(scheduler.health, health_after=scheduler.health_after)
        self._wall = scheduler.now
        self.dead_man = DeadMan(scheduler, self.alerts, self.job_config)
        self.skips = HeldSlots(scheduler, store, log, namespace=self.namespace, job=self.job_config)
        scheduler.add_listener(self._on_event)  # the skips and wake-ups
        scheduler.add_listener(OneOffLines(log, scheduler.running).observe)
        self._signals: list[int] = []
        self.exit_status = 0
        """What `serve` returns: 1 when run ends were left unrecorded at shutdown."""
        self._wake_r = self._wake_w = -1
        self.jobs: FileJobs | None = None
        """The file's jobs in the state, as `serve` was given them (taken before)."""

    def job_config(self, name: str) -> JobConfig | None:
        """The served file's job ``name`` (``None``: none of that name, or not served yet)."""
        return None if self.jobs is None else self.jobs.job_config(name)

    # -- running one job (worker threads) -------------------------------------------------

    def run_one(self, name: str, declared: str) -> None:
        """Run job ``name`` with its current options (see `run_configured_job`)."""
        claim = DurableScheduler.current_claim()
        scheduled = claim.scheduled if claim is not None else self._wall()
        job = self._job_to_run(name, declared)
        tag = object()
        halt = self._stop
        if job.overlap == "replace" and claim is not None:
            halt = self._replacing.begin(tag, claim.job_id, scheduled)
        lines = _RunLines(self.log, name, scheduled, job, self._announced)
        ledger = _AttemptLedger(job, self._wall, claim is not None)
        try:
            result = run_job(
                job,
                groups=self._groups,
                stop=halt,
                on_start=ledger.starting(lines.started, claim),
                on_end=lambda r: self._ended(
                    name,
                    scheduled,
                    job,
                    ledger.ended(lines.ended(_replaced_by(r, self._replacing.replaced_for(tag)))),
                ),
                on_line=lines.line,
                tag=tag,
            )
        finally:
            self._replacing.end(tag)
            lines.close()
        due = self._replacing.replaced_for(tag, ended=True)  # asked always: then forgotten
        self._after_run(name, job, claim, scheduled, result, due)

    def _job_to_run(self, name: str, declared: str) -> JobConfig:
        """The running file's job ``name``; refused (`JobCancelled`) if it has none."""
        job = self.job_config(name)
        if job is None:  # another file's (a newer version of it?): not a failure of it
            text = (
                f"job {name!r} is not in {self.config_path}: not run by this daemon (pid"
                f" {os.getpid()}); does a daemon with another version of the file share"
                f" namespace {self.namespace!r}?"
            )
            _log.warning("%s", text)
            raise JobCancelled(text)
        if declared and declared != fingerprint(job):
            _log.warning(
                "job %r was declared with other options than this daemon's file has"
                " (another host runs a different version of %s?); running this file's",
                name,
                self.config_path,
            )
        return _traced(job) if self.traced and job.command is not None else job

    def _after_run(
        self,
        name: str,
        job: JobConfig,
        claim: Claim | None,
        scheduled: float,
        result: RunResult,
        due: float | None,
    ) -> None:
        """Hand a run's end to the ledger and the alerts; raise what the store records."""
        if result.ended is not None and claim is not None:
            # When the command really ended (its supervisor saw it), not when this
            # thread got to it: the daemon may have been stopped or starved meanwhile.
            DurableScheduler.record_end(result.ended)
        if job.output != "discard" and result.output.strip() and claim is not None:
            DurableScheduler.record_output(result.output)  # its tail, for the ledger
        if result.replaced:  # no alert: a replacement is not a failure of the job
            raise JobCancelled(_failure_text(_replaced_by(result, due)))
        if (job.on_failure is not None or job.on_success is not None) and claim is not None:
            self._alert(name, job, claim.job_id, scheduled, result)
        if job.mail_to and not result.ok and claim is not None:  # cron's MAILTO
            mail = Mail(job.mail_to, job.mail_command, job.smtp)
            output = "" if job.output == "discard" else result.output
            self.alerts.mail_failed(name, mail, scheduled=scheduled, status=result.status,
                                    error=result.error or "", output=output)  # fmt: skip
        if result.timed_out:
            raise JobTimedOut(_failure_text(result))
        if not result.ok:
            raise JobFailed(_failure_text(result))

    def _alert(
        self, name: str, job: JobConfig, job_id: str, scheduled: float, result: RunResult
    ) -> None:
        """Queue the alert this run makes: ``on_failure``'s or ``on_success``'s."""
        try:  # the runs before this one, as the ledger has them (this one is not in yet)
            summary = failure_summary(self.store, job_id, excluding=scheduled)
        except Exception as exc:
            _log.error("job %r: cannot read its failure streak for its alerts: %s", name, exc)
            return
        before = summary["consecutive_failures"] or 0
        self.alerts.run_ended(
            name,
            job.on_failure,
            ok=result.ok,
            failures_before=before,
            scheduled=scheduled,
            status=result.status,
            error=None if result.ok else _failure_text(result),
            output=result.output,
            on_success=job.on_success,
            last_success=summary["last_success"],
        )

    def _ended(self, name: str, scheduled: float, job: JobConfig, result: RunResult) -> None:
        """An attempt ended: its log line."""
        self.log.finished(name, scheduled, result)

    def _on_event(self, event: RunEvent) -> None:
        if event.job_id is None:
            return
        namespace, _, name = event.job_id.partition("/")
        if namespace != self.namespace:
            return
        if event.kind is EventKind.STARTED and self._wake_w >= 0:
            # The main loop looks for skips while runs go on.
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._wake_w, b"\0")
        self.skips.on_event(event, name)

    # -- the main thread ------------------------------------------------------------------

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """Catch SIGTERM, SIGINT and SIGHUP for this daemon until the block ends.

        From the main thread, before the jobs are taken: a stop signal that comes while
        the daemon starts is kept, and `serve` then stops at once and cleanly (no job
        started, status 0) instead of the process dying of it. `serve` enters it itself
        when it was not entered.
        """
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (*STOP_SIGNALS, signal.SIGHUP)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1

    def serve(self, jobs: FileJobs, *, run_for: float | None = None) -> int:
        """Run ``jobs`` until SIGTERM/SIGINT (or ``run_for`` seconds), shut down; the exit status.

        ``jobs``: the file's jobs, taken over this daemon (`FileJobs.take`); each turn
        follows the file with them (SIGHUP reloads it). Must be called from the main
        thread (it catches signals: `signals`). The store is closed on return. The
        status is 0, or 1 when the end of a run could not be recorded before exiting
        (the store failed throughout the shutdown; the log names each such job and slot).
        """
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError("a tickwork daemon is already running in this process")
            _active = self
        self.jobs = jobs
        with contextlib.ExitStack() as caught:
            if self._wake_r < 0:
                caught.enter_context(self.signals())
            try:
                why = self._stopped() or self._loop(jobs, run_for)  # stopped while taken: no start
                # The shutdown. No run starts after this; claims not yet started are handed back.
                self.liveness.stopping()
                self.dead_man.stop()
                self.scheduler.stop(wait=False)
                self._stop.set()  # no retry starts, a backoff or a jitter wait ends now
                self._replacing.halt_all()
                self._signals.clear()
                stopping = Stopping(self._groups, self.scheduler, self._wait, self._signals)
                kill_grace = max(jobs.kill_graces.values(), default=10.0)
                self.exit_status = stopping.shut_down(
                    why, lambda: self._announced.count, self.shutdown_grace, kill_grace
                )
                self.alerts.close()
            finally:
                self.liveness.close()
                with _active_lock:
                    _active = None
                if isinstance(self.store, NamespaceHolders):
                    with contextlib.suppress(Exception):  # else it is forgotten once gone
                        self.store.release_namespace(self.namespace, self.scheduler.owner)
                self.store.close()
        return self.exit_status

    def _stopped(self) -> str | None:
        """Why to stop now: a stop signal has come (SIGHUPs are left for the loop)."""
        sig = next((s for s in self._signals if s in STOP_SIGNALS), None)
        return None if sig is None else f"got {signal.Signals(sig).name}"

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only record it and wake the main loop: the work happens in _loop.
        self._signals.append(signum)
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")

    def _wait(self, timeout: float | None) -> None:
        """Sleep until a signal arrives or ``timeout`` seconds pass."""
        if timeout is not None and timeout <= 0:
            return
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass

    def _loop(self, jobs: FileJobs, run_for: float | None) -> str:
        """Start the runs, serve until a stop signal or ``run_for`` ends; why it stopped."""
        _trace_runs(self)
        self.alerts.start()
        self.scheduler.start()
        self.dead_man.start()
        self.liveness.ready(f"running the jobs of {self.config_path}")
        end = None if run_for is None else time.monotonic() + run_for
        while True:
            signalled = False
            while self._signals:
                sig = self._signals.pop(0)
                if sig in STOP_SIGNALS:
                    return f"got {signal.Signals(sig).name}"
                signalled = True  # SIGHUP: several before a turn read the file once
            if end is not None and time.monotonic() >= end:
                return "--for time is up"
            waits = [jobs.follow(signalled=signalled)]
            if self.scheduler.running():
                try:
                    self.skips.check()
                except Exception:  # the state is unreachable: the scheduler says so
                    _log.debug("looking for skipped runs failed", exc_info=True)
                try:
                    self._replacing.check(self.store.get, self._wall())
                except Exception:
                    _log.debug("looking for runs to replace failed", exc_info=True)
                waits.append(SKIP_CHECK)
            if end is not None:
                waits.append(end - time.monotonic())
            self._wait(min((w for w in waits if w is not None), default=None))


def _trace_runs(daemon: Daemon) -> None:
    """Make each run an OpenTelemetry span if the process set a tracer provider.

    Set means OpenTelemetry is already imported (``opentelemetry-instrument``, a
    ``sitecustomize``) and its global provider is a real one: nothing is imported or
    paid otherwise. See docs/observability.md, "Tracing and error reporting".
    """
    if "opentelemetry.trace" not in sys.modules:
        return
    from tickwork.tracing import RunTracer, tracer_configured

    if tracer_configured():
        prefix = daemon.namespace + "/"
        RunTracer(job_label=lambda job: job.removeprefix(prefix)).watch(daemon.scheduler)
        daemon.traced = True
        _log.info("tracing runs with OpenTelemetry (the global tracer provider)")


def _traced(job: JobConfig) -> JobConfig:
    """``job`` with ``TRACEPARENT`` naming its run's span, so the command's spans join it."""
    from tickwork.tracing import command_traceparent

    command = job.command if isinstance(job.command, str) else shlex.join(job.command or ())
    parent = command_traceparent(command)
    if parent is None:
        return job
    return dataclasses.replace(job, env={**job.env, "TRACEPARENT": parent})


class _RunLines:
    """One run's start lines and, with ``output = "log"``, its output lines as written.

    Each attempt gets its own `RunOutput` (its own ``output_limit``), whose count of
    dropped lines is logged before the attempt's end line.
    """

    def __init__(
        self, log: RunLog, name: str, scheduled: float, job: JobConfig, announced: _Announced
    ) -> None:
        self._log = log
        self._announced = announced
        self._counted = False
        self._name = name
        self._scheduled = scheduled
        self._stream = job.output == "log" and job.command is not None
        self._limit = job.output_limit
        self._output: RunOutput | None = None

    def started(self, attempt: int, origin: str) -> None:
        note_attempt(attempt)  # for the run's span (tickwork.tracing), if one is made
        self._log.started(self._name, self._scheduled, attempt=attempt, origin=origin)
        if not self._counted:
            self._counted = True
            self._announced.add(1)
        if self._stream:
            self._output = self._log.output(
                self._name, self._scheduled, attempt=attempt, limit=self._limit
            )

    def line(self, stream: str, text: str, size: int) -> None:
        if self._output is not None:
            self._output.line(stream, text, size)

    def ended(self, result: RunResult) -> RunResult:
        if self._output is not None:
            self._output.end()
            self._output = None
        return result

    def close(self) -> None:
        """The run is over: it no longer counts among those whose start is logged."""
        if self._counted:
            self._counted = False
            self._announced.add(-1)


class _Announced:
    """How many runs in progress have written their start line (the shutdown waits for them)."""

    __slots__ = ("_lock", "count")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


def _replaced_by(result: RunResult, due: float | None) -> RunResult:
    """``result``, naming the run it made way for if ``overlap = "replace"`` ended it."""
    if not result.replaced or due is None:
        return result
    return dataclasses.replace(
        result, error=f'replaced by the run due {iso_due(due)} (overlap = "replace")'
    )


class _AttemptLedger:
    """Writes each failed attempt of a run to the slot ledger as it ends (``retries``).

    An attempt that will be retried, and a call's thread at its ``timeout`` (recorded
    then, though the thread goes on), get their entry at once; the run's finish writes
    the last attempt's otherwise (`tickwork._durable.attempts`).
    """

    __slots__ = ("_held", "_job", "_started", "_wall")

    def __init__(self, job: JobConfig, wall: Callable[[], float], held: bool) -> None:
        self._job = job
        self._wall = wall
        self._held = held  # a durable claim is held (not a run outside the scheduler)
        self._started = 0.0

    def starting(
        self, then: Callable[[int, str], object], claim: Claim | None
    ) -> Callable[[int], None]:
        """The ``on_start`` of `run_job`: note the attempt's start, then call ``then``."""
        origin = "schedule" if claim is None else claim.origin

        def started(attempt: int) -> None:
            self._started = self._wall()
            if self._held:
                begin_attempt(started=self._started)
            then(attempt, origin)

        return started

    def ended(self, result: RunResult) -> RunResult:
        job = self._job
        if not self._held or result.ok or result.cancelled:
            return result
        in_thread = job.call is not None and job.isolation == "thread"
        if result.attempt > job.retries and not (in_thread and result.timed_out):
            return result  # the last attempt: its finish records it
        text = _failure_text(result)
        record_attempt(
            "timeout" if result.timed_out else "failed",
            started=self._started,
            ended=self._wall(),
            error=text,
            output=None if job.output == "discard" else result.output[-LEDGER_TAIL:] or None,
            report=JobTimedOut(text) if result.timed_out else JobFailed(text),
        )  # counted in tickwork_runs_total as its ledger entry is
        return result


def _failure_text(result: RunResult) -> str:
    """What the store records for a failed run: outcome, error, end of the output."""
    head = result.status
    if result.attempt > 1:
        head += f" (attempt {result.attempt})"
    if result.error:
        head += f": {result.error}"
    output = result.output.strip()
    if len(output) > _ERROR_TAIL:
        output = "..." + output[-_ERROR_TAIL:]
    return f"{head}\n{output}" if output else head
