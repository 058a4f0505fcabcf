"""What a run tells its observers from inside, per worker thread (no third-party imports).

The daemon notes each attempt of a command here (``tickwork run``'s ``retries``) so that
`tickwork.tracing` can put the number on the run's span; nothing reads it otherwise.
"""

from __future__ import annotations

import threading

_local = threading.local()


def note_attempt(attempt: int) -> None:
    """The run on this thread is at attempt ``attempt`` (1 is the first)."""
    _local.attempt = attempt


def take_attempt() -> int | None:
    """The attempt last noted on this thread (then forgotten); ``None`` if none was."""
    attempt: int | None = getattr(_local, "attempt", None)
    _local.attempt = None
    return attempt
