"""Approval from annotations: a hook that asks a person before the MCP tools a rule picks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from ..errors import ConfigurationError
from ..hooks import BeforeInvocationEvent, BeforeToolCallEvent, HookRegistry
from ._tool import McpTool, ToolAnnotations

__all__ = ["RequireApproval", "require_approval"]


def _destructive(annotations: ToolAnnotations) -> bool:
    return annotations.destructive


Rule = Callable[[ToolAnnotations], bool] | Literal["always", "never"] | Iterable[str]
"""Which MCP tools need approval: a function of a tool's annotations, ``"always"``,
``"never"``, or the names of the tools (as the server names them)."""


def _always(annotations: ToolAnnotations) -> bool:
    return True


def _never(annotations: ToolAnnotations) -> bool:
    return False


class RequireApproval:
    """A hook provider: before an MCP tool that ``when`` picks, the run pauses with an
    interrupt named ``name``; the answer ``True`` (or ``{"approve": true, ...}``) runs the
    call, anything else cancels it (the model sees ``"not approved"``, with the answer's
    ``note`` if it has one). Other tools are left alone.

    A string other than ``"always"`` and ``"never"`` is refused (a misspelt keyword must not
    gate nothing); tool names go in a list. A tool name that none of the agent's MCP tools has
    is refused when the agent starts a run, before anything runs (see :meth:`check_names`)."""

    def __init__(self, when: Rule = _destructive, *, name: str = "approve") -> None:
        self.names: frozenset[str] | None = None
        """The tools picked by name (server's names), or None: picked by ``when``."""
        if isinstance(when, str) and when not in ("always", "never"):
            raise ConfigurationError(
                f"require_approval got the string {when!r}: a rule is 'always', 'never', a "
                f"function of a tool's annotations or a list of tool names (such as [{when!r}])"
            )
        if when == "always":
            when = _always
        elif when == "never":
            when = _never
        elif not callable(when):
            names = _names(when)
            if names is None or not all(isinstance(n, str) and n for n in names):
                raise ConfigurationError(
                    f"require_approval takes a function of a tool's annotations, 'always', "
                    f"'never' or a list of tool names, got {when!r}"
                )
            self.names = frozenset(str(n) for n in names)
            when = _never
        self.when: Callable[[ToolAnnotations], bool] = when
        self.name = name

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeInvocationEvent, self.check_names)
        registry.add_callback(BeforeToolCallEvent, self.check)

    def check_names(self, event: BeforeInvocationEvent) -> None:
        """Refuse to start a run when a named tool is none of the agent's MCP tools: a rule
        that names a tool no server lists (a typo, a renamed tool) would never ask."""
        if self.names is None:
            return
        tools = event.agent.tools.values()
        listed = sorted({t.remote_name for t in tools if isinstance(t, McpTool)})
        unknown = sorted(self.names.difference(listed))
        if unknown:
            raise ConfigurationError(
                f"require_approval names {', '.join(map(repr, unknown))}, which no MCP server "
                f"of this agent lists, so it would never ask; the agent's MCP tools are "
                f"{listed!r}"
            )

    def check(self, event: BeforeToolCallEvent) -> None:
        tool = event.tool
        if not isinstance(tool, McpTool):
            return
        if self.names is not None:
            if tool.remote_name not in self.names:
                return
        elif not self.when(tool.annotations):
            return
        reason = {
            "server": tool.server.name,
            "tool": tool.remote_name,
            "question": f"May the agent run {tool.remote_name} on {tool.server.name}?",
        }
        answer = event.interrupt(self.name, reason)
        if answer is True or (isinstance(answer, dict) and answer.get("approve") is True):
            return
        note = answer.get("note") if isinstance(answer, dict) else None
        event.cancel("not approved" + (f" (note: {note})" if isinstance(note, str) else ""))


def _names(value: object) -> list[object] | None:
    """The items of an iterable of tool names, or None if ``value`` is not one."""
    if isinstance(value, Iterable) and not isinstance(value, bytes | dict):
        return list(value)
    return None


def require_approval(when: Rule = _destructive, *, name: str = "approve") -> RequireApproval:
    """Ask a person before running an MCP tool that ``when`` picks: by default the destructive
    ones; ``hooks=[require_approval(lambda a: not a.read_only)]``, ``require_approval(
    ["delete_file", "move_file"])`` (by the server's tool names, each of which an MCP tool of
    the agent must have), ``"always"`` or ``"never"``; any other string is refused."""
    return RequireApproval(when, name=name)
