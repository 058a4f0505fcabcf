"""Chains (``after``): a job runs once when each slot of its upstream job ends.

Deterministic (fake clock, manual pool, ``step()``), on SQLite and on PostgreSQL: the
library API and the store. The daemon end to end, and a node killed between an
upstream's finish and the downstream's run, are in tests/test_chains_e2e.py.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DURABLE_START
from tests.executors import ManualExecutor, drain
from tickwork import AsyncDurableScheduler, DurableScheduler, Every
from tickwork._core.text import iso
from tickwork._daemon.jobsfile.config import parse_config
from tickwork._durable.control import BackfillError
from tickwork.stores import JobSpec, JobSpecError, Store
from tickwork.stores._after import find_cycle
from tickwork.stores._codec import spec_from_json, spec_to_json
from tickwork.testing import FakeClock

from . import durable_jobs

REC = "tests.durable_jobs:record"
BOOM = "tests.durable_jobs:boom"
START = DURABLE_START
ROOT = Path(__file__).resolve().parent.parent

Make = Callable[..., tuple[DurableScheduler, ManualExecutor]]


@pytest.fixture
def clock(durable_clock: FakeClock) -> FakeClock:
    return durable_clock


@pytest.fixture
def make(clock: FakeClock, open_either_store: Callable[..., Store]) -> Make:
    def new(**kw: Any) -> tuple[Any, ManualExecutor]:
        pool = ManualExecutor()
        ds = DurableScheduler(
            open_either_store(), executor=pool, wall_clock=clock.wall, monotonic_clock=clock, **kw
        )
        return ds, pool

    return new


def calls() -> list[str]:
    """The jobs the recording function ran, in order (its first argument)."""
    return [c[0][0] for c in durable_jobs.CALLS]


def entries(ds: Any, job_id: str) -> list[Any]:
    """The job's ledger entries, oldest first."""
    return list(reversed(ds.history(job_id, limit=100)))


def cause(job_id: str, slot: float) -> str:
    return f"{job_id}@{iso(slot)}"


# -- the chain runs ---------------------------------------------------------------------


def test_each_upstream_slot_runs_the_chain_once_and_the_ledger_names_the_cause(
    make: Make, clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(JobSpec("extract", REC, Every(10), args=["extract"]))
    ds.declare(JobSpec("load", REC, args=["load"], after=["extract"]))  # no schedule
    ds.declare(JobSpec("report", REC, args=["report"], after=[{"job": "load", "on": "any"}]))
    state = ds.get("load")
    assert state is not None and state.next_run is None and state.spec.schedule is None
    for _ in range(3):
        clock.advance(10)
        drain(ds, pool)
    assert calls() == ["extract", "load", "report"] * 3
    slots = [e.scheduled for e in entries(ds, "extract")]
    assert slots == [START + 10, START + 20, START + 30]
    loads = entries(ds, "load")
    assert [(e.outcome, e.origin, e.cause) for e in loads] == [
        ("ok", "after", cause("extract", s)) for s in slots
    ]
    reports = entries(ds, "report")
    assert [e.cause for e in reports] == [cause("load", e.scheduled) for e in loads]
    assert reports[0].to_dict()["cause"] == cause("load", loads[0].scheduled)
    assert all(e.cause is None for e in entries(ds, "extract"))
    # The chained run is due when its upstream ended; its ledger entry is its own slot.
    assert loads[0].scheduled == START + 10 and loads[0].attempt == 1


def test_a_failed_upstream_runs_only_the_jobs_chained_on_any_outcome(
    make: Make, clock: FakeClock
) -> None:
    ds, pool = make()
    ds.declare(JobSpec("flaky", BOOM, Every(10)))
    ds.declare(JobSpec("on-ok", REC, args=["on-ok"], after=["flaky"]))
    ds.declare(JobSpec("on-any", REC, args=["on-any"], after=[("flaky", "any")]))
    clock.advance(10)
    drain(ds, pool)
    clock.advance(10)
    drain(ds, pool)
    assert [e.outcome for e in entries(ds, "flaky")] == ["failed", "failed"]
    assert calls() == ["on-any", "on-any"]
    assert entries(ds, "on-ok") == []


def test_a_chained_job_with_a_schedule_runs_on_both(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, Every(25), args=["down"], after=["up"]))
    for _ in range(3):  # up: 10, 20, 30; down: after each, and at 25 on its grid
        clock.advance(10)
        drain(ds, pool)
    origins = [e.origin for e in entries(ds, "down")]
    assert origins == ["after", "after", "schedule", "after"]
    assert ds.get("down").next_run == START + 50  # its grid is its own


