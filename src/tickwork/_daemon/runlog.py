"""The run log of ``tickwork run``: one line when a run starts and one when it ends.

Between them, with ``output = "log"``, each line the command writes, as it writes it
(`RunOutput`, up to the job's ``output_limit`` lines per attempt; then one line saying
exactly how many lines and bytes were not logged).

Two formats, both one line per event, flushed at once:

- ``text`` for people: ``2026-12-02T17:00:00Z rotate finished ok in 0.12s``. The
  timestamp is when the line was written, so a log reads in order; a run's first start
  line says how late the run started, when it is late (a retry's does not: it waits its
  backoff on purpose), and a skip line names the skipped run's
  due time. Attempts and, on failure, the end of the output follow on the same line.
- ``json`` for machines: one object per line with a fixed set of keys (`JSON_KEYS`,
  documented in ``docs/daemon.md``); a key that does not apply is ``null``.

The one-offs the daemon runs (``--allow-module``) are not the jobs file's: their lines
come from its scheduler's events (`OneOffLines`), named by the one-off's id with its
function.
"""

from __future__ import annotations

import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TextIO

from tickwork._core.errors import JobCancelled
from tickwork._core.events import EventKind, RunEvent
from tickwork._core.text import iso
from tickwork._core.text import iso_due as _due
from tickwork._core.text import run_duration as _seconds
from tickwork._daemon.logline import json_line, one_line
from tickwork._daemon.process.runner import TAIL_BYTES, RunResult
from tickwork.stores.contract import is_oneoff

__all__ = ["JSON_KEYS", "LogFormat", "OneOffLines", "RunLog", "RunOutput", "iso"]

LogFormat = Literal["text", "json"]

JSON_KEYS: Final = (
    "time",
    "event",
    "job",
    "scheduled",
    "attempt",
    "status",
    "exit_code",
    "signal",
    "duration",
    "late",
    "reason",
    "error",
    "output",
    "count",
    "stream",
    "bytes",
    "func",
)
"""The keys of every JSON line, in order."""

_LATE: Final = 1.0  # seconds late before a text start line says so
_TEXT_TAIL: Final = 300  # characters of output on a text failure line


def _one_line(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) > limit:
        text = "..." + text[-limit:]
    return " | ".join(line.rstrip() for line in text.splitlines() if line.strip())


