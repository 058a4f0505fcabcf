"""Records of durable jobs: validation (messages pinned), JSON encoding, import paths."""

from __future__ import annotations

import inspect
import json
import math
import os.path
from typing import Any

import pytest

import tickwork.stores
import tickwork.stores.contract
from tickwork import At, Cron, Every
from tickwork.stores import JobSpec, JobSpecError, SchemaVersionError, StoreError, TickworkError
from tickwork.stores.contract import (
    SPEC_VERSION,
    resolve_func,
    schedule_from_dict,
    spec_from_json,
    spec_to_json,
)


def test_public_surface_is_pinned() -> None:
    assert tickwork.stores.__all__ == [
        "ACTION_KINDS", "DELIVERIES", "MISSED_POLICIES", "ORIGINS", "OUTCOMES",
        "OVERLAP_POLICIES", "ActionKind", "ActionRecord", "Claim", "Delivery",
        "JobNotFoundError", "JobPausedError", "JobSpec", "JobSpecError", "JobState", "LastRun",
        "Missed", "Origin", "Outcome", "OutcomeRetention", "Overlap", "PauseNote", "PoolLimits",
        "PoolState", "RuntimeControl", "Schedule", "SchemaVersionError", "SlotLedger",
        "SlotRecord", "Store", "StoreError", "Upsert",
    ]  # fmt: skip
    assert tickwork.stores.contract.__all__ == [
        "JOB_STATES", "KEEP", "LATE_AFTER", "MAX_RUNNING", "MOST_PER_PAGE", "ONEOFF_MARK",
        "OWNER_ENV", "SPEC_VERSION", "STREAK_DEPTH", "AdvanceFn", "AlertEpisodes",
        "AttemptLedger", "BatchDeclare", "BatchRecorder", "CarryingClaim", "ChangeNotifier",
        "Claim", "ClaimAhead", "ClaimWakeup", "Edges", "Episode", "EpisodeState", "Finish",
        "GiveUpFn", "GivenUp", "JobFacts", "JobListing", "JobQuery", "JobsPage", "Keep",
        "LookCover", "LookNotices", "NamespaceHolders", "OneOffCounts", "OneOffForm", "OneOffQueue",
        "OneOffRow", "OneOffWindow", "Recovered", "RuntimeControl", "SQLStore",
        "SessionLiveness", "SlotLedger", "Start", "StartNowFn", "Store", "StoreClock",
        "after_arg", "check_job_id", "check_pool_limit", "check_pool_name", "created_flags",
        "cycle_message", "failure_streak", "find_cycle", "is_oneoff", "list_jobs",
        "newest_entries", "oneoff_rows", "pool_name_problem", "proc_stat", "process_alive",
        "resolve_func", "schedule_and_after", "schedule_from_dict", "spec_from_json",
        "spec_to_json",
    ]  # fmt: skip
    for name in tickwork.stores.__all__:
        obj = getattr(tickwork.stores, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__doc__, f"{name} has no docstring"


def test_error_hierarchy() -> None:
    assert issubclass(JobSpecError, TickworkError) and issubclass(JobSpecError, ValueError)
    assert issubclass(SchemaVersionError, StoreError) and issubclass(StoreError, TickworkError)
    assert issubclass(tickwork.stores.JobNotFoundError, LookupError)


# -- schedules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sched",
    [
        At(1_700_000_000.25),
        At(0),
        Every(30),
        Every(0.001, fixed_delay=True),
        Cron("*/5 * * * *"),
        Cron("0 3 * * 1-5", "America/New_York"),
    ],
)
def test_schedule_round_trips_through_json(sched: Any) -> None:
    data = json.loads(json.dumps(sched.to_dict()))
    assert schedule_from_dict(data) == sched


