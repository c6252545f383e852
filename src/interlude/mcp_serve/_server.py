"""The MCP server: an App's agents as tools (``tools/list``, ``tools/call``), on the official
SDK's low-level ``Server``, whichever protocol era the client speaks.

How a question reaches the caller depends on the era and on what the client declared:

- a client that declared form elicitation, on the handshake-era protocol (``initialize``, up
  to 2025-11-25), is sent ``elicitation/create`` in the middle of the call, and the call goes
  on with the reply;
- on the current protocol (2026-07-28) the call's round ends with ``input_required`` (an
  ``InputRequiredResult`` carrying the form); the client sends the call again with the reply
  and the request state, which names the session and what the call has done so far (nothing
  in it is trusted: every answer is checked by the floor as the caller's, whatever it says);
- a client that cannot show forms gets the question and where to answer it as the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import ResumeInputError
from ._calls import AgentCalls, Caller, InputNeeded, Memory

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ._forms import Form

__all__ = ["agent_server"]

STATE_VERSION = 1
INSTRUCTIONS = (
    "Each tool runs an agent on a prompt, in a session kept on the server (its id is in every "
    "result: give it back as session_id to carry the session on). An agent may stop to ask a "
    "person something: the question comes as a form when this client can show one, else the "
    "result names it and where to answer it."
)


def agent_server(
    calls: AgentCalls, caller: Callable[[ServerRequestContext[Any]], Caller]
) -> Server[Any]:
    """The low-level MCP server of ``calls``' tools; ``caller`` says who calls (from the
    request: its bearer token's person, or the person a stdio server runs for)."""
    from .. import __version__

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=calls.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        if params.name not in calls.names:
            raise MCPError(INVALID_PARAMS, f"no tool {params.name!r} (tools: {calls.names!r})")
        who = caller(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        memory = _memory(params.request_state) if modern else None
        asker = _asker(ctx, modern, params)
        try:
            return await calls.call(params.name, params.arguments or {}, who, asker, memory)
        except InputNeeded as need:
            result: InputRequiredResult = need.result
            return result

    return Server(
        "interlude",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _memory(state: str | None) -> Memory | None:
    """The call's memory from the request state a client echoed (None: a first round)."""
    if not state:
        return None
    try:
        data = json.loads(state)
    except ValueError:
        raise MCPError(INVALID_PARAMS, "the request state is not this server's") from None
    if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
        raise MCPError(INVALID_PARAMS, "the request state is not this server's")
    try:
        return Memory.from_json(data.get("call"))
    except ResumeInputError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None


def _elicits(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}``, from before
    modes existed, counts as forms; URL mode alone does not)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _asker(
    ctx: ServerRequestContext[Any], modern: bool, params: CallToolRequestParams
) -> NoForms | AskInCall | AskByRound:
    if not _elicits(ctx):
        return NoForms("This client cannot show forms (it declared no form elicitation).")
    if modern:
        return AskByRound(params.input_responses or {})
    if not ctx.session.can_send_request:
        return NoForms("This connection cannot carry a question to the client.")
    return AskInCall(ctx)


class NoForms:
    """A client that cannot be asked: its questions go in the result."""

    def __init__(self, unable: str) -> None:
        self.unable = unable

    async def ask(
        self, question: Interrupt, form: Form, message: str, memory: Memory
    ) -> ElicitResult | None:
        return None


class AskInCall:
    """The handshake-era protocol: ``elicitation/create`` sent in the middle of the call."""

    unable = "The client did not take the form."

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self.ctx = ctx

    async def ask(
        self, question: Interrupt, form: Form, message: str, memory: Memory
    ) -> ElicitResult | None:
        try:
            return await self.ctx.session.elicit_form(
                message, form.schema, related_request_id=self.ctx.request_id
            )
        except MCPError as exc:  # the client refused the request, or it cannot reach it
            self.unable = f"The client did not take the form: {exc.message}"
            return None


class AskByRound:
    """The current protocol: a question ends the round with ``input_required``; the next round
    brings the reply (under the question's id), which counts only for the question as it was
    asked (its digest, kept in the request state)."""

    unable = "The client gave no reply to the form."

    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = dict(replies)

    async def ask(
        self, question: Interrupt, form: Form, message: str, memory: Memory
    ) -> ElicitResult | None:
        reply = self.replies.pop(question.id, None)
        if isinstance(reply, ElicitResult) and memory.asked.get(question.id) == question.digest:
            return reply
        memory.asked = {question.id: question.digest}
        state = json.dumps({"v": STATE_VERSION, "call": memory.to_json()}, separators=(",", ":"))
        request = ElicitRequest(
            params=ElicitRequestFormParams(message=message, requested_schema=form.schema)
        )
        raise InputNeeded(
            InputRequiredResult(input_requests={question.id: request}, request_state=state)
        )
