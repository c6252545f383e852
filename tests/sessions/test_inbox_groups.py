"""Inbox.record with groups and votes: a question a person's groups may not answer is refused,
escalation widens who may, a vote short of its quorum is not "answered first", the same person
twice is refused naming the votes, and a vote queued for a worker makes the next one wait."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from interlude import Agent, App, Inbox, ToolUse, Worker, tool
from interlude.errors import (
    AlreadyAnsweredError,
    NotAllowedToAnswerError,
    ResumeError,
    SessionConflictError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SessionStore
from interlude.testing import ScriptedModel

ran: list[str] = []


@tool
def deploy(env: str) -> str:
    """Deploy."""
    ran.append(env)
    return "deployed"


def _ask(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy", {"env": "prod"}, approvers=["ops"], quorum=2,
        escalate_after=3600, escalate_to=["leads"],
    )  # fmt: skip
    if answer is not True:
        event.cancel("no")


def _agent(store: str | SessionStore, late: float = 0.0) -> Agent:
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "deploy", {"env": "prod"})], "Deployed."], resumable=True),
        tools=[deploy],
        session=store,
        session_id="s1",
        name="deployer",
        clock=lambda: time.time() - late,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _ask)
    return agent


@pytest.fixture
def store(tmp_path: Path) -> str:
    ran.clear()
    return f"sqlite:///{tmp_path / 'inbox.db'}"


def test_groups_are_checked_when_given(store: str) -> None:
    [question] = _agent(store)("ship").interrupts
    with Inbox(store) as inbox:
        with pytest.raises(NotAllowedToAnswerError, match="only members of ops") as info:
            inbox.record("s1", {question.id: True}, by="cy", groups=["sales"])
        assert info.value.interrupt_id == question.id
        assert isinstance(info.value, ResumeError)
        with pytest.raises(NotAllowedToAnswerError):
            inbox.record("s1", {question.id: True}, by="dee", groups=["leads"])  # not yet
        assert inbox.session("s1").recorded == []
        (recorded,) = inbox.record("s1", {question.id: True}, by="ana", groups=["ops"])
        assert recorded.by == "ana"


def test_escalation_widens_who_may_answer(store: str) -> None:
    [question] = _agent(store, late=7200)("ship").interrupts  # raised two hours ago
    with Inbox(store) as inbox:
        (recorded,) = inbox.record("s1", {question.id: True}, by="dee", groups=["leads"])
        assert recorded.by == "dee"


def test_votes_toward_a_quorum(store: str) -> None:
    agent = _agent(store)
    [question] = agent("ship").interrupts
    agent.resume({question.id: True}, by="ana")  # a vote applied: 1 of 2
    with Inbox(store) as inbox:
        view = inbox.session("s1")
        assert view.votes == {question.id: (True, ("ana",))}
        with pytest.raises(SessionConflictError, match=r"ana already approved .*1 so far: ana"):
            inbox.record("s1", {question.id: True}, by="ana", groups=["ops"])
        # ana's vote is in the audit trail, but it did not settle the question: bo may vote
        inbox.record("s1", {question.id: True}, by="bo", groups=["ops"])
        with pytest.raises(SessionConflictError, match="already answered"):
            inbox.record("s1", {question.id: True}, by="cy", groups=["ops"])  # bo's settles it
    done = _agent(store)
    with pytest.raises(AlreadyAnsweredError) as info:  # bo's vote waits in the inbox's queue
        done.resume({question.id: True}, by="bo")
    assert (info.value.interrupt_id, info.value.by, ran) == (question.id, "bo", [])
    app = App()
    app.agent("deployer")(lambda session: _agent(session.store))
    assert asyncio.run(Worker(app, store).run_once()) == 1  # the recorded vote is applied
    assert ran == ["prod"]


def test_a_queued_vote_makes_the_next_one_wait(store: str) -> None:
    [question] = _agent(store)("ship").interrupts
    with Inbox(store) as inbox:
        inbox.record("s1", {question.id: True}, by="ana", groups=["ops"])
        with pytest.raises(SessionConflictError, match=r"ana's vote .* being applied .*try again"):
            inbox.record("s1", {question.id: True}, by="bo", groups=["ops"])