def test_numbers_become_floats() -> None:
    assert At(5).when == 5.0 and isinstance(At(5).when, float)
    assert isinstance(Every(2).interval, float)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], r"^schedule must be a dict with a 'kind', got \[1\]$"),
        (
            {"kind": "weekly"},
            r"^schedule.kind must be one of 'at', 'once', 'every', 'cron', got 'weekly'$",
        ),
        ({}, r"^schedule.kind must be one of 'at', 'once', 'every', 'cron', got None$"),
        ({"kind": "at"}, r"^schedule of kind 'at' needs 'at', got \{'kind': 'at'\}$"),
        ({"kind": "at", "at": 1, "tz": "UTC"}, r"^schedule of kind 'at' has unknown key 'tz'$"),
        ({"kind": "at", "at": math.nan}, r"^schedule.at must be a finite number, got nan$"),
        ({"kind": "at", "at": "soon"}, r"^schedule.at must be a number, got 'soon'$"),
        ({"kind": "at", "at": True}, r"^schedule.at must be a number, got True$"),
        ({"kind": "every", "seconds": 0}, r"^schedule.seconds must be a finite number > 0, got 0$"),
        ({"kind": "every", "seconds": -1.5}, r"^schedule.seconds must be .* > 0, got -1.5$"),
        (
            {"kind": "every", "seconds": math.inf},
            r"^schedule.seconds must be a finite number, got inf$",
        ),
        (
            {"kind": "every", "seconds": 1, "fixed_delay": "yes"},
            r"^schedule.fixed_delay must be a bool, got 'yes'$",
        ),
        ({"kind": "cron", "expr": " "}, r"^schedule.expr must be a non-empty string, got ' '$"),
        ({"kind": "cron", "expr": 5}, r"^schedule.expr must be a non-empty string, got 5$"),
        (
            {"kind": "cron", "expr": "* * * * *", "tz": " UTC"},
            r"^schedule.tz must be a time zone name without spaces around it, got ' UTC'$",
        ),
    ],
)
def test_bad_schedules_name_the_field_and_value(data: object, message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        schedule_from_dict(data)


def test_schedules_are_frozen() -> None:
    s = Every(5)
    with pytest.raises(AttributeError):
        s.interval = 6  # type: ignore[misc]


# -- job specs --------------------------------------------------------------------------


def make(**kw: Any) -> JobSpec:
    return JobSpec(kw.pop("id", "job"), kw.pop("func", "pkg.mod:fn"), Every(60), **kw)


def test_defaults() -> None:
    s = make()
    assert (s.overlap, s.missed, s.missed_cap, s.grace, s.delivery, s.paused) == (
        "skip", "skip", 100, None, "at_most_once", False,
    )  # fmt: skip
    assert s.args == () and dict(s.kwargs) == {}


def test_arguments_are_copied_into_plain_json() -> None:
    inner = [1, 2]
    kwargs = {"x": (1, {"y": inner})}
    s = make(args=[inner, (3, 4)], kwargs=kwargs)
    inner.append(99)
    kwargs["z"] = 1
    assert s.args == ([1, 2], [3, 4])
    assert dict(s.kwargs) == {"x": [1, {"y": [1, 2]}]}
    with pytest.raises(TypeError):
        s.kwargs["new"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"id": ""}, r"^id must be a non-empty printable string of at most 200 .*, got ''$"),
        ({"id": "a\nb"}, r"^id must be .*, got 'a\\nb'$"),
        ({"id": "x" * 201}, r"^id must be .* at most 200 characters"),
        ({"id": 7}, r"^id must be .*, got 7$"),
        ({"func": "os.path.join"}, r"^func must be an import path 'package.module:function', got"),
        ({"func": "os:"}, r"^func must be an import path .*, got 'os:'$"),
        ({"func": "os path:join"}, r"^func must be an import path .*, got 'os path:join'$"),
        ({"func": "a:b:c"}, r"^func must be an import path .*, got 'a:b:c'$"),
        ({"func": None}, r"^func must be an import path .*, got None$"),
        ({"args": [{1, 2}]}, r"^args\[0\] must be JSON-serialisable .*, got \{1, 2\} of type set$"),
        ({"args": [b"x"]}, r"^args\[0\] must be JSON-serialisable .* of type bytes$"),
        ({"args": [1, [2, math.nan]]}, r"^args\[1\]\[1\] must be JSON-serialisable, got nan$"),
        ({"args": "abc"}, r"^args must be a list or tuple, got 'abc'$"),
        ({"kwargs": {"when": object}}, r"^kwargs\['when'\] must be JSON-.* of type type$"),
        ({"kwargs": {"d": {1: "x"}}}, r"^kwargs\['d'\] must have str keys to be JSON, got key 1$"),
        ({"kwargs": {"not-ident": 1}}, r"^kwargs keys must be identifiers, got 'not-ident'$"),
        ({"kwargs": [("a", 1)]}, r"^kwargs must be a dict, got \[\('a', 1\)\]$"),
        ({"overlap": "bump"}, r"^overlap must be one of 'skip', 'queue', 'allow', got 'bump'$"),
        ({"missed": "latest"}, r"^missed must be one of 'skip', 'once', 'all', got 'latest'$"),
        ({"missed_cap": 0}, r"^missed_cap must be an int >= 1, got 0$"),
        ({"missed_cap": 2.0}, r"^missed_cap must be an int >= 1, got 2.0$"),
        ({"missed_cap": True}, r"^missed_cap must be an int >= 1, got True$"),
        ({"grace": -1}, r"^grace must be a finite number >= 0 or None, got -1$"),
        ({"grace": math.inf}, r"^grace must be a finite number, got inf$"),
        ({"delivery": "once"}, r"^delivery must be one of 'at_most_once', 'at_least_once', got"),
        ({"paused": 0}, r"^paused must be a bool, got 0$"),
    ],
)  # fmt: skip
def test_bad_specs_name_the_field_and_value(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        make(**kw)


def test_schedule_must_be_a_schedule_value() -> None:
    with pytest.raises(JobSpecError, match=r"^schedule must be a tickwork At, .*, got \{'kind'"):
        JobSpec("j", "m:f", {"kind": "at", "at": 1})  # type: ignore[arg-type]


def test_cyclic_arguments_are_refused_not_recursed() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(JobSpecError, match=r"nested deeper than 64 levels \(or is a cycle\)"):
        make(args=[cycle])


def test_spec_is_hashable_and_compares_by_value() -> None:
    assert make(kwargs={"a": [1]}) == make(kwargs={"a": (1,)})
    assert len({make(), make(), make(grace=1)}) == 2


# -- the stored encoding ----------------------------------------------------------------


def test_encoding_is_canonical_versioned_json() -> None:
    s = JobSpec("j", "m:f", Cron("0 3 * * *", "Europe/Berlin"), kwargs={"b": 1, "a": 2})
    text = spec_to_json(s)
    assert text == (
        '{"args":[],"delivery":"at_most_once","func":"m:f","grace":null,"id":"j",'
        '"kwargs":{"a":2,"b":1},"missed":"skip","missed_cap":100,"overlap":"skip",'
        '"paused":false,"schedule":{"expr":"0 3 * * *","kind":"cron","tz":"Europe/Berlin"},'
        '"v":1}'
    )
    assert spec_from_json(text) == s
    assert spec_from_json(text.encode()) == s


def test_non_ascii_survives() -> None:
    s = make(id="Zürich-backup", kwargs={"msg": "grüße ✓"})
    assert spec_from_json(spec_to_json(s)) == s


def test_newer_encoding_is_refused_with_a_version_error() -> None:
    newer = SPEC_VERSION + 1
    data = make().to_dict() | {"v": newer}
    with pytest.raises(
        SchemaVersionError,
        match=rf"^stored job spec 'job' has version {newer}; .* up to {SPEC_VERSION}",
    ):
        spec_from_json(json.dumps(data))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", r"^stored job spec is not valid JSON"),
        ("[1]", r"^stored job spec must be a JSON object, got '\[1\]'$"),
        ('{"id": "j"}', r"^stored job spec has no valid 'v' version field, got None$"),
        ('{"v": true}', r"^stored job spec has no valid 'v' version field, got True$"),
        ('{"v": 1, "id": "j"}', r"^stored job spec 'j' has keys \['id', 'v'\], expected"),
    ],
)
def test_malformed_encodings_raise_store_error(text: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        spec_from_json(text)


def test_invalid_values_in_an_encoding_raise_store_error() -> None:
    data = make().to_dict() | {"overlap": "sometimes"}
    with pytest.raises(StoreError, match=r"^stored job spec 'job' is invalid: overlap must be"):
        spec_from_json(json.dumps(data))


# -- import paths ----------------------------------------------------------------------


def test_resolve_func_returns_the_callable() -> None:
    assert resolve_func("os.path:join") is os.path.join
    assert resolve_func("tickwork.stores:JobSpec.to_dict") is JobSpec.to_dict


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_mod:run", r"^func 'no_such_mod:run' cannot be imported: ModuleNotFoundError: No"),
        ("os.path:nope", r"^func 'os.path:nope' cannot be resolved: os.path has no 'nope'$"),
        ("tickwork.stores:JobSpec.x", r"resolved: tickwork.stores:JobSpec has no 'x'$"),
        ("os:sep", r"^func 'os:sep' must name a callable, got '/'$"),
        ("os.path.join", r"^func must be an import path 'package.module:function', got 'os"),
    ],
)  # fmt: skip
def test_resolve_func_errors_name_the_path_and_why(path: str, message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        resolve_func(path)


def test_resolve_func_reports_a_module_that_fails_to_import(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_jobs_mod.py").write_text("raise RuntimeError('config missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        JobSpecError,
        match=r"^func 'broken_jobs_mod:run' cannot be imported: RuntimeError: config missing$",
    ):
        resolve_func("broken_jobs_mod:run")


def _decoded(text: str) -> tuple[str, object]:
    """What `spec_from_json` gives for ``text``: the spec (repr'd, typed) or the error."""
    try:
        spec = spec_from_json(text)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__ if f != "_"}
    types = {f: type(v) for f, v in fields.items()}
    return "spec", (spec, repr(spec), types, type(spec.schedule), spec.to_dict())


#: A stored spec's fields besides ``v``, ``id``, ``func`` and ``schedule``: JobSpec's keywords.
_KEYWORDS = ("args", "kwargs", "overlap", "missed", "missed_cap", "grace", "delivery", "paused")


def _built(text: str) -> tuple[str, object]:
    """What `JobSpec` itself gives for the fields of stored ``text``: the spec or the error
    (worded as `spec_from_json` words a refused field: the constructor's message)."""
    try:
        data = json.loads(text)
    except ValueError:  # not JSON: the codec's own refusal, no field to build
        return _decoded(text)
    try:
        schedule = None if data["schedule"] is None else schedule_from_dict(data["schedule"])
        spec = JobSpec(
            data["id"],
            data["func"],
            schedule,
            **{k: data[k] for k in _KEYWORDS},
            **({"pool": data["pool"]} if "pool" in data else {}),
            **data.get("attempts", {}),
        )
    except JobSpecError as exc:
        return "StoreError", f"stored job spec {data.get('id')!r} is invalid: {exc}"
    fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__ if f != "_"}
    types = {f: type(v) for f, v in fields.items()}
    return "spec", (spec, repr(spec), types, type(spec.schedule), spec.to_dict())