class RunLog:
    """Writes run events to a stream, one line each, flushed per line.

    The daemon calls `started` before each attempt, `finished` after it, and `skipped`
    for a due run it did not start. Thread-safe as far as the stream's ``write`` is
    (each event is one ``write`` call).

    Args:
        stream: Where lines go (``sys.stderr`` by the daemon).
        format: ``"text"`` or ``"json"``.
        wall: The clock for the event time (``time.time``; tests pass a fake).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        format: LogFormat = "text",
        wall: Callable[[], float] = time.time,
    ) -> None:
        if format not in ("text", "json"):
            raise ValueError(f"format must be 'text' or 'json', got {format!r}")
        self._stream = stream
        self._format = format
        self._wall = wall

    def started(
        self,
        job: str,
        scheduled: float,
        *,
        attempt: int = 1,
        origin: str = "schedule",
        func: str | None = None,
    ) -> None:
        """A run (or a retry: ``attempt`` > 1) of ``job`` due at ``scheduled`` starts now.

        Args:
            job: The job's name (a one-off: its id).
            scheduled: The run's scheduled time, POSIX seconds.
            attempt: 1 for the run, 2 for the first retry, ...
            origin: ``"schedule"``, or ``"manual"`` / ``"backfill"`` for a run an
                operator asked for (said on a text line).
            func: A one-off's function, said after its id (JSON: ``func``).
        """
        now = self._wall()
        late = max(0.0, now - scheduled)
        if self._format == "json":
            self._json(now, "started", job, scheduled, attempt=attempt, late=round(late, 3),
                       func=func)  # fmt: skip
            return
        job = _named(job, func)
        extra = [] if origin == "schedule" else [origin]
        if attempt > 1:
            extra.append(f"attempt {attempt}")
        if late >= _LATE and attempt == 1:  # a retry waits its backoff on purpose
            extra.append(f"{_seconds(late)} late")
        suffix = f" ({', '.join(extra)})" if extra else ""
        self._write(f"{iso(now)} {job} started{suffix}")

    def finished(
        self, job: str, scheduled: float, result: RunResult, *, func: str | None = None
    ) -> None:
        """A run of ``job`` due at ``scheduled`` ended with ``result``.

        Args:
            job: The job's name (a one-off: its id).
            scheduled: The run's scheduled time, POSIX seconds.
            result: How it ended; its output tail is logged when it failed.
            func: A one-off's function, said after its id (JSON: ``func``).
        """
        now = self._wall()
        event = "finished" if result.ok else "failed"
        if self._format == "json":
            self._json(
                now,
                event,
                job,
                scheduled,
                attempt=result.attempt,
                status=result.status,
                exit_code=result.exit_code,
                signal=_signal(result),
                duration=round(result.duration, 3),
                error=result.error,
                output=None if result.ok else result.output,
                func=func,
            )
            return
        head = f"{iso(now)} {_named(job, func)} {event} {result.status}"
        if result.attempt > 1:
            head += f" (attempt {result.attempt})"
        head += f" in {_seconds(result.duration)}"
        if result.ok:
            self._write(head)
            return
        details = [d for d in (result.error, _one_line(result.output, _TEXT_TAIL)) if d]
        if result.timed_out and result.signal is not None:
            details.insert(0, f"ended by {_signal(result)}")
        self._write(f"{head}: {' | '.join(details)}" if details else head)

    def output(self, job: str, scheduled: float, *, attempt: int = 1, limit: int) -> RunOutput:
        """Where the lines of one attempt of ``job`` go as they are written (``output = "log"``).

        Args:
            job: The job's name.
            scheduled: The run's scheduled time, POSIX seconds.
            attempt: 1 for the run, 2 for the first retry, ...
            limit: The most lines logged (the job's ``output_limit``); the rest are
                counted and `RunOutput.end` says how many.
        """
        return RunOutput(self, job, scheduled, attempt, limit)

    def skipped(
        self,
        job: str,
        scheduled: float,
        *,
        reason: str,
        count: int = 1,
        last: float | None = None,
    ) -> None:
        """Due runs of ``job`` were not started, for ``reason``.

        Args:
            job: The job's name.
            scheduled: The (first) skipped run's scheduled time, POSIX seconds.
            reason: Why: ``"overlap"`` (the previous run is still going), ``"pool"``
                (due while the job's run waited for its concurrency pool), ``"missed"``
                (too late, past the job's grace), or ``"shutdown"``.
            count: How many runs this line stands for (a rate-limited line).
            last: The last of them, when ``count`` > 1 and it is known.
        """
        now = self._wall()
        if self._format == "json":
            self._json(now, "skipped", job, scheduled, reason=reason, count=count)
            return
        why = {
            "overlap": "overlap: the previous run is still running",
            "pool": "pool: due while the job's run waited for its pool",
            "missed": "missed: too late to start",
            "shutdown": "shutting down",
        }.get(reason, reason)
        if count == 1:
            what = f"the run due {_due(scheduled)}"
        elif last is not None:
            what = f"{count} runs due {_due(scheduled)} to {_due(last)}"
        else:
            what = f"{count} runs due from {_due(scheduled)}"
        self._write(f"{iso(now)} {job} skipped {what} ({why})")

    def _json(self, now: float, event: str, job: str, scheduled: float, **fields: Any) -> None:
        record: dict[str, Any] = dict.fromkeys(JSON_KEYS)
        record.update(time=iso(now, millis=True), event=event, job=job)
        record.update(scheduled=iso(scheduled, millis=True), **fields)
        self._write(json_line(record))

    def _write(self, line: str) -> None:
        if self._format == "text":  # a job's error text may hold line breaks, tabs
            line = one_line(line)
        self._stream.write(line + "\n")
        self._stream.flush()


class RunOutput:
    """The output lines of one attempt, logged as they come, up to a limit.

    Made by `RunLog.output`. Text: ``<time> <job> stdout | <line>`` (or ``stderr``);
    JSON: event ``output`` with ``stream`` and the line in ``output``. The first line
    past the limit is replaced by one saying the limit was reached; `end` then says
    exactly how many lines and bytes were not logged. Used from one thread (the run's).
    """

    def __init__(self, log: RunLog, job: str, scheduled: float, attempt: int, limit: int) -> None:
        self._log = log
        self._job = job
        self._scheduled = scheduled
        self._attempt = attempt
        self.limit = limit
        self.logged = 0
        """Lines logged so far."""
        self.dropped_lines = 0
        """Lines past the limit, not logged."""
        self.dropped_bytes = 0
        """The bytes the command wrote for those lines, newlines included."""

    def line(self, stream: str, text: str, size: int) -> None:
        """The command wrote a line (``size`` bytes with its newline) on ``stream``."""
        if self.logged < self.limit:
            self.logged += 1
            self._write("output", stream, text, f"{stream} | {text}")
            return
        if not self.dropped_lines:
            self._write(
                "output_limit",
                None,
                None,
                f"output_limit reached ({self.limit} line(s)): the rest of"
                " this run's output is counted, not logged",
                count=self.limit,
            )
        self.dropped_lines += 1
        self.dropped_bytes += size

    def end(self) -> None:
        """The attempt is over: if lines were dropped, say exactly how many."""
        if not self.dropped_lines:
            return
        lines, size = self.dropped_lines, self.dropped_bytes
        self._write(
            "output_dropped",
            None,
            None,
            f"output: {lines} line(s), {size} byte(s) not logged (over output_limit ="
            f" {self.limit})",
            count=lines,
            bytes=size,
        )

    def _write(
        self, event: str, stream: str | None, output: str | None, text: str, **fields: Any
    ) -> None:
        log = self._log
        now = log._wall()
        if log._format == "json":
            log._json(
                now,
                event,
                self._job,
                self._scheduled,
                attempt=self._attempt,
                stream=stream,
                output=output,
                **fields,
            )
        else:
            log._write(f"{iso(now)} {self._job} {text}")


#: `OneOffLines` drops the attempt counts of one-offs no longer running here once it
#: holds this many as another one-off starts.
_PRUNE_AT: Final = 64


class OneOffLines:
    """The run log's lines of the one-offs a daemon's scheduler runs, from its events.

    A one-off (enqueued by the app, ``tickwork enqueue`` or ``POST /api/enqueue``) is
    run by the scheduler itself, not as one of the jobs file's jobs: its STARTED event
    is its `RunLog.started` line, its FINISHED or FAILED one its `RunLog.finished`
    line, named by its id (``~key:KEY``, or ``~`` and 28 hex digits) and function.
    Each attempt of a retried one-off is a STARTED event: they are counted per run,
    and the counts of runs that no longer run here (`running`) are dropped once
    `_PRUNE_AT` are held as another one-off starts. The jobs' events are left alone.

    Args:
        log: Where the lines go.
        running: Job id -> runs held by the scheduler (`DurableScheduler.running`).
    """

    def __init__(self, log: RunLog, running: Callable[[], Mapping[str, int]]) -> None:
        self._log = log
        self._running = running
        self._lock = threading.Lock()
        self._attempts: dict[tuple[str, float], int] = {}  # (id, due) -> attempts started
        self.pruned = 0
        """Attempt counts dropped so far (of runs that ended)."""

    def observe(self, event: RunEvent) -> None:
        """The listener: a one-off's start or end as a run-log line; others ignored."""
        job_id, kind = event.job_id, event.kind
        if job_id is None or not is_oneoff(job_id):
            return
        run = (job_id, event.scheduled)
        if kind is EventKind.STARTED:
            with self._lock:
                attempt = self._attempts.get(run, 0) + 1
                if attempt == 1 and len(self._attempts) >= _PRUNE_AT:
                    self._prune()
                self._attempts[run] = attempt
            origin = event.origin or "schedule"
            self._log.started(job_id, run[1], attempt=attempt, origin=origin, func=event.func)
        elif kind is EventKind.FINISHED or kind is EventKind.FAILED:
            with self._lock:
                if kind is EventKind.FINISHED:
                    attempt = self._attempts.pop(run, 1)
                else:  # a retry may follow: its start counts on
                    attempt = self._attempts.get(run, 1)
            self._log.finished(job_id, run[1], _result(event, attempt), func=event.func)

    def _prune(self) -> None:
        """Drop the counts of runs that no longer run here (the lock held)."""
        held = self._running()
        gone = [run for run in self._attempts if run[0] not in held]
        for run in gone:
            del self._attempts[run]
        self.pruned += len(gone)

    def _check(self) -> None:
        """Every count held is of a one-off and at least 1."""
        with self._lock:
            assert all(is_oneoff(i) and n >= 1 for (i, _), n in self._attempts.items())


def _result(event: RunEvent, attempt: int) -> RunResult:
    """How a one-off's attempt ended, as a command's would: its error and traceback."""
    took = event.duration or 0.0
    error = event.error
    if error is None:
        return RunResult(exit_code=0, duration=took, attempt=attempt)
    trace = "".join(traceback.format_exception(error))
    return RunResult(
        timed_out=isinstance(error, TimeoutError),
        cancelled=isinstance(error, JobCancelled),
        error=f"{type(error).__name__}: {error}",
        duration=took,
        output=trace[-TAIL_BYTES:],
        output_bytes=len(trace.encode()),
        attempt=attempt,
    )


def _named(job: str, func: str | None) -> str:
    """A text line's name of a run: the job's, or a one-off's id and function."""
    return job if func is None else f"{job} ({func})"


def _signal(result: RunResult) -> str | None:
    if result.signal is None:
        return None
    try:
        return signal.Signals(result.signal).name
    except ValueError:
        return str(result.signal)
