"""The house rule on size: no function longer than 60 lines, no class longer than 700.

A size is what `ast` says, ``end_lineno - lineno + 1`` (docstrings, comments and blank
lines inside included, decorators not), for every function, method and class in every
module under ``src/tickwork``, nested ones too. Past those lengths a function is doing
several things and a class holds several parts: split it into named helpers, or compose
the class from parts, rather than raise the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "tickwork"

MAX_FUNCTION = 60
MAX_CLASS = 700


def measure(tree: ast.AST, file: str) -> dict[tuple[str, str], tuple[str, int]]:
    """Every function and class in ``tree``: (file, qualified name) -> (kind, lines)."""
    found: dict[tuple[str, str], tuple[str, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                assert child.end_lineno is not None
                found[file, name] = (kind, child.end_lineno - child.lineno + 1)
                visit(child, f"{name}.")
            else:
                # Definitions under an if, a with or a try still belong to ``prefix``.
                visit(child, prefix)

    visit(tree, "")
    return found


def sizes() -> dict[tuple[str, str], tuple[str, int]]:
    """Every function and class under src/tickwork, keyed by file and qualified name."""
    found: dict[tuple[str, str], tuple[str, int]] = {}
    for path in sorted(PKG.rglob("*.py")):
        found.update(
            measure(ast.parse(path.read_text(), str(path)), path.relative_to(PKG).as_posix())
        )
    return found


def over(kind: str, lines: int) -> bool:
    return lines > (MAX_CLASS if kind == "class" else MAX_FUNCTION)


def test_no_function_or_class_is_too_long() -> None:
    too_long = [
        f"{file} {name} ({kind}) {lines} lines"
        for (file, name), (kind, lines) in sorted(sizes().items())
        if over(kind, lines)
    ]
    assert too_long == [], (
        f"functions may have {MAX_FUNCTION} lines, classes {MAX_CLASS}:\n" + "\n".join(too_long)
    )


def test_the_measure_sees_methods_nested_and_async_definitions() -> None:
    source = (
        "class A:\n"
        "    async def m(self):\n"
        "        def inner():\n"
        "            pass\n"
        "        return inner\n"
        "if True:\n"
        "    def f():\n"
        '        """Doc."""\n'
    )
    assert measure(ast.parse(source), "x.py") == {
        ("x.py", "A"): ("class", 5),
        ("x.py", "A.m"): ("function", 4),
        ("x.py", "A.m.inner"): ("function", 2),
        ("x.py", "f"): ("function", 2),
    }
