"""`InlineExecutor`, for tests: exported by `tickwork.testing` (imported on first use)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import ParamSpec, TypeVar

__all__ = ["InlineExecutor"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class InlineExecutor(Executor):
    """Runs each submitted call at once, in the submitting thread.

    Give it to a driver (``executor=InlineExecutor()``) in a test: a ``step()`` then runs
    the jobs it hands over before it returns, so what ran can be asserted right after.
    A job's exception is kept in its future (the drivers record it as they always do).
    """

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        """Call ``fn(*args, **kwargs)`` now; return a finished future with its outcome."""
        future: Future[_T] = Future()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to shut down: every call has run already."""
