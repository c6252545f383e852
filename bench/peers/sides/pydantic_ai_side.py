"""The Pydantic AI side of bench/peers: ``pydantic_ai.Agent`` on its own ``FunctionModel``
(replies from a script), async tools, the async API (``agent.run``). Approval is a deferred
tool (``requires_approval=True``, output ``[str, DeferredToolRequests]``), answered by a second
``run`` with ``message_history`` and ``DeferredToolResults``. Pydantic AI ships no SQLite or
PostgreSQL persistence and no graph with interrupts, so those workloads are n/a."""

from __future__ import annotations

from typing import Any

from _harness import Job, Result, Thunk, import_time, main, measure, not_applicable
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

NO_STORE = (
    "no SQLite or PostgreSQL store in pydantic-ai-slim (message history and deferred results are "
    "the application's to keep; only InMemoryConversationStore ships)"
)


def scripted(replies: list[ModelResponse]) -> FunctionModel:
    """A FunctionModel handing out ``replies`` in turn."""
    left = iter(replies)

    async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(left)

    return FunctionModel(reply)


def ask(tool: str, i: int, args: dict[str, Any] | None = None) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(tool_name=tool, args=args or {}, tool_call_id=f"t{i}")]
    )


DONE = ModelResponse(parts=[TextPart("done")])


async def noop() -> str:
    """Do nothing."""
    return "ok"


async def act(item: str) -> str:
    """Act on an item."""
    return f"did {item}"


async def cycle(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent = Agent(scripted([*(ask("noop", t) for t in range(job.per)), DONE]))
        agent.tool_plain(noop)

        async def run() -> None:
            result = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
            assert result.output == "done", result.output

        return run

    api = "Agent + FunctionModel, async no-op tool_plain, run"
    return await measure(job, prepare, unit="us", api=api)


async def approval_memory(job: Job) -> Result:
    async def prepare(i: int) -> Thunk:
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            scripted([ask("act", 1, {"item": "x"}), DONE]), output_type=[str, DeferredToolRequests]
        )
        agent.tool_plain(requires_approval=True)(act)

        async def run() -> None:
            paused = await agent.run("go")
            requests = paused.output
            assert isinstance(requests, DeferredToolRequests), requests
            results = DeferredToolResults(
                approvals={c.tool_call_id: True for c in requests.approvals}
            )
            done = await agent.run(
                message_history=paused.all_messages(), deferred_tool_results=results
            )
            assert done.output == "done", done.output

        return run

    api = (
        "tool_plain(requires_approval=True), DeferredToolRequests; run, then "
        "run(message_history, deferred_tool_results)"
    )
    return await measure(job, prepare, unit="us", api=api)


async def import_agent(job: Job) -> Result:
    return import_time(job, "from pydantic_ai import Agent")


if __name__ == "__main__":
    main(
        "pydantic_ai",
        {
            "cycle": cycle,
            "journal": not_applicable(NO_STORE),
            "approval-memory": approval_memory,
            "approval-sqlite": not_applicable(NO_STORE),
            "graph-sqlite": not_applicable(
                "no graph of agents with interrupts in pydantic-ai-slim (pydantic-graph is a "
                "separate package, its persistence is file or memory)"
            ),
            "resume": not_applicable(NO_STORE),
            "postgres": not_applicable(NO_STORE),
            "import": import_agent,
        },
    )
