"""Graphs in an App, the CLI, the inbox and workers (the operators' side of issue 25)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interlude import Agent, AgentSession, App, Inbox, Worker
from interlude.errors import (
    AnswerValidationError,
    ConfigurationError,
    InterruptExpiredError,
    SessionError,
    UnknownAgentError,
    UnknownInterruptError,
)
from interlude.multiagent import Graph, node_path
from interlude.sessions import SQLiteStore
from tests.support.cli import Ran, cli_env, run
from tests.support.processes import ROOT

from . import graph_app
from .graph_app import CALLS, app, build_trip


@pytest.fixture(autouse=True)
def _counts() -> None:
    CALLS.clear()
    graph_app.TOOL_RUNS.clear()


def _env(**extra: str) -> dict[str, str]:
    """The environment of the children (run from the repository root, where they find
    ``tests.multiagent.graph_app``)."""
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("INTERLUDE_STORE", None)
    env.pop("GRAPH_KILL", None)
    return {**env, **extra}


def paused_trip(db: Path, session_id: str = "trip-1") -> Graph:
    graph = app.start("trip", session_id, SQLiteStore(db))
    assert isinstance(graph, Graph)
    result = graph("Plan a trip in May")
    assert result.stop_reason == "interrupt" and len(result.interrupts) == 2
    return graph


def questions(graph: Graph) -> dict[str, str]:
    """node -> question id."""
    return {node_path(q)[0]: q.id for q in graph.interrupts}


# --- App ------------------------------------------------------------------------------------


def test_a_graph_registered_in_one_app_is_opened_by_a_fresh_app(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    paused_trip(db)
    assert asyncio.run(SQLiteStore(db).load("trip-1")).agent == "trip"  # type: ignore[union-attr]

    fresh = App()
    fresh.graph("trip")(build_trip)
    assert "trip" in fresh and fresh.graph_names == ("trip",)
    graph = fresh.open("trip-1", SQLiteStore(db))
    assert isinstance(graph, Graph) and graph.name == "trip" and graph.is_paused
    ids = questions(graph)
    assert set(ids) == {"writer", "budget"}
    done = graph.resume({ids["writer"]: "Lisbon", ids["budget"]: True})
    assert done.stop_reason == "end_turn" and sorted(done.order) == ["budget", "research", "writer"]
    assert CALLS["research"] == 1  # in this process: research ran once, before the pause

    async def reopened() -> bool:
        again = await fresh.open_async("trip-1", SQLiteStore(db))
        return isinstance(again, Graph) and not again.is_paused and not again.needs_recovery

    assert asyncio.run(reopened())


def test_registration_and_opening_refuse_what_cannot_work(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    paused_trip(db)
    store = SQLiteStore(db)
    other = App()
    other.agent("trip")(lambda s: Agent(session=s.store, session_id=s.id))
    with pytest.raises(UnknownAgentError, match=r"@app\.graph"):
        other.open("trip-1", store)  # a graph's session, the name registered as an agent
    with pytest.raises(ConfigurationError, match="registered twice"):
        other.graph("trip")(build_trip)
    with pytest.raises(SessionError, match="already exists"):
        app.start("trip", "trip-1", store)

    wrong = App()

    @wrong.graph("elsewhere")
    def build(session: AgentSession) -> Graph:
        return build_trip(AgentSession(id="not-" + session.id, store=session.store))

    with pytest.raises(ConfigurationError, match=r"session=session\.store"):
        wrong.start("elsewhere", "g-2", store)
    named = App()
    named.graph("plain")(
        lambda s: Graph(
            {"a": Agent(graph_app.model("a", None, "x"))},
            entry="a",
            name="x",
            session=s.store,
            session_id=s.id,
        )
    )
    with pytest.raises(ConfigurationError, match="named 'x'"):
        named.start("plain", "g-3", store)
    notgraph = App()
    notgraph.graph("g")(lambda s: "nope")
    with pytest.raises(ConfigurationError, match="not a Graph or a Swarm"):
        notgraph.start("g", "g-4", store)


def test_another_process_opens_the_graph_through_the_app_and_finishes_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ids = questions(paused_trip(db))
    code = (
        "import json, sys\n"
        "from tests.multiagent.graph_app import app, CALLS\n"
        "graph = app.open('trip-1', 'sqlite:///' + sys.argv[1])\n"
        "done = graph.resume(json.loads(sys.argv[2]))\n"
        "kind = type(graph).__name__\n"
        "print(json.dumps({'order': done.order, 'calls': dict(CALLS), 'kind': kind}))\n"
    )
    answers = json.dumps({ids["writer"]: "Porto", ids["budget"]: False})
    ran = subprocess.run(
        [sys.executable, "-c", code, str(db), answers],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["kind"] == "Graph" and sorted(out["order"]) == ["budget", "research", "writer"]
    assert out["calls"] == {"writer": 1, "budget": 1}  # research not asked again over there


# --- CLI ------------------------------------------------------------------------------------


def cli(db: Path, *argv: str) -> Ran:
    """``interlude --store sqlite:///DB ...`` with ``tests.multiagent.graph_app:app`` (run in
    this process, in the database's folder, as a process of its own would run)."""
    env = cli_env(INTERLUDE_APP="tests.multiagent.graph_app:app")
    return run(db.parent, "--store", f"sqlite:///{db}", *argv, env=env)


