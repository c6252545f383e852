"""Conversation managers through the public API: what the model is sent, overflow recovery,
summaries that are paid for once across pauses, exports and crashes, and each provider's real
context-overflow error (its loopback server and real client library) driving a reduction."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, Message, Text, ToolResult, ToolUse, tool
from interlude.conversation import (
    ConversationManager,
    ConversationState,
    Reduction,
    SlidingWindow,
    Summarizing,
)
from interlude.errors import ConfigurationError, ContextWindowOverflowError, StateFormatError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel

SUMMARY_MARK = "You summarize"


def turns(n: int) -> list[Message]:
    """``n`` finished question/answer turns (2n messages)."""
    out: list[Message] = []
    for i in range(n):
        out.append(Message("user", [Text(f"question {i}")]))
        out.append(Message("assistant", [Text(f"answer {i}")]))
    return out


def assert_valid_request(messages: Sequence[Message]) -> None:
    """What every provider accepts: a user message first that is not tool results, and every
    tool result right after the assistant message with its tool use."""
    assert messages, "an empty request"
    first = messages[0]
    assert first.role == "user"
    assert not any(isinstance(b, ToolResult) for b in first.content)
    for i, m in enumerate(messages):
        for block in m.content:
            if isinstance(block, ToolResult):
                previous = messages[i - 1]
                assert previous.role == "assistant"
                assert block.tool_use_id in [t.id for t in previous.tool_uses]


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


# --- the sliding window -------------------------------------------------------------------------


def test_window_sends_the_latest_messages_and_keeps_the_conversation_whole():
    model = ScriptedModel(["a0", "a1", "a2", "a3"])
    agent = Agent(model, conversation=SlidingWindow(max_messages=3))
    for i in range(4):
        agent(f"q{i}")
    assert [texts(r.messages) for r in model.requests] == [
        ["q0"],
        ["q0", "a0", "q1"],
        ["q1", "a1", "q2"],
        ["q2", "a2", "q3"],
    ]
    assert len(agent.messages) == 8  # nothing was removed from the conversation itself


def test_window_never_separates_a_tool_use_from_its_result():
    calls = iter(range(100))

    def reply(request: ModelRequest) -> Any:
        n = next(calls)
        if n < 6:
            return [ToolUse(f"t{n}", "lookup", {"key": f"k{n}"})]
        return "done"

    model = FunctionModel(reply)
    agent = Agent(model, tools=[lookup], conversation=SlidingWindow(max_messages=4))
    assert str(agent("look up six keys")) == "done"
    assert len(model.requests) == 7
    for request in model.requests:
        assert_valid_request(request.messages)
        assert len(request.messages) <= 4
    # A window inside the tool loop keeps the prompt the loop works on in front.
    last = model.requests[-1].messages
    assert last[0].text == "look up six keys"
    assert last[-1].content[0] == ToolResult("t5", "success", [Text("value of k5")])
    assert len(agent.messages) == 14


def test_a_window_smaller_than_a_tool_round_sends_the_smallest_valid_part():
    model = ScriptedModel([[ToolUse("t1", "lookup", {"key": "x"})], "ok"])
    agent = Agent(model, tools=[lookup], messages=turns(3), conversation=SlidingWindow(1))
    assert str(agent("go")) == "ok"
    first, second = (r.messages for r in model.requests)
    assert texts(first) == ["go"]
    assert_valid_request(second)
    assert [m.role for m in second] == ["user", "assistant", "user"]  # prompt, use, result


def test_a_pause_under_a_small_window_resumes_in_a_fresh_agent():
    ran: list[str] = []

    @tool
    def deploy(service: str) -> str:
        """Deploy.

        Args:
            service: The service.
        """
        ran.append(service)
        return f"{service} deployed"

    def make(model: ScriptedModel) -> Agent:
        agent = Agent(model, tools=[deploy], conversation=SlidingWindow(max_messages=2))
        agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    first = make(ScriptedModel(["a0", "a1", [ToolUse("d1", "deploy", {"service": "api"})]]))
    first("q0")
    first("q1")
    paused = first("deploy the api")
    assert paused.stop_reason == "interrupt" and ran == []
    saved = json.loads(json.dumps(first.export_state()))

    model = ScriptedModel(["deployed."])
    second = make(model)
    second.import_state(saved)
    final = second.resume({paused.interrupts[0].id: True})
    assert str(final) == "deployed." and ran == ["api"]
    (request,) = model.requests
    assert_valid_request(request.messages)
    assert texts(request.messages)[0] == "deploy the api"
    assert request.messages[1].tool_uses[0].id == "d1"
    assert len(second.messages) == 8


def random_conversation(rng: random.Random) -> list[Message]:
    """Prompts, tool rounds (one or two tool uses and their results) and replies, ending where
    the model is called next: on a prompt or on tool results."""
    out: list[Message] = []
    n = 0
    for _ in range(rng.randint(1, 6)):
        out.append(Message("user", [Text(f"prompt {len(out)}")]))
        for _ in range(rng.randint(0, 5)):
            uses = [ToolUse(f"t{n + i}", "lookup", {}) for i in range(rng.randint(1, 2))]
            n += len(uses)
            out.append(Message("assistant", list(uses)))
            out.append(Message("user", [ToolResult(u.id, "success", [Text("r")]) for u in uses]))
        out.append(Message("assistant", [Text(f"reply {len(out)}")]))
    if rng.random() < 0.5:
        out.append(Message("user", [Text("last prompt")]))
    else:
        out.pop()  # end on tool results, or on the prompt when there was no tool round
    return out


async def test_window_invariants_over_many_conversations():
    """Every view is a valid request ending with the latest message, within the window unless
    only a smaller valid part does not exist, the same when applied again (a durable engine's
    activity applies it to what it is sent), and every overflow reduction sends less."""

    class Overflow:
        overflow = True

        async def ask(self, text: str, *, system: str | None = None, model: Any = None) -> str:
            raise AssertionError("a window makes no model call")

    rng = random.Random(15)
    for _ in range(300):
        messages = random_conversation(rng)
        window = SlidingWindow(rng.randint(1, 12))
        state = ConversationState()
        sent = window.view(messages, state)
        while True:
            assert_valid_request(sent)
            assert sent[-1] is messages[-1]
            if len(sent) > window.max_messages:
                assert len(sent) == 3 and sent[1].role == "assistant"  # the smallest valid part
            assert window.view(sent, ConversationState()) == sent
            new = await window.reduce(messages, state, Overflow())
            if new is None:
                break
            smaller = window.view(messages, new)
            assert len(smaller) < len(sent)
            state, sent = new, smaller


# --- context overflow ---------------------------------------------------------------------------


def overflowing_above(limit: int, reply: str = "fits now") -> FunctionModel:
    """A model that refuses a request of more than ``limit`` messages as a provider would."""

    def fn(request: ModelRequest) -> Any:
        if len(request.messages) > limit:
            raise ContextWindowOverflowError(
                f"prompt is too long: {len(request.messages)} messages", status=400
            )
        return reply

    return FunctionModel(fn)


def test_overflow_reduces_and_the_call_is_made_again():
    model = overflowing_above(5)
    agent = Agent(model, messages=turns(10), conversation=SlidingWindow(max_messages=40))
    result = agent("and now?")
    assert str(result) == "fits now"
    sizes = [len(r.messages) for r in model.requests]
    assert sizes[0] == 21 and sizes[-1] <= 5
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    for request in model.requests:
        assert_valid_request(request.messages)
    assert model.requests[-1].messages[-1].text == "and now?"
    assert len(agent.messages) == 22
    # What was dropped stays dropped: the next call does not overflow first.
    agent("again")
    assert len(model.requests[-1].messages) <= 5 and len(model.requests) == len(sizes) + 1


def test_overflow_with_nothing_left_to_drop_is_a_clear_error():
    model = overflowing_above(0)
    agent = Agent(model, conversation=SlidingWindow(max_messages=40))
    with pytest.raises(ContextWindowOverflowError) as info:
        agent("a single, enormous prompt")
    assert "has nothing more to leave out" in str(info.value)
    assert "SlidingWindow(max_messages=40)" in str(info.value)
    assert isinstance(info.value.__cause__, ContextWindowOverflowError)
    assert info.value.status == 400 and len(model.requests) == 1
    assert not agent.is_paused  # the invocation ended; the agent takes new prompts


def test_without_a_manager_the_overflow_error_goes_through_after_one_call():
    model = overflowing_above(2)
    agent = Agent(model, messages=turns(2))
    with pytest.raises(ContextWindowOverflowError, match="prompt is too long"):
        agent("hi")
    assert len(model.requests) == 1


class AlwaysReduces:
    """A custom manager whose every reduction is a new state (that sends nothing less)."""

    def __init__(self) -> None:
        self.reductions = 0

    def view(self, messages: Sequence[Message], state: ConversationState) -> list[Message]:
        return list(messages)

    async def reduce(
        self, messages: Sequence[Message], state: ConversationState, reduction: Reduction
    ) -> ConversationState | None:
        if not reduction.overflow:
            return None
        self.reductions += 1
        return ConversationState(0, f"attempt {self.reductions}")


def test_retries_after_overflow_are_bounded_even_for_a_manager_that_always_reduces():
    manager = AlwaysReduces()
    assert isinstance(manager, ConversationManager)
    model = overflowing_above(0)
    agent = Agent(model, conversation=manager)
    with pytest.raises(ContextWindowOverflowError, match="8 reductions were not enough"):
        agent("hi")
    assert manager.reductions == 8 and len(model.requests) == 9


def test_a_conversation_manager_must_have_view_and_reduce():
    with pytest.raises(ConfigurationError, match="conversation manager"):
        Agent(ScriptedModel([]), conversation=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SlidingWindow(0)
    with pytest.raises(ConfigurationError):
        Summarizing(keep_last=4, max_messages=4)


# --- summaries ----------------------------------------------------------------------------------


class Counting:
    """A model that writes summaries (counted) and otherwise plays ``replies``."""

    def __init__(self, replies: list[Any]) -> None:
        self.summaries: list[ModelRequest] = []
        self.replies = replies
        self.model = FunctionModel(self.reply)

    def reply(self, request: ModelRequest) -> Any:
        if request.system_prompt and request.system_prompt.startswith(SUMMARY_MARK):
            self.summaries.append(request)
            return f"SUMMARY {len(self.summaries)}"
        return self.replies.pop(0)


def test_summarizing_replaces_older_turns_and_is_paid_for_once_across_a_pause():
    ran: list[str] = []

    @tool
    def deploy(service: str) -> str:
        """Deploy.

        Args:
            service: The service.
        """
        ran.append(service)
        return f"{service} deployed"

    def make(model: FunctionModel) -> Agent:
        manager = Summarizing(keep_last=1, max_messages=4)
        agent = Agent(model, tools=[deploy], conversation=manager)
        agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    one = Counting(["a0", "a1", [ToolUse("d1", "deploy", {"service": "api"})]])
    first = make(one.model)
    first("q0")
    first("q1")
    paused = first("deploy the api")  # 5 messages would be sent: the first three summarized
    assert paused.stop_reason == "interrupt"
    (summary_call,) = one.summaries
    assert summary_call.tool_specs == ()
    asked = summary_call.messages[0].text
    assert "q0" in asked and "a1" in asked and "deploy the api" not in asked
    sent = one.model.requests[-1].messages
    assert texts(sent) == [
        "Summary of the earlier part of this conversation:\nSUMMARY 1deploy the api"
    ]
    exported = json.loads(json.dumps(first.export_state()))
    assert "interlude.conversation" not in first.state  # not mixed into the user's state

    two = Counting(["deployed."])
    second = make(two.model)
    second.import_state(exported)
    assert str(second.resume({paused.interrupts[0].id: True})) == "deployed."
    assert ran == ["api"] and two.summaries == []  # the summary was not asked for again
    (request,) = two.model.requests
    assert_valid_request(request.messages)
    assert "SUMMARY 1" in request.messages[0].text and len(request.messages) == 3
    assert len(second.messages) == 8  # the whole conversation is still there


def test_summarizing_on_overflow_folds_the_earlier_summary_in():
    writer = Counting([])

    def reply(request: ModelRequest) -> Any:
        if request.system_prompt and request.system_prompt.startswith(SUMMARY_MARK):
            return writer.reply(request)
        if len(request.messages) > 4:
            raise ContextWindowOverflowError("input is too long", status=400)
        return "ok"

    model = FunctionModel(reply)
    agent = Agent(model, messages=turns(6), conversation=Summarizing(keep_last=2))
    first = agent("first")
    assert str(first) == "ok" and len(writer.summaries) == 1
    assert first.usage.input_tokens == 20  # the summary call's usage counts (10 + 10)
    assert str(agent("second")) == "ok"  # 1 + 2 + 2 messages: over again
    assert len(writer.summaries) == 2
    assert "SUMMARY 1" in writer.summaries[1].messages[0].text  # folded into the new one
    assert "SUMMARY 2" in model.requests[-1].messages[0].text
    assert len(agent.messages) == 16  # the conversation itself is whole


def test_a_summary_request_too_long_itself_summarizes_the_older_half_first():
    written: list[int] = []

    def reply(request: ModelRequest) -> Any:
        if request.system_prompt and request.system_prompt.startswith(SUMMARY_MARK):
            lines = [x for x in request.messages[0].text.splitlines() if x.startswith("[")]
            if len(lines) > 4:
                raise ContextWindowOverflowError("prompt is too long", status=400)
            written.append(len(lines))
            return f"summary of {len(lines)} more"
        if len(request.messages) > 3:
            raise ContextWindowOverflowError("prompt is too long", status=400)
        return "ok"

    model = FunctionModel(reply)
    agent = Agent(model, messages=turns(6), conversation=Summarizing(keep_last=1))
    assert str(agent("now")) == "ok"
    assert written and all(n <= 4 for n in written) and sum(written) == 12
    (last,) = [r for r in model.requests if r.system_prompt is None][-1:]
    assert len(last.messages) <= 3 and last.messages[-1].text.endswith("now")


def test_a_summary_request_that_cannot_be_made_small_enough_is_a_clear_error():
    def reply(request: ModelRequest) -> Any:
        raise ContextWindowOverflowError("prompt is too long", status=400)

    agent = Agent(FunctionModel(reply), messages=turns(2), conversation=Summarizing(keep_last=1))
    with pytest.raises(ContextWindowOverflowError, match="the summary call does not fit"):
        agent("now")


def test_a_summary_survives_a_crash_right_after_it_was_written(tmp_path: Path):
    """The summary is saved before the model call that uses it: a process killed during that
    call leaves it in the session, and recovery does not pay for it again."""
    db = str(tmp_path / "s.db")
    marks = tmp_path / "summaries"
    script = textwrap.dedent(f"""
        import os, signal
        from interlude import Agent
        from interlude.conversation import Summarizing
        from interlude.sessions import SQLiteStore
        from interlude.testing import FunctionModel

        def reply(request):
            if request.system_prompt and request.system_prompt.startswith({SUMMARY_MARK!r}):
                with open({str(marks)!r}, "a") as f:
                    f.write("x")
                return "SUMMARY"
            if len(request.messages) == 1 and request.messages[0].text == "q0":
                return "a0"
            os.kill(os.getpid(), signal.SIGKILL)

        agent = Agent(
            FunctionModel(reply),
            session=SQLiteStore({db!r}),
            session_id="s1",
            conversation=Summarizing(keep_last=1, max_messages=2),
        )
        agent("q0")
        agent("q1")
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == -9
    assert marks.read_text() == "x"

    model = Counting(["recovered"])
    agent = Agent(
        model.model,
        session=SQLiteStore(db),
        session_id="s1",
        conversation=Summarizing(keep_last=1, max_messages=2),
    )
    assert agent.needs_recovery
    assert str(agent.recover()) == "recovered"
    assert model.summaries == [] and marks.read_text() == "x"
    (request,) = model.model.requests
    assert texts(request.messages) == [
        "Summary of the earlier part of this conversation:\nSUMMARYq1"
    ]


