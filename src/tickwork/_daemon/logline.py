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
  file's problems, a store that cannot be opened), in the chosen format.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Final, Literal, TextIO

from tickwork._core.text import iso

__all__ = ["escape_controls", "json_line", "one_line", "say"]

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
