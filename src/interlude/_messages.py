"""Conversation data: messages and their content blocks, and their JSON form.

Everything here is a small frozen dataclass. ``to_dict``/``from_dict`` give a plain JSON form
that round-trips without loss; ``from_dict`` checks shapes and names what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._frozen import _EMPTY, FrozenDict, FrozenList, freeze
from .errors import StateFormatError

__all__ = [
    "ContentBlock",
    "Image",
    "Json",
    "JsonValue",
    "Message",
    "Reasoning",
    "Role",
    "Text",
    "ToolResult",
    "ToolResultBlock",
    "ToolResultStatus",
    "ToolUse",
    "Usage",
]

JsonValue: TypeAlias = Any
"""A value made of dict, list, str, int, float, bool and None."""

Role = Literal["user", "assistant"]
ToolResultStatus = Literal["success", "error"]


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text."""

    text: str

    def __init__(self, text: str) -> None:
        _set_text(self, text)  # (see ToolUse.__init__)


@dataclass(frozen=True, slots=True)
class Json:
    """Structured data in a tool result."""

    value: JsonValue

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", freeze(self.value))  # read-only, deep


@dataclass(frozen=True, slots=True)
class Image:
    """An image, as raw bytes and a media type such as ``image/png``."""

    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A model's reasoning ("thinking").

    ``signature`` and ``redacted`` (reasoning the provider sent encrypted, as opaque text) are
    kept because providers require them back with the conversation.
    """

    text: str
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The model asks for tool ``name`` to run with ``input``; ``id`` pairs it with its result."""

    id: str
    name: str
    input: dict[str, JsonValue] = field(default_factory=dict)
    """Read-only, all the way down (ReadOnlyError on an in-place edit): it is what hooks and
    people are shown and approve. To change a call, replace the tool use."""

    def __init__(self, id: str, name: str, input: dict[str, JsonValue] = _EMPTY) -> None:
        # Written out (the generated one sets each field through ``object.__setattr__``, then
        # calls ``__post_init__``): built on every model reply.
        _set_tu_id(self, id)
        _set_tu_name(self, name)
        _set_tu_input(self, input if type(input) is FrozenDict else freeze(input))


ToolResultBlock: TypeAlias = Text | Json | Image


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool use produced; an ``"error"`` status tells the model the call failed."""

    tool_use_id: str
    status: ToolResultStatus = "success"
    content: list[ToolResultBlock] = field(default_factory=list)
    """Read-only (a ``list`` that refuses in-place edits)."""

    def __init__(
        self,
        tool_use_id: str,
        status: ToolResultStatus = "success",
        content: Iterable[ToolResultBlock] = (),
    ) -> None:
        _set_tr_id(self, tool_use_id)
        _set_tr_status(self, status)
        _set_tr_content(self, content if type(content) is FrozenList else FrozenList(content))

    @property
    def text(self) -> str:
        """The text blocks of the result, joined."""
        return "".join(b.text for b in self.content if isinstance(b, Text))


ContentBlock: TypeAlias = Text | Image | Reasoning | ToolUse | ToolResult

# The slots' own setters: what ``object.__setattr__`` finds for a field, without the finding.
_set_text = Text.__dict__["text"].__set__
_set_tu_id = ToolUse.__dict__["id"].__set__
_set_tu_name = ToolUse.__dict__["name"].__set__
_set_tu_input = ToolUse.__dict__["input"].__set__
_set_tr_id = ToolResult.__dict__["tool_use_id"].__set__
_set_tr_status = ToolResult.__dict__["status"].__set__
_set_tr_content = ToolResult.__dict__["content"].__set__


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of the conversation."""

    role: Role
    content: list[ContentBlock]
    """Read-only (a ``list`` that refuses in-place edits); its blocks are frozen too."""

    def __init__(self, role: Role, content: list[ContentBlock]) -> None:
        _set_m_role(self, role)
        _set_m_content(self, content if type(content) is FrozenList else FrozenList(content))

    @property
    def text(self) -> str:
        """The message's text blocks, joined."""
        return "".join(b.text for b in self.content if isinstance(b, Text))

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [b for b in self.content if isinstance(b, ToolUse)]

    def to_dict(self) -> dict[str, JsonValue]:
        """The message as JSON-compatible data."""
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """Rebuild a message from :meth:`to_dict` output; raises StateFormatError if malformed."""
        return message_from_dict(data)


_set_m_role = Message.__dict__["role"].__set__
_set_m_content = Message.__dict__["content"].__set__


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the model."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    @classmethod
    def from_dict(cls, data: Any, where: str = "usage") -> Usage:
        d = _obj(data, where)
        return cls(_int(d, "input_tokens", where), _int(d, "output_tokens", where))


# --- JSON form -------------------------------------------------------------------------------


def block_to_dict(block: ContentBlock | ToolResultBlock) -> dict[str, JsonValue]:
    match block:
        case Text(text):
            return {"type": "text", "text": text}
        case Json(value):
            return {"type": "json", "value": value}
        case Image(media_type, data):
            import base64

            return {
                "type": "image",
                "media_type": media_type,
                "data": base64.b64encode(data).decode("ascii"),
            }
        case Reasoning(text, signature, redacted):
            out: dict[str, JsonValue] = {"type": "reasoning", "text": text, "signature": signature}
            if redacted is not None:
                out["redacted"] = redacted
            return out
        case ToolUse(id, name, input):
            return {"type": "tool_use", "id": id, "name": name, "input": input}
        case ToolResult(tool_use_id, status, content):
            return {
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "status": status,
                "content": [block_to_dict(b) for b in content],
            }
    raise TypeError(f"not a content block: {block!r}")


