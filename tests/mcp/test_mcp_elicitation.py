"""A server's question during a tool call (elicitation) is an interrupt, answered on resume."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from interlude import Agent, Inbox, ToolUse
from interlude.errors import AnswerValidationError
from interlude.mcp import Elicitation, McpServer
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel
from tests.support import wait_for
from tests.support.processes import ROOT

from .booking_agent import build
from .servers import HOSTILE, HttpServer, ServerLog

BOOK = ToolUse("b1", "book", {"show": "Hamlet"})


def booking_agent(server: McpServer, reply: str = "Done.") -> Agent:
    return Agent(ScriptedModel([[BOOK], reply]), tools=server.tools())


def test_pause_then_answer_accepts(notes: McpServer, notes_log: ServerLog) -> None:
    agent = booking_agent(notes, "Booked.")
    paused = agent("Two seats for Hamlet, for Ana")
    assert paused.stop_reason == "interrupt"
    [question] = paused.interrupts
    assert question.source == "tool_call" and question.tool_use == BOOK
    assert question.name.startswith("elicitation:")
    assert question.reason == {"server": "notes", "message": "How many seats for Hamlet?"}
    form, refusals = question.response_schema["anyOf"]
    assert form["properties"]["seats"]["type"] == "integer"
    assert form["required"] == ["seats", "name"]
    assert refusals == {"enum": ["decline", "cancel"]}
    assert notes_log.lines() == []  # the server's tool body has not run

    before = agent.export_state()
    with pytest.raises(AnswerValidationError) as refused:
        agent.resume({question.id: {"seats": "two", "name": "Ana"}})
    assert refused.value.path == ("seats",)
    assert agent.export_state() == before  # refused: nothing changed

    done = agent.resume({question.id: {"seats": 2, "name": "Ana"}})
    assert str(done) == "Booked."
    result = agent.messages[2].content[0]
    assert (result.status, result.text) == ("success", "booked 2 seats for Ana")
    assert notes_log.lines() == ["book Hamlet accept Booking(seats=2, name='Ana')"]


@pytest.mark.parametrize("refusal", ["decline", "cancel"])
def test_decline_and_cancel(notes: McpServer, notes_log: ServerLog, refusal: str) -> None:
    agent = booking_agent(notes)
    [question] = agent("Book Hamlet").interrupts
    agent.resume({question.id: refusal})
    assert agent.messages[2].content[0].text == f"not booked ({refusal})"
    assert notes_log.lines() == [f"book Hamlet {refusal} None"]


def test_two_questions_in_one_call(notes: McpServer, notes_log: ServerLog) -> None:
    call = ToolUse("d1", "dinner_show", {})
    agent = Agent(ScriptedModel([[call], "Dinner is set."]), tools=notes.tools())
    first = agent("Dinner and a show").interrupts
    assert len(first) == 1
    asked = [first[0].reason["message"]]
    answers = {"Which row?": {"row": "F"}, "Vegetarian meal?": "decline"}
    result = agent.resume({first[0].id: answers[asked[0]]})
    if result.stop_reason == "interrupt":  # the server asks the other question next
        [second] = result.interrupts
        asked.append(second.reason["message"])
        result = agent.resume({second.id: answers[asked[1]]})
    assert sorted(asked) == ["Vegetarian meal?", "Which row?"]
    assert str(result) == "Dinner is set."
    assert agent.messages[2].content[0].text == "row F, vegetarian -"
    assert notes_log.lines() == ["dinner accept decline"]


def test_callback_answers_in_process(stdio: Callable[..., McpServer]) -> None:
    seen: list[Elicitation] = []

    def answer(question: Elicitation) -> object:
        seen.append(question)
        return {"seats": 4, "name": "Bo"}

    agent = booking_agent(stdio(elicitation=answer), "Booked.")
    assert str(agent("Book Hamlet")) == "Booked."  # no pause
    [question] = seen
    assert (question.server, question.tool, question.message) == (
        "notes",
        "book",
        "How many seats for Hamlet?",
    )
    assert question.tool_use == BOOK and question.schema is not None
    assert agent.messages[2].content[0].text == "booked 4 seats for Bo"


async def test_async_callback_may_defer_to_a_person(stdio: Callable[..., McpServer]) -> None:
    async def only_small_shows(question: Elicitation) -> object:
        return None if "Hamlet" in question.message else {"seats": 1, "name": "x"}

    server = stdio(elicitation=only_small_shows)
    agent = Agent(ScriptedModel([[BOOK], "Booked."]), tools=await server.list_tools())
    paused = await agent.invoke_async("Book Hamlet")
    [question] = paused.interrupts  # the callback returned None: a person answers
    done = await agent.resume_async({question.id: {"seats": 3, "name": "Cy"}})
    assert str(done) == "Booked."
    assert agent.messages[2].content[0].text == "booked 3 seats for Cy"


def test_callback_answer_that_does_not_fit(
    stdio: Callable[..., McpServer], server_log: ServerLog
) -> None:
    agent = booking_agent(stdio(elicitation=lambda q: {"seats": "many"}))
    agent("Book Hamlet")
    result = agent.messages[2].content[0]
    assert result.status == "error" and "does not fit at seats" in result.text
    assert server_log.lines() == []


def test_legacy_protocol_elicitation(
    stdio: Callable[..., McpServer], server_log: ServerLog
) -> None:
    """A handshake-era server asks with a request in the middle of the call: the call is
    cancelled at the pause and runs again from the top on resume."""
    call = ToolUse("l1", "book_legacy", {"show": "Lear"})
    server = stdio(protocol="legacy")
    agent = Agent(ScriptedModel([[call], "Booked."]), tools=server.tools())
    [question] = agent("Book Lear").interrupts
    assert question.reason["message"] == "How many seats for Lear?"
    assert str(agent.resume({question.id: {"seats": 1, "name": "Di"}})) == "Booked."
    assert agent.messages[2].content[0].text == "booked 1 seats for Di"
    # started twice (the first run was cancelled at the pause), finished once
    assert server_log.lines() == ["legacy start Lear", "legacy start Lear", "legacy Lear accept"]


def test_http_elicitation(notes_http: HttpServer) -> None:
    with McpServer.http(notes_http.url, name="web") as server:
        agent = booking_agent(server, "Booked.")
        [question] = agent("Book Hamlet").interrupts
        assert question.reason["server"] == "web"
        agent.resume({question.id: {"seats": 2, "name": "Ed"}})
        assert agent.messages[2].content[0].text == "booked 2 seats for Ed"
    assert notes_http.log.lines() == ["book Hamlet accept Booking(seats=2, name='Ed')"]


def test_paused_in_one_process_answered_in_another(tmp_path: Path, server_log: ServerLog) -> None:
    db = str(tmp_path / "sessions.db")
    agent, server = build(ScriptedModel([[BOOK]]), db, str(server_log.path))
    with agent:
        paused = agent("Two seats for Hamlet")
        [question] = paused.interrupts
        json.dumps(agent.export_state())  # the pause is plain JSON
    assert not server.is_connected
    [pending] = Inbox(SQLiteStore(db)).pending()
    assert pending.session_id == "booking-1" and pending.interrupt.id == question.id
    assert pending.interrupt.response_schema == question.response_schema

    answers = json.dumps({question.id: {"seats": 2, "name": "Ana"}})
    out = subprocess.run(
        [sys.executable, "-m", "tests.mcp.booking_agent", db, str(server_log.path), answers],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Enjoy the show."
    assert server_log.lines() == ["book Hamlet accept Booking(seats=2, name='Ana')"]

    done, _ = build(ScriptedModel([]), db, str(server_log.path))
    assert not done.is_paused
    assert done.messages[2].content[0].text == "booked 2 seats for Ana"
    assert [(e.by, e.answer) for e in done.audit] == [("ana", {"seats": 2, "name": "Ana"})]


def test_url_mode_question(stdio: Callable[..., McpServer], server_log: ServerLog) -> None:
    call = ToolUse("s1", "sign_in", {})
    agent = Agent(ScriptedModel([[call], "Signed in."]), tools=stdio(protocol="legacy").tools())
    [question] = agent("Sign me in").interrupts
    assert question.reason == {
        "server": "notes",
        "message": "Sign in to the box office",
        "url": "https://example.com/login",
    }
    assert question.response_schema == {"enum": ["accept", "decline", "cancel"]}
    assert str(agent.resume({question.id: "accept"})) == "Signed in."
    assert agent.messages[2].content[0].text == "sign-in accept"
    assert server_log.lines() == ["sign_in accept"]


def test_approval_then_questions_from_two_calls_at_once(
    notes: McpServer, notes_log: ServerLog
) -> None:
    from interlude.mcp import require_approval

    calls = [BOOK, ToolUse("b2", "book", {"show": "Lear"})]
    agent = Agent(
        ScriptedModel([calls, "Both booked."]),
        tools=notes.tools(),
        hooks=[require_approval()],  # book says nothing about itself: treated as destructive
    )
    approvals = agent("Book Hamlet and Lear").interrupts
    assert [(q.name, q.tool_use.id) for q in approvals] == [("approve", "b1"), ("approve", "b2")]
    questions = agent.resume({q.id: True for q in approvals}).interrupts
    # both calls ran at once, each paused on its own question
    assert sorted(q.reason["message"] for q in questions) == [
        "How many seats for Hamlet?",
        "How many seats for Lear?",
    ]
    assert notes_log.lines() == []
    answers = {q.id: {"seats": 1, "name": q.tool_use.input["show"]} for q in questions}
    assert str(agent.resume(answers)) == "Both booked."
    assert [r.text for r in agent.messages[2].content] == [
        "booked 1 seats for Hamlet",
        "booked 1 seats for Lear",
    ]
    assert sorted(notes_log.lines()) == [
        "book Hamlet accept Booking(seats=1, name='Hamlet')",
        "book Lear accept Booking(seats=1, name='Lear')",
    ]


def test_a_question_asked_mid_call_under_the_default_protocol(
    stdio: Callable[..., McpServer], server_log: ServerLog
) -> None:
    """The official Python SDK's ``await ctx.elicit(...)`` needs a request back to the client,
    which the current protocol has not: the default protocol ("auto") falls back to the
    handshake-era one for this server and the question pauses the run."""
    call = ToolUse("l1", "book_legacy", {"show": "Lear"})
    server = stdio()  # protocol="auto"
    agent = Agent(ScriptedModel([[call], "Booked."]), tools=server.tools())
    paused = agent("Book Lear")
    assert paused.stop_reason == "interrupt", agent.messages[2].content[0]
    [question] = paused.interrupts
    assert question.reason == {"server": "notes", "message": "How many seats for Lear?"}
    assert str(agent.resume({question.id: {"seats": 1, "name": "Di"}})) == "Booked."
    assert agent.messages[2].content[0].text == "booked 1 seats for Di"
    assert server_log.lines()[-1] == "legacy Lear accept"
    # the other kind of question still works on the same server
    again = Agent(ScriptedModel([[BOOK], "Booked."]), tools=server.tools())
    [form] = again("Book Hamlet").interrupts
    again.resume({form.id: {"seats": 2, "name": "Ed"}})
    assert again.messages[2].content[0].text == "booked 2 seats for Ed"


def test_a_paused_server_never_receives_a_made_up_answer(tmp_path: Path) -> None:
    """At the pause the server's call is ended (cancelled) and its question is left unanswered:
    no "cancel" is sent in the user's name (before: every pause sent one, which a server that
    had not yet dropped the question gave to its tool; 5 of 12 pauses on server-everything)."""
    log = tmp_path / "received.jsonl"
    server = McpServer.stdio(
        sys.executable, [HOSTILE, "elicit:plain"], name="raw", env={"HOSTILE_LOG": str(log)}
    )

    def received() -> list[dict[str, object]]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    def cancelled() -> list[dict[str, object]]:
        return [m for m in received() if m.get("method") == "notifications/cancelled"]

    with server:
        tools = server.tools()
        for n in range(3):
            paused = Agent(ScriptedModel([[ToolUse(f"c{n}", "go", {"x": "1"})]]), tools=tools)("go")
            assert paused.stop_reason == "interrupt"
        wait_for(lambda: len(cancelled()) >= 3, what="the three calls to be ended")
        # one more request on the same pipe: whatever the client sent before it is there now
        server.tools()
        assert len(cancelled()) == 3  # each call was ended at its pause
        answers = [m for m in received() if m.get("id") == 99]
        assert answers == [], answers
