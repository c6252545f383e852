"""The undo crash matrix (issue 40): a process SIGKILLs itself at every boundary of an undo, and a
fresh process recovers it; every compensation ran exactly once, or was an in-doubt question
settled without running it twice.

``crash_undo_child.py`` (``python -m tests.undo.crash_undo_child``, on ``tests/support/crash.py``)
books the trip of ``undo_agent.py`` in a setup process, then enumerates the points of the undo
with a counting pass: before and after every save and the rewind (the cut), and inside each
compensation before and after its effect. For each point one process runs the undo and dies
there by SIGKILL; a fresh process carries it on (``recover()``; an in-doubt compensation is
answered from the effects log: "rerun" if its effect is not there, else its result or "fail";
the undo again if none of it was stored). The decline matrix does the same for
``Agent(on_decline="compensate")``: the run paused at ``mail``'s approval, the resume declines.

What each cell must show, judged from the cell's effects log, events and stored session (as it
was just before the recovery, the *snapshot*, and after it):

- ``compensated_twice`` / ``compensation_lost``: every compensation's effect is in the log
  exactly once, newest call first.
- ``original_touched``: each original call ran once (in the setup) and none ran again; the
  calls before the checkpoint (``c1``, ``c2``) were never compensated.
- ``in_doubt_missing`` / ``in_doubt_spurious``: exactly the compensations the snapshot holds
  ``running`` (started, result not kept) were asked about, once each, under the question id
  ``interrupt_id("in_doubt", "undo.<call>", "in_doubt")``; a kill inside a compensation always
  leaves it so.
- ``wrong_session``: the undo: the session cut to its first five messages, with three ``undo``
  audit entries (``c5``, ``c4``, ``c3``, to ``m4``, by ana); the decline: the run ended (no
  pause, no claim) with twelve messages, the model told what was undone, four ``undo`` entries.
  Each entry's status is the compensation's (an error where its in-doubt question was
  answered "fail").
- ``blocked`` / ``not_recovered``: the child died at its point, the recovery was never
  refused and ended without an error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlude._interrupt import interrupt_id
from tests.support import crash
from tests.support.postgres import fresh_store, require_postgres, schema_url

from .crash_undo_child import BOOKED, COMPENSATED, EFFECT_OF, EFFECTS_LOG, LEASE, MODULE

INVARIANTS = (
    "compensated_twice",
    "compensation_lost",
    "original_touched",
    "in_doubt_missing",
    "in_doubt_spurious",
    "wrong_session",
    "blocked",
    "not_recovered",
)
UNDO = {"args": (), "undone": ("c5", "c4", "c3"), "points": ("save", "rewind", "comp")}
DECLINE = {
    "args": ("--decline", "--in-doubt", "fail"),
    "undone": ("c4", "c3", "c2", "c1"),
    "points": ("save", "comp", "model"),
}
NOTE = "A person declined a call, so the calls made since the prompt were undone"


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory for the matrix (in /dev/shm when there is one)."""
    with crash.scratch(tmp_path, prefix="interlude-undo-crash-") as path:
        yield path


@pytest.mark.parametrize("kind", [UNDO, DECLINE], ids=["undo", "decline"])
def test_undo_crash_matrix_sqlite(scratch: Path, kind: dict[str, Any]) -> None:
    check_matrix(crash.run_matrix(MODULE, "sqlite", scratch, *kind["args"]), "sqlite", kind)


@pytest.mark.parametrize("kind", [UNDO, DECLINE], ids=["undo", "decline"])
def test_undo_crash_matrix_postgres(scratch: Path, kind: dict[str, Any]) -> None:
    require_postgres()
    with fresh_store() as store:  # a throwaway schema, migrated here and dropped afterwards
        url = schema_url(store.schema)
        check_matrix(crash.run_matrix(MODULE, url, scratch, *kind["args"]), "postgres", kind)


# --- judging ----------------------------------------------------------------------------------


