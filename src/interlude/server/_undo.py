""" "Undo to here" on a session's history: the plan first, then the undo (``Agent.undo_async``,
see docs/undo.md).

With an App (``serve --app``) and a session store, the history rows of an agent's session
(not a graph node's: its graph carries it) offer "Undo to here" at each message after which a
tool call was made, while no run holds the session or waits to be recovered. ``GET
/sessions/{id}/undo?to=CHECKPOINT`` builds the session's agent and shows its dry run, changing
nothing: the calls whose compensations run (newest first), those with none (a box each, to
leave it as it is: unticked, the undo cannot run as asked, and the page says so), and where the
session will stand. ``POST /sessions/{id}/undo`` (CSRF-checked) runs the undo in this process,
given the signed-in person as ``by``, and goes back to the session page, which says where it
stands and lists the undo's audit entries. A compensation that asks first leaves the session
paused on its question, answered on that page like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .._messages import ToolUse

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._agent import Agent, UndoPlan
    from ..operate import SessionView
    from ._auth import Approver
    from ._state import ServerState

__all__ = [
    "can_undo",
    "may_undo",
    "plan_digest",
    "undo_audit_line",
    "undo_notice",
    "undo_points",
    "undo_routes",
    "undone_to",
]

STANDS = {
    "stopped": "stopped before its next step, as if its process had ended there: nothing in "
    "the inbox carries it on; interlude recover {session} does, from a shell (the calls after "
    "the checkpoint then run again, as the model asks for them)",
    "idle": "between runs: its run had ended there, and it takes a new prompt",
    "paused": "at that question, still open (nothing ran after it: there is nothing to undo)",
}
"""Where the session stands after the undo, by ``UndoPlan.stands``."""


def can_undo(state: ServerState, view: SessionView) -> bool:
    """Whether the page offers "Undo to here": an App to build the agent, a session store, an
    agent's session that is not a graph node's, and no run holding it or waiting to be
    recovered (an undo cannot start there)."""
    from ..operate import StoreBackend

    return (
        state.app is not None
        and isinstance(state.backend, StoreBackend)
        and view.kind == "agent"
        and ":node:" not in view.session_id
        and not view.running
        and not view.stopped
    )


def undo_points(view: SessionView) -> set[str]:
    """The message checkpoints (``m<i>``) after which a tool call was made: an undo to one of
    them has something to take back."""
    messages = view.messages
    last_call = max(
        (i for i, m in enumerate(messages) if any(isinstance(b, ToolUse) for b in m.content)),
        default=-1,
    )
    return {f"m{i}" for i in range(last_call + 1)}


def undone_to(view: SessionView) -> str | None:
    """The checkpoint a stopped session was undone to (its last audit entry is that undo's),
    or None: no worker carries such a run on (none of its processes died)."""
    if not view.stopped or not view.audit:
        return None
    last = view.audit[-1]
    about = last.answer
    if last.name != "undo" or last.interrupt_id or not isinstance(about, Mapping):
        return None
    to = about.get("checkpoint")
    return to if isinstance(to, str) else None


def undo_notice(view: SessionView, to: str, applies: str) -> str:
    """What the session page says once an undo to ``to`` ran."""
    if view.interrupts:
        return (
            f"Undo to {to}: a compensation waits on the question below; once it is answered, "
            f"{applies} carries the undo on."
        )
    if view.stopped:
        stands = STANDS["stopped"].format(session=view.session_id)
        return f"Undone to {to}: the session stands there, {stands}."
    return f"Undone to {to}: the session stands there, {STANDS['idle']}."


def undo_audit_line(when: str, entry: dict[str, Any]) -> str | None:
    """An ``undo`` audit entry in words (None for any other entry)."""
    about = entry.get("answer")
    if entry.get("name") != "undo" or entry.get("interrupt_id") or not isinstance(about, dict):
        return None
    call = f"{about.get('call')} ({about.get('tool')})"
    to = about.get("checkpoint")
    where = f" (undo to {to})" if isinstance(to, str) else " (a declined call's rollback)"
    if about.get("skipped"):
        return f"{when}  {entry.get('by')} left {call} as it is{where}"
    result = _brief(about.get("result"))
    how = f"by {about.get('compensation')}: {about.get('status')}, {result}"
    return f"{when}  {entry.get('by')} undid {call} {how}{where}"


def _brief(value: Any, room: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= room else text[: room - 3] + "..."


def _stands(plan: UndoPlan, session_id: str) -> str:
    return STANDS.get(plan.stands, plan.stands).format(session=session_id)


def _words(exc: Exception) -> str:
    """An UndoError's message in the inbox's words (a box to tick, not ``skip=``)."""
    text = str(exc).replace(" (@tool(compensate=...))", "")
    text = text.replace("; skip= it to leave it as it is", "")
    return text.replace("or skip= it to leave it as it is", "or leave it as it is")


async def _agent(request: Request, state: ServerState) -> Agent | Response:
    """The session's agent, built by the App the way "fork here" builds it; a page saying why
    not otherwise."""
    from .._agent import Agent
    from ..errors import InterludeError
    from ..operate import StoreBackend
    from ._api import error_for
    from ._pages import session_page

    if state.app is None or not isinstance(state.backend, StoreBackend):
        return await session_page(
            request, status=409, error="Undo needs the App's agents: serve with --app."
        )
    try:
        agent = await state.app.open_async(request.path_params["session_id"], state.backend.store)
    except InterludeError as exc:
        mapped = error_for(exc)
        return await session_page(request, status=mapped[0] if mapped else 409, error=str(exc))
    if not isinstance(agent, Agent) or ":node:" in request.path_params["session_id"]:
        return await session_page(request, status=409, error="Only an agent's session undoes.")
    return agent


async def _plan(
    agent: Agent, to: str, skip: list[str]
) -> tuple[UndoPlan | None, str | None, list[str]]:
    """The dry run of the undo (changing nothing), why it cannot run as asked (None: it can),
    and the calls that stop it. A plan is still shown when calls stop it: the one with them
    left as they are (or without the ``skip`` that names no call after the checkpoint)."""
    from ..errors import UndoError

    try:
        return await agent.undo_async(to, skip=skip, dry_run=True), None, []
    except UndoError as exc:
        problem, calls = _words(exc), list(exc.calls)
    strays = set(calls) <= set(skip)
    other = [c for c in skip if c not in calls] if strays else [*skip, *calls]
    try:
        plan = await agent.undo_async(to, skip=other, dry_run=True)
    except UndoError:
        plan = None
    return plan, problem, [] if strays else calls


async def undo_page(request: Request) -> Response:
    """The plan of an undo to ``?to=`` (``&skip=`` calls to leave as they are) and the form
    that runs it; nothing changes."""
    from ._pages import request_approver

    approver = request_approver(request)
    if approver is None:
        return RedirectResponse("/login", status_code=303)
    state: ServerState = request.app.state.interlude
    found = await _agent(request, state)
    if isinstance(found, Response):
        return found
    refused = await _refused(request, state, approver, request.path_params["session_id"])
    if refused is not None:
        return refused
    to = request.query_params.get("to", "")
    skip = request.query_params.getlist("skip")
    return await _show_plan(request, approver, found, to, skip)


async def _show_plan(
    request: Request,
    approver: Approver,
    agent: Agent,
    to: str,
    skip: list[str],
    *,
    status: int = 200,
    error: str | None = None,
) -> Response:
    from ..errors import InterludeError, UnknownCheckpointError
    from ._api import error_for
    from ._pages import _render, session_page

    state: ServerState = request.app.state.interlude
    try:
        plan, problem, lacking = await _plan(agent, to, skip)
    except UnknownCheckpointError as exc:
        return await session_page(request, status=404, error=str(exc))
    except InterludeError as exc:  # a run going on in this process, a store that failed
        mapped = error_for(exc)
        return await session_page(request, status=mapped[0] if mapped else 409, error=str(exc))
    return _render(
        request,
        "undo.html",
        status,
        approver,
        session_id=agent.session_id,
        to=to,
        plan=plan,
        problem=problem,
        lacking=lacking,
        skip=skip,
        messages=len(agent.messages),
        stands=None if plan is None else _stands(plan, agent.session_id or ""),
        csrf=_csrf(state, approver, agent.session_id or ""),
        shown=None if plan is None else plan_digest(plan),
        error=error,
    )


def _csrf(state: ServerState, approver: Approver, session_id: str) -> str:
    return state.auth.csrf(approver.cookie, f"undo:{session_id}")


def plan_digest(plan: UndoPlan) -> str:
    """What the plan page showed, as a digest the form carries back: every call after the
    checkpoint (undone or left as it is: the boxes the person ticks do not change it), its
    input, result and compensation. A session that ran on meanwhile gives another."""
    import hashlib

    calls = sorted((s.to_dict() for s in (*plan.steps, *plan.skipped)), key=lambda d: str(d))
    text = json.dumps([plan.to, plan.keep, calls], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def may_undo(approver: Approver, view: SessionView, now: float) -> bool:
    """Whether ``approver`` may undo the session: an undo drops the questions it waits on, so
    only someone who may answer every one of them (anyone signed in when it waits on none)."""
    return all(q.may_answer(approver.groups, now) for q in view.interrupts)


async def undo_here(request: Request) -> Response:
    """Run the posted undo (CSRF-checked; ``by`` the signed-in person); the session page."""
    from ..errors import InterludeError, UndoError, UnknownCheckpointError
    from ._api import error_for
    from ._pages import request_approver, session_page

    approver = request_approver(request)
    if approver is None:
        return HTMLResponse("sign in first", status_code=401)
    state: ServerState = request.app.state.interlude
    session_id = request.path_params["session_id"]
    posted = await request.form()
    data = {k: v for k, v in posted.multi_items() if isinstance(v, str)}
    skip = [v for k, v in posted.multi_items() if k == "skip" and isinstance(v, str)]
    if not state.auth.check_csrf(approver.cookie, f"undo:{session_id}", data.get("csrf")):
        return await session_page(request, status=403, error="Refused: a forged or stale form.")
    refused = await _refused(request, state, approver, session_id)
    if refused is not None:
        return refused
    found = await _agent(request, state)
    if isinstance(found, Response):
        return found
    to = data.get("to", "")
    try:
        plan = await found.undo_async(to, skip=skip, dry_run=True)
        if plan_digest(plan) != data.get("shown"):
            error = "The session changed since this plan was shown: here is the plan now."
            return await _show_plan(request, approver, found, to, skip, status=409, error=error)
        await found.undo_async(to, by=approver.name, skip=skip)
    except UnknownCheckpointError as exc:
        return await session_page(request, status=404, error=str(exc))
    except UndoError as exc:
        error = _words(exc)
        return await _show_plan(request, approver, found, to, skip, status=409, error=error)
    except InterludeError as exc:
        mapped = error_for(exc)
        return await session_page(request, status=mapped[0] if mapped else 409, error=str(exc))
    where = quote(session_id, safe="")
    return RedirectResponse(f"/sessions/{where}?undone={quote(to, safe='')}", status_code=303)


async def _refused(
    request: Request, state: ServerState, approver: Approver, session_id: str
) -> Response | None:
    """The page refusing a person who may not undo the session (see :func:`may_undo`)."""
    from ._pages import session_page

    view = await state.backend.session(session_id)
    if may_undo(approver, view, state.backend.clock()):
        return None
    return await session_page(
        request,
        status=403,
        error="Refused: the session waits on questions you may not answer, and an undo would "
        "drop them.",
    )


def undo_routes() -> list[Route]:
    return [
        Route("/sessions/{session_id}/undo", undo_page, methods=["GET"]),
        Route("/sessions/{session_id}/undo", undo_here, methods=["POST"]),
    ]
