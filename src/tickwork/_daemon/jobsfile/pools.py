"""The concurrency pools of a jobs file: ``[pool.<name>] limit = N`` and ``max_running``.

`check_pools` validates the file's pool tables and its jobs' ``pool`` keys (called by
`tickwork._daemon.jobsfile.config.parse_config`); `declare_pools` writes the limits to the state
each time the daemon applies the file, where every node reads them and the claim keeps
to them (``tickwork.stores._pools``). A pool is not the daemon's ``--workers`` (the
threads of one daemon): it limits the runs of its jobs over all the daemons on a state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from tickwork.stores import JobState, PoolLimits
from tickwork.stores.contract import MAX_RUNNING, pool_name_problem


class _Job(Protocol):
    """What `check_pools` reads of a `tickwork._daemon.jobsfile.config.JobConfig`."""

    @property
    def name(self) -> str: ...

    @property
    def pool(self) -> str | None: ...


__all__ = ["check_pools", "declare_pools", "pool_waits"]

_MAX_LIMIT: Final = 1_000_000
Add = Callable[[str, tuple[Any, ...], str, str], None]


def _limit_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_LIMIT:
        return f"must be an integer from 1 to {_MAX_LIMIT:,}, got {value!r}"
    return None


def check_pools(
    doc: dict[str, Any], jobs: Sequence[_Job], add: Add
) -> tuple[dict[str, int], int | None]:
    """The file's pool limits and ``max_running``; each problem goes to ``add``.

    ``add(where, key path, key, message)`` records one problem (`_Checker.add`).
    """
    pools: dict[str, int] = {}
    raw = doc.get("pool", {})
    if not isinstance(raw, dict):
        add("", ("pool",), "pool", "must be tables: write each pool as [pool.<name>]")
        raw = {}
    for name, table in raw.items():
        where = f'pool "{name}"'
        if (problem := pool_name_problem("the name", name)) is not None:
            add(where, ("pool", name), "pool", problem)
            continue
        if not isinstance(table, dict) or "limit" not in table:
            add(where, ("pool", name), "limit", "missing: write [pool.<name>] limit = N")
            continue
        for key in table:
            if key != "limit":
                add(where, ("pool", name, key), key, "unknown key (a pool has only limit)")
        if (problem := _limit_problem(table["limit"])) is not None:
            add(where, ("pool", name, "limit"), "limit", problem)
            continue
        pools[name] = table["limit"]
    max_running = doc.get("max_running")
    if max_running is not None and (problem := _limit_problem(max_running)) is not None:
        add("", ("max_running",), "max_running", problem)
        max_running = None
    raw_jobs = doc.get("job", [])
    raw_jobs = raw_jobs if isinstance(raw_jobs, list) else []  # not [[job]]: said elsewhere
    index = {
        t["name"]: i
        for i, t in enumerate(raw_jobs)
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    }
    for job in jobs:
        if job.pool is None or job.pool in pools or job.pool in raw:
            continue  # no pool, a good one, or one whose table has a problem of its own
        written = job.name in index and "pool" in raw_jobs[index[job.name]]
        at = ("job", index[job.name], "pool") if written else ("defaults", "pool")
        add(
            f'job "{job.name}"',
            at,
            "pool",
            f"no [pool.{job.pool}] table gives the pool {job.pool!r} its limit"
            f" (add [pool.{job.pool}] with limit = N)",
        )
    return pools, max_running


class _Limits(Protocol):
    """What `declare_pools` reads of a `tickwork._daemon.jobsfile.config.Config`."""

    @property
    def pools(self) -> Mapping[str, int]: ...

    @property
    def max_running(self) -> int | None: ...


def declare_pools(store: object, config: _Limits) -> None:
    """Write the file's pool limits and ``max_running`` to the state (the last one wins).

    A pool or cap the file no longer names is left as stored: another file or program
    sharing the state may declare it (lift one with `PoolLimits.set_pool_limit` and
    ``None``).
    """
    if not isinstance(store, PoolLimits):
        return
    for name, limit in sorted(config.pools.items()):
        store.set_pool_limit(name, limit)
    if config.max_running is not None:
        store.set_max_running(config.max_running)


def pool_waits(store: object, states: Sequence[JobState], now: float) -> dict[str, str]:
    """What each job due now waits for, by job id: ``"pool <name>"`` or ``"max_running"``.

    Only jobs held back now are listed: due (or with a run waiting to be taken) while
    their pool, or the state's ``max_running``, is full. Read for ``tickwork jobs``
    and the status page; one read of the limits, none when the store keeps none.
    """
    if not isinstance(store, PoolLimits):
        return {}
    usage = {p.name: p for p in store.pools(now)}
    if not usage:
        return {}
    cap = usage.get(MAX_RUNNING)
    waits: dict[str, str] = {}
    for s in states:
        due = (
            s.next_run is not None
            and s.next_run <= now
            and not s.paused
            and (s.spec.overlap == "allow" or not s.claims)
        ) or any(not c.owner and c.scheduled <= now for c in s.claims)
        pool = usage.get(s.spec.pool) if s.spec.pool is not None else None
        if not due:
            continue
        if pool is not None and pool.full:
            waits[s.id] = f"pool {pool.name}"
        elif cap is not None and cap.full:
            waits[s.id] = "max_running"
    return waits
