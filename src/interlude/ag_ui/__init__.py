"""AG-UI: serve an :class:`~interlude.App`'s agents to AG-UI front-ends (extra ``[ag-ui]``).

``POST /ag-ui/{agent}`` takes a ``RunAgentInput`` (its thread id is the session), streams the
run's events as SSE and ends a paused run with ``RUN_FINISHED`` whose outcome is
``{"type": "interrupt", "interrupts": [...]}``. The next run's ``resume[]`` is checked as
``Agent.resume`` checks answers: a refused entry ends the run with ``RUN_ERROR`` and nothing
changes. ``interlude serve --app`` serves the route next to the inbox;
:func:`create_endpoint` makes it an ASGI application to mount elsewhere. See
docs/protocols.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._endpoint import create_endpoint, server_routes

__all__ = ["create_endpoint", "server_routes"]


def __getattr__(name: str) -> Any:
    # Loaded on use: the module needs starlette and ag-ui-protocol only when it serves.
    if name in __all__:
        from . import _endpoint

        return getattr(_endpoint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
