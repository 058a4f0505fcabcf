"""Schedules in words (the status page): common cron shapes said, the rest left alone."""

from __future__ import annotations

import pytest

from tickwork import At, Cron, Every, Once
from tickwork._core.text import cron_words, schedule_words


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 7 * * 1-5", "at 07:00, Monday to Friday"),
        ("*/5 * * * *", "every 5 minutes"),
        ("* * * * *", "every minute"),
        ("30 * * * *", "every hour at minute 30"),
        ("15 */2 * * *", "every 2 hours at minute 15"),
        ("0 9,17 * * 1-5", "at 09:00 and 17:00, Monday to Friday"),
        ("0 0 1 * *", "at 00:00, on day 1 of the month"),
        ("0 6 * * 0,6", "at 06:00, Saturday and Sunday"),
        ("0 6 * * 6,7", "at 06:00, Saturday and Sunday"),
        ("0 8 * * 1,3", "at 08:00, on Monday and Wednesday"),
        ("0 0 1 1,7 *", "at 00:00, on day 1 of the month, in January and July"),
        ("0 30 2 * * *", "at 02:30"),  # 6 fields, seconds first
    ],
)
def test_common_shapes_in_words(expr: str, words: str) -> None:
    assert cron_words(expr) == words


@pytest.mark.parametrize(
    "expr",
    [
        "*/20 * * * * *",  # every 20 seconds: not said
        "0 0 L * *",
        "0 7 * * MON",
        "0 0 1 * 1",  # day of month OR day of week: left to the expression
        "0 7-9/2 * * *",
        "0 1,2,3,4,5,6,7 * * *",
        "not cron",
    ],
)
def test_anything_else_is_not_guessed(expr: str) -> None:
    assert cron_words(expr) is None


def test_every_schedule_value() -> None:
    assert schedule_words(Cron("0 7 * * 1-5", tz="Europe/Berlin")) == (
        "at 07:00, Monday to Friday (Europe/Berlin)"
    )
    assert schedule_words(Cron("0 0 L * *")) == "cron '0 0 L * *' (UTC)"
    assert schedule_words(Every(300)) == "every 5 minutes"
    assert schedule_words(Every(3600)) == "every 1 hour"
    assert schedule_words(Every(1)) == "every 1 second"
    assert schedule_words(Every(0.3)) == "every 0.3 seconds"
    assert schedule_words(Every(7200, fixed_delay=True)) == (
        "every 2 hours, counted from the end of each run"
    )
    assert schedule_words(At(1_800_000_000.0)) == "once, at 2027-01-15T08:00:00Z"
    assert schedule_words(Once(30)) == "once, 30 s after it was declared"
