"""The inbox with Slack's door, as a test serves it: ``create_app(store, app, tokens=...,
doors=[*DEFAULT_DOORS, slack_door(...)])``, in the test process (:func:`inbox_with_slack`) or in
a process of its own (``python -m tests.channels.slack_serve``, configured by ``$SLACK_STORE``,
``$SLACK_PORT``, ``$SLACK_API_URL``, ``$SLACK_EFFECTS``): the process that answers is then not
the one that asked."""

from __future__ import annotations

import os
from typing import Any

from .slack_api import BOT_TOKEN, SECRET
from .slack_app import PEOPLE

TOKENS = {"slack-tests-token-0123456789": {"name": "ana", "groups": ["ops"]}}
"""The inbox's own tokens (the door's people are Slack's: ``PEOPLE``)."""


def inbox_with_slack(store: Any, app: Any, api_url: str, **door: Any) -> Any:
    """The inbox on ``store`` with the Slack door beside AG-UI and A2A."""
    from interlude.server import DEFAULT_DOORS, create_app, slack_door

    options: dict[str, Any] = {"users": PEOPLE, "token": BOT_TOKEN, "base_url": api_url, **door}
    return create_app(
        store, app, tokens=TOKENS, doors=[*DEFAULT_DOORS, slack_door(SECRET, **options)]
    )


def main() -> None:
    import uvicorn

    from .slack_app import app

    asgi = inbox_with_slack(os.environ["SLACK_STORE"], app, os.environ["SLACK_API_URL"])
    uvicorn.run(asgi, host="127.0.0.1", port=int(os.environ["SLACK_PORT"]), log_level="warning")


if __name__ == "__main__":
    main()
