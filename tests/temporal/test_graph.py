"""A graph registered with ``@app.graph`` on both engines: the embedded one (a Graph on a
session store, reopened for the answer) and Temporal (``AgentClient`` start / pending / answer
/ result; the graph runs in one workflow, each node agent's model calls and tool bodies as
activities of that node). Same questions, same answers, same result, each tool run once; and
a worker that keeps no workflow in its cache (every task replays the history: a lost worker's
successor does the same) runs no finished node or call again."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from interlude import Interrupt
from interlude.multiagent import node_path
from interlude.sessions import open_store

from . import agents
from .agents import app
from .conftest import Env
from .polling import pending, until

TASK = json.dumps(
    {"draft": [["touch", {"path": "draft.log"}]], "publish": [["touch", {"path": "publish.log"}]]}
)


def _question(q: Interrupt) -> tuple[object, ...]:
    return (q.id, q.name, q.reason, q.source, node_path(q), q.digest)


def _final(stop: str, text: str, state: dict[str, Any]) -> dict[str, Any]:
    """What must be equal across engines: the stop, the text, the record's results and order,
    each node's conversation, and the audit (without the times)."""
    record = state["record"]
    audit = [{k: v for k, v in e.items() if k != "at"} for e in record["audit"]]
    nodes = {n: s["messages"] for n, s in state["nodes"].items()}
    return {
        "stop": stop,
        "text": text,
        "order": record["order"],
        "runs": record["runs"],
        "results": record["results"],
        "nodes": nodes,
        "audit": audit,
    }


def _use(runs: Path) -> None:
    """Make ``runs`` the directory the tools record their runs in."""
    runs.mkdir()
    agents.RUNS_DIR = runs


async def _paused(env: Env, wid: str) -> list[Interrupt]:
    """The questions of workflow ``wid``, once it has paused."""
    return await pending(env.agents, wid)


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _embedded(runs: Path) -> tuple[list[tuple[object, ...]], list[object], dict[str, Any]]:
    _use(runs)
    store = open_store("memory:")
    session = f"g-{uuid.uuid4().hex[:8]}"
    graph: Any = await app.start_async("review", session, store)
    first = await graph.invoke_async(TASK)
    graph = await app.open_async(session, store)
    questions = [_question(q) for q in graph.interrupts]
    seen: list[object] = [first.stop_reason, _runs(runs / "draft.log")]
    answers = {q.id: True for q in graph.interrupts}
    done = await graph.resume_async(answers, by="alice")
    seen += [done.stop_reason, [q.id for q in done.interrupts]]
    graph = await app.open_async(session, store)
    return questions, seen, _final(done.stop_reason, str(done), graph.export_state())


async def _temporal(
    env: Env, runs: Path
) -> tuple[list[tuple[object, ...]], list[object], dict[str, Any], str]:
    _use(runs)
    wid = await env.agents.start("review", TASK)
    pending = await _paused(env, wid)
    questions = [_question(q) for q in pending]
    seen: list[object] = ["interrupt", _runs(runs / "draft.log")]
    out = await env.agents.answer(wid, {q.id: True for q in pending}, by="alice")
    seen += [out["stop_reason"], [i["id"] for i in out["interrupts"]]]
    result = await env.agents.result(wid)
    return questions, seen, _final(result["stop_reason"], result["text"], result["state"]), wid


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "no-cache"])
async def test_graph_on_both_engines(
    env: Env, temporal_address: str, tmp_path: Path, cached: bool
) -> None:
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    embedded = await _embedded(tmp_path / "embedded")
    queue = f"g-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)
    options: dict[str, Any] = {} if cached else {"max_cached_workflows": 0}
    async with worker(client, app, task_queue=queue, **options):
        on_temporal = Env(client, AgentClient(client, task_queue=queue), queue, temporal_address)
        *temporal, wid = await _temporal(on_temporal, tmp_path / "temporal")

    questions, seen, final = embedded
    assert len(questions) == 1 and questions[0][1] == "approve" and questions[0][4] == ("draft",)
    assert seen == ["interrupt", 0, "end_turn", []]
    assert final["text"] == "publish done." and final["order"] == ["draft", "publish"]
    assert (questions, seen, final) == tuple(temporal)
    for side in ("embedded", "temporal"):  # each tool ran once, on each engine
        for log in ("draft.log", "publish.log"):
            assert _runs(tmp_path / side / log) == 1, (side, log)

    # The history replays (the graph's engine is deterministic in workflow code).
    from interlude.temporal import replayer

    history = await client.get_workflow_handle(wid).fetch_history()
    await replayer(app).replay_workflow(history)


