"""The same scenarios through both engines: the embedded one (an Agent on a session store,
reopened and resumed for each answer) and Temporal (AgentClient start / answer / result, a
worker running the loop). Each scenario is written once against an ``Engine``; on Temporal its
trace (the questions asked, the answers' outcomes, refused answers, the final messages, stop
reason, agent state and audit trail, and how often each tool ran) must equal the embedded
engine's trace of the same scenario.

Tools take paths relative to ``agents.RUNS_DIR`` (one directory per run of a scenario), so the
tool inputs, and so what each question shows and its digest, are the same on both engines.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from interlude import Interrupt, JsonValue

from . import agents
from .agents import app
from .conftest import Env
from .polling import pending, until
from .test_workflow import _prompt


class Engine(Protocol):
    name: str

    async def start(self, agent: str, prompt: str) -> str: ...
    async def pending(self, run: str, count: int) -> list[Interrupt]: ...
    async def answer(
        self, run: str, answers: Mapping[str, JsonValue], by: str, shown: dict[str, str] | None
    ) -> tuple[str, list[str]]: ...
    async def expire(self, run: str) -> None: ...
    async def snapshot(self, run: str) -> object: ...
    async def final(self, run: str) -> tuple[str, dict[str, Any]]: ...


class Embedded:
    """Agent + a session store: each answer reopens the agent from the store and resumes."""

    name = "embedded"

    def __init__(self) -> None:
        from interlude.sessions import open_store

        self.store = open_store("memory:")
        self.stop: dict[str, str] = {}

    async def _open(self, run: str) -> Any:
        return await app.open_async(run, self.store)

    async def start(self, agent: str, prompt: str) -> str:
        run = f"s-{uuid.uuid4().hex[:8]}"
        built = await app.start_async(agent, run, self.store)
        self.stop[run] = (await built.invoke_async(prompt)).stop_reason
        return run

    async def pending(self, run: str, count: int) -> list[Interrupt]:
        found: list[Interrupt] = (await self._open(run)).interrupts
        return found

    async def answer(
        self, run: str, answers: Mapping[str, JsonValue], by: str, shown: dict[str, str] | None
    ) -> tuple[str, list[str]]:
        result = await (await self._open(run)).resume_async(answers, by=by, shown=shown)
        self.stop[run] = result.stop_reason
        return result.stop_reason, [i.id for i in result.interrupts]

    async def expire(self, run: str) -> None:
        agent = await self._open(run)
        deadline = min(i.expires_at for i in agent.interrupts if i.expires_at is not None)
        await asyncio.sleep(max(0.0, deadline - time.time()) + 0.05)
        self.stop[run] = (await agent.resume_expired_async()).stop_reason

    async def snapshot(self, run: str) -> object:
        return (await self._open(run)).export_state()

    async def final(self, run: str) -> tuple[str, dict[str, Any]]:
        state: dict[str, Any] = (await self._open(run)).export_state()
        return self.stop[run], state


class OnTemporal:
    """AgentClient against a dev server, a worker running the agents."""

    name = "temporal"

    def __init__(self, env: Env) -> None:
        self.env = env

    async def start(self, agent: str, prompt: str) -> str:
        run: str = await self.env.agents.start(agent, prompt)
        return run

    async def pending(self, run: str, count: int) -> list[Interrupt]:
        return await pending(self.env.agents, run, count)

    async def answer(
        self, run: str, answers: Mapping[str, JsonValue], by: str, shown: dict[str, str] | None
    ) -> tuple[str, list[str]]:
        out = await self.env.agents.answer(run, answers, by=by, shown=shown)
        return out["stop_reason"], [i["id"] for i in out["interrupts"]]

    async def expire(self, run: str) -> None:
        async def answered() -> bool:  # the workflow's timer applies the default
            return not await self.env.agents.pending(run)

        await until(answered, "the deadline to apply")

    async def snapshot(self, run: str) -> object:
        handle = self.env.client.get_workflow_handle(run)
        return len([e async for e in handle.fetch_history_events()])

    async def final(self, run: str) -> tuple[str, dict[str, Any]]:
        result = await self.env.agents.result(run)
        state: dict[str, Any] = result["state"]
        return result["stop_reason"], state


class Trace:
    """A scenario's run on one engine, and what it saw (compared across engines)."""

    def __init__(self, engine: Engine, runs: Path) -> None:
        self.engine = engine
        self.runs = runs
        self.seen: list[object] = []
        runs.mkdir()
        agents.RUNS_DIR = runs

    async def start(self, agent: str, *calls: tuple[str, dict[str, object]]) -> str:
        return await self.engine.start(agent, _prompt(*calls))

    async def pending(self, run: str, count: int = 1) -> list[Interrupt]:
        found = await self.engine.pending(run, count)
        self.seen.append(("asked", [_shown(i) for i in found]))
        return found

    async def answer(
        self,
        run: str,
        answers: Mapping[str, JsonValue],
        by: str,
        shown: dict[str, str] | None = None,
    ) -> tuple[str, list[str]]:
        outcome = await self.engine.answer(run, answers, by, shown)
        self.seen.append(("answered", dict(answers), by, outcome))
        return outcome

    async def refused(self, run: str, answers: Mapping[str, JsonValue], by: str) -> Exception:
        """Answer, expecting a refusal that changes nothing; the error."""
        from interlude.errors import ResumeError

        before = await self.engine.snapshot(run)
        with pytest.raises(ResumeError) as refused:
            await self.engine.answer(run, answers, by, None)
        assert await self.engine.snapshot(run) == before  # nothing changed
        error = refused.value
        self.seen.append(("refused", type(error).__name__, str(error), vars(error).copy()))
        return error

    async def expire(self, run: str) -> None:
        await self.engine.expire(run)
        self.seen.append("expired")

    def tool_runs(self) -> dict[str, int]:
        return {p.name: len(p.read_text().splitlines()) for p in sorted(self.runs.iterdir())}

    async def finish(self, run: str) -> dict[str, Any]:
        """The final outcome (also recorded): stop reason, messages, state, audit, tool runs."""
        stop_reason, state = await self.engine.final(run)
        # When an answer was applied differs between the engines, and so does each entry's
        # link (it covers the time); each engine's entries are linked all the same.
        assert all(str(e.get("chain", "")).startswith("sha256:") for e in state["audit"])
        audit = [{k: v for k, v in e.items() if k not in ("at", "chain")} for e in state["audit"]]
        final = {
            "stop_reason": stop_reason,
            "messages": state["messages"],
            "state": state["state"],
            "audit": audit,
            "tool_runs": self.tool_runs(),
        }
        self.seen.append(("final", final))
        return final


