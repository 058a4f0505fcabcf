"""Write a small, real tickwork state with whatever tickwork is importable; print a manifest.

Run by ``tools/make_old_states.py`` with an OLD release's ``src`` first on ``PYTHONPATH``,
so the state is written by that release's own code (its schema, its encoding)::

    python tools/old_state_writer.py sqlite PATH
    python tools/old_state_writer.py postgres DSN SCHEMA

Only store calls that every release since the slot ledger has are used (``upsert``,
``set_paused``, ``claim_due``, ``start``, ``finish``, ``history``), plus the runtime
control calls (``pause_job``, ``trigger_job``) where the release has them. The manifest
(JSON on stdout) is what that release reads back from the state it wrote: the tests open
the state with the current code and compare.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from tickwork.stores import AtSchedule, CronSchedule, EverySchedule, JobSpec

#: A fixed origin, so that the fixtures are the same every time they are made.
T0 = 1_700_000_000.0
OWNER = "old-node:4242"


def _specs() -> list[tuple[JobSpec, float]]:
    return [
        (JobSpec("every-5m", "os:getcwd", EverySchedule(300.0)), T0),
        (JobSpec("nightly", "os:getcwd", CronSchedule("0 3 * * *", "Europe/Berlin")), T0 + 5400),
        (JobSpec("once", "os:getcwd", AtSchedule(T0 + 7200)), T0 + 7200),
        (JobSpec("report", "os:getcwd", EverySchedule(3600.0), paused=True), T0 + 3600),
        (
            JobSpec("held", "os:getcwd", EverySchedule(60.0), delivery="at_least_once"),
            T0 + 650,
        ),
    ]


def _step(store: Any, now: float) -> Any:
    """Claim what is due at ``now`` (each job advanced by its interval)."""

    def advance(state: Any, at: float) -> float:
        return float(state.next_run) + float(state.spec.schedule.interval)

    return store.claim_due(now, owner=OWNER, lease_seconds=10**6, limit=10, advance=advance)


def fill(store: Any) -> None:
    """Jobs of every kind, three ended runs in the ledger, one held claim, control actions."""
    for spec, next_run in _specs():
        store.upsert(spec, next_run)
    for i, outcome in enumerate(["ok", "failed", "ok"]):
        now = T0 + 300 * i + 1
        (claim,) = _step(store, now)
        assert claim.job_id == "every-5m", claim
        assert store.start(claim, started=now + 0.5)
        error = "RuntimeError: boom" if outcome == "failed" else None
        assert store.finish(claim, outcome=outcome, ended=now + 2.25, error=error)
    (held,) = _step(store, T0 + 651)  # every-5m is next due at T0 + 900
    assert held.job_id == "held", held
    assert store.start(held, started=T0 + 652)
    if hasattr(store, "pause_job"):  # runtime control (issue 14) in this release
        store.pause_job("nightly", by="alice", at=T0 + 700, note="maintenance window")
        store.trigger_job("once", by="bob", at=T0 + 710, note="run it early")


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)


def manifest(store: Any, migrations: int) -> dict[str, Any]:
    """What this release reads back from the state: jobs, claims, ledger, actions."""
    jobs = []
    for state in store.jobs():
        jobs.append(
            {
                "id": state.spec.id,
                "spec": state.spec.to_dict(),
                "next_run": state.next_run,
                "paused": state.paused,
                "last_run": _plain(state.last_run),
                "claims": [
                    {k: v for k, v in _plain(c).items() if k != "spec"} for c in state.claims
                ],
            }
        )
        for later in ("pause", "first_slot"):  # fields of the releases that have them
            if hasattr(state, later):
                jobs[-1][later] = _plain(getattr(state, later))
    out: dict[str, Any] = {
        "schema_version": migrations,
        "t0": T0,
        "jobs": jobs,
        "ledger": _plain(store.history(limit=1000)),
    }
    if hasattr(store, "actions"):
        out["actions"] = _plain(store.actions(limit=1000))
    return out


def main(argv: list[str]) -> int:
    """Write the state named on the command line; print its manifest."""
    kind = argv[0]
    if kind == "sqlite":
        from tickwork.stores import sqlite as mod

        store: Any = mod.SQLiteStore(argv[1])
    else:
        from tickwork.stores import postgres as mod  # type: ignore[no-redef]

        store = mod.PostgresStore(argv[1], schema=argv[2])
    try:
        fill(store)
        data = manifest(store, len(mod.MIGRATIONS))
    finally:
        store.close()
    json.dump(data, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
