"""Exceptions raised by tickwork."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "CronError",
    "JobFailed",
    "JobInterrupted",
    "TickworkError",
]


class TickworkError(Exception):
    """Base class of every exception tickwork raises on purpose."""


class JobFailed(TickworkError):
    """A job's own way to report a failure it has already described.

    A durable job that raises it is recorded as failed with ``str(exc)`` as the error,
    without the exception type or traceback frames (which would only point at the
    code that raised it). ``tickwork run`` raises it with the run's outcome and the
    end of its output.
    """


class JobTimedOut(JobFailed, TimeoutError):
    """`JobFailed` for a run that went over its timeout: recorded as ``"timeout"``.

    A durable job that raises any `TimeoutError` is recorded with the outcome
    ``"timeout"`` instead of ``"failed"``; ``tickwork run`` raises this one.
    """


class JobCancelled(JobFailed):
    """`JobFailed` for a run stopped on purpose: recorded with the outcome ``"cancelled"``.

    ``tickwork run`` raises it for a run that ``overlap = "replace"`` stopped to start
    the next one; the message says so. The run had started, so its slot is not handed
    back (as a ``"cancelled"`` claim that never started is).
    """


class JobInterrupted(TickworkError):
    """A job on a worker thread raised a `BaseException` that is not an `Exception`.

    `SystemExit` or `KeyboardInterrupt` raised by a job that runs on a pool's worker
    thread (`ThreadScheduler`, `AsyncScheduler`'s executor runs, `DurableScheduler`)
    cannot reach the code that would act on it: the driver records the run as failed
    with this error (in ``errors``, the log, ``on_error`` and the FAILED event) and goes
    on. The original exception is its ``__cause__``.
    """

    @classmethod
    def wrap(cls, exc: BaseException) -> JobInterrupted:
        """The error for ``exc``: ``job raised SystemExit(3)``, caused by ``exc``."""
        error = cls(f"job raised {exc!r}")
        error.__cause__ = exc
        return error


class CronError(TickworkError, ValueError):
    """A cron expression or its time zone is invalid, or can never fire.

    The message names the offending field (or ``tz``) and shows the bad value.
    """


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a jobs file: where it is and what is wrong.

    ``str(issue)`` reads ``jobs.toml:14: job "rotate": every: <message>``.
    """

    path: str
    """The file, as it was named to the loader."""
    line: int
    """1-based line of the offending key (0 when the file could not be read)."""
    where: str
    """The table: ``job "rotate"``, ``job #3`` (no usable name), ``defaults``, or ``""``."""
    key: str
    """The dotted key inside that table (``every``, ``env.PORT``), or ``""``."""
    message: str
    """The rule that is broken, showing the bad value."""

    def __str__(self) -> str:
        head = f"{self.path}:{self.line}" if self.line else self.path
        return ": ".join(part for part in (head, self.where, self.key, self.message) if part)


class ConfigError(TickworkError, ValueError):
    """A jobs file is unreadable or invalid; `errors` lists every problem found.

    The message is one ``file:line: ...`` line per problem, in line order.
    """

    def __init__(self, errors: list[ConfigIssue]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors
        """Every problem, in line order (never empty)."""