async def test_refused_answer_changes_nothing(env: Env, tmp_path: Path) -> None:
    """The Update's validator applies the graph's resume checks."""

    from interlude.errors import UnknownInterruptError

    agents.RUNS_DIR = tmp_path
    wid = await env.agents.start("review", TASK)
    pending = await _paused(env, wid)
    with pytest.raises(UnknownInterruptError):
        await env.agents.answer(wid, {"v1:node:draft:nope": True})
    assert [q.id for q in await env.agents.pending(wid)] == [q.id for q in pending]

    async def listed() -> bool:  # as a paused "review" (the search attributes: eventually)
        return wid in await env.agents.paused("review", names="approve")

    await until(listed, f"{wid} listed as paused")
    out = await env.agents.answer(wid, {pending[0].id: False}, by="bob")
    assert out["stop_reason"] == "end_turn"
    assert _runs(tmp_path / "draft.log") == 0 and _runs(tmp_path / "publish.log") == 1


SWARM = json.dumps(
    {
        "writer": [
            ["touch", {"path": "writer.log"}],
            ["handoff_to_agent", {"agent_name": "publisher", "message": "publish it"}],
        ],
        "publisher": [["touch", {"path": "publisher.log"}]],
    }
)


async def test_a_swarm_on_both_engines(env: Env, tmp_path: Path) -> None:
    """A swarm registered with ``@app.graph``: the writer's two calls (its tool and its handoff)
    wait for approval, then the publisher carries on; same questions, outcomes and result on
    both engines, each tool run once."""
    seen: dict[str, list[object]] = {}
    for side in ("embedded", "temporal"):
        _use(tmp_path / side)
        trace: list[object] = []
        if side == "embedded":
            store = open_store("memory:")
            swarm: Any = await app.start_async("review_swarm", "s", store)
            await swarm.invoke_async(SWARM)
            swarm = await app.open_async("s", store)
            questions = sorted(swarm.interrupts, key=lambda q: q.id)
            done = await swarm.resume_async({q.id: True for q in questions}, by="ana")
            outcome: object = (done.stop_reason, str(done), [q.id for q in done.interrupts])
            state = (await app.open_async("s", store)).export_state()
        else:
            wid = await env.agents.start("review_swarm", SWARM)
            await _paused(env, wid)
            questions = sorted(await env.agents.pending(wid), key=lambda q: q.id)
            out = await env.agents.answer(wid, {q.id: True for q in questions}, by="ana")
            outcome = (out["stop_reason"], out["text"], [i["id"] for i in out["interrupts"]])
            state = (await env.agents.result(wid))["state"]
        trace += [[_question(q) for q in questions], outcome]
        trace.append(_final(str(outcome[0]), str(outcome[1]), state))  # type: ignore[index]
        trace += [_runs(tmp_path / side / "writer.log"), _runs(tmp_path / side / "publisher.log")]
        seen[side] = trace
    assert seen["embedded"] == seen["temporal"]
    assert [q[1] for q in seen["embedded"][0]] == ["approve", "approve"]  # type: ignore[index]
    assert seen["embedded"][1] == ("end_turn", "publisher done.", [])
    assert seen["embedded"][-2:] == [1, 1]


NESTED = json.dumps(
    {
        "draft": [["touch", {"path": "draft.log"}]],
        "publish": [["touch", {"path": "publish.log"}]],
        "final": [["touch", {"path": "final.log"}]],
    }
)