def test_a_chained_run_waits_while_its_job_is_paused(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, args=["down"], after=["up"]))
    ds.pause("down", by="test")
    clock.advance(10)
    drain(ds, pool)
    assert calls() == ["up"]
    (waiting,) = ds.get("down").claims
    assert (waiting.origin, waiting.owner) == ("after", "")
    ds.resume("down", by="test")
    drain(ds, pool)
    assert calls() == ["up", "down"]


def test_the_chain_runs_on_whichever_node_takes_it(make: Make, clock: FakeClock) -> None:
    first, pool1 = make()
    second, pool2 = make(allowed_modules=["tests.durable_jobs"])
    first.declare(JobSpec("up", REC, Every(10), args=["up"]))
    first.declare(JobSpec("down", REC, args=["down"], after=["up"]))
    clock.advance(10)
    first.step()
    pool1.run_all()  # up ran and finished on the first node: down is queued
    assert calls() == ["up"]
    drain(second, pool2)  # the second node takes it
    assert calls() == ["up", "down"]
    drain(first, pool1)
    assert calls() == ["up", "down"]
    (entry,) = entries(second, "down")
    assert entry.node == second.owner


def test_a_finish_recorded_twice_queues_the_downstream_once(make: Make, clock: FakeClock) -> None:
    ds, _ = make()
    store = ds.store
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, args=["down"], after=["up"]))
    (claim,) = store.claim_due(
        START + 10, owner="n", lease_seconds=30, limit=5, advance=lambda s, now: now + 10
    )
    assert store.finish(claim, outcome="ok", ended=START + 11)
    assert not store.finish(claim, outcome="ok", ended=START + 12)  # not held: nothing
    # The store's own guard: the same upstream slot ending again queues nothing more.
    store._run("again", lambda cur: store._chains.ended(cur, claim, "ok", START + 13))
    waiting = ds.get("down").claims
    assert [(c.origin, c.scheduled) for c in waiting] == [("after", START + 11)]


def test_two_upstreams_ending_at_one_instant_queue_two_runs(make: Make, clock: FakeClock) -> None:
    ds, _ = make()
    store = ds.store
    ds.declare(JobSpec("a", REC, Every(10), args=["a"]))
    ds.declare(JobSpec("b", REC, Every(10), args=["b"]))
    ds.declare(JobSpec("both", REC, args=["both"], after=["a", "b"]))
    claims = store.claim_due(
        START + 10, owner="n", lease_seconds=30, limit=5, advance=lambda s, now: now + 10
    )
    for c in claims:
        assert store.finish(c, outcome="ok", ended=START + 11)
    waiting = ds.get("both").claims
    assert len(waiting) == 2 and waiting[0].scheduled == START + 11 < waiting[1].scheduled


def test_a_job_with_no_schedule_cannot_be_backfilled(make: Make, clock: FakeClock) -> None:
    ds, _ = make()
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, args=["down"], after=["up"]))
    with pytest.raises(BackfillError) as info:
        ds.backfill("down", START - 100, START)
    assert str(info.value) == (
        "job 'down' has no schedule of its own (it runs only after other jobs): it has no"
        " grid of slots to backfill (backfill its upstream job, or trigger it)"
    )
    assert ds.skip_next("down") is None
    assert ds.trigger("down") == "queued"


def test_removing_the_downstream_drops_its_edges(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, args=["down"], after=["up"]))
    ds.remove("down")
    clock.advance(10)
    drain(ds, pool)
    assert calls() == ["up"]


def test_redeclaring_without_after_ends_the_chain(make: Make, clock: FakeClock) -> None:
    ds, pool = make()
    ds.declare(JobSpec("up", REC, Every(10), args=["up"]))
    ds.declare(JobSpec("down", REC, Every(100), args=["down"], after=["up"]))
    ds.declare(JobSpec("down", REC, Every(100), args=["down"]))
    clock.advance(10)
    drain(ds, pool)
    assert calls() == ["up"]


def test_the_async_face_chains_too(
    clock: FakeClock, open_either_store: Callable[..., Store]
) -> None:
    async def main() -> None:
        pool = ManualExecutor()
        ads = AsyncDurableScheduler(
            open_either_store(), executor=pool, wall_clock=clock.wall, monotonic_clock=clock
        )
        await ads.declare(JobSpec("up", REC, Every(10), args=["up"]))
        await ads.add(JobSpec("down", REC, args=["down"], after=["up"]))
        with pytest.raises(JobSpecError, match=r"^after: cycle down -> up -> down$"):
            await ads.declare(JobSpec("up", REC, Every(10), args=["up"], after=["down"]))
        clock.advance(10)
        drain(ads._engine, pool)
        assert calls() == ["up", "down"]

    asyncio.run(main())


# -- refusals ---------------------------------------------------------------------------