def test_a_malformed_saved_conversation_state_is_refused():
    agent = Agent(ScriptedModel([]), conversation=SlidingWindow())
    data = agent.export_state()
    data["state"] = {"interlude.conversation": {"start": -1}}
    with pytest.raises(StateFormatError, match="start"):
        agent.import_state(data)


def test_a_shorter_conversation_given_later_resets_the_reduction():
    model = overflowing_above(3)
    agent = Agent(model, messages=turns(4), conversation=SlidingWindow(max_messages=40))
    agent("x")
    agent.messages = []  # a new conversation, between runs
    agent("fresh start")
    assert texts(model.requests[-1].messages) == ["fresh start"]


# --- each provider's real overflow error, through its client library ----------------------------


def long_history() -> list[Message]:
    return turns(5)


async def run_through(model: Any) -> str:
    """A run whose first call overflows: the reply text (the conversation stays whole)."""
    agent = Agent(model, messages=long_history(), conversation=SlidingWindow(max_messages=40))
    result = await agent.invoke_async("latest question")
    assert len(agent.messages) == 12
    return str(result)


async def test_openai_overflow_error_is_reduced_and_retried():
    from interlude.models.openai import OpenAIModel
    from tests.models.openai_server import OpenAIServer, context_overflow_reply, text_reply

    server = OpenAIServer().start()
    try:
        server.add(context_overflow_reply(), text_reply("short enough"))
        model = OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=server.base_url)
        text = await run_through(model)
    finally:
        server.stop()
    assert text == "short enough"
    first, second = (r["messages"] for r in server.requests)
    assert len(first) == 11 and 0 < len(second) < len(first)
    assert second[0]["role"] == "user" and second[-1]["content"] == "latest question"


