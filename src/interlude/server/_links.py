"""One-time answer links on ``interlude serve`` (issue 39): ``GET /links/<token>`` shows the
question the link answers and never answers it; ``POST /links/<token>`` answers it once, as the
person the link names, through the inbox's answer path (``InboxBackend.answer``: groups,
quorum, the first answer wins, edits checked there). For a person the server's tokens name,
the link's groups are narrowed to those the server counts them in now
(``operate.narrowed``); a person it does not know answers with the link's groups.

The link is the credential (``interlude.operate.read_link``: HMAC-SHA256 under the link
secret); the door adds what a capability URL needs in a browser: the form carries a CSRF token,
an HMAC of a random per-browser cookie (``SameSite=Lax``, set by the link's page), so a post
is made from a link page this server showed that browser, never blindly or from another site
(``Sec-Fetch-Site: cross-site`` is refused too). A browser signed in to the inbox as someone
else is refused, so nobody answers in another's name by mistake. Every page is ``no-store``,
``no-referrer`` (the token never leaves in a ``Referer``) and ``noindex``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..operate import LINK_PATH, LinkProblem, check_link, link_key, narrowed, read_link

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from ..operate import AnswerLink, App, InboxBackend, People, SessionView
    from ._state import ServerState

__all__ = ["LINK_COOKIE", "LinksDoor", "links_door"]

LINK_COOKIE = "interlude_link"
"""The per-browser cookie the links' CSRF tokens are bound to."""

_STATUS = {"forged": 403, "expired": 410, "gone": 409, "changed": 409, "used": 409}
"""The HTTP status of each of a link's own refusals."""

_FORGED = LinkProblem(
    "forged",
    "This link is not valid: it was not made by this inbox, or it was changed. Nothing was done.",
)
_CROSS_SITE = (
    "This answer was sent from another site, or without the link's own page (a missing or "
    "wrong form token): open the link again and answer there. Nothing was done."
)
_NOT_UNICODE = (
    "This question's data holds text that is not Unicode, so its link cannot check that the "
    "answer is to the question shown: answer it in the inbox. Nothing was done."
)


class LinksDoor:
    """The door of one-time answer links (a ``server._doors.Door``): give it to
    ``create_app(doors=[..., links_door(secret)])``. ``admits`` says whether a request with a
    body may have it read without a bearer token or a session cookie: a post to a link this
    secret signed (a forged one is refused before its body is read)."""

    def __init__(self, secret: bytes | str, *, clock: Callable[[], float] | None = None) -> None:
        self._key = link_key(secret)
        self.clock = clock
        """The clock links expire by (None: the inbox backend's)."""

    def __call__(
        self, app: App | None, backend: InboxBackend, people: People, public_url: str | None
    ) -> list[BaseRoute]:
        pages = _Pages(self._key, backend, self.clock or backend.clock, people)
        return [
            Route(LINK_PATH + "{token}", pages.show, methods=["GET"]),
            Route(LINK_PATH + "{token}", pages.answer, methods=["POST"]),
        ]

    def admits(self, path: str, headers: Mapping[str, str] | None = None) -> bool:
        """Whether ``path`` is a link this door's secret signed (expired or not: the page
        says so); the headers are not needed."""
        if not path.startswith(LINK_PATH):
            return False
        return read_link(self._key, path[len(LINK_PATH) :]) is not None


def links_door(secret: bytes | str, *, clock: Callable[[], float] | None = None) -> LinksDoor:
    """The door that serves the one-time answer links made with ``secret`` (what
    ``Inbox(link_secret=...)`` and ``AnswerLinks`` sign with; ``$INTERLUDE_LINK_SECRET`` on the
    command line). ConfigurationError for a secret shorter than 16 bytes."""
    return LinksDoor(secret, clock=clock)


@dataclass(frozen=True, slots=True)
class _Refused:
    status: int
    heading: str
    message: str


def _refused(request: Request, refused: _Refused) -> HTMLResponse:
    return _page(request, refused.status, heading=refused.heading, error=refused.message)


def _refusal(problem: LinkProblem) -> _Refused:
    headings = {
        "forged": "This link is not valid",
        "expired": "This link has expired",
        "gone": "This question no longer waits",
        "changed": "This question has changed",
        "used": "This link has been used",
    }
    return _Refused(_STATUS[problem.code], headings[problem.code], problem.message)


