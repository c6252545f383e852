"""RemoteAgent: an Interlude agent calling another over A2A; the remote questions are answered
at the top and go back to the same remote task, one and two levels deep, the tool run once."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest

from interlude import Agent, ToolUse
from interlude.a2a import RemoteAgent, create_a2a_app
from interlude.errors import InterruptExpiredError
from interlude.sessions import open_store
from interlude.testing import ScriptedModel
from tests.support import wait_for

from .apps import build_app, effects
from .wire import BASE, COMPLETED, TOKEN, TOKENS, sdk_client


def remote(asgi: object, agent: str) -> RemoteAgent:
    return RemoteAgent(f"{BASE}/a2a/{agent}/", token=TOKEN, transport=httpx.ASGITransport(asgi))  # type: ignore[arg-type]


def top_agent(tool_remote: RemoteAgent, tool: str) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(
        [[ToolUse("t1", tool, {"prompt": "Free some disk space"})], "All done."], resumable=True
    )
    return Agent(model, tools=[tool_remote.as_tool(tool, "Runs chores remotely.")]), model


async def test_a_remote_approval_answered_at_the_top(tmp_path: Path, effects_file: Path) -> None:
    db = f"sqlite:///{tmp_path / 'remote.db'}"
    served = create_a2a_app(build_app(), db, tokens=TOKENS)
    top, _ = top_agent(remote(served, "ops"), "ops")

    paused = await top.invoke_async("Clean the server")
    [question] = paused.interrupts
    assert paused.stop_reason == "interrupt" and effects() == []
    assert question.name == "approve" and question.reason == "delete /var/log/old.log?"
    assert question.response_schema == {"type": "boolean"}
    assert [use.name for use in question.via] == ["ops"]  # the call it came through

    exported = top.export_state()  # the answer comes from another process: a new agent
    again, _ = top_agent(remote(served, "ops"), "ops")
    again.import_state(exported)
    done = await again.resume_async({question.id: True}, by="ana")
    assert str(done) == "All done." and effects() == ["delete /var/log/old.log"]
    assert again.messages[2].content[0].content[0].text == "Deleted."  # the remote's reply
    (entry,) = again.audit
    assert (entry.interrupt_id, entry.by, entry.answer) == (question.id, "ana", True)

    store = open_store(db)
    [session_id] = await store.list_sessions()
    assert session_id.startswith("il-")  # named by the call's idempotency key
    [remote_entry] = await store.audit_trail(session_id)
    assert remote_entry["answer"] is True and remote_entry["by"] == "ana"  # the token's person


async def test_a_declined_remote_approval(tmp_path: Path, effects_file: Path) -> None:
    served = create_a2a_app(build_app(), f"sqlite:///{tmp_path / 'r.db'}", tokens=TOKENS)
    top, _ = top_agent(remote(served, "ops"), "ops")
    [question] = (await top.invoke_async("Clean")).interrupts
    done = await top.resume_async({question.id: False})
    assert str(done) == "All done." and effects() == []


async def test_a_rerun_after_the_answer_went_out_does_not_answer_twice(
    tmp_path: Path, effects_file: Path
) -> None:
    """The calling process answered, then stopped before it recorded the result: the tool runs
    again from the same pause, finds the remote task done, and takes its reply."""
    db = f"sqlite:///{tmp_path / 'remote.db'}"
    served = create_a2a_app(build_app(), db, tokens=TOKENS)
    top, _ = top_agent(remote(served, "ops"), "ops")
    [question] = (await top.invoke_async("Clean")).interrupts
    pause = top.export_state()

    first, _ = top_agent(remote(served, "ops"), "ops")
    first.import_state(pause)
    await first.resume_async({question.id: True})
    second, _ = top_agent(remote(served, "ops"), "ops")  # the same pause, answered again
    second.import_state(pause)
    done = await second.resume_async({question.id: True})
    assert str(done) == "All done." and effects() == ["delete /var/log/old.log"]
    assert second.messages[2].content[0].content[0].text == "Deleted."


async def test_two_levels_of_remote_agents(tmp_path: Path, effects_file: Path) -> None:
    """top (here) -> lead (server B) -> ops (server C): ops's question reaches the top, the
    answer goes down through B's task to C's, and the tool runs once."""
    c_db, b_db = f"sqlite:///{tmp_path / 'c.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    server_c = create_a2a_app(build_app(), c_db, tokens=TOKENS)
    server_b = create_a2a_app(build_app(remote(server_c, "ops")), b_db, tokens=TOKENS)
    top, _ = top_agent(remote(server_b, "lead"), "lead")

    [question] = (await top.invoke_async("Clean")).interrupts
    assert question.name == "approve" and question.reason == "delete /var/log/old.log?"
    assert [use.name for use in question.via] == ["lead", "ops"]  # both calls, outermost first

    b = await sdk_client(server_b, "lead")
    c = await sdk_client(server_c, "ops")
    [b_task] = (await b.list_tasks(ListTasksRequest())).tasks
    [c_task] = (await c.list_tasks(ListTasksRequest())).tasks
    done = await top.resume_async({question.id: True}, by="ana")
    assert str(done) == "All done." and effects() == ["delete /var/log/old.log"]
    assert (await b.get_task(GetTaskRequest(id=b_task.id))).status.state == COMPLETED
    assert (await c.get_task(GetTaskRequest(id=c_task.id))).status.state == COMPLETED
    await b.close()
    await c.close()


async def test_a_remote_refusal_is_the_tools_error(tmp_path: Path, effects_file: Path) -> None:
    served = create_a2a_app(build_app(), f"sqlite:///{tmp_path / 'r.db'}", tokens=TOKENS)
    wrong = RemoteAgent(
        f"{BASE}/a2a/ops/", token="not-a-token-0123456789", transport=httpx.ASGITransport(served)
    )  # type: ignore[arg-type]
    top, _ = top_agent(wrong, "ops")
    done = await top.invoke_async("Clean")
    assert done.stop_reason != "interrupt" and effects() == []
    result = top.messages[2].content[0]
    assert result.status == "error" and "401" in result.content[0].text


async def test_a_remote_agent_as_a_graph_node(tmp_path: Path, effects_file: Path) -> None:
    from interlude.multiagent import Graph, node_path

    served = create_a2a_app(build_app(), f"sqlite:///{tmp_path / 'r.db'}", tokens=TOKENS)
    triage = Agent(ScriptedModel(["The old log takes 40 GB."]), name="triage")
    graph = Graph(
        nodes={"triage": triage, "ops": remote(served, "ops").as_agent("ops")},
        edges=[("triage", "ops")],
        entry="triage",
    )
    paused = await graph.invoke_async("The disk is full")
    [question] = paused.interrupts
    assert question.name == "approve" and node_path(question) == ("ops",)
    assert effects() == []
    done = await graph.resume_async({question.id: True}, by="ana")
    assert done.stop_reason == "end_turn" and str(done.nodes["ops"]) == "Deleted."
    assert effects() == ["delete /var/log/old.log"]


async def test_a_remote_deadline_passes_at_the_top_and_remotely(
    tmp_path: Path, effects_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two remote questions, one with a short deadline: the top answers the other after the
    deadline; the expired one is settled by the remote agent itself (its hook then cancels)."""
    monkeypatch.setenv("A2A_NOTE_SECONDS", "0.2")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    served = create_a2a_app(build_app(), db, tokens=TOKENS)
    top, _ = top_agent(remote(served, "forms"), "forms")
    asked = {q.name: q for q in (await top.invoke_async("Clean")).interrupts}
    assert asked["ticket"].response_schema == {"type": "integer"}
    deadline = asked["note"].expires_at
    assert deadline is not None  # the remote deadline, kept
    wait_for(lambda: time.time() > deadline, what="the note's deadline to pass")
    with pytest.raises(InterruptExpiredError):  # refused at the top already
        await top.resume_async({asked["note"].id: "late"})
    done = await top.resume_async({asked["ticket"].id: 42})
    assert str(done) == "All done." and effects() == []  # the remote hook failed closed
    store = open_store(db)
    [session_id] = await store.list_sessions()
    trail = {e["interrupt_id"]: e for e in await store.audit_trail(session_id)}
    assert sorted(e["by"] for e in trail.values()) == ["ana", "expiry"]


async def test_a_remote_agent_whose_sub_agent_asks(tmp_path: Path, effects_file: Path) -> None:
    """here -> chief (served) -> helper (chief's local sub-agent): the sub-agent's question
    travels up through the remote task, its answer down, the tool runs once."""
    served = create_a2a_app(build_app(), f"sqlite:///{tmp_path / 'r.db'}", tokens=TOKENS)
    top, _ = top_agent(remote(served, "chief"), "chief")
    [question] = (await top.invoke_async("Clean")).interrupts
    assert question.reason == "delete /srv/cache?"
    assert [use.name for use in question.via] == ["chief", "helper"]
    done = await top.resume_async({question.id: True})
    assert str(done) == "All done." and effects() == ["delete /srv/cache"]
    assert top.messages[2].content[0].content[0].text == "Chief: done."
