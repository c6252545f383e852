"""Prototype of interlude.temporal: the unchanged Interlude loop runs in workflow code; the
model call and each tool body become activities through the existing extension points
(the Model protocol and the AgentTool protocol); a pause is a wait_condition on answers
delivered by an Update whose validator is interlude's own check_answers.

Nothing in /work/main is changed: the agent is built by the app's factory, then its model and
tools are swapped for activity-backed stand-ins (in the real thing: an executor object the
Run delegates to).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import demo_app  # the user's App (factories by name): passed through, imported once
    from interlude import Agent, Interrupt, ToolResult, ToolUse
    from interlude._agent._answering import check_answers
    from interlude._messages import Message, Usage, block_to_dict, messages_from_dicts, tool_result_from_dict
    from interlude._stream import ModelStop, TextDelta, ToolUseStart, ReasoningDelta
    from interlude._tools._spec import ToolSpec
    from interlude.errors import InterruptSignal, ModelError, ResumeError
    # Interlude (and pydantic) import lazily; a lazy import made later, inside the sandbox,
    # would load a second copy of the module there. Load them all now, passed through.
    import interlude._agent._loop, interlude._agent._batch, interlude._agent._codec  # noqa
    import interlude._agent._transitions, interlude._agent._answering, interlude._typed  # noqa
    import interlude._agent._signing, interlude._audit  # noqa
    import pydantic, pydantic.main, pydantic.fields, pydantic.json_schema  # noqa
    import jsonschema  # noqa

PENDING = SearchAttributeKey.for_bool("InterludePending")
NAMES = SearchAttributeKey.for_keyword_list("InterludeInterruptNames")
AGENT = SearchAttributeKey.for_keyword("InterludeAgent")


# --- activities (run on any worker; build the agent by name, no workflow restrictions) --------

@activity.defn(name="interlude.model")
async def model_activity(agent_name: str, messages: list[dict], system_prompt: str | None) -> dict:
    agent = demo_app.build(agent_name)
    from interlude._agent._loop import Run
    from interlude._agent._state import Progress

    agent._messages[:] = messages_from_dicts(messages)
    run = Run(agent, Progress(), None, None)
    run.clean = True
    response = await run._call_model()  # the loop's own stream assembly, in the activity
    from interlude._agent._codec import _encode_response

    return _encode_response(response)


@activity.defn(name="interlude.tool")
async def tool_activity(agent_name: str, tool_use: dict, answers: dict) -> dict:
    agent = demo_app.build(agent_name)
    from interlude._messages import tool_use_from_dict
    from interlude._interrupt import Answers
    from interlude._tools._context import ToolContext

    use = tool_use_from_dict(tool_use, "tool_use")
    tool = agent._tools[use.name]
    ans = Answers()
    ans.values.update(answers)
    try:
        result = await tool.run(use, ToolContext(use, agent, ans))
    except InterruptSignal as signal:  # a tool body that asks: back to the workflow, re-raised
        return {"interrupt": signal.interrupt.to_dict()}
    return {"result": block_to_dict(result)}


# --- stand-ins used inside the workflow ---------------------------------------------------------

class ActivityModel:
    """Model protocol: one activity per model call; the reply comes back whole."""

    def __init__(self, agent_name: str) -> None:
        self.agent_name = agent_name

    async def stream(self, messages, tool_specs, system_prompt):
        try:
            data = await workflow.execute_activity(
                model_activity,
                args=[self.agent_name, [m.to_dict() for m in messages], system_prompt],
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as exc:  # after-model hooks see a ModelError, may retry
            raise ModelError(f"model activity failed: {exc.cause}") from exc
        from interlude._agent._codec import _decode_response

        response = _decode_response(data, "model")
        for block in response.message.content:  # replay the whole reply as stream events
            if isinstance(block, ToolUse):
                yield ToolUseStart(block.id, block.name, dict(block.input))
            elif hasattr(block, "text") and type(block).__name__ == "Text":
                yield TextDelta(block.text)
        yield ModelStop(response.stop_reason, response.usage)


class ActivityTool:
    """AgentTool protocol: the body is an activity; spec and name stay local."""

    def __init__(self, agent_name: str, inner: Any) -> None:
        self.agent_name, self.inner = agent_name, inner
        self.idempotent = getattr(inner, "idempotent", False)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def spec(self) -> ToolSpec:
        return self.inner.spec

    async def run(self, tool_use: ToolUse, context: Any) -> ToolResult:
        out = await workflow.execute_activity(
            tool_activity,
            args=[self.agent_name, block_to_dict(tool_use), dict(context._answers.values)],
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
        )
        if "interrupt" in out:
            raise InterruptSignal(Interrupt.from_dict(out["interrupt"]))
        return tool_result_from_dict(out["result"], "result")


def _summary(result: Any) -> dict:
    return {
        "stop_reason": result.stop_reason,
        "text": str(result),
        "interrupts": [i.to_dict() for i in result.interrupts],
    }


@workflow.defn(name="interlude.agent")
class AgentWorkflow:
    def __init__(self) -> None:
        self.agent: Agent | None = None
        self.inbox: list[tuple[dict, str | None]] = []
        self.runs = 0
        self.last: dict | None = None

    @workflow.run
    async def run(self, agent_name: str, prompt: str | None, state: dict | None) -> dict:
        agent = demo_app.build(agent_name)
        agent.clock = lambda: workflow.now().timestamp()  # deterministic time for the loop
        agent.model = ActivityModel(agent_name)
        agent._tools = {n: ActivityTool(agent_name, t) for n, t in agent._tools.items()}
        if state is not None:
            agent.import_state(state)  # continue-as-new: pause intact
        self.agent = agent
        if prompt is not None:
            result = await agent.invoke_async(prompt)
        else:
            result = None
        while True:
            if result is not None:
                self.runs += 1
                self.last = _summary(result)
            if not agent.is_paused:
                workflow.upsert_search_attributes([PENDING.value_set(False), NAMES.value_unset()])
                return self.last or {}
            workflow.upsert_search_attributes(
                [PENDING.value_set(True), NAMES.value_set(sorted({i.name for i in agent.interrupts})),
                 AGENT.value_set(agent_name)])
            deadlines = [i.expires_at for i in agent.interrupts if i.expires_at is not None]
            timeout = None
            if deadlines:
                timeout = max(0.001, min(deadlines) - workflow.now().timestamp())
            try:
                await workflow.wait_condition(lambda: bool(self.inbox), timeout=timeout)
            except asyncio.TimeoutError:
                result = await agent.resume_expired_async()  # the deadline applies its default
                continue
            answers, by = self.inbox.pop(0)
            result = await agent.resume_async(answers, by=by)

    @workflow.update(name="answer")
    async def answer(self, answers: dict, by: str | None = None) -> dict:
        seen = self.runs
        self.inbox.append((answers, by))
        await workflow.wait_condition(lambda: self.runs > seen)
        return self.last or {}

    @answer.validator
    def _check(self, answers: dict, by: str | None = None) -> None:
        agent = self.agent
        if agent is None or not agent.is_paused or self.inbox:
            raise ApplicationError("not paused (or an answer is already being applied)", type="NotPausedError")
        if not answers:
            raise ApplicationError("no answers", type="ResumeInputError")
        try:
            check_answers({i.id: i for i in agent.interrupts}, answers, workflow.now().timestamp())
        except ResumeError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from None

    @workflow.query(name="pending")
    def pending(self) -> list[dict]:
        return [] if self.agent is None else [i.to_dict() for i in self.agent.interrupts]

    @workflow.query(name="state")
    def state(self) -> dict:
        assert self.agent is not None
        return self.agent.export_state() if not self.agent._running else {"running": True}
