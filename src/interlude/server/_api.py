"""The JSON API under ``/api``: pending questions, one session, and answers to record.

Every route needs ``Authorization: Bearer <token>`` (401 otherwise, with no data). Recording
returns 202 at once: a worker applies the answers (on Temporal: the workflow has accepted them
and carries the run on). Status codes: 400 a body that is not the expected JSON; 404 no such
session; 403 the approver is in none of the groups that may answer the question (a list shows
each approver only what they may answer); 409 the session waits on no such question (not
paused, unknown id, deadline passed), the question already has a recorded answer, or another
vote toward its quorum waits to be applied; 422 an answer that does not fit its question
(``path`` names the field) or a stale ``shown`` digest; 503 (with ``Retry-After``) the store
is unavailable; 504 no one took the answer (or answered the query) in time (Temporal: no
worker on the workflow's task queue).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import (
    AnswerValidationError,
    InterruptExpiredError,
    InvalidSessionIdError,
    NotAllowedToAnswerError,
    ResumeError,
    ResumeInputError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateIntegrityError,
    StoreUnavailableError,
    refusal_code,
)
from ._output import JSON, UnsafeJson, loads
from ._views import pending_json, session_json

if TYPE_CHECKING:
    from ._auth import Approver
    from ._state import ServerState

__all__ = ["api_routes", "error_for", "pending_filters"]


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.interlude
    return state


def _unauthorized() -> Response:
    return JSON(
        {"error": "missing or wrong token: send Authorization: Bearer <token>"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="interlude"'},
    )


def _approver(request: Request) -> Approver | None:
    return _state(request).auth.bearer(request.headers.get("authorization"))


class BadRequest(ValueError):
    """A query parameter or body that the API cannot read (400)."""


def _number(request: Request, key: str) -> float | None:
    text = request.query_params.get(key)
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{key}: {text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise BadRequest(f"{key}: {text[:40]!r} is not a number of seconds >= 0")
    return value


def pending_filters(request: Request, now: float) -> dict[str, Any]:
    """The backend's ``pending`` filters the query asks for (BadRequest if one is malformed)."""
    limit_text = request.query_params.get("limit")
    limit: int | None = None
    if limit_text:
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise BadRequest(f"limit: {limit_text[:40]!r} is not a whole number from 1 to 1000")
        limit = int(limit_text)
    older = _number(request, "older_than")
    within = _number(request, "expiring_within")
    return {
        "agent": request.query_params.get("agent") or None,
        "name": request.query_params.get("name") or None,
        "tool_name": request.query_params.get("tool") or None,
        "older_than": None if older is None else now - older,
        "expiring_before": None if within is None else now + within,
        "limit": limit,
    }


def error_for(exc: Exception) -> tuple[int, dict[str, Any]] | None:
    """The status and body for an error of reading or answering a session (None: not ours)."""
    body: dict[str, Any] = {
        "error": str(exc),
        "code": refusal_code(exc),
        "interrupt_id": None,
        "path": None,
    }
    if isinstance(exc, AnswerValidationError):
        return 422, {**body, "interrupt_id": exc.interrupt_id, "path": list(exc.path)}
    if isinstance(exc, ResumeInputError):
        return 422, body
    if isinstance(exc, NotAllowedToAnswerError):
        return 403, {**body, "interrupt_id": exc.interrupt_id}
    if isinstance(exc, InterruptExpiredError):
        iid = None if exc.interrupt is None else exc.interrupt.id
        return 409, {**body, "interrupt_id": iid}
    if isinstance(exc, ResumeError | SessionConflictError):
        return 409, body
    if isinstance(exc, TimeoutError):  # e.g. no Temporal worker took the answer in time
        return 504, body
    if isinstance(exc, StoreUnavailableError):
        return None  # an outage, not an answer about the session: 503 (``_health.outage``)
    if isinstance(exc, InvalidSessionIdError):
        return 404, body
    if isinstance(exc, StateIntegrityError):  # a forged or unsigned pause: never answered
        return 409, body
    if isinstance(exc, SessionError) and not isinstance(exc, SessionCorruptError):
        return 404, body
    return None


async def list_pending(request: Request) -> Response:
    approver = _approver(request)
    if approver is None:
        return _unauthorized()
    state = _state(request)
    now = state.backend.clock()
    try:
        filters = pending_filters(request, now)
    except BadRequest as exc:
        return JSON({"error": str(exc)}, status_code=400)
    entries = await state.backend.pending(**filters)
    mine = [p for p in entries if p.interrupt.may_answer(approver.groups, now)]
    return JSON({"pending": [pending_json(p, now) for p in mine]})


async def show_session(request: Request) -> Response:
    approver = _approver(request)
    if approver is None:
        return _unauthorized()
    state = _state(request)
    try:
        view = await state.backend.session(request.path_params["session_id"])
    except Exception as exc:
        mapped = error_for(exc)
        if mapped is None:
            raise
        return JSON(mapped[1], status_code=mapped[0])
    return JSON(session_json(view, state.backend.clock(), approver.groups))


def _answers_body(raw: bytes) -> tuple[dict[str, Any], dict[str, str] | None]:
    try:
        body = loads(raw)
    except UnsafeJson as exc:
        raise BadRequest(f"the body is {exc}") from None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("answers"), dict)
        or not body["answers"]
    ):
        raise BadRequest(
            'the body is {"answers": {interrupt_id: answer, ...}, "shown": {...}?} with at least '
            "one answer"
        )
    extra = set(body) - {"answers", "shown"}
    if extra:
        raise BadRequest(f"unknown body fields: {sorted(extra)!r}")
    shown = body.get("shown")
    if shown is not None and not (
        isinstance(shown, dict) and all(isinstance(v, str) for v in shown.values())
    ):
        raise BadRequest('"shown" maps interrupt ids to digests (strings)')
    return body["answers"], shown


async def record_answers(request: Request) -> Response:
    approver = _approver(request)
    if approver is None:
        return _unauthorized()
    state = _state(request)
    session_id = request.path_params["session_id"]
    try:
        answers, shown = _answers_body(await request.body())
    except BadRequest as exc:
        return JSON({"error": str(exc)}, status_code=400)
    try:
        recorded = await state.backend.answer(
            session_id, answers, by=approver.name, shown=shown, groups=approver.groups
        )
    except UnicodeError:  # a question's data is not Unicode text: its digest cannot be made
        return JSON(
            {
                "error": "a question's data holds text that is not Unicode (a lone surrogate): "
                'its shown digest cannot be checked; answer without "shown"',
                "interrupt_id": None,
                "path": None,
            },
            status_code=422,
        )
    except Exception as exc:
        mapped = error_for(exc)
        if mapped is None:
            raise
        return JSON(mapped[1], status_code=mapped[0])
    state.recorded()
    return JSON(
        {"session": session_id, "recorded": [r.to_dict() for r in recorded]}, status_code=202
    )


async def openapi(request: Request) -> Response:
    from ._openapi import document

    return JSON(document())


def api_routes() -> list[Route]:
    return [
        Route("/api/pending", list_pending, methods=["GET"]),
        Route("/api/sessions/{session_id}", show_session, methods=["GET"]),
        Route("/api/sessions/{session_id}/answers", record_answers, methods=["POST"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
