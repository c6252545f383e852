"""The HTML inbox: sign in, the list of waiting questions, a page per session with a form per
question, and the posted answers. Rendered on the server with Jinja2 (autoescaped)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .._messages import Image, Json, Reasoning, Text, ToolResult, ToolUse
from ..operate import SessionView, WorkflowView
from ._api import error_for
from ._approval_form import answer_of, form_of
from ._auth import COOKIE, COOKIE_TTL, PRE_COOKIE, Approver
from ._forms import FormError
from ._health import health_line
from ._output import UnsafeJson, check_posted, scrub
from ._questions import (
    clock_text,
    decision_lines,
    question_item,
    short_id,
    shown_summary,
    worded,
)
from ._views import fingerprint, node_of, shown_digest

if TYPE_CHECKING:
    from .._messages import Message
    from ..sessions import PendingInterrupt
    from ._state import ServerState

__all__ = ["page_routes", "pending_rows", "request_approver"]


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.interlude
    return state


def request_approver(request: Request) -> Approver | None:
    """Who sent a browser request: the approver of its session cookie, or None."""
    return _state(request).auth.from_cookie(request.cookies.get(COOKIE))


def _render(
    request: Request,
    template: str,
    status: int = 200,
    approver: Approver | None = None,
    **context: Any,
) -> HTMLResponse:
    state = _state(request)
    nonce = secrets.token_urlsafe(16)
    logout_csrf = "" if approver is None else state.auth.csrf(approver.cookie, "logout")
    health = None if approver is None else health_line(state)
    body = state.templates.get_template(template).render(
        nonce=nonce, approver=approver, logout_csrf=logout_csrf, health=health, **context
    )
    headers = {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
            "base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    return HTMLResponse(scrub(body), status_code=status, headers=headers)


def _to_login() -> Response:
    return RedirectResponse("/login", status_code=303)


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


async def pending_rows(
    state: ServerState, groups: Collection[str] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """The list page's rows (with ``groups``, only the questions a member may answer now),
    and the fingerprint the event stream compares (of every question: one stream serves all)."""
    now = state.backend.clock()
    entries: list[PendingInterrupt] = await state.backend.pending()
    answered = await state.backend.answered({e.session_id for e in entries})
    rows = []
    for e in entries:
        i = e.interrupt
        rows.append(
            {
                "session": e.session_id,
                "agent": e.agent,
                "name": worded(i.reason, i.tool_use)[0] or i.name,
                "node": node_of(i),
                "short": short_id(i.id),
                "tool": None if i.tool_use is None else i.tool_use.name,
                "summary": shown_summary(i),
                "age": _age(now - e.raised_at),
                "expires_at": i.expires_at,
                "expired": i.expires_at is not None and i.expires_at <= now,
                "deadline": None if i.expires_at is None else clock_text(i.expires_at),
                "answered_by": answered.get(e.session_id, {}).get(i.id),
                "quorum": i.quorum,
                "escalated": i.escalated(now) and bool(i.escalate_to),
                "mine": groups is None or i.may_answer(groups, now),
            }
        )
    digest = fingerprint(
        (
            str(r["session"]),
            str(r["short"]),
            bool(r["expired"]),
            r["answered_by"] is not None,
            bool(r["escalated"]),
        )
        for r in rows
    )
    return [r for r in rows if r["mine"]], digest


async def login_page(request: Request) -> Response:
    pre = request.cookies.get(PRE_COOKIE) or secrets.token_urlsafe(24)
    response = _render(
        request, "login.html", error=None, csrf=_state(request).auth.csrf(pre, "login")
    )
    _set_cookie(request, response, PRE_COOKIE, pre, max_age=3600)
    return response


async def login(request: Request) -> Response:
    state = _state(request)
    form = await request.form()
    pre = request.cookies.get(PRE_COOKIE, "")
    if not state.auth.check_csrf(pre, "login", form.get("csrf")):
        return _render(request, "message.html", 403, heading="Refused", message=_FORGED)
    token = form.get("token")
    cookie = state.auth.issue_cookie(token.strip()) if isinstance(token, str) else None
    if cookie is None:
        return _render(
            request,
            "login.html",
            401,
            error="That token is not known here.",
            csrf=state.auth.csrf(pre, "login"),
        )
    response = RedirectResponse("/", status_code=303)
    _set_cookie(request, response, COOKIE, cookie, max_age=int(COOKIE_TTL))
    response.delete_cookie(PRE_COOKIE, path="/")
    return response


async def logout(request: Request) -> Response:
    approver = request_approver(request)
    if approver is None:
        return _to_login()
    form = await request.form()
    if not _state(request).auth.check_csrf(approver.cookie, "logout", form.get("csrf")):
        return _render(request, "message.html", 403, approver, heading="Refused", message=_FORGED)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        COOKIE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def _set_cookie(request: Request, response: Response, key: str, value: str, max_age: int) -> None:
    response.set_cookie(
        key,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


_NOT_UNICODE = (
    "This question's data holds text that is not Unicode (a lone surrogate), so the inbox "
    "cannot check that the answer is to the question shown: answer it with the CLI or the API."
)

_FORGED = (
    "This form did not come from this inbox (a missing or wrong CSRF token): nothing was done."
)


async def inbox_page(request: Request) -> Response:
    approver = request_approver(request)
    if approver is None:
        return _to_login()
    state = _state(request)
    rows, digest = await pending_rows(state, approver.groups)
    return _render(
        request,
        "list.html",
        approver=approver,
        rows=rows,
        fingerprint=digest,
        applies=state.backend.applies,
    )


async def pending_fragment(request: Request) -> Response:
    approver = request_approver(request)
    if approver is None:
        return HTMLResponse("sign in first", status_code=401)
    state = _state(request)
    rows, digest = await pending_rows(state, approver.groups)
    return _render(
        request, "_pending.html", rows=rows, fingerprint=digest, applies=state.backend.applies
    )


def _transcript(messages: list[Message]) -> list[str]:
    lines = []
    for m in messages:
        for block in m.content:
            if isinstance(block, Text) and block.text:
                lines.append(f"{m.role}: {block.text}")
            elif isinstance(block, ToolUse):
                lines.append(f"  -> {block.name} {json.dumps(block.input, ensure_ascii=False)}")
            elif isinstance(block, ToolResult):
                text = " ".join(
                    b.text if isinstance(b, Text)
                    else json.dumps(b.value) if isinstance(b, Json) else "[image]"
                    for b in block.content
                )  # fmt: skip
                lines.append(f"  <- {block.status}: {text[:200]}")
            elif isinstance(block, Reasoning):
                lines.append(f"  (thinking) {block.text[:80]}")
            elif isinstance(block, Image):
                lines.append(f"{m.role}: [image {block.media_type}]")
    return lines


def _audit_line(entry: dict[str, Any]) -> str:
    from ._undo import undo_audit_line

    at = entry.get("at")
    when = clock_text(at) if isinstance(at, int | float) else "(no time)"
    undone = undo_audit_line(when, entry)
    if undone is not None:
        return undone
    answer = json.dumps(entry.get("answer"), ensure_ascii=False)
    if entry.get("expired"):
        return f"{when}  {entry.get('name')} expired unanswered: {answer}"
    vote = entry.get("vote")
    counted = f" (vote {vote[0]} of {vote[1]})" if isinstance(vote, list) and len(vote) == 2 else ""
    return f"{when}  {entry.get('by')} answered {entry.get('name')}: {answer}{counted}"


async def session_page(
    request: Request, *, status: int = 200, error: str | None = None
) -> Response:
    approver = request_approver(request)
    if approver is None:
        return _to_login()
    state = _state(request)
    session_id = request.path_params["session_id"]
    try:
        view = await state.backend.session(session_id)
    except Exception as exc:
        mapped = error_for(exc)
        if mapped is None:
            raise
        heading = "No such session" if mapped[0] == 404 else "This session cannot be shown now"
        return _render(
            request, "message.html", mapped[0], approver, heading=heading, message=str(exc)
        )
    from ._history import can_fork, history_rows
    from ._undo import can_undo, may_undo, undo_notice, undo_points, undone_to

    now = state.backend.clock()
    by = {r.interrupt_id: r.by for r in view.recorded}
    questions = [
        question_item(view, i, approver.groups, now, by.get(i.id)) for i in view.interrupts
    ]
    notice = None
    if request.query_params.get("answered") and error is None and _waits(view):
        notice = state.backend.taken
    undone = request.query_params.get("undone")
    if undone and error is None:
        notice = undo_notice(view, undone, state.backend.applies)
    workflow = view.workflow if isinstance(view, WorkflowView) else None
    return _render(
        request,
        "session.html",
        status,
        approver,
        view=view,
        questions=questions,
        transcript=_transcript(view.messages),
        audit=[_audit_line(e.to_dict()) for e in view.audit],
        history=history_rows(view),
        can_fork=can_fork(state, view),
        fork_csrf=state.auth.csrf(approver.cookie, f"fork:{session_id}"),
        can_undo=can_undo(state, view) and may_undo(approver, view, now),
        undo_points=undo_points(view),
        undone_to=undone_to(view),
        decisions=decision_lines(view.decisions),
        csrf=state.auth.csrf(approver.cookie, f"answer:{session_id}"),
        error=error,
        notice=notice,
        applies=state.backend.applies,
        workflow=workflow,
    )


def _waits(view: SessionView) -> bool:
    """Whether an answer just given still waits to be carried on: recorded for a worker, or
    its run going now. Once the run has ended or paused again, the banner saying so goes."""
    return bool(view.recorded) or view.running


_ICON: list[bytes] = []


async def favicon(request: Request) -> Response:
    """The inbox's icon (asked for by every browser, signed in or not: it holds no data)."""
    if not _ICON:
        from importlib.resources import files

        _ICON.append(files("interlude.server").joinpath("static/favicon.ico").read_bytes())
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(_ICON[0], media_type="image/x-icon", headers=headers)


