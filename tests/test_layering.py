"""The import contract (docs/style.md, "The doors rule, and how the layers stack"; issue 34).

Every module under ``src/interlude`` is parsed with :mod:`ast`; its imports are sorted into
runtime (module level), lazy (inside a function, or a name a ``__getattr__`` loads through
``importlib``) and type-checking (under ``if TYPE_CHECKING:``). The checks:

- **layers**: each module has a layer (``LAYER_OF``); an import goes to its own layer or a lower
  one. Runtime and lazy imports count, and so do ``TYPE_CHECKING`` ones: no upward one is
  needed today (an annotation that would need one names a type in the wrong layer, or wants a
  protocol defined lower down).
- **floor**: nothing below the operator floor imports it, in any kind of import (an upward
  ``TYPE_CHECKING`` import or a ``__getattr__`` alias of a floor name counts too).
- **cycles**: no circle between packages (a subpackage, or a top-level module, is one unit;
  runtime and lazy imports count; circles inside ``_agent/`` are one unit and do not show).
- **private**: no import of another package's private module (``interlude.sessions._claims``
  from outside ``interlude.sessions``) outside the declared ``SEAMS``.
- **sizes**: no module over 600 lines, no function over 80.

What fails today is listed in ``KNOWN`` (``file:imported-module`` per rule); a violation not in
it fails, and so does an entry that no longer occurs, so the lists can only shrink.
``python -m tests.test_layering`` prints the counts (``--known`` prints a fresh ``KNOWN``).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
TOP = "interlude"

# --- The layers, top down ----------------------------------------------------------------------

LAYERS = ("cli", "doors", "face", "floor", "multiagent", "loop", "extensions", "stores", "ground")
RANK = {name: i for i, name in enumerate(LAYERS)}  # smaller is higher

# One module (``"interlude.x"``) or everything inside a package (``"interlude.x.*"``, its
# ``__init__`` included). A module takes its exact entry, else the longest ``.*`` entry.
LAYER_OF: dict[str, str] = {
    # The command line, and the kit that drives the whole SDK from outside: the store
    # conformance suite runs real agents on a store (nothing in the library imports it).
    "interlude.__main__": "cli",
    "interlude.cli.*": "cli",
    "interlude.testing.conformance.*": "cli",
    # The doors: the inbox pages and API (the whole server package today; its tokens and
    # backend are to move to the floor), AG-UI, A2A serving, the Temporal inbox and the
    # Temporal client people answer through; each package face that re-exports a door.
    "interlude.server.*": "doors",
    "interlude.ag_ui.*": "doors",
    "interlude.a2a": "doors",
    "interlude.a2a._cancel": "doors",
    "interlude.a2a._events": "doors",
    "interlude.a2a._live": "doors",
    "interlude.a2a._push": "doors",
    "interlude.mcp_serve.*": "doors",
    "interlude.a2a._mount": "doors",
    "interlude.a2a._routes": "doors",
    "interlude.a2a._server": "doors",
    "interlude.temporal": "doors",
    "interlude.temporal._client": "doors",
    "interlude.temporal._inbox": "doors",
    "interlude.temporal._moving": "doors",  # TemporalPlace: moves runs through the client
    # The face of the SDK (``import interlude``): it re-exports App and Worker, so it stands
    # right above the floor; the layers below reach what they need from the module itself.
    "interlude": "face",
    # The operator floor: App, the inbox and its rules, the worker and the store it applies
    # answers through, notifications, the new ``operate`` package, and the Temporal engine
    # (its registry holds the App a worker process runs; workflow, activities, executor and
    # hook activities are the Temporal worker), and the DBOS engine (worker, workflow, steps,
    # and its client, which reads the paused runs' attributes).
    "interlude.notify.*": "floor",
    "interlude.operate.*": "floor",
    "interlude.temporal.*": "floor",
    "interlude.dbos.*": "floor",
    # Multi-agent: graphs and swarms, and remote A2A agents used as nodes or tools (the A2A
    # wire format is shared by that client and the A2A door above).
    "interlude.multiagent.*": "multiagent",
    "interlude.a2a._client": "multiagent",
    "interlude.a2a._wire": "multiagent",
    # The loop. Tracing plugs into the loop's observer seam (``install``, ``RunInfo`` and the
    # observer events live in ``_agent``), so it stands on the loop, not beside the hooks.
    "interlude._agent.*": "loop",
    "interlude.otel": "loop",
    # Extension points: tools, hooks, models (the test models and the A2A relay model among
    # them), approval policies (rules judged in the loop, replayed over stores), conversation
    # managers, MCP tools (the client; serving agents over MCP is the ``mcp_serve`` door), and the
    # read-only agent view hooks and tools are typed with.
    "interlude._tools.*": "extensions",
    "interlude._view": "extensions",
    "interlude.a2a._node": "extensions",
    "interlude.conversation": "extensions",
    "interlude.hooks.*": "extensions",
    "interlude.mcp.*": "extensions",
    "interlude.models.*": "extensions",
    "interlude.policy.*": "extensions",
    "interlude.testing.*": "extensions",
    # Stores.
    "interlude.sessions.*": "stores",
    # The ground: pure data and helpers. ``_stream`` and ``_result`` are the types models and
    # hooks speak, ``_sync`` imports nothing of Interlude: all three stand below the loop.
    "interlude._audit": "ground",
    "interlude._exceptions": "ground",
    "interlude._frozen": "ground",
    "interlude._interrupt": "ground",
    "interlude._interrupt_answers": "ground",
    "interlude._interrupt_args": "ground",
    "interlude._json": "ground",
    "interlude._messages": "ground",
    "interlude._patterns": "ground",
    "interlude._result": "ground",
    "interlude._stream": "ground",
    "interlude._sync": "ground",
    "interlude._typed": "ground",
    "interlude._version": "ground",
    "interlude.errors": "ground",
}

FLOOR = "floor"

# Imports of another package's private module that are meant (importer, imported module).
SEAMS: dict[tuple[str, str], str] = {
    # The workflow sandbox loads a second copy of any module first imported inside it, so the
    # temporal package imports by name every module the loop and graphs import lazily.
    ("interlude.temporal", "interlude._tools._context"): "workflow sandbox pass-through",
    ("interlude.temporal", "interlude.models._assemble"): "workflow sandbox pass-through",
    ("interlude.temporal", "interlude.multiagent._export"): "workflow sandbox pass-through",
    ("interlude.temporal", "interlude.multiagent._stored"): "workflow sandbox pass-through",
    # A flag between Interlude's tracing and the provider adapters, no part of the model API.
    ("interlude.otel", "interlude.models._traced"): "tracing tells providers a span is open",
}

# --- What fails today (issue 34): these lists may only shrink ---------------------------------

KNOWN: dict[str, frozenset[str]] = {
    "layers": frozenset(),
    "floor": frozenset(),
    "cycles": frozenset(),
    "private": frozenset(),
    "sizes": frozenset(),
}

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# Measured on main at 7085e8c plus the work in progress of issue 34 (python -m
# tests.test_layering); the closing note compares with these.
BEFORE: dict[str, int] = {
    "modules": 190,
    "imports (internal, all kinds)": 1277,
    "runtime imports": 688,
    "lazy imports (in functions)": 293,
    "dynamic imports (importlib tables)": 41,
    "TYPE_CHECKING imports": 255,
    "files in import circles (modules)": 49,
    "module circles (SCC > 1)": 9,
    "module circles outside _agent/": 8,
    "files in circles outside _agent/": 47,
    "files in circles, importlib tables left out": 36,
    "circles, importlib tables left out": 9,
    "package circles (SCC > 1)": 3,
    "packages in circles": 14,
    "private-module imports across packages": 123,
    "  distinct file:module": 109,
    "seams used": 5,
    "upward imports (layers)": 4,
    "imports of the floor from below": 3,
    "imports closing a package circle": 17,
    "door imports past the floor": 32,
    "modules over 600 lines": 4,
    "functions over 80 lines": 3,
}

# --- Reading the imports ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Import:
    """One import of an Interlude module by another."""

    importer: str  # module name
    path: str  # the importer's file, relative to the repository
    line: int
    target: str  # the imported module (a submodule when ``from p import m`` names one)
    kind: str  # "runtime", "lazy" (in a function), "dynamic" (importlib) or "typing"
    names: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def entry(self) -> str:
        return f"{self.path}:{self.target}"


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by name."""
    found: dict[str, Path] = {}
    for path in sorted((SRC / TOP).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _relpath(path: Path) -> str:
    return path.relative_to(SRC.parent).as_posix()


def _is_package(module: str) -> bool:
    return modules()[module].name == "__init__.py"


def _base(module: str, level: int) -> list[str]:
    parts = module.split(".")
    if not _is_package(module):
        parts.pop()
    return parts[: len(parts) - (level - 1)] if level > 1 else parts


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement with its kind: "typing" wins over "lazy", which wins over runtime."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), "typing")
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "typing" if kind == "typing" else "lazy")
            else:
                yield from walk(child, kind)

    yield from walk(tree, "runtime")


