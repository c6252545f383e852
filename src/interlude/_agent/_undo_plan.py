"""What an undo takes back: the successful calls after a checkpoint, newest first, and the
compensation of each (``agent.undo``, see docs/undo.md).

Read from the record only (nothing runs): the conversation's tool results, and, when the agent
is paused in a batch, the calls of that batch that finished. A call ran with the input a
person gave when approving it, if they edited it (from the audit trail); its result is what
it returned. Where the session stands afterwards is where a fork at the checkpoint would stand
(``_fork._standing``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._frozen import thaw
from .._messages import Json, JsonValue, Message, Text, ToolResult, ToolUse, _obj, _show
from .._tools import compensation_of
from ..errors import StateFormatError, UndoError
from ._fork import _find, _results_after, _standing
from ._history import batches_of, checkpoints_of
from ._state import ToolBatch, ToolCall, Undoing

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._tools import AgentTool
    from ._agent import Agent
    from ._state import Position, Step

__all__ = ["UNDO", "UndoPlan", "UndoStep", "plan_undo", "rollback_step", "undo_call_id"]

UNDO = "undo"
"""The name of the audit entries an undo records (one per undone or skipped call)."""


@dataclass(frozen=True, slots=True)
class UndoStep:
    """One call an undo takes back: its id, tool, the input it ran with and its result (as
    its compensation is given them), the tool that compensates it (None: it has none), and the
    model reply that asked for it."""

    call_id: str
    tool: str
    input: JsonValue
    result: JsonValue
    compensation: str | None
    message_index: int

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "input": self.input,
            "result": self.result,
            "compensation": self.compensation,
            "message_index": self.message_index,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> UndoStep:
        d = _obj(data, where)
        call_id, tool, comp, index = (
            d.get("call_id"),
            d.get("tool"),
            d.get("compensation"),
            d.get("message_index"),
        )
        if not isinstance(call_id, str) or not isinstance(tool, str):
            raise StateFormatError(f"{where}: expected call_id and tool as text, got {_show(d)}")
        if comp is not None and not isinstance(comp, str):
            raise StateFormatError(f"{where}.compensation: expected a tool name, got {_show(comp)}")
        if not isinstance(index, int) or isinstance(index, bool):
            raise StateFormatError(f"{where}.message_index: expected an index, got {_show(index)}")
        return cls(call_id, tool, d.get("input"), d.get("result"), comp, index)


@dataclass(frozen=True, slots=True)
class UndoPlan:
    """What ``agent.undo(to=...)`` would do: the ``steps`` (calls) it compensates, newest
    first; the calls it leaves as they are (``skipped``: a person said so); how many messages
    of the conversation the session keeps; and where it then stands (``stands``: ``"idle"``,
    or ``"stopped"``: ``agent.recover()`` carries the run on from the checkpoint)."""

    to: str
    steps: tuple[UndoStep, ...]
    skipped: tuple[UndoStep, ...]
    keep: int
    stands: str

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "to": self.to,
            "steps": [s.to_dict() for s in self.steps],
            "skipped": [s.to_dict() for s in self.skipped],
            "keep": self.keep,
            "stands": self.stands,
        }

    def lines(self) -> list[str]:
        """The plan as text, one line per call (for a terminal or a page)."""
        out = [f"{s.call_id}  {s.tool}  -> {s.compensation}" for s in self.steps]
        out += [f"{s.call_id}  {s.tool}  (skipped: left as it is)" for s in self.skipped]
        return out or ["(nothing to undo)"]


def undo_call_id(call_id: str) -> str:
    """The tool-use id a compensation of call ``call_id`` runs under."""
    return f"undo.{call_id}"


_EDITED = "[approved with edited input: "
"""How the note on the result of a call run with a person's edit begins (``edited_note``)."""


def result_value(result: ToolResult) -> JsonValue:
    """What a call returned, as its compensation is given it: its one JSON value, else its
    text, else its blocks as data (without the note saying a person edited its input)."""
    content = result.content
    first = content[0] if content else None
    if isinstance(first, Text) and first.text.startswith(_EDITED):
        result = ToolResult(result.tool_use_id, result.status, content[1:])
    values = [b.value for b in result.content if isinstance(b, Json)]
    if len(values) == 1 and len(result.content) == 1:
        return thaw(values[0])
    if result.text or not result.content:
        return result.text
    from .._messages import block_to_dict

    return [block_to_dict(b) for b in result.content]


