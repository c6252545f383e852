"""Agents as tools: a sub-agent's questions pause its parent, and the answers go back down.

Everything goes through the public API: ``Agent.as_tool``, ``resume``, ``export_state`` /
``import_state``, a SQLite session and a fresh Python process. Counters (model requests, tool
runs) show that nothing a sub-agent finished before its pause runs again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from interlude import Agent, ToolContext, ToolResult, ToolSpec, ToolUse, tool
from interlude.errors import (
    AnswerValidationError,
    ConfigurationError,
    CycleLimitError,
    ResumeInputError,
    StateIntegrityError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel
from tests.support.processes import ROOT

KEY = b"a signing key of at least 16 bytes"


def iid(source: str, scope: str, name: str) -> str:
    return f"v1:{source}:{scope}:{uuid.uuid5(uuid.NAMESPACE_OID, name)}"


def approve_id(tool_use_id: str) -> str:
    """The id a sub-agent gives its before-tool question "approve" about ``tool_use_id``."""
    return iid("before_tool_call", tool_use_id, "approve")


def up(tool_use_id: str, sub_id: str) -> str:
    """The id a sub-agent's question ``sub_id`` has once relayed by call ``tool_use_id``."""
    return iid("tool_call", tool_use_id, sub_id)


@pytest.fixture(params=["concurrent", "sequential"])
def executor(request: pytest.FixtureRequest) -> str:
    return request.param


# --- the agents (also built by the fresh process, from this module) ---------------------------


@dataclass
class Ops:
    """A sub-agent that deletes files after a person approves, and what it did."""

    agent: Agent
    model: ScriptedModel
    deleted: list[str] = field(default_factory=list)
    asked: list[bool] = field(default_factory=list)  # is_replay of each approval callback


def make_ops(turns: list, executor: str = "concurrent", name: str = "ops", **agent_kw: Any) -> Ops:
    deleted: list[str] = []
    asked: list[bool] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    def approve(event: BeforeToolCallEvent) -> None:
        asked.append(event.is_replay)
        if event.interrupt("approve", reason=f"delete {event.tool_use.input['path']}?") is not True:
            event.cancel("not approved")

    model = ScriptedModel(turns)
    agent = Agent(model, tools=[delete], tool_executor=executor, name=name, **agent_kw)
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return Ops(agent, model, deleted, asked)


def ops_turns(*paths: str, reply: str = "Cleaned up.") -> list:
    calls = [ToolUse(f"s{i + 1}", "delete", {"path": p}) for i, p in enumerate(paths)]
    return [calls, reply]


def make_parent(turns: list, tools: list, executor: str = "concurrent", **kw: Any) -> Agent:
    return Agent(ScriptedModel(turns), tools=tools, tool_executor=executor, **kw)


def ask(tool_use_id: str, name: str, prompt: str) -> ToolUse:
    return ToolUse(tool_use_id, name, {"prompt": prompt})


def result_texts(agent: Agent) -> list[tuple[str, str, str]]:
    return [
        (b.tool_use_id, b.status, b.text)
        for m in agent.messages
        for b in m.content
        if isinstance(b, ToolResult)
    ]


# --- one sub-agent, one approval --------------------------------------------------------------


def test_a_sub_agents_question_pauses_the_parent_and_the_answer_resumes_it(executor, assert_valid):
    ops = make_ops(ops_turns("/var/log/a.log", reply="Deleted a.log."), executor)
    parent = make_parent(
        [[ask("t1", "ops", "Clean the logs")], "Ops deleted a.log."],
        [ops.agent.as_tool(description="Runs ops tasks.")],
        executor,
    )
    spec = parent.tools["ops"].spec
    assert spec.description == "Runs ops tasks." and spec.input_schema["required"] == ["prompt"]

    paused = parent("Free some space")
    assert paused.stop_reason == "interrupt" and parent.is_paused
    [question] = paused.interrupts
    assert question.id == up("t1", approve_id("s1"))  # deterministic: scope + the sub's id
    assert question.name == "approve" and question.source == "before_tool_call"
    assert question.reason == "delete /var/log/a.log?"
    assert question.tool_use == ToolUse("s1", "delete", {"path": "/var/log/a.log"})
    assert question.via == (ask("t1", "ops", "Clean the logs"),)
    assert ops.deleted == [] and len(ops.model.requests) == 1
    assert ops.agent.messages == [] and not ops.agent.is_paused  # the template is never run

    done = parent.resume({question.id: True}, by="ana")
    assert str(done) == "Ops deleted a.log."
    assert ops.deleted == ["/var/log/a.log"]  # ran once
    assert len(ops.model.requests) == 2  # the sub-agent's first reply was not asked for again
    assert ops.asked == [False, True]  # only the question's callback ran again
    assert result_texts(parent) == [("t1", "success", "Deleted a.log.")]
    # The sub-agent's own conversation went on from where it stopped.
    last = ops.model.requests[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "user"]
    assert last[2].content[0].text == "deleted /var/log/a.log"
    assert_valid(parent)
    [entry] = parent.audit
    assert (entry.interrupt_id, entry.by, entry.answer) == (question.id, "ana", True)
    assert entry.shown == question.digest


