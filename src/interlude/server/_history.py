"""A session's history on its page, and "fork here": a new session standing at a checkpoint.

The session page lists the checkpoints of an agent's session (``Agent.checkpoints``, read from
the session as the page shows it). With an App (``serve --app``) and a session store, a
signed-in person may fork the session at a question or a message checkpoint: ``POST
/sessions/{id}/fork`` (CSRF-checked) builds the session's agent, forks it there under a new
session id, with that person as who forked, and shows the new session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request

    from ..operate import SessionView
    from ._state import ServerState

__all__ = ["FORKABLE", "can_fork", "history_rows", "history_routes"]

FORKABLE = ("prompt", "model_reply", "tool_result", "question")
"""The kinds of checkpoint the page offers to fork at."""


def can_fork(state: ServerState, view: SessionView) -> bool:
    """Whether the page offers "fork here": an App to build the agent, a session store, and
    an agent's session (not a graph's, not a workflow)."""
    from ..operate import StoreBackend

    return (
        state.app is not None and isinstance(state.backend, StoreBackend) and (view.kind == "agent")
    )


def history_rows(view: SessionView) -> list[dict[str, Any]]:
    """The session's checkpoints as the page's rows (id, kind, when, summary, forkable)."""
    from .._agent import checkpoints_of
    from ._questions import clock_text

    if view.kind != "agent":
        return []
    points = checkpoints_of(view.messages, view.audit, view.interrupts)
    return [
        {
            "id": p.id,
            "kind": p.kind.replace("_", " "),
            "when": "" if p.when is None else clock_text(p.when),
            "summary": p.summary,
            "forkable": p.kind in FORKABLE,
        }
        for p in points
    ]


async def fork_here(request: Request) -> Response:
    """Fork the session at the posted checkpoint; the new session's page."""
    from .._agent import Agent
    from ..errors import InterludeError, UnknownCheckpointError
    from ..operate import StoreBackend
    from ._api import error_for
    from ._pages import request_approver, session_page

    approver = request_approver(request)
    if approver is None:
        return HTMLResponse("sign in first", status_code=401)
    state: ServerState = request.app.state.interlude
    session_id = request.path_params["session_id"]
    posted = await request.form()
    data = {k: v for k, v in posted.multi_items() if isinstance(v, str)}
    if not state.auth.check_csrf(approver.cookie, f"fork:{session_id}", data.get("csrf")):
        return await session_page(request, status=403, error="Refused: a forged or stale form.")
    if state.app is None or not isinstance(state.backend, StoreBackend):
        return await session_page(
            request, status=409, error="Forks need the App's agents: serve with --app."
        )
    try:
        agent = await state.app.open_async(session_id, state.backend.store)
        if not isinstance(agent, Agent):
            return await session_page(request, status=409, error="Only an agent's session forks.")
        fork = await agent.fork_async(data.get("at", ""), by=approver.name)
    except UnknownCheckpointError as exc:
        return await session_page(request, status=404, error=str(exc))
    except InterludeError as exc:
        mapped = error_for(exc)
        return await session_page(request, status=mapped[0] if mapped else 409, error=str(exc))
    new = quote(fork.session_id or "", safe="")
    return RedirectResponse(f"/sessions/{new}", status_code=303)


def history_routes() -> list[Route]:
    return [Route("/sessions/{session_id}/fork", fork_here, methods=["POST"])]