def test_the_cli_lists_shows_and_answers_a_graph_with_two_nodes_waiting(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ids = questions(paused_trip(db))

    listed = cli(db, "pending", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["node"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"writer", "budget"} and {r["session"] for r in rows.values()} == {"trip-1"}
    assert rows["writer"]["id"] == ids["writer"]
    text = cli(db, "pending").stdout
    assert "city (node writer)" in text and "approve (node budget)" in text

    shown = cli(db, "show", "trip-1")
    assert shown.returncode == 0, shown.stderr
    assert "graph trip" in shown.stdout and "Paused, waiting on 2 question(s)" in shown.stdout
    assert "city (node writer)" in shown.stdout
    as_json = json.loads(cli(db, "show", "trip-1", "--json").stdout)
    assert as_json["kind"] == "graph" and as_json["status"] == "paused"
    assert {i["node"] for i in as_json["interrupts"]} == {"writer", "budget"}

    version = asyncio.run(SQLiteStore(db).load("trip-1")).version  # type: ignore[union-attr]
    refused = [
        cli(db, "answer", "trip-1", ids["budget"], '"yes"'),  # a bool is asked for
        cli(db, "answer", "trip-1", "nope1234", "true"),
        cli(db, "answer", "trip-1:node:writer", "x", "true"),  # a node's own session
    ]
    assert all(r.returncode == 1 for r in refused), [r.stderr for r in refused]
    assert "AnswerValidationError" in refused[0].stderr and "unchanged" in refused[0].stderr
    assert "has no pending interrupt 'nope1234'" in refused[1].stderr
    assert "node's agent of graph session 'trip-1'" in refused[2].stderr
    assert asyncio.run(SQLiteStore(db).load("trip-1")).version == version  # type: ignore[union-attr]

    first = cli(db, "answer", "trip-1", ids["writer"], '"Lisbon"', "--by", "ana")
    assert first.returncode == 0, first.stderr
    assert "Paused: 1 question(s)" in first.stdout and "approve (node budget)" in first.stdout
    short = json.loads(cli(db, "pending", "--json").stdout)[0]["short_id"]
    last = cli(db, "answer", "trip-1", short, "true", "--json")
    assert last.returncode == 0, last.stderr
    done = json.loads(last.stdout)
    assert done["stop_reason"] == "end_turn" and done["interrupts"] == []
    assert sorted(done["order"]) == ["budget", "research", "writer"]
    assert json.loads(cli(db, "pending", "--json").stdout) == []
    assert "holds no stopped run" in cli(db, "recover", "trip-1").stderr


# --- inbox and workers ------------------------------------------------------------------------


def test_inbox_answers_are_checked_and_a_worker_resumes_the_graph_not_the_node(
    tmp_path: Path,
) -> None:
    pytest.importorskip("starlette", reason="the inbox API needs the [server] extra")
    from starlette.testclient import TestClient

    from interlude.server import create_app

    db = tmp_path / "s.db"
    ids = questions(paused_trip(db))
    assert dict(CALLS) == {"research": 1, "writer": 1, "budget": 1}
    headers = {"Authorization": "Bearer ana-token-0123456789abcdef"}
    tokens = {"ana-token-0123456789abcdef": "ana"}
    with TestClient(create_app(f"sqlite:///{db}", app, tokens=tokens)) as client:
        pending = client.get("/api/pending", headers=headers).json()["pending"]
        assert {(p["session"], p["agent"], p["node"]) for p in pending} == {
            ("trip-1", "trip", "writer"),
            ("trip-1", "trip", "budget"),
        }
        session = client.get("/api/sessions/trip-1", headers=headers).json()
        assert session["kind"] == "graph" and len(session["interrupts"]) == 2
        post = "/api/sessions/trip-1/answers"
        bad = client.post(post, json={"answers": {ids["budget"]: "yes"}}, headers=headers)
        assert bad.status_code == 422, bad.text
        unknown = client.post(post, json={"answers": {"v1:nope": True}}, headers=headers)
        assert unknown.status_code == 409, unknown.text
        ok = client.post(post, json={"answers": {ids["writer"]: "Lisbon"}}, headers=headers)
        assert ok.status_code == 202, ok.text
    assert CALLS["writer"] == 1  # recorded only

    worker = Worker(app, SQLiteStore(db))
    assert asyncio.run(worker.run_once()) == 1 and worker.failed == {}
    assert dict(CALLS) == {"research": 1, "writer": 2, "budget": 1}  # the writer went on
    assert asyncio.run(SQLiteStore(db).recorded_answers("trip-1")) == []  # applied: cleared
    inbox = Inbox(SQLiteStore(db))
    (left,) = inbox.session("trip-1").interrupts
    assert left.id == ids["budget"]
    inbox.record("trip-1", {ids["budget"]: True}, by="bo")
    assert asyncio.run(worker.run_once()) == 1
    graph = app.open("trip-1", SQLiteStore(db))
    assert isinstance(graph, Graph) and not graph.is_paused and not graph.needs_recovery
    assert sorted(graph.record.order) == ["budget", "research", "writer"]
    assert dict(CALLS) == {"research": 1, "writer": 2, "budget": 2}  # nothing ran twice
    assert asyncio.run(SQLiteStore(db).sessions_to_resume(10**10)) == []
    assert asyncio.run(worker.run_once()) == 0


def test_record_refuses_an_expired_or_unknown_answer_to_a_graph(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ids = questions(paused_trip(db))
    later = Inbox(SQLiteStore(db), clock=lambda: time.time() + 10**9)
    with pytest.raises(UnknownInterruptError):
        later.record("trip-1", {"v1:node:writer:nope": "x"}, by="ana")
    with pytest.raises(AnswerValidationError):
        later.record("trip-1", {ids["writer"]: 42}, by="ana")
    assert asyncio.run(SQLiteStore(db).recorded_answers("trip-1")) == []
    # A deadline: a question with expires_in, past due at the inbox's clock.
    store = SQLiteStore(db)
    expiring = App()

    @expiring.graph("soon")
    def build(session: AgentSession) -> Graph:
        from interlude import ToolContext, tool

        @tool
        def ask(context: ToolContext) -> str:
            """Ask."""
            return str(context.interrupt("ok", expires_in=60))

        agent = Agent(graph_app.model("n", "ask", "done"), tools=[ask])
        return Graph({"n": agent}, entry="n", session=session.store, session_id=session.id)

    soon = expiring.start("soon", "soon-1", store)
    (q,) = soon("go").interrupts
    with pytest.raises(InterruptExpiredError):
        later.record("soon-1", {q.id: True}, by="ana")
    assert asyncio.run(store.recorded_answers("soon-1")) == []


def test_a_worker_recovers_a_graph_killed_inside_a_node_and_never_the_node_alone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    code = (
        "import sys\n"
        "from tests.multiagent.graph_app import app\n"
        "app.start('crashy', 'c-1', 'sqlite:///' + sys.argv[1])('do it')\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code, str(db)],
        cwd=ROOT,
        env=_env(GRAPH_KILL="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = SQLiteStore(db)
    graph = app.open("c-1", store)
    assert isinstance(graph, Graph) and graph.needs_recovery
    view = Inbox(store).session("c-1")
    assert view.kind == "graph" and view.stopped and view.interrupts == []

    worker = Worker(app, store)
    deadline = time.time() + 20
    handled = 0
    while not handled and time.time() < deadline:
        time.sleep(0.3)  # until the node's run claim (1 s) has lapsed
        listed = asyncio.run(store.sessions_to_resume(time.time()))
        handled = asyncio.run(worker.run_once())
    assert handled == 1 and worker.failed == {}, worker.failed
    assert listed == ["c-1:node:work"]  # what the store listed: the node's lapsed claim
    graph = app.open("c-1", store)
    assert isinstance(graph, Graph) and not graph.needs_recovery
    assert graph.record.order == ("fetch", "work")
    assert str(graph.record.results["work"]) == "work done"
    assert CALLS["fetch"] == 0  # fetch finished before the kill: not asked again
    assert CALLS["work"] == 1 and graph_app.TOOL_RUNS["do_work"] == 1  # replayed tool, last reply
    assert asyncio.run(store.sessions_to_resume(10**10)) == []


def test_a_worker_recovers_a_graph_stopped_between_nodes_from_its_own_lapsed_claim(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    code = (
        "import sys\n"
        "from tests.multiagent.graph_app import app\n"
        "app.start('halting', 'h-1', 'sqlite:///' + sys.argv[1])('do it')\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code, str(db)],
        cwd=ROOT,
        env=_env(GRAPH_HALT="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = SQLiteStore(db)
    graph = app.open("h-1", store)
    assert isinstance(graph, Graph) and graph.needs_recovery
    assert graph.record.order == ("fetch",)  # work never started: no node holds a claim

    worker = Worker(app, store)
    deadline = time.time() + 20
    handled = 0
    while not handled and time.time() < deadline:
        time.sleep(0.3)  # until the graph's own run claim (1 s) has lapsed
        listed = asyncio.run(store.sessions_to_resume(time.time()))
        handled = asyncio.run(worker.run_once())
    assert handled == 1 and worker.failed == {}, worker.failed
    assert listed == ["h-1"]  # found by the graph's lapsed claim alone
    graph = app.open("h-1", store)
    assert isinstance(graph, Graph) and not graph.needs_recovery
    assert graph.record.order == ("fetch", "work")
    assert CALLS["fetch"] == 0  # fetch finished before the kill: not asked again
    assert CALLS["work"] == 2 and graph_app.TOOL_RUNS["do_work"] == 1


# --- overdue questions and discarding --------------------------------------------------------


def test_a_worker_settles_a_graphs_overdue_questions(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    graph = app.start("overdue", "o-1", store)
    assert isinstance(graph, Graph) and graph("go").stop_reason == "interrupt"
    assert len(Inbox(store).expired()) == 2
    worker = Worker(app, store)
    assert asyncio.run(worker.run_once()) == 1 and worker.failed == {}, worker.failed
    done = app.open("o-1", store)
    assert isinstance(done, Graph) and not done.is_paused
    assert str(done.record.results["late"]) == "Settled late."  # its default answered
    assert done.record.results["gated"].stop_reason == "cancelled"  # declined: not run
    assert CALLS["gated"] == 0
    assert [e["by"] for e in done.audit] == ["expiry", "expiry"]
    assert asyncio.run(worker.run_once()) == 0  # nothing left to list on the next pass


def test_the_cli_expires_and_discards_a_graphs_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    graph = app.start("overdue", "o-2", SQLiteStore(db))
    assert isinstance(graph, Graph) and graph("go").stop_reason == "interrupt"
    expired = cli(db, "expire", "o-2", "--json")
    assert expired.returncode == 0, expired.stderr
    assert json.loads(expired.stdout)["stop_reason"] == "end_turn"
    assert "no pending interrupt" in cli(db, "expire", "o-2").stderr

    ids = questions(paused_trip(db))
    discarded = cli(db, "discard", "trip-1", "--json")
    assert discarded.returncode == 0, discarded.stderr
    assert sorted(json.loads(discarded.stdout)["interrupts"]) == sorted(ids.values())
    store = SQLiteStore(db)
    assert [p for p in asyncio.run(store.pending_interrupts()) if p.session_id == "trip-1"] == []
    fresh = app.open("trip-1", store)
    assert isinstance(fresh, Graph) and not fresh.is_paused and not fresh.needs_recovery
    for node in ("writer", "budget"):  # the waiting nodes' agents let their pauses go
        stored = asyncio.run(store.load(f"trip-1:node:{node}"))
        assert stored is not None and stored.pause is None
    assert "no pause or stopped run" in cli(db, "discard", "trip-1").stderr
    again = fresh("Plan another trip")  # takes a new task
    assert again.stop_reason == "interrupt" and len(again.interrupts) == 2
