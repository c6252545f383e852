"""Agents served over MCP (issue 39, part 3), driven by the official ``mcp`` client against the
inbox's ``/mcp`` door (a real uvicorn in a thread): a question asked in the client's own form
and the run carried on in the same call; a declined, a dismissed and a refused form; a client
without forms told the question and where to answer it, then answered through another door;
the floor's rules (groups, the first answer wins) the same as at every door; a client that
goes away; bad tokens; and the current protocol (2026-07-28), which asks by ending rounds."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="serving agents over MCP needs the [mcp] extra")

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as McpError
from mcp.types import ElicitResult

from interlude import (
    Agent,
    AgentSession,
    App,
    Inbox,
    Text,
    ToolResult,
    ToolUse,
    Worker,
    tool,
)
from interlude.mcp_serve import create_mcp_app, create_mcp_server, mcp_door
from interlude.server import create_app
from interlude.sessions import MemoryStore, SQLiteStore
from interlude.testing import FunctionModel, ModelRequest
from tests.support.serving import serving
from tests.support.waiting import until

from . import mcp_app
from .mcp_clients import ANA, BO, DECLINE, TOKENS, Person, accept, connected, http, served

APPROVE_FIELDS = {  # the approval's flat fields (an edit of the input is left to the inbox)
    "approve": {"type": "boolean", "title": "Approve"},
    "remember": {"type": "string", "enum": ["run", "session"], "title": "Remember"},
    "note": {"type": "string", "maxLength": 2000, "title": "Note"},
}


@pytest.fixture(autouse=True)
def _runs() -> Iterator[None]:
    mcp_app.RUNS.clear()
    yield
    mcp_app.RUNS.clear()


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


async def _session(store: str, session_id: str) -> Agent:
    agent = await mcp_app.app.open_async(session_id, store)
    assert isinstance(agent, Agent)
    return agent


async def _call(url: str, token: str, person: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call ``tool`` once on a new connection; its structured result."""
    async with connected(url, token, person) as session:
        result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None, result
    data: dict[str, Any] = result.structured_content
    assert result.is_error == (data["status"] == "refused"), data
    assert result.content[0].type == "text"
    return data


async def test_a_question_is_asked_in_the_clients_form_and_the_run_goes_on(store: str) -> None:
    person = Person(accept(approve=True, note="fine"))
    with served(store) as url:
        async with connected(url, ANA, person) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert list(tools) == ["payments", "deploys", "tickets"]
            assert tools["payments"].input_schema["required"] == ["prompt"]
            result = await session.call_tool("payments", {"prompt": "Pay the acme invoice"})
    data = result.structured_content
    assert data is not None and data["status"] == "completed"
    assert data["reply"] == "finished: success: paid 120 to acme"
    assert result.content[0].text == data["reply"] and data["session_id"] in result.content[1].text
    assert mcp_app.RUNS == ["pay 120 to acme"]  # within the one call, once

    [form] = person.forms
    schema = form.requested_schema
    assert (schema["type"], schema["required"]) == ("object", ["approve"])
    assert {k: {**f, "description": ""} for k, f in schema["properties"].items()} == {
        k: {**f, "description": ""} for k, f in APPROVE_FIELDS.items()
    }
    assert form.message.splitlines() == [
        "May the agent run pay with this input?",
        'pay {"amount": 120, "to": "acme"}',
        f"(agent payments, session {data['session_id']})",
    ]
    [entry] = (await _session(store, data["session_id"])).audit
    assert (entry.by, entry.answer) == ("ana", {"approve": True, "note": "fine"})


async def test_a_declined_form_declines_the_call(store: str) -> None:
    with served(store) as url:
        data = await _call(url, ANA, Person(DECLINE), "payments", prompt="Pay acme")
    assert data["status"] == "completed" and mcp_app.RUNS == []
    assert data["reply"].startswith("finished: error: not approved")
    [entry] = (await _session(store, data["session_id"])).audit
    assert (entry.by, entry.answer) == ("ana", False)


