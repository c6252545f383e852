"""Tools: the @tool decorator, the tool protocol and the context a tool receives.

The names below are this package's face: the loop, the models, hooks, MCP, multi-agent and the
integrations import them from here, never from its modules. The helpers that agents, graphs
and remote agents share to be called as a tool (``task_*``) load on first use (``import
interlude`` stays light).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._context import RelaySignal, ToolContext, idempotency_key
from ._function import FunctionTool, to_tool_result, tool
from ._spec import AgentTool, ToolSpec

if TYPE_CHECKING:
    from ._compensation import Compensation, compensation_of
    from ._task import task_prompt, task_tool_name, task_tool_spec

__all__ = [
    "AgentTool",
    "Compensation",
    "FunctionTool",
    "RelaySignal",
    "ToolContext",
    "ToolSpec",
    "compensation_of",
    "idempotency_key",
    "task_prompt",
    "task_tool_name",
    "task_tool_spec",
    "to_tool_result",
    "tool",
]

_LAZY = {
    "Compensation": "._compensation",
    "compensation_of": "._compensation",
    "task_prompt": "._task",
    "task_tool_name": "._task",
    "task_tool_spec": "._task",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # looked up once: later imports find it without this hook
    return value