def block_from_dict(data: Any, where: str) -> ContentBlock:
    d = _obj(data, where)
    kind = d.get("type")
    if kind == "text":
        return Text(_str(d, "text", where))
    if kind == "image":
        import base64

        try:
            raw = base64.b64decode(_str(d, "data", where), validate=True)
        except ValueError as exc:
            raise StateFormatError(f"{where}.data: not base64 ({exc})") from None
        return Image(_str(d, "media_type", where), raw)
    if kind == "reasoning":
        return Reasoning(
            _str(d, "text", where), _opt_str(d, "signature", where), _opt_str(d, "redacted", where)
        )
    if kind == "tool_use":
        return tool_use_from_dict(d, where)
    if kind == "tool_result":
        return tool_result_from_dict(d, where)
    raise StateFormatError(f"{where}: unknown content block type {kind!r}")


def tool_use_from_dict(data: Any, where: str) -> ToolUse:
    d = _obj(data, where)
    inp = d.get("input")
    if not isinstance(inp, dict):
        raise StateFormatError(f"{where}.input: expected an object, got {_show(inp)}")
    return ToolUse(_str(d, "id", where), _str(d, "name", where), inp)


def tool_use_to_dict(tool_use: ToolUse) -> dict[str, JsonValue]:
    return block_to_dict(tool_use)


def tool_result_from_dict(data: Any, where: str) -> ToolResult:
    d = _obj(data, where)
    status = d.get("status")
    if status not in ("success", "error"):
        raise StateFormatError(
            f"{where}.status: expected 'success' or 'error', got {_show(status)}"
        )
    content: list[ToolResultBlock] = []
    for i, item in enumerate(_list(d, "content", where)):
        item_where = f"{where}.content[{i}]"
        if isinstance(item, dict) and item.get("type") == "json":
            if "value" not in item:
                raise StateFormatError(f"{item_where}.value: missing")
            content.append(Json(item["value"]))
            continue
        block = block_from_dict(item, item_where)
        if not isinstance(block, Text | Image):
            raise StateFormatError(f"{item_where}: {type(block).__name__} is not allowed here")
        content.append(block)
    return ToolResult(_str(d, "tool_use_id", where), status, content)


def message_from_dict(data: Any, where: str = "message") -> Message:
    d = _obj(data, where)
    role = d.get("role")
    if role not in ("user", "assistant"):
        raise StateFormatError(f"{where}.role: expected 'user' or 'assistant', got {_show(role)}")
    blocks: list[ContentBlock] = []
    for i, b in enumerate(_list(d, "content", where)):
        # The common case first, without building the block's name for an error message.
        if type(b) is dict and b.get("type") == "text" and type(b.get("text")) is str:
            blocks.append(Text(b["text"]))
        else:
            blocks.append(block_from_dict(b, f"{where}.content[{i}]"))
    return Message(role, blocks)


def messages_from_dicts(data: Any, where: str = "messages") -> list[Message]:
    if not isinstance(data, list):
        raise StateFormatError(f"{where}: expected a list, got {type(data).__name__}")
    out: list[Message] = []
    append = out.append
    for i, m in enumerate(data):
        # The common case inline (a long conversation's load): text blocks only. Anything
        # else, including anything wrong, goes through ``message_from_dict``, which names it.
        if type(m) is dict:
            role, content = m.get("role"), m.get("content")
            if (role == "user" or role == "assistant") and type(content) is list:
                blocks: list[ContentBlock] = []
                for b in content:
                    if type(b) is not dict or b.get("type") != "text":
                        break
                    text = b.get("text")
                    if type(text) is not str:
                        break
                    blocks.append(Text(text))
                else:
                    append(Message(role, blocks))
                    continue
        append(message_from_dict(m, f"{where}[{i}]"))
    return out


# Small shape checkers shared by the state codecs.


def _show(value: object) -> str:
    """A short repr of a value for an error message: bounded in depth and length, so a hostile
    value (nested 100,000 deep, megabytes long) makes a short message, not a RecursionError."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother, r.maxlong = 3, 60, 60, 40
    r.maxlist = r.maxdict = r.maxtuple = r.maxset = 6
    return r.repr(value)


def _obj(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise StateFormatError(f"{where}: expected an object, got {type(data).__name__}")
    return data


def _str(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise StateFormatError(f"{where}.{key}: expected a string, got {_show(value)}")
    return value


def _opt_str(d: Mapping[str, Any], key: str, where: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise StateFormatError(f"{where}.{key}: expected a string or null, got {_show(value)}")
    return value


def _int(d: Mapping[str, Any], key: str, where: str) -> int:
    value = d.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise StateFormatError(f"{where}.{key}: expected an integer, got {_show(value)}")
    return value


def _list(d: Mapping[str, Any], key: str, where: str) -> Sequence[Any]:
    value = d.get(key)
    if not isinstance(value, list):
        raise StateFormatError(f"{where}.{key}: expected a list, got {_show(value)}")
    return value