async def test_a_nested_graph_on_both_engines(env: Env, tmp_path: Path) -> None:
    """A graph as a node: the inner graph's node's question comes up through both graphs
    (its path ``inner``, ``draft``), the answer goes down, and the outer graph carries on; the
    inner node agents' calls are activities addressed by their path. Same on both engines."""
    seen: dict[str, list[object]] = {}
    for side in ("embedded", "temporal"):
        _use(tmp_path / side)
        trace: list[object] = []
        if side == "embedded":
            store = open_store("memory:")
            graph: Any = await app.start_async("nested", "n", store)
            await graph.invoke_async(NESTED)
            graph = await app.open_async("n", store)
            [q] = graph.interrupts
            done = await graph.resume_async({q.id: True}, by="ana")
            outcome: tuple[object, ...] = (done.stop_reason, str(done), list(done.order))
        else:
            wid = await env.agents.start("nested", NESTED)
            [q] = await _paused(env, wid)
            await env.agents.answer(wid, {q.id: True}, by="ana")
            result = await env.agents.result(wid)
            order = result["state"]["record"]["order"]
            outcome = (result["stop_reason"], result["text"], order)
        trace += [_question(q), outcome]
        trace += [_runs(tmp_path / side / f"{n}.log") for n in ("draft", "publish", "final")]
        seen[side] = trace
    assert seen["embedded"] == seen["temporal"]
    assert seen["embedded"][0][4] == ("inner", "draft")  # type: ignore[index]
    assert seen["embedded"][1] == ("end_turn", "final done.", ["inner", "final"])
    assert seen["embedded"][2:] == [1, 1, 1]


async def test_a_node_hook_run_as_an_activity(env: Env, tmp_path: Path) -> None:
    """``as_activity`` in a node's agent: the activity rebuilds that node's agent."""
    _use(tmp_path / "runs")
    wid = await env.agents.start("review_noted", TASK)
    pending = await _paused(env, wid)
    out = await env.agents.answer(wid, {pending[0].id: True}, by="alice")
    assert out["stop_reason"] == "end_turn" and out["text"] == "publish done."
    assert _runs(tmp_path / "runs" / "publish.log.hook") == 1
    assert _runs(tmp_path / "runs" / "draft.log.hook") == 0  # only publish's agent notes
    assert _runs(tmp_path / "runs" / "publish.log") == 1


async def test_a_lost_worker_reruns_no_finished_node(temporal_address: str, tmp_path: Path) -> None:
    """The worker running the graph is killed while ``publish``'s tool (not idempotent) runs,
    after ``draft`` finished: another worker carries the workflow on from its history. The
    ``draft`` node is not run again (its tool ran once); the lost body is in doubt, asked as
    the ``publish`` node's question (as the embedded engine asks after a crash), and answered
    through the graph."""
    import asyncio
    import os
    import signal
    from datetime import timedelta

    from temporalio.client import Client

    from interlude.temporal import AgentClient, replayer, worker

    from .agents import KILL_TEST_TOOLS, release
    from .test_in_doubt import _until
    from .test_scale import _start_worker_process

    draft, slow = tmp_path / "draft.log", tmp_path / "slow"
    task = json.dumps(
        {
            "draft": [["touch", {"path": str(draft)}]],
            "publish": [["slow", {"path": str(slow), "seconds": 60}]],
        }
    )
    queue = f"gl-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)
    env = Env(client, AgentClient(client, task_queue=queue), queue, temporal_address)
    doomed = _start_worker_process(temporal_address, queue)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "ready"
        wid = await env.agents.start("review", task)
        [approval] = await _paused(env, wid)
        answered = asyncio.ensure_future(env.agents.answer(wid, {approval.id: True}, by="alice"))
        started = Path(str(slow) + ".started")

        async def only_the_body_runs() -> bool:
            if not _runs(started):
                return False
            described = await client.get_workflow_handle(wid).describe()
            return not described.raw_description.HasField("pending_workflow_task")

        await _until(only_the_body_runs, "the publish node's slow body alone")
        assert _runs(draft) == 1
        os.kill(doomed.pid, signal.SIGKILL)  # mid-body
        doomed.wait()
        sticky = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
        async with worker(client, app, task_queue=queue, tools=KILL_TEST_TOOLS, **sticky):
            outcome = await answered  # the run paused again: on the in-doubt question
            assert outcome["stop_reason"] == "interrupt"
            [doubt] = await env.agents.pending(wid)
            assert (doubt.name, node_path(doubt)) == ("in_doubt", ("publish",))
            release(slow)
            done = await env.agents.answer(wid, {doubt.id: {"result": "by hand"}}, by="bob")
            assert (done["stop_reason"], done["text"]) == ("end_turn", "publish done.")
            result = await env.agents.result(wid)
    finally:
        if doomed.poll() is None:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait()
        if doomed.stdout is not None:
            doomed.stdout.close()
    assert _runs(draft) == 1 and _runs(started) == 1 and _runs(slow) == 0
    assert result["state"]["record"]["runs"] == {"draft": 1, "publish": 1}
    history = await client.get_workflow_handle(wid).fetch_history()
    await replayer(app).replay_workflow(history)


