"""A2A: Interlude agents served over A2A, and remote A2A agents used as tools.

Needs the ``[a2a]`` extra (the official ``a2a-sdk``). Importing :mod:`interlude.a2a` is light:
the SDK is imported when a name below is first used.

- :func:`a2a_routes` / :func:`create_a2a_app`: each agent of an :class:`~interlude.App` at
  ``/a2a/{agent}/`` with its card at ``/a2a/{agent}/.well-known/agent-card.json``; a pause is
  a task in ``input-required`` carrying its questions, a message with answers resumes it.
  Runs stream (``message/stream``, ``tasks/resubscribe``), tell the tasks' webhooks when they
  stop (push notifications) and are canceled with ``tasks/cancel``.
- :class:`RemoteAgent`: a remote A2A agent; ``.as_tool()`` makes it a tool whose remote
  questions become the calling agent's own, answered back on the same remote task.

See docs/protocols.md (A2A) and docs/reference/a2a.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import RemoteAgent, RemoteAgentTool
    from ._mount import inbox_routes as inbox_routes
    from ._routes import a2a_routes, create_a2a_app

__all__ = ["RemoteAgent", "RemoteAgentTool", "a2a_routes", "create_a2a_app"]

_WHERE = {
    "RemoteAgent": "._client",
    "RemoteAgentTool": "._client",
    "a2a_routes": "._routes",
    "create_a2a_app": "._routes",
    "inbox_routes": "._mount",  # the door the inbox server mounts (not in __all__)
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'interlude.a2a' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(where, __name__), name)


def __dir__() -> list[str]:
    return sorted(__all__)
