"""Answers as data: typed answers, deadlines, the audit trail and signed pauses.

Everything goes through the public API; time is an injected clock (nothing sleeps).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from interlude import Agent, AuditEntry, Inbox, ToolResult, ToolUse, tool
from interlude.errors import (
    AnswerValidationError,
    InterruptError,
    InterruptExpiredError,
    ResumeError,
    ResumeInputError,
    StateIntegrityError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

GOLDEN = Path(__file__).parent / "golden" / "v3_answers_as_data.json"
REGEN = os.environ.get("INTERLUDE_REGEN_GOLDEN") == "1"
KEY = b"k" * 32

paid: list[int] = []


@tool
def pay(to: str, amount: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        amount: How much.
    """
    paid.append(amount)
    return f"paid {amount} to {to}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    paid.clear()


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Verdict(pydantic.BaseModel):
    approved: bool
    limit: int = pydantic.Field(ge=0)


@dataclasses.dataclass
class Choice:
    approved: bool
    note: str = ""


class Reply(TypedDict):
    approved: bool


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


def _turns() -> list[Any]:
    return [[ToolUse("t1", "pay", {"to": "bob", "amount": 30})], "done"]


def _agent(hook: Any, **kw: Any) -> Agent:
    agent = Agent(ScriptedModel(_turns()), tools=[pay], **kw)
    agent.hooks.add_callback(BeforeToolCallEvent, hook)
    return agent


def _typed_agent(response_type: Any, seen: list[Any], **kw: Any) -> Agent:
    def ask(event: BeforeToolCallEvent) -> None:
        seen.append(event.interrupt("approve", "pay?", response_type=response_type))

    return _agent(ask, **kw)


# --- typed answers ------------------------------------------------------------------------------

TYPED = [
    (
        Verdict,
        {"approved": True, "limit": 5},
        Verdict(approved=True, limit=5),
        {"approved": True, "limit": -1},
        "limit",
    ),
    (Choice, {"approved": True}, Choice(approved=True), {"approved": "maybe"}, "approved"),
    (Reply, {"approved": False}, {"approved": False}, {}, None),
    (Level, "high", Level.HIGH, "medium", None),
    (Literal["yes", "no"], "no", "no", "yes please", None),
    (bool, True, True, "yes please", None),
    (int, 3, 3, None, None),
]


@pytest.mark.parametrize(
    ("response_type", "good", "typed", "bad", "bad_field"),
    TYPED,
    ids=["pydantic", "dataclass", "typeddict", "enum", "literal", "bool", "int"],
)
def test_a_typed_question_carries_its_schema_and_refuses_a_bad_answer(
    response_type: Any, good: Any, typed: Any, bad: Any, bad_field: str | None
) -> None:
    seen: list[Any] = []
    agent = _typed_agent(response_type, seen)
    paused = agent("go")
    (question,) = paused.interrupts
    assert question.response_schema is not None
    json.dumps(question.response_schema)  # plain JSON Schema, for a UI
    before = agent.export_state()
    with pytest.raises(AnswerValidationError) as info:
        agent.resume({question.id: bad})
    assert isinstance(info.value, ResumeError)
    assert info.value.interrupt_id == question.id and "'approve'" in str(info.value)
    if bad_field is not None:
        assert info.value.path == (bad_field,) and f"at {bad_field}:" in str(info.value)
    assert agent.export_state() == before and agent.is_paused and paid == []
    assert agent.audit == []
    result = agent.resume({question.id: good})
    assert result.stop_reason == "end_turn"
    assert seen[-1] == typed and type(seen[-1]) is type(typed)


def test_a_typed_answer_is_checked_by_a_process_that_does_not_know_the_type(tmp_path: Path) -> None:
    """The stored schema decides: an agent built with a hook that asks untyped still refuses."""
    store = SQLiteStore(tmp_path / "s.db")
    agent = _typed_agent(Verdict, [], session=store, session_id="s")
    (question,) = agent("go").interrupts
    other = _agent(lambda e: e.interrupt("approve"), session=store, session_id="s")
    with pytest.raises(AnswerValidationError, match="approved"):
        other.resume({question.id: {"limit": 1}})
    assert other.is_paused and paid == []


