"""The user's own agent module of the CLI tests (``user_agent``): put in the folder a command
runs in, and a session of it started there, as the user's own program starts one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support.cli import as_a_process, cli_env

HERE = Path(__file__).resolve().parent


def user_env(folder: Path) -> dict[str, str]:
    """The environment of a user whose own agent module, ``user_agent.py``, lies in
    ``folder`` (copied there: ``--app user_agent:app`` imports it from the working folder) and
    whose emails go to ``folder/outbox.jsonl``."""
    shutil.copyfile(HERE / "user_agent.py", folder / "user_agent.py")
    return cli_env(USER_AGENT_OUTBOX=str(folder / "outbox.jsonl"))


def start_user_session(
    cwd: Path, session_id: str, env: dict[str, str], *, at: float | None = None
) -> dict[str, Any]:
    """A session of the user's agent (see ``user_agent``) started in ``cwd``'s default store,
    as the user's own program starts one: it pauses before the first email. What it returned,
    as JSON (``at``: the epoch second its clock says)."""
    from . import user_agent

    with as_a_process(cwd, env, at):
        opened = user_agent.app.start("user", session_id, "sqlite:///.interlude/demo.db")
        try:
            result = opened(user_agent.PROMPT)  # type: ignore[operator]
        finally:
            opened.close()  # type: ignore[union-attr]
    return {
        "session": session_id,
        "stop_reason": result.stop_reason,
        "interrupts": [
            {"id": i.id, "name": i.name, "raised_at": i.raised_at} for i in result.interrupts
        ],
    }
