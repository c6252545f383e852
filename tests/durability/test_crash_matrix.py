"""The crash matrix: a process SIGKILLs itself at every instrumented point; a fresh one recovers.

``crash_child.py`` (``python -m tests.durability.crash_child``) runs the scenario (a prompt; the
model asks for ``deploy`` (``c1``, approved by a before-tool hook, so the run pauses) and
``notify`` (``c2``) in one concurrent batch; the resume approves; the model answers with text)
and enumerates its points with a counting pass: entering and leaving every hook callback, inside
each tool before and after its side effect, each model request, before and after every save (so
right after the claim, after the pause is saved, and during the resume after its claim). For
each point of each phase (1: the first invocation, 2: the resume) one process dies there by
SIGKILL, and a fresh process builds the same agent on the same session and drives it to the end:
``recover()`` when a run stopped, ``resume`` when paused (approval: yes; an in-doubt call:
``"fail"``), the prompt again if nothing was stored. Every process is a fork of one clean parent
(no event loop, store or thread before it forks), so the kills and the recoveries are real,
separate processes.

What each cell must show, judged from the event log (model requests, tool side effects, saves
the store committed, questions asked) and from the session as stored just before the recovery
(the *snapshot*) and after it:

- ``tools_rerun``: no tool's side effect happened twice.
- ``results_lost``: a call whose result was stored (in the journal, the pause or the
  conversation) shows that real result in the final conversation.
- ``model_asked_twice``: the model is asked at most once per conversation length by the
  processes before the crash and at most once by the recovery, and the recovery asks only for
  a length whose reply was not stored in the snapshot (as a message, or in the journal's
  after-model step). So a repeat is allowed only when the kill fell between the request and
  the save of its reply.
- ``invalid_conversation``: the final conversation is the scenario's four messages, every tool
  use answered once, in order, and the reply matches the results it was given.
- ``blocked``: the recovery is never refused (SessionConflictError): a dead process on this
  machine frees its claim at once, so no session waits for the lease.
- ``in_doubt_missing`` / ``in_doubt_spurious``: exactly the calls the snapshot holds in phase
  ``running`` (started, result not stored) surface as ``in_doubt`` interrupts; a kill inside a
  tool's body always leaves its call ``running``.
- ``wrong_outcome``: a call not in doubt ran exactly once and shows its real result; an
  in-doubt call answered "fail" shows an error and ran at most once.
- ``not_recovered``: the child died at its point, and the recovery ended the invocation (no
  pause, no claim left) without an error.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlude import Message, Text, ToolResult, ToolUse
from tests.support import crash
from tests.support.postgres import fresh_store, require_postgres, schema_url

from .crash_child import CALLS, KILLED, LEASE, MODULE, describe

RESULTS = {"c1": "deployed api", "c2": "notified: deploying api"}
INVARIANTS = (
    "tools_rerun",
    "results_lost",
    "model_asked_twice",
    "invalid_conversation",
    "blocked",
    "in_doubt_missing",
    "in_doubt_spurious",
    "wrong_outcome",
    "not_recovered",
)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory for the matrix (in /dev/shm when there is one)."""
    with crash.scratch(tmp_path) as path:
        yield path


def test_crash_matrix_sqlite(scratch: Path) -> None:
    check_matrix(run_matrix("sqlite", scratch), "sqlite")


def test_crash_matrix_sqlite_with_a_policy(scratch: Path) -> None:
    """The same matrix with every call judged and recorded by a policy (issue 38): the same
    points, the same invariants, and each call's decision in the final audit trail once."""
    matrix = crash.run_matrix(MODULE, "sqlite", scratch, "--policy")
    check_matrix(matrix, "sqlite")
    for cell in matrix["cells"]:
        final = cell.get("final") or {}
        decided = [e["interrupt_id"] for e in final.get("audit", []) if e["name"] == "policy"]
        assert len(decided) == len(set(decided)) == 2, (cell["point"], decided)


def test_crash_matrix_postgres(scratch: Path) -> None:
    require_postgres()
    with fresh_store() as store:  # a throwaway schema, migrated here and dropped afterwards
        check_matrix(run_matrix(schema_url(store.schema), scratch), "postgres")


# --- running ----------------------------------------------------------------------------------


def run_matrix(store: str, root: Path) -> dict[str, Any]:
    return crash.run_matrix(MODULE, store, root)


# --- judging ----------------------------------------------------------------------------------


