"""The jobs file of ``tickwork run``: read, checked and turned into `JobConfig` values.

`config` parses the file, with its calendars (`calendar_config`), its chains (`chains`,
the ``after`` key) and its pools (`pools`); `crontab` writes a crontab as a jobs file.
"""