class _Pages:
    """The two routes of a link, on one backend, with the link secret."""

    def __init__(
        self,
        key: bytes,
        backend: InboxBackend,
        clock: Callable[[], float],
        people: People | None = None,
    ) -> None:
        self.key = key
        self.backend = backend
        self.clock = clock
        self.people = people
        """The server's people (its tokens): a link for one of them answers with the groups
        the server counts them in now (``operate.narrowed``)."""

    def csrf(self, nonce: str) -> str:
        """The form token of a browser's link pages: an HMAC of its cookie's nonce."""
        message = f"link csrf\x00{nonce}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    async def show(self, request: Request) -> Response:
        """The question and the form that answers it (nothing is answered here)."""
        link = self._link(request, request.path_params["token"])
        if isinstance(link, _Refused):
            return _refused(request, link)
        found = await self._question(link)
        if isinstance(found, _Refused):
            return _refused(request, found)
        view, question = found
        nonce = request.cookies.get(LINK_COOKIE) or secrets.token_urlsafe(18)
        response = self._form(request, 200, link, view, question, self.csrf(nonce))
        response.set_cookie(
            LINK_COOKIE,
            nonce,
            max_age=7 * 24 * 3600,
            path="/",
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )
        return response

    async def answer(self, request: Request) -> Response:
        """Answer the link's question once, as its person (the answer rules decide)."""
        link = self._link(request, request.path_params["token"])
        if isinstance(link, _Refused):
            return _refused(request, link)
        posted = await request.form()
        data = {k: v for k, v in posted.multi_items() if isinstance(v, str)}
        nonce = request.cookies.get(LINK_COOKIE, "")
        presented = data.get("csrf", "")
        if (
            request.headers.get("sec-fetch-site") == "cross-site"
            or not nonce
            or not hmac.compare_digest(presented.encode(), self.csrf(nonce).encode())
        ):
            return _page(request, 403, heading="Refused", error=_CROSS_SITE)
        found = await self._question(link)
        if isinstance(found, _Refused):
            return _refused(request, found)
        view, question = found
        try:
            value = _value(link, question, data)
        except ValueError as exc:  # a field that cannot become the answer (FormError, JSON)
            return self._form(request, 422, link, view, question, presented, error=str(exc))
        refused = await self._record(link, question, value)
        if refused is not None:
            if refused.status == 422 and link.choice is None:  # a typed answer to correct
                return self._form(request, 422, link, view, question, presented, refused.message)
            return _refused(request, refused)
        state = _state(request)
        if state is not None:
            state.recorded()  # the in-process worker, if any, looks at once
        return _page(
            request,
            200,
            heading="Answer recorded",
            notice=f"{link.person.name}: {self.backend.taken}",
        )

    def _link(self, request: Request, token: str) -> AnswerLink | _Refused:
        """The link ``token`` is, or why it cannot be used here, now."""
        link = read_link(self.key, token)
        if link is None:
            return _refusal(_FORGED)
        if self.people is not None:
            link = narrowed(link, self.people.by_name(link.person.name))
        other = _signed_in_as(request)
        if other is not None and not _same(other, link.person.name):
            return _Refused(
                403,
                "This link is someone else's",
                f"This link was made for {link.person.name}, and this browser is signed in to "
                f"the inbox as {other}: answer there, or sign out first. Nothing was done.",
            )
        if link.expired(self.clock()):
            from ._questions import clock_text

            when = clock_text(link.expires_at)
            return _refusal(
                LinkProblem("expired", f"This link expired at {when}. Nothing was done.")
            )
        return link

    async def _question(self, link: AnswerLink) -> tuple[SessionView, Interrupt] | _Refused:
        """The link's session and the question it answers now, or why not."""
        from ._api import error_for

        try:
            view = await self.backend.session(link.session_id)
        except Exception as exc:
            mapped = error_for(exc)
            if mapped is None:
                raise
            return _Refused(mapped[0], "This question cannot be shown now", str(exc))
        checked = check_link(link, view, self.clock())
        if isinstance(checked, LinkProblem):
            return _refusal(checked)
        return view, checked

    async def _record(
        self, link: AnswerLink, question: Interrupt, value: JsonValue
    ) -> _Refused | None:
        """Hand the answer to the backend as the link's person; why it was refused, if it
        was (nothing recorded then)."""
        from ..errors import NotAllowedToAnswerError
        from ._api import error_for
        from ._views import shown_digest

        digest = shown_digest(question)
        if digest is None:
            return _Refused(422, "This question cannot be answered here", _NOT_UNICODE)
        try:
            await self.backend.answer(
                link.session_id,
                {question.id: value},
                by=link.person.name,
                shown={question.id: digest},
                groups=link.person.groups,
            )
        except UnicodeError:
            return _Refused(422, "This question cannot be answered here", _NOT_UNICODE)
        except Exception as exc:
            mapped = error_for(exc)
            if mapped is None:
                raise
            why = str(exc) + (_dropped(link) if isinstance(exc, NotAllowedToAnswerError) else "")
            return _Refused(mapped[0], "Your answer was not taken", why)
        return None

    def _form(
        self,
        request: Request,
        status: int,
        link: AnswerLink,
        view: SessionView,
        question: Interrupt,
        csrf: str,
        error: str | None = None,
    ) -> HTMLResponse:
        from ._questions import clock_text, question_item

        now = self.clock()
        by = {r.interrupt_id: r.by for r in view.recorded}
        item = question_item(view, question, link.person.groups, now, by.get(question.id))
        heading = "Answer this question" if link.choice is None else "Confirm your answer"
        if not item["may_answer"]:  # as the inbox's page: shown, without a form
            groups = ", ".join(link.person.groups) or "no group"
            heading, csrf, status = "You may not answer this question", "", 403
            error = (
                f"This link answers as {link.person.name} ({groups}), and only {item['who']} "
                "may answer this question now." + _dropped(link)
            )
        return _page(
            request,
            status,
            heading=heading,
            error=error,
            q=item,
            session_id=link.session_id,
            csrf=csrf,
            action=request.url.path,
            person=link.person.name,
            groups=", ".join(link.person.groups),
            until=clock_text(link.expires_at),
            choice=link.choice,
            applies=self.backend.applies,
        )