def test_a_stored_spec_is_refused_as_jobspec_refuses_it() -> None:
    """Decoding a stored spec yields the very spec `JobSpec` builds from its fields, or
    refuses it with the very message `JobSpec` gives, over good and bad fields of every
    kind of schedule (one-shots, read at every claim, included)."""
    import random

    base = json.loads(spec_to_json(JobSpec("job-1", "os.path:join", At(1.5e9))))
    # Each key's candidate values: valid ones and broken ones.
    values: dict[str, list[Any]] = {
        "id": ["job-1", "", "x" * 200, "x" * 201, "tab\there", 7, None, "ünï", ["a"]],
        "func": ["os.path:join", "os.path:join.x", "nocolon", "a b:c", 3, ["x"], {"a": 1}],
        "schedule": [
            {"kind": "at", "at": 1.5e9},
            {"kind": "at", "at": 0.0},
            {"kind": "at", "at": -3.25},
            {"kind": "at", "at": 1e308},
            {"kind": "at", "at": 5},
            {"kind": "at", "at": True},
            {"kind": "at", "at": "1"},
            {"kind": "at", "at": None},
            {"kind": "at"},
            {"kind": "at", "at": 1.0, "x": 1},
            {"kind": "at", "when": 1.0},
            {"kind": "every", "seconds": 5.0, "fixed_delay": False},
            {"kind": "every", "seconds": 5.0, "fixed_delay": True, "jitter": 1.0},
            {"kind": "every", "seconds": -5.0},
            {"kind": "cron", "expr": "* * * * *", "tz": "UTC"},
            {"kind": "cron", "expr": "61 * * * *"},
            {"kind": "once", "delay": 3.0},
            {"kind": "nope"},
            None,
            [1],
            "at",
        ],
        "args": [[], [1, "a", None, True, 2.5], [[{"k": [1]}]], (), "x", None, {"a": 1}],
        "kwargs": [{}, {"a": 1}, {"a": {"b": [1, 2.5]}}, {"not id": 1}, {"": 1}, [], None],
        "overlap": ["skip", "queue", "allow", "replace", "nope", None, 1, ["skip"]],
        "missed": ["skip", "once", "all", "never", None],
        "missed_cap": [100, 1, 10**30, 0, -1, True, False, 1.0, "1", None],
        "grace": [None, 0.0, -0.0, 2.5, 1e300, 3, -1.0, True, "1", [1]],
        "delivery": ["at_most_once", "at_least_once", "once", None],
        "paused": [False, True, 0, 1, None, "true"],
        "pool": ["p", "a b", "", 3],
        "attempts": [
            {"retries": 2},
            {"retries": False},
            {"retries": 101},
            {"timeout": 0},
            {"timeout": -1.0},
            {"retry_backoff": 0.0},
            {"isolation": "process", "kill_grace": 2.5},
            {"isolation": "fork"},
        ],
    }
    rng = random.Random(15)
    texts = [spec_to_json(JobSpec("job-1", "os.path:join", At(1.5e9)))]
    for key, options in values.items():  # every value of every key, the rest plain
        for value in options:
            texts.append(json.dumps({**base, key: value, "v": 2 if key == "attempts" else 1}))
    for _ in range(3000):  # and random mixes, mostly valid
        data = dict(base)
        for key, options in values.items():
            if rng.random() < 0.12:
                data[key] = rng.choice(options)
        data["v"] = 2 if "attempts" in data else 1
        texts.append(json.dumps(data))
    # Values `json.dumps` does not write, in stored text: non-finite numbers.
    for raw in ("NaN", "Infinity", "-Infinity", "1e999"):
        texts.append(
            spec_to_json(JobSpec("j", "os.path:join", At(1.0))).replace('"at":1.0', f'"at":{raw}')
        )
        texts.append(json.dumps({**base, "args": [0.0]}).replace("0.0", raw))
        texts.append(json.dumps({**base, "grace": 0.5}).replace("0.5", raw))
    decoded = [_decoded(text) for text in texts]
    built = [_built(text) for text in texts]
    for text, d, b in zip(texts, decoded, built, strict=True):
        assert d == b, text
    specs = sum(1 for kind, _ in built if kind == "spec")
    assert specs > 500  # many valid shapes were compared, not only errors
    assert len(texts) - specs > 500


