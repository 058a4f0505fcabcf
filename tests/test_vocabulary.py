"""One vocabulary: the policy words defined once, and the table of a field's three names."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from tickwork import At, Calendar, Cron, Every, Once
from tickwork._core.vocabulary import (
    FIELDS,
    JOBS_FILE_OVERLAP_POLICIES,
    MISSED_POLICIES,
    OVERLAP_POLICIES,
    field_names,
)
from tickwork._daemon.jobsfile.config import parse_config
from tickwork.stores.contract import schedule_from_dict

SRC = Path(__file__).resolve().parents[1] / "src" / "tickwork"

#: One value of each kind with every optional field away from its default.
FULL: dict[str, Any] = {
    "once": Once(5),
    "at": At(1_800_000_000),
    "every": Every(
        60,
        fixed_delay=True,
        jitter=2,
        first=3,
        until=1_900_000_000,
        stable_jitter=True,
        seed="e",
        calendar=Calendar(weekdays=["sat", "sun"]),
        tz="Europe/Berlin",
    ),
    "cron": Cron(
        "0 3 * * *",
        "Europe/Berlin",
        jitter=4,
        until=1_900_000_000,
        calendar=Calendar(weekdays=["sat", "sun"]),
        shift="next",
        seed="c",
        stable_jitter=True,
    ),
}


@pytest.mark.parametrize("kind", sorted(FULL))
def test_every_python_name_is_an_attribute_and_every_stored_name_is_written(kind: str) -> None:
    value = FULL[kind]
    stored = value.to_dict()
    for python, key in field_names(kind, source="python", target="stored").items():
        want = getattr(value, python)
        if isinstance(want, Calendar):
            want = want.to_dict()
        assert stored[key] == want, (kind, python, key)
    assert set(stored) - {"kind"} == set(field_names(kind, source="stored", target="python"))
    assert schedule_from_dict(stored) == value


def test_every_toml_name_is_read_by_the_jobs_file() -> None:
    text = """
        [[job]]
        name = "e"
        every = "60s"
        fixed_delay = true
        jitter = "2s"
        first = "3s"
        until = "2030-03-17T17:46:40Z"
        stable_jitter = true
        seed = "e"
        calendar = "work"
        timezone = "Europe/Berlin"
        command = ["true"]

        [[job]]
        name = "c"
        cron = "0 3 * * *"
        timezone = "Europe/Berlin"
        jitter = "4s"
        until = "2030-03-17T17:46:40Z"
        calendar = "work"
        shift = "next"
        seed = "c"
        stable_jitter = true
        command = ["true"]

        [[job]]
        name = "a"
        at = "2027-01-15T08:00:00Z"
        command = ["true"]

        [[job]]
        name = "o"
        in = "5s"
        command = ["true"]

        [calendar.work]
        weekdays = ["sat", "sun"]
    """
    jobs = {job.name: job for job in parse_config(text).jobs}
    used = {
        "every": {
            *("every", "fixed_delay", "jitter", "first", "until", "stable_jitter", "seed"),
            *("calendar", "timezone"),
        },
        "cron": {
            *("cron", "timezone", "jitter", "until"),
            *("calendar", "shift", "seed", "stable_jitter"),
        },
        "at": {"at"},
        "once": {"in"},
    }
    for kind, keys in used.items():
        assert set(field_names(kind, source="toml", target="python")) == keys
    assert jobs["e"].schedule == FULL["every"]
    assert jobs["c"].schedule == FULL["cron"]
    assert isinstance(jobs["a"].schedule, At) and isinstance(jobs["o"].schedule, Once)


def test_field_names_refuses_what_it_does_not_know() -> None:
    with pytest.raises(ValueError, match=r"^kind must be one of .*, got 'hourly'$"):
        field_names("hourly", source="python", target="stored")
    with pytest.raises(ValueError, match=r"^source must be one of .*, got 'yaml'$"):
        field_names("every", source="yaml", target="stored")
    assert len({(f.kind, f.python) for f in FIELDS}) == len(FIELDS)


def test_each_policys_words_are_defined_once() -> None:
    assert OVERLAP_POLICIES == ("skip", "queue", "allow")
    assert JOBS_FILE_OVERLAP_POLICIES == ("skip", "queue", "allow", "replace")
    assert MISSED_POLICIES == ("skip", "once", "all")
    spelled = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.Subscript):
                words = {
                    c.value
                    for c in ast.walk(node)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
                if {"skip", "queue", "allow"} <= words or {"skip", "once", "all"} <= words:
                    spelled.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert sorted(set(spelled)) == ["_core/vocabulary.py:34", "_core/vocabulary.py:36"]
