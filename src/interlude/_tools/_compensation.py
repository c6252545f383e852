"""Compensations: what undoes one successful call of a tool (``@tool(compensate=fn)``).

A compensation is a tool like any other, so it runs through the same path as a call the model
asked for (journaled, in doubt after a crash, behind an approval if its tool needs one): a
function ``fn(input, result)`` is wrapped as :class:`Compensation`; another tool is used as it
is. Either is called with ``{"input": <the call's input>, "result": <what it returned>}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._frozen import thaw
from ..errors import ConfigurationError
from ._spec import AgentTool, ToolSpec

if TYPE_CHECKING:
    from .._messages import ToolResult, ToolUse
    from ._context import ToolContext

__all__ = ["Compensation", "compensation_of", "compensation_tool"]

SUFFIX = ".undo"
"""A function compensation's tool name: the tool's own, then this."""

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "object"}, "result": {}},
    "required": ["input", "result"],
}


class Compensation:
    """The compensation of tool ``of``, made from ``fn(input, result)`` (sync or async).

    ``input`` is the undone call's input (as it ran: with a person's edit, if they made one),
    ``result`` what it returned (its JSON value, or its text). A parameter annotated
    ``ToolContext`` receives the context, as in a ``@tool`` function. What ``fn`` returns is
    the compensation's result; an exception is its error."""

    idempotent = False
    needs_approval = False

    def __init__(self, fn: Callable[..., Any], of: str) -> None:
        import inspect

        from ._function import _hints

        self.fn = fn
        self._name = f"{of}{SUFFIX}"
        self._is_async = inspect.iscoroutinefunction(fn)
        self._context_param: str | None = None
        params = list(inspect.signature(fn).parameters.values())
        hints = _hints(fn)
        plain = []
        for p in params:
            ann = hints.get(p.name, p.annotation)
            if ann is not p.empty and getattr(ann, "__name__", str(ann)).endswith("ToolContext"):
                self._context_param = p.name
            else:
                plain.append(p)
        if len(plain) != 2 or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in plain
        ):
            raise ConfigurationError(
                f"tool {of!r}: compensate= takes a function of (input, result), or a tool; "
                f"{getattr(fn, '__name__', fn)!r} has parameters "
                f"{[p.name for p in params]}"
            )

    def __repr__(self) -> str:
        return f"Compensation({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> ToolSpec:
        doc = (self.fn.__doc__ or "").strip().split("\n")[0]
        return ToolSpec(
            self._name, doc or f"undoes a call of {self._name[: -len(SUFFIX)]}", _SCHEMA
        )

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        from ._function import to_tool_result

        given = tool_use.input
        args = (thaw(given.get("input")), thaw(given.get("result")))
        kwargs = {} if self._context_param is None else {self._context_param: context}
        if self._is_async:
            value = await self.fn(*args, **kwargs)
        else:
            import asyncio

            value = await asyncio.to_thread(self.fn, *args, **kwargs)
        return to_tool_result(tool_use.id, value)


def compensation_tool(of: str, compensate: object) -> AgentTool | None:
    """What ``compensate=`` gives for tool ``of``: the tool itself, a function wrapped as a
    :class:`Compensation`, or None; ConfigurationError for anything else."""
    if compensate is None:
        return None
    if isinstance(compensate, AgentTool):
        return compensate
    if callable(compensate):
        return Compensation(compensate, of)
    raise ConfigurationError(
        f"tool {of!r}: compensate= takes a function of (input, result) or a tool, got "
        f"{compensate!r}"
    )


def compensation_of(tool: object) -> AgentTool | None:
    """The tool that undoes a call of ``tool`` (its ``compensate`` attribute), or None."""
    found = getattr(tool, "compensate", None)
    return found if isinstance(found, AgentTool) else None
