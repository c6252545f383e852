"""Elicitation: a server asks the user something in the middle of a tool call.

The question becomes an Interlude interrupt raised from the tool's body (or is answered at once
by the server's ``elicitation`` callback). Its answer is a JSON value of one of three shapes:

- an object meeting the server's requested schema: *accept* with that content;
- ``"decline"``: the user said no;
- ``"cancel"``: the user dismissed the question without choosing.

A URL-mode elicitation (the server sends the user to a web page) is answered ``"accept"``
(the user went there), ``"decline"`` or ``"cancel"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .._messages import JsonValue, ToolUse

if TYPE_CHECKING:
    import mcp.types

__all__ = ["Elicitation", "answer_schema", "to_elicit_result"]

REFUSALS: tuple[str, str] = ("decline", "cancel")


@dataclass(frozen=True, slots=True, kw_only=True)
class Elicitation:
    """A question an MCP server asked during a tool call.

    ``schema`` is the JSON Schema the server wants the answer's content to meet (form mode);
    ``url`` is the page the server sends the user to (URL mode). ``answer_schema`` is what an
    answer must meet. The interrupt's ``name`` is made from the question itself (its message,
    schema and URL), so the answer given on resume goes to the same question when the tool runs
    again, whatever order the server asks in; ``repeat`` counts earlier asks of the very same
    question in this call.
    """

    server: str
    tool: str
    message: str
    schema: dict[str, JsonValue] | None
    url: str | None
    tool_use: ToolUse
    repeat: int = 0

    @property
    def digest(self) -> str:
        """A short digest of the question: its message, schema and URL."""
        import hashlib
        import json

        text = json.dumps([self.message, self.schema, self.url], sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    @property
    def name(self) -> str:
        """The interrupt's name: ``elicitation:<digest>`` (``#<n>`` added for a repeat)."""
        base = f"elicitation:{self.digest}"
        return f"{base}#{self.repeat + 1}" if self.repeat else base

    @property
    def answer_schema(self) -> dict[str, JsonValue]:
        return answer_schema(self.schema)

    @property
    def reason(self) -> dict[str, JsonValue]:
        """What the interrupt shows a person: the server, its message (and its URL)."""
        out: dict[str, JsonValue] = {"server": self.server, "message": self.message}
        if self.url is not None:
            out["url"] = self.url
        return out

    @classmethod
    def from_params(
        cls,
        params: mcp.types.ElicitRequestParams,
        *,
        server: str,
        tool: str,
        tool_use: ToolUse,
    ) -> Elicitation:
        schema = getattr(params, "requested_schema", None)
        url = getattr(params, "url", None)
        return cls(
            server=server,
            tool=tool,
            message=params.message,
            schema=None if schema is None else dict(schema),
            url=url,
            tool_use=tool_use,
        )


def answer_schema(requested: dict[str, JsonValue] | None) -> dict[str, JsonValue]:
    """The JSON Schema of an answer: the requested content, ``"decline"`` or ``"cancel"``
    (for a URL-mode question, with no requested schema: ``"accept"`` too)."""
    if requested is None:
        return {"enum": ["accept", *REFUSALS]}
    return {"anyOf": [requested, {"enum": list(REFUSALS)}]}


def to_elicit_result(answer: Any, url_mode: bool) -> mcp.types.ElicitResult:
    """The MCP result for an answer of the shapes above."""
    from mcp.types import ElicitResult

    action: Literal["accept", "decline", "cancel"]
    if answer in REFUSALS or (url_mode and answer == "accept"):
        action = answer
        return ElicitResult(action=action)
    return ElicitResult(action="accept", content=answer)
