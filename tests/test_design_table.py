"""docs/design.md lists every module of ``src/interlude`` by layer (issue 34): the table and
the tree agree, and each module's row is the layer the import contract gives it
(``tests/test_layering.py``), so the page cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layering import LAYERS, layer_of

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "interlude"
DESIGN = ROOT / "docs" / "design.md"


def _tree() -> set[str]:
    """Every module, as the table names it: its path under src/interlude without ``.py``."""
    return {
        p.relative_to(PACKAGE).with_suffix("").as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def _table() -> dict[str, str]:
    """The Layout table's modules, each with the layer of its row."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] not in LAYERS:
            continue
        for name in re.findall(r"`([^`]+)`", cells[1]):
            assert name not in rows, f"{name} is listed twice in docs/design.md"
            rows[name] = cells[0]
    return rows


def _dotted(module: str) -> str:
    parts = module.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["interlude", *parts])


def test_the_table_lists_every_module_and_no_other() -> None:
    listed, tree = set(_table()), _tree()
    assert sorted(tree - listed) == [], "modules missing from the table in docs/design.md"
    assert sorted(listed - tree) == [], "the table in docs/design.md lists modules that are gone"


def test_each_module_is_in_the_row_of_its_layer() -> None:
    wrong = {
        module: (row, layer_of(_dotted(module)))
        for module, row in _table().items()
        if layer_of(_dotted(module)) != row
    }
    assert wrong == {}, "module: (its row in docs/design.md, its layer in test_layering)"
