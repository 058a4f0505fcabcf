"""Chains at declaration: a job's ``after`` names jobs the store holds, and makes no cycle.

`DurableScheduler.declare` and ``add`` call `check_after` before storing a job declared
with ``after``; the daemon declares a jobs file's jobs upstream first (`upstream_first`),
so each job's upstream jobs are stored before it. What runs the chain is the store's
(``tickwork.stores._chains``): the upstream's finish queues the downstream run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from tickwork.stores import JobSpec, JobSpecError, Store
from tickwork.stores.contract import cycle_message, find_cycle

__all__ = ["check_after", "upstream_first"]

T = TypeVar("T")


def check_after(store: Store, spec: JobSpec) -> None:
    """Refuse ``spec`` if its ``after`` names a job not stored, or closes a cycle.

    Raises:
        JobSpecError: ``after: unknown job 'x' ...`` or ``after: cycle a -> b -> a``.

    """
    if not spec.after:
        return  # no chain: no look at the store
    stored = {state.spec.id: state.spec for state in store.jobs()}
    for upstream, _ in spec.after:
        if upstream not in stored:
            raise JobSpecError(
                f"after: unknown job {upstream!r} (job {spec.id!r} runs after it); declare it first"
            )
    graph = {job_id: [u for u, _ in s.after] for job_id, s in stored.items()}
    graph[spec.id] = [u for u, _ in spec.after]
    cycle = find_cycle(graph)
    if cycle is not None:
        raise JobSpecError(cycle_message(cycle))


def upstream_first(
    items: Sequence[T], name: Callable[[T], str], after: Callable[[T], Iterable[str]]
) -> list[T]:
    """``items`` reordered so that each comes after the items it names in ``after``.

    Otherwise in their given order; names not among the items, and cycles (refused
    elsewhere), do not hold an item back.
    """
    names = {name(item) for item in items}
    placed: set[str] = set()
    out: list[T] = []
    left = list(items)
    while left:
        ready = [i for i in left if all(u in placed or u not in names for u in after(i))]
        if not ready:  # a cycle: keep the given order for the rest
            ready = left
        for item in ready:
            placed.add(name(item))
            out.append(item)
        left = [i for i in left if name(i) not in placed]
    return out
