"""Concurrency pools of the SQL stores: limits kept in the state, enforced by the claim.

A pool is a name with a limit: at most that many runs of the jobs whose `JobSpec.pool`
names it hold a claim at once, over every scheduler sharing the state. ``max_running``
caps the runs of all jobs together the same way. Both are rows of the pools table (the
cap under the name `MAX_RUNNING`, which no pool can have), so every node reads the
same limits; a declaration replaces the stored limit (the last one wins, and a change
is logged).

`PoolQueries` is a part of `SQLStore`. The claim asks its `PoolGate` about each row it
is about to take, inside the claim's own transaction: the gate reads the limits and
counts the held claims once, then counts each admission. On PostgreSQL the limit rows
are read ``FOR UPDATE``, so the claims of concurrent nodes that involve a limit take
turns from there to their commit, and each counts the claims the one before it
committed (``READ COMMITTED`` reads them afresh per statement). SQLite's claim runs
under ``BEGIN IMMEDIATE``, one writer at a time. No check is made outside the claim's
transaction, so no race of nodes can exceed a limit. A claim freed by a finish or by
recovery (its owner gone, its lease ended) frees its slot with it: the count is of
the claims held, never kept separately.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeGuard, runtime_checkable

from ._checks import check_time
from ._fields import pool_name_problem
from ._jobspec import JobSpec
from ._sqlbase import C, SQLHost

__all__ = [
    "MAX_RUNNING",
    "PoolGate",
    "PoolLimits",
    "PoolQueries",
    "PoolState",
    "PoolsMixin",
    "check_pool_limit",
    "check_pool_name",
]

_log = logging.getLogger("tickwork.stores")

#: The stored name of the state's ``max_running`` cap (no pool name can be ``*``).
MAX_RUNNING: Final = "*"
#: The largest limit a pool or the cap may have.
_MAX_LIMIT: Final = 1_000_000


def check_pool_limit(name: str, value: object) -> int | None:
    """``value`` as a limit (an int from 1 to 1,000,000, or None), else `ValueError`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_LIMIT:
        raise ValueError(
            f"{name} must be an integer from 1 to {_MAX_LIMIT:,} or None, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class PoolState:
    """One limit of a state and its use now (`PoolLimits.pools`)."""

    name: str
    """The pool's name, or `MAX_RUNNING` (``"*"``) for the state's ``max_running``."""
    limit: int
    """At most this many runs at once."""
    running: int
    """Runs holding a claim now (of the pool's jobs; of all jobs for ``"*"``)."""
    waiting: int
    """Due runs not claimed yet: jobs due now and runs re-offered or asked for."""

    @property
    def full(self) -> bool:
        """No run can start now: ``running`` has reached ``limit``."""
        return self.running >= self.limit


@runtime_checkable
class PoolLimits(Protocol):
    """Optional store capability: concurrency pools and a cap on running runs.

    Both SQL stores implement it; `DurableScheduler` declares its ``pools`` and
    ``max_running`` through it.
    """

    def set_pool_limit(self, pool: str, limit: int | None) -> None:
        """Store ``pool``'s limit (``None``: remove it); the last declaration wins."""
        ...

    def set_max_running(self, limit: int | None) -> None:
        """Store the cap on runs of all jobs at once (``None``: remove it)."""
        ...

    def pools(self, now: float) -> list[PoolState]:
        """Every stored limit with its use as of ``now``, by name (the cap is ``"*"``)."""
        ...


class PoolsMixin:
    """`PoolLimits` for `SQLStore`, over its ``_pools`` part (kept out of its body)."""

    _pools: PoolQueries[Any]

    def set_pool_limit(self, pool: str, limit: int | None) -> None:
        """Store ``pool``'s limit (see `PoolLimits`): at most ``limit`` runs at once.

        Raises:
            ValueError: ``pool`` is not a pool name, or ``limit`` is not an integer
                from 1 to 1,000,000 or None.

        """
        pool = check_pool_name(pool)
        limit = check_pool_limit("limit", limit)
        self._pools.set_limit(pool, limit, f"limit of pool {pool!r}")

    def set_max_running(self, limit: int | None) -> None:
        """Store the cap on runs of all jobs at once (see `PoolLimits`)."""
        limit = check_pool_limit("max_running", limit)
        self._pools.set_limit(MAX_RUNNING, limit, "max_running")

    def pools(self, now: float) -> list[PoolState]:
        """Every stored limit with its use as of ``now`` (see `PoolLimits`)."""
        return self._pools.usage(check_time("now", now))


class PoolGate:
    """One claim transaction's admissions: the limits and counts, read at first use."""

    __slots__ = ("_cap", "_held", "_host", "_limits", "_loaded", "_running", "_total")

    def __init__(self, host: SQLHost[Any]) -> None:
        self._host = host
        self._held: list[str] = []  # due jobs refused whose slot is not marked yet
        self._loaded = False
        self._limits: dict[str, int] = {}
        self._running: dict[str | None, int] = {}
        self._total = 0
        self._cap: int | None = None

    def admit(self, cur: Any, spec: JobSpec) -> bool:
        """Whether a run of ``spec`` may be claimed now; if so it counts from here on.

        The first call reads the limits (locking their rows on PostgreSQL) and, if
        there are any, the claims held; a state without limits reads one empty table.
        """
        if not self._loaded:
            self._load(cur)
        if not self._limits:
            return True
        pool = spec.pool
        if self._cap is not None and self._total >= self._cap:
            return False
        limit = self._limits.get(pool) if pool is not None else None
        if limit is not None and self._running.get(pool, 0) >= limit:
            return False
        self._total += 1
        self._running[pool] = self._running.get(pool, 0) + 1
        return True

    def none_declared(self) -> None:
        """The claim's own statement saw no limit row: no read is needed (PostgreSQL).

        A limit declared after that statement is seen by the next claim, as a limit
        declared after the gate's own read would be.
        """
        self._loaded = True

    def _load(self, cur: Any) -> None:
        q = self._host._q
        self._loaded = True
        rows = cur.execute(q("SELECT name, lim FROM {pools} ORDER BY name{lock_pools}")).fetchall()
        self._limits = {str(name): int(lim) for name, lim in rows}
        self._cap = self._limits.pop(MAX_RUNNING, None)
        if self._cap is not None:
            self._limits[MAX_RUNNING] = self._cap  # non-empty: the gate is on
        if not self._limits:
            return
        for pool, n in cur.execute(q(_HELD)).fetchall():
            self._running[pool] = int(n)
            self._total += int(n)


# A job's pool is read from its stored declaration (``{pool_of}``: the dialect's JSON
# access to ``j.spec``), so the job rows need no column of their own: these counts run
# only where limits exist, over the claims held (a few) or, for `PoolLimits.pools`, the
# jobs due.

#: Claims held (an owner's, started or not), by their job's pool (NULL: no pool).
_HELD: Final = (
    "SELECT {pool_of}, count(*) FROM {claims} c JOIN {jobs} j ON j.id = c.job_id"
    " WHERE c.owner <> '' GROUP BY {pool_of}"
)
#: Jobs due now that nobody holds, by pool.
_DUE: Final = (
    "SELECT {pool_of}, count(*) FROM {jobs} j WHERE {claimable} AND j.next_run <= ?"
    " GROUP BY {pool_of}"
)
#: Waiting runs (re-offered slots, triggers, backfills) that may be taken now, by pool.
_OFFERED: Final = (
    "SELECT {pool_of}, count(*) FROM {claims} c JOIN {jobs} j ON j.id = c.job_id"
    " WHERE c.owner = '' AND c.scheduled <= ? AND {unpaused} GROUP BY {pool_of}"
)


class PoolQueries(Generic[C]):
    """The pools part of `SQLStore`: declared limits, their use, each claim's gate.

    The claim calls `begin` once per transaction (each attempt of it) and `admit` for
    each row it is about to take. A store runs one claim at a time (its operations on
    the main connection hold its lock), so one gate at a time is enough.
    """

    def __init__(self, host: SQLHost[C]) -> None:
        self._host = host
        self._gate: PoolGate | None = None

    def begin(self) -> None:
        """A claim transaction starts: a fresh gate, read at its first use."""
        self._gate = PoolGate(self._host)

    def hint(self, declared: bool) -> None:
        """Whether the state has any limit, as a claim statement read it in passing.

        A store that folds ``EXISTS (SELECT 1 FROM pools)`` into its candidate rows
        passes it here, so a state without limits pays no statement of its own for them.
        """
        gate = self._gate
        if gate is not None and not declared and not gate._loaded:
            gate.none_declared()

    def admit(self, spec: JobSpec | None, cur: C) -> TypeGuard[JobSpec]:
        """Whether the claim may take a run of ``spec`` (None: unreadable: no)."""
        if spec is None:
            return False
        gate = self._gate
        return True if gate is None else gate.admit(cur, spec)

    def hold(self, row: Sequence[Any]) -> None:
        """A due job row (`JOB_COLUMNS`) that `admit` refused for its pool: note its slot.

        Its slot waits for the pool from here on; `mark` writes that once per slot
        (``pool_wait = next_run``), so it is judged by its own lateness when it gets
        one, however many looks or nodes refused it meanwhile.
        """
        if self._gate is not None and row[11] != row[3]:
            self._gate._held.append(row[0])

    def mark(self, cur: C) -> None:
        """Write the slots this claim held back for the first time: one statement, if any."""
        held = self._gate._held if self._gate is not None else []
        if held:
            query, params = self._host._q_list(
                "UPDATE {jobs} SET pool_wait = next_run WHERE id {any}", held
            )
            cur.execute(query, params)

    def set_limit(self, name: str, limit: int | None, what: str) -> None:
        """Store (or with ``None`` remove) the limit row ``name``; a change is logged."""
        q = self._host._q

        def body(cur: C) -> None:
            row = cur.execute(q("SELECT lim FROM {pools} WHERE name = ?"), (name,)).fetchone()
            old = None if row is None else int(row[0])
            if limit is None:
                cur.execute(q("DELETE FROM {pools} WHERE name = ?"), (name,))
            else:
                cur.execute(
                    q("INSERT INTO {pools} (name, lim) VALUES (?, ?){set_limit}"),
                    (name, limit),
                )
            if old is not None and old != limit:
                _log.warning(
                    "%s changed from %s to %s by this declaration (the last one wins)",
                    what,
                    old,
                    "none" if limit is None else limit,
                )

        self._host._run(f"set the {what}", body)

    def usage(self, now: float) -> list[PoolState]:
        """Every stored limit with its use as of ``now``: one read transaction."""
        q = self._host._q

        def body(cur: C) -> list[PoolState]:
            rows = cur.execute(q("SELECT name, lim FROM {pools} ORDER BY name")).fetchall()
            if not rows:
                return []
            held = _by_pool(cur.execute(q(_HELD)).fetchall())
            waiting = _by_pool(cur.execute(q(_DUE), (now,)).fetchall())
            for pool, n in _by_pool(cur.execute(q(_OFFERED), (now,)).fetchall()).items():
                waiting[pool] = waiting.get(pool, 0) + n
            out = []
            for name, lim in rows:
                if name == MAX_RUNNING:
                    out.append(PoolState(name, int(lim), sum(held.values()), sum(waiting.values())))
                else:
                    out.append(PoolState(name, int(lim), held.get(name, 0), waiting.get(name, 0)))
            return out

        return self._host._run("read the pools", body, write=False)


def _by_pool(rows: Sequence[Sequence[Any]]) -> dict[str | None, int]:
    return {row[0]: int(row[1]) for row in rows}


def check_pool_name(value: object) -> str:
    """``value`` if it is a valid pool name, else `ValueError` naming ``pool``."""
    problem = pool_name_problem("pool", value)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, str)
    return value
