"""Run a jobs file from Python: the daemon behind ``tickwork run``.

`DaemonConfig` holds what ``tickwork run`` parses from its file and options;
`run_daemon` runs it until a stop signal (or ``run_for``) and returns the exit status::

    from tickwork.daemon import DaemonConfig, run_daemon

    raise SystemExit(run_daemon(DaemonConfig(jobs_file="jobs.toml")))

A crontab runs the same way (``tickwork run --crontab``)::

    run_daemon(DaemonConfig("/etc/crontab", crontab=CrontabOptions(system=True)))

See ``docs/daemon.md`` for the file, the options and what the daemon records.
"""

from __future__ import annotations

from tickwork._daemon.jobsfile.crontab import CrontabOptions as CrontabOptions
from tickwork._daemon.start import DaemonConfig as DaemonConfig
from tickwork._daemon.start import run_daemon as run_daemon
from tickwork._daemon.state import DaemonError as DaemonError

__all__ = ["CrontabOptions", "DaemonConfig", "DaemonError", "run_daemon"]
