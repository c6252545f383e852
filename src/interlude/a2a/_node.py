"""A remote A2A agent as a local :class:`~interlude.Agent`, so it can be a Graph or Swarm node.

Graph and swarm nodes are agents. :meth:`RemoteAgent.as_agent` builds one whose only tool is
the remote agent (:meth:`RemoteAgent.as_tool`) and whose model is no language model: it hands
the node's whole prompt to that tool and answers with the tool's text. The remote questions
become the node's, so they reach the graph's pause like any node's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from .._messages import Message, Text, ToolResult
from .._stream import ModelEvent, ModelStop, TextDelta, ToolUseStart

if TYPE_CHECKING:
    from ..models import ToolSpec

__all__ = ["RelayModel"]


class RelayModel:
    """A model that calls tool ``tool`` once with the last user message's text as its
    ``prompt``, then replies with that call's result (the tool's error text on an error)."""

    resumable = True
    """Its reply depends only on the conversation, in any process."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def __repr__(self) -> str:
        return f"RelayModel({self.tool!r})"

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
    ) -> AsyncIterator[ModelEvent]:
        last = messages[-1] if messages else None
        results = [] if last is None else [c for c in last.content if isinstance(c, ToolResult)]
        if results:
            text = "".join(b.text for r in results for b in r.content if isinstance(b, Text))
            yield TextDelta(text)
            yield ModelStop("end_turn")
            return
        prompt = (
            "" if last is None else "".join(c.text for c in last.content if isinstance(c, Text))
        )
        yield ToolUseStart(f"{self.tool}-{len(messages)}", self.tool, {"prompt": prompt})
        yield ModelStop("tool_use")
