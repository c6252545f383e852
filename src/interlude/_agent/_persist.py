"""An agent's link to its session in a store: load once, then save as the run goes.

Every save is a compare-and-swap on the session's version. A run claims the session with a
save before it does anything, so when two processes resume the same pause exactly one
proceeds; the other gets SessionConflictError with nothing run and nothing written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._sync import run_sync
from ..errors import SessionCorruptError, SessionError, StateFormatError

if TYPE_CHECKING:
    from ..sessions._protocol import SessionStore
    from ._agent import Agent
    from ._state import Pause

__all__ = ["SessionLink"]


class SessionLink:
    """Where an agent's state lives, and how much of it is already stored."""

    __slots__ = ("saved", "session_id", "store", "version")

    def __init__(self, store: SessionStore, session_id: str) -> None:
        from ..sessions._protocol import check_session_id

        self.store = store
        self.session_id = check_session_id(session_id)
        self.version = 0
        self.saved = 0  # messages already stored

    def load_into(self, agent: Agent) -> None:
        """Load the stored session into a freshly built agent (nothing is changed on error)."""
        from ._codec import FORMAT, decode_state

        stored = run_sync(self.store.load(self.session_id))
        if stored is None:
            return
        data = {
            "format": FORMAT,
            "version": stored.format_version,
            "messages": stored.messages,
            "state": stored.state,
            "pause": stored.pause,
            "tools": stored.tools,
        }
        try:
            loaded = decode_state(data)
        except StateFormatError as exc:
            raise SessionCorruptError(f"session {self.session_id!r}: {exc}") from None
        if loaded.pause is not None:
            agent._check_fits(loaded.pause.step, loaded.tools)
        agent._messages[:] = loaded.messages
        agent.state = loaded.state
        agent._pause = loaded.pause
        self.version = stored.version
        self.saved = len(loaded.messages)

    async def save(self, agent: Agent, pause: Pause | None, *, state: bool = False) -> None:
        """Store the messages appended since the last save, ``pause`` and (if asked) the state."""
        from ..sessions._protocol import SessionUpdate
        from ._codec import VERSION, encode_pause

        messages = agent._messages
        if len(messages) < self.saved:
            raise SessionError(
                f"session {self.session_id!r}: messages were removed from agent.messages; a "
                "session's conversation is append-only"
            )
        count = len(messages)
        update = SessionUpdate(
            expected_version=self.version,
            first_index=self.saved,
            new_messages=[m.to_dict() for m in messages[self.saved : count]],
            pause=None if pause is None else encode_pause(pause),
            pending=[] if pause is None else [i.to_dict() for i in pause.interrupts],
            tools=list(agent._tools),
            format_version=VERSION,
            state=_json_state(agent) if state else None,
        )
        self.version = await self.store.save(self.session_id, update)
        self.saved = count


def _json_state(agent: Agent) -> dict[str, object]:
    import json

    try:
        return dict(json.loads(json.dumps(agent.state)))
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"agent.state is not JSON-compatible: {exc}") from None
