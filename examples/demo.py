"""Interlude demo: ask a person before a risky tool runs, pause, save, resume in a fresh agent.

Runs offline: ScriptedModel plays the model's part and the "deletion" is simulated.
"""

from __future__ import annotations

import json

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent, HookRegistry
from interlude.testing import ScriptedModel

DELETED: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file (simulated: nothing is removed).

    Args:
        path: The file to delete.
    """
    DELETED.append(path)
    return f"deleted {path}"


class ApproveRiskyTools:
    """Pause before delete_file runs, and run it only if a person answers True."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeToolCallEvent, self.before_tool)

    def before_tool(self, event: BeforeToolCallEvent) -> None:
        if event.tool_use.name != "delete_file":
            return
        if event.interrupt("approve", reason="delete a file?") is not True:
            event.cancel("the user did not approve")


def new_agent(model: ScriptedModel) -> Agent:
    return Agent(model, tools=[delete_file], hooks=[ApproveRiskyTools()])


# Process 1: the model asks to delete a file; the hook pauses the run.
model = ScriptedModel([[ToolUse("call-1", "delete_file", {"path": "/tmp/old.log"})]])
agent = new_agent(model)
result = agent("Clean up /tmp/old.log")
print("stop reason:", result.stop_reason)
question = result.interrupts[0]
assert question.tool_use is not None
print("interrupt id:", question.id)
print("interrupt name:", question.name)
print("tool input:", json.dumps(question.tool_use.input))
print("deleted so far:", DELETED)

saved = json.dumps(agent.export_state())
print(f"saved state: {len(saved)} bytes of JSON")

# Process 2: a fresh agent loads the state and resumes with the person's answer.
agent2 = new_agent(ScriptedModel(["Done: /tmp/old.log is gone."]))
agent2.import_state(json.loads(saved))
final = agent2.resume({question.id: True})
print("stop reason:", final.stop_reason)
print("final reply:", final)
tool_result = agent2.messages[-2].content[0]
assert isinstance(tool_result, ToolResult)
print("tool result:", tool_result.status, "-", tool_result.text)
print("deleted:", DELETED)