def check_matrix(matrix: dict[str, Any], name: str) -> None:
    cells: list[dict[str, Any]] = matrix["cells"]
    assert cells, "the counting pass found no points"
    for phase, counted in matrix["counts"].items():  # the counting runs went through
        assert counted["crash"] == 0 and counted.get("setup", 0) == 0, (phase, counted)
    failures: list[str] = []
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    in_doubt = 0
    for cell in cells:
        kinds[str(cell["point"]).split(".", 1)[0]] += 1
        broken = judge(cell)
        in_doubt += len(surfaced_in_doubt(cell))
        for invariant, detail in broken:
            counts[invariant] += 1
            failures.append(
                f"[{name}] phase {cell['phase']} point {cell['point']}: {invariant}: {detail}\n"
                f"    snapshot: {describe_snapshot(cell.get('snapshot'))}\n"
                f"    rounds: {cell.get('rounds')}\n    {crash.reproduce(MODULE, cell)}"
            )
    summary = {
        "store": name,
        "points": len(cells),
        "by_kind": dict(kinds),
        "phase_points": dict(Counter(str(c["phase"]) for c in cells)),
        "seconds": round(matrix["seconds"], 2),
        "in_doubt_surfaced": in_doubt,
        "violations": {k: counts[k] for k in INVARIANTS},
    }
    print(json.dumps(summary))
    errors = matrix["stderr"].strip()  # tracebacks of children that failed unexpectedly
    assert not failures, (
        f"{len(failures)} broken invariant(s):\n"
        + "\n".join(failures)
        + (f"\nthe children's stderr ends with:\n{errors[-4000:]}" if errors else "")
    )


def judge(cell: dict[str, Any]) -> list[tuple[str, str]]:
    """The invariants one cell breaks, each with what was seen."""
    broken: list[tuple[str, str]] = []
    if "events" not in cell:
        return [("not_recovered", str(cell.get("error")))]
    events: list[dict[str, Any]] = cell["events"]
    point = str(cell["point"])
    killed = [e["point"] for e in events if e["ev"] == "kill"]
    if cell.get("setup", 0) != 0:
        broken.append(("not_recovered", f"the setup process exited {cell['setup']}"))
    if cell.get("crash") != KILLED or killed != [point]:
        broken.append(("not_recovered", f"the child exited {cell.get('crash')}, killed {killed}"))
    if cell.get("error"):
        blocked = "SessionConflictError" in str(cell["error"])
        broken.append(("blocked" if blocked else "not_recovered", str(cell["error"])))
        return broken
    if any(e["ev"] == "conflict" for e in events) or cell.get("seconds", 0.0) >= LEASE:
        broken.append(("blocked", f"recovery took {cell.get('seconds')} s"))
    snapshot: dict[str, Any] | None = cell.get("snapshot")
    final: dict[str, Any] | None = cell.get("final")
    if final is None or final["pause"] is not None or final["claim"] is not None:
        broken.append(("not_recovered", f"the session ended as {describe_snapshot(final)}"))
        return broken
    messages = [Message.from_dict(m) for m in final["messages"]]
    problem = conversation_problem(messages)
    if problem is not None:
        broken.append(("invalid_conversation", problem))
    results = final_results(messages)

    effects = Counter(e["id"] for e in events if e["ev"] == "effect")
    for tool_use_id, n in effects.items():
        if n > 1:
            broken.append(("tools_rerun", f"{tool_use_id} had its side effect {n} times"))

    stored = stored_results(snapshot)
    for tool_use_id, text in stored.items():
        got = results.get(tool_use_id)
        if got is None or got.status != "success" or got.text != text:
            broken.append(("results_lost", f"{tool_use_id} stored {text!r}, ended as {got}"))

    broken += model_repeats(events, snapshot)

    doubted = surfaced_in_doubt(cell)
    repeated = [i for i, n in Counter(doubted).items() if n > 1]
    if repeated:
        broken.append(("in_doubt_spurious", f"asked more than once about {repeated}"))
    running = running_calls(snapshot)
    if point.startswith("tool."):
        body_of = point.split(".")[1]
        if body_of not in running:
            broken.append(("in_doubt_missing", f"killed in {body_of}'s body, not saved running"))
    for tool_use_id in sorted(running - set(doubted)):
        broken.append(("in_doubt_missing", f"{tool_use_id} was running, never asked about"))
    for tool_use_id in sorted(set(doubted) - running):
        broken.append(("in_doubt_spurious", f"{tool_use_id} asked about, was not running"))

    for tool_use_id, expected in RESULTS.items():
        got = results.get(tool_use_id)
        if tool_use_id in doubted:
            if got is None or got.status != "error" or effects[tool_use_id] > 1:
                broken.append(("wrong_outcome", f"in-doubt {tool_use_id} ended as {got}"))
        elif got is None or got.status != "success" or got.text != expected:
            broken.append(("wrong_outcome", f"{tool_use_id} ended as {got}"))
        elif effects[tool_use_id] != 1:
            broken.append(("wrong_outcome", f"{tool_use_id} ran {effects[tool_use_id]} times"))
    return broken


