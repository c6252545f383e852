"""The endpoint in-process (starlette's TestClient): state snapshots, who may answer, the
input checks, and the route in ``create_app``."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from interlude import Agent, AgentSession, App, ToolContext, ToolResult, ToolUse, tool
from interlude.ag_ui import create_endpoint
from interlude.hooks import BeforeToolCallEvent
from interlude.server import create_app
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ModelRequest

ANA, BO = "token-of-ana-0123456789", "token-of-bo-0123456789"
TOKENS: dict[str, Any] = {ANA: "ana", BO: {"name": "bo", "groups": ["ops"]}}


@tool
def note(text: str, context: ToolContext) -> str:
    """Keep a note.

    Args:
        text: The note.
    """
    context.agent.state["notes"] = [text]
    return "noted"


def _reply(request: ModelRequest) -> Any:
    if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
        return "Noted."
    return [ToolUse("n1", "note", {"text": "call back"})]


def _ops_only(event: BeforeToolCallEvent) -> None:
    event.interrupt("go?", reason="Keep this note?", approvers=["ops"])


def _app() -> App:
    app = App()

    @app.agent("notes")
    def build(session: AgentSession) -> Agent:
        agent = Agent(
            FunctionModel(_reply), tools=[note], session=session.store, session_id=session.id
        )
        agent.hooks.add_callback(BeforeToolCallEvent, _ops_only)
        return agent

    return app


def _run(client: TestClient, token: str, **body: Any) -> list[dict[str, Any]]:
    response = client.post(
        "/ag-ui/notes",
        json={"threadId": "t", "runId": "r", "messages": [], **body},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [json.loads(x[6:]) for x in response.text.splitlines() if x.startswith("data: ")]


def test_only_the_questions_groups_answer_and_the_state_is_streamed() -> None:
    client = TestClient(create_endpoint(_app(), MemoryStore(), tokens=TOKENS))
    user = {"id": "m", "role": "user", "content": "note it"}
    [question] = _run(client, ANA, messages=[user])[-1]["outcome"]["interrupts"]
    assert question["message"] == "Keep this note?" and question["reason"] == "Keep this note?"
    answer = {"interruptId": question["id"], "status": "resolved", "payload": "yes"}
    refused = _run(client, ANA, resume=[answer])[-1]
    assert (refused["type"], refused["code"]) == ("RUN_ERROR", "not_allowed")
    events = _run(client, BO, resume=[answer])
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots == [{"notes": ["call back"]}]
    assert events[-1]["outcome"] == {"type": "success"}
    first = _run(client, BO, messages=[user])[1]  # the next run starts with the kept state
    assert first == {"type": "STATE_SNAPSHOT", "snapshot": {"notes": ["call back"]}}


def test_a_prompt_to_a_paused_thread_and_a_run_without_one_are_refused() -> None:
    client = TestClient(create_endpoint(_app(), MemoryStore(), tokens=TOKENS))
    user = {"id": "m", "role": "user", "content": "note it"}
    assert _run(client, ANA)[-1]["code"] == "no_prompt"
    _run(client, ANA, messages=[user])
    assert _run(client, ANA, messages=[user])[-1]["code"] == "paused"
    fresh = _run(client, ANA, threadId="t2", resume=[{"interruptId": "x", "status": "resolved"}])
    assert fresh[-1]["code"] == "not_paused"


def test_http_refusals_come_before_the_stream() -> None:
    client = TestClient(create_endpoint(_app(), MemoryStore(), tokens=TOKENS))
    auth = {"Authorization": f"Bearer {ANA}"}
    assert client.post("/ag-ui/notes", json={}).status_code == 401
    assert client.post("/ag-ui/notes", json={"threadId": "t"}, headers=auth).status_code == 422
    body = {"threadId": "t", "runId": "r", "messages": []}
    assert client.post("/ag-ui/other", json=body, headers=auth).status_code == 404


def test_create_app_serves_the_route_with_an_app_only() -> None:
    body = {"threadId": "t", "runId": "r", "messages": []}
    auth = {"Authorization": f"Bearer {ANA}"}
    with TestClient(create_app(MemoryStore(), _app(), tokens=TOKENS)) as served:
        events = served.post("/ag-ui/notes", json=body, headers=auth).text
        assert '"type":"RUN_STARTED"' in events
    with TestClient(create_app(MemoryStore(), tokens=TOKENS)) as inbox_only:
        assert inbox_only.post("/ag-ui/notes", json=body, headers=auth).status_code == 404