def test_a_decline_at_the_top_cancels_the_inner_tool(executor):
    ops = make_ops(ops_turns("/etc/passwd", reply="I left it alone."), executor)
    parent = make_parent(
        [[ask("t1", "ops", "Delete /etc/passwd")], "Ops refused."],
        [ops.agent.as_tool()],
        executor,
    )
    [question] = parent("Go").interrupts
    assert str(parent.resume({question.id: False})) == "Ops refused."
    assert ops.deleted == []
    inner = ops.model.requests[-1].messages[2].content[0]
    assert (inner.status, inner.text) == ("error", "not approved")  # what the sub-model saw
    assert result_texts(parent) == [("t1", "success", "I left it alone.")]


def test_several_questions_of_one_sub_agent_go_up_at_once(executor):
    ops = make_ops(ops_turns("a", "b", reply="Deleted a and b."), executor)
    parent = make_parent([[ask("t1", "ops", "Delete a and b")], "Done."], [ops.agent.as_tool()])
    first = parent("Go").interrupts
    if executor == "concurrent":  # the sub-agent's batch asks both questions in one round
        assert [q.id for q in first] == [up("t1", approve_id("s1")), up("t1", approve_id("s2"))]
        qa, qb = first
        again = parent.resume({qb.id: True})  # answer one: the other stays pending
        assert [q.id for q in again.interrupts] == [qa.id]
        assert ops.deleted == ["b"]
        assert parent.resume({qa.id: True}).stop_reason == "end_turn"
    else:  # sequential: the second call starts once the first is answered
        assert [q.id for q in first] == [up("t1", approve_id("s1"))]
        [qb] = parent.resume({first[0].id: True}).interrupts
        assert qb.id == up("t1", approve_id("s2")) and ops.deleted == ["a"]
        assert parent.resume({qb.id: True}).stop_reason == "end_turn"
    assert sorted(ops.deleted) == ["a", "b"]
    assert len(ops.model.requests) == 2  # one reply asked for the batch, one after it


def test_two_sub_agents_paused_in_one_batch(executor):
    ops = make_ops(ops_turns("x", reply="x gone."), executor, name="ops")
    janitor = make_ops(ops_turns("y", reply="y gone."), executor, name="janitor")
    parent = make_parent(
        [[ask("t1", "ops", "delete x"), ask("t2", "janitor", "delete y")], "Both done."],
        [ops.agent.as_tool(), janitor.agent.as_tool()],
        executor,
    )
    first = parent("Clean up").interrupts
    qx, qy = up("t1", approve_id("s1")), up("t2", approve_id("s1"))  # same sub ids, kept apart
    if executor == "concurrent":
        assert [q.id for q in first] == [qx, qy]  # both sub-agents asked: one pause
        again = parent.resume({qy: True})  # only the janitor's answer
        assert [q.id for q in again.interrupts] == [qx]  # ops still waits
        assert (ops.deleted, janitor.deleted) == ([], ["y"])
        assert len(ops.model.requests) == 1  # ops was not run again meanwhile
        done = parent.resume({qx: True})
    else:  # sequential: the janitor starts only once ops is done
        assert [q.id for q in first] == [qx] and len(janitor.model.requests) == 0
        [second] = parent.resume({qx: True}).interrupts
        assert second.id == qy and ops.deleted == ["x"]
        done = parent.resume({qy: True})
    assert str(done) == "Both done."
    assert (ops.deleted, janitor.deleted) == (["x"], ["y"])
    assert (len(ops.model.requests), len(janitor.model.requests)) == (2, 2)
    assert result_texts(parent) == [("t1", "success", "x gone."), ("t2", "success", "y gone.")]
    assert not parent.is_paused


