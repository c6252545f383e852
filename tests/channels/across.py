"""Every door of issue 39 on one served store, for the tests that cut across them:
``interlude serve --app tests.doors.doors_app:app --mcp`` (the door suite's serving process,
``tests/doors/served.py``) with one-time links (``$INTERLUDE_LINK_SECRET``) and Slack's actions
(``$INTERLUDE_SLACK_*``, updating messages on a loopback Slack in the test process), beside the
inbox's JSON API, AG-UI and A2A; and a small driver per door that answers one question as one
person and reads back whether the answer was taken, and with what refusal.

The drivers of the inbox, AG-UI, A2A and the command line are the door suite's
(``tests/doors/answering.py``); those of a link, a Slack click and an MCP client are here. Each
gives an :class:`~tests.doors.answering.Outcome`. Two doors put no refusal code on their wire:
a link answers with a page for a person (its HTTP status, and the floor's words on it), and an
MCP client is never asked a question it may not answer or that another door answered meanwhile
(the call passes it over, and its result's notes give the floor's words);
:func:`check_refused` reads those by the words that go with the code, as the door suite read
the command line's error before it gave a code.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.doors import answering, served
from tests.doors.answering import Outcome

from .slack_api import BOT_TOKEN, CHANNEL, SECRET, SlackApi, clicked, loopback_slack

LINK_SECRET = "across-the-doors-link-secret-0123456789"
"""``$INTERLUDE_LINK_SECRET`` of the serving process, which the tests make links with."""
ACTIONS = "/channels/slack/actions"
INBOX = "http://inbox.test"
"""The inbox's address in the Slack messages (never followed here)."""


@dataclass(frozen=True)
class Who:
    """A person as each door knows them: an inbox token (the inbox, AG-UI, A2A and MCP doors;
    the command line answers as its name; None: no token), a Slack user id, and their name and
    groups (what a link made for them says)."""

    name: str
    groups: tuple[str, ...]
    token: str | None
    slack: str


ANA = Who("ana", ("ops",), served.ANA, "U0ANA")
BO = Who("bo", ("ops",), served.BO, "U0BO")
CY = Who("cy", (), served.CY, "U0CY")
"""In no group: the door suite's token holder in none."""
DEE = Who("dee", ("ops",), None, "U0DEE")
"""In ops, with no inbox token: she answers from Slack and with links."""
PROBE = Who("probe", ("ops",), None, "")
"""Whose link a browser opens only for the page's form token (never pressed)."""
PEOPLE = (ANA, BO, CY, DEE)

for _who in PEOPLE:  # the door suite's tokens name the same people
    if _who.token is not None:
        assert served.TOKENS[_who.token] == {"name": _who.name, "groups": list(_who.groups)}


def slack_users() -> str:
    """``$INTERLUDE_SLACK_USERS``: each person's Slack user id, name and groups."""
    return ",".join(
        f"{w.slack}={w.name}" + (f":{'+'.join(w.groups)}" if w.groups else "") for w in PEOPLE
    )


@dataclass
class World:
    """A serving process with every door (at ``url``) on the SQLite store ``db``, and the
    loopback Slack its Slack door updates (``api``, its Web API at ``api_url``)."""

    url: str
    db: Path
    api: SlackApi
    api_url: str

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.db}"

    def notify(self) -> int:
        """One pass of a worker's notifier, in this process, to the loopback Slack: each
        question asked is posted, each answered one's message updated (the outbox is in the
        store). How many notifications it delivered."""
        from interlude.notify import Notifier, Slack
        from interlude.sessions import open_store

        async def once() -> int:
            store: Any = open_store(self.store_url)
            try:
                slack = Slack(CHANNEL, token=BOT_TOKEN, base_url=self.api_url)
                return await Notifier(store, [slack], inbox_url=INBOX).run_once()
            finally:
                store.close()

        return asyncio.run(once())

    def message(self, session: str) -> dict[str, Any]:
        """The Slack message that asks ``session``'s question, as it stands now."""
        found = [
            m
            for m in self.api.posted()
            if m.get("metadata", {}).get("event_payload", {}).get("session_id") == session
        ]
        assert len(found) == 1, f"{len(found)} messages about {session}: {self.api.posted()}"
        return found[0]


def doors_env(api_url: str) -> dict[str, str]:
    """The environment that opens the links and Slack doors of ``interlude serve``, Slack's
    Web API being the loopback one at ``api_url``."""
    return {
        "INTERLUDE_LINK_SECRET": LINK_SECRET,
        "INTERLUDE_SLACK_SIGNING_SECRET": SECRET,
        "INTERLUDE_SLACK_USERS": slack_users(),
        "INTERLUDE_SLACK_TOKEN": BOT_TOKEN,
        "INTERLUDE_SLACK_API_URL": api_url,
    }


