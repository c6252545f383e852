"""An MCP tool result as an Interlude one (a leaf both a tool call and a task it follows use)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._messages import Image, Json, JsonValue, Text, ToolResult, ToolResultBlock

if TYPE_CHECKING:
    import mcp.types

__all__ = ["result_from_mcp"]


def result_from_mcp(
    tool_use_id: str, result: mcp.types.CallToolResult, *, limit: int | None = None
) -> ToolResult:
    """An MCP tool result as an Interlude one: text, images and resources as blocks, the
    structured content as a Json block (instead of the text when that text is its JSON).
    Past ``limit`` characters of text in all, the text is cut (with a note saying so)."""
    import base64

    from mcp.types import EmbeddedResource, ImageContent, ResourceLink, TextContent

    blocks: list[ToolResultBlock] = []
    for item in result.content:
        if isinstance(item, TextContent):
            blocks.append(Text(item.text))
        elif isinstance(item, ImageContent):
            blocks.append(Image(item.mime_type, base64.b64decode(item.data)))
        elif isinstance(item, EmbeddedResource):
            res = item.resource
            text = getattr(res, "text", None)
            if text is not None:
                blocks.append(Text(text))
            elif (res.mime_type or "").startswith("image/"):
                data = base64.b64decode(getattr(res, "blob", ""))
                blocks.append(Image(res.mime_type or "", data))
            else:
                blocks.append(Text(f"[resource {res.uri} ({res.mime_type or 'binary'})]"))
        elif isinstance(item, ResourceLink):
            blocks.append(Text(f"[resource {item.uri}]"))
        else:  # audio and anything newer: named, not passed on
            blocks.append(Text(f"[{getattr(item, 'type', 'content')} content not shown]"))
    structured = result.structured_content
    if structured is not None:
        texts = [b for b in blocks if isinstance(b, Text)]
        if texts and _says(texts, structured):
            blocks = [b for b in blocks if not isinstance(b, Text)]
            blocks.insert(0, Json(structured))
        elif not (texts and _wraps(texts, structured)):
            blocks.append(Json(structured))
    if limit is not None:
        blocks = _cut(blocks, limit)
    return ToolResult(tool_use_id, "error" if result.is_error else "success", blocks)


def _cut(blocks: list[ToolResultBlock], limit: int) -> list[ToolResultBlock]:
    """The blocks with their text cut to ``limit`` characters in all (a structured block that
    does not fit becomes its JSON text, cut too)."""
    out: list[ToolResultBlock] = []
    left = limit
    for block in blocks:
        if isinstance(block, Json):
            text = json.dumps(block.value, ensure_ascii=False)
            if len(text) <= left:
                out.append(block)
                left -= len(text)
                continue
            block = Text(text)
        if isinstance(block, Text):
            if len(block.text) > left:
                cut = len(block.text) - left
                kept = block.text[:left]
                out.append(
                    Text(
                        f"{kept}\n[{cut} more characters cut: the result was longer "
                        f"than the server's max_output of {limit}]"
                    )
                )
                left = 0
                continue
            left -= len(block.text)
        out.append(block)
    return out


def _says(texts: list[Text], structured: JsonValue) -> bool:
    """Whether the text blocks are the JSON of the structured content."""
    try:
        return bool(json.loads("".join(t.text for t in texts)) == structured)
    except ValueError:
        return False


def _wraps(texts: list[Text], structured: JsonValue) -> bool:
    """Whether the structured content only wraps the text (``{"result": text}``, as servers do
    for a tool returning a plain value)."""
    if not isinstance(structured, dict) or list(structured) != ["result"]:
        return False
    text = "".join(t.text for t in texts)
    value = structured["result"]
    return value == text or _says(texts, value)