async def test_anthropic_overflow_error_is_reduced_and_retried():
    from interlude.models.anthropic import AnthropicModel
    from tests.models.anthropic_server import AnthropicServer, context_overflow, text_turn

    with AnthropicServer() as server:
        server.queue(context_overflow(), text_turn("short enough"))
        model = AnthropicModel(
            "claude-test", client_args={"api_key": "sk-ant-test", "base_url": server.url}
        )
        text = await run_through(model)
    assert text == "short enough"
    first, second = (b["messages"] for b in server.bodies)
    assert len(first) == 11 and 0 < len(second) < len(first)
    assert second[0]["role"] == "user"


async def test_bedrock_overflow_error_is_reduced_and_retried(monkeypatch: pytest.MonkeyPatch):
    from interlude.models.bedrock import BedrockModel
    from tests.models.bedrock_server import BedrockServer, context_overflow, text_reply

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with BedrockServer() as server:
        server.add(context_overflow(), text_reply("short enough"))
        model = BedrockModel(
            "anthropic.claude-test", region_name="us-east-1", endpoint_url=server.url
        )
        text = await run_through(model)
    assert text == "short enough"
    first, second = (r.body["messages"] for r in server.requests)
    assert len(first) == 11 and 0 < len(second) < len(first)
    assert second[0]["role"] == "user"


