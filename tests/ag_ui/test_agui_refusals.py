"""Resumes an AG-UI client sends that Interlude refuses: each ends the run with RUN_ERROR (a
code naming the kind), runs nothing, and leaves the stored session exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interlude import Inbox

from .harness import Client, Served, past, stored

Entry = dict[str, Any]


def _entry(question: dict[str, Any], payload: Any = True, **extra: Any) -> Entry:
    return {"interruptId": question["id"], "status": "resolved", "payload": payload, **extra}


def _unknown(q: list[dict[str, Any]], served: Served, thread: str) -> list[Entry]:
    return [_entry({"id": "v1:before_tool_call:t9:not-asked"})]


def _duplicate(q: list[dict[str, Any]], served: Served, thread: str) -> list[Entry]:
    return [_entry(q[0]), _entry(q[0])]


def _mistyped(q: list[dict[str, Any]], served: Served, thread: str) -> list[Entry]:
    return [_entry(q[0], {"approve": "yes please"})]


def _stale(q: list[dict[str, Any]], served: Served, thread: str) -> list[Entry]:
    digest = "sha256:" + "0" * 64  # what a client was shown is not what is pending
    return [_entry(q[0], metadata={"interlude": {"digest": digest}})]


def _recorded_in_the_inbox(q: list[dict[str, Any]], served: Served, thread: str) -> list[Entry]:
    inbox = Inbox(f"sqlite:///{served.db}")
    inbox.record(thread, {q[0]["id"]: True}, by="bo")  # a worker applies it
    return [_entry(q[0])]


REFUSALS: dict[str, tuple[str, Callable[[list[dict[str, Any]], Served, str], list[Entry]]]] = {
    "unknown": ("unknown_interrupt", _unknown),
    "duplicate": ("duplicate", _duplicate),
    "mistyped": ("invalid_answer", _mistyped),
    "stale": ("stale", _stale),
    "already answered in the inbox": ("already_answered", _recorded_in_the_inbox),
}


@pytest.mark.parametrize("kind", list(REFUSALS))
def test_a_refused_resume_is_a_run_error_and_changes_nothing(
    kind: str, served: Served, client: Client, thread: str
) -> None:
    code, entries = REFUSALS[kind]
    [asked] = client.drive(served.url, thread, [{"prompt": "pay ana and bob"}])
    resume = entries(asked["interrupts"], served, thread)
    before = stored(served.db)
    [refused] = client.drive(served.url, thread, [{"resume": resume}])
    assert refused["error"]["code"] == code, refused
    assert refused["types"][-1] == "RUN_ERROR" and refused["outcome"] is None
    assert stored(served.db) == before  # byte for byte
    assert not served.paid.exists()


def test_an_answer_already_applied_is_refused(served: Served, client: Client, thread: str) -> None:
    asked, _ = client.drive(
        served.url,
        thread,
        [{"prompt": "pay ana and bob"}, {"resumeLast": {"1": {"approve": True}}}],
    )
    before = stored(served.db)
    again = [_entry(asked["interrupts"][1]), _entry(asked["interrupts"][0])]
    [refused] = client.drive(served.url, thread, [{"resume": again}])
    assert refused["error"]["code"] == "already_answered"
    assert "by ana" in refused["error"]["message"]
    assert stored(served.db) == before
    assert served.paid.read_text() == "bob 250\n"  # once


@pytest.mark.parametrize("payload", ["high", "medium"])
def test_a_late_or_mistyped_answer_to_a_typed_question_is_refused(
    payload: str, served: Served, client: Client, thread: str
) -> None:
    """ "restart now" asks with a deadline a moment away, answered once it has passed (late);
    "restart later" with a deadline an hour away, answered with a value not on its list."""
    prompt = "restart now" if payload == "high" else "restart later"
    [asked] = client.drive(served.url, thread, [{"prompt": prompt}], agent="asker")
    [question] = asked["interrupts"]
    if payload == "high":
        past(question["expiresAt"])
    before = stored(served.db)
    resume = [_entry(question, payload)]
    [refused] = client.drive(served.url, thread, [{"resume": resume}], agent="asker")
    assert refused["error"]["code"] == ("expired" if payload == "high" else "invalid_answer")
    assert stored(served.db) == before


def test_an_unsigned_pause_is_refused_when_the_agents_sign(serve: Any, client: Client) -> None:
    unsigned = serve()  # agents without a key pause unsigned
    [asked] = client.drive(unsigned.url, "th", [{"prompt": "pay ana"}])
    unsigned.kill()
    signing = serve(AGUI_KEY="k" * 32)
    before = stored(signing.db)
    resume = [_entry(asked["interrupts"][0], metadata=asked["interrupts"][0]["metadata"])]
    [refused] = client.drive(signing.url, "th", [{"resume": resume}])
    assert refused["error"]["code"] == "integrity", refused
    assert stored(signing.db) == before
    assert not signing.paid.exists()
