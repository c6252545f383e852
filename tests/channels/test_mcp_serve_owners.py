"""Whose session an MCP caller may prompt: only one they started through the MCP door.

Driven by the official ``mcp`` client against the inbox's ``/mcp`` (a real uvicorn in a thread;
ana and bo hold two tokens), and in process over ``create_mcp_server`` (stdio's caller, the
``--by`` person): a prompt to a session someone else started, or one started through another
door, is refused with ``not_yours`` and the store is left as it was (every row compared), while
the session's own questions stay answerable by whoever the floor's rules let answer them. The
owner is recorded in the save that creates the session, so a run cut short still names it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="serving agents over MCP needs the [mcp] extra")

from mcp import Client

from interlude import Agent, AgentSession, App, Text, ToolResult, ToolUse, tool
from interlude.mcp_serve import create_mcp_server
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ModelRequest
from tests.doors.served import assert_unchanged, dump

from . import mcp_app
from .mcp_clients import ANA, BO, Person, accept, connected, served

OWNER = "interlude.mcp"


@pytest.fixture(autouse=True)
def _runs() -> Iterator[None]:
    mcp_app.RUNS.clear()
    yield
    mcp_app.RUNS.clear()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


async def _call(url: str, token: str, person: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call ``tool`` once on a new connection; its structured result."""
    async with connected(url, token, person) as session:
        result = await session.call_tool(tool, arguments)
    data: dict[str, Any] = result.structured_content or {}
    assert result.is_error == (data.get("status") == "refused"), result
    return data


async def _session(db: Path, session_id: str) -> Agent:
    agent = await mcp_app.app.open_async(session_id, f"sqlite:///{db}")
    assert isinstance(agent, Agent)
    return agent


def _prompts(agent: Agent) -> list[str]:
    """The prompts in the session's conversation (its user messages that are text)."""
    return [
        c.text
        for m in agent.messages
        if m.role == "user"
        for c in m.content[:1]
        if isinstance(c, Text)
    ]


def _not_yours(data: dict[str, Any], session_id: str, who: str) -> None:
    assert (data["status"], data["code"], data["session_id"]) == (
        "refused",
        "not_yours",
        session_id,
    )
    assert f"was not started by {who} through this server" in data["message"], data


async def test_only_who_started_a_session_may_prompt_it(db: Path) -> None:
    with served(f"sqlite:///{db}") as url:
        first = await _call(url, ANA, Person(accept(approve=True)), "payments", prompt="Pay acme")
        session_id = first["session_id"]
        assert first["status"] == "completed" and mcp_app.RUNS == ["pay 120 to acme"]
        assert (await _session(db, session_id)).state[OWNER] == {"started_by": "ana"}

        before = dump(db)
        bo = Person()  # never asked anything
        refused = await _call(
            url, BO, bo, "payments", prompt="Pay bo instead", session_id=session_id
        )
        _not_yours(refused, session_id, "bo")
        assert "reply" not in refused and bo.forms == []
        assert_unchanged(db, before, refused)  # nothing ran, nothing recorded
        assert mcp_app.RUNS == ["pay 120 to acme"]

        again = await _call(
            url,
            ANA,
            Person(accept(approve=True)),
            "payments",
            prompt="Pay again",
            session_id=session_id,
        )
    assert again["status"] == "completed" and again["session_id"] == session_id
    assert mcp_app.RUNS == ["pay 120 to acme", "pay 120 to acme"]
    agent = await _session(db, session_id)
    assert _prompts(agent) == ["Pay acme", "Pay again"]  # never bo's
    assert [e.by for e in agent.audit] == ["ana", "ana"]