def check_matrix(matrix: dict[str, Any], name: str, kind: dict[str, Any]) -> None:
    cells: list[dict[str, Any]] = matrix["cells"]
    [counted] = matrix["counts"].values()  # the counting run went through
    assert counted["crash"] == 0 and counted["setup"] == 0, counted
    enumerated = [e["point"] for e in counted["events"] if e["ev"] == "point"]
    assert [c["point"] for c in cells] == enumerated
    undone = kind["undone"]
    expected_points = {
        f"comp.{COMPENSATED[c]}.{w}_effect#1" for c in undone for w in ("before", "after")
    }
    if kind is UNDO:
        expected_points |= {"rewind.before#1", "rewind.after#1"}
    missing = expected_points - set(enumerated)
    assert not missing, f"the counting pass did not reach {sorted(missing)}"
    failures: list[str] = []
    counts: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    for cell in cells:
        for e in cell.get("events", []):
            if e["ev"] == "in_doubt":
                answers[e["answer"] if isinstance(e["answer"], str) else "result"] += 1
        for invariant, detail in judge(cell, kind):
            counts[invariant] += 1
            failures.append(
                f"[{name}] point {cell['point']}: {invariant}: {detail}\n"
                f"    rounds: {cell.get('rounds')}\n"
                f"    {crash.reproduce(MODULE, cell, *kind['args'])}"
            )
    hit = sum(1 for c in cells if killed(c) == [c["point"]] and c.get("crash") == crash.KILLED)
    summary = {
        "store": name,
        "matrix": "undo" if kind is UNDO else "decline",
        "points": len(enumerated),
        "hit": hit,
        "by_kind": dict(Counter(str(c["point"]).split(".", 1)[0] for c in cells)),
        "in_doubt_answers": dict(answers),
        "seconds": round(matrix["seconds"], 2),
        "violations": {k: counts[k] for k in INVARIANTS},
    }
    print(json.dumps(summary))
    errors = matrix["stderr"].strip()
    assert not failures, (
        f"{len(failures)} broken invariant(s):\n"
        + "\n".join(failures)
        + (f"\nthe children's stderr ends with:\n{errors[-4000:]}" if errors else "")
    )
    assert hit == len(enumerated), summary  # no point left unexercised
    assert set(summary["by_kind"]) == set(kind["points"]), summary


def killed(cell: dict[str, Any]) -> list[str]:
    return [e["point"] for e in cell.get("events", []) if e["ev"] == "kill"]


