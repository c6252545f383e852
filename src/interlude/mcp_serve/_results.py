"""What a tool call returns: the agent's reply, or the questions it waits on and where to
answer them, or why an answer or a run was refused. Each is text for the model and the person
(``content``) and the same as JSON (``structuredContent``), always with the session's id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mcp.types import CallToolResult, TextContent

from ._forms import reason_text

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import Message

__all__ = ["finished", "inbox_link", "paused", "question_entry", "refused", "reply_text"]


def inbox_link(inbox: str | None, session: str) -> str | None:
    """The inbox page of ``session`` under the inbox's URL (None: not known)."""
    if inbox is None:
        return None
    return f"{inbox.rstrip('/')}/sessions/{quote(session, safe='@:=+')}"


def reply_text(messages: Sequence[Message]) -> str:
    """The text of the session's last reply ("" when its last message is not one)."""
    from .._messages import Text

    if not messages or messages[-1].role != "assistant":
        return ""
    return "".join(c.text for c in messages[-1].content if isinstance(c, Text))


def _session_line(session: str) -> TextContent:
    return TextContent(
        type="text", text=f"session_id: {session} (give it to carry this session on)"
    )


def finished(session: str, messages: Sequence[Message], notes: Sequence[str]) -> CallToolResult:
    """The agent ended its run: its reply."""
    reply = reply_text(messages)
    data: dict[str, Any] = {"session_id": session, "status": "completed", "reply": reply}
    if notes:
        data["notes"] = list(notes)
    content = [TextContent(type="text", text=reply or "(the agent gave no text)")]
    return CallToolResult(content=[*content, _session_line(session)], structured_content=data)


def working(session: str, notes: Sequence[str]) -> CallToolResult:
    """The session is carried on elsewhere (a worker, another call) or stopped mid-run."""
    text = (
        f"Session {session} is being carried on elsewhere (or its run stopped before it "
        "finished and waits to be recovered): call again with its session_id to see how it "
        "stands."
    )
    data: dict[str, Any] = {"session_id": session, "status": "working", "notes": list(notes)}
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def question_entry(
    question: Interrupt, session: str, *, may_answer: str, now: float
) -> dict[str, Any]:
    """A question as a result names it: the question (``Interrupt.to_dict()``) with its
    ``answer_key`` (``<session>/<id>``), ``digest``, ``message`` and who may answer it."""
    from .._interrupt import answer_key

    entry: dict[str, Any] = dict(question.to_dict())
    entry.update(
        answer_key=answer_key(session, question.id),
        digest=question.digest,
        message=reason_text(question),
        who_may_answer=may_answer,
    )
    if question.expires_at is not None:
        entry["expires_in"] = max(0.0, round(question.expires_at - now, 1))
    return entry


def paused(
    session: str,
    questions: Sequence[dict[str, Any]],
    *,
    inbox: str | None,
    notes: Sequence[str],
) -> CallToolResult:
    """The session waits for people: each question, the session, and where to answer."""
    link = inbox_link(inbox, session)
    lines = [f"Session {session} is paused: the agent waits for a person."]
    for q in questions:
        lines.append(f"- {q['message']} (question {q['id']}; {q['who_may_answer']} may answer)")
        use = q.get("tool_use")
        if isinstance(use, dict):
            lines.append(f"  about {use.get('name')} {json.dumps(use.get('input'))[:500]}")
    lines.extend(notes)
    where = f"in the inbox at {link}" if link else "in the inbox (interlude serve)"
    lines.append(
        f"Answer {where}, with `interlude answer {session} QUESTION ANSWER`, or call this tool "
        f"again with session_id {session!r} from a client that shows forms (elicitation). "
        "The session waits in its store: any of these carries it on."
    )
    data: dict[str, Any] = {
        "session_id": session,
        "status": "paused",
        "questions": list(questions),
        "inbox": link,
        "notes": list(notes),
    }
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))], structured_content=data
    )


def refused(session: str | None, exc: Exception, code: str) -> CallToolResult:
    """A call refused before anything ran or was recorded (an error result: nothing changed
    because of it)."""
    text = f"refused ({code}): {exc}"
    data: dict[str, Any] = {"session_id": session, "status": "refused", "code": code}
    data["error"] = type(exc).__name__
    data["message"] = str(exc)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=data, is_error=True
    )
