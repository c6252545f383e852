"""The Interlude apps the A2A tests serve: an ops agent whose tool needs an approval, one asking
two questions at once, and a lead agent that calls a remote agent as a tool.

Every tool run is appended to the file named by ``$A2A_EFFECTS`` (one line per run), so a test
counts runs across processes.
"""

from __future__ import annotations

import os
from datetime import timedelta

from interlude import Agent, AgentSession, App, ToolUse, tool
from interlude.a2a import RemoteAgent
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel

KEY = b"a2a-test-signing-key-0123456789abcdef"


def effect(line: str) -> None:
    with open(os.environ["A2A_EFFECTS"], "a") as f:
        f.write(line + "\n")


def effects() -> list[str]:
    path = os.environ["A2A_EFFECTS"]
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


@tool
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    if os.environ.get("A2A_CRASH_AT") == "tool":  # die inside the approved tool
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    effect(f"delete {path}")
    return f"deleted {path}"


def approve(event: BeforeToolCallEvent) -> None:
    path = event.tool_use.input.get("path")
    if event.interrupt("approve", reason=f"delete {path}?", response_type=bool) is not True:
        event.cancel("not approved")
    elif os.environ.get("A2A_CRASH_AT") == "hook":  # die once the answer is being applied
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def ticket(event: BeforeToolCallEvent) -> None:
    """A typed question: the change ticket's number."""
    if not isinstance(
        event.interrupt("ticket", reason="Which change ticket?", response_type=int), int
    ):
        event.cancel("no ticket")


def note(event: BeforeToolCallEvent) -> None:
    """A second question of the same step, with a deadline (an hour by default; the
    environment's ``A2A_NOTE_SECONDS`` makes it shorter)."""
    seconds = float(os.environ.get("A2A_NOTE_SECONDS", "3600"))
    event.interrupt("note", reason="A note for the log", expires_in=timedelta(seconds=seconds))


def build_app(remote: RemoteAgent | None = None, *, signed: bool = False) -> App:
    """The app: ``ops`` (approval before ``delete``), ``forms`` (two questions), ``chief``
    (a local sub-agent that asks), and, given
    ``remote``, ``lead`` calling it as the tool ``ops``."""
    app = App()
    key = KEY if signed else None

    @app.agent("ops")
    def ops(session: AgentSession) -> Agent:
        model = ScriptedModel(
            [[ToolUse("s1", "delete", {"path": "/var/log/old.log"})], "Deleted."],
            resumable=True,
        )
        agent = Agent(
            model, tools=[delete], session=session.store, session_id=session.id, signing_key=key
        )
        agent.hooks.add_callback(BeforeToolCallEvent, approve)
        return agent

    @app.agent("forms")
    def forms(session: AgentSession) -> Agent:
        model = ScriptedModel(
            [[ToolUse("f1", "delete", {"path": "/tmp/x"})], "Logged."], resumable=True
        )
        agent = Agent(model, tools=[delete], session=session.store, session_id=session.id)
        agent.hooks.add_callback(BeforeToolCallEvent, ticket)
        agent.hooks.add_callback(BeforeToolCallEvent, note)
        return agent

    @app.agent("chief")
    def chief(session: AgentSession) -> Agent:
        """A served agent whose tool is a local sub-agent (Agent.as_tool) that asks."""
        helper = Agent(
            ScriptedModel(
                [[ToolUse("h1", "delete", {"path": "/srv/cache"})], "Cache gone."],
                resumable=True,
            ),
            tools=[delete],
            name="helper",
        )
        helper.hooks.add_callback(BeforeToolCallEvent, approve)
        model = ScriptedModel(
            [[ToolUse("c1", "helper", {"prompt": "drop the cache"})], "Chief: done."],
            resumable=True,
        )
        return Agent(model, tools=[helper.as_tool()], session=session.store, session_id=session.id)

    if remote is not None:

        @app.agent("lead")
        def lead(session: AgentSession) -> Agent:
            model = ScriptedModel(
                [[ToolUse("t1", "ops", {"prompt": "Remove the old log"})], "Ops removed it."],
                resumable=True,
            )
            return Agent(
                model,
                tools=[remote.as_tool("ops", "Runs file chores.")],
                session=session.store,
                session_id=session.id,
            )

    return app