def _edited_inputs(audit: Sequence[AuditEntry]) -> dict[str, JsonValue]:
    """The input a person gave a call when approving it, by the approval question's id."""
    out: dict[str, JsonValue] = {}
    for entry in audit:
        answer = entry.answer
        if isinstance(answer, Mapping) and answer.get("approve") is True:
            edited = answer.get("input")
            if edited is not None:
                out[entry.interrupt_id] = thaw(edited)
    return out


def compensated(audit: Sequence[AuditEntry]) -> set[str]:
    """The calls whose compensation already ran (an ``undo`` entry with its status): never
    undone a second time, by a later undo or rollback (a failed one included: it may have had
    effects)."""
    out = set()
    for entry in audit:
        answer = entry.answer
        if entry.name == UNDO and not entry.interrupt_id and isinstance(answer, Mapping):
            call = answer.get("call")
            if isinstance(call, str) and "status" in answer:
                out.add(call)
    return out


def _ran(
    messages: Sequence[Message], position: Position | None, keep: int
) -> list[tuple[int, ToolCall, ToolResult | None]]:
    """The calls whose results the session does not keep, oldest first: (the model reply's
    index, the call, its result; None for a call of the paused batch whose outcome is not
    known: it started and did not finish)."""
    from .._messages import tool_result_from_dict

    out: list[tuple[int, ToolCall, ToolResult | None]] = []
    paused = position.step if position is not None else None
    for index, calls in sorted(batches_of(messages).items()):
        if index + 1 < keep:
            continue
        if index + 1 < len(messages):
            results = _results_after(messages, index, calls)
            for call in calls:
                found = results.get(call.tool_use.id)
                if isinstance(found, dict):
                    out.append((index, call, tool_result_from_dict(found, "result")))
        elif isinstance(paused, ToolBatch) and paused.message_index == index:
            for call in paused.calls:
                if call.phase in ("done", "after") and call.result is not None:
                    out.append((index, call, call.result))
                elif call.phase in ("running", "body"):
                    out.append((index, call, None))
    return out


def plan_undo(agent: Agent, to: str, skip: Sequence[str]) -> tuple[UndoPlan, Undoing | None]:
    """The plan of ``agent.undo(to=..., skip=...)`` and the step that carries it out (None:
    the checkpoint is an open question, after which nothing ran); UndoError (nothing changed)
    if it cannot run."""
    state = agent._loaded()
    position = state.position
    if position is not None and not position.interrupts:
        raise UndoError(
            "the agent holds a stopped run (an undo under way, or a run whose process "
            "stopped): carry it on with recover() first, or drop it with discard_pause()"
        )
    messages = list(state.messages)
    pending = list(position.interrupts) if position is not None else []
    point = _find(checkpoints_of(messages, state.audit, pending), to)
    keep, where, _ = _standing(point, messages, position, batches_of(messages))
    if where is position and position is not None:  # an open question: nothing after it
        return UndoPlan(point.id, (), (), len(messages), "paused"), None
    edits = _edited_inputs(state.audit)
    tools = agent._tools
    steps: list[UndoStep] = []
    missing: list[str] = []
    unknown: list[str] = []
    done = compensated(state.audit)
    inherited = _inherited(state.audit)
    from ._approval import approval_id

    for index, call, result in reversed(_ran(messages, position, keep)):
        use = call.active_use or call.tool_use
        given = edits.get(approval_id(call.tool_use.id), thaw(use.input))
        if result is not None and result.status != "success":
            continue  # it failed: nothing to take back
        if call.tool_use.id in done:
            continue  # undone already (a decline's rollback kept it in the conversation)
        if call.tool_use.id in inherited:
            unknown.append(call.tool_use.id)
        comp = compensation_of(tools.get(use.name))
        step = UndoStep(
            call.tool_use.id,
            use.name,
            given,
            None if result is None else result_value(result),
            None if comp is None else comp.name,
            index,
        )
        steps.append(step)
        if result is None:
            unknown.append(call.tool_use.id)
        elif comp is None and call.tool_use.id not in inherited:
            missing.append(call.tool_use.id)
    skipping = set(skip)
    listed = {s.call_id for s in steps}
    strays = sorted(skipping - listed)
    if strays:
        raise UndoError(
            f"skip= names calls that are not among those after checkpoint {to!r}: "
            f"{', '.join(strays)} (the calls: {', '.join(sorted(listed)) or 'none'})",
            tuple(strays),
        )
    _refuse(to, [c for c in unknown if c in inherited and c not in skipping], "forked", steps)
    _refuse(to, [c for c in unknown if c not in inherited and c not in skipping], "doubt", steps)
    _refuse(to, [c for c in missing if c not in skipping], "no compensation", steps)
    running = tuple(s for s in steps if s.call_id not in skipping)
    skipped = tuple(s for s in steps if s.call_id in skipping)
    then: Step | None = None if where is None else where.step
    plan = UndoPlan(point.id, running, skipped, keep, "idle" if then is None else "stopped")
    batch = ToolBatch(-1, tuple(ToolCall(_compensation_use(s)) for s in running))
    return plan, Undoing(point.id, "", batch, running, skipped, keep, then)