def test_a_question_asked_again_waits_for_a_new_answer():
    """A sub-agent that asks the same question again (a retry) is not answered by the old
    answer when the parent resumes for another question meanwhile."""
    from interlude.hooks import AfterToolCallEvent

    attempts: list[int] = []

    @tool
    def fetch() -> str:
        """Fetch something (always fails)."""
        attempts.append(1)
        raise TimeoutError("timed out")

    def retry(event: AfterToolCallEvent) -> None:
        if event.result.status == "error" and event.interrupt("retry") is True:
            event.retry = True

    fetcher = Agent(ScriptedModel([[ToolUse("s1", "fetch", {})], "Gave up."]), tools=[fetch])
    fetcher.hooks.add_callback(AfterToolCallEvent, retry)
    ops = make_ops(ops_turns("x", reply="x gone."))
    parent = make_parent(
        [[ask("t1", "fetcher", "fetch"), ask("t2", "ops", "delete x")], "Done."],
        [fetcher.as_tool(name="fetcher"), ops.agent.as_tool()],
    )
    q_retry, q_ops = (q.id for q in parent("Go").interrupts)
    assert q_retry == up("t1", iid("after_tool_call", "s1", "retry"))
    again = parent.resume({q_retry: True})  # retried once, failed again: asked again
    assert [q.id for q in again.interrupts] == [q_retry, q_ops] and len(attempts) == 2
    still = parent.resume({q_ops: True})  # the other question: the old "yes" is not reused
    assert [q.id for q in still.interrupts] == [q_retry] and len(attempts) == 2
    assert ops.deleted == ["x"]
    assert str(parent.resume({q_retry: False})) == "Done." and len(attempts) == 2
    assert result_texts(parent)[0] == ("t1", "success", "Gave up.")


# --- two levels -------------------------------------------------------------------------------


def make_nested(executor: str, ops_reply: str = "Deleted z.") -> tuple[Agent, Ops, ScriptedModel]:
    ops = make_ops(ops_turns("z", reply=ops_reply), executor)
    lead_model = ScriptedModel([[ask("m1", "ops", "delete z")], "Lead: ops deleted z."])
    lead = Agent(lead_model, tools=[ops.agent.as_tool()], tool_executor=executor, name="lead")
    top = make_parent([[ask("t1", "lead", "tidy up")], "Top: tidied."], [lead.as_tool()], executor)
    return top, ops, lead_model


def test_a_sub_sub_agents_question_reaches_the_top_and_its_answer_the_bottom(executor):
    top, ops, lead_model = make_nested(executor)
    [question] = top("Tidy").interrupts
    assert question.id == up("t1", up("m1", approve_id("s1")))
    assert [u.id for u in question.via] == ["t1", "m1"]  # outermost first
    assert question.tool_use == ToolUse("s1", "delete", {"path": "z"})

    done = top.resume({question.id: True}, by="bo")
    assert str(done) == "Top: tidied." and ops.deleted == ["z"]
    assert (len(ops.model.requests), len(lead_model.requests)) == (2, 2)  # nothing asked twice
    assert result_texts(top) == [("t1", "success", "Lead: ops deleted z.")]
    assert [(e.interrupt_id, e.by) for e in top.audit] == [(question.id, "bo")]


def test_nested_decline_reaches_the_bottom(executor):
    top, ops, _ = make_nested(executor, ops_reply="Not deleted.")
    [question] = top("Tidy").interrupts
    top.resume({question.id: False})
    assert ops.deleted == []
    assert ops.model.requests[-1].messages[2].content[0].text == "not approved"


# --- state: export, signing, the sub-agent's own trail ----------------------------------------