def test_untyped_questions_take_any_json_as_before() -> None:
    agent = _agent(lambda e: None if e.interrupt("approve") == {"any": [1]} else e.cancel())
    (question,) = agent("go").interrupts
    assert question.response_schema is None and question.expires_at is None
    assert agent.resume({question.id: {"any": [1]}}).stop_reason == "end_turn" and paid == [30]


def test_a_type_pydantic_cannot_describe_is_an_interrupt_error() -> None:
    agent = _typed_agent(object(), [])
    with pytest.raises(InterruptError, match="response_type"):
        agent("go")


# --- deadlines ----------------------------------------------------------------------------------


def _deadline_agent(clock: Clock, seen: list[Any], **ask: Any) -> Agent:
    def hook(event: BeforeToolCallEvent) -> None:
        try:
            answer = event.interrupt("approve", "pay?", **ask)
        except InterruptExpiredError:
            seen.append("expired")
            raise
        seen.append(answer)
        if answer is not True:
            event.cancel("declined")

    return _agent(hook, clock=clock)


def test_a_deadline_is_carried_and_a_late_answer_is_refused() -> None:
    clock = Clock()
    agent = _deadline_agent(clock, [], expires_in=timedelta(minutes=10), default=False)
    (question,) = agent("go").interrupts
    assert question.raised_at == clock.now and question.expires_at == clock.now + 600
    assert question.has_default and question.default is False
    before = agent.export_state()
    clock.now += 600
    with pytest.raises(InterruptExpiredError, match="expired") as info:
        agent.resume({question.id: True})
    assert info.value.interrupt == question
    assert agent.export_state() == before and paid == []


def test_expiry_applies_the_default_and_is_recorded_as_such() -> None:
    clock = Clock()
    seen: list[Any] = []
    agent = _deadline_agent(clock, seen, expires_in=60, default=False)
    (question,) = agent("go").interrupts
    with pytest.raises(ResumeInputError, match="no pending interrupt has expired"):
        agent.resume_expired()
    clock.now += 61
    result = agent.resume_expired()
    assert result.stop_reason == "end_turn" and paid == [] and seen == [False]
    (entry,) = agent.audit
    assert entry.by == "expiry" and entry.expired and entry.answer is False
    assert entry.interrupt_id == question.id and entry.at == clock.now


def test_expiry_without_a_default_declines_and_the_hook_can_tell() -> None:
    clock = Clock()
    seen: list[Any] = []
    agent = _deadline_agent(clock, seen, expires_in=60)
    agent("go")
    clock.now += 60
    result = agent.resume_expired()
    assert result.stop_reason == "end_turn" and paid == [] and seen == ["expired"]
    (result,) = [b for m in agent.messages for b in m.content if isinstance(b, ToolResult)]
    assert result.status == "error" and "expired without an answer" in result.content[0].text


def test_expiry_without_a_default_in_a_tool_body_fails_the_call() -> None:
    clock = Clock()

    from interlude import ToolContext

    @tool
    def careful(path: str, ctx: ToolContext) -> str:
        """Delete carefully.

        Args:
            path: Which.
        """
        ctx.interrupt("sure", expires_in=5)
        paid.append(1)
        return "deleted"

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "careful", {"path": "/x"})], "ok"]),
        tools=[careful],
        clock=clock,
    )
    agent("go")
    clock.now += 5
    assert agent.resume_expired().stop_reason == "end_turn" and paid == []
    result = agent.messages[-2].content[0]
    assert result.status == "error" and "InterruptExpiredError" in result.content[0].text