async def test_a_client_chosen_id_is_its_starters_and_another_caller_is_refused(
    db: Path,
) -> None:
    with served(f"sqlite:///{db}") as url:
        mine = await _call(url, BO, None, "tickets", prompt="Two for Hamlet", session_id="t-42")
        assert (mine["status"], mine["session_id"]) == ("paused", "t-42")
        before = dump(db)
        # ana may answer bo's question (anyone may), not prompt his session: the prompt is
        # not sent, her answer is.
        person = Person(accept(answer=2))
        answered = await _call(
            url, ANA, person, "tickets", prompt="Make it four", session_id="t-42"
        )
        assert answered["status"] == "completed" and len(person.forms) == 1
        assert "The session waits on its questions: the prompt was not sent." in (answered["notes"])
        assert mcp_app.RUNS == ["book 2 for Hamlet"]
        assert dump(db) != before

        before = dump(db)
        refused = await _call(url, ANA, Person(), "tickets", prompt="Four more", session_id="t-42")
        _not_yours(refused, "t-42", "ana")
        assert_unchanged(db, before, refused)
    agent = await _session(db, "t-42")
    assert agent.state[OWNER] == {"started_by": "bo"}
    assert "Make it four" not in str(agent.messages) and "Four more" not in str(agent.messages)
    assert [e.by for e in agent.audit] == ["ana"]


async def test_a_paused_session_of_another_is_answered_as_the_floors_rules_say(
    db: Path,
) -> None:
    """Bo (in no group) may approve ana's payment (anyone may) but not her deploy (only ops):
    her deploy's question is left to ops, nothing recorded, and the prompt is not sent."""
    with served(f"sqlite:///{db}") as url:
        paid = await _call(url, ANA, None, "payments", prompt="Pay acme")
        deploy = await _call(url, ANA, None, "deploys", prompt="Ship it")
        assert paid["status"] == deploy["status"] == "paused"

        approves = Person(accept(approve=True))
        done = await _call(
            url, BO, approves, "payments", prompt="Pay me", session_id=paid["session_id"]
        )
        assert done["status"] == "completed" and mcp_app.RUNS == ["pay 120 to acme"]

        before = dump(db)
        left = await _call(
            url, BO, Person(), "deploys", prompt="Ship mine", session_id=deploy["session_id"]
        )
        assert left["status"] == "paused"
        assert any("bo (no group) may not answer question 'deploy'" in n for n in left["notes"])
        assert_unchanged(db, before, left)

        # The payment is done: bo's next prompt to ana's session is refused.
        before = dump(db)
        refused = await _call(
            url, BO, Person(), "payments", prompt="Pay me", session_id=paid["session_id"]
        )
        _not_yours(refused, paid["session_id"], "bo")
        assert_unchanged(db, before, refused)
    assert mcp_app.RUNS == ["pay 120 to acme"]
    paid_agent = await _session(db, paid["session_id"])
    assert [e.by for e in paid_agent.audit] == ["bo"]
    assert "Pay me" not in str(paid_agent.messages)


async def test_a_session_started_through_another_door_is_not_prompted_over_mcp(
    db: Path,
) -> None:
    """Sessions with no owner recorded (``App.start``, the inbox's, AG-UI's, A2A's...) are
    refused to every MCP caller (fail closed); a paused one's questions are still asked."""
    store = f"sqlite:///{db}"
    ended = await mcp_app.app.start_async("payments", "elsewhere-ended", store)
    assert isinstance(ended, Agent)
    paused = await ended.invoke_async("Pay acme")
    await ended.resume_async({paused.interrupts[0].id: True}, by="ana")
    waiting = await mcp_app.app.start_async("payments", "elsewhere-waiting", store)
    assert isinstance(waiting, Agent)
    await waiting.invoke_async("Pay acme")
    assert mcp_app.RUNS == ["pay 120 to acme"]

    with served(store) as url:
        before = dump(db)
        for token, who in ((ANA, "ana"), (BO, "bo")):
            refused = await _call(
                url, token, Person(), "payments", prompt="Again", session_id="elsewhere-ended"
            )
            _not_yours(refused, "elsewhere-ended", who)
        assert_unchanged(db, before, "prompts to a session started elsewhere")

        answered = await _call(
            url,
            ANA,
            Person(accept(approve=True)),
            "payments",
            prompt="Go on",
            session_id="elsewhere-waiting",
        )
    assert answered["status"] == "completed"
    assert mcp_app.RUNS == ["pay 120 to acme", "pay 120 to acme"]
    for session_id in ("elsewhere-ended", "elsewhere-waiting"):
        agent = await _session(db, session_id)
        assert OWNER not in agent.state
        texts = str(agent.messages)
        assert "Again" not in texts and "Go on" not in texts


