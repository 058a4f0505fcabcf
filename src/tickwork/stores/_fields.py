"""The checks of a job's fields that are not `JobSpec`'s alone.

A job's id, its function's import path (checked here, imported by `resolve_func`),
its JSON arguments, a pool's name: the jobs file, the one-offs and the store's own
argument checks (`_checks`) share them with `JobSpec`.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from tickwork.stores._errors import JobSpecError

__all__ = [
    "MAX_ID",
    "call_arguments",
    "check_func_path",
    "finite_number",
    "job_id_arg",
    "one_of",
    "pool_name_problem",
    "resolve_func",
]

#: Nesting bound for JSON arguments: deeper values (or cycles) are refused, not recursed.
MAX_DEPTH: Final = 64
#: Longest job id a store accepts (fits any index, reads well in logs).
MAX_ID: Final = 200


def finite_number(name: str, value: object) -> float:
    """``value`` as a finite float; bools and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JobSpecError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise JobSpecError(f"{name} must be a finite number, got {value!r}")
    return number


def one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise JobSpecError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


#: Types `json_copy` keeps as they are (their subclasses are converted).
_KEPT: Final = frozenset({str, int, bool, type(None)})


def json_copy(value: object, where: str, depth: int = 0) -> Any:
    """A deep copy of ``value`` made of JSON types only (tuples become lists).

    Refuses anything `json` would reject or silently change: NaN and infinities, non-str
    dict keys (json turns ``1`` into ``"1"``), sets, bytes, objects.
    """
    if depth > MAX_DEPTH:
        raise JobSpecError(f"{where} is nested deeper than {MAX_DEPTH} levels (or is a cycle)")
    if type(value) in _KEPT:  # the common case, and what `json` reads, first
        return value
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise JobSpecError(f"{where} must be JSON-serialisable, got {value!r}")
        return float(value)
    if isinstance(value, list | tuple):
        return [json_copy(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise JobSpecError(f"{where} must have str keys to be JSON, got key {k!r}")
            out[k] = json_copy(v, f"{where}[{k!r}]", depth + 1)
        return out
    raise JobSpecError(
        f"{where} must be JSON-serialisable (None, bool, int, float, str, list, dict),"
        f" got {value!r} of type {type(value).__name__}"
    )


def call_arguments(args: object, kwargs: object) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A job's ``args`` and ``kwargs`` checked and copied as JSON values (`JobSpec`'s)."""
    if not isinstance(args, list | tuple):
        raise JobSpecError(f"args must be a list or tuple, got {args!r}")
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        raise JobSpecError(f"kwargs must be a dict, got {kwargs!r}")
    copied: dict[str, Any] = {}
    for k, v in kwargs.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise JobSpecError(f"kwargs keys must be identifiers, got {k!r}")
        copied[k] = v if type(v) in _KEPT else json_copy(v, f"kwargs[{k!r}]")
    kept = [a if type(a) in _KEPT else json_copy(a, f"args[{i}]") for i, a in enumerate(args)]
    return tuple(kept), copied


#: Import paths already found well-formed (many jobs share a few functions; a spec is
#: checked again each time a store reads it). Bounded: cleared when full.
GOOD_PATHS: Final[set[str]] = set()


def check_func_path(path: object) -> tuple[str, list[str]]:
    """Split ``"package.module:qualname"`` into the module and the attribute chain."""
    rule = "func must be an import path 'package.module:function'"
    if not isinstance(path, str):
        raise JobSpecError(f"{rule}, got {path!r}")
    module, sep, qualname = path.partition(":")
    parts = qualname.split(".")
    if path in GOOD_PATHS:
        return module, parts
    if (
        not sep
        or not all(p.isidentifier() for p in module.split("."))
        or not all(p.isidentifier() for p in parts)
    ):
        raise JobSpecError(f"{rule}, got {path!r}")
    if len(GOOD_PATHS) >= 4096:
        GOOD_PATHS.clear()
    GOOD_PATHS.add(path)
    return module, parts


def resolve_func(path: str) -> Callable[..., object]:
    """Import ``"package.module:function"`` and return the callable it names.

    The scheduler calls this when a job is added (so a typo fails there, changing
    nothing) and again before each run. Stores never import anything.

    Args:
        path: ``module:qualname``; the qualname may be dotted (``mod:Class.method``).

    Returns:
        The callable.

    Raises:
        JobSpecError: Bad syntax, the module does not import, the attribute is missing,
            or it is not callable. The message names the path and why.

    """
    module_name, parts = check_func_path(path)
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # an import can raise anything; the message says what
        raise JobSpecError(
            f"func {path!r} cannot be imported: {type(exc).__name__}: {exc}"
        ) from exc
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            owner = module_name if i == 0 else f"{module_name}:{'.'.join(parts[:i])}"
            raise JobSpecError(
                f"func {path!r} cannot be resolved: {owner} has no {part!r}"
            ) from exc
    if not callable(obj):
        raise JobSpecError(f"func {path!r} must name a callable, got {obj!r}")
    return obj


#: A concurrency pool's name: as a jobs file's job name.
_POOL_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,99}")


def pool_name_problem(name: str, value: object) -> str | None:
    """What is wrong with ``value`` as a pool's name (``name``: the argument), or None."""
    if isinstance(value, str) and _POOL_NAME.fullmatch(value):
        return None
    return (
        f"{name} must be a pool name of 1-100 letters, digits or '_.@:-', starting with a"
        f" letter or digit, got {value!r}"
    )


def job_id_arg(value: object, name: str = "id", limit: int = MAX_ID) -> str:
    """``value``, a job id (or, as ``name`` says, a key): printable, 1 to ``limit`` characters.

    Raises:
        JobSpecError: It is not; the message names ``name`` and shows ``value``.
    """
    if not isinstance(value, str) or not value or len(value) > limit or not value.isprintable():
        raise JobSpecError(
            f"{name} must be a non-empty printable string of at most {limit} characters,"
            f" got {value!r}"
        )
    return value


# -- the declared job ------------------------------------------------------------------
