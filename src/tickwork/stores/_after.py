"""Chains between durable jobs (``after``): the declared edges, their checks, their cycles.

A job declared with ``after=["extract"]`` runs once each time a slot of job ``extract``
ends ``ok`` (or, with ``on="any"``, ends at all: ``ok``, ``failed`` or ``timeout``). This
module holds the pure part, shared by `JobSpec`, the library's declaration check and the
jobs file: reading the ``after`` argument into plain ``(job id, on)`` pairs, and finding
a cycle in a set of edges. The store's part (queueing the downstream run in the
upstream's finish) is ``_chains``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal, TypeAlias

from tickwork.stores._errors import JobSpecError

__all__ = [
    "AFTER_ON",
    "TRIGGERS",
    "AfterOn",
    "Edges",
    "after_arg",
    "after_from_json",
    "after_to_json",
    "cycle_message",
    "find_cycle",
    "schedule_and_after",
]

#: When a chained job runs after its upstream's slot: on ``"ok"`` only, or on ``"any"``
#: outcome of a run that ended.
AfterOn: TypeAlias = Literal["ok", "any"]
AFTER_ON: Final[tuple[AfterOn, ...]] = ("ok", "any")
#: The upstream outcomes that queue a downstream run, per ``on``. A run whose runner was
#: lost (``abandoned``) never did: it ended nowhere (``at_least_once`` runs it again).
TRIGGERS: Final[Mapping[str, tuple[str, ...]]] = {
    "ok": ("ok",),
    "any": ("ok", "failed", "timeout"),
}
#: A job's upstream edges: ``((upstream job id, on), ...)`` in declaration order.
Edges: TypeAlias = tuple[tuple[str, AfterOn], ...]

#: Most upstream jobs one job may name.
_MAX_AFTER: Final = 100


def _one(item: object, where: str) -> tuple[str, AfterOn]:
    """One ``after`` item: a job id, ``{"job": id, "on": "ok" | "any"}`` or ``(id, on)``."""
    if isinstance(item, str):
        job, on = item, "ok"
    elif isinstance(item, tuple) and len(item) == 2:  # the stored pair (id, on)
        job, on = item
    elif isinstance(item, Mapping):
        unknown = sorted(str(k) for k in item if k not in ("job", "on"))
        if unknown:
            raise JobSpecError(
                f"{where} has unknown key {unknown[0]!r} (the keys are 'job' and 'on'),"
                f" got {dict(item)!r}"
            )
        if "job" not in item:
            raise JobSpecError(f"{where} needs 'job' (the upstream job), got {dict(item)!r}")
        job, on = item["job"], item.get("on", "ok")
    else:
        raise JobSpecError(
            f"{where} must be a job id or a {{job = ..., on = 'ok' | 'any'}} table, got {item!r}"
        )
    if not isinstance(job, str) or not job.strip() or not job.isprintable():
        raise JobSpecError(f"{where} must name a job (a non-empty printable str), got {job!r}")
    if not isinstance(on, str) or on not in AFTER_ON:
        raise JobSpecError(f"{where}.on must be one of 'ok', 'any', got {on!r}")
    return job, on  # checked against AFTER_ON


def after_arg(value: object, own_id: str) -> Edges:
    """``value`` (a list of job ids or ``{job, on}`` tables) as `Edges`; `JobSpecError`.

    A job named twice, or the job itself (the shortest cycle), is refused.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise JobSpecError(
            f"after must be a list of job ids or {{job = ..., on = ...}} tables, got {value!r}"
        )
    if len(value) > _MAX_AFTER:
        raise JobSpecError(f"after may name at most {_MAX_AFTER} jobs, got {len(value)}")
    edges: list[tuple[str, AfterOn]] = []
    for i, item in enumerate(value):
        job, on = _one(item, f"after[{i}]")
        if job == own_id:
            raise JobSpecError(cycle_message([own_id, own_id]))
        if any(job == seen for seen, _ in edges):
            raise JobSpecError(f"after names job {job!r} twice, got {list(value)!r}")
        edges.append((job, on))
    return tuple(edges)


def after_to_json(edges: Edges) -> list[dict[str, str]]:
    """The stored form: ``[{"job": id, "on": "ok"}, ...]``."""
    return [{"job": job, "on": on} for job, on in edges]


def after_from_json(value: object, own_id: str) -> Edges:
    """Read the stored form back (the same checks as `after_arg`)."""
    return after_arg(value, own_id)


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of ``graph`` (job -> the jobs it runs after) as a path, or None.

    The path starts and ends at the same job (``["a", "b", "a"]``); of several cycles,
    the one met first walking the jobs in sorted order, so the message is stable.
    """
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path: list[str] = [root]
        stack: list[list[str]] = [sorted(graph.get(root, ()))]
        state[root] = 1
        while stack:
            if not stack[-1]:
                state[path.pop()] = 2
                stack.pop()
                continue
            nxt = stack[-1].pop(0)
            mark = state.get(nxt)
            if mark == 1:
                return [*path[path.index(nxt) :], nxt]
            if mark is None:
                state[nxt] = 1
                path.append(nxt)
                stack.append(sorted(graph.get(nxt, ())))
    return None


def cycle_message(path: Sequence[str]) -> str:
    """The refusal of a cycle: ``after: cycle extract -> load -> extract``.

    The path is read in the direction runs flow: each job runs after the one before it.
    """
    flow = list(reversed(list(path)))[:-1]  # the loop once, without its end
    start = flow.index(min(flow))  # from its first name in sorted order: stable
    flow = flow[start:] + flow[:start]
    return "after: cycle " + " -> ".join([*flow, flow[0]])


def schedule_and_after(schedule: object, after: Edges, *, prefix: str = "") -> str:
    """A job's schedule in words, with its chains: ``"every 5 minutes; after extract"``.

    ``prefix``: left off the upstream ids shown (a daemon's ``<namespace>/``).
    """
    from tickwork._core.text import schedule_words

    words = "" if schedule is None else schedule_words(schedule)
    if not after:
        return words or "only when triggered"
    names = [
        job.removeprefix(prefix) + ("" if on == "ok" else " (any outcome)") for job, on in after
    ]
    chain = "after " + ", ".join(names)
    return f"{words}; {chain}" if words else chain
