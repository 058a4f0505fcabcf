"""`tickwork.tracing.RunTracer`: one OpenTelemetry span per run, read back from the SDK.

The library cases run on fake clocks with the SDK's in-memory exporter; the daemon case
runs ``tickwork run`` in a child process whose global tracer provider is set first (as
``opentelemetry-instrument`` would), and the last case shows that nothing of
OpenTelemetry is imported when nobody asks for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.executors import ManualExecutor, drain
from tickwork import AsyncScheduler, DurableScheduler, Every, Scheduler
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore
from tickwork.testing import FakeClock
from tickwork.tracing import RunTracer, tracer_configured

START = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[1]

#: The trace and parent span ids `traced` saw as current while it ran.
SEEN: list[tuple[int, int]] = []


def traced() -> None:
    """A job that notes the span it runs in."""
    ctx = trace.get_current_span().get_span_context()
    SEEN.append((ctx.trace_id, ctx.span_id))


def boom() -> None:
    """A job that fails."""
    raise RuntimeError("boom")


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    SEEN.clear()
    yield provider, exporter
    provider.shutdown()


def by_job(finished: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {str(s.attributes["tickwork.job"]): s for s in finished if s.attributes}


def test_a_durable_run_is_a_span_with_its_job_slot_attempt_outcome_and_lateness(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    clock = FakeClock(wall_start=START)
    with SQLiteStore(tmp_path / "s.db") as store:
        pool = ManualExecutor()
        ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
        RunTracer(provider, job_label=lambda job: job.partition("/")[2]).watch(ds)
        ds.declare(JobSpec("ns/traced", "tests.test_tracing:traced", Every(10)))
        ds.declare(JobSpec("ns/boom", "tests.test_tracing:boom", Every(10)))
        clock.advance(12)  # 2 s late
        ds.step()
        pool.run_all()
        ds.step()
    got = by_job(exporter.get_finished_spans())
    assert set(got) == {"traced", "boom"}
    ok, bad = got["traced"], got["boom"]
    assert ok.name == "run traced"
    assert dict(ok.attributes or {}) == {
        "tickwork.job": "traced",
        "tickwork.slot": "2027-01-15T08:00:10.000Z",  # as the slot ledger writes it
        "tickwork.lateness_s": 2.0,
        "tickwork.origin": "schedule",
        "tickwork.function": "tests.test_tracing:traced",
        "tickwork.outcome": "ok",
        "tickwork.attempt": 1,
    }
    assert ok.status.status_code is StatusCode.UNSET
    assert ok.start_time == int((START + 12) * 1e9)  # the run's own wall-clock start
    # the job ran with its span current: its own spans and logs join the trace
    assert ok.context is not None
    assert [(ok.context.trace_id, ok.context.span_id)] == SEEN
    assert trace.get_current_span() is trace.INVALID_SPAN  # and it was let go after
    assert bad.status.status_code is StatusCode.ERROR
    assert bad.status.description == "RuntimeError: boom"
    assert (bad.attributes or {})["tickwork.outcome"] == "failed"
    [event] = bad.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "RuntimeError"
    assert "in boom" in str((event.attributes or {})["exception.stacktrace"])


def test_a_runs_span_says_its_origin_as_the_ledger_does(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    clock = FakeClock(wall_start=START)
    with SQLiteStore(tmp_path / "s.db") as store:
        pool = ManualExecutor()
        ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
        RunTracer(provider).watch(ds)
        ds.declare(JobSpec("traced", "tests.test_tracing:traced", Every(3600)))
        assert ds.trigger("traced") == "queued"
        drain(ds, pool)
    [span] = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["tickwork.origin"] == "manual"
    assert attributes["tickwork.slot"] == "2027-01-15T08:00:00.000Z"


def test_a_failed_runs_log_record_carries_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Sentry's logging integration (and any handler) reads exc_info: it must be there.
    clock = FakeClock(wall_start=START)
    with SQLiteStore(tmp_path / "s.db") as store, caplog.at_level(logging.ERROR, "tickwork"):
        pool = ManualExecutor()
        ds = DurableScheduler(store, executor=pool, wall_clock=clock.wall, monotonic_clock=clock)
        ds.declare(JobSpec("boom", "tests.test_tracing:boom", Every(10)))
        clock.advance(10)
        ds.step()
        pool.run_all()
    [record] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert record.name.startswith("tickwork")
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert record.exc_info[2] is not None  # the traceback, down to the job's frame
    assert "in boom" in caplog.text


def test_core_tasks_get_spans_too(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    clock = FakeClock()
    s = Scheduler(clock)
    RunTracer(provider).watch(s)
    s.schedule(1, traced, name="probe")
    s.schedule(1, boom, name="bad")
    clock.advance(1.5)
    s.run_pending()
    got = by_job(exporter.get_finished_spans())
    assert (got["probe"].attributes or {})["tickwork.outcome"] == "ok"
    assert (got["probe"].attributes or {})["tickwork.lateness_s"] == 0.5
    assert got["bad"].status.status_code is StatusCode.ERROR


def test_on_an_asyncio_loop_spans_are_made_and_no_context_is_left_attached(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans

    async def fetch() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("down")

    async def main() -> None:
        clock = FakeClock()
        s = AsyncScheduler(clock)
        RunTracer(provider).watch(s)
        s.schedule(1, fetch, name="fetch")
        s.schedule(1, traced, name="probe")
        clock.advance(1)
        s.step()
        for _ in range(5):
            await asyncio.sleep(0)
        assert trace.get_current_span() is trace.INVALID_SPAN

    asyncio.run(main())
    got = by_job(exporter.get_finished_spans())
    assert (got["probe"].attributes or {})["tickwork.outcome"] == "ok"
    assert got["fetch"].status.status_code is StatusCode.ERROR


def test_bad_arguments_are_refused_and_no_provider_is_configured_here() -> None:
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry"):
        RunTracer("otlp")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="job_label must be callable or None, got 'x'"):
        RunTracer(job_label="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scheduler must have add_listener"):
        RunTracer().watch(object())  # type: ignore[arg-type]
    assert not tracer_configured()  # the test process never sets the global one


DAEMON = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # what opentelemetry-instrument does

from tickwork.__main__ import main

status = main(sys.argv[1:])
print(json.dumps([
    {"name": s.name, "status": s.status.status_code.name, **dict(s.attributes),
     "ids": f"{s.context.trace_id:032x}-{s.context.span_id:016x}"}
    for s in exporter.get_finished_spans()
]))
sys.exit(status)
"""