def judge(cell: dict[str, Any], kind: dict[str, Any]) -> list[tuple[str, str]]:
    """The invariants one cell breaks, each with what was seen."""
    if "events" not in cell:
        return [("not_recovered", str(cell.get("error")))]
    broken: list[tuple[str, str]] = []
    point = str(cell["point"])
    events: list[dict[str, Any]] = cell["events"]
    if cell.get("setup") != 0:
        broken.append(("not_recovered", f"the setup process exited {cell.get('setup')}"))
    if cell.get("crash") != crash.KILLED or killed(cell) != [point]:
        broken.append(
            ("not_recovered", f"the child exited {cell.get('crash')}, killed {killed(cell)}")
        )
    if cell.get("error"):
        blocked = "SessionConflictError" in str(cell["error"])
        broken.append(("blocked" if blocked else "not_recovered", str(cell["error"])))
        return broken
    if any(e["ev"] == "conflict" for e in events) or cell.get("seconds", 0.0) >= LEASE:
        broken.append(("blocked", f"recovery took {cell.get('seconds')} s"))
    undone: tuple[str, ...] = kind["undone"]
    decline = kind is DECLINE

    # the effects: each compensation once, newest first; the original calls untouched
    log = (Path(cell["dir"]) / EFFECTS_LOG).read_text().splitlines()
    seen = Counter(log)
    wanted = [EFFECT_OF[COMPENSATED[c]] for c in undone]
    for line in wanted:
        if seen[line] > 1:
            broken.append(("compensated_twice", f"{line!r} {seen[line]} times"))
        elif seen[line] == 0:
            broken.append(("compensation_lost", f"{line!r} never happened"))
    if all(seen[line] == 1 for line in wanted) and [x for x in log if x in wanted] != wanted:
        broken.append(("compensation_lost", f"out of order: {log}"))
    booked = [BOOKED[t] for t in COMPENSATED.values() if not (decline and t == "mail")]
    not_undone = [EFFECT_OF[COMPENSATED[c]] for c in COMPENSATED if c not in undone]
    for line in booked:
        if seen[line] != 1:
            broken.append(("original_touched", f"{line!r} {seen[line]} times"))
    for line in [*not_undone, *([BOOKED["mail"]] if decline else [])]:
        if seen[line]:
            broken.append(("original_touched", f"{line!r} happened"))
    if len(log) != len(booked) + len(wanted):
        broken.append(("original_touched", f"the effects log is {log}"))

    # in-doubt: exactly the compensations saved running, asked once each
    asked = [e for e in events if e["ev"] == "in_doubt"]
    doubted = [e["id"] for e in asked]
    running = running_compensations(cell.get("snapshot"))
    for e in asked:
        if e["qid"] != interrupt_id("in_doubt", e["id"], "in_doubt"):
            broken.append(("in_doubt_spurious", f"question id {e['qid']}"))
    repeated = [i for i, n in Counter(doubted).items() if n > 1]
    if repeated:
        broken.append(("in_doubt_spurious", f"asked more than once about {repeated}"))
    if point.startswith("comp."):
        call = next(c for c, t in COMPENSATED.items() if t == point.split(".")[1])
        if f"undo.{call}" not in running:
            broken.append(("in_doubt_missing", f"killed in undo.{call}, not saved running"))
    for call in sorted(running - set(doubted)):
        broken.append(("in_doubt_missing", f"{call} was running, never asked about"))
    for call in sorted(set(doubted) - running):
        broken.append(("in_doubt_spurious", f"{call} asked about, was not running"))

    # the session: cut back (undo) or told and ended (decline), one audit entry per call
    final: dict[str, Any] | None = cell.get("final")
    if final is None:
        return [*broken, ("wrong_session", "nothing stored")]
    problem = session_problem(final, decline)
    if problem is not None:
        broken.append(("wrong_session", problem))
    entries = [e["answer"] for e in final["audit"] if e["name"] == "undo"]
    failed = {e["id"] for e in asked if e["answer"] == "fail"}
    expected = [
        (c, None if decline else "m4", "error" if f"undo.{c}" in failed else "success")
        for c in undone
    ]
    got = [(e.get("call"), e.get("checkpoint"), e.get("status")) for e in entries]
    if got != expected:
        broken.append(("wrong_session", f"undo audit entries {got}, not {expected}"))
    if any(e["by"] != "ana" for e in final["audit"] if e["name"] == "undo"):
        broken.append(("wrong_session", "an undo entry is not by ana"))
    return broken


def session_problem(final: dict[str, Any], decline: bool) -> str | None:
    messages = final["messages"]
    if not decline:  # stands at m4, a stopped run (recover() would carry it on from there)
        if len(messages) != 5:
            return f"{len(messages)} messages, not 5"
        pause = final["pause"]
        if not isinstance(pause, dict) or pause.get("interrupts"):
            return f"the session does not stand stopped at the checkpoint: {pause}"
        return None
    if final["pause"] is not None or final["claim"] is not None:
        return f"the run did not end: pause {final['pause']}, claim {final['claim']}"
    if len(messages) != 12:
        return f"{len(messages)} messages, not 12"
    told = " ".join(b.get("text", "") for b in messages[10]["content"])
    if NOTE not in told or not all(f"({c})" in told for c in ("c4", "c3", "c2", "c1")):
        return f"the model was not told: {told!r}"
    reply = " ".join(b.get("text", "") for b in messages[11]["content"])
    if messages[11]["role"] != "assistant" or reply != "Your trip is booked.":
        return f"the reply is {messages[11]}"
    return None


def running_compensations(snapshot: dict[str, Any] | None) -> set[str]:
    """The compensations the snapshot holds ``running`` (their body started, no result)."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "undoing":
                out.update(
                    c["tool_use"]["id"] for c in node["calls"] if c["phase"] in ("running", "body")
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(None if snapshot is None else snapshot["pause"])
    return out