async def test_ollama_overflow_error_is_reduced_and_retried():
    from interlude.models.ollama import OllamaModel
    from tests.models.ollama_server import OllamaServer, context_overflow, text_reply

    with OllamaServer() as server:
        server.add(context_overflow(), text_reply("short enough"))
        text = await run_through(OllamaModel("llama3.2", host=server.url))
    assert text == "short enough"
    first, second = (b["messages"] for b in server.bodies)
    assert len(first) == 11 and 0 < len(second) < len(first)
    assert second[0]["role"] == "user"


def test_a_malformed_conversation_state_in_a_session_is_a_corrupt_session(tmp_path: Path):
    import sqlite3

    from interlude.errors import SessionCorruptError

    store = SQLiteStore(str(tmp_path / "s.db"))
    agent = Agent(ScriptedModel(["a"]), session=store, session_id="s", state={})
    agent("q")
    # A stored state altered behind the agent's back (the agent refuses the reserved key).
    with sqlite3.connect(tmp_path / "s.db") as db:
        bad = json.dumps({"interlude.conversation": {"start": "zero"}})
        db.execute("UPDATE sessions SET state = ? WHERE id = 's'", (bad,))
    with pytest.raises(SessionCorruptError, match="start"):  # loading it: at first use
        Agent(ScriptedModel([]), session=store, session_id="s").messages  # noqa: B018


