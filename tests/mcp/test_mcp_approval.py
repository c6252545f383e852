"""Approval from annotations: require_approval pauses before the MCP tools a rule picks."""

from __future__ import annotations

import pytest

from interlude import Agent, ToolUse, tool
from interlude.mcp import McpServer, require_approval
from interlude.testing import ScriptedModel

from .servers import ServerLog

CALLS = [
    ToolUse("t1", "read_note", {"name": "a"}),  # read-only
    ToolUse("t2", "delete_note", {"name": "b"}),  # destructive
    ToolUse("t3", "append_note", {"name": "c", "text": "eggs"}),  # writes, not destructive
    ToolUse("t4", "local_echo", {"text": "hi"}),  # not an MCP tool
]


@tool
def local_echo(text: str) -> str:
    """Echo.

    Args:
        text: What to echo.
    """
    return text


def make_agent(server: McpServer, *hooks: object) -> Agent:
    model = ScriptedModel([CALLS, "All done."])
    return Agent(model, tools=[*server.tools(), local_echo], hooks=hooks)  # type: ignore[arg-type]


def test_destructive_tools_wait_for_a_person(notes: McpServer, notes_log: ServerLog) -> None:
    agent = make_agent(notes, require_approval(lambda annotations: annotations.destructive))
    paused = agent("Tidy my notes")
    [question] = paused.interrupts
    assert question.name == "approve" and question.source == "before_tool_call"
    assert question.tool_use == CALLS[1]
    assert question.reason == {
        "server": "notes",
        "tool": "delete_note",
        "question": "May the agent run delete_note on notes?",
    }
    assert notes_log.lines() == ["read a", "append c eggs"]  # the others ran

    assert str(agent.resume({question.id: True})) == "All done."
    assert notes_log.lines() == ["read a", "append c eggs", "delete b"]  # once, after the yes
    texts = [r.text for r in agent.messages[2].content]
    assert texts == ["note a: buy milk", "deleted b", "appended to c", "hi"]


def test_declined_call_never_reaches_the_server(notes: McpServer, notes_log: ServerLog):
    agent = make_agent(notes, require_approval())  # default rule: destructive tools
    [question] = agent("Tidy my notes").interrupts
    agent.resume({question.id: False})
    declined = agent.messages[2].content[1]
    assert (declined.status, declined.text) == ("error", "not approved")
    assert "delete b" not in notes_log.lines()


def test_any_rule_over_the_annotations(notes: McpServer, notes_log: ServerLog) -> None:
    agent = make_agent(notes, require_approval(lambda a: not a.read_only, name="write_ok"))
    paused = agent("Tidy my notes")
    assert [(q.name, q.tool_use.name) for q in paused.interrupts] == [
        ("write_ok", "delete_note"),
        ("write_ok", "append_note"),
    ]
    assert notes_log.lines() == ["read a"]
    agent.resume({q.id: True for q in paused.interrupts})
    assert sorted(notes_log.lines()) == ["append c eggs", "delete b", "read a"]


def test_rules_by_tool_name_always_and_never(notes: McpServer, notes_log: ServerLog) -> None:
    agent = make_agent(notes, require_approval(["append_note", "read_note"]))
    paused = agent("Tidy my notes")
    assert sorted(q.tool_use.name for q in paused.interrupts) == ["append_note", "read_note"]
    assert notes_log.lines() == ["delete b"]  # not named: ran without a question
    agent.resume({q.id: {"approve": q.tool_use.name == "read_note"} for q in paused.interrupts})
    assert sorted(notes_log.lines()) == ["delete b", "read a"]
    texts = [(r.status, r.text) for r in agent.messages[2].content]
    assert texts[2] == ("error", "not approved")

    agent = make_agent(notes, require_approval("always"))
    assert len(agent("Tidy my notes").interrupts) == 3  # every MCP tool, not local_echo

    agent = make_agent(notes, require_approval("never"))
    result = agent("Tidy my notes")
    assert result.stop_reason == "end_turn" and not result.interrupts


def test_a_rule_that_is_not_a_rule_is_refused_at_once() -> None:
    from interlude.errors import ConfigurationError

    for bad in (True, 3, [1], [""], b"x"):
        with pytest.raises(ConfigurationError, match="'always', 'never' or a list"):
            require_approval(bad)  # type: ignore[arg-type]


def test_a_misspelt_keyword_is_refused() -> None:
    """Before, "alwyas" was taken as the name of a tool, so no MCP tool was gated."""
    from interlude.errors import ConfigurationError

    for typo in ("alwyas", "Always", "delete_note", ""):
        with pytest.raises(ConfigurationError) as refused:
            require_approval(typo)  # type: ignore[arg-type]
        message = str(refused.value)
        assert f"got the string {typo!r}" in message
        assert "'always', 'never', a function of a tool's annotations or a list" in message


def test_a_tool_name_no_server_lists_is_refused_before_anything_runs(
    notes: McpServer, notes_log: ServerLog
) -> None:
    """A rule naming a tool the agent's MCP servers do not list would never ask (before: the
    run went ahead, and delete_note ran without a question)."""
    from interlude.errors import ConfigurationError

    agent = make_agent(notes, require_approval(["delete_notes", "read_note"]))
    with pytest.raises(ConfigurationError) as refused:
        agent("Tidy my notes")
    message = str(refused.value)
    assert message.startswith(
        "require_approval names 'delete_notes', which no MCP server of this agent lists, so it "
        "would never ask; the agent's MCP tools are ['add', 'append_note', "
    )
    assert "'delete_note'" in message and "'local_echo'" not in message
    assert notes_log.lines() == []  # nothing ran
    assert not agent.is_paused and agent.messages == []
