"""The pure core: schedules, cron, events, the tick `Scheduler`, runs, errors, text."""
