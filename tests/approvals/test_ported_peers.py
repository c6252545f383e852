"""The peers' own human-in-the-loop tests for per-tool approval, ported to Interlude's public API.

Each test names the peer test it comes from (OpenAI Agents SDK: ``openai/openai-agents-python``;
Pydantic AI: ``pydantic/pydantic-ai``) and checks the same behaviour through
``@tool(needs_approval=...)``, approval answers (``True`` / ``False`` / ``{"approve", "input",
"remember", "note"}``), ``Agent(approver=...)``, ``agent.decisions`` /
``agent.forget_decisions()`` and ``agent.resume(..., message=...)``. Where Interlude behaves
otherwise by design, the test checks Interlude's behaviour and its docstring says how the peer
differs. Facts (scenarios, inputs, expected outcomes) come from the peers' tests; the code is
written for Interlude.

Not ported: OpenAI's ``tests/mcp/test_mcp_approval.py::test_mcp_require_approval_tool_lists``
and ``::test_mcp_require_approval_tool_mapping`` (approval by MCP tool name, "always"/"never"):
``interlude.mcp.require_approval`` still takes only a function of a tool's annotations.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from interlude import Agent, Interrupt, Message, TextDelta, ToolResult, ToolUse, Usage, tool
from interlude.errors import AnswerValidationError, ConfigurationError
from interlude.models import ModelStop, ToolUseDelta, ToolUseStart
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel

EDITED = "[approved with edited input: the tool ran with "


# --- helpers -------------------------------------------------------------------------------------


def results(message: Message) -> list[tuple[str, str, str]]:
    """(tool use id, status, text) of each tool result in ``message``, in order."""
    return [(b.tool_use_id, b.status, b.text) for b in message.content if isinstance(b, ToolResult)]


def by_call(questions: Sequence[Interrupt]) -> dict[str, str]:
    """Tool use id -> the id of its approval question."""
    ids: dict[str, str] = {}
    for q in questions:
        assert q.tool_use is not None
        ids[q.tool_use.id] = q.id
    return ids


def assert_approval(question: Interrupt, tool_use_id: str, name: str, tool_input: Any) -> None:
    """``question`` is the built-in approval question of that call."""
    assert (question.name, question.source) == ("approval", "before_tool_call")
    assert question.tool_use == ToolUse(tool_use_id, name, tool_input)


def approval_entries(agent: Agent) -> list[tuple[str | None, Any, str]]:
    """(tool, answer, by) of the agent's audit entries."""
    return [(e.tool, e.answer, e.by) for e in agent.audit]


class RawArguments:
    """A model whose first reply calls ``tool_name`` with ``raw`` as its argument text (as a
    provider streams it, possibly not JSON), then says "done"."""

    def __init__(self, tool_name: str, raw: str) -> None:
        self.tool_name = tool_name
        self.raw = raw
        self.calls = 0

    async def stream(
        self, messages: Sequence[Message], tool_specs: Any, system_prompt: Any, **_: Any
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if self.calls == 1:
            yield ToolUseStart("call-invalid", self.tool_name)
            yield ToolUseDelta("call-invalid", self.raw)
            yield ModelStop("tool_use", Usage(1, 1))
        else:
            yield TextDelta("done")
            yield ModelStop("end_turn", Usage(1, 1))


# --- Pydantic AI ---------------------------------------------------------------------------------


def test_pydantic_hitl_tool_approval_mixed_batch() -> None:
    """Pydantic AI, tests/test_agent.py::test_hitl_tool_approval.

    One model reply calls ``create_file`` (no approval) and ``delete_file`` (requires approval)
    twice. The first run runs ``create_file`` and stops with the two deletes as approval
    requests; the second approves one and denies the other with a message ("File cannot be
    deleted"). The approved delete runs once, the denied one never, and the model then sees
    the denial text and answers "Done!".

    By design in Interlude: the results of the whole batch go to the model in one user message,
    in the order of the calls (Pydantic AI sends ``create_file``'s result in an earlier request),
    and the denial is an error result "not approved: ... (note: File cannot be deleted)" rather
    than the bare message.
    """
    deleted: list[str] = []
    created: list[str] = []

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"File {path!r} deleted"

    @tool
    def create_file(path: str, content: str) -> str:
        """Create a file."""
        created.append(path)
        return f"File {path!r} created with content: {content}"

    batch = [
        ToolUse("create_file", "create_file", {"path": "new_file.py", "content": "print(1)"}),
        ToolUse("ok_to_delete", "delete_file", {"path": "ok_to_delete.py"}),
        ToolUse("never_delete", "delete_file", {"path": "never_delete.py"}),
    ]
    model = ScriptedModel([batch, "Done!"])
    agent = Agent(model, tools=[delete_file, create_file])

    paused = agent("Create new_file.py and delete ok_to_delete.py and never_delete.py")
    assert paused.stop_reason == "interrupt" and agent.is_paused
    assert created == ["new_file.py"] and deleted == []
    ok, never = paused.interrupts
    assert_approval(ok, "ok_to_delete", "delete_file", {"path": "ok_to_delete.py"})
    assert_approval(never, "never_delete", "delete_file", {"path": "never_delete.py"})

    done = agent.resume(
        {ok.id: True, never.id: {"approve": False, "note": "File cannot be deleted"}}
    )
    assert str(done) == "Done!" and not agent.is_paused
    assert deleted == ["ok_to_delete.py"] and created == ["new_file.py"]  # each ran once
    sent = model.requests[1].messages[-1]  # what the model was sent next
    assert results(sent) == [
        ("create_file", "success", "File 'new_file.py' created with content: print(1)"),
        ("ok_to_delete", "success", "File 'ok_to_delete.py' deleted"),
        (
            "never_delete",
            "error",
            "not approved: a person declined this tool call (note: File cannot be deleted)",
        ),
    ]
    assert [(tool, by) for tool, _, by in approval_entries(agent)] == [
        ("delete_file", "unknown"),
        ("delete_file", "unknown"),
    ]


def test_pydantic_tool_approved_override_args() -> None:
    """Pydantic AI, tests/test_tools.py::test_tool_raises_approval_required (approves with
    ``ToolApproved(override_args={'x': 2})``) and
    tests/test_tools.py::test_tool_approved_with_metadata_and_override_args (the tool receives
    the overridden argument, once).

    The model calls ``my_tool(x=1)``; the person approves with ``x=2``; the tool runs once, with
    ``x=2``, and returns 84. The conversation keeps the model's own call (``x=1``).

    By design in Interlude: the result the model sees starts with a note that the call ran with
    edited input (Pydantic AI returns the bare 84). Interlude-only, also checked: an edit the
    tool's input schema refuses is an AnswerValidationError, and nothing changes. (Pydantic AI's
    ``metadata`` has no counterpart: the edit is the answer itself.)
    """
    received: list[int] = []

    @tool(needs_approval=True)
    def my_tool(x: int) -> int:
        """Multiply by 42."""
        received.append(x)
        return x * 42

    model = ScriptedModel([[ToolUse("my_tool", "my_tool", {"x": 1})], "Done!"])
    agent = Agent(model, tools=[my_tool])
    (question,) = agent("Hello").interrupts
    assert_approval(question, "my_tool", "my_tool", {"x": 1})

    before = agent.export_state()
    with pytest.raises(AnswerValidationError) as refused:
        agent.resume({question.id: {"approve": True, "input": {"x": "two"}}})
    assert refused.value.interrupt_id == question.id
    assert agent.export_state() == before and received == []

    done = agent.resume({question.id: {"approve": True, "input": {"x": 2}}})
    assert str(done) == "Done!"
    assert received == [2]
    assert agent.messages[1].content == [ToolUse("my_tool", "my_tool", {"x": 1})]
    (result,) = [b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResult)]
    assert result.status == "success"
    assert result.text.startswith(EDITED) and '{"x": 2}' in result.text
    assert [getattr(b, "value", None) for b in result.content][-1] == 84


