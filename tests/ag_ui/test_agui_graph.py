"""Graphs and swarms over AG-UI (``POST /ag-ui/{graph}``), served by ``interlude serve`` and
driven by ``@ag-ui/client`` and by plain HTTP: each node's run is a subagent, a node's question
is the run's interrupt (its node path in ``metadata.interlude.nodePath``), the next run's
``resume[]`` answers it through the operator floor, and a refused entry is a RUN_ERROR that
leaves the store exactly as it was."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlude.ag_ui import create_endpoint
from interlude.multiagent import Graph, Swarm
from interlude.sessions import SQLiteStore

from . import graph_app
from .graph_serve import GraphServed
from .harness import TOKEN, Client, stored

Event = dict[str, Any]


@pytest.fixture(scope="module")
def _graphs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphServed]:
    served = GraphServed(tmp_path_factory.mktemp("agui-graphs")).start()
    yield served
    served.kill()


@pytest.fixture
def graphs(_graphs: GraphServed) -> GraphServed:
    """The graph app served for this module, its log of side effects emptied for this test
    (each test has threads of its own)."""
    _graphs.done.unlink(missing_ok=True)
    return _graphs


def _entry(question: dict[str, Any], payload: Any) -> dict[str, Any]:
    """A resume entry answering ``question`` with ``payload``, its metadata echoed."""
    return {
        "interruptId": question["id"],
        "status": "resolved",
        "payload": payload,
        "metadata": question["metadata"],
    }


def _audit(db: Path, thread: str) -> list[dict[str, Any]]:
    opened = graph_app.app.open(thread, SQLiteStore(db))
    assert isinstance(opened, Graph | Swarm)
    return [dict(e) for e in opened.audit]


def test_an_ag_ui_client_answers_a_graph_nodes_question(
    graphs: GraphServed, client: Client, thread: str
) -> None:
    [asked] = client.drive(graphs.url, thread, [{"prompt": "Plan a trip in May"}], agent="trip")
    assert asked["error"] is None and asked["thrown"] is None  # the client's checks passed
    assert asked["outcome"] == "interrupt"
    [question] = asked["interrupts"]
    ours = question["metadata"]["interlude"]
    assert ours["nodePath"] == ["writer"] and ours["name"] == "city"
    assert question["subagentRunId"] == "writer"  # the node's subagent asked it
    # the writer's call t1: tool call ids are scoped by node (two nodes number calls alike)
    assert (question["reason"], question["toolCallId"]) == ("Which city?", "writer:t1")
    assert question["responseSchema"] == {"type": "string"}
    assert asked["types"].count("SUBAGENT_STARTED") == 2  # research, then writer
    assert asked["types"].count("SUBAGENT_FINISHED") == 2  # research done, writer suspended
    assert asked["text"] == ["Lisbon is warm in May."] and asked["pending"] == [question["id"]]
    assert graphs.done_lines() == []

    # A wrong answer (text is asked for): RUN_ERROR, and nothing changed.
    before = stored(graphs.db)
    [refused] = client.drive(graphs.url, thread, [{"resume": [_entry(question, 42)]}], agent="trip")
    assert refused["error"]["code"] == "invalid_answer" and refused["outcome"] is None
    assert stored(graphs.db) == before and graphs.done_lines() == []

    # The next run's resume answers it (another HttpAgent: the server checks, not the client).
    [answered] = client.drive(
        graphs.url, thread, [{"resume": [_entry(question, "Lisbon")]}], agent="trip"
    )
    assert answered["error"] is None and answered["thrown"] is None
    assert answered["outcome"] == "success" and answered["pending"] == []
    assert answered["text"] == ["Five days in the city."]  # the writer's reply
    assert graphs.done_lines() == ["booked Lisbon"]  # the node's tool ran once
    [entry] = _audit(graphs.db, thread)
    assert (entry["answer"], entry["by"], entry["node"]) == ("Lisbon", "ana", ["writer"])


def test_an_ag_ui_client_drives_a_swarm_and_a_nested_graph(
    graphs: GraphServed, client: Client, thread: str
) -> None:
    asked, answered = client.drive(
        graphs.url, thread, [{"prompt": "Close the deal"}, {"answer": True}], agent="desk"
    )
    [question] = asked["interrupts"]
    assert question["metadata"]["interlude"]["nodePath"] == ["closer"]
    assert question["subagentRunId"] == "closer" and question["reason"] == "Send the offer?"
    assert asked["text"] == ["Over to the closer."] and asked["results"] == [
        "Handed off to closer."
    ]
    assert answered["error"] is None and answered["thrown"] is None
    assert answered["outcome"] == "success" and answered["text"][-1] == "The offer is out."
    assert graphs.done_lines() == ["sent the offer"]

    nested = f"{thread}-nested"
    asked, answered = client.drive(
        graphs.url, nested, [{"prompt": "Ship it"}, {"answer": True}], agent="release"
    )
    assert asked["error"] is None and asked["thrown"] is None
    [question] = asked["interrupts"]
    assert question["metadata"]["interlude"]["nodePath"] == ["team", "check"]
    assert question["subagentRunId"] == "team/check"  # the node check of the node team
    assert answered["outcome"] == "success" and answered["text"][-1] == "Published."
    assert graphs.done_lines() == ["sent the offer", "sent the offer"]


def test_two_nodes_at_once_each_with_its_question(
    graphs: GraphServed, client: Client, thread: str
) -> None:
    asked, answered = client.drive(
        graphs.url, thread, [{"prompt": "Both of you"}, {"answer": True}], agent="pair"
    )
    assert asked["error"] is None and asked["thrown"] is None  # both calls t1, kept apart
    by_node = {q["subagentRunId"]: q for q in asked["interrupts"]}
    assert sorted(by_node) == ["left", "right"]
    assert [by_node[n]["toolCallId"] for n in ("left", "right")] == ["left:t1", "right:t1"]
    assert answered["error"] is None and answered["outcome"] == "success"
    assert graphs.done_lines() == ["sent the offer", "sent the offer"]

    # One of the two answered: that node finishes, the other is suspended again (its
    # subagent reopened for this run), and its question is sent again, unchanged.
    asked, partly = client.drive(
        graphs.url,
        f"{thread}-partly",
        [{"prompt": "Both"}, {"resumeLast": {"0": True}}],
        agent="pair",
    )
    _, second = asked["interrupts"]
    assert partly["error"] is None and partly["thrown"] is None
    assert partly["outcome"] == "interrupt" and partly["interrupts"] == [second]
    assert partly["types"].count("SUBAGENT_STARTED") == 2  # the answered one, the waiting one


def test_plain_http_a_node_pauses_and_the_next_run_answers_it(
    graphs: GraphServed, thread: str
) -> None:
    user = {"id": "m1", "role": "user", "content": "Plan a trip in May"}
    events = graphs.post("trip", thread, messages=[user])
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    _check_attributed(events)
    end = events[-1]["outcome"]
    assert end["type"] == "interrupt"
    [question] = end["interrupts"]
    assert question["metadata"]["interlude"]["nodePath"] == ["writer"]
    suspended = [e for e in events if e["type"] == "SUBAGENT_FINISHED"][-1]
    assert suspended == {
        "type": "SUBAGENT_FINISHED",
        "subagentRunId": "writer",
        "outcome": {"type": "suspended", "interruptIds": [question["id"]]},
    }

    # Refused, with nothing changed: a digest of something else than what is pending, a
    # question of another thread, a new task while the graph waits.
    before = stored(graphs.db)
    stale = _entry(question, "Lisbon")
    stale["metadata"] = {"interlude": {"digest": "sha256:" + "0" * 64}}
    other = {**_entry(question, "Lisbon"), "interruptId": "th-other/" + question["id"]}
    for body, code in [
        ({"resume": [stale]}, "stale"),
        ({"resume": [other]}, "unknown_interrupt"),
        ({"messages": [user]}, "paused"),
    ]:
        [started, error] = graphs.post("trip", thread, **body)
        assert (started["type"], error["type"], error["code"]) == ("RUN_STARTED", "RUN_ERROR", code)
    assert stored(graphs.db) == before and graphs.done_lines() == []

    answer = _entry(question, "Porto")
    done = graphs.post("trip", thread, resume=[answer])
    _check_attributed(done)
    assert done[-1]["outcome"] == {"type": "success"}
    assert [(e["type"], e.get("subagentRunId")) for e in done if "SUBAGENT" in e["type"]] == [
        ("SUBAGENT_STARTED", "writer"),
        ("SUBAGENT_FINISHED", "writer"),
    ]
    [reply] = [e["delta"] for e in done if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert reply == "Five days in the city."
    assert graphs.done_lines() == ["booked Porto"]

    # The same answer again is refused and nothing runs. (The floor reads a graph's session
    # without its audit trail, so it says the graph waits on no question rather than who
    # answered first; an agent's thread says "already_answered".)
    before = stored(graphs.db)
    [_, again] = graphs.post("trip", thread, resume=[answer])
    assert again["code"] in ("already_answered", "not_paused"), again
    assert stored(graphs.db) == before and graphs.done_lines() == ["booked Porto"]


def test_the_answering_process_is_not_the_asking_one(tmp_path: Path) -> None:
    asking = GraphServed(tmp_path).start()
    try:
        user = {"id": "m1", "role": "user", "content": "Plan a trip"}
        [question] = asking.post("trip", "th-elsewhere", messages=[user])[-1]["outcome"][
            "interrupts"
        ]
    finally:
        asking.kill()
    answering = GraphServed(tmp_path).start()  # another process on the same store
    try:
        done = answering.post("trip", "th-elsewhere", resume=[_entry(question, "Faro")])
        assert done[-1]["outcome"] == {"type": "success"}
        assert answering.done_lines() == ["booked Faro"]
    finally:
        answering.kill()


# --- in this process (no server, no Node) ----------------------------------------------------


def _run(asgi: Any, graph: str, thread: str, **body: Any) -> list[Event]:
    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(asgi)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://app", headers=headers
        ) as http:
            data = {"threadId": thread, "runId": "r", "messages": [], **body}
            return await http.post(f"/ag-ui/{graph}", json=data)

    response = asyncio.run(post())
    assert response.status_code == 200, response.text
    return [json.loads(x[6:]) for x in response.text.splitlines() if x.startswith("data: ")]


def test_cancelled_declines_a_nodes_question_and_its_tool_does_not_act(tmp_path: Path) -> None:
    graph_app.DONE.clear()
    asgi = create_endpoint(graph_app.app, SQLiteStore(tmp_path / "s.db"), tokens={TOKEN: "ana"})
    user = {"id": "m1", "role": "user", "content": "Close the deal"}
    [question] = _run(asgi, "desk", "t", messages=[user])[-1]["outcome"]["interrupts"]
    cancel = {"interruptId": question["id"], "status": "cancelled"}
    done = _run(asgi, "desk", "t", resume=[cancel])
    assert done[-1]["outcome"] == {"type": "success"} and graph_app.DONE == []
    [entry] = _audit(tmp_path / "s.db", "t")
    assert (entry["answer"], entry["by"], entry["node"]) == (False, "ana", ["closer"])


def test_a_graph_thread_is_not_another_names(tmp_path: Path) -> None:
    asgi = create_endpoint(graph_app.app, SQLiteStore(tmp_path / "s.db"), tokens={TOKEN: "ana"})
    user = {"id": "m1", "role": "user", "content": "Plan"}
    _run(asgi, "trip", "t", messages=[user])
    [_, wrong] = _run(asgi, "desk", "t", messages=[user])
    assert wrong["code"] == "unknown_agent"
    [_, fresh] = _run(asgi, "trip", "new", resume=[{"interruptId": "x", "status": "resolved"}])
    assert fresh["code"] == "not_paused"


def _check_attributed(events: list[Event]) -> None:
    """Every text and tool event is attributed to the subagent open around it."""
    current: list[str] = []
    for e in events:
        if e["type"] == "SUBAGENT_STARTED":
            current.append(e["subagentRunId"])
        elif e["type"] == "SUBAGENT_FINISHED":
            assert current and current.pop() == e["subagentRunId"], e
        elif e["type"].startswith(("TEXT_MESSAGE", "TOOL_CALL")):
            assert current and e.get("subagentRunId") == current[-1], e
    assert current == []
