"""The pure core: schedules, cron, the tick `Scheduler`, a run's life cycle, errors, text."""