def _targets(module: str, stmt: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, tuple]]:
    known = modules()
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.name == TOP or alias.name.startswith(TOP + "."):
                yield alias.name, ()
        return
    if stmt.level:
        base = ".".join(_base(module, stmt.level) + ([stmt.module] if stmt.module else []))
    else:
        base = stmt.module or ""
    if base != TOP and not base.startswith(TOP + "."):
        return
    plain: list[str] = []
    for alias in stmt.names:
        if f"{base}.{alias.name}" in known:  # ``from p import m``: the submodule m
            yield f"{base}.{alias.name}", ()
        else:
            plain.append(alias.name)
    if plain or not stmt.names:
        yield base, tuple(plain)


def _dynamic(module: str, tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Modules a ``__getattr__`` (or a loader) imports by name through ``importlib``.

    In a module that calls ``import_module``, the strings of its module-level tables that name
    a module (``"._file"``, ``".._inbox"``, ``"interlude.models.openai"``) are lazy imports.
    """
    source_calls = any(
        isinstance(node, ast.Attribute) and node.attr == "import_module" for node in ast.walk(tree)
    )
    if not source_calls:
        return
    known = modules()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if not isinstance(value, ast.Dict | ast.Tuple | ast.List | ast.Set):
            continue
        for node in ast.walk(value):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            if text.startswith("."):
                level = len(text) - len(text.lstrip("."))
                rest = text[level:]
                target = ".".join(_base(module, level) + ([rest] if rest else []))
            else:
                target = text
            if target in known:
                yield target, node.lineno


@cache
def imports() -> tuple[Import, ...]:
    """Every import of an Interlude module by an Interlude module."""
    found: list[Import] = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = _relpath(path)
        for stmt, kind in _statements(tree):
            for target, names in _targets(module, stmt):
                found.append(Import(module, rel, stmt.lineno, target, kind, names))
        for target, line in _dynamic(module, tree):
            found.append(Import(module, rel, line, target, "dynamic", ()))
    return tuple(found)


def executed(kinds: Iterable[str] = ("runtime", "lazy", "dynamic")) -> list[Import]:
    """The imports that run (all but the ``TYPE_CHECKING`` ones), or those of ``kinds``."""
    wanted = set(kinds)
    return [imp for imp in imports() if imp.kind in wanted]


# --- Layers, units, privacy -------------------------------------------------------------------


def layer_of(module: str) -> str | None:
    if module in LAYER_OF:
        return LAYER_OF[module]
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        layer = LAYER_OF.get(".".join(parts[:end]) + ".*")
        if layer is not None:
            return layer
    return None


def unit_of(module: str) -> str:
    """The package a module counts in for circles: ``interlude.x`` for anything in it."""
    return ".".join(module.split(".")[:2])


def private_package(target: str, importer: str) -> str | None:
    """The package whose private module ``target`` is, when ``importer`` is outside it."""
    parts = target.split(".")
    for i in range(2, len(parts)):
        if parts[i].startswith("_") and not parts[i].startswith("__"):
            package = ".".join(parts[:i])
            inside = importer == package or importer.startswith(package + ".")
            return None if inside else package
    return None


# --- The rules ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    where: str  # file:line
    entry: str  # file:imported-module (or file / file:function for sizes)
    why: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.rule}] {self.why}"


def unassigned() -> list[str]:
    return sorted(m for m in modules() if layer_of(m) not in RANK)


def _upward(imp: Import) -> bool:
    here, there = layer_of(imp.importer), layer_of(imp.target)
    return here in RANK and there in RANK and RANK[there] < RANK[here]


def layer_violations() -> list[Violation]:
    """Upward imports that run, and upward ``TYPE_CHECKING`` ones, except into the floor."""
    found = []
    for imp in imports():
        if _upward(imp) and layer_of(imp.target) != FLOOR:
            why = (
                f"{imp.importer} ({layer_of(imp.importer)}) imports {imp.target} "
                f"({layer_of(imp.target)}), a layer above it ({imp.kind})"
            )
            found.append(Violation("layers", imp.where, imp.entry, why))
    return found


def floor_violations() -> list[Violation]:
    found = []
    for imp in imports():
        if _upward(imp) and layer_of(imp.target) == FLOOR:
            why = (
                f"{imp.importer} ({layer_of(imp.importer)}) imports the operator floor "
                f"({imp.target}, {imp.kind})"
            )
            found.append(Violation("floor", imp.where, imp.entry, why))
    return found


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in executed():
        a, b = unit_of(imp.importer), unit_of(imp.target)
        graph[a]
        if a != b:
            graph[a].add(b)
    return graph


def module_graph(kinds: Iterable[str] = ("runtime", "lazy", "dynamic")) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for imp in executed(kinds):
        if imp.importer != imp.target:
            graph[imp.importer].add(imp.target)
    return graph


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    part.append(item)
                    if item == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


def _not_downward(imp: Import) -> bool:
    here, there = layer_of(imp.importer), layer_of(imp.target)
    return here not in RANK or there not in RANK or RANK[there] <= RANK[here]


def cycle_violations() -> list[Violation]:
    """The imports that close a circle between packages: those between two packages of one
    circle that do not go down a layer (a circle needs one; cutting them ends it)."""
    circle_of = {}
    for part in components(package_graph()):
        for unit in part:
            circle_of[unit] = " <-> ".join(part)
    found = []
    for imp in executed():
        a, b = unit_of(imp.importer), unit_of(imp.target)
        if a == b or a not in circle_of or circle_of.get(b) != circle_of[a]:
            continue
        if _not_downward(imp):
            why = f"{a} -> {b} closes a circle between packages ({circle_of[a]}; {imp.kind})"
            found.append(Violation("cycles", imp.where, imp.entry, why))
    return found


def private_violations() -> list[Violation]:
    found = []
    for imp in imports():
        package = private_package(imp.target, imp.importer)
        if package is None or (imp.importer, imp.target) in SEAMS:
            continue
        names = f" ({', '.join(imp.names)})" if imp.names else ""
        why = f"{imp.importer} imports {imp.target}{names}, private to {package} ({imp.kind})"
        found.append(Violation("private", imp.where, imp.entry, why))
    return found


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(qualified name, line, length) of every function under ``node``, nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                yield name, child.lineno, (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _functions(child, name + ".")
        else:
            yield from _functions(child, prefix)


def long_functions() -> list[tuple[str, str, int, int]]:
    """(file, qualified name, line, length) of every function over ``MAX_FUNCTION_LINES``."""
    found = []
    for path in modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line, length in _functions(tree):
            if length > MAX_FUNCTION_LINES:
                found.append((_relpath(path), name, line, length))
    return sorted(found)


def long_modules() -> list[tuple[str, int]]:
    found = []
    for path in modules().values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found.append((_relpath(path), lines))
    return sorted(found)


def size_violations() -> list[Violation]:
    found = [
        Violation("sizes", f"{path}:1", path, f"{lines} lines (over {MAX_MODULE_LINES})")
        for path, lines in long_modules()
    ]
    found += [
        Violation(
            "sizes",
            f"{path}:{line}",
            f"{path}:{name}",
            f"{name} is {length} lines (over {MAX_FUNCTION_LINES})",
        )
        for path, name, line, length in long_functions()
    ]
    return found


def door_bypasses() -> list[Import]:
    """Imports by a door or the CLI of what stands below the floor (measured, not checked: a door
    should make one call of the floor; the Temporal face's sandbox pass-through left out)."""
    below = {"multiagent", "loop", "extensions", "stores"}
    return [
        imp
        for imp in executed()
        if (layer_of(imp.importer) == "doors" or imp.importer.startswith("interlude.cli"))
        and layer_of(imp.target) in below
        and unit_of(imp.importer) != unit_of(imp.target)
        and imp.importer != "interlude.temporal"
    ]


RULES = {
    "layers": layer_violations,
    "floor": floor_violations,
    "cycles": cycle_violations,
    "private": private_violations,
    "sizes": size_violations,
}

# --- The tests ----------------------------------------------------------------------------------


def _check(rule: str) -> None:
    violations = RULES[rule]()
    known = KNOWN[rule]
    new = [v for v in violations if v.entry not in known]
    stale = sorted(known - {v.entry for v in violations})
    problems = [str(v) for v in sorted(new, key=lambda v: v.where)]
    problems += [f"{entry}: [{rule}] no longer occurs: remove it from KNOWN" for entry in stale]
    assert not problems, f"{len(problems)} {rule} problem(s):\n" + "\n".join(problems)


def test_every_module_has_a_layer() -> None:
    missing = unassigned()
    assert not missing, "modules with no layer (add them to LAYER_OF): " + ", ".join(missing)
    stray = [key for key in LAYER_OF if not key.endswith(".*") and key not in modules()]
    assert not stray, "LAYER_OF names modules that do not exist: " + ", ".join(stray)


def test_layers_import_only_downward() -> None:
    _check("layers")


def test_operator_floor_is_not_imported_from_below() -> None:
    _check("floor")


def test_no_circle_between_packages() -> None:
    _check("cycles")


def test_no_private_module_of_another_package() -> None:
    _check("private")


def test_seams_are_still_used() -> None:
    used = {(imp.importer, imp.target) for imp in imports()}
    unused = sorted(f"{a} -> {b}" for a, b in SEAMS if (a, b) not in used)
    assert not unused, "declared seams no longer used (remove them): " + ", ".join(unused)


def test_no_long_modules_or_functions() -> None:
    _check("sizes")


def test_the_parser_sees_every_kind_of_import() -> None:
    kinds = {imp.kind for imp in imports()}
    assert kinds == {"runtime", "lazy", "dynamic", "typing"}
    # ``from .. import errors`` in a subpackage is the module interlude.errors, not the face
    targets = {imp.target for imp in imports() if imp.importer == "interlude.temporal._client"}
    assert "interlude.errors" in targets
    assert "interlude" not in targets


def test_print_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\n" + report())


# --- Measuring ----------------------------------------------------------------------------------


def measure() -> dict[str, int]:
    """The counts the closing note of issue 34 compares (see ``BEFORE``)."""
    graph = module_graph()
    module_sccs = components(graph)
    outside_agent = [
        part for part in module_sccs if not all(m.startswith("interlude._agent") for m in part)
    ]
    package_sccs = components(package_graph())
    private = private_violations()
    static = components(module_graph(kinds=("runtime", "lazy")))
    return {
        "modules": len(modules()),
        "imports (internal, all kinds)": len(imports()),
        "runtime imports": sum(imp.kind == "runtime" for imp in imports()),
        "lazy imports (in functions)": sum(imp.kind == "lazy" for imp in imports()),
        "dynamic imports (importlib tables)": sum(imp.kind == "dynamic" for imp in imports()),
        "TYPE_CHECKING imports": sum(imp.kind == "typing" for imp in imports()),
        "files in import circles (modules)": sum(len(part) for part in module_sccs),
        "module circles (SCC > 1)": len(module_sccs),
        "module circles outside _agent/": len(outside_agent),
        "files in circles outside _agent/": sum(len(part) for part in outside_agent),
        "files in circles, importlib tables left out": sum(len(part) for part in static),
        "circles, importlib tables left out": len(static),
        "package circles (SCC > 1)": len(package_sccs),
        "packages in circles": sum(len(part) for part in package_sccs),
        "private-module imports across packages": len(private),
        "  distinct file:module": len({v.entry for v in private}),
        "seams used": sum((imp.importer, imp.target) in SEAMS for imp in imports()),
        "upward imports (layers)": len(layer_violations()),
        "imports of the floor from below": len(floor_violations()),
        "imports closing a package circle": len(cycle_violations()),
        "door imports past the floor": len(door_bypasses()),
        f"modules over {MAX_MODULE_LINES} lines": len(long_modules()),
        f"functions over {MAX_FUNCTION_LINES} lines": len(long_functions()),
    }


def report() -> str:
    now = measure()
    lines = [f"{'count':45} {'before':>7} {'now':>7}"]
    for name, value in now.items():
        before = BEFORE.get(name)
        lines.append(f"{name:45} {'' if before is None else before:>7} {value:>7}")
    lines.append(
        "package circles: " + "; ".join(" <-> ".join(p) for p in components(package_graph()))
    )
    return "\n".join(lines)


def known_block() -> str:
    """A fresh ``KNOWN`` for this file, from the tree as it is."""
    out = ["KNOWN: dict[str, frozenset[str]] = {"]
    for rule, check in RULES.items():
        entries = sorted({v.entry for v in check()})
        out.append(f'    "{rule}": frozenset(')
        out.append("        {")
        out += [f'            "{entry}",' for entry in entries]
        out.append("        }")
        out.append("    ),")
    out.append("}")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    global SRC
    if "--src" in argv:  # another checkout, e.g. ``git archive HEAD src | tar -x -C /tmp/x``
        SRC = Path(argv[argv.index("--src") + 1]).resolve()
    if "--known" in argv:
        print(known_block())
        return
    print(report())
    if "--violations" in argv:
        for check in RULES.values():
            for violation in sorted(check(), key=lambda v: v.where):
                print(violation)


if __name__ == "__main__":
    main(sys.argv[1:])