def test_declaring_refuses_unknown_jobs_and_cycles(make: Make) -> None:
    ds, _ = make()
    with pytest.raises(
        JobSpecError,
        match=r"^after: unknown job 'extract' \(job 'load' runs after it\); declare it first$",
    ):
        ds.declare(JobSpec("load", REC, after=["extract"]))
    ds.declare(JobSpec("extract", REC, Every(10)))
    ds.declare(JobSpec("load", REC, after=["extract"]))
    with pytest.raises(JobSpecError, match=r"^after: cycle extract -> load -> extract$"):
        ds.declare(JobSpec("extract", REC, Every(10), after=["load"]))
    ds.declare(JobSpec("report", REC, after=["load"]))
    with pytest.raises(JobSpecError, match=r"^after: cycle extract -> load -> report -> extract$"):
        ds.declare(JobSpec("extract", REC, Every(10), after=["report"]))
    assert ds.get("extract").spec.after == ()  # nothing stored by the refusals


@pytest.mark.parametrize(
    ("after", "message"),
    [
        ("extract", "after must be a list of job ids or {job = ..., on = ...} tables,"
         " got 'extract'"),
        ([5], "after[0] must be a job id or a {job = ..., on = 'ok' | 'any'} table, got 5"),
        ([{"job": "x", "on": "maybe"}], "after[0].on must be one of 'ok', 'any', got 'maybe'"),
        ([{"on": "ok"}], "after[0] needs 'job' (the upstream job), got {'on': 'ok'}"),
        ([{"job": "x", "when": 1}], "after[0] has unknown key 'when' (the keys are 'job' and"
         " 'on'), got {'job': 'x', 'when': 1}"),
        ([""], "after[0] must name a job (a non-empty printable str), got ''"),
        (["x", {"job": "x"}], "after names job 'x' twice, got ['x', {'job': 'x'}]"),
        (["me"], "after: cycle me -> me"),
    ],
)  # fmt: skip
def test_a_bad_after_is_refused_with_its_value(after: object, message: str) -> None:
    with pytest.raises(JobSpecError) as info:
        JobSpec("me", REC, Every(10), after=after)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_a_job_with_no_schedule_and_no_after_runs_only_when_triggered() -> None:
    spec = JobSpec("x", REC)  # as a jobs file's at_start job (issue 39, B11)
    assert (spec.schedule, spec.after) == (None, ())
    assert spec_from_json(spec_to_json(spec)) == spec


def test_a_chained_spec_keeps_its_stored_form() -> None:
    spec = JobSpec("load", REC, after=["extract", {"job": "clean", "on": "any"}])
    assert spec.after == (("extract", "ok"), ("clean", "any"))
    text = spec_to_json(spec)
    assert '"after":[{"job":"extract","on":"ok"},{"job":"clean","on":"any"}]' in text
    assert '"schedule":null' in text
    assert spec_from_json(text) == spec
    plain = JobSpec("p", REC, Every(10))
    assert "after" not in spec_to_json(plain)  # unchained specs keep their stored text


def test_find_cycle_walks_in_a_stable_order() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"b": ["a"], "a": ["b"]}) == ["a", "b", "a"]


# -- the jobs file ----------------------------------------------------------------------


def _validate(tmp_path: Path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "tickwork", "validate", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr.replace(str(path), "jobs.toml")


def test_validate_refuses_unknown_names_cycles_and_bad_items(tmp_path: Path) -> None:
    code, out, err = _validate(
        tmp_path,
        textwrap.dedent(
            """\
            [[job]]
            name = "extract"
            command = ["true"]
            every = "1h"
            after = ["load"]

            [[job]]
            name = "load"
            command = ["true"]
            after = ["extract"]

            [[job]]
            name = "report"
            command = ["true"]
            after = [{job = "load", on = "maybe"}]

            [[job]]
            name = "orphan"
            command = ["true"]
            after = ["lod"]

            [[job]]
            name = "lonely"
            command = ["true"]
            """
        ),
    )
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        'jobs.toml:5: job "extract": after: cycle extract -> load -> extract',
        """jobs.toml:15: job "report": after[0].on: must be one of 'ok', 'any', got 'maybe'""",
        'jobs.toml:20: job "orphan": after: unknown job "lod" (did you mean "load"?): name a job'
        " of this file",
        'jobs.toml:22: job "lonely": missing a schedule: set every, cron, at or in',
        "tickwork validate: 4 problems found",
    ]


def test_the_daemon_docs_example_validates(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "daemon.md").read_text()
    section = text[text.index("### After another job: `after` (chains)") :]
    example = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert example is not None
    assert _validate(tmp_path, example.group(1)) == (0, "ok: 3 jobs\n", "")
    config = parse_config(example.group(1))
    load = config.job("load")
    assert (load.schedule, load.after) == (None, (("extract", "ok"),))
    assert config.job("report").after == (("load", "any"),)