def test_pydantic_approval_required_toolset_by_callable() -> None:
    """Pydantic AI, tests/test_tools.py::test_approval_required_toolset.

    A rule decides which calls need approval (there, ``toolset.approval_required(lambda ctx,
    tool_def, tool_args: tool_def.name == 'foo')``; here ``foo``'s ``needs_approval`` function of
    the call's input). One reply calls foo(1), foo(2) and bar(3): bar runs at once (9), the two
    foo calls pause; approving foo1 and denying foo2 runs foo once (2) and gives foo2 an error.

    By design in Interlude: the rule is per tool and gets the call's input (not the tool
    definition), and the denial reads "not approved: ..." (Pydantic AI: "The tool call was
    denied.").
    """
    ran: list[tuple[str, int]] = []
    asked_about: list[dict[str, Any]] = []

    def rule(tool_input: dict[str, Any]) -> bool:
        asked_about.append(tool_input)
        return True

    @tool(needs_approval=rule)
    def foo(x: int) -> int:
        """Double."""
        ran.append(("foo", x))
        return x * 2

    @tool
    def bar(x: int) -> int:
        """Triple."""
        ran.append(("bar", x))
        return x * 3

    batch = [
        ToolUse("foo1", "foo", {"x": 1}),
        ToolUse("foo2", "foo", {"x": 2}),
        ToolUse("bar", "bar", {"x": 3}),
    ]
    model = ScriptedModel([batch, "Done!"])
    agent = Agent(model, tools=[foo, bar])

    paused = agent("foo")
    assert ran == [("bar", 3)]
    assert [q.tool_use for q in paused.interrupts] == batch[:2]
    assert {json.dumps(i) for i in asked_about} == {'{"x": 1}', '{"x": 2}'}  # never bar's

    ids = by_call(paused.interrupts)
    assert str(agent.resume({ids["foo1"]: True, ids["foo2"]: False})) == "Done!"
    assert ran == [("bar", 3), ("foo", 1)]
    assert [(i, s) for i, s, _ in results(model.requests[1].messages[-1])] == [
        ("foo1", "success"),
        ("foo2", "error"),
        ("bar", "success"),
    ]
    assert results(agent.messages[2])[1][2].startswith("not approved")


