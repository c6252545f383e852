"""interlude.App: the operator's map from agent names to factories; sessions record names only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, AgentSession, App, ToolUse, tool
from interlude.errors import ConfigurationError, SessionError, UnknownAgentError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ScriptedModel

# These apps run their scripts in one process, turn by turn, as written: the warning about
# scripts opened on a conversation under way is for apps carried on elsewhere (tested below).
pytestmark = pytest.mark.filterwarnings("ignore:agent .* runs on a ScriptedModel")


def _app(built: list[str] | None = None) -> App:
    """Two agents, "ops" and "support", each noting in ``built`` that it ran."""
    app = App()

    @app.agent("ops")
    def ops(session: AgentSession) -> Agent:
        if built is not None:
            built.append(f"ops:{session.id}")
        return Agent(ScriptedModel(["ops here"] * 3), session=session.store, session_id=session.id)

    @app.agent("support")
    def support(session: AgentSession) -> Agent:
        if built is not None:
            built.append(f"support:{session.id}")
        return Agent(
            ScriptedModel(["support here"] * 3),
            session=session.store,
            session_id=session.id,
            name="support",
        )

    return app


def test_register_start_and_open_by_the_recorded_name() -> None:
    built: list[str] = []
    app, store = _app(built), MemoryStore()
    assert app.names == ("ops", "support")
    assert "ops" in app and "nope" not in app

    started = app.start("support", "s-1", store)
    assert (started.name, started.session_id) == ("support", "s-1")
    assert str(started("hello")) == "support here"
    stored = asyncio.run(store.load("s-1"))
    assert stored is not None and stored.agent == "support"

    reopened = app.open("s-1", store)
    assert built == ["support:s-1", "support:s-1"]  # the factory of the recorded name
    assert reopened.name == "support" and len(reopened.messages) == 2

    ops = app.start("ops", "s-2", store)
    assert ops.name == "ops"  # the factory gave no name: the app names the agent
    ops("hi")
    stored = asyncio.run(store.load("s-2"))
    assert stored is not None and stored.agent == "ops"
    assert app.open("s-2", store).name == "ops"


def test_a_store_may_be_a_url_and_async_variants_work(tmp_path: Path) -> None:
    app = _app()
    url = f"sqlite:///{tmp_path / 's.db'}"
    app.start("ops", "s-1", url)("hi")
    assert app.open("s-1", url).messages[-1].role == "assistant"

    async def main() -> tuple[str | None, str | None]:
        store = MemoryStore()
        started = await app.start_async("support", "a-1", store)
        await started.invoke_async("hello")
        opened = await app.open_async("a-1", store)
        return started.name, opened.name

    assert asyncio.run(main()) == ("support", "support")


def test_unknown_names_and_missing_sessions_are_clear_errors() -> None:
    app, store = _app(), MemoryStore()
    with pytest.raises(UnknownAgentError, match=r"no agent 'nope' in this app.*'ops'"):
        app.start("nope", "s-1", store)

    stranger = Agent(ScriptedModel(["hi"]), session=store, session_id="s-2", name="billing")
    stranger("hi")
    with pytest.raises(UnknownAgentError) as raised:
        app.open("s-2", store)
    message = str(raised.value)
    for fragment in ("'s-2'", "'billing'", "'ops'", "'support'"):
        assert fragment in message, message
    assert isinstance(raised.value, LookupError)

    with pytest.raises(SessionError, match="no session 'missing'"):
        app.open("missing", store)
    with pytest.raises(SessionError, match="'s-2' already exists"):
        app.start("ops", "s-2", store)


def test_a_session_without_an_agent_name_is_refused_unless_adopted() -> None:
    app, store = _app(), MemoryStore()
    old = Agent(
        ScriptedModel(["hi"]),
        session=store,
        session_id="old",
        state={"interlude.factory": "evil_module:build"},  # what older versions stored
    )
    old("hi")
    with pytest.raises(UnknownAgentError, match="'old' records no agent name"):
        app.open("old", store)

    adopted = app.open("old", store, unnamed="ops")
    assert adopted.name == "ops"
    adopted("again")  # the ops factory's agent runs it
    stored = asyncio.run(store.load("old"))
    assert stored is not None and stored.agent == "ops"  # recorded from then on
    with pytest.raises(UnknownAgentError, match="records agent 'ops', not 'support'"):
        app.open("old", store, unnamed="support")


def test_registering_a_name_twice_is_a_configuration_error() -> None:
    app = _app()
    with pytest.raises(ConfigurationError, match="'ops' is registered twice"):

        @app.agent("ops")
        def again(session: AgentSession) -> Agent:  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(ConfigurationError, match="non-empty string"):
        app.agent("")
    assert app.names == ("ops", "support")


def test_a_factory_must_return_an_agent_on_the_session_it_was_given() -> None:
    app, store = App(), MemoryStore()

    @app.agent("nothing")
    def nothing(session: AgentSession) -> Agent:
        return "not an agent"  # type: ignore[return-value]

    @app.agent("elsewhere")
    def elsewhere(session: AgentSession) -> Agent:
        return Agent(ScriptedModel([]), session=session.store, session_id="other")

    @app.agent("other-store")
    def other_store(session: AgentSession) -> Agent:
        return Agent(ScriptedModel([]), session=MemoryStore(), session_id=session.id)

    @app.agent("no-session")
    def no_session(session: AgentSession) -> Agent:
        return Agent(ScriptedModel([]))

    @app.agent("misnamed")
    def misnamed(session: AgentSession) -> Agent:
        return Agent(
            ScriptedModel([]), session=session.store, session_id=session.id, name="someone"
        )

    for name, fragment in [
        ("nothing", "returned 'not an agent', not an Agent"),
        ("elsewhere", "on session 'other', not on the session it was given ('s')"),
        ("other-store", "not on the session it was given"),
        ("no-session", "on session None"),
        ("misnamed", "an agent named 'someone'"),
    ]:
        with pytest.raises(ConfigurationError) as raised:
            app.start(name, "s", store)
        message = str(raised.value)
        assert "test_app:test_a_factory_must_return_an_agent_on_the_session" in message
        assert f"of agent {name!r}" in message and fragment in message, message
    assert asyncio.run(store.list_sessions()) == []


def test_import_interlude_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, interlude; interlude.App(); "
        "print(sorted(m for m in ('asyncio', 'sqlite3', 'interlude.sessions') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out


def test_a_signed_agent_built_without_a_name_resumes_through_the_app() -> None:
    """The pause is signed under the app's name for the agent; the session is loaded (and the
    signature checked) once the app has given the agent that name. On 2852626 every open of
    such a session raised StateIntegrityError."""
    from interlude import ToolUse, tool
    from interlude.hooks import BeforeToolCallEvent

    ran: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        ran.append("act")
        return "ok"

    app = App()

    @app.agent("ops")
    def build(session: AgentSession) -> Agent:
        model = ScriptedModel([[ToolUse("t1", "act", {})], "done"])
        agent = Agent(
            model, tools=[act], signing_key=b"k" * 32, session=session.store, session_id=session.id
        )
        agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    store = MemoryStore()
    [question] = app.start("ops", "s1", store)("go").interrupts
    again = app.open("s1", store)
    again.model = ScriptedModel(["done"])  # a fresh process would build a fresh script
    assert again.resume({question.id: True}).stop_reason == "end_turn"
    assert ran == ["act"]
    assert asyncio.run(app.open_async("s1", store)).messages[-1].text == "done"


def test_a_worker_applies_answers_to_a_signed_agent_of_an_app_without_a_name(
    tmp_path: Path,
) -> None:
    """The worker builds the agent through the app (which names it) and the inbox shows its
    question: the signed pause verifies in both, and the approved tool runs once."""
    from interlude import Inbox, Worker
    from interlude.sessions import SQLiteStore

    ran: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        ran.append("act")
        return "ok"

    def reply(request: Any) -> Any:
        if any(b.__class__.__name__ == "ToolResult" for b in request.messages[-1].content):
            return "done"
        return [ToolUse("t1", "act", {})]

    app = App()

    @app.agent("ops")
    def build(session: AgentSession) -> Agent:
        agent = Agent(
            FunctionModel(reply),
            tools=[act],
            signing_key=b"k" * 32,
            session=session.store,
            session_id=session.id,
        )
        agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    store = SQLiteStore(tmp_path / "s.db")
    [question] = app.start("ops", "s1", store)("go").interrupts
    inbox = Inbox(store)
    assert [i.id for i in inbox.session("s1").interrupts] == [question.id]
    inbox.record("s1", {question.id: True}, by="ana")
    assert asyncio.run(Worker(app, store).run_once()) == 1
    assert ran == ["act"]
    assert [e["by"] for e in inbox.audit("s1")] == ["ana"]


def test_an_app_agent_on_a_resumable_script_carries_on_in_a_new_process(tmp_path: Path) -> None:
    """Answered from another process (a new build of the agent, a new script), the run goes on
    from the conversation: the approved tool runs once and nothing is asked again."""
    from interlude.sessions import SQLiteStore

    ran: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        ran.append("act")
        return "ok"

    def build_on(resumable: bool | None) -> App:
        app = App()

        @app.agent("ops")
        def build(session: AgentSession) -> Agent:
            script = ScriptedModel([[ToolUse("t1", "act", {})], "done"], resumable=resumable)
            agent = Agent(script, tools=[act], session=session.store, session_id=session.id)
            agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
            return agent

        return app

    db = tmp_path / "s.db"
    for flag, session in ((True, "s1"), (None, "s3")):  # said, or left out: the obvious factory
        ran.clear()
        app = build_on(resumable=flag)
        [question] = app.start("ops", session, SQLiteStore(db))("go").interrupts
        fresh = build_on(resumable=flag).open(session, SQLiteStore(db))  # another process
        result = fresh.resume({question.id: True})
        assert result.stop_reason == "end_turn" and str(result) == "done", flag
        assert ran == ["act"]

    plain = build_on(resumable=False)
    [question] = plain.start("ops", "s2", SQLiteStore(db))("go").interrupts
    with pytest.warns(UserWarning, match="resumable=True"):
        plain.open("s2", SQLiteStore(db))  # carried on elsewhere, it would start over
