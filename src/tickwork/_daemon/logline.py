"""One record per line: what every line ``tickwork run`` writes to stderr is made of.

A log pipeline (journald, a container runtime, Kubernetes) splits records at line
breaks, so a message that holds a newline (a driver's error, a traceback, a job's
error text) must never reach the stream as it is:

- `one_line` escapes control characters for the text format (a newline becomes the
  two characters backslash and ``n``, a tab backslash and ``t``), so a text record is one line;
- `json_line` is one JSON object on one line: ``json.dumps`` already escapes what
  JSON requires, and this also escapes the characters some readers take as line
  breaks or that a terminal interprets (U+2028, U+2029, DEL and the C1 controls);
- `say` writes a message of ``tickwork run`` itself outside the logging system (the
  file's problems, a store that cannot be opened), in the chosen format;
- `setup_logging` sends the ``tickwork`` loggers (and what would otherwise reach the
  stream raw: other libraries' warnings, an exception no thread caught) to the stream,
  one record a line in the same format.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Final, Literal, TextIO

from tickwork._core.errors import JobFailed
from tickwork._core.text import iso
from tickwork._durable.events import RUN_FAILED

__all__ = ["escape_controls", "json_line", "one_line", "say", "setup_logging"]

_log = logging.getLogger("tickwork.daemon")

# C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators.
_CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What json.dumps leaves raw (it escapes only C0 controls, quotes and backslashes).
_JSON_RAW: Final = re.compile("[\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character written as a backslash escape (n, t, r, xHH)."""
    return _CONTROLS.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` as one text log line: trailing white space dropped, controls escaped."""
    return escape_controls(text.rstrip())


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one line of JSON, with no raw control or line-separator character."""
    text = json.dumps(record, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def say(
    stream: TextIO,
    fmt: Literal["text", "json"],
    message: str,
    *,
    level: str = "error",
    prefix: str = "tickwork run",
) -> None:
    """Write one record of the command itself to ``stream`` and flush it.

    Text: ``<prefix>: <message>`` on one line (as the command has always printed;
    ``prefix=""``: the message alone);
    JSON: an object with the keys of the daemon's own log lines (``time``,
    ``event`` = ``"log"``, ``level``, ``logger``, ``message``).
    """
    if fmt == "json":
        line = json_line(
            {
                "time": iso(time.time(), millis=True),
                "event": "log",
                "level": level,
                "logger": "tickwork.run",
                "message": message,
            }
        )
    else:
        line = one_line(f"{prefix}: {message}" if prefix else message)
    stream.write(line + "\n")
    stream.flush()


# -- the daemon's own messages, one record a line ------------------------------------------


class _LogFormatter(logging.Formatter):
    """Daemon messages as one line each, text or JSON, like the run log."""

    def __init__(self, fmt: Literal["text", "json"]) -> None:
        super().__init__()
        self._json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            message += f": {type(exc).__name__}: {exc}"
        if self._json:
            fields = {
                "time": iso(record.created, millis=True),
                "event": "log",
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": message,
            }
            if exc is not None:  # the whole traceback, in a field of the one record
                fields["traceback"] = "".join(traceback.format_exception(exc)).rstrip()
            return json_line(fields)
        level = "" if record.levelno < logging.WARNING else f" {record.levelname.lower()}"
        return one_line(f"{iso(record.created)} tickwork{level}: {message}")


class _NotJobFailures(logging.Filter):
    """Drop the durable layer's record of a failed run: the run log has said it.

    A command's failure is a `JobFailed`; a one-off's is its function's own exception,
    marked `RUN_FAILED` when it was sent as an event to the run log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, JobFailed) or getattr(record, RUN_FAILED, False))


def setup_logging(stream: TextIO, fmt: Literal["text", "json"]) -> Callable[[], None]:
    """Send the ``tickwork`` loggers to ``stream`` in ``fmt``; return an undo function.

    So that every line on ``stream`` is one record in ``fmt``, it also takes what would
    otherwise be written there raw: other libraries' warnings (the database driver's)
    and Python warnings when no logging is set up, and an exception no thread caught.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_LogFormatter(fmt))
    handler.addFilter(_NotJobFailures())
    root = logging.getLogger("tickwork")
    durable = logging.getLogger("tickwork.durable")
    saved = (root.level, root.propagate, durable.level)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
    durable.setLevel(logging.WARNING)  # its INFO lines repeat the run log's skips
    python_root = logging.getLogger()
    others: logging.Handler | None = None
    if not python_root.handlers:  # else logging's last resort writes them raw
        others = logging.StreamHandler(stream)
        others.setFormatter(_LogFormatter(fmt))
        others.setLevel(logging.WARNING)
        python_root.addHandler(others)
    logging.captureWarnings(True)
    hook = threading.excepthook
    threading.excepthook = _thread_crashed

    def undo() -> None:
        threading.excepthook = hook
        logging.captureWarnings(False)
        if others is not None:
            python_root.removeHandler(others)
        root.removeHandler(handler)
        root.setLevel(saved[0])
        root.propagate = saved[1]
        durable.setLevel(saved[2])

    return undo


def _thread_crashed(args: threading.ExceptHookArgs) -> None:
    """An exception no thread caught, as one log record (not a raw traceback)."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    _log.error("thread %s failed", name, exc_info=(args.exc_type, exc, args.exc_traceback))
