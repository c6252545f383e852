"""``@tool``: a tool from a plain function, its spec from the signature and docstring."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, overload

from .._frozen import thaw
from .._messages import Image, Json, Text, ToolResult, ToolResultBlock, ToolUse
from ..errors import ConfigurationError, ToolInputError
from ._context import ToolContext
from ._spec import AgentTool, ToolSpec

__all__ = ["FunctionTool", "tool"]

_SECTION = r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$"
_ARG = r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary and the per-argument descriptions of a Google-style docstring."""
    import inspect
    import re

    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in lines:
        header = re.match(_SECTION, line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            m = re.match(_ARG, line)
            if m and (current is None or indent <= arg_indent):
                current, arg_indent = m.group(1).lstrip("*"), indent
                args[current] = m.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(" ".join(summary).split()), args


class FunctionTool:
    """A tool made by ``@tool`` from a sync or async function.

    Arguments are validated with pydantic before the call; the spec and the validator are built
    on first use, so decorating costs nothing at import time. Calling the object calls the
    function itself.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        idempotent: bool = False,
        needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
        inline: bool = False,
        compensate: Callable[..., Any] | AgentTool | None = None,
    ) -> None:
        import inspect

        if not (isinstance(needs_approval, bool) or callable(needs_approval)):
            raise ConfigurationError(
                f"tool {name or fn.__name__!r}: needs_approval is True, False or a function of "
                f"the call's input returning a bool, got {needs_approval!r}"
            )
        self.fn = fn
        self.idempotent = idempotent
        """Safe to run again: a call in doubt after a crash re-runs without asking a person."""
        self.needs_approval = needs_approval
        """Whether a call pauses for a person's approval first (or a function of its input
        that says so): see docs/approvals.md."""
        self._name = name or fn.__name__
        self._description = description
        self._is_async = inspect.iscoroutinefunction(fn)
        if not isinstance(inline, bool):
            raise ConfigurationError(
                f"tool {self._name!r}: inline is True or False, got {inline!r}"
            )
        if inline and self._is_async:
            raise ConfigurationError(
                f"tool {self._name!r}: inline=True is for a plain def; an async def already runs "
                "on the event loop"
            )
        self.inline = inline
        """Whether a plain ``def`` runs on the event loop itself (no worker thread): for tools
        that return at once; one that blocks stalls every other call and the run's timers."""
        self.compensate: AgentTool | None = None
        """What undoes one successful call of this tool (see docs/undo.md), or None."""
        if compensate is not None:
            from ._compensation import compensation_tool

            self.compensate = compensation_tool(self._name, compensate)
        self._signature = inspect.signature(fn)
        self._context_param: str | None = None
        hints = _hints(fn)
        for param in self._signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(
                    f"tool {self._name!r}: *args/**kwargs cannot be described to a model"
                )
            ann = hints.get(param.name, param.annotation)
            if ann is ToolContext or (
                isinstance(ann, str) and ann.rsplit(".", 1)[-1] == "ToolContext"
            ):
                self._context_param = param.name
        self.__doc__ = fn.__doc__
        self.__name__ = self._name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @cached_property
    def _model(self) -> Any:
        from pydantic import ConfigDict, Field, create_model

        _, arg_docs = _parse_docstring(self.fn.__doc__)
        hints = _hints(self.fn)
        fields: dict[str, Any] = {}
        for param in self._signature.parameters.values():
            if param.name == self._context_param:
                continue
            ann = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            doc = arg_docs.get(param.name)  # else an Annotated Field's description stays
            fields[param.name] = (ann, Field(default, description=doc) if doc else default)
        return create_model(f"{self._name}_input", __config__=ConfigDict(extra="forbid"), **fields)

    @cached_property
    def spec(self) -> ToolSpec:
        summary, _ = _parse_docstring(self.fn.__doc__)
        schema = self._model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(self._name, self._description or summary or self._name, schema)

    @cached_property
    def _fields(self) -> tuple[str, ...]:
        """The input model's field names (asked of pydantic once: it is a costly property)."""
        return tuple(self._model.model_fields)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The function's keyword arguments from the model's input; ToolInputError if invalid."""
        try:
            parsed = self._model.model_validate(thaw(arguments))  # the tool gets its own copy
        except Exception as exc:
            from pydantic import ValidationError  # (imported only when needed: it costs)

            if not isinstance(exc, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolInputError(f"invalid arguments for tool {self._name!r}: {problems}") from None
        return {k: getattr(parsed, k) for k in self._fields}

    def check(self, arguments: dict[str, Any]) -> None:
        """``validate``, keeping the keyword arguments for the ``run`` of this very input
        (a read-only value: the same object means the same input), so a call checked before
        anyone is asked about it is not validated twice. ToolInputError if invalid."""
        kwargs = self.validate(arguments)
        checked = self._checked
        if len(checked) >= 64:  # checked calls that never ran (declined, cancelled)
            checked.clear()
        checked[id(arguments)] = (arguments, kwargs)

    @cached_property
    def _checked(self) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        return {}

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        arguments = tool_use.input
        kept = self._checked.pop(id(arguments), None) if "_checked" in self.__dict__ else None
        kwargs = kept[1] if kept is not None and kept[0] is arguments else self.validate(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = context
        if self._is_async:
            value = await self.fn(**kwargs)
        elif self.inline:
            value = self.fn(**kwargs)
        else:
            import asyncio

            value = await asyncio.to_thread(self.fn, **kwargs)
        return to_tool_result(tool_use.id, value)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The function's resolved type hints; {} when forward references cannot be resolved."""
    import typing

    try:
        return typing.get_type_hints(fn, include_extras=True)  # keep Annotated constraints
    except Exception:
        return {}


