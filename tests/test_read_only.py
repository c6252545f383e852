"""Values Interlude hands out are read-only: nothing a hook, a tool or a caller holds can change
what runs or what is stored.

The first three tests are the approval bypasses found on main 2852626: one ``dict`` was shared
by the conversation, the pause, every question and every hook event, so editing it in place
changed the call after a person had approved it.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import ReadOnlyError
from interlude.hooks import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    BeforeToolsEvent,
    MessageAddedEvent,
)
from interlude.sessions import MemoryStore
from interlude.testing import ScriptedModel


def payment_agent(paid: list[int], **kw: Any) -> Agent:
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    model = ScriptedModel([[ToolUse("t1", "pay", {"amount": 10})], "done"])
    return Agent(model, tools=[pay], **kw)


def test_an_in_place_edit_after_a_batch_approval_cannot_run():
    """Bypass 1: a before-tool hook bumping the input after the batch was approved for 10."""
    paid: list[int] = []
    agent = payment_agent(paid)
    errors: list[BaseException] = []

    def approve_batch(event: BeforeToolsEvent) -> None:
        event.interrupt("approve", reason=[u.input["amount"] for u in event.tool_uses])

    def bump(event: BeforeToolCallEvent) -> None:
        try:
            event.tool_use.input["amount"] += 1
        except ReadOnlyError as exc:
            errors.append(exc)

    agent.hooks.add_callback(BeforeToolsEvent, approve_batch)
    agent.hooks.add_callback(BeforeToolCallEvent, bump)
    [question] = agent("pay").interrupts
    assert question.reason == [10]
    result = agent.resume({question.id: True})
    assert result.stop_reason == "end_turn"
    assert paid == [10]  # what was approved, and only that
    assert len(errors) == 1 and "event.tool_use = ToolUse(" in str(errors[0])
    assert agent.messages[1].tool_uses[0].input == {"amount": 10}


def test_an_in_place_edit_after_a_per_call_approval_cannot_run():
    """Bypass 2: the approval is asked, then a later callback of the same event edits the input
    on the replay; before, the answer still matched because the shown input was the same dict."""
    paid: list[int] = []
    agent = payment_agent(paid)

    def approve(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve")

    def bump(event: BeforeToolCallEvent) -> None:
        if event.is_replay:
            event.tool_use.input["amount"] = 11

    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    agent.hooks.add_callback(BeforeToolCallEvent, bump)
    [question] = agent("pay").interrupts
    with pytest.raises(ReadOnlyError, match="read-only"):
        agent.resume({question.id: True})
    assert paid == []
    assert json.loads(json.dumps(agent.export_state()))["messages"][1]["content"][0]["input"] == {
        "amount": 10
    }


def test_a_caller_editing_the_question_it_was_handed_changes_nothing():
    """Bypass 3: the caller edits ``q.tool_use.input`` and then approves."""
    paid: list[int] = []
    store = MemoryStore()
    agent = payment_agent(paid, session=store, session_id="s")
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
    [question] = agent("pay").interrupts
    assert question.tool_use is not None
    with pytest.raises(ReadOnlyError):
        question.tool_use.input["amount"] = 999
    with pytest.raises(ReadOnlyError):
        question.tool_use.input.update(amount=999)
    assert agent.resume({question.id: True}).stop_reason == "end_turn"
    assert paid == [10]
    again = Agent(ScriptedModel([]), session=store, session_id="s")
    assert again.messages[1].tool_uses[0].input == {"amount": 10}


def test_the_right_way_to_change_a_call_still_works():
    """Replacing ``event.tool_use`` is how a hook changes a call; a copy of the input is plain."""
    paid: list[int] = []
    agent = payment_agent(paid)

    def double(event: BeforeToolCallEvent) -> None:
        changed = copy.deepcopy(event.tool_use.input)
        changed["amount"] *= 2
        event.tool_use = ToolUse(event.tool_use.id, event.tool_use.name, changed)

    agent.hooks.add_callback(BeforeToolCallEvent, double)
    assert agent("pay").stop_reason == "end_turn"
    assert paid == [20]


def test_a_tool_gets_its_own_copy_of_its_arguments():
    seen: list[Any] = []

    @tool
    def collect(items: list[Any], options: dict[str, Any]) -> str:
        """Collect things."""
        items.append("mine")  # a tool may change its own arguments
        options["touched"] = True
        seen.append((items, options))
        return "ok"

    call = ToolUse("t1", "collect", {"items": [1], "options": {"a": 1}})
    agent = Agent(ScriptedModel([[call], "done"]), tools=[collect])
    agent("go")
    assert seen == [([1, "mine"], {"a": 1, "touched": True})]
    assert agent.messages[1].tool_uses[0].input == {"items": [1], "options": {"a": 1}}


def test_the_conversation_handed_out_is_read_only_and_can_be_replaced():
    agent = Agent(ScriptedModel(["hi", "again"]))
    agent("hello")
    with pytest.raises(ReadOnlyError):
        agent.messages.append(agent.messages[0])
    with pytest.raises(ReadOnlyError):
        agent.messages[1].content.clear()
    agent.messages = []
    assert agent("fresh").stop_reason == "end_turn"
    assert [m.text for m in agent.messages] == ["fresh", "again"]


# --- a property: no value handed out can change what runs or what is stored ----------------------


def _mutations(value: Any, rng: random.Random) -> list[Any]:
    """Every container inside ``value`` (a handed-out JSON-like value)."""
    found: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            found.append(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            found.append(v)
            stack.extend(v)
    rng.shuffle(found)
    return found


def _try_to_edit(container: Any, rng: random.Random) -> bool:
    """Try one random in-place edit; True if it took effect (it must never)."""
    before = copy.deepcopy(container)
    edits: list[Any]
    if isinstance(container, dict):
        edits = [
            lambda c: c.__setitem__("amount", 999),
            lambda c: c.update(amount=999),
            lambda c: c.pop(next(iter(c)), None) if c else c.__setitem__("x", 1),
            lambda c: c.setdefault("injected", 1),
            lambda c: c.clear(),
            lambda c: c.__ior__({"amount": 999}),
        ]
    else:
        edits = [
            lambda c: c.append(999),
            lambda c: c.extend([999]),
            lambda c: c.insert(0, 999),
            lambda c: c.__setitem__(0, 999) if c else c.append(1),
            lambda c: c.clear(),
            lambda c: c.__iadd__([999]),
            lambda c: c.reverse(),
        ]
    try:
        rng.choice(edits)(container)
    except ReadOnlyError:
        return False
    return container != before


@pytest.mark.parametrize("seed", range(20))
def test_no_value_handed_out_can_change_what_runs_or_what_is_stored(seed: int):
    rng = random.Random(seed)
    paid: list[Any] = []

    @tool
    def pay(amount: int, memo: dict[str, Any]) -> dict[str, Any]:
        """Pay an amount."""
        paid.append((amount, memo))
        return {"paid": amount, "memo": memo}

    call = ToolUse("t1", "pay", {"amount": 10, "memo": {"to": ["ana"], "tags": []}})
    model = ScriptedModel([[call], "done"])
    agent = Agent(model, tools=[pay])
    handed: list[Any] = []  # every value user code is given, in the order given

    def grab(*values: Any) -> None:
        handed.extend(values)
        for v in values:
            for container in _mutations(v, rng):
                assert not _try_to_edit(container, rng), f"edited in place: {container!r}"

    def ask(event: BeforeToolCallEvent) -> None:
        grab(event.tool_use.input, *[m.content for m in event.agent.messages])
        event.interrupt("approve", reason={"shown": [event.tool_use.input]})

    def after_tool(event: AfterToolCallEvent) -> None:
        grab(event.tool_use.input, event.result.content)

    def after_model(event: AfterModelCallEvent) -> None:
        if event.response is not None:
            grab(event.response.message.content)
            for use in event.response.message.tool_uses:
                grab(use.input)

    agent.hooks.add_callback(BeforeToolCallEvent, ask)
    agent.hooks.add_callback(AfterToolCallEvent, after_tool)
    agent.hooks.add_callback(AfterModelCallEvent, after_model)
    agent.hooks.add_callback(BeforeModelCallEvent, lambda e: grab(e.agent.messages))
    agent.hooks.add_callback(MessageAddedEvent, lambda e: grab(e.message.content))
    paused = agent("pay")
    [question] = paused.interrupts
    grab(question.reason, question.tool_use.input if question.tool_use else None)
    grab(agent.messages, *[m.content for m in agent.messages])
    answer = {"ok": True, "notes": ["fine"]}
    result = agent.resume({question.id: answer})
    answer["ok"] = False  # the caller's own dict: the recorded answer is a copy
    grab(result.message.content if result.message else None, agent.audit[0].answer)
    grab(agent.messages, *[m.content for m in agent.messages])
    assert agent.audit[0].answer == {"ok": True, "notes": ["fine"]}
    assert paid == [(10, {"to": ["ana"], "tags": []})]
    stored = json.loads(json.dumps(agent.export_state()))
    assert stored["messages"][1]["content"][0]["input"] == call.input
    assert stored["messages"][2]["content"][0]["content"][0]["value"] == {
        "paid": 10,
        "memo": {"to": ["ana"], "tags": []},
    }


# --- the constructor does no I/O; the session loads at first use ----------------------------------


class CountingStore(MemoryStore):
    """A memory store that counts its loads (a stand-in for a store across a network)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, session_id: str):  # type: ignore[no-untyped-def]
        self.loads += 1
        return await super().load(session_id)