def _dropped(link: AnswerLink) -> str:
    """What a refusal adds for a link whose groups the server narrowed: which it dropped."""
    if not link.dropped:
        return ""
    return (
        f" (This server does not count {link.person.name} in {', '.join(link.dropped)}, "
        "which the link names.)"
    )


def _value(link: AnswerLink, question: Interrupt, data: dict[str, str]) -> JsonValue:
    """The answer a post gives: the link's own choice, or what its form's fields make."""
    from ._approval_form import answer_of, form_of
    from ._output import check_posted

    if link.choice is not None:
        return link.choice
    value = answer_of(form_of(question), data)
    check_posted(value)
    return value


def _state(request: Request) -> ServerState | None:
    state: ServerState | None = getattr(request.app.state, "interlude", None)
    return state


def _signed_in_as(request: Request) -> str | None:
    """Who the browser is signed in to the inbox as (its session cookie), or None."""
    from ._auth import COOKIE

    state = _state(request)
    cookie = request.cookies.get(COOKIE)
    if state is None or not cookie:
        return None
    approver = state.auth.from_cookie(cookie)
    return None if approver is None else approver.name


def _same(name: str, other: str) -> bool:
    from .._agent import same_person

    return same_person(name, [other])


def _page(request: Request, status: int, **context: Any) -> HTMLResponse:
    """``link.html`` with ``context``, and the headers a capability URL's page needs."""
    from ._output import scrub

    state = _state(request)
    assert state is not None, "the links door is served by interlude.server.create_app"
    values: dict[str, Any] = {
        "nonce": secrets.token_urlsafe(16),
        "approver": None,
        "logout_csrf": "",
        "health": None,
        "error": None,
        "notice": None,
        "q": None,
        "csrf": "",
        "choice": None,
        **context,
    }
    body = state.templates.get_template("link.html").render(**values)
    headers = {
        "Content-Security-Policy": (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Robots-Tag": "noindex, nofollow",
    }
    return HTMLResponse(scrub(body), status_code=status, headers=headers)
