"""One policy over an agent's calls: allow, ask and deny with the audit trail behind each, the
strictest of a policy, a tool's flag and a hook, a rule's approvers, quorum and deadline,
shadow policies, sub-agents, apps and graph nodes, and sessions resumed in a fresh agent."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.multiagent import Graph
from interlude.policy import Policy, PolicyCall, Rule
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

EXECUTORS = ["concurrent", "sequential"]

POLICY = Policy(
    [
        Rule(tool="pay", when="input.amount > 100", then="ask", approvers=["finance"]),
        Rule(tool="pay", then="allow"),
        Rule(tool="delete_*", then="deny", note="deleting is done by hand"),
    ],
    version="v1",
)


class Tools:
    """pay, delete_all and lookup, counting their runs."""

    def __init__(self, needs_approval: bool = False) -> None:
        self.ran: list[tuple[str, Any]] = []

        @tool(needs_approval=needs_approval)
        def pay(amount: int) -> str:
            """Pay an amount."""
            self.ran.append(("pay", amount))
            return f"paid {amount}"

        @tool
        def delete_all() -> str:
            """Delete everything."""
            self.ran.append(("delete_all", None))
            return "deleted"

        @tool
        def lookup(name: str) -> str:
            """Look a name up."""
            self.ran.append(("lookup", name))
            return f"{name} is here"

        self.all = [pay, delete_all, lookup]


def results(agent: Agent) -> dict[str, tuple[str, str]]:
    return {
        b.tool_use_id: (b.status, "".join(getattr(c, "text", "") for c in b.content))
        for m in agent.messages
        for b in m.content
        if isinstance(b, ToolResult)
    }


def decisions(agent: Agent) -> list[tuple[str, Any, Any]]:
    """(tool, then, rule) of each policy entry in the audit trail, in order."""
    out = []
    for e in agent.audit:
        if e.name == "policy":
            assert isinstance(e.answer, Mapping)
            out.append((e.tool, e.answer.get("then"), e.answer.get("rule")))
    return out


@pytest.mark.parametrize("executor", EXECUTORS)
def test_allow_ask_deny_and_the_default_each_do_what_they_say(executor: str) -> None:
    tools = Tools()
    agent = Agent(
        ScriptedModel(
            [
                [ToolUse("t1", "pay", {"amount": 5}), ToolUse("t2", "delete_all", {})],
                [ToolUse("t3", "pay", {"amount": 500}), ToolUse("t4", "lookup", {"name": "x"})],
                "done",
            ]
        ),
        tools=tools.all,
        tool_executor=executor,
        policy=POLICY,
    )
    result = agent("go")
    assert tools.ran == [("pay", 5)]  # allowed: ran; denied: not run, nobody asked
    asked: dict[str, Any] = {}
    while result.stop_reason == "interrupt":  # (sequential: one question at a time)
        now = {q.tool_use.name: q for q in result.interrupts if q.tool_use is not None}
        asked.update(now)
        result = agent.resume({q.id: name == "pay" for name, q in now.items()})
    assert str(result) == "done"
    assert set(asked) == {"pay", "lookup"}  # a rule's ask, and the default ask
    assert asked["pay"].approvers == ("finance",) and asked["lookup"].approvers == ()
    assert asked["pay"].reason["policy"]["rule"] == 0
    assert asked["lookup"].reason["policy"]["rule"] is None  # the default
    status, text = results(agent)["t2"]
    assert status == "error" and "denied by policy v1" in text and "by hand" in text
    assert tools.ran == [("pay", 5), ("pay", 500)]
    assert results(agent)["t4"][0] == "error"  # declined by a person
    assert decisions(agent)[:2] == [("pay", "allow", 1), ("delete_all", "deny", 2)]
    assert sorted(decisions(agent)[2:], key=str) == [("lookup", "ask", None), ("pay", "ask", 0)]
    versions = {e.answer["policy"] for e in agent.audit if e.name == "policy"}  # type: ignore[index]
    assert versions == {"v1"}
    answered = [(e.tool, e.answer) for e in agent.audit if e.name == "approval"]
    assert sorted(answered, key=str) == [("lookup", False), ("pay", True)]


def test_a_condition_that_fails_asks_and_the_audit_says_why() -> None:
    tools = Tools()
    policy = Policy([Rule(tool="pay", when="input.limit > 3", then="allow")], default="deny")
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "pay", {"amount": 1})], "ok"]),
        tools=tools.all,
        policy=policy,
    )
    paused = agent("go")
    [question] = paused.interrupts
    assert tools.ran == []
    [entry] = [e for e in agent.audit if e.name == "policy"]
    assert entry.answer["then"] == "ask" and "no field 'limit'" in entry.answer["why"]  # type: ignore[index]
    assert question.reason["policy"]["why"] == entry.answer["why"]  # type: ignore[index]
    agent.resume({question.id: True})
    assert tools.ran == [("pay", 1)]


def test_deny_beats_a_hook_and_no_hook_asks_about_a_denied_call() -> None:
    tools = Tools()
    seen: list[str] = []

    def ask_first(event: BeforeToolCallEvent) -> None:
        seen.append(event.tool_use.name)
        if event.interrupt("sure?") is not True:
            event.cancel("no")

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "delete_all", {})], "ok"]),
        tools=tools.all,
        policy=POLICY,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, ask_first)
    result = agent("go")
    assert result.stop_reason == "end_turn" and seen == [] and tools.ran == []
    assert "denied by policy" in results(agent)["t1"][1]


def test_a_hook_still_asks_about_a_call_the_policy_allows() -> None:
    tools = Tools()

    def ask_first(event: BeforeToolCallEvent) -> None:
        if event.interrupt("sure?") is not True:
            event.cancel("no")

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "pay", {"amount": 5})], "ok"]),
        tools=tools.all,
        policy=POLICY,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, ask_first)
    [question] = agent("go").interrupts
    assert question.name == "sure?" and tools.ran == []
    agent.resume({question.id: True})
    assert tools.ran == [("pay", 5)]
    assert decisions(agent) == [("pay", "allow", 1)]  # recorded once


def test_a_tools_own_flag_still_asks_where_the_policy_allows() -> None:
    tools = Tools(needs_approval=True)
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "pay", {"amount": 5})], "ok"]),
        tools=tools.all,
        policy=POLICY,
    )
    [question] = agent("go").interrupts
    assert question.name == "approval" and question.reason["policy"]["then"] == "allow"  # type: ignore[index]
    assert tools.ran == []
    agent.resume({question.id: False})
    assert tools.ran == [] and results(agent)["t1"][0] == "error"


def test_a_rules_quorum_and_deadline_apply_to_its_question() -> None:
    now = [1000.0]
    tools = Tools()
    policy = Policy([Rule(tool="pay", then="ask", approvers=["finance"], quorum=2, expires_in=60)])

    def make() -> Agent:
        return Agent(
            ScriptedModel([[ToolUse("t1", "pay", {"amount": 9})], "ok"]),
            tools=tools.all,
            policy=policy,
            clock=lambda: now[0],
        )

    agent = make()
    [question] = agent("go").interrupts
    assert (question.quorum, question.approvers, question.expires_at) == (2, ("finance",), 1060)
    still = agent.resume({question.id: True}, by="ana")
    assert still.stop_reason == "interrupt" and tools.ran == []
    agent.resume({question.id: True}, by="bo")
    assert tools.ran == [("pay", 9)]

    late = make()
    [question] = late("go").interrupts
    now[0] = 1061.0  # unanswered past its deadline: declined
    late.resume_expired()
    assert tools.ran == [("pay", 9)] and results(late)["t1"][0] == "error"


def test_a_remembered_decision_answers_a_policy_question() -> None:
    tools = Tools()
    policy = Policy([Rule(tool="pay", then="ask")])
    agent = Agent(
        ScriptedModel(
            [[ToolUse("t1", "pay", {"amount": 1})], [ToolUse("t2", "pay", {"amount": 2})], "ok"]
        ),
        tools=tools.all,
        policy=policy,
    )
    [question] = agent("go").interrupts
    done = agent.resume({question.id: {"approve": True, "remember": "run"}})
    assert str(done) == "ok" and tools.ran == [("pay", 1), ("pay", 2)]


def test_a_shadow_policy_is_recorded_and_never_acted_on() -> None:
    tools = Tools()
    everything_denied = Policy([Rule(tool="*", then="deny")], version="candidate")
    agent = Agent(
        ScriptedModel(
            [[ToolUse("t1", "pay", {"amount": 5}), ToolUse("t2", "pay", {"amount": 500})], "ok"]
        ),
        tools=tools.all,
        policy=POLICY,
        shadow=everything_denied,
    )
    [question] = agent("go").interrupts
    assert question.reason["shadow"] == {  # type: ignore[index]
        "then": "deny",
        "rule": 0,
        "rule_text": 'tool="*" then="deny"',
        "policy": "candidate",
    }
    agent.resume({question.id: True})
    assert sorted(tools.ran) == [("pay", 5), ("pay", 500)]  # the shadow changed nothing
    shadows = [e.answer["shadow"]["then"] for e in agent.audit if e.name == "policy"]  # type: ignore[index]
    assert shadows == ["deny", "deny"]


def test_a_shadow_alone_beside_the_tools_own_flags() -> None:
    tools = Tools()
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "lookup", {"name": "a"})], "ok"]),
        tools=tools.all,
        shadow=Policy([Rule(tool="lookup", then="ask")], version="c2"),
    )
    assert str(agent("go")) == "ok" and tools.ran == [("lookup", "a")]  # nobody asked
    [entry] = [e for e in agent.audit if e.name == "policy"]
    assert "then" not in entry.answer and entry.answer["shadow"]["then"] == "ask"  # type: ignore[index, operator]


def test_a_sub_agent_works_under_its_callers_policy() -> None:
    tools = Tools()
    worker = Agent(
        ScriptedModel([[ToolUse("w1", "delete_all", {})], "could not delete"] * 2),
        tools=tools.all,
        name="cleaner",
    )
    seen: list[PolicyCall] = []

    def watch(call: PolicyCall) -> bool:
        seen.append(call)
        return False

    policy = Policy([Rule(tool="*", when=watch, then="deny"), *POLICY.rules], default="allow")
    boss = Agent(
        ScriptedModel([[ToolUse("b1", "cleaner", {"prompt": "clean"})], "reported"]),
        tools=[worker.as_tool()],
        name="boss",
        policy=policy,
    )
    assert str(boss("go")) == "reported"
    assert tools.ran == []  # the sub-agent's delete was denied by the caller's policy
    assert [(c.tool, c.source, c.path) for c in seen] == [
        ("cleaner", "agent:cleaner", ("boss",)),
        ("delete_all", "local", ("boss", "cleaner")),
    ]
    assert worker.policy is None  # the template is not changed


def test_a_paused_policy_question_resumes_in_a_fresh_agent(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    tools = Tools()

    def make(turns: list[Any]) -> Agent:
        return Agent(
            ScriptedModel(turns), tools=tools.all, policy=POLICY, session=store, session_id="s"
        )

    first = make([[ToolUse("t1", "pay", {"amount": 5}), ToolUse("t2", "pay", {"amount": 900})]])
    [question] = first("go").interrupts
    assert tools.ran == [("pay", 5)]
    fresh = make(["done"])
    assert str(fresh.resume({question.id: True})) == "done"
    assert sorted(tools.ran) == [("pay", 5), ("pay", 900)]
    assert sorted(decisions(fresh), key=str) == [("pay", "allow", 1), ("pay", "ask", 0)]
    trail = [e["name"] for e in __import__("asyncio").run(store.audit_trail("s"))]
    assert trail.count("policy") == 2 and trail.count("approval") == 1
    store.close()


def test_a_policy_that_now_denies_beats_an_answer_given_before() -> None:
    tools = Tools()
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "pay", {"amount": 500})], "ok"]),
        tools=tools.all,
        policy=POLICY,
    )
    [question] = agent("go").interrupts
    agent.policy = Policy([Rule(tool="pay", then="deny", note="payments are frozen")])
    agent.resume({question.id: True})
    assert tools.ran == [] and "payments are frozen" in results(agent)["t1"][1]


def test_an_app_puts_its_agents_and_graph_nodes_under_its_policy(tmp_path: Path) -> None:
    tools = Tools()
    app = App(policy=POLICY)

    @app.agent("payer")
    def build(session: AgentSession) -> Agent:
        return Agent(
            ScriptedModel([[ToolUse("t1", "delete_all", {})], "ok"]),
            tools=tools.all,
            session=session.store,
            session_id=session.id,
        )

    @app.graph("flow")
    def build_flow(session: AgentSession) -> Graph:
        return Graph(
            {
                "a": Agent(
                    ScriptedModel([[ToolUse("g1", "delete_all", {})], "a done"]), tools=tools.all
                )
            },
            [],
            entry="a",
            session=session.store,
            session_id=session.id,
        )

    url = f"sqlite:///{tmp_path / 'app.db'}"
    agent = app.start("payer", "p1", url)
    assert isinstance(agent, Agent) and agent.policy is POLICY
    agent("go")
    graph = app.start("flow", "f1", url)
    graph("go")
    assert tools.ran == []  # denied in the agent and in the graph's node
    node = graph.nodes["a"].agent  # type: ignore[union-attr]
    assert node.policy is POLICY
    assert "denied by policy" in results(node)["g1"][1]
