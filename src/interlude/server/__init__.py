"""The web inbox: a JSON API, server-rendered HTML pages and a live list of the questions that
paused agents wait on, with answers recorded for a worker to apply (``interlude serve``), or,
on Temporal, handed to the paused workflows (``interlude.temporal.TemporalInbox``).

Needs the ``[server]`` extra (Starlette, uvicorn, Jinja2, python-multipart); importing
``interlude`` does not import it. See ``docs/inbox.md``.
"""

from __future__ import annotations

from ..operate import InboxBackend, WorkflowView
from ._app import create_app, stop_streams
from ._auth import load_tokens
from ._doors import DEFAULT_DOORS, Door
from ._links import links_door
from ._serving import uvicorn_config
from ._slack import slack_door, slack_door_from_env

__all__ = [
    "DEFAULT_DOORS",
    "Door",
    "InboxBackend",
    "WorkflowView",
    "create_app",
    "links_door",
    "load_tokens",
    "slack_door",
    "slack_door_from_env",
    "stop_streams",
    "uvicorn_config",
]