async def test_a_nodes_deadline_is_a_workflow_timer(env: Env, tmp_path: Path) -> None:
    """A node's question with a deadline: the workflow's timer settles it (its default), as
    ``Graph.resume_expired`` does embedded, in workflow time; the graph carries on."""
    _use(tmp_path / "runs")
    wid = await env.agents.start("review_deadline", TASK)
    [question] = await _paused(env, wid)
    assert question.expires_at is not None and node_path(question) == ("draft",)
    result = await env.agents.result(wid)  # no answer: the deadline applies the default
    assert (result["stop_reason"], result["text"]) == ("end_turn", "publish done.")
    [entry] = result["state"]["record"]["audit"]
    assert (entry["interrupt_id"], entry["by"], entry["expired"]) == (question.id, "expiry", True)
    assert entry["at"] >= question.expires_at
    assert _runs(tmp_path / "runs" / "draft.log") == 1
    assert _runs(tmp_path / "runs" / "publish.log") == 1
    assert await env.agents.pending(wid) == []


async def test_a_paused_graph_continues_as_new(env: Env, tmp_path: Path) -> None:
    """A paused graph past ``continue_after_model_calls`` continues as new with its exported
    state: the new run waits on the same question (same id), the answer reaches the node, and
    nothing finished runs again."""

    from interlude.temporal import Limits

    _use(tmp_path / "runs")
    wid = await env.agents.start("review", TASK, limits=Limits(continue_after_model_calls=1))
    handle = env.client.get_workflow_handle(wid)
    first = (await handle.describe()).run_id
    [question] = await _paused(env, wid)

    async def continued() -> bool:  # the run that paused continues as new
        return (await handle.describe()).run_id != first

    await until(continued, "the paused graph to continue as new")
    assert [q.id for q in await _paused(env, wid)] == [question.id]
    out = await env.agents.answer(wid, {question.id: True}, by="alice")
    assert (out["stop_reason"], out["text"]) == ("end_turn", "publish done.")
    result = await env.agents.result(wid)
    assert result["state"]["record"]["runs"] == {"draft": 1, "publish": 1}
    [entry] = result["state"]["record"]["audit"]
    assert (entry["interrupt_id"], entry["by"]) == (question.id, "alice")
    assert _runs(tmp_path / "runs" / "draft.log") == 1
    assert _runs(tmp_path / "runs" / "publish.log") == 1


async def test_the_temporal_inbox_lists_and_answers_a_graphs_question(
    env: Env, tmp_path: Path
) -> None:
    """``TemporalInbox`` (the web inbox's backend) on a paused graph: its question is listed
    under the graph's name and workflow id, and an answer given there carries the graph on."""

    from interlude.temporal import TemporalInbox

    _use(tmp_path / "runs")
    wid = await env.agents.start("review", TASK)
    [question] = await _paused(env, wid)
    inbox = TemporalInbox(env.client, task_queue=env.task_queue)

    async def listed() -> list[Any]:  # the listing is eventually consistent
        return [p for p in await inbox.pending(agent="review") if p.session_id == wid]

    [row] = await until(listed, f"{wid} listed")
    assert row.interrupt.id == question.id and row.agent == "review"
    [taken] = await inbox.answer(
        wid, {question.id: True}, by="ana", shown={question.id: question.digest}
    )
    assert (taken.interrupt_id, taken.by) == (question.id, "ana")
    result = await env.agents.result(wid)
    assert (result["stop_reason"], result["text"]) == ("end_turn", "publish done.")
    assert _runs(tmp_path / "runs" / "draft.log") == 1
    page = await inbox.session(wid)  # the finished graph's page: its audit trail
    assert [(e.interrupt_id, e.by) for e in page.audit] == [(question.id, "ana")]
    assert page.workflow["reply"] == "publish done."


