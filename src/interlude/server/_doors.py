"""The other doors served beside the inbox: each is a function that gives its routes for an
App, the inbox's backend, its people and the server's public URL (``Door``).
``create_app(doors=...)`` takes them; by default the AG-UI and A2A doors, each when its extra
is installed. A new door is a translator (its package) plus one entry here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..operate import App, InboxBackend, People

__all__ = ["DEFAULT_DOORS", "Door"]

Door: TypeAlias = "Callable[[App | None, InboxBackend, People, str | None], list[BaseRoute]]"
"""A door's routes for the App (None: none), the inbox's backend, who may use it and the URL
the server is reached at (``create_app(public_url=...)``; None: not configured, a door that
names its own address uses the address the server is bound to, never a request's ``Host``)."""


def _ag_ui(
    app: App | None, backend: InboxBackend, people: People, public_url: str | None
) -> list[BaseRoute]:
    from ..ag_ui import server_routes  # [] without the [ag-ui] extra

    return server_routes(app, backend, people)


def _a2a(
    app: App | None, backend: InboxBackend, people: People, public_url: str | None
) -> list[BaseRoute]:
    from ..a2a import inbox_routes  # [] without the [a2a] extra

    return inbox_routes(app, backend, people, public_url=public_url)


DEFAULT_DOORS: tuple[Door, ...] = (_ag_ui, _a2a)
"""AG-UI at ``/ag-ui/{agent}``, A2A at ``/a2a/{agent}/`` (with an App, each with its extra)."""
