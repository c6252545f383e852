"""The Pydantic AI side of bench/peers/temporal_runs.py: a worker process of Pydantic AI on
Temporal, run by the pydantic_ai venv (``pydantic-ai-slim[temporal]``).

The workload of bench/temporal_throughput.py as near as Pydantic AI's API allows: an ``Agent``
with a ``FunctionModel`` that asks for tool ``pay`` (to the user's text) and then answers
"done", made durable by the ``TemporalDurability`` capability (model calls and the tool run as
activities). ``pay`` needs approval, so the agent's run ends with ``DeferredToolRequests``; the
workflow :class:`PaiBench` then sets the Bool search attribute ``PaiPending`` (Pydantic AI sets
none: an application does, to find its paused runs), lists the tool calls asked about in its
query ``pending`` and waits for the Update ``answer({tool call id: approved})``, runs the agent
again with the message history and ``DeferredToolResults``, clears ``PaiPending`` and returns
the output, which the Update returns too. Each tool run appends this process's id to a file
named after its run, in ``$INTERLUDE_BENCH_RAN_DIR``, for the exactly-once check.

    python pydantic_ai_temporal.py worker HOST:PORT TASK_QUEUE

prints one line once it polls the task queue, and stops cleanly on SIGINT or SIGTERM.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow
from temporalio.common import SearchAttributeKey

WORKFLOW = "PaiBench"
PENDING = SearchAttributeKey.for_bool("PaiPending")
SEARCH_ATTRIBUTES = {PENDING.name: "Bool"}  # for the dev server's --search-attribute
RAN_DIR = "INTERLUDE_BENCH_RAN_DIR"  # bench/temporal_throughput.py's: where tool runs are noted


async def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for ``pay`` to the user's text; once its result is in, answer "done"."""
    last = messages[-1]
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    first = messages[0]
    assert isinstance(first, ModelRequest)
    prompt = next(p.content for p in first.parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[ToolCallPart("pay", {"to": prompt}, tool_call_id="p1")])


agent: Agent[None, str | DeferredToolRequests] = Agent(
    FunctionModel(_reply),
    name="pai_bench",
    output_type=[str, DeferredToolRequests],
    capabilities=[TemporalDurability()],
)


@agent.tool_plain(requires_approval=True)
async def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    fd = os.open(Path(os.environ[RAN_DIR]) / to, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())  # one small append: atomic
    finally:
        os.close(fd)
    return "paid"


@workflow.defn(name=WORKFLOW)
class PaiBench(PydanticAIWorkflow):
    """One run of the agent on ``who``, paused for approval in between."""

    __pydantic_ai_agents__ = (agent,)

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._answers: dict[str, bool] | None = None
        self._output: str | None = None

    @workflow.run
    async def run(self, who: str) -> str:
        first = await agent.run(who)
        output = first.output
        if isinstance(output, DeferredToolRequests):
            self._pending = [call.tool_call_id for call in output.approvals]
            workflow.upsert_search_attributes([PENDING.value_set(True)])
            await workflow.wait_condition(lambda: self._answers is not None)
            assert self._answers is not None
            results = DeferredToolResults(approvals=dict(self._answers))
            second = await agent.run(
                message_history=first.all_messages(), deferred_tool_results=results
            )
            output = second.output
            self._pending = []
            workflow.upsert_search_attributes([PENDING.value_set(False)])
        if not isinstance(output, str):
            raise RuntimeError(f"asked again after the answer: {output!r}")
        self._output = output
        await workflow.wait_condition(workflow.all_handlers_finished)
        return output

    @workflow.query
    def pending(self) -> list[str]:
        """The ids of the tool calls waiting on approval."""
        return self._pending

    @workflow.update
    async def answer(self, approvals: dict[str, bool]) -> str:
        """Approve (or not) the pending tool calls; returns the run's output."""
        self._answers = approvals
        await workflow.wait_condition(lambda: self._output is not None)
        assert self._output is not None
        return self._output

    @answer.validator
    def _check(self, approvals: dict[str, bool]) -> None:
        if self._answers is not None or set(approvals) != set(self._pending):
            raise ValueError(f"not waiting on {sorted(approvals)!r}")


async def serve(address: str, task_queue: str) -> None:
    """A worker for :class:`PaiBench` on ``task_queue`` until SIGINT or SIGTERM."""
    import asyncio
    import signal

    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
    from temporalio.client import Client
    from temporalio.worker import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    async with Worker(client, task_queue=task_queue, workflows=[PaiBench]):
        print(f"worker {os.getpid()} on {task_queue}", flush=True)
        await stop.wait()


def main() -> None:
    import argparse
    import asyncio
    import sys

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("address", help="the Temporal server, HOST:PORT")
    parser.add_argument("task_queue")
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue))
    sys.stdout.flush()
    os._exit(0)  # temporalio's threads can abort a finalizing interpreter (sdk-python#300)


if __name__ == "__main__":
    # The workflow from a module of its own name, not __main__: the sandbox imports it by name.
    from pydantic_ai_temporal import main as main_of_module

    main_of_module()
