"""An agent's settings, checked: ConfigurationError names the first that is wrong."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._tools._function import FunctionTool
from .._tools._spec import AgentTool
from ..errors import ConfigurationError

__all__ = ["check_more", "check_settings", "tools_by_name"]


def check_settings(
    model: object, tool_executor: object, max_cycles: object, max_retries: object, output: object
) -> None:
    """ConfigurationError naming the first setting that is wrong."""
    if not callable(getattr(model, "stream", None)):
        raise ConfigurationError(f"model has no stream() method: {model!r}")
    if tool_executor not in ("concurrent", "sequential"):
        raise ConfigurationError(
            f"tool_executor must be 'concurrent' or 'sequential', got {tool_executor!r}"
        )
    for what, value in (
        ("max_cycles", max_cycles),
        ("max_retries", max_retries),
        ("output_retries", output),
    ):
        if not isinstance(value, int) or value < 0:
            raise ConfigurationError(f"{what} must be a non-negative integer, got {value!r}")


def check_more(
    in_doubt: object, lease: object, name: object, clock: object, conversation: object
) -> None:
    """ConfigurationError naming the first setting that is wrong (the rest of them)."""
    if in_doubt not in ("ask", "rerun"):
        raise ConfigurationError(f"in_doubt must be 'ask' or 'rerun', got {in_doubt!r}")
    if not isinstance(lease, int | float) or not 0 < lease < float("inf"):
        raise ConfigurationError(
            f"session_lease must be a positive number of seconds, got {lease!r}"
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
    if clock is not None and not callable(clock):
        raise ConfigurationError(f"clock must be a function returning epoch seconds: {clock!r}")
    if conversation is not None and not (
        callable(getattr(conversation, "view", None))
        and callable(getattr(conversation, "reduce", None))
    ):
        raise ConfigurationError(
            f"conversation must be a conversation manager (SlidingWindow, Summarizing, ...) "
            f"with view() and reduce(), got {conversation!r}"
        )


def tools_by_name(tools: Iterable[AgentTool | Any]) -> dict[str, AgentTool]:
    by_name: dict[str, AgentTool] = {}
    for item in tools:
        # FunctionTool first: a runtime-protocol isinstance costs tens of microseconds.
        t = item if isinstance(item, FunctionTool | AgentTool) else _as_tool(item)
        if t.name in by_name:
            raise ConfigurationError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    return by_name


def _as_tool(obj: Any) -> AgentTool:
    if callable(obj) and hasattr(obj, "__name__"):
        return FunctionTool(obj)
    raise ConfigurationError(f"not a tool: {obj!r} (decorate a function with @tool)")