def to_tool_result(tool_use_id: str, value: Any) -> ToolResult:
    """A tool's return value as a successful result."""
    if isinstance(value, ToolResult):
        if value.tool_use_id == tool_use_id:
            return value
        return ToolResult(tool_use_id, value.status, value.content)
    content: list[ToolResultBlock]
    if isinstance(value, str):
        content = [Text(value)]
    elif value is None:
        content = []
    elif isinstance(value, Text | Image | Json):
        content = [value]
    elif (
        isinstance(value, list) and value and all(isinstance(v, Text | Image | Json) for v in value)
    ):
        content = list(value)
    elif hasattr(value, "model_dump") and callable(value.model_dump):
        content = [Json(value.model_dump(mode="json"))]
    else:
        import json

        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"tool returned a {type(value).__name__}, which is not JSON-compatible ({exc})"
            ) from None
        content = [Json(value)]
    return ToolResult(tool_use_id, "success", content)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
    inline: bool = False,
    compensate: Callable[..., Any] | AgentTool | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
    inline: bool = False,
    compensate: Callable[..., Any] | AgentTool | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a function: ``@tool`` or ``@tool(name=..., description=...)``.

    The description is the docstring's summary; argument descriptions come from its ``Args:``
    section; the input schema comes from the type hints. A parameter annotated ``ToolContext``
    receives the context and is hidden from the model. ``idempotent=True`` says the tool is
    safe to run twice: if a process stops while it runs, recovery runs it again instead of
    asking a person. ``needs_approval=True`` (or a function of the call's input that returns
    True) makes each call pause first with a question named ``"approval"``, answered ``True``,
    ``False`` or ``{"approve": ..., "input": ..., "remember": ..., "note": ...}`` (see
    docs/approvals.md).

    A plain ``def`` runs in a worker thread, so a slow one never stalls the event loop; that
    hop costs tens of microseconds per call. ``inline=True`` runs it on the loop instead, for
    tools that return at once (a lookup in memory, a calculation): a tool that blocks (I/O,
    ``time.sleep``) must not be inline. ``inline=True`` on an ``async def`` is a
    ConfigurationError (it already runs on the loop).

    ``compensate=fn`` says how to undo one successful call: ``fn(input, result)`` (sync or
    async), or another tool, called with ``{"input": ..., "result": ...}``. ``agent.undo()``
    and ``Agent(on_decline="compensate")`` run it, exactly once (see docs/undo.md).
    """
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "idempotent": idempotent,
        "needs_approval": needs_approval,
        "inline": inline,
        "compensate": compensate,
    }
    if fn is not None:
        return FunctionTool(fn, **options)

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, **options)

    return wrap
