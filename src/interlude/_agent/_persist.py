"""An agent's link to its session in a store: load once, then save as the run goes.

Every save is a compare-and-swap on the session's version. A run claims the session with a
save before it does anything, so when two processes resume the same pause exactly one
proceeds; the other gets SessionConflictError with nothing run and nothing written.

While a run goes, the stored pause slot holds a *run marker* (who runs it, since when) instead
of a pause, so a process that loads the session mid-run does not start a second run on it. A
marker older than the lease is taken to be left by a process that died.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._sync import run_sync
from ..errors import SessionConflictError, SessionCorruptError, SessionError, StateFormatError

if TYPE_CHECKING:
    from ..sessions._protocol import SessionStore
    from ._agent import Agent
    from ._state import Pause

__all__ = ["SessionLink", "split_marker"]


class SessionLink:
    """Where an agent's state lives, and how much of it is already stored."""

    __slots__ = ("interrupted", "lease", "running", "saved", "session_id", "store", "version")

    def __init__(self, store: SessionStore, session_id: str, lease: float) -> None:
        from ..sessions._protocol import check_session_id

        self.store = store
        self.session_id = check_session_id(session_id)
        self.lease = lease
        self.version = 0
        self.saved = 0  # messages already stored
        self.running: dict[str, object] | None = None  # another process's run marker, if any
        self.interrupted: Pause | None = None  # the pause that marked run had resumed, if any

    def load_into(self, agent: Agent) -> None:
        """Load the stored session into a freshly built agent (nothing is changed on error)."""
        from ._codec import FORMAT, decode_state

        stored = run_sync(self.store.load(self.session_id))
        if stored is None:
            return
        pause, self.running = split_marker(stored.pause)
        interrupted = None if self.running is None else self.running.get("resumed")
        data = {
            "format": FORMAT,
            "version": stored.format_version,
            "messages": stored.messages,
            "state": stored.state,
            "pause": pause,
            "tools": stored.tools,
        }
        try:
            loaded = decode_state(data)
            if isinstance(interrupted, dict):
                from ._codec import decode_pause

                self.interrupted = decode_pause(interrupted, "pause.running.resumed")
        except StateFormatError as exc:
            raise SessionCorruptError(f"session {self.session_id!r}: {exc}") from None
        if loaded.pause is not None:
            agent._check_fits(loaded.pause.step, loaded.tools)
        agent._messages[:] = loaded.messages
        agent.state = loaded.state
        agent._pause = loaded.pause
        self.version = stored.version
        self.saved = len(loaded.messages)

    def check_not_running(self) -> None:
        """SessionConflictError if another process's run holds the session (within the lease)."""
        import time

        marker = self.running
        if marker is None:
            return
        since = marker.get("since")
        age = time.time() - since if isinstance(since, int | float) else float("inf")
        if age < self.lease:
            raise SessionConflictError(
                f"session {self.session_id!r} is being run by {marker.get('owner')!r} (for "
                f"{age:.0f} s); wait for it to finish, or if that process died, for the "
                f"{self.lease:g} s session lease to pass"
            )

    async def claim(self, agent: Agent, resuming: Pause | None) -> None:
        """Mark the session as running in this process; of two claimants one wins.

        The marker keeps the pause being resumed, so that if this process dies mid-run the
        calls it had already finished are not reported as not run."""
        await self.save(agent, resuming, running=True)
        self.running = self.interrupted = None

    async def save(
        self,
        agent: Agent,
        pause: Pause | None,
        *,
        state: bool = False,
        running: bool = False,
    ) -> None:
        """Store the messages appended since the last save, ``pause`` (or, when ``running``,
        this run's marker, keeping ``pause`` as the one resumed) and, if asked, the state.

        The store's save is shielded: if the run is cancelled meanwhile, the save still
        completes and is recorded here before the cancellation goes on, so the agent never
        loses track of what the store holds."""

        import asyncio

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
            pause=_marker(pause) if running else None if pause is None else encode_pause(pause),
            pending=[] if pause is None or running else [i.to_dict() for i in pause.interrupts],
            tools=list(agent._tools),
            format_version=VERSION,
            state=_json_state(agent) if state else None,
        )
        saving = asyncio.ensure_future(self.store.save(self.session_id, update))
        try:
            version = await asyncio.shield(saving)
        except asyncio.CancelledError:
            version = await saving  # let it land, note it, then let the cancel go on
            self.version, self.saved = version, count
            raise
        self.version, self.saved = version, count


_RUNNING = "running"


def split_marker(
    stored_pause: dict[str, object] | None,
) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """(the pause, the run marker) of a stored pause slot: one of them, or neither."""
    if isinstance(stored_pause, dict):
        marker = stored_pause.get(_RUNNING)
        if isinstance(marker, dict):
            return None, marker
    return stored_pause, None


def _marker(resuming: Pause | None) -> dict[str, object]:
    import os
    import socket
    import time

    from ._codec import encode_pause

    marker: dict[str, object] = {
        "owner": f"{socket.gethostname()}:{os.getpid()}",
        "since": time.time(),
    }
    if resuming is not None:
        marker["resumed"] = encode_pause(resuming)
    return {_RUNNING: marker}


def _json_state(agent: Agent) -> dict[str, object]:
    import json

    try:
        return dict(json.loads(json.dumps(agent.state)))
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"agent.state is not JSON-compatible: {exc}") from None
