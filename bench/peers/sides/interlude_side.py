"""The Interlude side of bench/peers: the agents of bench/bench.py, bench/journal.py,
bench/sessions.py and bench/resume.py, on ScriptedModel, run through the async API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/: the existing benches

import journal
import sessions
from _harness import (
    PG_DSN,
    Job,
    Result,
    Thunk,
    history_texts,
    import_time,
    main,
    measure,
)

import bench
from interlude import Agent, Message, Text, ToolUse
from interlude.multiagent import BeforeNodeCallEvent, Graph
from interlude.sessions import SessionStore, SQLiteStore
from interlude.testing import ScriptedModel

CYCLE_API = "Agent + ScriptedModel, async no-op tool, invoke_async"


async def cycle(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = journal.cycle_agent(journal.Variant("memory", None, hook=False), "", job.per)
        return lambda: _end_turn(agent.invoke_async("go"))

    return await measure(job, prepare, unit="us", api=CYCLE_API)


async def journaled(job: Job) -> Result:
    store = SQLiteStore(Path(job.tmp) / "journal.db")
    variant = journal.Variant("sqlite", cast(Any, store), hook=False)

    async def prepare(i: int) -> Thunk:
        agent = journal.cycle_agent(variant, f"c{i}", job.per)
        return lambda: _end_turn(agent.invoke_async("go"))

    try:
        return await measure(job, prepare, unit="us", api=f"{CYCLE_API}, SQLiteStore session")
    finally:
        store.close()


async def approval_memory(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = bench.paused_agent()

        async def run() -> None:
            paused = await agent.invoke_async("go")
            await _end_turn(agent.resume_async({q.id: True for q in paused.interrupts}))

        return run

    api = "before-tool hook event.interrupt(); invoke_async + resume_async, same agent"
    return await measure(job, prepare, unit="us", api=api)


async def round_trip(store: SessionStore, sid: str) -> None:
    """A run pausing at a before-tool approval, then a freshly built agent resuming it."""
    paused = await sessions.agent_for(
        store, sid, [[ToolUse("t1", "act", {"item": "x"})]]
    ).invoke_async("go")
    fresh = sessions.agent_for(store, sid, ["done"])
    await _end_turn(fresh.resume_async({paused.interrupts[0].id: True}))


async def approval_sqlite(job: Job) -> Result:
    store = SQLiteStore(Path(job.tmp) / "approval.db")

    async def prepare(i: int) -> Thunk:
        return lambda: round_trip(store, f"s{i}")

    try:
        api = "SQLiteStore; pause, fresh Agent on the session, resume_async"
        return await measure(job, prepare, unit="ms", api=api)
    finally:
        store.close()


def _ask_before_b(event: BeforeNodeCallEvent) -> None:
    if event.node == "b":
        event.interrupt("approve")


def two_node_graph(store: SessionStore, sid: str, a: list[Any], b: list[Any]) -> Graph:
    graph = Graph(
        {
            "a": Agent(ScriptedModel(a), name="a"),
            "b": Agent(ScriptedModel(b), name="b"),
        },
        [("a", "b")],
        entry="a",
        session=store,
        session_id=sid,
    )
    graph.hooks.add_callback(BeforeNodeCallEvent, _ask_before_b)
    return graph


async def graph_sqlite(job: Job) -> Result:
    store = SQLiteStore(Path(job.tmp) / "graph.db")

    async def prepare(i: int) -> Thunk:
        async def run() -> None:
            sid = f"g{i}"
            paused = await two_node_graph(store, sid, ["a done"], []).invoke_async("go")
            fresh = two_node_graph(store, sid, [], ["b done"])
            done = await fresh.resume_async({paused.interrupts[0].id: True})
            assert done.stop_reason == "end_turn", done

        return run

    try:
        api = "multiagent.Graph a -> b, BeforeNodeCallEvent interrupt on b, SQLiteStore"
        return await measure(job, prepare, unit="ms", api=f"{api}; fresh Graph resumes")
    finally:
        store.close()


async def fresh_resume(job: Job) -> Result:
    store = SQLiteStore(Path(job.tmp) / "resume.db")
    history = [
        Message("user" if role == "user" else "assistant", [Text(text)])
        for role, text in history_texts(job.per)
    ]

    async def prepare(i: int) -> Thunk:
        sid = f"r{i}"
        turns: list[Any] = ["ok", [ToolUse("t1", "act", {"item": "x"})]]
        agent = sessions.agent_for(store, sid, turns, history)
        await agent.invoke_async("warm up")  # stores the history
        paused = await agent.invoke_async("one more")

        async def run() -> None:
            fresh = sessions.agent_for(store, sid, ["done"])
            await _end_turn(fresh.resume_async({paused.interrupts[0].id: True}))

        return run

    try:
        api = "SQLiteStore; fresh Agent on a paused session, resume_async"
        return await measure(job, prepare, unit="ms", api=api, per=1)
    finally:
        store.close()


async def postgres(job: Job) -> Result:
    from interlude.sessions import PostgresStore

    schema = f"bench_peers_il_{Path(job.tmp).name.replace('-', '_')}"
    store = PostgresStore(PG_DSN, schema=schema)

    async def prepare(i: int) -> Thunk:
        return lambda: round_trip(store, f"p{i}")

    try:
        api = "PostgresStore (own schema, dropped after); pause, fresh Agent, resume_async"
        return await measure(job, prepare, unit="ms", api=api)
    finally:
        store.close()
        drop_schema(schema)


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def import_agent(job: Job) -> Result:
    return import_time(job, "from interlude import Agent")


async def _end_turn(result: Any) -> None:
    done = await result
    assert done.stop_reason == "end_turn", done


if __name__ == "__main__":
    main(
        "interlude",
        {
            "cycle": cycle,
            "journal": journaled,
            "approval-memory": approval_memory,
            "approval-sqlite": approval_sqlite,
            "graph-sqlite": graph_sqlite,
            "resume": fresh_resume,
            "postgres": postgres,
            "import": import_agent,
        },
    )