def test_the_sub_agents_state_travels_in_the_parents_export(executor):
    ops = make_ops(ops_turns("a", "b", reply="Deleted."), executor)
    parent = make_parent([[ask("t1", "ops", "delete a, b")], "Done."], [ops.agent.as_tool()])
    first = parent("Go").interrupts
    parent.resume({first[-1].id: True}, by="ana")  # one answered, the sub-agent paused again
    state = json.loads(json.dumps(parent.export_state()))
    [call] = state["pause"]["step"]["calls"]
    assert call["phase"] == "body"
    sub = call["checkpoint"]  # the sub-agent's export_state(), inside the parent's pause
    assert sub["format"] == "interlude.agent-state" and sub["agent"] == "ops"
    answered, waiting = ("s2", "s1") if executor == "concurrent" else ("s1", "s2")
    [pending] = parent.interrupts
    assert pending.id == up("t1", approve_id(waiting))
    assert [i["id"] for i in sub["pause"]["interrupts"]] == [approve_id(waiting)]
    # The sub-agent's own trail holds the answer it got, under its own id, by the same person.
    [entry] = sub["audit"]
    assert (entry["interrupt_id"], entry["by"], entry["answer"]) == (
        approve_id(answered),
        "ana",
        True,
    )
    assert not ops.agent.is_paused and ops.agent.audit == []  # the template stays untouched

    fresh_ops = make_ops(["Deleted."], executor)  # the rest of the sub-agent's script
    fresh = make_parent(["Done."], [fresh_ops.agent.as_tool()], executor)
    fresh.import_state(state)
    assert [q.id for q in fresh.interrupts] == [pending.id]
    assert str(fresh.resume({pending.id: True})) == "Done."
    assert len(ops.deleted) + len(fresh_ops.deleted) == 2  # each file once, over both
    assert len(fresh_ops.model.requests) == 1  # only the reply after the last approval


def test_the_parents_signature_covers_the_sub_agents_state():
    ops = make_ops(ops_turns("a", reply="Deleted a."))
    parent = make_parent([[ask("t1", "ops", "delete a")]], [ops.agent.as_tool()], signing_key=KEY)
    [question] = parent("Go").interrupts
    state = parent.export_state()
    assert "signature" not in state["pause"]["step"]["calls"][0]["checkpoint"]["pause"]

    forged = json.loads(json.dumps(state))
    sub_progress = forged["pause"]["step"]["calls"][0]["checkpoint"]["pause"]["progress"]
    sub_progress["answers"] = {approve_id("s1"): True}  # slip an approval into the sub-agent
    target = make_parent(["Done."], [make_ops(["Deleted a."]).agent.as_tool()], signing_key=KEY)
    with pytest.raises(StateIntegrityError):
        target.import_state(forged)
    assert not target.is_paused

    target.import_state(json.loads(json.dumps(state)))
    assert target.interrupts == [question]


def test_as_tool_refuses_an_agent_with_a_session_or_without_a_name(tmp_path):
    from interlude.sessions import MemoryStore

    unnamed = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="name"):
        unnamed.as_tool()
    assert unnamed.as_tool(name="helper").name == "helper"
    stored = Agent(ScriptedModel([]), name="x", session=MemoryStore(), session_id="s")
    with pytest.raises(ConfigurationError, match="session"):
        stored.as_tool()


def test_bad_tool_input_is_an_error_result_and_runs_nothing():
    ops = make_ops(ops_turns("a"))
    parent = make_parent([[ToolUse("t1", "ops", {"task": "x"})], "Sorry."], [ops.agent.as_tool()])
    assert str(parent("Go")) == "Sorry."
    [(_, status, text)] = result_texts(parent)
    assert status == "error" and "expected {'prompt': <text>}" in text
    assert ops.model.requests == []


def test_discarding_the_pause_closes_the_sub_agent_call():
    ops = make_ops(ops_turns("a"))
    parent = make_parent([[ask("t1", "ops", "delete a")], "Ok."], [ops.agent.as_tool()])
    parent("Go")
    parent.discard_pause()
    [(_, status, text)] = result_texts(parent)
    assert status == "error" and "may have had effects" in text
    assert str(parent("Anything else?")) == "Ok." and ops.deleted == []


def test_a_sub_agent_call_in_doubt_after_a_crash_carries_on_from_its_checkpoint():
    """A process stopped while the sub-agent ran again: recovery asks (a sub-agent is not safe
    to repeat); "rerun" starts it from its last pause, not from the beginning."""
    ops = make_ops(ops_turns("a"))
    parent = make_parent([[ask("t1", "ops", "delete a")]], [ops.agent.as_tool()])
    [question] = parent("Go").interrupts
    state = json.loads(json.dumps(parent.export_state()))
    [call] = state["pause"]["step"]["calls"]
    call["phase"], call["started_at"] = "running", 1_700_000_000.0  # as a killed process leaves it
    state["pause"]["interrupts"] = []

    again = make_ops(["Deleted a."])
    agent = make_parent(["Done."], [again.agent.as_tool()])
    agent.import_state(state)
    [in_doubt] = agent.recover().interrupts
    assert in_doubt.source == "in_doubt" and in_doubt.tool_use.name == "ops"
    [asked] = agent.resume({in_doubt.id: "rerun"}).interrupts
    assert asked.id == question.id  # the sub-agent is back at its question: nothing redone
    assert again.model.requests == [] and again.deleted == []
    assert str(agent.resume({asked.id: True})) == "Done." and again.deleted == ["a"]


