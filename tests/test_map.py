"""The map of the source tree (docs/architecture.md) names every module where it lives.

Each module under ``src/tickwork`` is named in the entry of its own folder in the floors
list ("## The folders"): a module added without a line on the map fails here. Two
modules that share a file name (``_pools.py`` and ``pools.py`` count as one name) are
allowed only as the same idea on several floors, and the map says so in "Names shared
across floors", naming every file that carries the name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "tickwork"
MAP = ROOT / "docs" / "architecture.md"


def section(title: str) -> str:
    """The text of the map's section ``## <title>``, up to the next ``## ``."""
    text = MAP.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def floor_entries() -> dict[str, str]:
    """The floors list: each entry's head (``_durable/``, ``metrics.py``) -> its text."""
    block = section("The folders").split("```")[1]
    entries: dict[str, str] = {}
    head = ""
    for line in block.splitlines():
        found = re.match(r"\s*\d+\s+(\S+)", line)
        if found:
            head = found.group(1)
            entries[head] = line
        elif head:
            entries[head] += "\n" + line
    return entries


def modules() -> list[Path]:
    """Every module of the package, as a path under ``src/tickwork``."""
    return sorted(p.relative_to(PKG) for p in PKG.rglob("*.py"))


def entry_head(module: Path, entries: dict[str, str]) -> str:
    """The floors-list entry a module belongs to: its folder's, its own, or the face's."""
    if len(module.parts) > 1:
        return f"{module.parts[0]}/"
    return module.name if module.name in entries else "tickwork/"


def named(stem: str, text: str) -> bool:
    """Whether ``text`` names module ``stem`` as a word of its own."""
    return re.search(rf"(?<![\w/.]){re.escape(stem)}(?![\w])", text) is not None


def test_the_map_names_every_module_in_its_folders_entry() -> None:
    entries = floor_entries()
    missing = [
        f"{module} (in the entry {entry_head(module, entries)!r})"
        for module in modules()
        if module.name != "__init__.py" or len(module.parts) == 1
        if not named(module.stem, entries.get(entry_head(module, entries), ""))
    ]
    assert missing == [], "docs/architecture.md does not name these modules"


def test_a_file_name_two_modules_share_is_one_idea_the_map_explains() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for module in modules():
        if module.name not in ("__init__.py", "__main__.py"):
            by_name[module.name.lstrip("_")].append(module.as_posix())
    shared = section("Names shared across floors")
    unexplained = [
        f"{name}: {', '.join(paths)}"
        for name, paths in sorted(by_name.items())
        if len(paths) > 1
        if not all(f"`{path}`" in shared for path in paths)
    ]
    assert unexplained == [], "shared file names the map does not explain"


def test_the_map_guard_sees_a_missing_module() -> None:
    entries = floor_entries()
    assert named("claims", entries["_durable/"])
    assert not named("claims", entries["_core/"])
    assert not named("testing", "the helpers of tickwork.testing")


def glossary_terms() -> set[str]:
    """The words the map's glossary defines (``**look**``, ``**finish** and **start**``)."""
    return {
        term
        for line in section("Glossary").splitlines()
        if line.startswith("- **")
        for term in re.findall(r"\*\*([^*]+)\*\*", line.split(":", 1)[0])
    }


def test_the_words_a_module_points_to_are_in_the_glossary() -> None:
    pointer = re.compile(r'The words (.+?) mean what\s+docs/architecture\.md, "Glossary",', re.S)
    terms = glossary_terms()
    pointed = {
        f"{path.relative_to(PKG)}: {word}"
        for path in PKG.rglob("*.py")
        for found in pointer.finditer(path.read_text(encoding="utf-8"))
        for word in re.split(r",\s*", " ".join(found.group(1).split()))
        if word not in terms
    }
    assert terms >= {"look", "carry", "cover", "upkeep", "owed", "stretch", "vanished time"}
    assert pointed == set(), "docstrings point to words the glossary does not define"
