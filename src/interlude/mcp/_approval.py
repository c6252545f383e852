"""Approval from annotations: a hook that asks a person before the MCP tools a rule picks."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigurationError
from ..hooks import BeforeToolCallEvent, HookRegistry
from ._tool import McpTool, ToolAnnotations

__all__ = ["RequireApproval", "require_approval"]


def _destructive(annotations: ToolAnnotations) -> bool:
    return annotations.destructive


class RequireApproval:
    """A hook provider: before an MCP tool whose annotations ``when`` picks, the run pauses
    with an interrupt named ``name``; the answer ``True`` runs the call, anything else cancels
    it (the model sees ``"not approved"``). Other tools are left alone."""

    def __init__(
        self, when: Callable[[ToolAnnotations], bool] = _destructive, *, name: str = "approve"
    ) -> None:
        if not callable(when):  # such as "never": refused now, not at the first call
            raise ConfigurationError(
                f"require_approval takes a function of a tool's annotations, got {when!r}: "
                "ask before every tool with lambda a: True; to ask before none, leave the "
                "hook out"
            )
        self.when = when
        self.name = name

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeToolCallEvent, self.check)

    def check(self, event: BeforeToolCallEvent) -> None:
        tool = event.tool
        if not isinstance(tool, McpTool) or not self.when(tool.annotations):
            return
        reason = {
            "server": tool.server.name,
            "tool": tool.remote_name,
            "question": f"May the agent run {tool.remote_name} on {tool.server.name}?",
        }
        if event.interrupt(self.name, reason) is not True:
            event.cancel("not approved")


def require_approval(
    when: Callable[[ToolAnnotations], bool] = _destructive, *, name: str = "approve"
) -> RequireApproval:
    """Ask a person before running an MCP tool whose annotations ``when`` picks (by default
    the destructive ones): ``hooks=[require_approval(lambda a: not a.read_only)]``."""
    return RequireApproval(when, name=name)
