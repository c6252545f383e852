"""The LangGraph side of bench/peers: ``create_react_agent`` (langgraph.prebuilt) and a
two-node ``StateGraph``, on langchain-core's ``FakeMessagesListChatModel`` (given
``bind_tools``), through the sync API (``invoke``) with ``SqliteSaver``, ``PostgresSaver`` and
``InMemorySaver``. Saving runs with ``durability="sync"``: each step is on disk before the next
one starts, the guarantee Interlude's journal gives (LangGraph's default, ``"async"``, saves
while the next step runs)."""

from __future__ import annotations

import sqlite3
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

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
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

# create_react_agent moved to langchain.agents.create_agent (another package); kept in langgraph
warnings.filterwarnings("ignore", message="create_react_agent has been moved")

AGENT_API = "prebuilt create_react_agent + FakeMessagesListChatModel, sync no-op tool, invoke"


class ScriptedChat(FakeMessagesListChatModel):
    """langchain-core's fake chat model, accepting tools (its replies are scripted anyway)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self


def calls(n: int, name: str = "noop", args: dict[str, Any] | None = None) -> list[BaseMessage]:
    """``n`` replies each asking for one tool call, then "done"."""
    asks: list[BaseMessage] = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args or {}, "id": f"t{i}"}])
        for i in range(n)
    ]
    return [*asks, AIMessage(content="done")]


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


@tool
def act(item: str) -> str:
    """Act on an item, once a person approves."""
    if interrupt({"approve": item}) != "yes":
        return "refused"
    return f"did {item}"


def _config(thread: str, steps: int) -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 2 * steps + 10}


def _done(state: dict[str, Any]) -> None:
    assert state["messages"][-1].content == "done", state["messages"][-1]
    assert "__interrupt__" not in state, state


def _sqlite(job: Job, name: str) -> SqliteSaver:
    conn = sqlite3.connect(Path(job.tmp) / name, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def drive(graph: Any, given: Any, config: Any, job: Job, **options: Any) -> dict[str, Any]:
    """``graph.invoke`` as invoke itself does it (``stream`` with ``stream_mode="values"``,
    keeping the last), stopping with TimeoutError past the job's budget: a sync run cannot be
    cancelled from the event loop."""
    deadline = time.perf_counter() + job.budget_s if job.budget_s else None
    last: dict[str, Any] = {}
    for state in graph.stream(given, config, stream_mode="values", **options):
        last = state
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError
    return last


async def cycle(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = create_react_agent(ScriptedChat(responses=calls(job.per)), [noop])

        async def run() -> None:
            _done(drive(agent, {"messages": [HumanMessage("go")]}, _config("c", job.per), job))

        return run

    return await measure(job, prepare, unit="us", api=AGENT_API)


async def journaled(job: Job) -> Result:
    saver = _sqlite(job, "journal.db")

    async def prepare(i: int) -> Thunk:
        agent = create_react_agent(
            ScriptedChat(responses=calls(job.per)), [noop], checkpointer=saver
        )

        async def run() -> None:
            given = {"messages": [HumanMessage("go")]}
            state = drive(agent, given, _config(f"c{i}", job.per), job, durability="sync")
            _done(state)

        return run

    try:
        return await measure(job, prepare, unit="us", api=f"{AGENT_API}, SqliteSaver")
    finally:
        saver.conn.close()


def approval_agent(checkpointer: Any, replies: list[BaseMessage]) -> Any:
    return create_react_agent(ScriptedChat(responses=replies), [act], checkpointer=checkpointer)


def ask_act() -> list[BaseMessage]:
    return calls(1, "act", {"item": "x"})


def pause_then_resume(
    checkpointer: Any,
    thread: str,
    first: Sequence[BaseMessage] = (HumanMessage("go"),),
    fresh: Callable[[], Any] | None = None,
) -> None:
    """A run whose tool calls interrupt(); then (on a fresh graph if ``fresh``) a resume."""
    agent = approval_agent(checkpointer, ask_act())
    config = _config(thread, 2)
    paused = agent.invoke({"messages": list(first)}, config)
    assert "__interrupt__" in paused, paused
    again = fresh() if fresh is not None else agent
    _done(again.invoke(Command(resume="yes"), config))


async def approval_memory(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        saver = InMemorySaver()

        async def run() -> None:
            pause_then_resume(saver, "a")

        return run

    api = "interrupt() in the tool, InMemorySaver; invoke, then invoke(Command(resume=...))"
    return await measure(job, prepare, unit="us", api=api)


async def approval_sqlite(job: Job) -> Result:
    saver = _sqlite(job, "approval.db")

    async def prepare(i: int) -> Thunk:
        def fresh() -> Any:
            return approval_agent(saver, [AIMessage(content="done")])

        async def run() -> None:
            pause_then_resume(saver, f"s{i}", fresh=fresh)

        return run

    try:
        api = "interrupt() in the tool, SqliteSaver; a freshly compiled agent resumes"
        return await measure(job, prepare, unit="ms", api=api)
    finally:
        saver.conn.close()


class GraphState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def two_node_graph(checkpointer: Any, a: list[BaseMessage], b: list[BaseMessage]) -> Any:
    model_a, model_b = (
        ScriptedChat(responses=a or [AIMessage("-")]),
        ScriptedChat(responses=b or [AIMessage("-")]),
    )

    def node_a(state: GraphState) -> dict[str, Any]:
        return {"messages": [model_a.invoke(state["messages"])]}

    def node_b(state: GraphState) -> dict[str, Any]:
        interrupt("approve")
        return {"messages": [model_b.invoke(state["messages"])]}

    builder = StateGraph(GraphState)
    builder.add_node("a", node_a)
    builder.add_node("b", node_b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=checkpointer)


async def graph_sqlite(job: Job) -> Result:
    saver = _sqlite(job, "graph.db")

    async def prepare(i: int) -> Thunk:
        async def run() -> None:
            config = _config(f"g{i}", 2)
            first = two_node_graph(saver, [AIMessage("a done")], [])
            paused = first.invoke({"messages": [HumanMessage("go")]}, config)
            assert "__interrupt__" in paused, paused
            fresh = two_node_graph(saver, [], [AIMessage("done")])
            _done(fresh.invoke(Command(resume="yes"), config))

        return run

    try:
        api = "StateGraph a -> b, interrupt() in b (nodes call the fake model), SqliteSaver"
        return await measure(job, prepare, unit="ms", api=f"{api}; fresh graph resumes")
    finally:
        saver.conn.close()


def history(n: int) -> list[BaseMessage]:
    return [
        HumanMessage(text) if role == "user" else AIMessage(text) for role, text in history_texts(n)
    ]


async def fresh_resume(job: Job) -> Result:
    saver = _sqlite(job, "resume.db")
    talk = history(job.per)

    async def prepare(i: int) -> Thunk:
        thread = f"r{i}"
        config = _config(thread, 2)
        agent = approval_agent(saver, ask_act())
        paused = agent.invoke({"messages": [*talk, HumanMessage("one more")]}, config)
        assert "__interrupt__" in paused, paused

        async def run() -> None:
            fresh = approval_agent(saver, [AIMessage(content="done")])
            _done(fresh.invoke(Command(resume="yes"), config))

        return run

    try:
        api = "SqliteSaver; a freshly compiled agent resumes a paused thread"
        return await measure(job, prepare, unit="ms", api=api, per=1)
    finally:
        saver.conn.close()


async def postgres(job: Job) -> Result:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    schema = f"bench_peers_lg_{Path(job.tmp).name.replace('-', '_')}"
    admin = psycopg.connect(PG_DSN, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{schema}"')
    conn = psycopg.connect(
        PG_DSN,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    saver = PostgresSaver(conn)
    saver.setup()

    async def prepare(i: int) -> Thunk:
        def fresh() -> Any:
            return approval_agent(saver, [AIMessage(content="done")])

        async def run() -> None:
            pause_then_resume(saver, f"p{i}", fresh=fresh)

        return run

    try:
        api = "PostgresSaver (own schema, dropped after); a freshly compiled agent resumes"
        return await measure(job, prepare, unit="ms", api=api)
    finally:
        conn.close()
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


async def import_agent(job: Job) -> Result:
    return import_time(job, "from langgraph.prebuilt import create_react_agent")


if __name__ == "__main__":
    main(
        "langgraph",
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
