"""What the server's routes share: the inbox, the auth, the templates, the shutdown signal."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sessions import Inbox
    from ._auth import Auth

__all__ = ["ServerState"]


@dataclass(slots=True, kw_only=True)
class ServerState:
    inbox: Inbox
    auth: Auth
    poll: float
    templates: Any
    """The Jinja2 environment of the HTML pages."""
    stream_seconds: float = 300.0
    """How long one event stream stays open (the browser reconnects)."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    worker: Any = None
    """The in-process worker (``serve --worker``), woken when an answer is recorded."""

    def recorded(self) -> None:
        """An answer was recorded: the in-process worker (if any) looks at once."""
        if self.worker is not None:
            self.worker.wake()
