"""The house rules of the source tree: folders are floors, and imports only go down.

Floors, lowest first: ``_core`` < ``_drivers`` < ``stores`` < ``_durable`` < ``_daemon`` <
``_cli``. A module may import its own floor and the floors below it, never one above;
no module imports ``tickwork.testing`` (a fake clock is recognised by
`tickwork._core.clocks.WatchableClock`); only ``tickwork.__main__`` imports ``_cli``; and
the import graph has no cycle. Every import counts: at the top of a module, inside a
function (a lazy import) or under ``TYPE_CHECKING``.

``_daemon`` is one floor in rooms: its core (the start, the daemon, its logs and alerts)
at the top of the folder, and ``jobsfile`` (the jobs file read and checked), ``process``
(a job's process, started and watched) and ``web`` (the HTTP surface) beside it. The
jobs file and the processes never import the HTTP surface.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "tickwork"

#: The floor of each folder, and of the public modules at the top of the package.
FLOORS: dict[str, int] = {
    "tickwork._core": 0,
    "tickwork._drivers": 1,
    "tickwork.stores": 2,
    "tickwork._durable": 3,
    "tickwork.metrics": 3,  # listens to events; the daemon (above) serves it
    "tickwork.tracing": 3,  # listens to events; the daemon (above) may turn it on
    "tickwork._daemon": 4,
    "tickwork._daemon.jobsfile": 4,  # a room: the jobs file read and checked
    "tickwork._daemon.process": 4,  # a room: a job's process, started and watched
    "tickwork._daemon.web": 4,  # a room: the pages, the API, the servers
    "tickwork.daemon": 5,  # the public face of the daemon
    "tickwork.web": 5,  # the public face of the pages mounted in an app
    "tickwork._cli": 6,
    "tickwork.testing": 7,  # for tests only: nothing in src/ imports it
    "tickwork.__main__": 7,
    "tickwork": 7,  # the package face re-exports every layer
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str) -> int:
    best = ""
    for prefix in FLOORS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    assert best, f"{module} is in no floor: add its folder to FLOORS"
    return FLOORS[best]


def imports_of(path: Path) -> set[str]:
    """Every tickwork module ``path`` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tickwork")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "tickwork":
                continue
            found.add(target)
            # ``from tickwork._core import text`` imports the submodule text
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if (SRC / sub.replace(".", "/")).with_suffix(".py").exists():
                    found.add(sub)
    found.discard(name)
    return found


@functools.cache
def _parsed() -> dict[str, frozenset[str]]:
    """The import graph of src/, parsed once per test process (the tests only read it)."""
    return {module_name(p): frozenset(imports_of(p)) for p in sorted(PKG.rglob("*.py"))}


def graph() -> dict[str, set[str]]:
    return {module: set(targets) for module, targets in _parsed().items()}


def test_every_module_sits_on_a_floor() -> None:
    for module in graph():
        floor_of(module)


def test_imports_only_go_down() -> None:
    upward = [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if floor_of(target) > floor_of(module)
    ]
    assert upward == []


def test_production_code_never_imports_the_test_helpers() -> None:
    users = [m for m, targets in graph().items() if "tickwork.testing" in targets]
    assert users == []


def test_only_the_entry_point_imports_the_cli() -> None:
    users = [
        m
        for m, targets in graph().items()
        if not m.startswith("tickwork._cli")
        and any(t == "tickwork._cli" or t.startswith("tickwork._cli.") for t in targets)
    ]
    assert users == ["tickwork.__main__"]


def test_the_floors_above_use_a_store_only_through_its_faces() -> None:
    # ``tickwork.stores`` (a user's) and ``tickwork.stores.contract`` (a store author's
    # and the engine's): a private store module can change without touching the engine.
    reaching = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if floor_of(module) > FLOORS["tickwork.stores"]
        for target in sorted(targets)
        if target.startswith("tickwork.stores._")
    ]
    assert reaching == []


def test_the_jobs_file_and_the_processes_never_import_the_http_surface() -> None:
    rooms = ("tickwork._daemon.jobsfile", "tickwork._daemon.process")
    web = "tickwork._daemon.web"
    reaching = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if module.startswith(rooms)
        for target in sorted(targets)
        if target == web or target.startswith(web + ".")
    ]
    assert reaching == []


def test_the_dialects_differences_live_in_the_dialect_modules() -> None:
    # Upserts are SQL a third database may write differently: the shared store modules
    # name them by a word each dialect fills in (``_WORDS`` of sqlite.py, postgres.py).
    shared = sorted((PKG / "stores").glob("_*.py"))
    assert [p.name for p in shared if "ON CONFLICT" in p.read_text().upper()] == []


def test_the_import_graph_has_no_cycle() -> None:
    edges = graph()
    # A package's __init__ is imported with each of its modules: the edge from a
    # module to its own package face is the import system's, not the code's.
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges.get(module, ())):
            if target in on_stack:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in done and target in edges:
                visit(target)
        stack.pop()
        on_stack.discard(module)
        done.add(module)

    for module in sorted(edges):
        if module not in done:
            visit(module)
    assert cycles == []


@pytest.mark.parametrize(
    ("module", "target", "allowed"),
    [
        ("tickwork._durable.scheduler", "tickwork._core.clocks", True),
        ("tickwork._core.scheduler", "tickwork._drivers.thread", False),
        ("tickwork.stores.sqlite", "tickwork._durable.decide", False),
        ("tickwork._daemon.daemon", "tickwork._cli.run", False),
        ("tickwork._cli.run", "tickwork._daemon.daemon", True),
    ],
)
def test_the_floor_rule_itself(module: str, target: str, allowed: bool) -> None:
    assert (floor_of(target) <= floor_of(module)) is allowed
