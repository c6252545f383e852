"""The input of a tool that hands a task to another runner (an agent, a graph, a swarm):
``{"prompt": <text>}``, its spec, and reading it from a call."""

from __future__ import annotations

import json

from .._messages import ToolUse
from ..errors import ConfigurationError, ToolInputError
from ._spec import ToolSpec

__all__ = ["task_prompt", "task_tool_name", "task_tool_spec"]

PROMPT = "prompt"


def task_tool_name(name: object, kind: str) -> str:
    """``name`` checked as a tool's name (ConfigurationError naming ``kind`` if it is missing)."""
    if not isinstance(name, str) or not name.strip():
        article = "an" if kind[:1] in "aeiou" else "a"
        raise ConfigurationError(
            f"as_tool needs a tool name: name=... or {article} {kind} with a name, got {name!r}"
        )
    return name


def task_tool_spec(name: str, description: str) -> ToolSpec:
    """The spec of a tool taking ``{"prompt": <text>}`` and nothing else."""
    return ToolSpec(
        name,
        description,
        {
            "type": "object",
            "properties": {PROMPT: {"type": "string", "description": "The task, in plain words."}},
            "required": [PROMPT],
            "additionalProperties": False,
        },
    )


def task_prompt(tool_name: str, tool_use: ToolUse) -> str:
    """The call's prompt; ToolInputError unless the input is exactly a non-blank ``prompt``."""
    prompt = tool_use.input.get(PROMPT)
    if not isinstance(prompt, str) or not prompt.strip() or set(tool_use.input) != {PROMPT}:
        raise ToolInputError(
            f"invalid arguments for tool {tool_name!r}: expected {{'prompt': <text>}}, "
            f"got {json.dumps(tool_use.input, default=repr)[:200]}"
        )
    return prompt
