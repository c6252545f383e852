"""The crash matrix over a graph's node boundaries: a process SIGKILLs itself at every point.

``graph_crash_child.py`` (``python -m tests.multiagent.graph_crash_child``) runs ``research ->
review -> publish`` (``review``'s tool pauses for an approval) and enumerates its points with a
counting pass: every node's start and end (the graph's node hooks), every save of the graph's
record and of each node agent's session (before and after), every model request and every tool's
side effect (before and after). For each point of each phase (1: to the pause, 2: the resume to
the end) one process dies there by SIGKILL and a fresh one drives the graph to its end
(``recover()``, ``resume``, or the task again if nothing was stored).

The same is run for three other shapes (``graph_crash_child.py --scenario``): ``swarm`` (two
agents; the second asks after the handoff), ``nested`` (``research -> team -> publish``, ``team``
a swarm whose agent's tool asks) and ``member`` (a swarm whose second member is a graph), on
SQLite (``nested`` on the file store too); PostgreSQL runs the flat one.

What each cell must show, judged from the event log:

- ``finished_rerun``: a node that had finished (its ``AfterNodeCallEvent`` ran) before the kill
  asks its model nothing and runs no tool after it.
- ``tools_rerun``: no tool's side effect happened twice.
- ``model_asked_twice``: a node's model is asked at most once per conversation length before
  the kill and at most once by the recovery, and both only when the kill fell between the
  request and the node agent's next save (the reply was never stored).
- ``results_lost``: every tool's effect happened (once), and the final record holds every node
  with the text made of its real tool result, in order ``research, review, publish``.
- ``blocked``: the recovery is never refused (a dead process's claim is free at once).
- ``not_recovered``: the child died at its point, and the recovery ended the run (no pause,
  no claim left) without an error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import crash
from tests.support.postgres import fresh_store, require_postgres, schema_url

from .graph_crash_child import AGENTS, MODULE, ORDER, TOOLS, expected_text

INVARIANTS = (
    "finished_rerun",
    "tools_rerun",
    "model_asked_twice",
    "results_lost",
    "blocked",
    "not_recovered",
)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory in /dev/shm when there is one (a kill keeps the page cache: same test)."""
    with crash.scratch(tmp_path, prefix="interlude-graph-crash-") as path:
        yield path


SCENARIOS = sorted(ORDER)  # flat, nested, swarm


def run_matrix(scenario: str, store: str, scratch: Path) -> dict[str, Any]:
    return crash.run_matrix(MODULE, store, scratch, "--scenario", scenario)


# Every scenario on SQLite; the file store for the flat and the deepest (nested) one, to keep
# the file near 90 s on 2 cores (the others: ``python -m tests.multiagent.graph_crash_child
# matrix --store file --scenario ...``).
CASES = [(s, "sqlite") for s in SCENARIOS] + [("flat", "file"), ("nested", "file")]


@pytest.mark.parametrize(("scenario", "store"), CASES)
def test_graph_crash_matrix(scenario: str, store: str, scratch: Path) -> None:
    check(run_matrix(scenario, store, scratch), store, scenario)


def test_graph_crash_matrix_postgres(scratch: Path, scenario: str = "flat") -> None:
    """The flat scenario on PostgreSQL (the nested ones take ~30 s each there: run them with
    ``python -m tests.multiagent.graph_crash_child matrix --scenario ... --store
    postgresql://...``)."""
    require_postgres()
    with fresh_store() as pg:  # a throwaway schema, migrated here and dropped afterwards
        matrix = run_matrix(scenario, schema_url(pg.schema), scratch)
    check(matrix, "postgres", scenario)


