"""An approval policy over a remote A2A agent used as a tool: the rule sees it as
``a2a:<name>``; a declined call never reaches the remote, an approved one runs there once."""

from __future__ import annotations

from pathlib import Path

import httpx

from interlude import Agent, ToolResult, ToolUse
from interlude.a2a import RemoteAgent, create_a2a_app
from interlude.policy import Policy, Rule
from interlude.sessions import open_store
from interlude.testing import ScriptedModel

from .apps import build_app, effects
from .wire import BASE, TOKEN, TOKENS

POLICY = Policy(
    [Rule(tool="*", when="source.startsWith('a2a:')", then="ask", approvers=["ops"])],
    default="deny",
    version="remote-1",
)


def top(served: object) -> Agent:
    remote = RemoteAgent(
        f"{BASE}/a2a/ops/",
        token=TOKEN,
        transport=httpx.ASGITransport(served),  # type: ignore[arg-type]
    )
    model = ScriptedModel(
        [[ToolUse("t1", "ops", {"prompt": "Free some disk space"})], "Reported."],
        resumable=True,
    )
    return Agent(model, tools=[remote.as_tool("ops", "Runs chores remotely.")], policy=POLICY)


async def test_a_declined_remote_call_never_reaches_the_remote(
    tmp_path: Path, effects_file: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'remote.db'}"
    served = create_a2a_app(build_app(), db, tokens=TOKENS)
    agent = top(served)
    paused = await agent.invoke_async("Clean the server")
    [question] = paused.interrupts
    assert question.name == "approval" and question.approvers == ("ops",)
    assert question.reason["policy"]["rule"] == 0  # type: ignore[index]
    done = await agent.resume_async({question.id: False}, by="ana")
    assert str(done) == "Reported."
    assert effects() == [] and await open_store(db).list_sessions() == []  # never sent
    [result] = [b for m in agent.messages for b in m.content if isinstance(b, ToolResult)]
    assert result.status == "error"
    [entry] = [e for e in agent.audit if e.name == "policy"]
    assert entry.answer["call"]["source"] == "a2a:ops"  # type: ignore[index]


async def test_an_approved_remote_call_runs_there(tmp_path: Path, effects_file: Path) -> None:
    db = f"sqlite:///{tmp_path / 'remote.db'}"
    served = create_a2a_app(build_app(), db, tokens=TOKENS)
    agent = top(served)
    [question] = (await agent.invoke_async("Clean the server")).interrupts
    remote_asks = await agent.resume_async({question.id: True}, by="ana")
    [inner] = remote_asks.interrupts  # the remote agent's own approval, relayed up
    assert [use.name for use in inner.via] == ["ops"]
    done = await agent.resume_async({inner.id: True}, by="ana")
    assert str(done) == "Reported." and effects() == ["delete /var/log/old.log"]