def test_a_tool_keeps_a_checkpoint_across_its_question():
    """The core seam under agents as tools: a tool body keeps JSON with its call when it stops
    with a question, and gets it back when it runs again (also after an export)."""
    work: list[str] = []

    @tool
    def migrate(context: ToolContext) -> str:
        """Migrate in two halves, asking before the second."""
        done = context.checkpoint or {"half": 0}
        if done["half"] == 0:
            work.append("first half")
            context.checkpoint = {"half": 1}
        if context.interrupt("go_on") is not True:
            return "stopped after the first half"
        work.append("second half")
        return "migrated"

    @tool
    def bad(context: ToolContext) -> str:
        """Keep something that is not JSON."""
        context.checkpoint = {"when": object()}
        return "unreachable"

    agent = Agent(ScriptedModel([[ToolUse("t1", "migrate", {})]]), tools=[migrate, bad])
    [question] = agent("Migrate").interrupts
    state = json.loads(json.dumps(agent.export_state()))
    assert state["pause"]["step"]["calls"][0]["checkpoint"] == {"half": 1}
    fresh = Agent(ScriptedModel(["Migrated."]), tools=[migrate, bad])
    fresh.import_state(state)
    assert str(fresh.resume({question.id: True})) == "Migrated."
    assert work == ["first half", "second half"]  # the first half did not run twice
    assert result_texts(fresh) == [("t1", "success", "migrated")]
    assert "checkpoint" not in json.dumps(fresh.export_state())  # dropped once the call ended

    refused = fresh.tool.bad()  # a checkpoint must be JSON: the call fails, naming it
    assert refused.status == "error" and refused.text.startswith("InterruptError: the checkpoint")


# --- typed, expiring questions ------------------------------------------------------------------


class Verdict(BaseModel):
    decision: Literal["approve", "reject"]
    note: str = ""


def make_typed(now: list[float], default: bool = True) -> tuple[Agent, Ops]:
    ops = make_ops(ops_turns("db.bak", reply="Handled."), name="ops")
    kw: dict[str, Any] = {"default": {"decision": "reject", "note": "timed out"}} if default else {}
    verdicts: list[Verdict] = []

    def typed(event: BeforeToolCallEvent) -> None:
        verdict = event.interrupt(
            "verdict", "delete the backup?", response_type=Verdict, expires_in=60, **kw
        )
        verdicts.append(verdict)
        if verdict.decision != "approve":
            event.cancel(f"rejected: {verdict.note}")

    ops.agent.hooks = type(ops.agent.hooks)()  # only the typed question
    ops.agent.hooks.add_callback(BeforeToolCallEvent, typed)
    ops.verdicts = verdicts  # type: ignore[attr-defined]
    parent = make_parent(
        [[ask("t1", "ops", "drop the backup")], "Finished."],
        [ops.agent.as_tool()],
        clock=lambda: now[0],
    )
    return parent, ops


def test_a_typed_sub_agent_question_is_checked_at_the_parents_resume():
    now = [1_800_000_000.0]
    parent, ops = make_typed(now)
    [question] = parent("Go").interrupts
    assert question.response_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert question.raised_at == now[0] and question.expires_at == now[0] + 60  # parent's clock
    before = parent.export_state()
    with pytest.raises(AnswerValidationError) as refused:
        parent.resume({question.id: {"decision": "maybe"}})
    assert refused.value.interrupt_id == question.id and refused.value.path == ("decision",)
    assert parent.export_state() == before and len(ops.model.requests) == 1
    with pytest.raises(ResumeInputError):  # what the person saw must still be pending as shown
        parent.resume({question.id: {"decision": "approve"}}, shown={question.id: "sha256:0"})

    answer = {"decision": "approve", "note": "ok"}
    done = parent.resume({question.id: answer}, by="ana", shown={question.id: question.digest})
    assert str(done) == "Finished." and ops.deleted == ["db.bak"]
    assert ops.verdicts == [Verdict(decision="approve", note="ok")]  # type: ignore[attr-defined]


def test_an_expired_sub_agent_question_takes_its_default_at_the_top():
    now = [1_800_000_000.0]
    parent, ops = make_typed(now)
    [question] = parent("Go").interrupts
    now[0] += 61
    assert str(parent.resume_expired()) == "Finished."
    assert ops.deleted == []  # the default rejects: the inner tool never ran
    assert ops.model.requests[-1].messages[2].content[0].text == "rejected: timed out"
    [entry] = parent.audit
    assert (entry.interrupt_id, entry.by, entry.expired) == (question.id, "expiry", True)