# --- agents as tools ----------------------------------------------------------------------------


def test_an_agent_used_as_a_tool_keeps_its_own_window():
    sent: list[list[Message]] = []

    def sub_model(request: ModelRequest) -> Any:
        sent.append(list(request.messages))
        if len(sent) < 5:
            return [ToolUse(f"s{len(sent)}", "lookup", {"key": str(len(sent))})]
        return "found it"

    sub = Agent(
        FunctionModel(sub_model), tools=[lookup], name="finder", conversation=SlidingWindow(3)
    )
    parent = Agent(
        ScriptedModel([[ToolUse("p1", "finder", {"prompt": "find"})], "done"]),
        tools=[sub.as_tool()],
    )
    assert str(parent("go")) == "done"
    assert len(sent) == 5
    for request in sent:
        assert len(request) <= 3
        assert_valid_request(request)
    assert texts(sent[-1])[0] == "find"  # the prompt its tool loop works on stays in front


# --- the reserved key ---------------------------------------------------------------------------


def test_the_reserved_state_key_is_refused_and_never_saved(tmp_path: Path):
    key = "interlude.conversation"
    with pytest.raises(ConfigurationError, match="reserved"):
        Agent(ScriptedModel([]), state={key: {"start": 0, "summary": "mine"}})

    agent = Agent(ScriptedModel(["a"]))
    agent("q")
    agent.state[key] = "mine"
    with pytest.raises(StateFormatError, match="reserved"):
        agent.export_state()

    store = SQLiteStore(str(tmp_path / "s.db"))
    first = Agent(ScriptedModel(["a0", "a1"]), session=store, session_id="s")
    first("q0")
    first.state[key] = {"start": 0, "summary": "injected by the user"}
    with pytest.raises(StateFormatError, match="reserved"):
        first("q1")
    # The session is as the first run left it: it loads, and nothing was taken for the
    # manager's state.
    model = ScriptedModel(["a2"])
    again = Agent(model, session=store, session_id="s", conversation=Summarizing(keep_last=1))
    assert again.state == {} and texts(again.messages)[:2] == ["q0", "a0"]
    again("q2")
    assert all("injected" not in m.text for r in model.requests for m in r.messages)


