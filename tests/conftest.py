"""Shared fixture: the conversation invariant every finished, failed or cancelled run must keep."""

import json
import signal

import pytest

from interlude import Message, ToolResult, ToolUse


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C means Ctrl-C in the processes the tests start. A suite started in the background
    by a non-interactive shell (``nohup``, ``cmd &``, some CI runners) inherits SIGINT ignored,
    and so would every child: the tests that press Ctrl-C on a child would see nothing happen.
    (Each pytest-xdist worker runs this too, in its main thread.)"""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _check_conversation(messages: list[Message]) -> None:
    """Every ToolUse of an assistant message is answered by a ToolResult in the next message.

    Also: roles are valid, tool-use ids are unique, no ToolResult is orphaned, results come in
    tool-use order, and the whole conversation survives a JSON round trip unchanged.
    """
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        assert message.role in ("user", "assistant"), f"message {i}: bad role {message.role!r}"
        uses = [b for b in message.content if isinstance(b, ToolUse)]
        results = [b for b in message.content if isinstance(b, ToolResult)]
        if uses:
            assert message.role == "assistant", f"message {i}: tool use outside assistant turn"
            ids = [u.id for u in uses]
            assert not seen_ids & set(ids), f"message {i}: tool use id reused: {ids}"
            seen_ids.update(ids)
            assert i + 1 < len(messages), f"message {i}: tool uses {ids} have no result message"
            following = messages[i + 1]
            assert following.role == "user", f"message {i + 1}: results must be a user message"
            got = [b.tool_use_id for b in following.content if isinstance(b, ToolResult)]
            assert got == ids, f"message {i + 1}: results {got} do not answer tool uses {ids}"
        if results:
            assert message.role == "user", f"message {i}: tool result outside a user turn"
            assert i > 0, f"message {i}: tool result with no preceding tool use"
            previous = [b.id for b in messages[i - 1].content if isinstance(b, ToolUse)]
            for r in results:
                assert r.tool_use_id in previous, f"message {i}: orphan result {r.tool_use_id!r}"
                assert r.status in ("success", "error")
    encoded = json.dumps([m.to_dict() for m in messages])
    assert [Message.from_dict(d) for d in json.loads(encoded)] == list(messages)


@pytest.fixture
def assert_valid():
    """``assert_valid(agent_or_messages)`` checks the conversation invariant."""

    def check(target) -> None:
        messages = target if isinstance(target, list) else target.messages
        _check_conversation(messages)

    return check