def test_pydantic_user_prompt_with_deferred_tool_results() -> None:
    """Pydantic AI, tests/test_agent.py::test_user_prompt_with_deferred_tool_results.

    The model asks to update ``.env`` (needs approval). The next run gives the approval and a
    new user prompt, "continue with the operation": the model's next request holds the tool's
    result and that prompt in the same user message, and its reply can use the prompt.
    """
    updated: list[str] = []

    @tool(needs_approval=lambda tool_input: tool_input["path"] == ".env")
    def update_file(path: str, content: str) -> str:
        """Update a file."""
        updated.append(path)
        return f"File {path!r} updated"

    def llm(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return [ToolUse("update_file_1", "update_file", {"path": ".env", "content": ""})]
        last = request.messages[-1]
        assert last.role == "user" and results(last), "expected the tool result"
        assert last.text, "expected the user's text"
        return f"Approved and {last.text}"

    model = FunctionModel(llm)
    agent = Agent(model, tools=[update_file])
    (question,) = agent("Update .env file").interrupts
    assert_approval(question, "update_file_1", "update_file", {"path": ".env", "content": ""})

    done = agent.resume({question.id: True}, message="continue with the operation")
    assert str(done) == "Approved and continue with the operation"
    assert updated == [".env"]
    sent = model.requests[1].messages[-1]
    assert [type(b).__name__ for b in sent.content] == ["ToolResult", "Text"]
    assert results(sent) == [("update_file_1", "success", "File '.env' updated")]
    assert sent.text == "continue with the operation"
    assert len(model.requests) == 2 and len(agent.messages) == 4  # no extra user message


def test_pydantic_unapproved_tool_invalid_args_retry() -> None:
    """Pydantic AI, tests/test_tools.py::test_unapproved_tool_invalid_args_retry.

    A tool that requires approval is called with invalid arguments (``x='not_an_int'``): no one
    is asked, the model gets the validation error back (Pydantic AI: one retry prompt for
    ``my_tool``) and answers "done". The tool never runs, and its approval rule is not consulted.
    """
    consulted: list[dict[str, Any]] = []
    ran: list[int] = []

    @tool(needs_approval=lambda tool_input: consulted.append(tool_input) or True)
    def my_tool(x: int) -> int:
        """Return x."""
        ran.append(x)
        return x

    model = ScriptedModel([[ToolUse("t1", "my_tool", {"x": "not_an_int"})], "done"])
    agent = Agent(model, tools=[my_tool])
    result = agent("test")
    assert result.stop_reason == "end_turn" and str(result) == "done"
    assert result.interrupts == [] and agent.audit == []
    assert ran == [] and consulted == []
    ((tool_use_id, status, text),) = results(model.requests[1].messages[-1])
    assert (tool_use_id, status) == ("t1", "error")
    assert "my_tool" in text and "x" in text


async def test_pydantic_deferred_tool_handler_approve() -> None:
    """Pydantic AI, tests/test_capabilities.py::test_deferred_tool_handler_approve.

    A handler in the process (there ``HandleDeferredToolCalls(handler=...)``, here
    ``Agent(approver=...)``, async) approves every request: the run completes in one call, the
    tool runs once with x=5 and returns 50, and the model answers "Done!". Interlude also
    records the answer in the audit trail as given by the approver.
    """
    ran: list[int] = []
    handled: list[Interrupt] = []

    @tool(needs_approval=True)
    def my_tool(x: int) -> int:
        """Multiply by 10."""
        ran.append(x)
        return x * 10

    async def handle_deferred(question: Interrupt) -> Any:
        handled.append(question)
        return True

    model = ScriptedModel([[ToolUse("call1", "my_tool", {"x": 5})], "Done!"])
    agent = Agent(model, tools=[my_tool], approver=handle_deferred)
    result = await agent.invoke_async("Hello")
    assert result.stop_reason == "end_turn" and str(result) == "Done!"
    assert not agent.is_paused and ran == [5]
    (question,) = handled
    assert_approval(question, "call1", "my_tool", {"x": 5})
    (result_block,) = [b for b in agent.messages[2].content if isinstance(b, ToolResult)]
    assert result_block.status == "success"
    assert [getattr(b, "value", None) for b in result_block.content] == [50]
    assert approval_entries(agent) == [("my_tool", True, "approver:handle_deferred")]


def test_pydantic_deferred_tool_handler_deny() -> None:
    """Pydantic AI, tests/test_capabilities.py::test_deferred_tool_handler_deny.

    The handler denies with a message ("Not allowed."): the tool never runs, the model sees one
    denied result for ``call1`` carrying the message, and answers "Understood, denied.".

    By design in Interlude: the denial is an error result "not approved: ... (note: Not
    allowed.)" (Pydantic AI: a ``ToolReturnPart`` with ``outcome='denied'`` and the bare message).
    """
    ran: list[int] = []

    @tool(needs_approval=True)
    def my_tool(x: int) -> int:
        """Multiply by 10."""
        ran.append(x)
        return x * 10

    async def handle_deferred(question: Interrupt) -> Any:
        return {"approve": False, "note": "Not allowed."}

    model = ScriptedModel([[ToolUse("call1", "my_tool", {"x": 5})], "Understood, denied."])
    agent = Agent(model, tools=[my_tool], approver=handle_deferred)
    result = agent("Hello")
    assert str(result) == "Understood, denied." and ran == []
    assert results(model.requests[1].messages[-1]) == [
        ("call1", "error", "not approved: a person declined this tool call (note: Not allowed.)")
    ]


def test_pydantic_deferred_tool_handler_sync_handler() -> None:
    """Pydantic AI, tests/test_capabilities.py::test_deferred_tool_handler_sync_handler.

    The handler may be a plain (sync) function: it approves, the tool runs, the run ends "OK".
    """
    ran: list[str] = []

    @tool(needs_approval=True)
    def my_tool() -> str:
        """Do it."""
        ran.append("my_tool")
        return "done"

    def handle_deferred_sync(question: Interrupt) -> Any:
        return True

    model = ScriptedModel([[ToolUse("call1", "my_tool", {})], "OK"])
    agent = Agent(model, tools=[my_tool], approver=handle_deferred_sync)
    assert str(agent("Hello")) == "OK"
    assert ran == ["my_tool"]
    assert approval_entries(agent) == [("my_tool", True, "approver:handle_deferred_sync")]


def test_pydantic_deferred_tool_handler_partial_resolution() -> None:
    """Pydantic AI, tests/test_capabilities.py::test_deferred_tool_handler_partial_resolution.

    The handler resolves ``tool_a`` and leaves ``tool_b``: the run stops with ``tool_b``'s request
    only. In Interlude the approver returns None for a question it leaves to a person; ``tool_a``
    has run by then, and when a person answers ``tool_b`` later the trail says who decided what.
    """
    ran: list[str] = []

    @tool(needs_approval=True)
    def tool_a() -> str:
        """A."""
        ran.append("a")
        return "a done"

    @tool(needs_approval=True)
    def tool_b() -> str:
        """B."""
        ran.append("b")
        return "b done"

    def handle_deferred(question: Interrupt) -> Any:
        assert question.tool_use is not None
        return True if question.tool_use.name == "tool_a" else None

    model = ScriptedModel([[ToolUse("a1", "tool_a", {}), ToolUse("b1", "tool_b", {})], "both"])
    agent = Agent(model, tools=[tool_a, tool_b], approver=handle_deferred)
    paused = agent("Hello")
    assert paused.stop_reason == "interrupt" and ran == ["a"]
    (left,) = paused.interrupts
    assert_approval(left, "b1", "tool_b", {})

    assert str(agent.resume({left.id: True}, by="ana")) == "both"
    assert ran == ["a", "b"]
    assert approval_entries(agent) == [
        ("tool_a", True, "approver:handle_deferred"),
        ("tool_b", True, "ana"),
    ]


def test_pydantic_deferred_tool_handler_approved_tool_override_args() -> None:
    """Pydantic AI, tests/test_capabilities.py::
    test_deferred_tool_handler_approved_tool_override_args.

    The handler approves with overridden arguments (x=5 becomes x=42): the tool receives 42.
    By design in Interlude the result notes that the call ran with edited input.
    """
    received: list[int] = []

    @tool(needs_approval=True)
    def my_tool(x: int) -> int:
        """Multiply by 10."""
        received.append(x)
        return x * 10

    def handle_deferred(question: Interrupt) -> Any:
        return {"approve": True, "input": {"x": 42}}

    model = ScriptedModel([[ToolUse("call1", "my_tool", {"x": 5})], "Done."])
    agent = Agent(model, tools=[my_tool], approver=handle_deferred)
    assert str(agent("Hello")) == "Done."
    assert received == [42]
    assert agent.messages[1].content == [ToolUse("call1", "my_tool", {"x": 5})]
    assert results(agent.messages[2])[0][2].startswith(EDITED)


# --- OpenAI Agents SDK ---------------------------------------------------------------------------


def test_openai_resume_rejected_function_approval_emits_output() -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::
    test_resume_rejected_function_approval_emits_output (with
    tests/test_agent_runner.py::test_execute_approved_tools_with_rejected_tool).

    A ``needs_approval=True`` tool is called; the run pauses; the person rejects; on resume the
    tool never runs, the model gets a rejection output ("not approved"), and the run ends with
    the model's final output "done".
    """
    calls: list[str] = []

    @tool(needs_approval=True)
    def needs_ok(text: str) -> str:
        """Echo."""
        calls.append(text)
        return text

    model = ScriptedModel([[ToolUse("1", "needs_ok", {"text": "one"})], "done"])
    agent = Agent(model, tools=[needs_ok])
    first = agent("hi")
    assert first.stop_reason == "interrupt" and calls == []
    (question,) = first.interrupts
    assert_approval(question, "1", "needs_ok", {"text": "one"})

    resumed = agent.resume({question.id: False})
    assert resumed.stop_reason == "end_turn" and str(resumed) == "done"
    assert calls == []
    ((tool_use_id, status, text),) = results(model.requests[1].messages[-1])
    assert (tool_use_id, status) == ("1", "error") and "not approved" in text.lower()


def test_openai_rejection_message_reaches_the_model() -> None:
    """OpenAI Agents SDK, tests/test_agent_runner.py::
    test_execute_approved_tools_with_rejected_tool_prefers_explicit_message (and
    tests/test_run_state.py::test_reject_stores_rejection_message).

    ``state.reject(item, rejection_message="explicit rejection message")``: the output the model
    gets for the rejected call carries the reviewer's message.

    By design in Interlude: the message is the answer's ``note`` and is added to the standard
    rejection text (the peer replaces the text with it).
    """
    ran: list[str] = []

    @tool(needs_approval=True)
    def test_tool() -> str:
        """Test."""
        ran.append("test_tool")
        return "tool_result"

    model = ScriptedModel([[ToolUse("call", "test_tool", {})], "ok"])
    agent = Agent(model, tools=[test_tool])
    (question,) = agent("go").interrupts
    agent.resume({question.id: {"approve": False, "note": "explicit rejection message"}}, by="rev")
    assert ran == []
    ((_, status, text),) = results(model.requests[1].messages[-1])
    assert status == "error"
    assert (
        text == "not approved: a person declined this tool call (note: explicit rejection message)"
    )
    assert approval_entries(agent) == [
        ("test_tool", {"approve": False, "note": "explicit rejection message"}, "rev")
    ]


def _tool_z(ran: list[int]) -> Any:
    @tool(needs_approval=True)
    def tool_z(x: int) -> int:
        """Z."""
        ran.append(x)
        return x

    return tool_z


def _tool_y(ran: list[int]) -> Any:
    @tool(needs_approval=True)
    def tool_y(x: int) -> int:
        """Y."""
        ran.append(-x)
        return x

    return tool_y


def test_openai_always_reject_is_sticky_for_the_run() -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::
    test_reject_permanently_when_always_reject_option_is_passed (and
    tests/test_hitl_error_scenarios.py::test_execute_path_honors_sticky_rejection_before_checker).

    ``reject(item, always_reject=True)`` rejects the tool for good: a later call of it, under a
    new call id, is rejected without asking and without running. Interlude:
    ``{"approve": False, "remember": "run"}``; ``agent.decisions`` shows it while the run is
    paused, and the audit trail records each call the remembered decision settled.
    """
    ran: list[int] = []
    tool_z, tool_y = _tool_z(ran), _tool_y(ran)
    model = ScriptedModel(
        [
            [ToolUse("cid789", "tool_z", {"x": 1})],
            [ToolUse("cid999", "tool_z", {"x": 2}), ToolUse("y1", "tool_y", {"x": 3})],
            "end",
        ]
    )
    agent = Agent(model, tools=[tool_z, tool_y])
    (question,) = agent("go").interrupts
    paused = agent.resume({question.id: {"approve": False, "remember": "run"}})

    (asked,) = paused.interrupts  # tool_y is asked; tool_z's new call is not
    assert_approval(asked, "y1", "tool_y", {"x": 3})
    assert agent.decisions == {"tool_z": {"approve": False, "scope": "run"}}
    assert ran == []
    assert agent.resume({asked.id: True}).stop_reason == "end_turn"
    assert ran == [-3]  # tool_z never ran
    assert results(agent.messages[4]) == [
        ("cid999", "error", "not approved: a decision remembered for this run declines this tool"),
        ("y1", "success", ""),
    ]
    assert [(t, by) for t, _, by in approval_entries(agent)] == [
        ("tool_z", "unknown"),
        ("tool_z", "decision:run"),
        ("tool_y", "unknown"),
    ]


def test_openai_rejection_is_scoped_to_call_ids() -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::test_rejection_is_scoped_to_call_ids.

    A plain rejection applies to that call only: the next call of the same tool (a new call id)
    is asked about again, and no decision is remembered.
    """
    ran: list[int] = []
    model = ScriptedModel(
        [[ToolUse("cid789", "tool_z", {"x": 1})], [ToolUse("cid999", "tool_z", {"x": 1})], "end"]
    )
    agent = Agent(model, tools=[_tool_z(ran)])
    (first,) = agent("go").interrupts
    (second,) = agent.resume({first.id: False}).interrupts
    assert_approval(second, "cid999", "tool_z", {"x": 1})
    assert agent.decisions == {}
    assert agent.resume({second.id: True}).stop_reason == "end_turn"
    assert ran == [1]


def test_openai_always_reject_reuses_rejection_message_for_future_calls() -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::
    test_always_reject_reuses_rejection_message_for_future_calls.

    ``reject(item, always_reject=True, rejection_message=...)`` stores a sticky message: later
    calls of the tool, under other call ids, are rejected with the same message. Interlude's
    counterpart, a note on a remembered rejection, should reach the model for those later calls
    too ("A declined call gets an error result 'not approved: ...' (with the note, if any)").
    """
    ran: list[int] = []
    model = ScriptedModel(
        [[ToolUse("cid789", "tool_z", {"x": 1})], [ToolUse("cid999", "tool_z", {"x": 2})], "end"]
    )
    agent = Agent(model, tools=[_tool_z(ran)])
    (question,) = agent("go").interrupts
    answer = {"approve": False, "remember": "run", "note": "tool_z is off limits"}
    assert agent.resume({question.id: answer}).stop_reason == "end_turn"
    assert ran == []
    assert "tool_z is off limits" in results(agent.messages[2])[0][2]
    assert "tool_z is off limits" in results(agent.messages[4])[0][2]


def test_openai_always_approve_applies_to_fresh_call_ids() -> None:
    """OpenAI Agents SDK, tests/test_hitl_error_scenarios.py::
    test_resume_honors_permanent_namespaced_function_approval_with_new_call_id (and
    tests/test_tool_approval_call_id_reuse.py::
    test_custom_named_shell_sticky_approval_applies_to_fresh_call_ids).

    ``approve(item, always_approve=True)`` for ``lookup_account(customer_1)``: a later call with a
    new call id and other input (``customer_2``) runs without a new approval request.

    Interlude's ``"remember": "run"`` lasts for the rest of the invocation (the peer's lasts for
    the run state): a new prompt asks again.
    """
    looked_up: list[str] = []

    @tool(needs_approval=True)
    def lookup_account(customer_id: str) -> str:
        """Look an account up."""
        looked_up.append(customer_id)
        return customer_id

    model = ScriptedModel(
        [
            [ToolUse("approved-call", "lookup_account", {"customer_id": "customer_1"})],
            [ToolUse("resumed-call", "lookup_account", {"customer_id": "customer_2"})],
            "both looked up",
            [ToolUse("next-run", "lookup_account", {"customer_id": "customer_3"})],
        ]
    )
    agent = Agent(model, tools=[lookup_account])
    (question,) = agent("look up 1 and 2").interrupts
    done = agent.resume({question.id: {"approve": True, "remember": "run"}}, by="ana")
    assert done.stop_reason == "end_turn" and str(done) == "both looked up"
    assert looked_up == ["customer_1", "customer_2"]
    assert [(t, a, by) for t, a, by in approval_entries(agent)] == [
        ("lookup_account", {"approve": True, "remember": "run"}, "ana"),
        ("lookup_account", {"approve": True, "remembered": "run"}, "decision:run"),
    ]

    (again,) = agent("look up 3").interrupts  # the run's decision ended with the run
    assert_approval(again, "next-run", "lookup_account", {"customer_id": "customer_3"})
    assert looked_up == ["customer_1", "customer_2"] and agent.decisions == {}


def test_openai_resuming_skips_approvals_for_non_hitl_tools() -> None:
    """OpenAI Agents SDK, tests/test_hitl_error_scenarios.py::
    test_resuming_skips_approvals_for_non_hitl_tools.

    A reply calls a tool that needs approval and one that does not; resuming with the first
    approved (``always_approve=True``) asks nothing more, and the tool without approval ran
    exactly once in all (in Interlude it already ran before the pause, and is not run again).
    """
    runs: list[str] = []

    @tool
    def shell(command: str) -> str:
        """Run a command."""
        runs.append(command)
        return "shell_output"

    @tool(needs_approval=True)
    def needs_hitl() -> str:
        """Needs a person."""
        runs.append("needs_hitl")
        return "approved"

    batch = [
        ToolUse("call-func-auto", "needs_hitl", {}),
        ToolUse("shell", "shell", {"command": "echo"}),
    ]
    model = ScriptedModel([batch, "done"])
    agent = Agent(model, tools=[shell, needs_hitl])
    first = agent("resume approvals")
    (question,) = first.interrupts
    assert runs == ["echo"]
    resumed = agent.resume({question.id: {"approve": True, "remember": "run"}})
    assert resumed.interrupts == [] and str(resumed) == "done"
    assert runs == ["echo", "needs_hitl"]
    assert [i for i, _, _ in results(agent.messages[2])] == ["call-func-auto", "shell"]


def test_openai_serializes_and_restores_sticky_decisions() -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::test_serializes_and_restores_approvals.

    ``tool1`` always approved and ``tool2`` always rejected survive ``RunState.to_string`` /
    ``from_string``. Interlude: the run's remembered decisions are kept with its pause; exported
    to JSON and imported into a new agent, they still settle later calls of both tools without
    asking (``tool1`` runs, ``tool2`` is declined with no note).
    """
    ran: list[str] = []

    def make(name: str) -> Any:
        @tool(name=name, needs_approval=True)
        def body(n: int) -> str:
            """A tool."""
            ran.append(f"{name}:{n}")
            return "ok"

        return body

    turns: list[Any] = [
        [
            ToolUse("cid1", "tool1", {"n": 1}),
            ToolUse("cid2", "tool2", {"n": 1}),
            ToolUse("cid3", "tool3", {"n": 1}),
        ],
        [ToolUse("cid4", "tool1", {"n": 2}), ToolUse("cid5", "tool2", {"n": 2})],
        "end",
    ]
    tools = [make("tool1"), make("tool2"), make("tool3")]
    agent = Agent(ScriptedModel(turns), tools=tools)
    ids = by_call(agent("go").interrupts)
    again = agent.resume(
        {
            ids["cid1"]: {"approve": True, "remember": "run"},
            ids["cid2"]: {"approve": False, "remember": "run"},
        }
    )
    assert [q.id for q in again.interrupts] == [ids["cid3"]]
    assert ran == ["tool1:1"]
    expected = {
        "tool1": {"approve": True, "scope": "run"},
        "tool2": {"approve": False, "scope": "run"},
    }
    assert agent.decisions == expected

    restored = Agent(ScriptedModel(turns[1:]), tools=tools)
    restored.import_state(json.loads(json.dumps(agent.export_state())))
    assert restored.decisions == expected
    done = restored.resume({ids["cid3"]: True})
    assert done.stop_reason == "end_turn" and done.interrupts == []
    assert ran == ["tool1:1", "tool3:1", "tool1:2"]
    assert results(restored.messages[4]) == [
        ("cid4", "success", "ok"),
        ("cid5", "error", "not approved: a decision remembered for this run declines this tool"),
    ]


@pytest.mark.parametrize("sticky_approved", [True, False], ids=["approve", "reject"])
@pytest.mark.parametrize(
    "other_first",
    [False, True],
    ids=["other-after", "other-before"],
)
def test_openai_exact_call_decision_with_sticky_default(
    sticky_approved: bool, other_first: bool
) -> None:
    """OpenAI Agents SDK, tests/test_run_state.py::
    test_exact_call_override_round_trips_with_sticky_default.

    One call of ``tool1`` gets a sticky decision, another ("exception") the opposite decision for
    that call only; a third call ("other") follows the sticky one. Interlude: three calls of one
    batch, the person answers "sticky" with ``remember: "run"`` and "exception" explicitly and
    leaves "other" unanswered; the explicit answer wins for its call and "other" is settled by
    the remembered decision, without being asked again, wherever it stands in the batch.
    """
    ran: list[str] = []

    @tool(needs_approval=True)
    def tool1(n: str) -> str:
        """A tool."""
        ran.append(n)
        return n

    order = ["sticky", "exception", "other"]
    if other_first:
        order = ["other", "sticky", "exception"]
    model = ScriptedModel([[ToolUse(i, "tool1", {"n": i}) for i in order], "end"])
    agent = Agent(model, tools=[tool1])
    ids = by_call(agent("go").interrupts)
    done = agent.resume(
        {
            ids["sticky"]: {"approve": sticky_approved, "remember": "run"},
            ids["exception"]: not sticky_approved,
        }
    )
    assert done.interrupts == [] and done.stop_reason == "end_turn"
    expected = {"sticky", "other"} if sticky_approved else {"exception"}
    assert set(ran) == expected and len(ran) == len(expected)
    statuses = {i: s for i, s, _ in results(agent.messages[2])}
    assert statuses["other"] == ("success" if sticky_approved else "error")
    assert statuses["exception"] == ("error" if sticky_approved else "success")


def test_openai_callable_needs_approval_receives_parsed_arguments() -> None:
    """OpenAI Agents SDK, tests/test_hitl_error_scenarios.py::
    test_callable_function_approval_receives_valid_object_arguments.

    A ``needs_approval`` function gets the call's arguments as an object
    (``{"subject": "status update"}``); when it says no approval is needed, the tool runs at
    once, with exactly those arguments, and the run ends "done".
    """
    rule_inputs: list[dict[str, Any]] = []
    tool_inputs: list[str] = []

    def needs_approval(tool_input: dict[str, Any]) -> bool:
        rule_inputs.append(tool_input)
        return False

    @tool(needs_approval=needs_approval)
    def send_email(subject: str) -> str:
        """Send an email."""
        tool_inputs.append(subject)
        return "sent"

    model = ScriptedModel(
        [[ToolUse("call-valid", "send_email", {"subject": "status update"})], "done"]
    )
    agent = Agent(model, tools=[send_email])
    result = agent("send an email")
    assert str(result) == "done" and result.interrupts == []
    assert rule_inputs and all(i == {"subject": "status update"} for i in rule_inputs)
    assert tool_inputs == ["status update"]
    assert agent.audit == []


@pytest.mark.parametrize(
    "arguments",
    [
        "",
        '{"subject": "refund"',
        "null",
        "[]",
        '{"subject": 5}',
        '{"subject": "s", "amount": NaN}',
        '{"subject": "s", "amount": Infinity}',
        '{"subject": "s", "amount": -Infinity}',
    ],
)
@pytest.mark.parametrize("flag", ["callable", "always"])
def test_openai_callable_approval_invalid_arguments(arguments: str, flag: str) -> None:
    """OpenAI Agents SDK, tests/test_hitl_error_scenarios.py::
    test_callable_function_approval_fails_closed_for_invalid_arguments (same argument texts).

    Arguments that cannot be inspected (not JSON, not an object, cut off, NaN / Infinity) must
    not reach the approval function nor the tool. By design Interlude settles such a call
    before anyone is asked: the model gets the validation error and nobody is asked (the peer
    fails closed the other way: it asks a person, without calling the function). Also with
    ``needs_approval=True``.
    """
    rule_inputs: list[dict[str, Any]] = []
    tool_inputs: list[Any] = []

    def rule(tool_input: dict[str, Any]) -> bool:
        rule_inputs.append(tool_input)
        return False

    @tool(needs_approval=rule if flag == "callable" else True)
    def send_email(subject: str, amount: float = 0.0) -> str:
        """Send an email."""
        tool_inputs.append((subject, amount))
        return "sent"

    agent = Agent(RawArguments("send_email", arguments), tools=[send_email])
    result = agent("send an email")
    assert result.stop_reason == "end_turn" and result.interrupts == []
    assert rule_inputs == [] and tool_inputs == []
    ((tool_use_id, status, _),) = results(agent.messages[2])
    assert (tool_use_id, status) == ("call-invalid", "error")


def test_openai_needs_approval_invalid_type_raises() -> None:
    """OpenAI Agents SDK, tests/test_hitl_error_scenarios.py::
    test_function_needs_approval_invalid_type_raises.

    ``needs_approval`` must be a bool or a function; ``"always"`` is refused with an error that
    names the option. By design Interlude refuses it when the tool is defined
    (ConfigurationError), not when the run first calls the tool (the peer's UserError).
    """

    def bad_tool() -> str:
        """Bad."""
        return "ok"

    with pytest.raises(ConfigurationError, match="needs_approval"):
        tool(needs_approval="always")(bad_tool)  # type: ignore[call-overload]


def _scenario_tools(counts: dict[str, int]) -> list[Any]:
    @tool(name="approved_echo", needs_approval=True)
    def approval_echo(query: str) -> str:
        """Echo the query after approval."""
        counts["approved_echo"] = counts.get("approved_echo", 0) + 1
        return f"approved:{query}"

    @tool(name="approved_note", needs_approval=True)
    def approval_note(query: str) -> str:
        """Record the query after approval."""
        counts["approved_note"] = counts.get("approved_note", 0) + 1
        return f"approved_note:{query}"

    return [approval_echo, approval_note]


def _scenario_model(tool_for: Callable[[str], str]) -> FunctionModel:
    """Calls the tool ``tool_for(user text)`` picks with the user's text; after the tool's
    result, answers with that result's text."""

    def reply(request: ModelRequest) -> Any:
        last = request.messages[-1]
        done = results(last)
        if done:
            return done[0][2]
        n = sum(1 for m in request.messages if m.role == "assistant")
        return [ToolUse(f"call_{n}", tool_for(last.text), {"query": last.text})]

    return FunctionModel(reply)


USER_MESSAGES = [
    "Fetch profile for customer 104.",
    "Update note for customer 104.",
    "Delete note for customer 104.",
]


def _tool_for(text: str) -> str:
    return "approved_note" if text.startswith("Update") else "approved_echo"


def test_openai_memory_session_hitl_scenario() -> None:
    """OpenAI Agents SDK, tests/test_hitl_session_scenario.py::test_memory_session_hitl_scenario.

    Three turns on one session, the second and third on an agent rehydrated from the store:
    approve ``approved_echo``, approve ``approved_note``, reject ``approved_echo``. Each approved
    tool runs exactly once, every turn's output is the tool's (or the rejection's) text, and the
    rehydrated agent sees the whole history.
    """
    store = MemoryStore()
    counts: dict[str, int] = {}
    tools = _scenario_tools(counts)

    def open_agent() -> Agent:
        return Agent(_scenario_model(_tool_for), tools=tools, session=store, session_id="memory")

    first = open_agent()
    (q1,) = first(USER_MESSAGES[0]).interrupts
    assert_approval(q1, "call_0", "approved_echo", {"query": USER_MESSAGES[0]})
    assert str(first.resume({q1.id: True})) == f"approved:{USER_MESSAGES[0]}"
    assert counts == {"approved_echo": 1}

    rehydrated = open_agent()
    assert len(rehydrated.messages) == 4
    (q2,) = rehydrated(USER_MESSAGES[1]).interrupts
    assert_approval(q2, "call_2", "approved_note", {"query": USER_MESSAGES[1]})
    assert str(rehydrated.resume({q2.id: True})) == f"approved_note:{USER_MESSAGES[1]}"

    (q3,) = rehydrated(USER_MESSAGES[2]).interrupts
    assert str(rehydrated.resume({q3.id: False})).startswith("not approved")
    assert counts == {"approved_echo": 1, "approved_note": 1}
    assert len(open_agent().messages) == 12


def test_session_decisions_persist_and_are_revoked() -> None:
    """No peer test: the closest is OpenAI's tests/test_hitl_session_scenario.py::
    test_memory_session_hitl_scenario (above), whose approvals are per call; the peers' sticky
    decisions (OpenAI ``always_approve`` / ``always_reject``) live in one run's state and
    neither peer can revoke one. Interlude's ``"remember": "session"`` outlives the run: a later
    turn, on an agent rehydrated from the store, runs the tool without asking (audited as
    ``decision:session``); ``forget_decisions(tool, by=...)`` revokes it (audited), and the next
    call asks again.
    """
    store = MemoryStore()
    counts: dict[str, int] = {}
    tools = _scenario_tools(counts)

    def open_agent() -> Agent:
        return Agent(_scenario_model(_tool_for), tools=tools, session=store, session_id="memory")

    first = open_agent()
    (q1,) = first(USER_MESSAGES[0]).interrupts
    first.resume({q1.id: {"approve": True, "remember": "session"}}, by="ana")
    assert first.decisions == {"approved_echo": {"approve": True, "scope": "session"}}

    second = open_agent()
    assert second.decisions == {"approved_echo": {"approve": True, "scope": "session"}}
    result = second(USER_MESSAGES[2])
    assert result.interrupts == [] and str(result) == f"approved:{USER_MESSAGES[2]}"
    assert counts == {"approved_echo": 2}
    (q2,) = second(USER_MESSAGES[1]).interrupts  # another tool: still asked
    assert_approval(q2, "call_4", "approved_note", {"query": USER_MESSAGES[1]})
    second.resume({q2.id: False})

    second.forget_decisions("approved_echo", by="ana")
    assert second.decisions == {}
    third = open_agent()
    assert third.decisions == {}
    (q3,) = third(USER_MESSAGES[0]).interrupts
    assert_approval(q3, "call_6", "approved_echo", {"query": USER_MESSAGES[0]})
    assert counts == {"approved_echo": 2}
    assert [(e.name, e.by) for e in third.audit] == [
        ("approval", "ana"),
        ("approval", "decision:session"),
        ("approval", "unknown"),
        ("forget_decisions", "ana"),
    ]