@pytest.mark.parametrize("verdict", ["yes", "no"])
async def test_a_graph_hooks_question_on_both_engines(
    env: Env, tmp_path: Path, verdict: str
) -> None:
    """Two questions, one from a node's agent (draft's approval), then one from the graph's own
    before-node hook (before publish): the same ids and outcomes on both engines."""
    seen: dict[str, list[object]] = {}
    for side in ("embedded", "temporal"):
        _use(tmp_path / side)
        trace: list[object] = []
        if side == "embedded":
            store = open_store("memory:")
            graph: Any = await app.start_async("review_gated", "g", store)
            await graph.invoke_async(TASK)
            for answer in (True, verdict):
                graph = await app.open_async("g", store)
                [q] = graph.interrupts
                trace.append(_question(q))
                done = await graph.resume_async({q.id: answer}, by="alice")
                trace.append((done.stop_reason, str(done)))
        else:
            wid = await env.agents.start("review_gated", TASK)
            for answer in (True, verdict):
                [q] = await _paused(env, wid)
                trace.append(_question(q))
                out = await env.agents.answer(wid, {q.id: answer}, by="alice")
                trace.append((out["stop_reason"], out["text"]))
        trace += [_runs(tmp_path / side / "draft.log"), _runs(tmp_path / side / "publish.log")]
        seen[side] = trace
    assert seen["embedded"] == seen["temporal"]
    assert seen["embedded"][2][3] == "before_node_call"  # the graph hook's question
    assert seen["embedded"][-2:] == [1, 1 if verdict == "yes" else 0]


FORK = json.dumps(
    {
        "a": [["touch", {"path": "a.log"}]],
        "b": [["touch", {"path": "b.log"}]],
        "after_a": [["touch", {"path": "after_a.log"}]],
    }
)


@pytest.mark.parametrize("partial", [False, True])
async def test_partial_answers_on_both_engines(env: Env, tmp_path: Path, partial: bool) -> None:
    """``answer(..., partial=True)``: the answered node's branch goes on while the other
    question waits, as ``Graph.resume(partial=True)`` does embedded; without it, no new node
    starts while a question is open. Same outcomes on both engines."""
    seen: dict[str, list[object]] = {}
    texts: dict[str, str] = {}
    for side in ("embedded", "temporal"):
        _use(tmp_path / side)
        trace: list[object] = []
        if side == "embedded":
            store = open_store("memory:")
            graph: Any = await app.start_async("fork", "f", store)
            await graph.invoke_async(FORK)
            for _ in range(2):
                graph = await app.open_async("f", store)
                q = sorted(graph.interrupts, key=lambda q: node_path(q))[0]
                trace.append(_question(q))
                done = await graph.resume_async({q.id: True}, by="ana", partial=partial)
                trace.append((done.stop_reason, [q.id for q in done.interrupts]))
                trace.append(_runs(tmp_path / side / "after_a.log"))
                texts[side] = str(done)
        else:
            wid = await env.agents.start("fork", FORK)
            pending = await _paused(env, wid)
            for i in range(2):
                if i:
                    pending = await env.agents.pending(wid)
                q = sorted(pending, key=lambda q: node_path(q))[0]
                trace.append(_question(q))
                out = await env.agents.answer(wid, {q.id: True}, by="ana", partial=partial)
                trace.append((out["stop_reason"], [i["id"] for i in out["interrupts"]]))
                trace.append(_runs(tmp_path / side / "after_a.log"))
                texts[side] = out["text"]
        seen[side] = trace
    assert seen["embedded"] == seen["temporal"]
    assert seen["embedded"][2] == (1 if partial else 0)  # after a's answer: after_a ran?
    assert seen["embedded"][-1] == 1
    # The text is the last node to finish's: when b and after_a finish in the same resume
    # (partial=False), which of the two ends last is a race on either engine.
    last = {"b done."} if partial else {"b done.", "after_a done."}
    assert texts["embedded"] in last and texts["temporal"] in last


async def test_an_agent_refuses_partial(env: Env, tmp_path: Path) -> None:
    from interlude.errors import ResumeInputError

    from .test_workflow import _prompt

    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "x")})))
    [question] = await _paused(env, wid)
    with pytest.raises(ResumeInputError, match="partial"):
        await env.agents.answer(wid, {question.id: True}, partial=True)
    out = await env.agents.answer(wid, {question.id: True})
    assert out["stop_reason"] == "end_turn"
