"""Benchmark: the status page and ``/api/jobs`` of a daemon with 10,000 jobs, on SQLite.

    .venv/bin/python bench/overview.py              # 10,000 jobs (about 1-2 min on 2 cores)
    .venv/bin/python bench/overview.py --jobs 2000  # any count

Workload: a fresh SQLite state with ``--jobs`` daemon jobs (``namespace/batch-NNNNN``,
``every 1 minute``, as ``tickwork run`` declares them), every tenth with three ledger
entries (ok, ok, failed), every hundredth paused. The page and the API answer through
`tickwork._daemon.web.api.Api`, as the daemon serves them, minus the socket.

Timed, each the best of ``--repeats``, in the same run:

- baseline: every job read from the store (``Store.jobs()``: what the page, the API and
  ``tickwork jobs`` read for each answer before issue 42), nothing rendered;
- the overview's first page, a search, the failing filter, page 100;
- ``/api/jobs`` (its first 100), and its page at offset 5,000.

Each line gives the milliseconds, the ratio to the baseline, and the answer's size; the
issue's targets (under 200 ms of server time, a page under 100 KB) are shown as
PASS/MISS beside them, for a person to read. Nothing asserts on time: the figures are
only comparable within a run (the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from tickwork import DurableScheduler, Every
from tickwork._daemon.declare import ENTRY_POINT
from tickwork._daemon.web.api import Api, Request
from tickwork._daemon.web.status_page import page
from tickwork.stores import JobSpec
from tickwork.stores.sqlite import SQLiteStore

NS = "bench"


def seed(store: SQLiteStore, count: int) -> None:
    """Declare ``count`` jobs; a few with ledger entries, a few paused."""
    now = time.time()
    for i in range(count):
        name = f"batch-{i:05d}"
        spec = JobSpec(f"{NS}/{name}", ENTRY_POINT, Every(60), kwargs={"job": name})
        store.upsert(spec, now - 3600 if i % 10 == 0 else now + 60)
        if i % 100 == 0:
            store.set_paused(spec.id, True)
    t = now - 3600
    for outcome in ("ok", "ok", "failed"):
        claims = store.claim_due(
            t, owner="bench:1:x", lease_seconds=60, limit=count, advance=lambda s, at: at + 60
        )
        for c in claims:
            store.start(c, started=t)
            store.finish(
                c, outcome=outcome, ended=t + 0.5, error=None if outcome == "ok" else "boom"
            )
        t += 60


def best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import tickwork

    print(f"tickwork from {tickwork.__file__}; {args.jobs:,} jobs, best of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "state.sqlite3")
        t0 = time.perf_counter()
        seed(store, args.jobs)
        print(f"seeded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        scheduler = DurableScheduler(store)

        def overview(controls: Callable[..., str], banner: str, listing: object) -> str:
            return page(
                scheduler, store, NS, "jobs.toml", controls=controls, banner=banner,
                listing=listing,  # type: ignore[arg-type]
            )  # fmt: skip

        api = Api(scheduler, store, NS, "jobs.toml", None, overview)

        def get(path: str, **query: str) -> Callable[[], bytes]:
            asked = {k: [v] for k, v in query.items()}
            return lambda: api.handle(Request("GET", path, asked, {"Host": "127.0.0.1"})).body

        base, _ = best(store.jobs, args.repeats)
        print(f"{'baseline: Store.jobs()':34} {base:8.1f} ms   1.00x")
        cases = [
            ("overview, first page", get("/")),
            ("overview, search 'batch-0042'", get("/", q="batch-0042")),
            ("overview, failing", get("/", state="failing")),
            ("overview, page 100", get("/", page="100")),
            ("/api/jobs", get("/api/jobs")),
            ("/api/jobs?offset=5000", get("/api/jobs", offset="5000")),
        ]
        for label, fn in cases:
            ms, body = best(fn, args.repeats)
            size = len(body)  # type: ignore[arg-type]
            verdict = "PASS" if ms < 200 and size < 100_000 else "MISS"
            print(f"{label:34} {ms:8.1f} ms {ms / base:6.2f}x {size / 1000:8.1f} KB  {verdict}")
        store.close()


if __name__ == "__main__":
    main()
