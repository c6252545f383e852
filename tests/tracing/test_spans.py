"""Spans of traced runs: names, nesting and attributes by the OpenTelemetry GenAI semantic
conventions, error spans, tool bodies that ask a question, and how tracing is switched on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

import interlude.otel
from interlude import Agent, ToolContext, ToolResult, ToolUse, Usage, tool
from interlude.errors import ModelProviderError
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel

from .conftest import Traces


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def explode(why: str) -> str:
    """Fail.

    Args:
        why: The message.
    """
    raise ValueError(why)


@tool
def ask(context: ToolContext) -> str:
    """Ask a person from inside the tool."""
    return f"told {context.interrupt('which_env')}"


def test_a_run_is_an_invoke_agent_span_over_chat_and_execute_tool_spans(traces: Traces) -> None:
    model = ScriptedModel(
        [[ToolUse("t1", "add", {"a": 2, "b": 3}), ToolUse("t2", "add", {"a": 1, "b": 1})], "5, 2"],
        usage=Usage(12, 7),
    )
    agent = Agent(model, tools=[add], name="calc")
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    assert str(agent("sums")) == "5, 2"

    run = traces.one("invoke_agent calc")
    chats = traces.named("chat")  # ScriptedModel names no model
    tools = traces.named("execute_tool add")
    assert len(traces.spans()) == 5 and len(chats) == 2 and len(tools) == 2
    assert run.parent is None
    assert run.context is not None
    for child in [*chats, *tools]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context is not None and child.context.trace_id == run.context.trace_id

    attrs = dict(run.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "calc"
    assert attrs["interlude.run.kind"] == "prompt"
    assert attrs["interlude.stop_reason"] == "end_turn"
    # the run's usage: both model calls
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (24, 14)
    assert "gen_ai.conversation.id" not in attrs  # no session
    assert run.status.status_code is StatusCode.UNSET and not run.links

    for chat, finish in zip(chats, ["tool_use", "end_turn"], strict=True):
        c = dict(chat.attributes or {})
        assert c["gen_ai.operation.name"] == "chat"
        assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (12, 7)
        assert c["gen_ai.response.finish_reasons"] == (finish,)
        assert "gen_ai.request.model" not in c and "gen_ai.provider.name" not in c

    assert sorted(dict(t.attributes or {})["gen_ai.tool.call.id"] for t in tools) == ["t1", "t2"]
    for t in tools:
        a = dict(t.attributes or {})
        assert a["gen_ai.operation.name"] == "execute_tool"
        assert a["gen_ai.tool.name"] == "add" and a["gen_ai.tool.type"] == "function"
        assert t.status.status_code is StatusCode.UNSET
    # the tool spans lie inside the run's span, each after the first chat
    assert run.start_time is not None and run.end_time is not None
    for t in tools:
        assert t.start_time is not None and chats[0].end_time is not None
        assert chats[0].end_time <= t.start_time and t.end_time is not None
        assert t.end_time <= run.end_time


async def test_a_streamed_run_is_traced_the_same(traces: Traces) -> None:
    from interlude import RunFinished

    model = ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 2})], "3"])
    agent = Agent(model, tools=[add], name="calc")
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    events = [e async for e in agent.stream_async("sum")]
    assert isinstance(events[-1], RunFinished)
    run = traces.one("invoke_agent calc")
    assert run.context is not None
    children = [s for s in traces.spans() if s is not run]
    assert sorted(s.name for s in children) == ["chat", "chat", "execute_tool add"]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in children)


def test_a_session_is_the_conversation_id(traces: Traces) -> None:
    agent = Agent(ScriptedModel(["hi"]), session=MemoryStore(), session_id="chat-9")
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    agent("hello")
    run = traces.one("invoke_agent")  # an unnamed agent
    assert dict(run.attributes or {})["gen_ai.conversation.id"] == "chat-9"


def test_a_failing_tool_is_an_error_span_and_the_run_goes_on(traces: Traces) -> None:
    model = ScriptedModel([[ToolUse("t1", "explode", {"why": "disk full"})], "It failed."])
    agent = Agent(model, tools=[explode])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    assert str(agent("go")) == "It failed."

    span = traces.one("execute_tool explode")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ValueError: disk full"
    assert dict(span.attributes or {})["error.type"] == "ValueError"
    [event] = span.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.message"] == "disk full"
    run = traces.one("invoke_agent")
    assert run.status.status_code is StatusCode.UNSET  # the model was told; the run went on
    assert dict(run.attributes or {})["interlude.stop_reason"] == "end_turn"


def test_a_tool_returning_an_error_result_is_an_error_span(traces: Traces) -> None:
    from interlude import Text, ToolResult

    @tool
    def refuse() -> ToolResult:
        """Refuse."""
        return ToolResult("x", "error", [Text("no")])

    agent = Agent(ScriptedModel([[ToolUse("t1", "refuse", {})], "ok"]), tools=[refuse])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    agent("go")
    span = traces.one("execute_tool refuse")
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "tool_error"


def test_a_failing_model_fails_its_chat_span_and_the_run_span(traces: Traces) -> None:
    def broken(request: ModelRequest) -> Any:
        raise ModelProviderError("upstream said 500")

    agent = Agent(FunctionModel(broken), name="ops")
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    with pytest.raises(ModelProviderError):
        agent("go")

    chat, run = traces.one("chat"), traces.one("invoke_agent ops")
    assert chat.parent is not None and run.context is not None
    assert chat.parent.span_id == run.context.span_id
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        attrs = dict(span.attributes or {})
        assert attrs["error.type"] == "interlude.errors.ModelProviderError"
        assert "interlude.stop_reason" not in attrs
        assert [e.name for e in span.events] == ["exception"]


def test_a_tool_that_asks_ends_its_span_as_an_interrupt_not_an_error(traces: Traces) -> None:
    agent = Agent(ScriptedModel([[ToolUse("t1", "ask", {})], "done"]), tools=[ask])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    paused = agent("go")
    [question] = paused.interrupts

    body = traces.one("execute_tool ask")
    attrs = dict(body.attributes or {})
    assert body.status.status_code is StatusCode.UNSET
    assert attrs["interlude.stop_reason"] == "interrupt"
    assert attrs["interlude.interrupt.id"] == question.id
    run = traces.one("invoke_agent")
    [event] = run.events
    assert event.name == "interlude.interrupt.raised"
    assert dict(event.attributes or {}) == {
        "interlude.interrupt.id": question.id,
        "interlude.interrupt.name": "which_env",
        "interlude.interrupt.source": "tool_call",
        "gen_ai.tool.name": "ask",
        "gen_ai.tool.call.id": "t1",
    }

    traces.clear()
    agent.resume({question.id: "staging"})
    again = traces.one("execute_tool ask")  # the body runs again from the top, and finishes
    assert "interlude.stop_reason" not in dict(again.attributes or {})


def test_a_cancelled_run_is_marked_cancelled_not_failed(traces: Traces) -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take long."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent(ScriptedModel([[ToolUse("t1", "slow", {})]]), tools=[slow])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)

    async def main() -> str:
        task = asyncio.ensure_future(agent.invoke_async("go"))
        await started.wait()
        agent.cancel()
        return (await task).stop_reason

    assert asyncio.run(main()) == "cancelled"
    for name in ("invoke_agent", "execute_tool slow"):
        span = traces.one(name)
        assert span.status.status_code is StatusCode.UNSET
        assert dict(span.attributes or {})["interlude.stop_reason"] == "cancelled"


def test_instrument_without_an_agent_traces_every_agent_until_uninstrument(
    traces: Traces,
) -> None:
    before = Agent(ScriptedModel(["one", "three"]))
    interlude.otel.instrument(tracer_provider=traces.provider)
    after = Agent(ScriptedModel(["two"]))
    before("a")
    after("b")
    assert len(traces.named("invoke_agent")) == 2  # made before or after: both traced

    interlude.otel.uninstrument()
    traces.clear()
    before("c")
    assert traces.spans() == []


def test_an_agent_of_its_own_wins_over_the_process_wide_setting(traces: Traces) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    own = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(own))
    interlude.otel.instrument(tracer_provider=traces.provider)
    agent = Agent(ScriptedModel(["hi", "again"]))
    interlude.otel.instrument(agent, tracer_provider=provider)
    agent("hello")
    assert traces.spans() == [] and [s.name for s in own.get_finished_spans()] == [
        "chat",
        "invoke_agent",
    ]
    interlude.otel.uninstrument(agent)  # back to the process-wide setting
    agent("hello again")
    assert len(traces.named("invoke_agent")) == 1 and len(own.get_finished_spans()) == 2


def test_a_direct_tool_call_is_an_execute_tool_span(traces: Traces) -> None:
    agent = Agent(ScriptedModel([]), tools=[add])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    assert agent.tool.add(a=2, b=2).content[0].value == 4  # type: ignore[union-attr]
    span = traces.one("execute_tool add")
    assert span.parent is None
    assert str(dict(span.attributes or {})["gen_ai.tool.call.id"]).startswith("direct_")


def test_repeated_tool_use_ids_keep_the_models_id(traces: Traces) -> None:
    model = ScriptedModel(
        [
            [ToolUse("call_0", "add", {"a": 1, "b": 1})],
            [ToolUse("call_0", "add", {"a": 2, "b": 2})],
            "4",
        ]
    )
    agent = Agent(model, tools=[add])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    agent("go")
    first, second = (dict(s.attributes or {}) for s in traces.named("execute_tool add"))
    assert first["gen_ai.tool.call.id"] == second["gen_ai.tool.call.id"] == "call_0"
    assert "interlude.tool_use.id" not in first and second["interlude.tool_use.id"] == "call_0#2"


# --- a real adapter: the model's name, its provider and the usage on the wire -------------------


class _ToLoopback(httpx.AsyncBaseTransport):
    """Sends requests meant for api.openai.com to the loopback server instead."""

    def __init__(self, base_url: str) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.target = httpx.URL(base_url)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/v1")
        request.url = self.target.copy_with(path=self.target.path + path)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def openai_server() -> Iterator[Any]:
    from tests.models.openai_server import OpenAIServer

    server = OpenAIServer().start()
    yield server
    server.stop()


async def test_an_openai_model_names_the_chat_span_and_its_provider(
    traces: Traces, openai_server: Any
) -> None:
    from openai import AsyncOpenAI

    from interlude.models.openai import OpenAIModel
    from tests.models.openai_server import text_reply

    openai_server.add(text_reply("Hi", usage=(31, 4)), text_reply("Hi", usage=(2, 1)))
    client = AsyncOpenAI(
        api_key="sk-test",
        http_client=httpx.AsyncClient(transport=_ToLoopback(openai_server.base_url)),
    )
    official = Agent(OpenAIModel("gpt-4.1-mini", client=client))
    interlude.otel.instrument(official, tracer_provider=traces.provider)
    await official.invoke_async("hello")

    chat = traces.one("chat gpt-4.1-mini")
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.request.model"] == "gpt-4.1-mini"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (31, 4)
    assert dict(traces.one("invoke_agent").attributes or {})["gen_ai.provider.name"] == "openai"

    # Someone else's OpenAI-compatible server: the OpenAI API, at that server's address.
    local = Agent(OpenAIModel("qwen2.5", api_key="x", base_url=openai_server.base_url))
    interlude.otel.instrument(local, tracer_provider=traces.provider)
    await local.invoke_async("hello")
    attrs = dict(traces.one("chat qwen2.5").attributes or {})
    host = openai_server.base_url.split("/")[2]
    assert attrs["gen_ai.provider.name"] == "openai"
    assert f"{attrs['server.address']}:{attrs['server.port']}" == host


def test_instrument_before_the_global_provider_is_set_uses_it_once_set() -> None:
    import subprocess
    import sys

    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import interlude.otel
from interlude import Agent
from interlude.testing import ScriptedModel

interlude.otel.instrument()  # before any provider exists, as at the top of an app module
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
Agent(ScriptedModel(["hi"]), name="late")("hello")
print(sorted(s.name for s in exporter.get_finished_spans()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['chat', 'invoke_agent late']"


# --- tracing that fails never fails a run -------------------------------------------------------


class _Broken(SpanProcessor):
    """A span processor that raises when spans of ``kind`` start or end."""

    def __init__(self, when: str, kind: str) -> None:
        self.when, self.kind = when, kind

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.when == "start" and span.name.startswith(self.kind):
            raise RuntimeError(f"processor broken on start of {span.name}")

    def on_end(self, span: ReadableSpan) -> None:
        if self.when == "end" and span.name.startswith(self.kind):
            raise RuntimeError(f"processor broken on end of {span.name}")


@pytest.mark.parametrize("when", ["start", "end"])
@pytest.mark.parametrize("kind", ["invoke_agent", "chat", "execute_tool"])
def test_a_span_processor_that_raises_never_fails_the_run(
    traces: Traces, when: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    traces.provider.add_span_processor(_Broken(when, kind))
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count.

        Args:
            n: A number.
        """
        ran.append(n)
        return n + 1

    model = ScriptedModel([[ToolUse("t1", "count", {"n": 1})], "done"])
    agent = Agent(model, tools=[count])
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    with caplog.at_level("DEBUG", logger="interlude.otel"):
        result = agent("count")
    assert str(result) == "done"
    assert ran == [1]  # the tool ran once and its result reached the model
    tool_result = agent.messages[2].content[0]
    assert isinstance(tool_result, ToolResult) and tool_result.status == "success"
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "tracing failed" in warnings[0].getMessage()


def test_a_tracer_provider_whose_tracer_raises_never_fails_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Tracer:
        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no spans today")

    class Provider:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
            return Tracer()

    agent = Agent(ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 2})], "3"]), tools=[add])
    interlude.otel.instrument(agent, tracer_provider=Provider())  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="interlude.otel"):
        assert str(agent("add")) == "3"
    assert len(caplog.records) == 1


def test_an_agent_instrumented_on_its_own_is_traced_when_used_as_a_tool(traces: Traces) -> None:
    sub = Agent(ScriptedModel(["found"]), name="finder")
    interlude.otel.instrument(sub, tracer_provider=traces.provider)
    parent = Agent(
        ScriptedModel([[ToolUse("p1", "finder", {"prompt": "find"})], "done"]),
        tools=[sub.as_tool()],
    )
    assert str(parent("go")) == "done"
    span = traces.one("invoke_agent finder")  # the copy that ran is traced, the parent is not
    assert span.attributes is not None and span.attributes["gen_ai.agent.name"] == "finder"
    assert [s.name for s in traces.spans()] == ["chat", "invoke_agent finder"]
