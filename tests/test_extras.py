"""Each extra installs what its guide's examples import: a reader who runs
``pip install 'interlude-agents[<extra>]'`` and copies an example needs nothing else (issue 35:
the AG-UI example needed ``httpx``, which no extra installed).

The check imports what each example imports in a fresh interpreter and looks at every module
that loads (so a module that needs another at import time, as Starlette's test client needs
``httpx``, is seen): mapped to the distributions that provide them here, they must be the
standard library, this project's own, or within what the extra requires (followed through the
requirements of the distributions it pulls in)."""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# (guide, section heading or None for the whole page) -> the extra its examples need.
GUIDES: dict[tuple[str, str | None], str] = {
    ("protocols.md", "## AG-UI"): "ag-ui",
    ("protocols.md", "## A2A"): "a2a",
    ("protocols.md", "## MCP Tasks"): "mcp",
    ("mcp.md", None): "mcp",
    ("channels.md", "## MCP clients"): "mcp",
    ("observability.md", None): "otel",
}
# What an example may import besides: the library that reads traces back in a test, which the
# observability page says to install itself (it is the reader's exporter, not ours).
BESIDES = {"otel": {"opentelemetry-sdk"}}
# Modules other libraries try to import and go on without (so they load here only because
# something else installed them): not what an example needs.
OPTIONAL = {"sniffio", "backports", "rich", "pygments", "_distutils_hack"}


def _section(text: str, heading: str | None) -> str:
    if heading is None:
        return text
    start = text.index(f"\n{heading}\n")
    level = heading.split()[0]
    following = re.search(rf"^{level} ", text[start + len(heading) + 2 :], re.M)
    end = len(text) if following is None else start + len(heading) + 2 + following.start()
    return text[start:end]


def _imports(code: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def _loaded(modules: set[str]) -> set[str]:
    """The top-level modules that load when ``modules`` are imported in a fresh interpreter."""
    import json
    import subprocess

    code = (
        "import importlib, json, sys\n"
        "before = set(sys.modules)\n"
        f"for m in {sorted(modules)!r}:\n"
        "    importlib.import_module(m)\n"
        "print(json.dumps(sorted({n.split('.')[0] for n in set(sys.modules) - before})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout)) | {m.split(".")[0] for m in modules}


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


@cache
def _requires(dist: str, extras: frozenset[str]) -> frozenset[str]:
    """The distributions ``dist`` (with ``extras``) pulls in, itself included, transitively."""
    out = {_name(dist)}
    try:
        listed = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return frozenset(out)
    for line in listed:
        req = Requirement(line)
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": e}) for e in (extras or {""})
        ):
            continue
        if _name(req.name) in out:
            continue
        out |= _requires(req.name, frozenset(req.extras))
    return frozenset(out)


@pytest.mark.parametrize(
    ("guide", "extra"), [(f"{p}{' ' + h if h else ''}", e) for (p, h), e in GUIDES.items()]
)
def test_the_extra_installs_what_the_guide_imports(guide: str, extra: str) -> None:
    page, _, heading = guide.partition(" ")
    text = _section((ROOT / "docs" / page).read_text(encoding="utf-8"), heading or None)
    imported = set().union(*(_imports(code) for code in _FENCE.findall(text)))
    assert imported, f"no python examples in {guide}"
    modules = _loaded(imported)
    allowed = _requires("interlude-agents", frozenset({extra})) | BESIDES.get(extra, set())
    providers = metadata.packages_distributions()
    missing = {}
    for module in sorted(modules - set(sys.stdlib_module_names) - {"interlude"} - OPTIONAL):
        if module.startswith("_") and not providers.get(module):
            continue  # an extension module of the interpreter
        dists = {_name(d) for d in providers.get(module, [])}
        if not dists & allowed:
            missing[module] = sorted(dists) or ["(not installed here)"]
    assert missing == {}, (
        f"the examples of {guide} import {missing}, which pip install "
        f"'interlude-agents[{extra}]' does not install: add them to the extra"
    )
