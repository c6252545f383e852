"""The code in docs/*.md runs as written, and the docs point only inside the project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.processes import ROOT

DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _python_blocks() -> list[tuple[Path, int, str]]:
    """(file, line number, code) of every ```python block in docs/*.md."""
    blocks = []
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "tour.md":  # the README's tour: run by test_readme
            continue
        text = page.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            if m.group(1) == "python":
                blocks.append((page, text.count("\n", 0, m.start()) + 1, m.group(2)))
    return blocks


BLOCKS = _python_blocks()


def test_the_user_pages_have_examples() -> None:
    pages = {page.name for page, _, _ in BLOCKS}
    assert {"interrupts.md", "coming-from-other-sdks.md"} <= pages


@pytest.mark.parametrize(
    "page,code",
    [(page, code) for page, _, code in BLOCKS],
    ids=[f"{page.stem}-line{line}" for page, line, _ in BLOCKS],
)
def test_docs_python_block_runs(page: Path, code: str) -> None:
    assert "assert " in code, f"every example in {page.name} shows its outcome with asserts"
    namespace: dict[str, object] = {"__name__": f"__docs_{page.stem}__"}
    # dont_inherit: the block runs as a user module would, without this file's __future__ flags
    exec(compile(code, str(page), "exec", dont_inherit=True), namespace)


def test_design_points_inside_the_project() -> None:
    design = (DOCS / "design.md").read_text(encoding="utf-8")
    assert "../shared" not in design
    assert "`interrupts.md`" in design


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_docs_link_to_pages_that_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"
