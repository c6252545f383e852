"""Messages and content blocks: JSON round trips without loss, and malformed data is named."""

import json

import pytest

from interlude import (
    Agent,
    Image,
    Json,
    Message,
    Reasoning,
    Text,
    ToolResult,
    ToolUse,
    Usage,
    tool,
)
from interlude.errors import InterludeError, StateError, StateFormatError
from interlude.testing import ScriptedModel

PNG = bytes(range(256)) + b"\x89PNG\r\n\x1a\n\x00\xff"


def roundtrip(message: Message) -> Message:
    return Message.from_dict(json.loads(json.dumps(message.to_dict())))


BLOCKS = {
    "text": Text("hello, ünïcødé ✓"),
    "empty-text": Text(""),
    "image": Image("image/png", PNG),
    "reasoning-signed": Reasoning("let me think", "sig-abc=="),
    "reasoning-unsigned": Reasoning("thinking without signature"),
    "tool-use": ToolUse("tu_1", "search", {"q": "x", "n": 3, "deep": {"a": [1, None, True]}}),
    "tool-use-empty-input": ToolUse("tu_2", "ping"),
}


@pytest.mark.parametrize("block", list(BLOCKS.values()), ids=list(BLOCKS))
def test_each_message_block_kind_round_trips(block):
    role = "user" if isinstance(block, Image) else "assistant"
    message = Message(role, [block])
    back = roundtrip(message)
    assert back == message
    assert type(back.content[0]) is type(block)


JSON_VALUES = [
    {"a": 1, "b": [1, 2.5, "x"], "c": {"d": None, "e": False}},
    [1, "two", {"three": 3}],
    42,
    -3.25,
    True,
    None,
    "plain string",
    [],
    {},
]


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
def test_tool_result_with_json_round_trips(value):
    message = Message("user", [ToolResult("tu_1", "success", [Json(value)])])
    back = roundtrip(message)
    assert back == message
    assert isinstance(back.content[0].content[0], Json)
    assert back.content[0].content[0].value == value


@pytest.mark.parametrize("status", ["success", "error"])
def test_tool_result_with_every_allowed_block_round_trips(status):
    result = ToolResult(
        "tu_9",
        status,
        [Text("part one"), Json({"k": [1, 2]}), Image("image/jpeg", b"\xff\xd8\xff")],
    )
    message = Message("user", [result, ToolResult("tu_10")])
    back = roundtrip(message)
    assert back == message
    assert back.content[0].status == status
    assert [type(b) for b in back.content[0].content] == [Text, Json, Image]
    assert back.content[1] == ToolResult("tu_10", "success", [])


def test_mixed_message_round_trips_and_keeps_block_order():
    message = Message(
        "assistant",
        [
            Reasoning("plan", "sig"),
            Text("I'll look it up. "),
            ToolUse("a", "lookup", {"id": 1}),
            Text("and also "),
            ToolUse("b", "lookup", {"id": 2}),
        ],
    )
    back = roundtrip(message)
    assert back == message
    assert back.text == "I'll look it up. and also "
    assert [u.id for u in back.tool_uses] == ["a", "b"]


def test_to_dict_is_plain_json_data():
    message = Message("user", [Text("hi"), Image("image/gif", b"GIF89a")])
    data = message.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["role"] == "user"
    assert data["content"][0] == {"type": "text", "text": "hi"}
    assert isinstance(data["content"][1]["data"], str)  # bytes are encoded as text


def test_usage_round_trips_and_sums():
    u = Usage(12, 7) + Usage(3, 1)
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (15, 8, 23)
    assert Usage.from_dict(json.loads(json.dumps(u.to_dict()))) == u