def test_building_an_agent_does_no_io(tmp_path: Any) -> None:
    store = CountingStore()
    url = f"sqlite:///{tmp_path}/nested/never.db"
    Agent(ScriptedModel(["hi"]), session=store, session_id="s")
    agent = Agent(ScriptedModel(["hi"]), session=url, session_id="s")
    assert store.loads == 0
    assert not (tmp_path / "nested").exists()  # the URL's store is not even opened
    assert agent.session_id == "s"
    assert str(agent("hello")) == "hi"  # the first run opens the store and loads the session
    assert (tmp_path / "nested" / "never.db").exists()


async def test_agent_open_loads_the_session_before_it_returns() -> None:
    store = CountingStore()
    first = Agent(ScriptedModel(["hi"]), session=store, session_id="s")
    await first.invoke_async("hello")
    loads = store.loads
    again = await Agent.open(ScriptedModel([]), session=store, session_id="s")
    assert store.loads == loads + 1
    assert [m.text for m in again.messages] == ["hello", "hi"]
    assert store.loads == loads + 1  # read once


def test_exported_state_is_plain_json_to_change() -> None:
    agent = Agent(ScriptedModel([[ToolUse("t1", "pay", {"amount": 10})], "done"]))
    agent("pay")
    data = agent.export_state()
    data["messages"][1]["content"][0]["input"]["amount"] = 0  # redacting an archived copy
    assert agent.messages[1].tool_uses[0].input == {"amount": 10}
