"""The processes of the daemon's jobs: how a command starts, runs, is watched and ends.

`runner` runs one job (a command in its own process group, or a callable); `jobprocess`
sets a command's process up (user, group, umask, limits, env_file); `supervisor` is the
small process between the daemon and a command; `replacing` ends a running command when
its next run comes due (``overlap = "replace"``).
"""