def test_a_partial_resume_keeps_the_other_question_s_deadline_and_settles_expired_ones() -> None:
    clock = Clock()
    answers: dict[str, Any] = {}

    def first(event: BeforeToolCallEvent) -> None:
        answers["approve"] = event.interrupt("approve", expires_in=100, default=False)

    def second(event: BeforeToolCallEvent) -> None:
        answers["second_look"] = event.interrupt("second_look", expires_in=30, default=True)
        if not (answers.get("approve") and answers["second_look"]):
            event.cancel("declined")

    agent = Agent(ScriptedModel(_turns()), tools=[pay], clock=clock)
    agent.hooks.add_callback(BeforeToolCallEvent, first)
    agent.hooks.add_callback(BeforeToolCallEvent, second)
    paused = agent("go")
    q = {i.name: i for i in paused.interrupts}
    assert set(q) == {"approve", "second_look"}
    clock.now += 10
    again = agent.resume({q["approve"].id: True})  # second_look still open
    (still,) = again.interrupts
    assert still.id == q["second_look"].id
    assert still.raised_at == q["second_look"].raised_at  # the deadline first set holds
    assert still.expires_at == q["second_look"].expires_at == clock.now - 10 + 30
    clock.now += 25  # second_look has expired: its default (True) applies
    with pytest.raises(InterruptExpiredError):
        agent.resume({still.id: False})
    assert agent.resume_expired().stop_reason == "end_turn" and paid == [30]
    assert [(e.name, e.by, e.answer) for e in agent.audit] == [
        ("approve", "unknown", True),
        ("second_look", "expiry", True),
    ]


def test_bad_deadlines_and_defaults_are_interrupt_errors() -> None:
    for kw, message in [
        ({"expires_in": -1}, "expires_in"),
        ({"default": True}, "needs a deadline"),
        ({"expires_in": 5, "default": {1, 2}}, "not JSON"),
        ({"expires_in": 5, "default": "maybe", "response_type": bool}, "does not fit"),
    ]:
        agent = _agent(lambda e, kw=kw: e.interrupt("approve", **kw))
        with pytest.raises(InterruptError, match=message):
            agent("go")


def test_expired_questions_are_found_in_the_store_and_settled_from_a_fresh_process(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "s.db")
    agent = Agent(
        ScriptedModel(_turns()), tools=[pay], clock=clock, session=store, session_id="late"
    )
    agent.hooks.add_callback(
        BeforeToolCallEvent,
        lambda e: None if e.interrupt("approve", expires_in=60, default=False) else e.cancel("no"),
    )
    agent("go")
    inbox = Inbox(store)
    assert inbox.expired(now=clock.now + 59) == []
    (found,) = inbox.expired(now=clock.now + 60)
    assert found.session_id == "late" and found.expires_at == clock.now + 60
    clock.now += 60
    fresh = Agent(
        ScriptedModel(["done"]), tools=[pay], clock=clock, session=store, session_id="late"
    )
    fresh.hooks.add_callback(
        BeforeToolCallEvent,
        lambda e: None if e.interrupt("approve", expires_in=60, default=False) else e.cancel("no"),
    )
    assert fresh.resume_expired().stop_reason == "end_turn" and paid == []
    assert inbox.expired(now=clock.now) == [] and inbox.pending() == []
    assert [e["by"] for e in inbox.audit("late")] == ["expiry"]


# --- the audit trail ----------------------------------------------------------------------------


def test_the_audit_trail_records_who_when_what_and_what_was_shown(tmp_path: Path) -> None:
    from interlude._audit import shown_digest

    clock = Clock()
    store = SQLiteStore(tmp_path / "s.db")

    def build(model: ScriptedModel) -> Agent:
        agent = Agent(model, tools=[pay], clock=clock, session=store, session_id="s", name="ops")
        agent.hooks.add_callback(
            BeforeToolCallEvent,
            lambda e: None if e.interrupt("approve", {"pay": e.tool_use.input}) else e.cancel(),
        )
        return agent

    (question,) = build(ScriptedModel(_turns()))("go").interrupts
    clock.now += 5
    resumed = build(ScriptedModel(["done"]))  # a fresh agent on the session: a new process
    assert resumed.resume({question.id: True}, by="ana").stop_reason == "end_turn"
    later = build(ScriptedModel([]))
    (entry,) = later.audit
    assert entry == AuditEntry(
        interrupt_id=question.id,
        name="approve",
        answer=True,
        by="ana",
        at=clock.now,
        shown=shown_digest(question),
        chain=entry.chain,
    )
    assert entry.shown.startswith("sha256:")
    assert entry.chain is not None and entry.chain.startswith("sha256:")  # linked, unsigned
    assert later.export_state()["audit"] == [entry.to_dict()]
    assert Inbox(store).audit("s") == [entry.to_dict()]