async def test_a_question_without_a_decline_stays_open_and_a_bad_reply_is_asked_again(
    store: str,
) -> None:
    with served(store) as url:
        data = await _call(url, ANA, Person(DECLINE), "tickets", prompt="Two for Hamlet")
        assert data["status"] == "paused" and mcp_app.RUNS == []
        assert any("takes no decline" in note for note in data["notes"])
        [question] = data["questions"]
        assert question["message"] == "How many seats for Hamlet?"

        person = Person(accept(answer="two"), accept(answer=2))
        again = await _call(
            url, ANA, person, "tickets", prompt="Two for Hamlet", session_id=data["session_id"]
        )
    assert again["status"] == "completed" and again["reply"].endswith("booked 2 seats for Hamlet")
    assert mcp_app.RUNS == ["book 2 for Hamlet"]
    first, second = person.forms
    assert first.requested_schema == {
        "type": "object",
        "properties": {"answer": {"type": "integer", "title": "Answer"}},
        "required": ["answer"],
    }
    assert second.message.startswith("Not accepted: ") and "How many seats" in second.message
    assert "The session waits on its questions: the prompt was not sent." in again["notes"]


async def test_a_client_without_forms_is_told_the_question_and_where_to_answer(
    store: str,
) -> None:
    with served(store, public_url="https://inbox.example.com/") as url:
        data = await _call(url, ANA, None, "payments", prompt="Pay acme")
        session_id = data["session_id"]
        assert data["status"] == "paused" and mcp_app.RUNS == []
        [question] = data["questions"]
        assert question["name"] == "approval" and question["who_may_answer"] == "anyone"
        assert question["answer_key"] == f"{session_id}/{question['id']}"
        assert data["inbox"] == f"https://inbox.example.com/sessions/{session_id}"
        assert any("cannot show forms" in note for note in data["notes"])

        # Another door answers (the inbox records, a worker carries the session on) ...
        await Inbox(store).record_async(session_id, {question["id"]: True}, by="bo")
        assert await Worker(mcp_app.app, store).run_once() == 1
    assert mcp_app.RUNS == ["pay 120 to acme"]  # once, by the worker
    done = await _session(store, session_id)
    assert not done.is_paused and done.messages[-1].content[0].text.startswith("finished: success")
    assert [e.by for e in done.audit] == ["bo"]


async def test_a_question_left_in_the_result_is_answered_later_in_a_form(store: str) -> None:
    with served(store) as url:
        data = await _call(url, ANA, None, "payments", prompt="Pay acme")
        person = Person(accept(approve=True))
        later = await _call(
            url, ANA, person, "payments", prompt="Pay acme", session_id=data["session_id"]
        )
    assert later["status"] == "completed" and later["session_id"] == data["session_id"]
    assert mcp_app.RUNS == ["pay 120 to acme"] and len(person.forms) == 1


async def test_who_may_answer_is_the_floors_rule(store: str) -> None:
    with served(store) as url:
        data = await _call(url, BO, Person(), "deploys", prompt="Ship it")  # bo: in no group
        assert data["status"] == "paused" and mcp_app.RUNS == []  # bo was never asked
        [question] = data["questions"]
        assert question["who_may_answer"] == "members of ops"
        assert any("bo (no group) may not answer question 'deploy'" in n for n in data["notes"])

        ana = Person(accept(answer=True))
        done = await _call(
            url, ANA, ana, "deploys", prompt="Ship it", session_id=data["session_id"]
        )
    assert done["status"] == "completed" and mcp_app.RUNS == ["deploy prod"]
    [form] = ana.forms
    assert form.requested_schema["properties"] == {"answer": {"type": "boolean", "title": "Yes"}}
    assert [e.by for e in (await _session(store, data["session_id"])).audit] == ["ana"]


async def test_the_first_answer_wins_whichever_door_gives_it(store: str) -> None:
    async def answered_meanwhile(params: Any) -> ElicitResult:
        """While the form is open, bo answers in the inbox and a worker carries on."""
        [pending] = await Inbox(store).pending_async()
        await Inbox(store).record_async(pending.session_id, {pending.interrupt.id: True}, by="bo")
        assert await Worker(mcp_app.app, store).run_once() == 1
        return accept(approve=False)

    with served(store) as url:
        data = await _call(url, ANA, Person(answered_meanwhile), "payments", prompt="Pay")
    assert data["status"] == "completed" and data["reply"].startswith("finished: success")
    assert any("bo" in note for note in data["notes"])  # ana's reply was refused: bo was first
    assert mcp_app.RUNS == ["pay 120 to acme"]
    assert [e.by for e in (await _session(store, data["session_id"])).audit] == ["bo"]


