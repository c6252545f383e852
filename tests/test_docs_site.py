"""The docs site (``mkdocs build --strict``, run by .ci/run) covers the public API: its
reference lists every name ``interlude`` exports, and every reference page is in the nav."""

from __future__ import annotations

import re

import interlude
from tests.support.processes import ROOT

REFERENCE = ROOT / "docs" / "reference"
SUBPACKAGES = {"errors", "hooks", "models"}


def test_the_reference_lists_every_public_name() -> None:
    page = (REFERENCE / "interlude.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\s+- (\w+)$", page, re.MULTILINE)
    public = [n for n in interlude.__all__ if not n.startswith("_") and n not in SUBPACKAGES]
    assert sorted(listed) == sorted(public)


def test_every_reference_page_and_guide_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in REFERENCE.glob("*.md")]
    pages += [p.name for p in (ROOT / "docs").glob("*.md")]
    assert [p for p in pages if p not in nav] == []
