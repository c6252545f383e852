"""Structured output: a run whose final answer must be a value of a given type.

``agent(prompt, output_type=T)`` keeps T's JSON Schema with the invocation (``OutputState``,
saved with every pause, so another process can carry on without T). The model is asked for it
natively when it says it can (``native_output``: a JSON-schema response format) and otherwise
through a final-answer tool, ``final_result``, whose input is the answer. Each final answer is
checked against the stored schema (and converted to T when this process knows T); one that
does not fit is sent back to the model with what is wrong, up to ``Agent(output_retries=...)``
times, then the run fails with OutputValidationError.

A model's tool input and response formats must be JSON objects, so a type whose schema is not
an object (``int``, ``list[str]``, a ``Literal``, a union) is asked for wrapped as
``{"result": value}`` and unwrapped here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from .._messages import JsonValue, Message, Reasoning, Text, ToolResult
from .._result import AgentResult, StopReason
from .._tools import ToolSpec
from ..errors import ConfigurationError, OutputTypeMismatchError, OutputValidationError
from ..models import OutputSchema
from ._state import AfterInvocation, BeforeModelCall, MessageAdded

if TYPE_CHECKING:
    from .._stream import ModelResponse
    from ._context import StepContext

__all__ = [
    "FINAL_TOOL",
    "WRAP_KEY",
    "OutputState",
    "after_reply",
    "finish",
    "for_prompt",
    "for_resume",
    "model_request",
]

FINAL_TOOL = "final_result"
"""The name of the final-answer tool (tool mode) and of the response format (native mode)."""
WRAP_KEY = "result"
"""The key a non-object output is wrapped in."""
_DESCRIPTION = (
    "Give your final answer by calling this tool once you are done; its input is the answer. "
    "Calling it ends the conversation turn."
)


@dataclass(frozen=True, slots=True)
class OutputState:
    """The output an invocation must end with: T's JSON Schema (kept in the state), T itself
    when this process knows it (never saved), and the invalid answers sent back so far."""

    schema: dict[str, JsonValue]
    type: Any = None
    retries: int = 0


def _schema_of(output_type: Any) -> dict[str, JsonValue]:
    from .._typed import schema_of
    from ..errors import InterruptError

    try:
        schema = schema_of(output_type)
    except InterruptError as exc:
        raise ConfigurationError(str(exc).replace("response_type", "output_type", 1)) from None
    normal: dict[str, JsonValue] = json.loads(json.dumps(schema))
    return normal


def for_prompt(output_type: Any) -> OutputState | None:
    """The output state of a new invocation (None: a plain text run)."""
    if output_type is None:
        return None
    return OutputState(_schema_of(output_type), output_type)


def for_resume(stored: OutputState | None, output_type: Any) -> OutputState | None:
    """The output state a resume carries on with: the stored one, with T when it is given.
    OutputTypeMismatchError (nothing changed) if T's schema is not the stored one."""
    if output_type is None:
        return None if stored is None else OutputState(stored.schema, None, stored.retries)
    schema = _schema_of(output_type)
    if stored is None:
        raise OutputTypeMismatchError(
            f"output_type={output_type!r} was given, but the paused run was started without "
            "an output type; resume it without output_type"
        )
    if _canonical(schema) != _canonical(stored.schema):
        raise OutputTypeMismatchError(
            f"output_type={output_type!r} does not match the output schema the paused run was "
            f"started with: its schema is {_short(schema)}, the stored one {_short(stored.schema)}"
            "; nothing was changed"
        )
    return OutputState(stored.schema, output_type, stored.retries)


