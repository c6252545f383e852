"""A recorded answer binds: once a question is asked and answered, a ``needs_approval`` rule
or a hook that would decide otherwise on replay cannot turn a decline into a run, and an answer
that no question took is an error, never dropped (issue 34: "a declined call runs")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import InterludeError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel


class Rule:
    """A tool whose approval is decided by a flag read at each call (a quota, a clock, a remote
    flag: anything that may say otherwise when the call is replayed on resume)."""

    def __init__(self) -> None:
        self.ask = True
        self.paid: list[tuple[str, int]] = []

        @tool(needs_approval=lambda call: self.ask)
        def pay(to: str, cents: int) -> str:
            """Pay someone.

            Args:
                to: Who.
                cents: How much.
            """
            self.paid.append((to, cents))
            return f"paid {cents} to {to}"

        self.pay = pay

    def agent(self, store: Any = None) -> Agent:
        turns: list[Any] = [[ToolUse("t1", "pay", {"to": "acme", "cents": 900})], "ok"]
        model = ScriptedModel(turns, resumable=True)  # a fresh agent goes on where it stopped
        if store is None:
            return Agent(model, tools=[self.pay], name="payer")
        return Agent(model, tools=[self.pay], name="payer", session=store, session_id="s")


def _agents(where: str, tmp_path: Path, rule: Rule) -> tuple[Agent, Any]:
    """The agent that pauses, and a function giving the agent that resumes: the same one, or
    a fresh one on the same store (as a worker builds it)."""
    if where == "same agent":
        agent = rule.agent()
        return agent, lambda: agent
    store = SQLiteStore(tmp_path / "s.db")
    return rule.agent(store), lambda: rule.agent(store)


@pytest.mark.parametrize("where", ["same agent", "fresh agent"])
@pytest.mark.parametrize("decline", [False, {"approve": False, "note": "not this month"}])
def test_a_decline_binds_when_the_rule_says_otherwise_on_resume(
    where: str, decline: Any, tmp_path: Path
) -> None:
    rule = Rule()
    asking, resuming = _agents(where, tmp_path, rule)
    [question] = asking("pay acme").interrupts
    rule.ask = False  # the rule would not ask now

    resumed = resuming()
    resumed.resume({question.id: decline}, by="ana")

    assert rule.paid == []  # declined: never run
    [entry] = resumed.audit
    assert (entry.interrupt_id, entry.by, entry.answer) == (question.id, "ana", decline)


@pytest.mark.parametrize("where", ["same agent", "fresh agent"])
def test_an_approval_binds_when_the_rule_says_otherwise_on_resume(
    where: str, tmp_path: Path
) -> None:
    rule = Rule()
    asking, resuming = _agents(where, tmp_path, rule)
    [question] = asking("pay acme").interrupts
    rule.ask = False

    resumed = resuming()
    resumed.resume({question.id: {"approve": True}}, by="ana")

    assert rule.paid == [("acme", 900)]  # once
    [entry] = resumed.audit
    assert (entry.interrupt_id, entry.by, entry.answer) == (question.id, "ana", {"approve": True})


class Hook:
    """A before-tool hook that asks while ``ask`` is set, and not once it is cleared."""

    def __init__(self) -> None:
        self.ask = True
        self.deleted: list[str] = []

        @tool
        def delete(path: str) -> str:
            """Delete a file.

            Args:
                path: The file.
            """
            self.deleted.append(path)
            return f"deleted {path}"

        self.delete = delete

    def check(self, event: BeforeToolCallEvent) -> None:
        if not self.ask:
            return
        if event.interrupt("approve", "delete it?", response_type=bool) is not True:
            event.cancel("not approved")

    def agent(self) -> Agent:
        model = ScriptedModel([[ToolUse("t1", "delete", {"path": "/srv/data"})], "ok"])
        agent = Agent(model, tools=[self.delete])
        agent.hooks.add_callback(BeforeToolCallEvent, self.check)
        return agent


@pytest.mark.parametrize("answer", [False, True])
def test_an_answer_the_replayed_hook_does_not_ask_for_is_never_dropped(answer: bool) -> None:
    hook = Hook()
    agent = hook.agent()
    [question] = agent("clean up").interrupts
    hook.ask = False  # on replay the hook does not ask again

    with pytest.raises(InterludeError) as refused:
        agent.resume({question.id: answer}, by="ana")

    assert getattr(refused.value, "code", None) == "unconsumed_answer", repr(refused.value)
    assert hook.deleted == []
