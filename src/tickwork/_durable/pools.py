"""A durable scheduler's concurrency pools: the limits it declares, the pools it checks.

`Pools` writes the ``pools`` and ``max_running`` given to `DurableScheduler` into the
store (`tickwork.stores.PoolLimits`), where every node sharing the state reads them and
the claim keeps to them (``tickwork.stores._pools``): nothing here decides whether a
run may start. It also refuses a job whose pool has no limit anywhere, so a typo in a
pool's name is an error and not a pool without a limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickwork.stores import JobSpec, JobSpecError, PoolLimits
from tickwork.stores.contract import check_pool_limit, check_pool_name

__all__ = ["Pools"]


class Pools:
    """The limits one scheduler declares, and its check of each job's pool.

    Args:
        store: Where the limits go; it must be a `PoolLimits` if any is given.
        pools: Each pool's limit (``None``: none declared here).
        max_running: The cap on runs of all jobs at once (``None``: none declared here).

    Raises:
        TypeError: ``pools`` is not a mapping, or a limit is given to a store without
            pools.
        ValueError: A pool name or limit is invalid (the message shows it).

    """

    __slots__ = ("_declared", "_store")

    def __init__(
        self, store: object, pools: Mapping[str, int] | None, max_running: int | None
    ) -> None:
        if pools is not None and not isinstance(pools, Mapping):
            raise TypeError(f"pools must be a mapping of pool name to limit, got {pools!r}")
        limits: dict[str, int] = {}
        for name, limit in (pools or {}).items():
            checked = check_pool_limit(f"pools[{name!r}]", limit)
            if checked is None:
                raise ValueError(
                    f"pools[{name!r}] must be an integer from 1 to 1,000,000, got None"
                )
            limits[check_pool_name(name)] = checked
        max_running = check_pool_limit("max_running", max_running)
        if isinstance(store, PoolLimits):
            for name, limit in sorted(limits.items()):
                store.set_pool_limit(name, limit)
            if max_running is not None:
                store.set_max_running(max_running)
        elif limits or max_running is not None:
            raise TypeError(
                "pools and max_running need a store that keeps concurrency pools"
                f" (tickwork.stores.PoolLimits, as the SQL stores), got {store!r}"
            )
        self._store: Any = store
        self._declared = frozenset(limits)

    def check(self, spec: JobSpec) -> None:
        """Refuse ``spec`` if its pool has a limit neither here nor in the store.

        Raises:
            JobSpecError: The pool is unknown (the message names the job and the pool).

        """
        pool = spec.pool
        if pool is None or pool in self._declared:
            return
        store = self._store
        if isinstance(store, PoolLimits) and any(p.name == pool for p in store.pools(0.0)):
            return
        raise JobSpecError(
            f"job {spec.id!r}: pool {pool!r} has no limit: give it to the scheduler"
            f" (pools={{{pool!r}: 2}}) or in the jobs file ([pool.{pool}] limit = 2)"
        )
