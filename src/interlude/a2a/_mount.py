"""The A2A routes ``interlude serve`` (``create_app``) adds next to the inbox, when it can."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..operate import App

__all__ = ["inbox_routes"]


def inbox_routes(app: App | None, backend: object, tokens: Mapping[str, Any]) -> list[BaseRoute]:
    """The A2A routes of ``app``'s agents on the inbox's store, with the inbox's tokens; none
    without an App, without a session store (Temporal) or without the ``[a2a]`` extra."""
    from ..operate import StoreBackend

    if app is None or not isinstance(backend, StoreBackend):
        return []
    try:
        from ._routes import a2a_routes
    except ImportError:  # no [a2a] extra: the inbox alone
        return []

    return a2a_routes(app, backend.store, tokens=tokens)