def test_the_daemon_traces_its_jobs_when_a_tracer_provider_is_set(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        textwrap.dedent("""
        [[job]]
        name = "ok"
        command = ["sh", "-c", "echo $TRACEPARENT >> traceparents"]
        working_dir = "."
        every = "1s"

        [[job]]
        name = "flaky"
        command = ["false"]
        every = "1s"
        retries = 1
        """)
    )
    args = ["run", str(jobs), "--for", "4s", "--state", str(tmp_path / "state.sqlite3")]
    done = subprocess.run(
        [sys.executable, "-c", DAEMON, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tracing runs with OpenTelemetry" in done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    ok = [s for s in got if s["tickwork.job"] == "ok"]
    flaky = [s for s in got if s["tickwork.job"] == "flaky"]
    assert ok and flaky, got
    assert {(s["name"], s["status"], s["tickwork.outcome"]) for s in ok} == {
        ("run ok", "UNSET", "ok")
    }
    # Each command ran with TRACEPARENT naming its run's span: its own spans join it.
    parents = {p[3:-3] for p in (tmp_path / "traceparents").read_text().split()}
    assert parents and parents <= {s["ids"] for s in ok}, (parents, ok)
    assert {s["tickwork.command"] for s in ok} == {"sh -c 'echo $TRACEPARENT >> traceparents'"}
    assert all("tickwork.function" not in s and s["tickwork.origin"] == "schedule" for s in ok)
    assert {s["status"] for s in flaky} == {"ERROR"}
    # the first try and its one retry (a run the stop cut short may have had one only)
    assert ("failed", 2) in {(s["tickwork.outcome"], s["tickwork.attempt"]) for s in flaky}


NOTHING = """
import sys, tempfile, time
from tickwork.__main__ import main

with tempfile.TemporaryDirectory() as tmp:
    with open(f"{tmp}/jobs.toml", "w") as f:
        f.write('[[job]]\\nname = "a"\\ncommand = ["true"]\\nevery = "1s"\\n')
    assert main(["run", f"{tmp}/jobs.toml", "--for", "1.5s", "--state", f"{tmp}/s.db"]) == 0
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_nothing_of_opentelemetry_is_imported_unless_asked_for() -> None:
    # opentelemetry is installed here (a test dependency), so this is the real question:
    # does tickwork import it by itself? The daemon looks only at sys.modules.
    done = subprocess.run(
        [sys.executable, "-c", NOTHING], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- the recipes in docs/observability.md, run as written ----------------------------------


def recipe_blocks() -> list[str]:
    text = (ROOT / "docs" / "observability.md").read_text()
    section = text.split("## Tracing and error reporting", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_block(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_opentelemetry_recipe_prints_the_span_of_its_run() -> None:
    otel, _ = recipe_blocks()
    spans = run_block(otel)
    assert '"name": "run probe"' in spans
    assert '"tickwork.outcome": "ok"' in spans


SENTRY_STUB = """
import json, atexit
import sentry_sdk
from sentry_sdk.transport import Transport

EVENTS = []

class Stub(Transport):  # what would go to sentry.io
    def capture_envelope(self, envelope):
        EVENTS.extend(i.payload.json for i in envelope.items if i.type == "event")

_init = sentry_sdk.init
sentry_sdk.init = lambda *a, **kw: _init(*a, transport=Stub, **kw)
"""

SENTRY_REPORT = """
import time as _time
_give_up = _time.monotonic() + 60  # a loaded machine: the run may end after the sleep
while not EVENTS and _time.monotonic() < _give_up:
    _time.sleep(0.02)
sentry_sdk.flush()
[event] = EVENTS
[exc] = event["exception"]["values"]
print(json.dumps({
    "logger": event["logger"],
    "message": event["logentry"]["formatted"] if "logentry" in event else event.get("message"),
    "type": exc["type"],
    "frames": [f["function"] for f in exc["stacktrace"]["frames"]],
}))
"""


def test_the_sentry_recipe_reports_a_failed_run_with_its_stack_trace() -> None:
    _, sentry = recipe_blocks()
    got = json.loads(run_block(SENTRY_STUB + sentry + SENTRY_REPORT).splitlines()[-1])
    assert got["logger"] == "tickwork"
    assert "failed: export failed" in got["message"]
    assert got["type"] == "RuntimeError"
    assert got["frames"][-1] == "export"  # the job's own frame, as the record carried it