def test_a_default_attempt_policy_is_checked_unless_it_is_the_defaults_themselves() -> None:
    """`JobSpec` skips the attempt policy's check only for the default objects: a value
    equal to a default but of another type is still refused."""
    with pytest.raises(JobSpecError, match=r"^retries must be an integer .* got False$"):
        JobSpec("j", "os.path:join", At(1.0), retries=False)
    with pytest.raises(JobSpecError, match=r"^retries must be an integer .* got 0.0$"):
        JobSpec("j", "os.path:join", At(1.0), retries=0.0)  # type: ignore[arg-type]
    spec = JobSpec("j", "os.path:join", At(1.0), timeout=0, retries=0)
    assert spec.timeout is None and spec.retries == 0 and spec.attempt_policy.to_dict() == {}


def test_a_jobs_next_run_reads_as_an_aware_datetime(tmp_path: Any) -> None:
    from datetime import UTC, datetime

    from tickwork.stores.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "s.db") as store:
        store.upsert(JobSpec("a", "builtins:print", Every("1h")), 1_800_000_000.0)
        store.upsert(JobSpec("b", "builtins:print", At(1_800_000_000.0)), None)
        a, b = store.get("a"), store.get("b")
    assert a is not None and a.next_run_at == datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
    assert a.next_run_at.tzinfo is UTC
    assert b is not None and b.next_run_at is None