def test_an_expired_sub_agent_question_without_default_declines():
    now = [1_800_000_000.0]
    parent, ops = make_typed(now, default=False)
    [question] = parent("Go").interrupts
    now[0] += 61
    parent.resume_expired()
    assert ops.deleted == []
    assert [(e.interrupt_id, e.answer, e.expired) for e in parent.audit] == [
        (question.id, None, True)
    ]
    text = ops.model.requests[-1].messages[2].content[0].text
    assert "expired without an answer" in text


def test_an_expired_question_two_levels_down_settles_at_every_level(executor):
    now = [1_800_000_000.0]
    ops = make_ops(ops_turns("z", reply="Timed out."), executor)

    def timed(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", expires_in=30, default=False) is not True:
            event.cancel("no answer in time")

    ops.agent.hooks = type(ops.agent.hooks)()
    ops.agent.hooks.add_callback(BeforeToolCallEvent, timed)
    lead = Agent(
        ScriptedModel([[ask("m1", "ops", "delete z")], "Lead: nothing done."]),
        tools=[ops.agent.as_tool()],
        tool_executor=executor,
        name="lead",
    )
    top = make_parent(
        [[ask("t1", "lead", "tidy")], "Top: nothing done."],
        [lead.as_tool()],
        executor,
        clock=lambda: now[0],
    )
    [question] = top("Tidy").interrupts
    assert question.expires_at == now[0] + 30 and question.has_default
    now[0] += 31
    assert str(top.resume_expired()) == "Top: nothing done."
    assert ops.deleted == []
    assert ops.model.requests[-1].messages[2].content[0].text == "no answer in time"
    assert [(e.interrupt_id, e.by) for e in top.audit] == [(question.id, "expiry")]


# --- golden file: a nested sub-agent pause in the version 3 format -----------------------------

GOLDEN = Path(__file__).parent / "interrupts" / "golden" / "v3_agents_as_tools.json"


def _golden_agents(top_turns: list, lead_turns: list, ops_turns_: list) -> tuple[Agent, Ops]:
    def clock() -> float:
        return 1_800_000_000.0

    ops = make_ops(ops_turns_)
    lead = Agent(ScriptedModel(lead_turns), tools=[ops.agent.as_tool()], name="lead")
    top = Agent(
        ScriptedModel(top_turns), tools=[lead.as_tool()], name="top", signing_key=KEY, clock=clock
    )
    return top, ops


def test_golden_nested_sub_agent_pause_loads_and_resumes():
    """A saved pause with a sub-agent's state two levels down (checkpoint, via) keeps loading.
    Written once by INTERLUDE_REGEN_GOLDEN=1; a change that cannot read it fails here."""
    if os.environ.get("INTERLUDE_REGEN_GOLDEN") == "1":
        top, _ = _golden_agents(
            [[ask("t1", "lead", "tidy")]], [[ask("m1", "ops", "delete z")]], ops_turns("z")
        )
        top("Tidy")
        GOLDEN.write_text(json.dumps(top.export_state(), indent=1, sort_keys=True) + "\n")
    state = json.loads(GOLDEN.read_text())
    top, ops = _golden_agents(["Top done."], ["Lead done."], ["Deleted z."])
    top.import_state(state)
    [question] = top.interrupts
    assert question.id == up("t1", up("m1", approve_id("s1")))
    assert [u.id for u in question.via] == ["t1", "m1"] and question.raised_at == 1_800_000_000.0
    assert str(top.resume({question.id: True})) == "Top done." and ops.deleted == ["z"]


# --- a fresh process ------------------------------------------------------------------------------

CHILD = """
import json, sys
from tests import test_agents_as_tools as t
print(json.dumps(t.child(json.load(sys.stdin))))
"""
"""Run from the repository root, where ``tests`` is importable."""


def build_for_process(job: dict[str, Any], store: Any = None) -> tuple[Agent, Ops, ScriptedModel]:
    """The agents every process builds alike: top -> lead -> ops (nested) or top -> ops."""
    executor = job["executor"]
    ops = make_ops(job["ops_turns"], executor)
    tools = [ops.agent.as_tool()]
    lead_model = ScriptedModel(job.get("lead_turns", []))
    if job["nested"]:
        lead = Agent(lead_model, tools=tools, tool_executor=executor, name="lead")
        tools = [lead.as_tool()]
    session = {} if store is None else {"session": store, "session_id": "job-1"}
    top = Agent(
        ScriptedModel(job["top_turns"]),
        tools=tools,
        tool_executor=executor,
        name="top",
        signing_key=KEY,
        **session,
    )
    return top, ops, lead_model


def child(job: dict[str, Any]) -> dict[str, Any]:
    """Run in a fresh process: build the same agents, load the pause, answer it."""
    store = None
    if job.get("sqlite"):
        from interlude.sessions import SQLiteStore

        store = SQLiteStore(job["sqlite"])
    top, ops, lead_model = build_for_process(job, store)
    if store is None:
        top.import_state(job["state"])
    result = top.resume(job["answers"], by="carol")
    return {
        "stop_reason": result.stop_reason,
        "text": str(result),
        "deleted": ops.deleted,
        "ops_requests": len(ops.model.requests),
        "lead_requests": len(lead_model.requests),
        "audit": [[e.interrupt_id, e.by] for e in top.audit],
    }


def run_child(job: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_approval_inside_a_sub_agent_answered_from_the_top_in_a_fresh_process(tmp_path, executor):
    from interlude.sessions import SQLiteStore

    db = str(tmp_path / "agents.db")
    job: dict[str, Any] = {
        "executor": executor,
        "nested": False,
        "ops_turns": ops_turns("/srv/old.log"),
        "top_turns": [[ask("t1", "ops", "clean /srv")]],
    }
    with SQLiteStore(db) as store:
        top, ops, _ = build_for_process(job, store)
        [question] = top("Clean /srv").interrupts
        assert ops.deleted == [] and len(ops.model.requests) == 1
        from interlude import Inbox

        [listed] = Inbox(store).pending(tool_name="delete")  # the store lists it, via and all
        assert listed.interrupt == question and listed.interrupt.via[0].name == "ops"
    del top

    # The new process has only the replies still to come: anything asked twice would fail.
    job.update(
        sqlite=db,
        answers={question.id: True},
        ops_turns=["Cleaned up."],
        top_turns=["All clean."],
    )
    out = run_child(job)
    assert out["stop_reason"] == "end_turn" and out["text"] == "All clean."
    assert out["deleted"] == ["/srv/old.log"] and out["ops_requests"] == 1
    assert out["audit"] == [[question.id, "carol"]]
    with SQLiteStore(db) as store:
        from interlude import Inbox

        assert [e["by"] for e in Inbox(store).audit("job-1")] == ["carol"]
        assert Inbox(store).pending() == []


def test_nested_pause_exported_and_answered_in_a_fresh_process(executor):
    job: dict[str, Any] = {
        "executor": executor,
        "nested": True,
        "ops_turns": ops_turns("z"),
        "lead_turns": [[ask("m1", "ops", "delete z")]],
        "top_turns": [[ask("t1", "lead", "tidy")]],
    }
    top, ops, lead_model = build_for_process(job)
    [question] = top("Tidy").interrupts
    assert question.id == up("t1", up("m1", approve_id("s1")))
    job.update(
        state=top.export_state(),
        answers={question.id: True},
        ops_turns=["Cleaned up."],
        lead_turns=["Lead done."],
        top_turns=["Top done."],
    )
    out = run_child(job)
    assert (out["text"], out["deleted"]) == ("Top done.", ["z"])
    assert (out["ops_requests"], out["lead_requests"]) == (1, 1)
    assert ops.deleted == [] and len(lead_model.requests) == 1


# --- hostile uses (review) --------------------------------------------------------------------


class Forward:
    """A tool that hands its call to another tool set later: how an agent can reach itself."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.target: Any = None
        self.spec = ToolSpec(name, "Forwards.", {"type": "object", "properties": {}})

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        result: ToolResult = await self.target.run(tool_use, context)
        return result


def keeps_calling(name: str, counter: list[int]) -> FunctionModel:
    """A model that calls ``name`` every time, whatever it is told."""

    def reply(request: ModelRequest) -> Any:
        counter.append(1)
        return [ToolUse(f"c{len(counter)}", name, {"prompt": "again"})]

    return FunctionModel(reply)


def test_an_agent_reaching_itself_through_its_tools_is_refused_not_run_without_end() -> None:
    calls: list[int] = []
    forward = Forward("me")
    me = Agent(keeps_calling("me", calls), tools=[forward], name="me", max_cycles=5)
    forward.target = me.as_tool()
    with pytest.raises(CycleLimitError):
        me("Go")  # the top agent calls its own copy: each call is refused at once
    assert len(calls) == 5  # max_cycles model calls, not max_cycles to the power of the depth
    errors = [text for _, status, text in result_texts(me) if status == "error"]
    assert len(errors) == 5 and "cannot be its own sub-agent" in errors[0]


def test_two_agents_calling_each_other_are_refused_at_the_second_level() -> None:
    inner_calls: list[int] = []
    forward = Forward("top")
    inner = Agent(keeps_calling("top", inner_calls), tools=[forward], name="inner", max_cycles=3)
    top = Agent(
        ScriptedModel([[ask("t1", "inner", "go")], "Done."]), tools=[inner.as_tool()], name="top"
    )
    forward.target = top.as_tool()
    assert str(top("Go")) == "Done."
    [(_, status, text)] = result_texts(top)
    assert status == "error" and "CycleLimitError" in text  # inner gave up, after 3 tries
    assert len(inner_calls) == 3


def test_sub_agents_nest_at_most_max_depth_deep() -> None:
    from interlude._agent._subagent import MAX_DEPTH

    models: list[ScriptedModel] = []

    def level(i: int, tools: list) -> Agent:
        models.insert(0, ScriptedModel([[ask(f"l{i}", f"a{i + 1}", "deeper")], f"level {i}"]))
        return Agent(models[0], tools=tools, name=f"a{i}")

    bottom = Agent(ScriptedModel(["bottom"]), name=f"a{MAX_DEPTH + 1}")
    agent = bottom
    for i in range(MAX_DEPTH, -1, -1):  # a0 calls a1 ... calls a(MAX_DEPTH) calls the bottom
        agent = level(i, [agent.as_tool()])
    assert str(agent("Go")) == "level 0"
    assert [len(m.requests) for m in models] == [2] * (MAX_DEPTH + 1)  # every level ran
    assert bottom.model.requests == []  # type: ignore[attr-defined]  # one level too deep
    [refused] = models[-1].requests[1].messages[-1].content
    assert isinstance(refused, ToolResult) and refused.status == "error"
    assert f"nest at most {MAX_DEPTH} deep" in refused.text


def test_a_forged_checkpoint_that_is_not_an_agent_state_fails_the_call_cleanly() -> None:
    ops = make_ops(ops_turns("/tmp/x"))
    parent = make_parent([[ask("t1", "ops", "clean")], "Done."], [ops.agent.as_tool()])
    [question] = parent("Clean").interrupts
    state = parent.export_state()
    state["pause"]["step"]["calls"][0]["checkpoint"] = ["not", "a", "state"]  # type: ignore
    parent.import_state(state)  # unsigned: a store writer can change it
    assert str(parent.resume({question.id: True})) == "Done."
    [(_, status, text)] = result_texts(parent)
    assert status == "error" and text.startswith("StateFormatError: ") and "not an agent" in text
    assert ops.deleted == []


def test_relaying_two_questions_with_one_id_is_refused() -> None:
    """Else one answer, given to the question shown, would also settle the other."""
    import time

    from interlude import Interrupt

    asked = [
        Interrupt(id="same", name="approve", reason=r, source="tool_call", raised_at=time.time())
        for r in ("pay ana", "pay bob")
    ]

    @tool
    def fan(context: ToolContext) -> str:
        """Ask two questions asked elsewhere."""
        context.relay(asked)

    agent = Agent(ScriptedModel([[ToolUse("t1", "fan", {})], "Done."]), tools=[fan])
    assert str(agent("Go")) == "Done." and not agent.is_paused
    [(_, status, text)] = result_texts(agent)
    assert status == "error" and "several questions with one id (same)" in text


def test_the_copy_keeps_the_agents_conversation_manager() -> None:
    from interlude.conversation import SlidingWindow

    @tool
    def look(n: int) -> str:
        """Look.

        Args:
            n: Where.
        """
        return f"saw {n}"

    turns = [[ToolUse(f"s{i}", "look", {"n": i})] for i in range(4)] + ["Looked four times."]
    model = ScriptedModel(turns)
    sub = Agent(model, tools=[look], name="eyes", conversation=SlidingWindow(max_messages=3))
    parent = make_parent([[ask("t1", "eyes", "look around")], "Done."], [sub.as_tool()])
    assert str(parent("Look")) == "Done."
    assert [len(r.messages) for r in model.requests] == [1, 3, 3, 3, 3]  # windowed, as sub's own
