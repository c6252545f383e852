"""An approval policy over the tools of the official reference server (server-everything): a
rule may name the server as the tools' source, and a tool no rule names gets the default."""

from __future__ import annotations

from collections.abc import Callable

from interlude import Agent, ToolResult, ToolUse
from interlude.mcp import McpServer
from interlude.policy import Policy, PolicyCall, Rule
from interlude.testing import ScriptedModel


def test_rules_see_the_server_and_unnamed_tools_get_the_default(
    everything: Callable[..., McpServer],
) -> None:
    seen: list[str] = []

    def note(call: PolicyCall) -> bool:
        seen.append(call.source)
        return False

    policy = Policy(
        [
            Rule(tool="*", when=note, then="deny"),
            Rule(tool="echo", when="source == 'mcp:everything'", then="allow"),
            Rule(tool="trigger-*", when="input.duration > 5", then="deny"),
        ],
        default="ask",
        version="mcp-1",
    )
    long_run = ToolUse("e3", "trigger-long-running-operation", {"duration": 0.2, "steps": 1})
    agent = Agent(
        ScriptedModel([[ToolUse("e1", "echo", {"message": "hi"}), long_run], "Done."]),
        tools=everything().tools(),
        policy=policy,
    )
    paused = agent("go")
    assert seen == ["mcp:everything", "mcp:everything"]
    [question] = paused.interrupts  # no rule decides it: the default asks
    assert question.tool_use is not None and question.tool_use.name == long_run.name
    assert question.reason["policy"]["rule"] is None  # type: ignore[index]
    done = agent.resume({question.id: False})
    assert str(done) == "Done."
    results = {
        b.tool_use_id: b for m in agent.messages for b in m.content if isinstance(b, ToolResult)
    }
    assert results["e1"].status == "success" and "hi" in str(results["e1"].content)  # ran
    assert results["e3"].status == "error"  # declined by the person
    calls = [e.answer.get("call") for e in agent.audit if e.name == "policy"]  # type: ignore[union-attr]
    assert [c["source"] for c in calls] == ["mcp:everything", "mcp:everything"]  # type: ignore[index]
