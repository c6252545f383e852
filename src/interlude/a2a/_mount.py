"""The A2A routes ``interlude serve`` (``create_app``) adds next to the inbox, when it can."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..operate import App, People

__all__ = ["inbox_routes"]


def inbox_routes(
    app: App | None, backend: object, people: People, *, public_url: str | None = None
) -> list[BaseRoute]:
    """The A2A routes of ``app``'s agents on the inbox's store, for the inbox's people, their
    cards naming ``public_url`` (see :func:`a2a_routes`); none without an App, without a
    session store (Temporal) or without the ``[a2a]`` extra."""
    from ..operate import StoreBackend

    if app is None or not isinstance(backend, StoreBackend):
        return []
    try:
        from ._routes import routes_for
    except ImportError:  # no [a2a] extra: the inbox alone
        return []

    return routes_for(app, backend.store, people, public_url=public_url)
