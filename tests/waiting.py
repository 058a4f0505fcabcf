"""Waiting in tests: for the thing itself, never for a fixed time.

A test that waits for a run, a log line or a file polls for it with `wait_until`, bounded
by `DEADLINE`: long enough that only a real hang reaches it, also when the suite shares
2 cores with 8 busy loops (``under-load -l 8``, a load near 10) and its own workers.
Reaching it fails the test with what it waited for; a test never passes by waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Seconds to wait for anything that should happen in well under one on an idle machine.
DEADLINE = 120.0


def wait_until(what: str, check: Callable[[], object], limit: float = DEADLINE) -> Any:
    """Poll ``check()`` until it returns something truthy, and return that.

    Fails with ``what`` after ``limit`` seconds; the check runs once more at the end, so
    a slow last poll is not mistaken for a hang.

    Between polls it sleeps 20 ms; after a check that took over 0.1 s, as long as it took
    (up to 1 s): a check that starts a process (a ``tickwork jobs`` of its own, ~0.3 s of
    CPU) then keeps half a core busy, not a whole one the suite's other workers wait for.
    """
    give_up = time.monotonic() + limit
    while True:
        began = time.monotonic()
        late = began > give_up
        value = check()
        if value:
            return value
        if late:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        took = time.monotonic() - began
        time.sleep(min(took, 1.0) if took > 0.1 else 0.02)