@pytest.mark.parametrize("manager", [SlidingWindow(10), Summarizing(keep_last=2)])
def test_a_saved_start_with_only_tool_results_after_it_is_not_applied(
    manager: ConversationManager,
):
    def approve(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve")

    paused = Agent(ScriptedModel([[ToolUse("t1", "lookup", {"key": "k"})]]), tools=[lookup])
    paused.hooks.add_callback(BeforeToolCallEvent, approve)
    paused("look k up")
    state = paused.export_state()
    # A stored state edited by someone else: the sent part would start on the tool results
    # the resume is about to add (message 2), which no provider accepts first.
    state["state"] = {"interlude.conversation": {"start": 2, "summary": None}}
    model = ScriptedModel(["found"])
    agent = Agent(model, tools=[lookup], conversation=manager)
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    agent.import_state(state)
    assert str(agent.resume({agent.interrupts[0].id: True})) == "found"
    [request] = model.requests
    assert_valid_request(request.messages)
    assert texts(request.messages)[0] == "look k up"


def test_a_failing_summary_call_says_it_was_the_summary_and_changes_nothing():
    from interlude.errors import ModelProviderError

    def down(request: ModelRequest) -> Any:
        raise ModelProviderError("503 service unavailable", provider="fake", status=503)

    model = ScriptedModel(["never"])
    agent = Agent(
        model, messages=turns(3), conversation=Summarizing(FunctionModel(down), 2, max_messages=4)
    )
    with pytest.raises(ModelProviderError, match="503") as failed:
        agent("q")
    assert any("summary call of Summarizing" in note for note in failed.value.__notes__)
    assert model.requests == []  # the conversation's own call was not made
    assert agent.export_state()["state"] == {}  # no summary was saved


class _Returns:
    """A manager of one's own whose reduce() returns ``new`` (a bug in it)."""

    def __init__(self, new: object) -> None:
        self.new = new

    def view(self, messages: Sequence[Message], state: ConversationState) -> list[Message]:
        return list(messages[state.start :])

    async def reduce(
        self, messages: Sequence[Message], state: ConversationState, reduction: Reduction
    ) -> Any:
        return self.new


@pytest.mark.parametrize(
    "new",
    [ConversationState(-1), ConversationState(0, 5), {"start": 1}],  # type: ignore[arg-type]
)
def test_a_manager_returning_a_state_that_cannot_be_saved_fails_the_call_not_the_session(
    tmp_path: Path, new: object
):
    store = SQLiteStore(str(tmp_path / "s.db"))
    agent = Agent(ScriptedModel(["a"]), session=store, session_id="s", conversation=_Returns(new))
    with pytest.raises(ConfigurationError, match=r"reduce\(\) returned"):
        agent("q")
    # The session still loads and runs (it was not given the state, nor left claimed).
    again = Agent(ScriptedModel(["b"]), session=store, session_id="s", conversation=SlidingWindow())
    assert str(again("q2")) == "b"


def test_a_crash_during_the_summary_call_asks_for_it_once_more_on_recovery(tmp_path: Path):
    """Killed after the summary was paid for but before it was saved: the session is as it was
    before the model call, recovery asks for the summary once more and carries on."""
    db = str(tmp_path / "s.db")
    script = textwrap.dedent(f"""
        import os, signal
        from interlude import Agent
        from interlude.conversation import Summarizing
        from interlude.sessions import SQLiteStore
        from interlude.testing import FunctionModel

        def reply(request):
            if request.system_prompt and request.system_prompt.startswith({SUMMARY_MARK!r}):
                os.kill(os.getpid(), signal.SIGKILL)  # the reply is on its way: never saved
            return "a0"

        agent = Agent(
            FunctionModel(reply),
            session=SQLiteStore({db!r}),
            session_id="s1",
            conversation=Summarizing(keep_last=1, max_messages=2),
        )
        agent("q0")
        agent("q1")
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == -9

    model = Counting(["recovered"])
    agent = Agent(
        model.model,
        session=SQLiteStore(db),
        session_id="s1",
        conversation=Summarizing(keep_last=1, max_messages=2),
    )
    assert agent.needs_recovery and texts(agent.messages) == ["q0", "a0", "q1"]
    assert "interlude.conversation" not in agent.export_state()["state"]  # type: ignore[operator]
    assert str(agent.recover()) == "recovered"
    assert len(model.summaries) == 1
    (request,) = model.model.requests[1:]
    assert texts(request.messages) == [
        "Summary of the earlier part of this conversation:\nSUMMARY 1q1"
    ]