def require_doors() -> None:
    """Skip the calling test (fail it in CI) unless every door's extra is installed."""
    from tests.doors.conftest import missing_extras
    from tests.support import require_service
    from tests.support.extras import require_extras

    require_service(missing_extras())
    require_extras("slack_sdk", extra="slack")
    require_extras("mcp", extra="mcp")


@contextmanager
def every_door(base: Path) -> Iterator[World]:
    """``interlude serve --mcp`` of the door suite's app (its ``served.Served``) on a new
    store in ``base``, with the links and Slack doors, and a loopback Slack."""
    from tests.doors.conftest import serve_doors

    require_doors()
    with (
        loopback_slack() as (api, api_url),
        contextmanager(serve_doors)(base, doors_env(api_url), args=[["--mcp"]]) as doors,
    ):
        yield World(doors.url, doors.db, api, api_url)


# --- the drivers --------------------------------------------------------------------------

DOORS = ["inbox", "link", "slack", "mcp", "ag-ui", "a2a", "a2a-stream", "cli"]
"""Every door where a person answers (A2A twice: ``SendMessage``, and ``SendStreamingMessage``
whose answers take the floor's streamed path)."""
GROUPLESS = ["cli"]
"""The doors that know no groups (the operator's): a question's approvers do not apply."""

First = Callable[[], object]
"""What happens just before a door sends its answer (another door answering first)."""


def answer_via(
    world: World,
    door: str,
    who: Who,
    agent: str,
    session: str,
    question: str,
    answer: bool,
    first: First | None = None,
) -> Outcome:
    """``who`` answers ``question`` of ``session`` (of ``agent``) with ``answer`` through
    ``door``. ``first()``, when given, is called at the last moment before the answer goes
    out, once the door has shown the question (the link's page opened, the Slack message
    posted, the MCP client's form open): so another door can answer first."""
    if door == "link":
        path = make_link(world, who, session, question, answer)
        return open_link(world, path, first, probe=(session, question))
    if door == "slack":
        return _slack(world, who, session, answer, first)
    if door == "mcp":
        return _mcp(world, who, agent, session, question, answer, first)
    if first is not None:
        first()
    assert who.token is not None, f"{who.name} has no token for the {door} door"
    if door == "a2a-stream":
        return _a2a_stream(world, who.token, agent, session, {question: answer})
    return answering.answer_via(
        door, world.url, who.token, agent, session, {question: answer}, store_url=world.store_url
    )


def make_link(world: World, who: Who, session: str, question: str, answer: bool) -> str:
    """A link for ``who`` (their name and groups, signed) that answers ``answer``, made as a
    worker's notifier or an app makes one (the question must wait now)."""
    from interlude import Inbox
    from interlude.operate import Person

    person = Person(who.name, who.groups)
    with Inbox(world.store_url, link_secret=LINK_SECRET) as inbox:
        return inbox.answer_link(session, question, person=person, expires_in=600, choice=answer)


def open_link(
    world: World, path: str, first: First | None = None, probe: tuple[str, str] | None = None
) -> Outcome:
    """A browser opens the link ``path``, then presses its button: 200 "Answer recorded", or
    a refusal page (its status, heading and message). A page without a button (its person may
    not answer) is pressed all the same, with the browser's form token from the page of a
    link to the same question (``probe``: session and question) for someone who may answer."""
    with httpx.Client(base_url=world.url, timeout=30) as browser:
        page = browser.get(path)
        csrf = _csrf(page.text)
        if csrf is None and probe is not None:
            csrf = _csrf(browser.get(make_link(world, PROBE, *probe, True)).text)
        assert csrf is not None, f"no form token: {page.status_code} {_said(page.text)}"
        if first is not None:
            first()
        posted = browser.post(path, data={"csrf": csrf})
    heading, said = _said(posted.text)
    taken = posted.status_code == 200 and heading == "Answer recorded"
    return Outcome("link", taken, None, (posted.status_code, heading, said))


def _csrf(page: str) -> str | None:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    return found.group(1) if found else None


def _said(page: str) -> tuple[str, str]:
    """A link page's heading, and what it says under it (why not, or what was done)."""

    def text(pattern: str) -> str:
        found = re.search(pattern, page, re.S)
        return " ".join(html.unescape(found.group(1)).split()) if found else ""

    heading = text(r'<h2 id="heading">(.*?)</h2>')
    return heading, text(r'<p class="error" id="error">(.*?)</p>') or text(
        r'<p class="notice" id="taken">(.*?)</p>'
    )