def test_the_audit_trail_only_grows_across_pauses(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    turns = [
        [ToolUse("t1", "pay", {"to": "a", "amount": 1})],
        [ToolUse("t2", "pay", {"to": "b", "amount": 2})],
        "done",
    ]
    agent = Agent(ScriptedModel(turns), tools=[pay], session=store, session_id="s")
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
    first = agent("go").interrupts[0]
    second = agent.resume({first.id: True}, by="ana").interrupts[0]
    with pytest.raises(ResumeInputError, match="by="):
        agent.resume({second.id: True}, by="  ")
    agent.resume({second.id: False}, by="bo")
    assert [(e.by, e.answer) for e in agent.audit] == [("ana", True), ("bo", False)]
    assert [e["by"] for e in Inbox(store).audit("s")] == ["ana", "bo"]


# --- signed state -------------------------------------------------------------------------------


def _signed_pause(**kw: Any) -> tuple[Agent, dict[str, Any]]:
    agent = _agent(
        lambda e: None if e.interrupt("approve", "pay?") is True else e.cancel(),
        signing_key=KEY,
        **kw,
    )
    agent("go")
    return agent, json.loads(json.dumps(agent.export_state()))


def _fresh(**kw: Any) -> Agent:
    """An agent like the signed one's, whose model has the turn after the pause."""
    agent = Agent(ScriptedModel(["done"]), tools=[pay], **kw)
    agent.hooks.add_callback(
        BeforeToolCallEvent,
        lambda e: None if e.interrupt("approve", "pay?") is True else e.cancel(),
    )
    return agent


def test_a_signed_state_round_trips_and_is_checked() -> None:
    _, state = _signed_pause()
    assert state["pause"]["signature"].startswith("hmac-sha256+conversation:")
    fresh = _fresh(signing_key=KEY)
    fresh.import_state(state)
    (question,) = fresh.interrupts
    assert fresh.resume({question.id: True}).stop_reason == "end_turn" and paid == [30]


def _forge_answer(state: dict[str, Any]) -> None:
    iid = state["pause"]["interrupts"][0]["id"]
    state["pause"]["progress"]["answers"][iid] = True  # approved without a question answered


def _forge_decoy(state: dict[str, Any]) -> None:
    decoy = copy.deepcopy(state["pause"]["interrupts"][0])
    decoy["reason"] = "harmless, approve me"
    decoy["tool_use"]["input"]["amount"] = 1
    state["pause"]["interrupts"] = [decoy]


def _forge_phase(state: dict[str, Any]) -> None:
    step = state["pause"]["step"]
    step.get("then", step)["calls"][0]["phase"] = "body"  # skip the approval


def _forge_unsigned(state: dict[str, Any]) -> None:
    del state["pause"]["signature"]


@pytest.mark.parametrize(
    "forge",
    [_forge_answer, _forge_decoy, _forge_phase, _forge_unsigned],
    ids=["answer-with-no-question", "decoy-question", "moved-phase", "unsigned"],
)
def test_a_forged_state_is_refused_and_nothing_changes(forge: Any) -> None:
    _, state = _signed_pause()
    forge(state)
    target = _fresh(signing_key=KEY)
    before = target.export_state()
    with pytest.raises(StateIntegrityError):
        target.import_state(state)
    assert target.export_state() == before and paid == []


def test_another_key_or_another_agent_name_does_not_verify() -> None:
    _, state = _signed_pause(name="ops")
    with pytest.raises(StateIntegrityError):
        _fresh(signing_key=b"x" * 32).import_state(state)
    with pytest.raises(StateIntegrityError):
        _fresh(signing_key=KEY, name="billing").import_state(state)
    _fresh(signing_key=KEY, name="ops").import_state(state)


def test_a_stored_pause_changed_in_the_store_is_refused(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "s.db"
    _signed_pause(session=SQLiteStore(db), session_id="s")
    with sqlite3.connect(db) as conn:
        (pause,) = conn.execute("SELECT pause FROM sessions WHERE id = 's'").fetchone()
        data = json.loads(pause)
        _forge_answer({"pause": data})
        conn.execute("UPDATE sessions SET pause = ? WHERE id = 's'", (json.dumps(data),))
    with pytest.raises(StateIntegrityError):  # when the session is loaded: at first use
        _fresh(signing_key=KEY, session=SQLiteStore(db), session_id="s").is_paused  # noqa: B018
    # Without the key the same data loads (the signature is only checked when a key is set).
    assert _fresh(session=SQLiteStore(db), session_id="s").is_paused


def test_a_short_key_is_a_configuration_error() -> None:
    from interlude.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="signing_key"):
        Agent(ScriptedModel([]), signing_key=b"short")


# --- golden file: version 3 fields --------------------------------------------------------------


def _golden_agent(clock: Clock) -> Agent:
    agent = Agent(ScriptedModel(_turns()), tools=[pay], clock=clock, name="ops", signing_key=KEY)
    agent.hooks.add_callback(
        BeforeToolCallEvent,
        lambda e: (
            None
            if e.interrupt(
                "approve",
                "pay?",
                response_type=Verdict,
                expires_in=3600,
                default={"approved": False, "limit": 0},
            ).approved
            else e.cancel("declined")
        ),
    )
    return agent


def test_golden_version_3_pause_loads_and_resumes() -> None:
    clock = Clock()
    if REGEN:
        agent = _golden_agent(clock)
        agent("go")
        GOLDEN.write_text(json.dumps(agent.export_state(), indent=1, sort_keys=True) + "\n")
    state = json.loads(GOLDEN.read_text())
    assert state["version"] == 3 and state["agent"] == "ops"
    (question,) = state["pause"]["interrupts"]
    assert (
        question["response_schema"]["title"] == "Verdict"
        and question["expires_at"] == clock.now + 3600
    )
    agent = Agent(ScriptedModel(["done"]), tools=[pay], clock=clock, name="ops", signing_key=KEY)
    agent.hooks.add_callback(
        BeforeToolCallEvent,
        lambda e: (
            None
            if e.interrupt("approve", response_type=Verdict, expires_in=3600).approved
            else e.cancel("declined")
        ),
    )
    agent.import_state(state)
    assert (
        agent.resume({question["id"]: {"approved": True, "limit": 100}}, by="ana").stop_reason
        == "end_turn"
    )
    assert paid == [30] and agent.audit[0].by == "ana"


# --- what a hostile review found, tried again --------------------------------------------------


def test_shown_refuses_an_answer_to_a_question_that_is_not_the_one_seen() -> None:
    agent = _agent(lambda e: None if e.interrupt("approve", "pay?") is True else e.cancel())
    (question,) = agent("go").interrupts
    before = agent.export_state()
    with pytest.raises(ResumeInputError, match="not the one that was shown"):
        agent.resume({question.id: True}, shown={question.id: "sha256:" + "0" * 64})
    assert agent.export_state() == before and paid == []
    agent.resume({question.id: True}, shown={question.id: question.digest})
    assert paid == [30] and agent.audit[0].shown == question.digest


def test_by_is_printable_and_expiry_is_kept_for_deadlines() -> None:
    agent = _agent(lambda e: e.interrupt("approve"))
    (question,) = agent("go").interrupts
    for by in ["ana\n2026-01-01 00:00:00  root answered approve: true", "\x1b[2Jana", "expiry"]:
        with pytest.raises(ResumeInputError, match="by="):
            agent.resume({question.id: True}, by=by)
    assert agent.is_paused and agent.audit == []


def test_a_deadline_survives_a_crash_and_recovery(tmp_path: Path) -> None:
    """Two questions, one answered; the process dies while that call runs. After recovery the
    other question is asked again with the deadline it was first given, not a new one."""
    import sqlite3

    clock = Clock()
    db, crashed = tmp_path / "s.db", tmp_path / "crashed.db"

    @tool(idempotent=True)
    def step(n: int) -> str:
        """A step.

        Args:
            n: Which.
        """
        if n == 1:  # snapshot the store as a SIGKILL here would leave it
            with sqlite3.connect(db) as src, sqlite3.connect(crashed) as dst:
                src.backup(dst)
                # Its process is gone: a claim that has run out (as a dead owner's does).
                dst.execute("UPDATE sessions SET claim = json_set(claim, '$.expires_at', 0)")
        return f"step {n}"

    def build(store_path: Path, turns: list[Any]) -> Agent:
        agent = Agent(
            ScriptedModel(turns),
            tools=[step],
            clock=clock,
            session=SQLiteStore(store_path),
            session_id="s",
        )
        agent.hooks.add_callback(
            BeforeToolCallEvent,
            lambda e: None if e.interrupt("approve", expires_in=100) else e.cancel("no"),
        )
        return agent

    calls = [ToolUse("t1", "step", {"n": 1}), ToolUse("t2", "step", {"n": 2})]
    agent = build(db, [calls, "done"])
    first = agent("go").interrupts
    assert len(first) == 2
    t1, t2 = sorted(first, key=lambda i: i.tool_use.id)
    clock.now += 60
    agent.resume({t1.id: True})  # t1 runs (and is snapshotted mid-body), t2 asks again
    clock.now += 90  # t2's deadline (t0 + 100) has passed by the time anyone recovers
    recovered = build(crashed, ["done"])
    assert recovered.needs_recovery
    again = recovered.recover()
    (still,) = again.interrupts
    assert still.id == t2.id and still.expires_at == t2.expires_at  # not moved by the crash
    with pytest.raises(InterruptExpiredError):
        recovered.resume({t2.id: True})
    assert recovered.resume_expired().stop_reason == "end_turn"


def test_a_format_the_schema_names_is_checked_before_anything_changes() -> None:
    from datetime import datetime

    class When(pydantic.BaseModel):
        at: datetime

    agent = _typed_agent(When, [])
    (question,) = agent("go").interrupts
    before = agent.export_state()
    with pytest.raises(AnswerValidationError) as info:
        agent.resume({question.id: {"at": "not a date"}}, by="mallory")
    assert info.value.path == ("at",)
    assert agent.export_state() == before and agent.audit == []
    agent.resume({question.id: {"at": "2026-11-23T17:00:00Z"}}, by="ana")
    assert [e.by for e in agent.audit] == ["ana"]


@pytest.mark.parametrize(
    "schema",
    [{"$ref": "#/$defs/missing"}, {"$ref": "https://example.invalid/s.json"}, {"$ref": "#"}],
    ids=["dangling-ref", "remote-ref", "self-ref"],
)
def test_an_unusable_stored_schema_is_reported_as_an_interlude_error(
    schema: dict[str, Any],
) -> None:
    agent = _typed_agent(bool, [])
    agent("go")
    state = json.loads(json.dumps(agent.export_state()))
    state["pause"]["interrupts"][0]["response_schema"] = schema
    other = _typed_agent(bool, [])
    other.import_state(state)
    before = other.export_state()
    with pytest.raises(AnswerValidationError, match="response schema"):
        other.resume({other.interrupts[0].id: True})
    assert other.export_state() == before


def test_an_unnamed_agent_refuses_a_pause_signed_for_a_named_one() -> None:
    _, state = _signed_pause(name="admin")
    with pytest.raises(StateIntegrityError):
        _fresh(signing_key=KEY).import_state(state)


def test_an_answer_with_a_lone_surrogate_is_refused_before_anything_changes() -> None:
    """PostgreSQL's jsonb and UTF-8 output refuse a lone surrogate: it is not text."""
    agent = _agent(lambda e: e.interrupt("approve"))
    (question,) = agent("go").interrupts
    before = agent.export_state()
    with pytest.raises(ResumeInputError, match="not valid Unicode"):
        agent.resume({question.id: {"note": "x\ud800y"}})
    assert agent.export_state() == before and paid == []