def _canonical(schema: dict[str, JsonValue]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _short(schema: dict[str, JsonValue]) -> str:
    text = _canonical(schema)
    return text if len(text) <= 160 else text[:157] + "..."


# --- the request --------------------------------------------------------------------------


def wire_schema(schema: dict[str, JsonValue]) -> tuple[dict[str, JsonValue], bool]:
    """The object schema a model is asked for, and whether ``schema`` was wrapped in it."""
    if schema.get("type") == "object":
        return schema, False
    inner = dict(schema)
    wrapper: dict[str, JsonValue] = {}
    defs = inner.pop("$defs", None)  # refs point at the root: keep the definitions there
    if defs is not None:
        wrapper["$defs"] = defs
    wrapper.update(
        type="object",
        properties={WRAP_KEY: inner},
        required=[WRAP_KEY],
        additionalProperties=False,
    )
    return wrapper, True


def is_native(model: object) -> bool:
    """Whether ``model`` takes ``output_schema=`` and answers with JSON text (it says so)."""
    return getattr(model, "native_output", False) is True


def model_request(run: StepContext) -> tuple[list[ToolSpec], dict[str, Any]]:
    """The tool specs and extra keyword arguments of the model call."""
    agent, output = run.agent, run.progress.output
    specs = agent._tool_specs()
    if output is None:
        return specs, {}
    schema, _ = wire_schema(output.schema)
    description = schema.get("description") if isinstance(schema.get("description"), str) else None
    if is_native(agent.model):
        return specs, {"output_schema": OutputSchema(FINAL_TOOL, schema, description)}
    if any(s.name == FINAL_TOOL for s in specs):
        raise ConfigurationError(
            f"the agent has a tool named {FINAL_TOOL!r}, which the structured output of a model "
            "without native_output needs for itself; rename the tool"
        )
    text = _DESCRIPTION if description is None else f"{_DESCRIPTION} The answer: {description}"
    return [*specs, ToolSpec(FINAL_TOOL, text, schema)], {}


# --- the reply ----------------------------------------------------------------------------


async def after_reply(
    run: StepContext, response: ModelResponse, message: Message
) -> MessageAdded | None:
    """What a model reply means for the output: None when it asks for tools to run (the loop
    goes on as usual); else the step after appending it, the final answer (the run ends with
    it) or, when the answer does not fit, the reply and what is wrong with it (the model is
    asked again)."""
    output = run.progress.output
    assert output is not None
    stop = "end_turn" if response.stop_reason == "tool_use" else response.stop_reason
    uses = message.tool_uses
    if is_native(run.spec.model):  # the answer is the text of a reply without tool calls
        if uses:
            return None
        raw: JsonValue = message.text
        value, problem = _parse(output, message.text)
        if problem is None:
            return await _done(run, message, stop, value)
        return await _retry(run, message, raw, problem, Message("user", [Text(_again(problem))]))
    finals = [u for u in uses if u.name == FINAL_TOOL]
    if not finals:
        if uses:
            return None
        problem = Problem((), f"no answer was given: call the {FINAL_TOOL} tool with the answer")
        ask = Message("user", [Text(problem.text)])
        return await _retry(run, message, message.text, problem, ask)
    final = finals[0]
    value, problem = _check(output, _unwrap(output, final.input))
    if problem is None:
        kept = [b for b in message.content if isinstance(b, Reasoning)]
        text = _json_text(value)
        return await _done(run, Message("assistant", [*kept, Text(text)]), stop, value)
    results: list[ToolResult] = []
    for use in uses:
        if use is final:
            why = f"{problem.text}. Call {FINAL_TOOL} again with an answer that meets its schema."
        elif use.name == FINAL_TOOL:
            why = f"not used: only the first {FINAL_TOOL} call of a reply counts"
        else:
            why = f"not run: {FINAL_TOOL} was called in the same reply; call tools before it"
        results.append(ToolResult(use.id, "error", [Text(why)]))
    return await _retry(run, message, final.input, problem, Message("user", list(results)))


class Problem(NamedTuple):
    """What is wrong with an answer: the path of the bad field (empty: the whole answer)."""

    path: tuple[str | int, ...]
    text: str


def _parse(output: OutputState, text: str) -> tuple[JsonValue, Problem | None]:
    raw = text.strip()
    if raw.startswith("```") and raw.endswith("```"):  # a fenced block: take its inside
        raw = raw[3:-3].strip()
        if raw[:4].lower() == "json":
            raw = raw[4:]
    try:
        value = json.loads(raw)
    except RecursionError:  # a hostile reply ("[[[[..."): sent back like any other bad answer
        return None, Problem((), "the reply is JSON nested too deeply to read")
    except ValueError as exc:
        if output.schema.get("type") == "string":  # output_type=str: plain text is the answer
            return _check(output, text)
        return None, Problem((), f"the reply is not JSON ({_cut(str(exc))})")
    return _check(output, _unwrap(output, value))


def _unwrap(output: OutputState, value: JsonValue) -> JsonValue:
    _, wrapped = wire_schema(output.schema)
    if wrapped and isinstance(value, dict) and set(value) == {WRAP_KEY}:
        return value[WRAP_KEY]
    return value


def _check(output: OutputState, value: JsonValue) -> tuple[JsonValue, Problem | None]:
    """``value`` and None if it fits the stored schema (and converts to T when T is known);
    else what is wrong, naming the field."""
    from .._typed import AnswerTypeError, answer_problem, convert

    found = answer_problem(output.schema, value)
    if found is None and output.type is not None:
        try:
            convert(output.type, value)
        except AnswerTypeError as exc:
            found = (exc.path, str(exc).split(": ", 1)[-1])
    if found is None:
        return value, None
    path, what = found
    where = ".".join(str(p) for p in path) if path else "the top level"
    return value, Problem(tuple(path), _cut(f"at {_cut(where)}: {what}"))


_PROBLEM_CHARS = 500
"""How much of a problem's text is kept: a validator quotes the bad value whole, and a model's
answer may be megabytes long; the text goes back to the model and into the error message."""


def _cut(text: str) -> str:
    """``text``, or its start and end (what is wrong is often said after the value)."""
    if len(text) <= _PROBLEM_CHARS:
        return text
    half = (_PROBLEM_CHARS - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def _json_text(value: JsonValue) -> str:
    """The answer as JSON text; escaped where it holds a lone surrogate (a model can send
    ``"\\ud800"``), which no UTF-8 output (a terminal, a web page) could carry."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


def _again(problem: Problem) -> str:
    return (
        f"Your answer does not fit the required output: {problem.text}. Reply again with only the "
        "JSON answer, meeting its schema."
    )


async def _done(
    run: StepContext, message: Message, stop: StopReason, value: JsonValue
) -> MessageAdded:
    _count_ids(run, message)
    result = AgentResult(stop_reason=stop, message=message, usage=run.progress.usage, output=value)
    return await run.append(message, AfterInvocation(result))


async def _retry(
    run: StepContext, message: Message, raw: JsonValue, problem: Problem, feedback: Message
) -> MessageAdded:
    """Append the reply and what is wrong with it, then ask the model again; past the limit,
    OutputValidationError (the reply is not kept)."""
    output = run.progress.output
    assert output is not None
    limit = run.spec.output_retries
    output = replace(output, retries=output.retries + 1)
    run.progress = run.progress.but(output=output)
    if output.retries > limit:
        raise OutputValidationError(
            f"the model's output does not fit the output type after {limit} retr"
            f"{'y' if limit == 1 else 'ies'} (output_retries={limit}): {problem.text}; last "
            f"output: {_show(raw)}",
            path=problem.path,
            output=raw,
        )
    _count_ids(run, message)
    first = await run.append(message, BeforeModelCall())
    second = await run.append(feedback, BeforeModelCall())
    first = replace(first, then=second)  # both hooks run, in order; saved together
    run.step = first
    return first


def _count_ids(run: StepContext, message: Message) -> None:
    """Tool uses appended outside a tool batch still count for the ids' uniqueness."""
    seen = run.tool_use_ids()
    for use in message.tool_uses:
        seen[use.id] = seen.get(use.id, 0) + 1


def _show(value: JsonValue) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(text if len(text) <= 200 else text[:197] + "...")


def finish(run: StepContext, result: AgentResult) -> AgentResult:
    """The run's result with its output as T (when this process knows T)."""
    output = run.progress.output
    if output is None or output.type is None or result.stop_reason in ("interrupt", "cancelled"):
        return result
    from .._typed import AnswerTypeError, convert

    try:
        value = convert(output.type, result.output)
    except AnswerTypeError as exc:
        raise OutputValidationError(
            f"the run's output does not convert to {output.type!r}: {exc}",
            path=exc.path,
            output=result.output,
        ) from None
    return replace(result, output=value)