async def test_over_stdio_the_owner_is_the_by_person() -> None:
    """``create_mcp_server(by=...)`` (what ``interlude mcp-serve --by`` serves): ana's server
    starts a session; bo's server on the same store may not prompt it; ana's may."""
    store = MemoryStore()
    ana = create_mcp_server(mcp_app.app, store, by="ana", groups=["ops"])
    bo = create_mcp_server(mcp_app.app, store, by="bo", groups=["ops"])
    async with Client(ana, elicitation_callback=Person(accept(answer=True))) as client:
        first = (await client.call_tool("deploys", {"prompt": "Ship"})).structured_content
    assert first is not None and first["status"] == "completed"
    session_id = first["session_id"]
    before = await store.load(session_id)

    async with Client(bo, elicitation_callback=Person()) as client:
        result = await client.call_tool("deploys", {"prompt": "Ship", "session_id": session_id})
    assert result.is_error and result.structured_content is not None
    _not_yours(result.structured_content, session_id, "bo")
    assert await store.load(session_id) == before and mcp_app.RUNS == ["deploy prod"]

    async with Client(ana, elicitation_callback=Person(accept(answer=True))) as client:
        again = await client.call_tool("deploys", {"prompt": "Ship", "session_id": session_id})
    assert again.structured_content is not None
    assert again.structured_content["status"] == "completed"
    assert mcp_app.RUNS == ["deploy prod", "deploy prod"]


async def test_the_owner_is_in_the_save_that_creates_the_session() -> None:
    """Read from inside the first run's tool, before any save of the run keeps agent state:
    the session already names its owner, so a run cut short there (a crash) still does."""
    store = MemoryStore()
    seen: list[Any] = []

    @tool
    async def look() -> str:
        """Look at the store."""
        [session_id] = await store.list_sessions()
        stored = await store.load(session_id)
        assert stored is not None
        seen.append(stored.state.get(OWNER))
        return "looked"

    def reply(request: ModelRequest) -> str | list[ToolUse]:
        if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
            return "Done."
        return [ToolUse("l1", "look", {})]

    app = App()

    @app.agent("looker")
    def build(session: AgentSession) -> Agent:
        return Agent(
            FunctionModel(reply), tools=[look], session=session.store, session_id=session.id
        )

    async with Client(create_mcp_server(app, store, by="ana")) as client:
        result = await client.call_tool("looker", {"prompt": "Look"})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "completed"
    assert seen == [{"started_by": "ana"}]
    done = await app.open_async(result.structured_content["session_id"], store)
    assert isinstance(done, Agent) and done.state[OWNER] == {"started_by": "ana"}


async def test_two_callers_racing_for_one_new_id_leave_it_to_one() -> None:
    """Ana and bo name the same new session at once, both having read that there is none: one
    run creates it and records its caller, the other is refused (the store's version check);
    the loser's prompt is nowhere in the session."""

    class Racing(MemoryStore):
        """Holds the first two reads of ``s-1`` until both are made (both see no session)."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Barrier(2)
            self.held = 0

        async def load(self, session_id: str) -> Any:
            stored = await super().load(session_id)
            if session_id == "s-1" and self.held < 2:
                self.held += 1
                await self.gate.wait()
            return stored

    store = Racing()

    async def call(who: str) -> dict[str, Any]:
        server = create_mcp_server(mcp_app.app, store, by=who, groups=["ops"])
        async with Client(server, elicitation_callback=Person(accept(answer=True))) as c:
            result = await c.call_tool("deploys", {"prompt": f"Ship {who}", "session_id": "s-1"})
        assert result.structured_content is not None
        return {"who": who, **result.structured_content}

    results = await asyncio.gather(call("ana"), call("bo"))
    agent = await mcp_app.app.open_async("s-1", store)
    assert isinstance(agent, Agent)
    owner = agent.state[OWNER]
    assert isinstance(owner, dict)
    [won] = [r for r in results if r["who"] == owner["started_by"]]
    [lost] = [r for r in results if r["who"] != owner["started_by"]]
    assert won["status"] == "completed", won
    assert lost["status"] == "refused", lost
    assert _prompts(agent) == [f"Ship {won['who']}"] and mcp_app.RUNS == ["deploy prod"]