def _inherited(audit: Sequence[AuditEntry]) -> set[str]:
    """The calls a forked session holds from the session it was forked from (they ran there)."""
    from ._fork import parent_results

    return set(parent_results(audit) or {})


def _refuse(to: str, calls: list[str], why: str, steps: list[UndoStep]) -> None:
    if not calls:
        return
    tools = {s.call_id: s.tool for s in steps}
    named = ", ".join(f"{c} ({tools[c]})" for c in calls)
    if why == "forked":
        text = (
            f"cannot undo to {to!r}: call {named} ran in the session this one was forked "
            "from, and is undone there (it ran once, for both): skip= it to leave it here"
        )
    elif why == "doubt":
        text = (
            f"cannot undo to {to!r}: call {named} started and its outcome is not known (in "
            "doubt): answer its question first, or skip= it to leave it as it is"
        )
    else:
        text = (
            f"cannot undo to {to!r}: call {named} has no compensation (@tool(compensate=...)); "
            "skip= it to leave it as it is"
        )
    raise UndoError(text, tuple(calls))


def _compensation_use(step: UndoStep) -> ToolUse:
    assert step.compensation is not None
    return ToolUse(
        undo_call_id(step.call_id),
        step.compensation,
        {"input": step.input, "result": step.result},
    )


def compensations(tools: Mapping[str, AgentTool]) -> dict[str, AgentTool]:
    """The agent's tools and the tools that compensate them, by name (what an undo's calls
    run by: the model is never shown the compensations)."""
    out = dict(tools)
    for tool in tools.values():
        comp = compensation_of(tool)
        if comp is not None and comp.name not in out:
            out[comp.name] = comp
    return out


def rollback_step(
    messages: Sequence[Message],
    batch: ToolBatch,
    tools: Mapping[str, AgentTool],
    by: str,
    audit: Sequence[AuditEntry] = (),
) -> Undoing | None:
    """A decline's rollback (``Agent(on_decline="compensate")``): the compensations of the
    calls this run made since its prompt, the finished ``batch`` included, newest first
    (calls without one are left, and said to be); None when there is nothing to undo."""
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "user" and not any(isinstance(b, ToolResult) for b in m.content):
            start = i
            break
    ran = [(i, c, r) for i, c, r in _ran(messages, None, start + 1)]
    ran += [(batch.message_index, c, c.result) for c in batch.calls if c.phase == "done"]
    steps: list[UndoStep] = []
    done, inherited, edits = compensated(audit), _inherited(audit), _edited_inputs(audit)
    from ._approval import approval_id

    for index, call, result in reversed(ran):
        if result is None or result.status != "success":
            continue
        if call.tool_use.id in done or call.tool_use.id in inherited:
            continue  # undone already, or ran in the session this one was forked from
        use = call.active_use or call.tool_use
        comp = compensation_of(tools.get(use.name))
        steps.append(
            UndoStep(
                call.tool_use.id,
                use.name,
                edits.get(approval_id(call.tool_use.id), thaw(use.input)),
                result_value(result),
                None if comp is None else comp.name,
                index,
            )
        )
    if not steps:
        return None
    running = tuple(s for s in steps if s.compensation is not None)
    skipped = tuple(s for s in steps if s.compensation is None)
    calls = ToolBatch(-1, tuple(ToolCall(_compensation_use(s)) for s in running))
    return Undoing("", by, calls, running, skipped, keep=-1, then=None, after=batch)