def _shown(interrupt: Interrupt) -> dict[str, Any]:
    """A question as both engines must show it (times aside: raised_at, expires_at)."""
    data = interrupt.to_dict()
    for key in ("raised_at", "expires_at"):
        data.pop(key, None)
    data["digest"] = interrupt.digest
    data["has_deadline"] = interrupt.expires_at is not None
    return data


def _texts(final: dict[str, Any]) -> list[tuple[str, str]]:
    """(status, text) of each tool result in the final conversation."""
    return [
        (b["status"], b["content"][0]["text"])
        for m in final["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


# --- the scenarios, written once ------------------------------------------------------------


async def before_tool_approve(t: Trace) -> None:
    run = await t.start("approve", ("touch", {"path": "a"}))
    [q] = await t.pending(run)
    assert (q.name, q.source, q.reason) == ("approve", "before_tool_call", {"path": "a"})
    assert t.tool_runs() == {}
    assert await t.answer(run, {q.id: True}, "alice", {q.id: q.digest}) == ("end_turn", [])
    final = await t.finish(run)
    assert final["stop_reason"] == "end_turn" and final["tool_runs"] == {"a": 1}
    assert _texts(final) == [("success", "touched a")]
    [entry] = final["audit"]
    assert (entry["by"], entry["answer"], entry["shown"]) == ("alice", True, q.digest)


async def decline(t: Trace) -> None:
    run = await t.start("approve", ("touch", {"path": "a"}))
    [q] = await t.pending(run)
    assert await t.answer(run, {q.id: False}, "bob") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {} and _texts(final) == [("error", "not approved")]
    assert [(e["by"], e["answer"]) for e in final["audit"]] == [("bob", False)]


async def after_tool_retry(t: Trace) -> None:
    run = await t.start("retry", ("flaky", {"path": "f"}))
    [q] = await t.pending(run)
    assert (q.source, q.reason) == ("after_tool_call", "TimeoutError: timed out")
    assert t.tool_runs() == {"f": 1}
    assert await t.answer(run, {q.id: True}, "alice") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {"f": 2} and _texts(final) == [("success", "ok")]


async def several_answered_partly_then_fully(t: Trace) -> None:
    run = await t.start("approve", *[("touch", {"path": p}) for p in ("a", "b", "c")])
    q1, q2, q3 = await t.pending(run, 3)
    assert await t.answer(run, {q1.id: True}, "alice") == ("interrupt", [q2.id, q3.id])
    assert t.tool_runs() == {"a": 1}
    assert [q.id for q in await t.pending(run)] == [q2.id, q3.id]
    assert await t.answer(run, {q2.id: False, q3.id: True}, "bob") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {"a": 1, "c": 1}
    assert [(e["by"], e["answer"]) for e in final["audit"]] == [
        ("alice", True),
        ("bob", False),
        ("bob", True),
    ]


async def tool_body_interrupts(t: Trace) -> None:
    run = await t.start("plain", ("confirmed", {"path": "k"}))
    [q] = await t.pending(run)
    assert (q.name, q.source, q.reason) == ("confirm", "tool_call", "k")
    assert t.tool_runs() == {"k.started": 1}
    assert await t.answer(run, {q.id: True}, "alice") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {"k": 1, "k.started": 2}  # run again from the top
    assert _texts(final) == [("success", "confirmed k")]


async def typed_answer_refused(t: Trace) -> None:
    from interlude.errors import AnswerValidationError

    run = await t.start("typed", ("touch", {"path": "t"}))
    [q] = await t.pending(run)
    assert q.response_schema is not None
    error = await t.refused(run, {q.id: {"approved": "maybe"}}, "alice")
    assert isinstance(error, AnswerValidationError)
    assert (error.interrupt_id, error.path) == (q.id, ("approved",))
    assert [p.id for p in await t.pending(run)] == [q.id] and t.tool_runs() == {}
    answer = {"approved": True, "note": "ok"}
    assert await t.answer(run, {q.id: answer}, "alice") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {"t": 1}
    assert [(e["by"], e["answer"]) for e in final["audit"]] == [("alice", answer)]


async def deadline_with_default(t: Trace) -> None:
    run = await t.start("deadline", ("touch", {"path": "d"}))
    [q] = await t.pending(run)
    assert q.expires_at is not None and q.has_default and q.default is True
    await t.expire(run)  # nobody answers: the default (True) approves it after 1.5 s
    final = await t.finish(run)
    assert final["stop_reason"] == "end_turn" and final["tool_runs"] == {"d": 1}
    [entry] = final["audit"]
    assert (entry["by"], entry["answer"], entry["expired"]) == ("expiry", True, True)


async def tool_changes_agent_state(t: Trace) -> None:
    calls = [("remember", {"key": "a", "value": "1"}), ("remember", {"key": "old", "value": ""})]
    run = await t.start("stateful", *calls)
    final = await t.finish(run)
    assert final["state"] == {"keep": "me", "a": "1"}


async def sub_agent_questions_travel_up(t: Trace) -> None:
    """A sub-agent (a tool of the lead) asks two questions at once: both reach the top, the
    answers go down, and its finished steps are not redone (its model is asked twice)."""
    run = await t.start("lead", ("touch", {"path": "a"}), ("touch", {"path": "b"}))
    qa, qb = await t.pending(run, 2)
    assert [q.via[0].name for q in (qa, qb)] == ["ops", "ops"]
    assert [q.reason for q in (qa, qb)] == [{"path": "a"}, {"path": "b"}]
    assert t.tool_runs() == {"sub-model": 1}
    assert await t.answer(run, {qa.id: True}, "alice") == ("interrupt", [qb.id])
    assert await t.answer(run, {qb.id: False}, "bob") == ("end_turn", [])
    final = await t.finish(run)
    assert final["tool_runs"] == {"a": 1, "sub-model": 2}
    assert _texts(final) == [("success", "Done.")]
    assert [(e["by"], e["answer"]) for e in final["audit"]] == [("alice", True), ("bob", False)]


SCENARIOS: list[Callable[[Trace], Awaitable[None]]] = [
    before_tool_approve,
    decline,
    after_tool_retry,
    several_answered_partly_then_fully,
    tool_body_interrupts,
    typed_answer_refused,
    deadline_with_default,
    tool_changes_agent_state,
    sub_agent_questions_travel_up,
]


@pytest.fixture(params=["embedded", "temporal"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """Each engine; Temporal's needs the dev server (skipped without it, see conftest)."""
    if request.param == "embedded":
        yield Embedded()
    else:
        yield OnTemporal(request.getfixturevalue("env"))
    agents.RUNS_DIR = None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_same_on_both_engines(
    engine: Engine, scenario: Callable[[Trace], Awaitable[None]], tmp_path: Path
) -> None:
    trace = Trace(engine, tmp_path / engine.name)
    await scenario(trace)
    if engine.name == "embedded":
        return
    reference = Trace(Embedded(), tmp_path / "reference")
    await scenario(reference)
    assert trace.seen == reference.seen
