"""What the checks share: the agent they drive, update and question builders, bad ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..._interrupt import Interrupt
from ...errors import SessionConflictError
from ...sessions import SessionStore, SessionUpdate, StoredSession
from .._models import ScriptedModel

__all__ = [
    "BAD_IDS",
    "_loaded",
    "_question",
    "_refused",
    "_runs",
    "_text",
    "_update",
    "build_agent",
]

BAD_IDS = ["", "../x", "/etc/passwd", "a/b", "a\\b", ".hidden", "..", "x" * 201, "a\x00b", "-x"]


def build_agent(
    store: SessionStore,
    session_id: str,
    turns: list[Any],
    counter: Path,
    messages: Any = (),
    lease: float = 600.0,
) -> Any:
    """The agent every check uses: a ``record`` tool (it appends a line to ``counter``, so runs
    can be counted across processes) behind a before-tool approval hook."""
    from ... import Agent, tool
    from ...hooks import BeforeToolCallEvent

    @tool
    def record(item: str) -> str:
        """Record an item.

        Args:
            item: What to record.
        """
        with counter.open("a") as f:
            f.write(f"{item}\n")
        return f"recorded {item}"

    def approve(event: BeforeToolCallEvent) -> None:
        if not event.interrupt("approve", reason={"item": event.tool_use.input.get("item")}):
            event.cancel("not approved")

    agent = Agent(
        ScriptedModel(turns),
        tools=[record],
        messages=messages,
        session=store,
        session_id=session_id,
        session_lease=lease,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent


def _update(version: int, first: int, messages: list[Any], **kw: Any) -> SessionUpdate:
    return SessionUpdate(
        expected_version=version,
        first_index=first,
        new_messages=messages,
        pause=kw.get("pause"),
        pending=kw.get("pending", []),
        tools=kw.get("tools", ["record"]),
        format_version=kw.get("format_version", 1),
        state=kw.get("state"),
        claim=kw.get("claim"),
        agent=kw.get("agent"),
        audit=kw.get("audit", []),
        applied_answers=kw.get("applied_answers", []),
    )


async def _loaded(store: SessionStore, session_id: str) -> StoredSession:
    got = await store.load(session_id)
    assert got is not None, f"session {session_id!r} was not stored"
    return got


async def _refused(store: SessionStore, session_id: str, update: SessionUpdate) -> None:
    try:
        await store.save(session_id, update)
    except SessionConflictError:
        return
    raise AssertionError(f"a stale save was accepted: {update}")


def _question(
    iid: str, expires_at: float | None, raised_at: float = 1.0, **kw: Any
) -> dict[str, Any]:
    return Interrupt(
        id=iid,
        name="ask",
        source="before_model_call",
        raised_at=raised_at,
        expires_at=expires_at,
        **kw,
    ).to_dict()


def _text(i: int, size: int = 10) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"{i}:" + "x" * size}]}


def _runs(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []
