"""Chains in a jobs file: the ``after`` key of a ``[[job]]`` and the checks across jobs.

``after = ["extract"]`` (or ``after = [{job = "extract", on = "any"}]``) names jobs of
the same file by their ``name``. `read_after` checks one job's value; `chain_problems`
checks the file as a whole, after every job is read: each name is a job of the file,
and the edges make no cycle. `tickwork validate` and the daemon report both.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from tickwork.stores import JobSpecError
from tickwork.stores.contract import Edges, after_arg, cycle_message, find_cycle

__all__ = ["chain_problems", "read_after"]


def read_after(value: object, name: str) -> tuple[Edges, str, str | None]:
    """One job's ``after``: ``(its edges, "after", None)``, or ``((), key, problem)``.

    The key is the dotted place of the problem (``after[1].on``), for the issue.
    """
    try:
        return after_arg(value, name), "after", None
    except JobSpecError as exc:
        text = str(exc)
    if text.startswith("after: "):
        return (), "after", text.removeprefix("after: ")
    key, _, rest = text.partition(" ")
    return (), key, rest


def chain_problems(edges: Mapping[str, Edges], names: Sequence[str]) -> list[tuple[str, str]]:
    """``(job name, problem)`` of the file's chains: unknown names, then a cycle if any.

    ``edges``: each chained job's edges; ``names``: every job name of the file.
    """
    known = set(names)
    problems: list[tuple[str, str]] = []
    for job, upstream in edges.items():
        for other, _ in upstream:
            if other not in known:
                close = difflib.get_close_matches(other, sorted(known), n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                problems.append((job, f'unknown job "{other}"{hint}: name a job of this file'))
    cycle = find_cycle({job: [u for u, _ in up] for job, up in edges.items()})
    if cycle is not None:
        text = cycle_message(cycle)
        problems.append((text.split()[2], text.removeprefix("after: ")))
    return problems