def conversation_problem(messages: list[Message]) -> str | None:
    """What is wrong with the final conversation (None: it is the scenario's, and valid)."""
    roles = [m.role for m in messages]
    if roles != ["user", "assistant", "user", "assistant"]:
        return f"roles {roles}"
    seen: set[str] = set()
    for i, message in enumerate(messages):
        uses = [b.id for b in message.content if isinstance(b, ToolUse)]
        if seen & set(uses) or len(set(uses)) != len(uses):
            return f"message {i} reuses tool use ids {uses}"
        seen.update(uses)
        answered = [b.tool_use_id for b in message.content if isinstance(b, ToolResult)]
        previous = messages[i - 1] if i else None
        asked = [] if previous is None else [b.id for b in previous.tool_uses]
        if asked and answered != asked:
            return f"message {i} answers {answered}, not the tool uses {asked}"
        if answered and not asked:
            return f"message {i} answers {answered}, which no tool use asked"
    if [u.id for u in messages[1].tool_uses] != list(CALLS):
        return f"the tool uses are {messages[1].tool_uses}"
    if messages[3].tool_uses or not all(isinstance(b, Text) for b in messages[3].content):
        return f"the reply is {messages[3]}"
    statuses = ", ".join(
        f"{b.tool_use_id}={b.status}" for b in messages[2].content if isinstance(b, ToolResult)
    )
    if messages[3].text != f"finished: {statuses}":
        return f"the reply {messages[3].text!r} does not match the results ({statuses})"
    if [Message.from_dict(m.to_dict()) for m in messages] != messages:
        return "the conversation does not survive a JSON round trip"
    return None


def final_results(messages: list[Message]) -> dict[str, ToolResult]:
    return {
        b.tool_use_id: b
        for m in messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, ToolResult)
    }


def model_repeats(
    events: list[dict[str, Any]], snapshot: dict[str, Any] | None
) -> list[tuple[str, str]]:
    """Model requests asked again although their reply had been stored (see the module doc)."""
    broken: list[tuple[str, str]] = []
    before = Counter(e["length"] for e in events if e["ev"] == "ask" and e["role"] != "recover")
    after = Counter(e["length"] for e in events if e["ev"] == "ask" and e["role"] == "recover")
    for length in sorted(before | after):
        if before[length] > 1 or after[length] > 1:
            broken.append(("model_asked_twice", f"L{length}: {before[length]} + {after[length]}"))
        elif after[length] and reply_stored(snapshot, length):
            broken.append(("model_asked_twice", f"L{length} asked again, its reply was stored"))
    return broken


# --- reading a stored session -----------------------------------------------------------------


def steps(snapshot: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The steps of the stored pause slot (a pause or a run's journal), outermost first."""
    pause = None if snapshot is None else snapshot["pause"]
    step = None if not isinstance(pause, dict) else pause.get("step")
    while isinstance(step, dict):
        yield step
        step = step.get("then")


def reply_stored(snapshot: dict[str, Any] | None, length: int) -> bool:
    """Whether the reply to the model request with ``length`` messages was stored."""
    if snapshot is None:
        return False
    count = len(snapshot["messages"])
    if count > length:
        return True
    return count == length and any(
        s["kind"] == "after_model_call" and s.get("response") is not None for s in steps(snapshot)
    )


def journal_calls(snapshot: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    for step in steps(snapshot):
        if step["kind"] == "tool_batch":
            calls.update({c["tool_use"]["id"]: c for c in step["calls"]})
    return calls


def running_calls(snapshot: dict[str, Any] | None) -> set[str]:
    return {i for i, c in journal_calls(snapshot).items() if c["phase"] == "running"}


def stored_results(snapshot: dict[str, Any] | None) -> dict[str, str]:
    """The tool results the snapshot holds (kept in the journal or in the conversation)."""
    kept: dict[str, str] = {}
    for tool_use_id, call in journal_calls(snapshot).items():
        if call["phase"] in ("after", "done") and call.get("result") is not None:
            [result] = Message.from_dict({"role": "user", "content": [call["result"]]}).content
            if isinstance(result, ToolResult) and result.status == "success":
                kept[tool_use_id] = result.text
    if snapshot is not None:
        for message in map(Message.from_dict, snapshot["messages"]):
            for block in message.content:
                if isinstance(block, ToolResult) and block.status == "success":
                    kept[block.tool_use_id] = block.text
    return kept


def surfaced_in_doubt(cell: dict[str, Any]) -> list[str]:
    return [e["id"] for e in cell.get("events", []) if e["ev"] == "in_doubt"]


def describe_snapshot(stored: dict[str, Any] | None) -> str:
    if stored is None:
        return "nothing stored"
    claim = stored.get("claim")
    holder = f", claimed by pid {claim.get('pid')}" if isinstance(claim, dict) else ""
    return f"{len(stored['messages'])} messages, {describe(stored['pause'])}{holder}"
