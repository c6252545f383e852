"""The Strands Agents side of bench/peers: ``strands.Agent`` on a scripted model written to the
public ``strands.models.Model`` interface (it streams Bedrock-style events), async tools, the
async API (``invoke_async``). Interrupts are raised in ``BeforeToolCallEvent`` /
``BeforeNodeCallEvent`` hooks and answered with ``interruptResponse`` blocks. Strands ships no
SQLite persistence: the durable workloads run on ``FileSessionManager`` (JSON files, one per
message, in a directory per session), its closest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from _harness import (
    Job,
    Result,
    Thunk,
    history_texts,
    import_time,
    main,
    measure,
    not_applicable,
)
from strands import Agent, tool
from strands.hooks import BeforeNodeCallEvent, BeforeToolCallEvent
from strands.models import Model
from strands.multiagent import GraphBuilder
from strands.session import FileSessionManager
from strands.types.interrupt import InterruptResponseContent

FILES = "FileSessionManager (JSON files; Strands has no SQLite store)"


class ScriptedModel(Model):
    """Replies from a script, one per model call: a tool name asks for that tool (no input),
    any other text is the answer."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.calls = 0

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    async def structured_output(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        reply = self.replies[self.calls]
        self.calls += 1
        yield {"messageStart": {"role": "assistant"}}
        if reply in TOOLS:
            use = {"toolUseId": f"t{self.calls}", "name": reply}
            yield {"contentBlockStart": {"start": {"toolUse": use}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": TOOLS[reply]}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": reply}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


@tool
async def act(item: str) -> str:
    """Act on an item.

    Args:
        item: The item.
    """
    return f"did {item}"


TOOLS = {"noop": "{}", "act": '{"item": "x"}'}


def approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", reason=event.tool_use["input"]) != "yes":
        event.cancel_tool = "refused"


def agent(replies: list[str], session: Any = None, messages: Any = None, ask: bool = True) -> Agent:
    built = Agent(
        model=ScriptedModel(replies),
        tools=[act] if ask else [noop],
        callback_handler=None,
        session_manager=session,
        messages=messages,
    )
    if ask:
        built.hooks.add_callback(BeforeToolCallEvent, approve)
    return built


def answers(result: Any) -> list[InterruptResponseContent]:
    return [
        {"interruptResponse": {"interruptId": i.id, "response": "yes"}} for i in result.interrupts
    ]


def _done(result: Any) -> None:
    assert result.stop_reason == "end_turn", result.stop_reason
    assert str(result).strip() == "done", str(result)


async def cycle(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        built = agent(["noop"] * job.per + ["done"], ask=False)

        async def run() -> None:
            _done(await built.invoke_async("go"))

        return run

    api = "Agent + scripted strands.models.Model, async no-op tool, invoke_async"
    return await measure(job, prepare, unit="us", api=api)


async def approval_memory(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        built = agent(["act", "done"])

        async def run() -> None:
            paused = await built.invoke_async("go")
            assert paused.stop_reason == "interrupt", paused.stop_reason
            _done(await built.invoke_async(answers(paused)))

        return run

    api = "BeforeToolCallEvent hook event.interrupt(); invoke_async, then interruptResponse"
    return await measure(job, prepare, unit="us", api=api)


def _files(job: Job, sid: str) -> FileSessionManager:
    return FileSessionManager(session_id=sid, storage_dir=str(Path(job.tmp) / "sessions"))


async def approval_files(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        async def run() -> None:
            sid = f"s{i}"
            paused = await agent(["act"], _files(job, sid)).invoke_async("go")
            assert paused.stop_reason == "interrupt", paused.stop_reason
            fresh = agent(["done"], _files(job, sid))
            _done(await fresh.invoke_async(answers(paused)))

        return run

    api = f"BeforeToolCallEvent interrupt, {FILES}; a fresh Agent resumes"
    return await measure(job, prepare, unit="ms", api=api)


def ask_before_b(event: BeforeNodeCallEvent) -> None:
    if event.node_id == "b":
        event.interrupt("approve")


def two_node_graph(job: Job, sid: str, a: list[str], b: list[str]) -> Any:
    builder = GraphBuilder()
    builder.add_node(agent(a or ["-"], ask=False), "a")
    builder.add_node(agent(b or ["-"], ask=False), "b")
    builder.add_edge("a", "b")
    builder.set_entry_point("a")
    builder.set_max_node_executions(10)
    builder.set_session_manager(_files(job, sid))
    graph = builder.build()
    graph.hooks.add_callback(BeforeNodeCallEvent, ask_before_b)
    return graph


async def graph_files(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        async def run() -> None:
            sid = f"g{i}"
            paused = await two_node_graph(job, sid, ["a done"], []).invoke_async("go")
            assert paused.interrupts, paused.status
            fresh = two_node_graph(job, sid, [], ["done"])
            done = await fresh.invoke_async(answers(paused))
            assert str(done.status) in ("Status.COMPLETED", "completed"), done.status

        return run

    api = f"Graph (GraphBuilder) a -> b, BeforeNodeCallEvent interrupt on b, {FILES}"
    return await measure(job, prepare, unit="ms", api=f"{api}; fresh Graph resumes")


async def fresh_resume(job: Job) -> Result:
    talk = [{"role": role, "content": [{"text": text}]} for role, text in history_texts(job.per)]

    async def prepare(i: int) -> Thunk:
        sid = f"r{i}"
        first = agent(["act"], _files(job, sid), messages=list(talk))
        paused = await first.invoke_async("one more")
        assert paused.stop_reason == "interrupt", paused.stop_reason

        async def run() -> None:
            fresh = agent(["done"], _files(job, sid))
            _done(await fresh.invoke_async(answers(paused)))

        return run

    api = f"{FILES}; a fresh Agent resumes a paused session"
    return await measure(job, prepare, unit="ms", api=api, per=1)


async def import_agent(job: Job) -> Result:
    return import_time(job, "from strands import Agent")


if __name__ == "__main__":
    main(
        "strands",
        {
            "cycle": cycle,
            "journal": not_applicable(
                "no SQLite persistence (FileSessionManager writes JSON files; not measured here)"
            ),
            "approval-memory": approval_memory,
            "approval-sqlite": approval_files,
            "graph-sqlite": graph_files,
            "resume": fresh_resume,
            "postgres": not_applicable("no PostgreSQL session store"),
            "import": import_agent,
        },
    )
