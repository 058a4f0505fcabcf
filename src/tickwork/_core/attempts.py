"""Retries and time limits: the one backoff rule and the checks of a job's attempt policy.

Shared by the durable engine (library jobs, `tickwork.stores.JobSpec`) and the daemon
(``tickwork run`` commands and calls), so a retry waits the same and an option is
refused with the same words wherever it is written.

The wait before retry ``n`` (1-based) is ``retry_backoff * 2**(n-1)``, capped at
``retry_backoff_max``, then jittered down by up to half ("equal jitter"): somewhere in
``[d/2, d]``. Many jobs failing together (a database restart) so do not all retry in
the same instant, and no retry ever comes sooner than half its nominal wait.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tickwork._core.args import seconds
from tickwork._core.vocabulary import ISOLATIONS, Isolation

__all__ = [
    "DEFAULT_KILL_GRACE",
    "DEFAULT_RETRY_BACKOFF",
    "DEFAULT_RETRY_BACKOFF_MAX",
    "MAX_RETRIES",
    "AttemptPolicy",
    "backoff_delay",
    "check_policy",
]

#: The most retries a job may ask for.
MAX_RETRIES: Final = 100
#: Seconds before the first retry unless the job says otherwise.
DEFAULT_RETRY_BACKOFF: Final = 1.0
#: The cap on the doubled backoff unless the job says otherwise.
DEFAULT_RETRY_BACKOFF_MAX: Final = 300.0
#: Seconds between SIGTERM and SIGKILL for a child process at its time limit.
DEFAULT_KILL_GRACE: Final = 10.0


def backoff_delay(
    retry: int,
    *,
    base: float,
    cap: float,
    jitter: bool = True,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retry number ``retry`` (1-based).

    ``base * 2**(retry-1)``, at most ``cap``; with ``jitter`` a random point of the
    upper half of that (``rand()`` in ``[0, 1)`` picks it; tests pass their own).
    """
    nominal = min(cap, base * 2.0 ** min(retry - 1, 64))
    if not jitter:
        return nominal
    return nominal * (1.0 - 0.5 * rand())


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    """A job's retries and time limit, checked (see `check_policy`)."""

    retries: int = 0
    """Further attempts after a failed one (0: run once)."""
    retry_backoff: float = DEFAULT_RETRY_BACKOFF
    """Seconds before the first retry; doubled for each further one (jittered)."""
    retry_backoff_max: float = DEFAULT_RETRY_BACKOFF_MAX
    """The cap on the doubled backoff."""
    timeout: float | None = None
    """Seconds one attempt may take (``None``: no limit)."""
    kill_grace: float = DEFAULT_KILL_GRACE
    """With ``isolation="process"``: seconds between SIGTERM and SIGKILL at the limit."""
    isolation: Isolation = "thread"
    """``"thread"``: called in the worker thread; ``"process"``: in a child process."""

    def to_dict(self) -> dict[str, object]:
        """The fields that differ from the default, under their own names."""
        return {
            name: getattr(self, name)
            for name in self.__slots__
            if getattr(self, name) != getattr(_PLAIN, name)
        }


_PLAIN: Final = AttemptPolicy()


def check_policy(
    *,
    retries: object = 0,
    retry_backoff: object = DEFAULT_RETRY_BACKOFF,
    retry_backoff_max: object = DEFAULT_RETRY_BACKOFF_MAX,
    timeout: object = None,
    kill_grace: object = DEFAULT_KILL_GRACE,
    isolation: object = "thread",
    error: type[Exception] = ValueError,
) -> AttemptPolicy:
    """The checked policy; ``error`` (a `ValueError` by default) names a bad argument.

    ``timeout`` 0 means no limit, as in systemd and the jobs file.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise error(f"retries must be an integer from 0 to {MAX_RETRIES}, got {retries!r}")
    backoff = seconds("retry_backoff", retry_backoff, bound="> 0", error=error, type_error=error)
    cap = seconds(
        "retry_backoff_max", retry_backoff_max, bound="> 0", error=error, type_error=error
    )
    limit = seconds("timeout", timeout, bound=">= 0", optional=True, error=error, type_error=error)
    grace = seconds("kill_grace", kill_grace, bound=">= 0", error=error, type_error=error)
    if not isinstance(isolation, str) or isolation not in ISOLATIONS:
        choices = ", ".join(repr(i) for i in ISOLATIONS)
        raise error(f"isolation must be one of {choices}, got {isolation!r}")
    return AttemptPolicy(retries, backoff, cap, limit or None, grace, isolation)  # type: ignore[arg-type,unused-ignore]
