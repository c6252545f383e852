"""The user's app: an agent built by name (tools, hooks, model). Imported by worker and workflow."""
from __future__ import annotations

import os

from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent, HookRegistry
from interlude.testing import FunctionModel
from interlude.testing._models import ModelRequest

LOG = os.environ.get("PROTO_LOG", "/tmp/temporal/proto/tool_calls.log")


@tool
async def delete_file(path: str) -> str:
    """Delete a file (simulated).

    Args:
        path: The file to delete.
    """
    import asyncio, time as _t
    from temporalio import activity
    slow = float(os.environ.get("PROTO_TOOL_SECONDS", "0"))
    end = _t.monotonic() + slow
    while _t.monotonic() < end:  # a long tool heartbeats
        activity.heartbeat("working")
        await asyncio.sleep(0.2)
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} delete_file {path}\n")
    return f"deleted {path}"


def reply(req: ModelRequest):
    last = req.messages[-1]
    if last.role == "user" and any(getattr(b, "tool_use_id", None) for b in last.content):
        return "Done."
    return [ToolUse("call_1", "delete_file", {"path": "/tmp/a.log"}),
            ToolUse("call_2", "delete_file", {"path": "/tmp/b.log"})]


class Approve:
    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeToolCallEvent, self.before)

    def before(self, event: BeforeToolCallEvent) -> None:
        deadline = float(os.environ.get("PROTO_DEADLINE", "0")) or None
        kw = {"expires_in": deadline, "default": False} if deadline else {}
        if event.interrupt("approve", reason={"path": event.tool_use.input["path"]}, **kw) is not True:
            event.cancel("the user did not approve")


def build(name: str) -> Agent:
    assert name == "ops"
    return Agent(FunctionModel(reply), tools=[delete_file], hooks=[Approve()], name="ops")
