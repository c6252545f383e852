"""Replaying stored sessions under a candidate policy: what it would decide about every call,
what changes against what happened, what it cannot judge; no model is called and no tool
runs, and its decisions match those the same candidate made live, as a shadow."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.policy import Policy, ReplayChange, Rule
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

LIVE = Policy(
    [
        Rule(tool="pay", when="input.amount > 100", then="ask"),
        Rule(tool="pay", then="allow"),
        Rule(tool="wipe", then="deny"),
    ],
    version="live",
)
CANDIDATE = Policy(
    [
        Rule(tool="pay", when="input.amount > 200", then="deny"),
        Rule(tool="pay", when="input.amount > 50", then="ask"),
        Rule(tool="pay", then="allow"),
        Rule(tool="wipe", then="ask"),
    ],
    version="candidate",
)
SESSIONS = 1000


class Forbidden:
    """Tools and a model that fail the test if anything calls them (armed after the setup)."""

    def __init__(self) -> None:
        self.armed = False
        self.runs = 0
        self.calls = 0

    def check(self) -> None:
        self.runs += 1
        if self.armed:
            raise AssertionError("a tool ran during the replay")

    def model(self, turns: list[Any]) -> Any:
        """A scripted model that fails the test if it is called once armed."""
        guard, inner = self, ScriptedModel(turns)

        class Guarded:
            def stream(self, *args: Any, **kwargs: Any) -> Any:
                guard.calls += 1
                if guard.armed:
                    raise AssertionError("the model was called during the replay")
                return inner.stream(*args, **kwargs)

        return Guarded()


def build(store: SQLiteStore, guard: Forbidden) -> dict[str, str]:
    """SESSIONS sessions run live under LIVE with CANDIDATE as the shadow (and 20 before any
    policy was set); returns what happened to each call by session id."""

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        guard.check()
        return f"paid {amount}"

    @tool
    def wipe() -> str:
        """Wipe."""
        guard.check()
        return "wiped"

    happened: dict[str, str] = {}
    for i in range(SESSIONS):
        sid = f"s{i}"
        use = (
            ToolUse("c1", "wipe", {}) if i % 10 == 9 else ToolUse("c1", "pay", {"amount": i % 300})
        )
        agent = Agent(
            guard.model([[use], "ok"]),
            tools=[pay, wipe],
            policy=LIVE,
            shadow=CANDIDATE,
            name="payer" if i % 2 else "refunder",
            session=store,
            session_id=sid,
        )
        result = agent("go")
        if use.name == "wipe":
            happened[sid] = "denied"
        elif result.stop_reason != "interrupt":
            happened[sid] = "ran unasked"
        else:
            [question] = result.interrupts
            kind = ("approved", "declined", "edited")[i % 3]
            answer: Any = (
                {"approve": True, "input": {"amount": 1}}
                if kind == "edited"
                else (kind == "approved")
            )
            agent.resume({question.id: answer})
            happened[sid] = kind
    for i in range(20):  # before any policy: no path or source recorded
        agent = Agent(
            guard.model([[ToolUse("c1", "pay", {"amount": 70})], "ok"]),
            tools=[pay, wipe],
            session=store,
            session_id=f"old{i}",
        )
        agent("go")
        happened[f"old{i}"] = "ran unasked"
    return happened


def expected(candidate_amount: int | None) -> str:
    if candidate_amount is None:
        return "ask"  # wipe
    if candidate_amount > 200:
        return "deny"
    return "ask" if candidate_amount > 50 else "allow"


CLASS = {"ran unasked": "allow", "approved": "ask", "edited": "ask", "declined": "ask"}
CLASS["denied"] = "deny"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Forbidden]:
    path = tmp_path_factory.mktemp("replay") / "sessions.db"
    store = SQLiteStore(path)
    guard = Forbidden()
    happened = build(store, guard)
    store.close()
    guard.armed = True
    return path, happened, guard


def amount_of(sid: str) -> int | None:
    if sid.startswith("old"):
        return 70
    i = int(sid[1:])
    return None if i % 10 == 9 else i % 300


def test_replay_reports_every_call_and_each_change_running_nothing(history: Any) -> None:
    path, happened, guard = history
    runs_before, calls_before = guard.runs, guard.calls
    assert calls_before == 2 * (SESSIONS + 20)  # (the guard sees the live runs' model calls)
    report = asyncio.run(CANDIDATE.replay(f"sqlite:///{path}"))
    assert (guard.runs, guard.calls) == (runs_before, calls_before)  # 0 tool runs, 0 calls
    assert report.calls == SESSIONS + 20 and report.sessions == SESSIONS + 20
    assert report.unjudged == []  # the candidate reads nothing the old records lack
    would = Counter(expected(amount_of(sid)) for sid in happened)
    assert dict(report.would) == {k: would[k] for k in ("allow", "ask", "deny")}
    changes = {sid for sid, what in happened.items() if CLASS[what] != expected(amount_of(sid))}
    assert {c.session_id for c in report.changes} == changes
    for change in report.changes:
        assert isinstance(change, ReplayChange) and change.call_id == "c1"
        assert change.happened == happened[change.session_id]
        assert change.would == expected(amount_of(change.session_id))
        assert change.input_digest.startswith("sha256:") and change.rule


def test_replay_matches_what_the_candidate_decided_live_as_a_shadow(history: Any) -> None:
    path, happened, _ = history
    store = SQLiteStore(path)
    live: dict[str, str] = {}
    for sid in happened:
        trail = asyncio.run(store.audit_trail(sid))
        shadow = [e["answer"]["shadow"]["then"] for e in trail if e["name"] == "policy"]
        if shadow:
            [live[sid]] = shadow
    store.close()
    assert len(live) == SESSIONS
    report = asyncio.run(CANDIDATE.replay(f"sqlite:///{path}"))
    replayed = {c.session_id: c.would for c in report.changes}
    for sid, decided in live.items():  # every change's decision is the live shadow's
        if sid in replayed:
            assert replayed[sid] == decided, sid
        else:
            assert CLASS[happened[sid]] == decided, sid
    assert Counter(live.values()) + Counter({"ask": 20}) == Counter(dict(report.would))  # old: 70


def test_a_rule_needing_what_old_records_lack_leaves_those_calls_unjudged(history: Any) -> None:
    path, _, _ = history
    by_source = Policy([Rule(tool="pay", when="source == 'local'", then="allow")])
    report = asyncio.run(by_source.replay(f"sqlite:///{path}"))
    assert sorted(u.session_id for u in report.unjudged) == sorted(f"old{i}" for i in range(20))
    assert {u.field for u in report.unjudged} == {"source"}
    assert sum(report.would.values()) == report.calls - 20


def test_replay_of_some_agents_and_since_a_time(history: Any) -> None:
    path, _, _ = history
    store = SQLiteStore(path)
    report = asyncio.run(CANDIDATE.replay(store, agents=["payer"]))
    assert report.sessions == SESSIONS // 2 and report.calls == SESSIONS // 2
    late = asyncio.run(CANDIDATE.replay(store, since=4102444800.0))  # 2100: nothing yet
    assert late.calls == 0 and late.skipped == SESSIONS + 20
    store.close()
    assert isinstance(report.to_dict()["would"], Mapping)
