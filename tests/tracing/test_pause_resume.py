"""A paused run's span, the resumed run's link to it (in this process, in a fresh one from an
exported state or from a SQLite session, and after a crash), the trace context in the saved
pause (optional, signed with the pause), and a run without tracing importing nothing of
OpenTelemetry."""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import interlude.otel
from interlude import Agent, ToolUse, tool
from interlude.errors import StateFormatError, StateIntegrityError
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel
from tests.interrupts.helpers_agent import build_agent, turns_from_json
from tests.support.processes import ROOT

from .agent_def import build
from .conftest import Traces

GOLDEN = Path(__file__).parents[1] / "interrupts" / "golden" / "before_tool.json"
KEY = "a signing key of 32 bytes, at least"


def _deploy_turn() -> ScriptedModel:
    return ScriptedModel([[ToolUse("t1", "deploy", {"service": "api"})]])


def _traceparent(span: ReadableSpan) -> str:
    assert span.context is not None
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def _pause_here(traces: Traces, db: str | None = None, key: str | None = None) -> Agent:
    agent = build(_deploy_turn(), db=db, key=key)
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    assert agent("Deploy the api").stop_reason == "interrupt"
    return agent


def _resume_elsewhere(answers: dict[str, Any], **job: Any) -> dict[str, Any]:
    job.update(answers=answers)
    out = subprocess.run(
        [sys.executable, "-m", "tests.tracing.child"],
        cwd=ROOT,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_a_pause_ends_the_span_as_an_interrupt_and_the_resume_links_to_it(
    traces: Traces,
) -> None:
    agent = _pause_here(traces)
    [question] = agent.interrupts
    paused = traces.one("invoke_agent ops")
    attrs = dict(paused.attributes or {})
    assert attrs["interlude.stop_reason"] == "interrupt"
    assert paused.status.status_code is StatusCode.UNSET  # a pause is no error
    [raised] = paused.events
    assert raised.name == "interlude.interrupt.raised"
    assert dict(raised.attributes or {}) == {
        "interlude.interrupt.id": question.id,
        "interlude.interrupt.name": "approve",
        "interlude.interrupt.source": "before_tool_call",
        "gen_ai.tool.name": "deploy",
        "gen_ai.tool.call.id": "t1",
    }
    assert traces.named("execute_tool deploy") == []  # the tool waits for the answer
    # the pause carries the paused span's trace context
    state = agent.export_state()
    pause = state["pause"]
    assert isinstance(pause, dict) and isinstance(pause["progress"], dict)
    assert pause["progress"]["traceparent"] == _traceparent(paused)

    traces.clear()
    agent.model = ScriptedModel(["Deployed."])
    assert str(agent.resume({question.id: True}, by="ana")) == "Deployed."
    resumed = traces.one("invoke_agent ops")
    assert resumed.context is not None and paused.context is not None
    assert resumed.context.span_id != paused.context.span_id
    r = dict(resumed.attributes or {})
    assert r["interlude.run.kind"] == "resume" and r["interlude.stop_reason"] == "end_turn"
    [link] = resumed.links
    assert (link.context.trace_id, link.context.span_id) == (
        paused.context.trace_id,
        paused.context.span_id,
    )
    assert dict(link.attributes or {}) == {"interlude.link": "paused_run"}
    [answered] = resumed.events
    assert answered.name == "interlude.interrupt.answered"
    assert dict(answered.attributes or {}) == {
        "interlude.interrupt.id": question.id,
        "interlude.interrupt.name": "approve",
        "interlude.interrupt.answered_by": "ana",
    }
    # the resumed run's own work hangs under its own span
    tool_span = traces.one("execute_tool deploy")
    assert tool_span.parent is not None and tool_span.parent.span_id == resumed.context.span_id


def test_a_second_pause_links_to_the_run_that_paused_last(traces: Traces) -> None:
    model = ScriptedModel(
        [
            [ToolUse("t1", "deploy", {"service": "a"})],
            [ToolUse("t2", "deploy", {"service": "b"})],
            "both",
        ]
    )
    agent = build(model)
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    first = agent("two deploys")
    second = agent.resume({first.interrupts[0].id: True})
    agent.resume({second.interrupts[0].id: True})
    runs = traces.named("invoke_agent ops")
    assert [dict(s.attributes or {})["interlude.stop_reason"] for s in runs] == [
        "interrupt",
        "interrupt",
        "end_turn",
    ]
    for earlier, later in itertools.pairwise(runs):
        assert earlier.context is not None
        [link] = later.links
        assert link.context.span_id == earlier.context.span_id


def test_a_fresh_process_links_to_the_pause_from_an_exported_state(traces: Traces) -> None:
    agent = _pause_here(traces)
    paused = traces.one("invoke_agent ops")
    state = json.loads(json.dumps(agent.export_state()))
    [question] = agent.interrupts

    out = _resume_elsewhere({question.id: True}, state=state)
    assert out["text"] == "The api is deployed." and out["deployed"] == ["api"]
    [resumed] = [s for s in out["spans"] if s["name"] == "invoke_agent ops"]
    assert paused.context is not None
    assert resumed["links"] == [
        {
            "trace_id": f"{paused.context.trace_id:032x}",
            "span_id": f"{paused.context.span_id:016x}",
            "attributes": {"interlude.link": "paused_run"},
        }
    ]
    assert resumed["attributes"]["interlude.run.kind"] == "resume"
    names = sorted(s["name"] for s in out["spans"])
    assert names == ["chat", "execute_tool deploy", "invoke_agent ops"]


def test_a_fresh_process_links_to_the_pause_stored_in_sqlite(
    traces: Traces, tmp_path: Path
) -> None:
    db = str(tmp_path / "sessions.db")
    agent = _pause_here(traces, db=db)
    paused = traces.one("invoke_agent ops")
    [question] = agent.interrupts
    assert dict(paused.attributes or {})["gen_ai.conversation.id"] == "s-1"

    out = _resume_elsewhere({question.id: True}, db=db)
    assert out["text"] == "The api is deployed."
    [resumed] = [s for s in out["spans"] if s["name"] == "invoke_agent ops"]
    assert paused.context is not None
    [link] = resumed["links"]
    assert link["span_id"] == f"{paused.context.span_id:016x}"
    assert link["trace_id"] == f"{paused.context.trace_id:032x}"
    assert resumed["attributes"]["gen_ai.conversation.id"] == "s-1"


def test_recovery_after_a_crash_links_to_the_run_that_died(traces: Traces, tmp_path: Path) -> None:
    db = str(tmp_path / "sessions.db")
    dying = f"""
import os, signal
from opentelemetry.sdk.trace import TracerProvider
import interlude.otel
from interlude import Agent, ToolUse, tool
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

@tool
def transfer(amount: int) -> str:
    '''Move money.'''
    os.kill(os.getpid(), signal.SIGKILL)

interlude.otel.instrument(tracer_provider=TracerProvider())
model = ScriptedModel([[ToolUse("t1", "transfer", {{"amount": 5}})]])
Agent(model, tools=[transfer], session=SQLiteStore({db!r}), session_id="pay-7")("Pay Ana 5")
"""
    assert subprocess.run([sys.executable, "-c", dying], timeout=120).returncode == -9

    @tool(idempotent=True)
    def transfer(amount: int) -> str:
        """Move money.

        Args:
            amount: How much.
        """
        return f"moved {amount}"

    agent = Agent(
        ScriptedModel(["Ana has her 5."]),
        tools=[transfer],
        session=SQLiteStore(db),
        session_id="pay-7",
    )
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    assert agent.needs_recovery
    journal = agent.export_state()["pause"]  # the journal the dead process left
    assert isinstance(journal, dict) and isinstance(journal["progress"], dict)
    _, trace_id, span_id, _ = str(journal["progress"]["traceparent"]).split("-")
    assert str(agent.recover()) == "Ana has her 5."
    run = traces.one("invoke_agent")
    assert dict(run.attributes or {})["interlude.run.kind"] == "recover"
    [link] = run.links  # to the span of the run that died (its finished spans were exported)
    assert dict(link.attributes or {}) == {"interlude.link": "stopped_run"}
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (trace_id, span_id)
    assert run.context is not None and run.context.trace_id != link.context.trace_id


def test_a_state_without_trace_context_loads_and_resumes_without_a_link(
    traces: Traces,
) -> None:
    agent = _pause_here(traces)
    state = agent.export_state()
    old = copy.deepcopy(state)
    pause = old["pause"]
    assert isinstance(pause, dict) and isinstance(pause["progress"], dict)
    del pause["progress"]["traceparent"]  # as every state saved before tracing reads

    fresh = build(ScriptedModel(["Deployed."]))
    interlude.otel.instrument(fresh, tracer_provider=traces.provider)
    fresh.import_state(old)
    traces.clear()
    fresh.resume({fresh.interrupts[0].id: True})
    resumed = traces.one("invoke_agent ops")
    assert not resumed.links
    assert dict(resumed.attributes or {})["interlude.run.kind"] == "resume"


def test_a_golden_state_of_an_earlier_version_resumes_traced_without_a_link(
    traces: Traces,
) -> None:
    state = json.loads(GOLDEN.read_text())  # saved by version 1, before tracing existed
    agent, *_ = build_agent({"approve": ["lookup"]}, turns_from_json(["done"]))
    interlude.otel.instrument(agent, tracer_provider=traces.provider)
    agent.import_state(state)
    [question] = agent.interrupts
    assert str(agent.resume({question.id: "yes"})) == "done"
    resumed = traces.one("invoke_agent")
    assert not resumed.links
    assert dict(resumed.attributes or {})["interlude.run.kind"] == "resume"
    assert len(traces.named("execute_tool lookup")) == 1


def test_a_run_without_tracing_saves_no_trace_context() -> None:
    agent = build(_deploy_turn())
    agent("Deploy the api")
    pause = agent.export_state()["pause"]
    assert isinstance(pause, dict) and isinstance(pause["progress"], dict)
    assert "traceparent" not in pause["progress"]


def test_the_trace_context_is_covered_by_the_pause_signature(traces: Traces) -> None:
    agent = _pause_here(traces, key=KEY)
    state = agent.export_state()
    pause = state["pause"]
    assert isinstance(pause, dict) and isinstance(pause["progress"], dict)
    assert "signature" in pause and "traceparent" in pause["progress"]
    build(ScriptedModel([]), key=KEY).import_state(copy.deepcopy(state))  # as saved: verifies

    forged = copy.deepcopy(state)
    forged["pause"]["progress"]["traceparent"] = (  # type: ignore[index,call-overload]
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    )
    with pytest.raises(StateIntegrityError):
        build(ScriptedModel([]), key=KEY).import_state(forged)


def test_trace_context_that_is_not_text_is_refused_and_unreadable_text_is_no_link(
    traces: Traces,
) -> None:
    agent = _pause_here(traces)
    state = agent.export_state()

    bad = copy.deepcopy(state)
    bad["pause"]["progress"]["traceparent"] = 42  # type: ignore[index,call-overload]
    with pytest.raises(StateFormatError, match=r"pause\.progress\.traceparent"):
        build(ScriptedModel([])).import_state(bad)

    garbled = copy.deepcopy(state)
    garbled["pause"]["progress"]["traceparent"] = "not-a-traceparent"  # type: ignore[index,call-overload]
    fresh = build(ScriptedModel(["Deployed."]))
    interlude.otel.instrument(fresh, tracer_provider=traces.provider)
    fresh.import_state(garbled)
    traces.clear()
    fresh.resume({fresh.interrupts[0].id: True})
    assert not traces.one("invoke_agent ops").links


def test_with_the_api_alone_nothing_is_recorded_and_no_trace_context_is_saved() -> None:
    code = """
import interlude.otel
from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel

@tool
def deploy(service: str) -> str:
    '''Deploy.'''
    return "ok"

interlude.otel.instrument()  # no TracerProvider configured: the API's no-op one
model = ScriptedModel([[ToolUse("t1", "deploy", {"service": "api"})], "done"])
agent = Agent(model, tools=[deploy])
agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
paused = agent("go")
assert "traceparent" not in agent.export_state()["pause"]["progress"]
assert str(agent.resume({paused.interrupts[0].id: True})) == "done"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_run_without_tracing_imports_nothing_of_opentelemetry(tmp_path: Path) -> None:
    code = f"""
import sys
from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

@tool
def deploy(service: str) -> str:
    '''Deploy.'''
    return "ok"

def make(model):
    agent = Agent(model, tools=[deploy], session=SQLiteStore({str(tmp_path / "s.db")!r}),
                  session_id="s")
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
    return agent

paused = make(ScriptedModel([[ToolUse("t1", "deploy", {{"service": "api"}})]]))("go")
agent = make(ScriptedModel(["done"]))
assert str(agent.resume({{paused.interrupts[0].id: True}})) == "done"
print(sorted(m for m in sys.modules if m.startswith("opentelemetry") or m == "interlude.otel"))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_resume_that_fails_before_getting_anywhere_keeps_the_link_to_the_pause(
    traces: Traces,
) -> None:
    from interlude.hooks import BeforeToolCallEvent

    calls: list[bool] = []

    def flaky(event: BeforeToolCallEvent) -> None:
        calls.append(event.is_replay)
        if len(calls) == 1:  # the first replay fails, before anything ran
            raise RuntimeError("hook store unreachable")

    agent = _pause_here(traces)
    agent.hooks.add_callback(BeforeToolCallEvent, flaky)
    paused = traces.one("invoke_agent ops")
    before = agent.export_state()
    [question] = agent.interrupts
    traces.clear()

    agent.model = ScriptedModel(["Deployed."])
    with pytest.raises(RuntimeError):
        agent.resume({question.id: True})
    failed = traces.one("invoke_agent ops")
    assert failed.status.status_code is StatusCode.ERROR
    assert agent.export_state() == before  # the pause as it was, its trace context included

    traces.clear()
    assert str(agent.resume({question.id: True})) == "Deployed."
    resumed = traces.one("invoke_agent ops")
    assert paused.context is not None and failed.context is not None
    for span in (failed, resumed):
        [link] = span.links
        assert link.context.span_id == paused.context.span_id