async def answer(request: Request) -> Response:
    approver = request_approver(request)
    if approver is None:
        return HTMLResponse("sign in first", status_code=401)
    state = _state(request)
    session_id = request.path_params["session_id"]
    posted = await request.form()
    data = {k: v for k, v in posted.multi_items() if isinstance(v, str)}
    if not state.auth.check_csrf(approver.cookie, f"answer:{session_id}", data.get("csrf")):
        return _render(request, "message.html", 403, approver, heading="Refused", message=_FORGED)
    interrupt_id = data.get("interrupt_id", "")
    try:
        view = await state.backend.session(session_id)
    except Exception as exc:
        mapped = error_for(exc)
        if mapped is None:
            raise
        return await session_page(request, status=mapped[0], error=str(exc))
    question = next((i for i in view.interrupts if i.id == interrupt_id), None)
    if question is None:
        return await session_page(
            request, status=409, error=f"No pending question {interrupt_id[:40]!r} in this session."
        )
    shown = data.get("shown")
    if not shown:
        missing = "The form did not say which version of the question it showed (no 'shown'): "
        missing += "reload the page and answer again."
        error = _NOT_UNICODE if shown_digest(question) is None else missing
        return await session_page(request, status=422, error=error)
    try:
        value = answer_of(form_of(question), data)
        check_posted(value)
        await state.backend.answer(
            session_id,
            {interrupt_id: value},
            by=approver.name,
            shown={interrupt_id: shown},
            groups=approver.groups,
        )
        state.recorded()
    except (FormError, UnsafeJson) as exc:
        return await session_page(request, status=422, error=str(exc))
    except UnicodeError:  # the question's data is not Unicode text: its digest cannot be made
        return await session_page(request, status=422, error=_NOT_UNICODE)
    except Exception as exc:
        mapped = error_for(exc)
        if mapped is None:
            raise
        return await session_page(request, status=mapped[0], error=str(exc))
    return RedirectResponse(f"/sessions/{quote(session_id, safe='')}?answered=1", status_code=303)


def page_routes() -> list[Route]:
    return [
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", inbox_page, methods=["GET"]),
        Route("/fragments/pending", pending_fragment, methods=["GET"]),
        Route("/sessions/{session_id}", session_page, methods=["GET"]),
        Route("/sessions/{session_id}/answer", answer, methods=["POST"]),
    ]


async def fork_here(request: Request) -> Response:
    """Fork the session at the posted checkpoint; the new session's page."""
    from .._agent import Agent
    from ..errors import InterludeError, UnknownCheckpointError
    from ..operate import StoreBackend
    from ._api import error_for

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