def check(matrix: dict[str, Any], store: str, scenario: str) -> None:
    for phase, counted in matrix["counts"].items():
        assert counted["crash"] == 0 and counted.get("setup", 0) == 0, (phase, counted)
    cells: list[dict[str, Any]] = matrix["cells"]
    kinds = Counter(str(c["point"]).split(".", 1)[0] for c in cells)
    labels = {str(c["point"]).split("#")[0] for c in cells}
    for node in {*AGENTS[scenario], *ORDER[scenario]}:  # every level's nodes and their saves
        assert {f"node.{node}.before", f"node.{node}.after", f"save.{node}.after"} <= labels
    for agent in AGENTS[scenario]:
        assert f"tool.{TOOLS[agent]}.after_effect" in labels and f"model.{agent}.L3" in labels
    assert {"save.graph.before", "save.graph.after"} <= labels
    counts: Counter[str] = Counter()
    failures: list[str] = []
    for cell in cells:
        for invariant, detail in judge(cell, scenario):
            counts[invariant] += 1
            failures.append(
                f"[{store} {scenario}] phase {cell['phase']} {cell['point']}: {invariant}: "
                f"{detail}\n"
                f"    rounds: {cell.get('rounds')}  dir: {cell.get('dir')}\n"
                f"    {crash.reproduce(MODULE, cell, '--scenario', scenario)}"
            )
    summary = {
        "store": store,
        "scenario": scenario,
        "cells": len(cells),
        "by_kind": dict(kinds),
        "seconds": round(matrix["seconds"], 1),
        **{i: counts[i] for i in INVARIANTS},
    }
    print(json.dumps(summary))
    assert not failures, "\n".join(failures[:30]) + f"\n{summary}"


def judge(cell: dict[str, Any], scenario: str) -> list[tuple[str, str]]:
    if "error" in cell and "events" not in cell:
        return [("not_recovered", cell["error"][-800:])]
    events: list[dict[str, Any]] = cell["events"]
    out: list[tuple[str, str]] = []
    if cell["crash"] != -9 or cell.get("setup", 0) != 0:
        out.append(("not_recovered", f"setup {cell.get('setup')}, crash {cell['crash']}"))
    if cell.get("error"):
        kind = "blocked" if "SessionConflictError" in cell["error"] else "not_recovered"
        out.append((kind, cell["error"][-800:]))
    final = cell.get("final") or {}
    if final.get("status") != "idle" or cell.get("claim") is not None:
        out.append(("not_recovered", f"final status {final.get('status')}, {cell.get('claim')}"))
    before = [e for e in events if e["role"] != "recover"]
    after = [e for e in events if e["role"] == "recover"]
    done = {e["node"] for e in before if e["ev"] == "node_done"}
    for e in after:
        node = e.get("node") or next((n for n, t in TOOLS.items() if t == e.get("tool")), None)
        if e["ev"] in ("ask", "effect") and node in done:
            out.append(("finished_rerun", f"{node} finished before the kill, then {e}"))
    effects = Counter(e["tool"] for e in events if e["ev"] == "effect")
    for name, n in effects.items():
        if n > 1:
            out.append(("tools_rerun", f"{name}'s effect happened {n} times"))
    out += _model_repeats(before, after)
    results = final.get("results") or {}
    texts = {n: _text(r) for n, r in results.items()}
    order = ORDER[scenario]
    if final.get("order") != list(order) or texts != {n: expected_text(n) for n in order}:
        out.append(("results_lost", f"order {final.get('order')}, texts {texts}"))
    if set(effects) != {TOOLS[a] for a in AGENTS[scenario]}:
        out.append(("results_lost", f"effects {dict(effects)}"))
    return out


def _model_repeats(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Any]:
    out = []
    asked = Counter((e["node"], e["length"]) for e in before if e["ev"] == "ask")
    again = Counter((e["node"], e["length"]) for e in after if e["ev"] == "ask")
    for key in asked + again:
        if asked[key] > 1 or again[key] > 1:
            out.append(("model_asked_twice", f"{key}: {asked[key]} then {again[key]}"))
        elif asked[key] and again[key]:
            i = max(
                i
                for i, e in enumerate(before)
                if e["ev"] == "ask" and (e["node"], e["length"]) == key
            )
            if any(e["ev"] == "commit" and e["who"] == key[0] for e in before[i:]):
                out.append(("model_asked_twice", f"{key}: its reply was saved, then asked again"))
    return out


def _text(result: Any) -> str:
    message = result.get("message") or {}
    return "".join(b.get("text", "") for b in message.get("content", []) if isinstance(b, dict))