async def test_a_client_that_goes_away_leaves_the_session_paused(store: str) -> None:
    asked = asyncio.Event()

    async def walks_away(params: Any) -> ElicitResult:
        asked.set()
        await asyncio.Event().wait()  # never answers
        raise AssertionError("unreachable")

    async def call(url: str) -> None:
        async with connected(url, ANA, Person(walks_away)) as session:
            await session.call_tool("payments", {"prompt": "Pay acme"})

    with served(store) as url:
        task = asyncio.create_task(call(url))
        await asked.wait()
        task.cancel()  # the client goes away with the form open
        with pytest.raises(asyncio.CancelledError):
            await task
        [pending] = await Inbox(store).pending_async()  # still paused, in the store
        assert mcp_app.RUNS == []
        await Inbox(store).record_async(pending.session_id, {pending.interrupt.id: True}, by="bo")
        assert await Worker(mcp_app.app, store).run_once() == 1
    assert mcp_app.RUNS == ["pay 120 to acme"]
    assert not (await _session(store, pending.session_id)).needs_recovery


async def test_a_request_without_a_known_token_is_refused(store: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept_both = {"Accept": "application/json, text/event-stream"}
    with served(store) as url:
        async with httpx2.AsyncClient() as client:
            for headers in ({}, {"Authorization": "Bearer not-a-token-0123456789"}):
                response = await client.post(
                    f"{url}/mcp", json=initialize, headers={**headers, **accept_both}
                )
                assert response.status_code == 401, response.text
                assert response.headers["www-authenticate"].startswith("Bearer")
            async with http(ANA) as ana, http(BO) as bo:  # an MCP session is its token's
                opened = await ana.post(f"{url}/mcp", json=initialize, headers=accept_both)
                assert opened.status_code == 200, opened.text
                mcp_session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
                listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
                stolen = await bo.post(
                    f"{url}/mcp", json=listing, headers={**accept_both, **mcp_session}
                )
                assert stolen.status_code == 404
        with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a 401
            await _call(url, "not-a-token-0123456789", None, "payments", prompt="Pay")
    assert mcp_app.RUNS == [] and await Inbox(store).pending_async() == []


async def test_the_current_protocol_asks_by_ending_the_round(store: str) -> None:
    person = Person(accept(answer="two"), accept(answer=2))
    with served(store) as url:
        async with (
            http(ANA) as client,
            Client(
                streamable_http_client(f"{url}/mcp", http_client=client),
                elicitation_callback=person,
            ) as mcp,
        ):
            assert mcp.session.protocol_version == "2026-07-28"
            result = await mcp.call_tool("tickets", {"prompt": "Two for Hamlet"})
    data = result.structured_content
    assert data is not None and data["status"] == "completed", result
    assert mcp_app.RUNS == ["book 2 for Hamlet"]  # the tool ran once, across three rounds
    assert person.forms[1].message.startswith("Not accepted: ")
    assert [e.by for e in (await _session(store, data["session_id"])).audit] == ["ana"]


async def test_a_reply_that_comes_after_another_doors_answer_is_not_used() -> None:
    """In process (``mcp.Client(create_mcp_server(...))``, the current protocol): bo answers
    through the inbox while ana's form is open; the call ends with bo's answer applied."""
    store = MemoryStore()

    async def answered_meanwhile(params: Any) -> ElicitResult:
        [pending] = await Inbox(store).pending_async()
        await Inbox(store).record_async(pending.session_id, {pending.interrupt.id: True}, by="bo")
        assert await Worker(mcp_app.app, store).run_once() == 1
        return accept(approve=False)

    server = create_mcp_server(mcp_app.app, store, by="ana", groups=["ops"])
    async with Client(server, elicitation_callback=Person(answered_meanwhile)) as client:
        result = await client.call_tool("payments", {"prompt": "Pay acme"})
    data = result.structured_content
    assert data is not None and data["status"] == "completed"
    assert any("settled elsewhere before the reply came" in n for n in data["notes"])
    assert mcp_app.RUNS == ["pay 120 to acme"]
    assert [e.by for e in (await mcp_app.app.open_async(data["session_id"], store)).audit] == ["bo"]


async def test_a_request_state_is_checked_as_a_clients_input() -> None:
    """The current protocol's request state comes back from the client: one that is not this
    server's is refused; one naming another agent's session is refused with nothing done."""
    store = MemoryStore()
    server = create_mcp_server(mcp_app.app, store, by="ana")
    async with Client(server) as client:
        paused = (await client.call_tool("deploys", {"prompt": "Ship"})).structured_content
        assert paused is not None and paused["status"] == "paused"
        session = client.session
        assert session is not None
        with pytest.raises(McpError):
            await session.call_tool("payments", {"prompt": "Pay"}, request_state="not json")
        forged = json.dumps({"v": 1, "call": {"session": paused["session_id"]}})
        result = await session.call_tool("payments", {"prompt": "Pay"}, request_state=forged)
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["code"] == "unknown_agent"
    assert mcp_app.RUNS == []


async def test_create_mcp_app_serves_the_agents_alone(store: str) -> None:
    asgi = create_mcp_app(mcp_app.app, store, tokens={ANA: "ana"}, public_url="https://in.example")
    person = Person(accept(answer=2))
    with serving(asgi) as url:
        async with connected(url, ANA, person) as session:
            result = await session.call_tool("tickets", {"prompt": "Seats for Hamlet"})
        async with connected(url, ANA) as session:  # no forms: where to answer
            paused = await session.call_tool("payments", {"prompt": "Pay acme"})
    data = result.structured_content
    assert data is not None and data["reply"] == "finished: success: booked 2 seats for Hamlet"
    assert paused.structured_content is not None
    waiting = paused.structured_content["session_id"]
    assert paused.structured_content["inbox"] == f"https://in.example/sessions/{waiting}"
    assert mcp_app.RUNS == ["book 2 for Hamlet"]


async def test_a_run_outlives_the_client_that_went_away_mid_run(tmp_path: Path) -> None:
    """The client leaves while the approved tool runs: the run is the server's, not the
    connection's, and ends saved (not a stopped run waiting for recovery)."""
    running, release = threading.Event(), threading.Event()

    @tool(needs_approval=True)
    async def migrate(table: str) -> str:
        """Migrate a table.

        Args:
            table: Which one.
        """
        running.set()
        await asyncio.to_thread(release.wait)
        mcp_app.RUNS.append(f"migrate {table}")
        return f"migrated {table}"

    def reply(request: ModelRequest) -> object:
        if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
            return "Migrated."
        return [ToolUse("m1", "migrate", {"table": "users"})]

    app = App()

    @app.agent("dba")
    def build(session: AgentSession) -> Agent:
        return Agent(
            FunctionModel(reply), tools=[migrate], session=session.store, session_id=session.id
        )

    store = f"sqlite:///{tmp_path / 's.db'}"

    async def call(url: str) -> None:
        async with connected(url, ANA, Person(accept(approve=True))) as session:
            await session.call_tool("dba", {"prompt": "Migrate users"})

    asgi = create_app(store, app, tokens=TOKENS, doors=[mcp_door])
    with serving(asgi) as url:
        task = asyncio.create_task(call(url))

        async def started() -> bool:
            return running.is_set()

        await until(started, what="the tool to start")
        task.cancel()  # the client goes away mid-run
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        sessions = SQLiteStore(str(tmp_path / "s.db"))

        async def ended() -> bool:
            [session_id] = await sessions.list_sessions()
            agent = await app.open_async(session_id, sessions)
            assert isinstance(agent, Agent)
            last = agent.messages[-1]
            return not agent.needs_recovery and last.content[0] == Text("Migrated.")

        await until(ended, what="the run to end, saved")
    assert mcp_app.RUNS == ["migrate users"]