def _slack(world: World, who: Who, session: str, answer: bool, first: First | None) -> Outcome:
    """A worker's notifier posts the question (unless it did already) and ``who`` clicks
    Approve or Decline under it: Slack's signed request, sent to the serving process."""
    world.notify()
    message = world.message(session)
    if first is not None:
        first()
    return click(world, message, who, "Approve" if answer else "Decline")


def click(world: World, message: dict[str, Any], who: Who, label: str) -> Outcome:
    """``who`` clicks the button ``label`` under ``message`` (as they see it)."""
    body, headers = clicked(message, who.slack, label)
    response = httpx.post(world.url + ACTIONS, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text  # Slack signed it: 200, taken or not
    reply = response.json()
    return Outcome("slack", reply["ok"] is True, reply.get("code"), reply)


def _a2a_stream(
    world: World, token: str, agent: str, task: str, answers: dict[str, Any]
) -> Outcome:
    """The answers as an A2A ``SendStreamingMessage`` on the task (the wire as any client sends
    it): taken, its events streamed; refused, a JSON-RPC error before the stream starts."""
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"answers": answers}}],
        "taskId": task,
    }
    request = {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    headers = {**served.bearer(token), "A2A-Version": "1.0", "Accept": "text/event-stream"}
    response = httpx.post(f"{world.url}/a2a/{agent}/", json=request, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):  # refused
        reply = dict(response.json())
        return Outcome("a2a-stream", False, served.a2a_code(reply), reply)
    lines = response.text.splitlines()
    events = [json.loads(x[len("data: ") :]) for x in lines if x.startswith("data: ")]
    taken = bool(events) and all("result" in e for e in events)
    return Outcome("a2a-stream", taken, None if taken else served.a2a_code(events[-1]), events)


def _mcp(
    world: World,
    who: Who,
    agent: str,
    session: str,
    question: str,
    answer: bool,
    first: First | None,
) -> Outcome:
    """An MCP client (the official ``mcp`` client, showing forms) calls ``agent``'s tool on
    ``session`` with ``who``'s token and fills in the form it is shown with ``answer``. Taken:
    a form was shown and no note says its question was passed over; a refused call is an
    error result with a ``code``."""
    from .mcp_clients import Person, accept, connected

    token = who.token
    assert token is not None, f"{who.name} has no token for the MCP door"

    async def fill(params: Any) -> Any:
        if first is not None:
            await asyncio.to_thread(first)
        fields = params.requested_schema["properties"]
        return accept(**{"approve" if "approve" in fields else "answer": answer})

    person = Person(fill)

    async def call() -> Any:
        async with connected(world.url, token, person) as client:
            return await client.call_tool(agent, {"prompt": "go on", "session_id": session})

    result = asyncio.run(call())
    data = dict(result.structured_content or {})
    if result.is_error:
        return Outcome("mcp", False, data.get("code"), data)
    passed_over = [n for n in data.get("notes", []) if question in n]
    taken = bool(person.forms) and not passed_over
    return Outcome("mcp", taken, None, {**data, "forms": len(person.forms), "why": passed_over})


SAYS: dict[str, dict[str, tuple[int | None, tuple[str, ...]]]] = {
    "link": {
        "not_allowed": (403, ("may not answer question",)),
        "already_answered": (409, ("the first answer wins", "no longer waits for an answer")),
        "busy": (409, ("try again in a moment",)),
    },
    "mcp": {
        "not_allowed": (None, ("may not answer question",)),
        "already_answered": (None, ("the first answer wins",)),
    },
}
"""What a door without refusal codes on its wire says for a code: (the page's HTTP status,
words of which it gives one: on the link's page, or in the MCP result's note about the
question). The floor's own message, but for a link to a question that was answered and
applied: the link's page then says the question no longer waits, and who answered."""


def check_refused(refused: Outcome, code: str) -> None:
    """``refused`` was not taken, and was refused with ``code``: the code the door gives, or,
    where its wire has none (a link's page, an MCP result), the words that go with it."""
    if refused.code is not None or refused.door not in SAYS:
        answering.check_refused(refused, code)
        return
    assert not refused.taken, str(refused)
    status, words = SAYS[refused.door][code]
    if refused.door == "link":
        got, _, said = refused.raw
        assert got == status, f"not a {code} refusal: {refused}"
    else:
        said = " ".join(refused.raw["why"])
    assert any(w in said for w in words), f"not a {code} refusal: {refused}"