MALFORMED = [
    ("not a dict", "message"),
    ({"content": []}, "message.role"),
    ({"role": "system", "content": []}, "message.role"),
    ({"role": "user"}, "message.content"),
    ({"role": "user", "content": "hi"}, "message.content"),
    ({"role": "user", "content": ["hi"]}, "message.content[0]"),
    ({"role": "user", "content": [{"text": "no type"}]}, "message.content[0]"),
    ({"role": "user", "content": [{"type": "video"}]}, "message.content[0]"),
    ({"role": "user", "content": [{"type": "text", "text": 5}]}, "message.content[0].text"),
    (
        {"role": "user", "content": [{"type": "text", "text": "ok"}, {"type": "text"}]},
        "message.content[1].text",
    ),
    (
        {"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": "@@"}]},
        "message.content[0].data",
    ),
    (
        {"role": "user", "content": [{"type": "image", "data": "AAAA"}]},
        "message.content[0].media_type",
    ),
    (
        {"role": "assistant", "content": [{"type": "reasoning", "text": "t", "signature": 3}]},
        "message.content[0].signature",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "n"}]},
        "message.content[0].input",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "name": "n", "input": {}}]},
        "message.content[0].id",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "input": []}]},
        "message.content[0].input",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "status": "ok", "content": []}],
        },
        "message.content[0].status",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "status": "error"}],
        },
        "message.content[0].content",
    ),
    (
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "status": "success",
                    "content": [{"type": "text", "text": "fine"}, {"type": "text", "text": None}],
                }
            ],
        },
        "message.content[0].content[1].text",
    ),
    (
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "status": "success",
                    "content": [{"type": "tool_use", "id": "x", "name": "y", "input": {}}],
                }
            ],
        },
        "message.content[0].content[0]",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "status": "success", "content": []}]},
        "message.content[0].tool_use_id",
    ),
]


@pytest.mark.parametrize(("data", "path"), MALFORMED, ids=[p for _, p in MALFORMED])
def test_malformed_message_raises_state_format_error_naming_the_path(data, path):
    with pytest.raises(StateFormatError) as info:
        Message.from_dict(data)
    text = str(info.value)
    assert text.startswith(path), f"{text!r} does not name {path!r}"
    assert isinstance(info.value, StateError)
    assert isinstance(info.value, InterludeError)


def test_json_block_without_value_is_malformed():
    """A json block missing its "value" is as malformed as a text block missing its "text".

    Reading it as Json(None) would silently invent data.
    """
    data = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "a",
                "status": "success",
                "content": [{"type": "json"}],
            }
        ],
    }
    with pytest.raises(StateFormatError, match=r"message\.content\[0\]\.content\[0\]"):
        Message.from_dict(data)


def test_whole_agent_conversation_round_trips_and_can_seed_a_new_agent(assert_valid):
    @tool
    def picture() -> Image:
        """Return a picture."""
        return Image("image/png", PNG)

    @tool
    def facts(topic: str) -> dict:
        """Facts about a topic."""
        return {"topic": topic, "count": 2, "items": [1.5, None]}

    model = ScriptedModel(
        [
            Message(
                "assistant",
                [
                    Reasoning("I need tools", "sig-1"),
                    Text("Checking."),
                    ToolUse("p1", "picture", {}),
                    ToolUse("f1", "facts", {"topic": "owls"}),
                ],
            ),
            "Owls, with a picture.",
        ]
    )
    agent = Agent(model, tools=[picture, facts])
    result = agent([Text("tell me about "), Text("owls"), Image("image/jpeg", b"\xff\xd8")])
    assert result.stop_reason == "end_turn"
    assert_valid(agent)

    kinds = {type(b) for m in agent.messages for b in m.content}
    assert kinds == {Text, Image, Reasoning, ToolUse, ToolResult}
    results = agent.messages[2].content
    assert results[0].content == [Image("image/png", PNG)]
    assert results[1].content == [Json({"topic": "owls", "count": 2, "items": [1.5, None]})]

    saved = json.dumps([m.to_dict() for m in agent.messages])
    restored = [Message.from_dict(d) for d in json.loads(saved)]
    assert restored == agent.messages

    follow_up = ScriptedModel(["Still owls."])
    agent2 = Agent(follow_up, tools=[picture, facts], messages=restored)
    agent2("more?")
    assert list(follow_up.requests[0].messages[:-1]) == agent.messages
    assert follow_up.requests[0].messages[-1] == Message("user", [Text("more?")])
