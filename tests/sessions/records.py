"""What the session-store tests save and compare: updates, questions, deadlines (one builder
for every store's tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interlude import ToolUse
from interlude._interrupt import Interrupt
from interlude._messages import JsonValue
from interlude.sessions import SessionUpdate


def msg(text: str) -> dict[str, object]:
    """A user message saying ``text``."""
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def update(
    expected: int,
    first: int,
    messages: Sequence[Any],
    *,
    pause: dict[str, Any] | None = None,
    pending: Sequence[Interrupt] = (),
    state: dict[str, Any] | None = None,
    claim: dict[str, Any] | None = None,
    agent: str | None = None,
    audit: Sequence[dict[str, JsonValue]] = (),
) -> SessionUpdate:
    """A save of ``messages`` from index ``first`` over version ``expected`` (tools:
    ``["record"]``)."""
    return SessionUpdate(
        expected_version=expected,
        first_index=first,
        new_messages=list(messages),
        pause=pause,
        pending=[p.to_dict() for p in pending],
        tools=["record"],
        format_version=1,
        state=state,
        claim=claim,
        agent=agent,
        audit=list(audit),
    )


def interrupt(iid: str, name: str, raised_at: float, tool: str | None = None) -> Interrupt:
    """A question raised at ``raised_at``: before ``tool``'s call, or before a model call."""
    return Interrupt(
        id=iid,
        name=name,
        reason={"why": iid},
        source="before_tool_call" if tool else "before_model_call",
        tool_use=None if tool is None else ToolUse(f"tu-{iid}", tool, {"x": 1}),
        raised_at=raised_at,
    )


def deadline(iid: str, expires_at: float | None) -> dict[str, JsonValue]:
    """A pending question (as stored) that expires at ``expires_at`` (None: never)."""
    return Interrupt(
        id=iid, name="n", source="before_model_call", raised_at=1.0, expires_at=expires_at
    ).to_dict()


def with_extras(
    expected: int, pending: list[dict[str, JsonValue]], audit: list[dict[str, JsonValue]]
) -> SessionUpdate:
    """A save of agent "triage" with ``pending`` questions and ``audit`` entries."""
    return SessionUpdate(
        expected_version=expected,
        first_index=0,
        new_messages=[],
        pause=None,
        pending=pending,
        tools=[],
        format_version=1,
        agent="triage",
        audit=audit,
    )
