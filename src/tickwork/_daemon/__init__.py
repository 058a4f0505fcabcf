"""The ``tickwork run`` daemon: the jobs file, its durable jobs, processes, logs, HTTP."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """Resolve ``run_configured_job``, the import path every daemon job stores.

    Jobs are stored as ``tickwork._daemon:run_configured_job`` (the path this name had
    before the package had folders); resolving it here keeps every state file runnable.
    """
    if name == "run_configured_job":
        from tickwork._daemon.daemon import run_configured_job

        return run_configured_job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
