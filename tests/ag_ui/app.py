"""The App the AG-UI tests serve (``interlude serve --app tests.ag_ui.app:app``).

``payer`` pays after an approval (one call for "pay ana", two at once for "pay ana and bob");
each body run appends ``to cents`` to ``$AGUI_LOG``, then sleeps ``$AGUI_SLOW`` seconds; with
``$AGUI_HOLD`` set, the body writes
that file and then sleeps (a test kills the process there). ``asker`` asks a typed question
(``low`` or ``high``) before restarting a service, with a deadline of ``within`` seconds.
``$AGUI_KEY`` is the agents' signing key (graphs are served too: see graph_app.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Literal

from interlude import Agent, AgentSession, App, Text, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest


@tool(needs_approval=True)
def pay(to: str, cents: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        cents: How much.
    """
    log = os.environ.get("AGUI_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{to} {cents}\n")
    time.sleep(float(os.environ.get("AGUI_SLOW", "0")))
    hold = os.environ.get("AGUI_HOLD")
    if hold:
        Path(hold).write_text("in the body")
        time.sleep(60)
    return f"paid {cents} to {to}"


@tool
def restart(service: str, within: float = 3600.0) -> str:
    """Restart a service.

    Args:
        service: Which.
        within: Seconds to answer in.
    """
    return f"restarted {service}"


def _payer_reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResult)]
    if results:
        return "done: " + "; ".join(r.text for r in results)
    prompt = last.text
    uses = [ToolUse("t1", "pay", {"to": "ana", "cents": 100})]
    if "bob" in prompt:
        uses.append(ToolUse("t2", "pay", {"to": "bob", "cents": 250}))
    return [Text("On it."), *uses]


def _asker_reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResult)]
    if results:
        return "ok: " + results[0].text
    within = 0.2 if "now" in last.text else 3600.0
    return [ToolUse("r1", "restart", {"service": "web", "within": within})]


def _ask_priority(event: BeforeToolCallEvent) -> None:
    within = float(event.tool_use.input.get("within", 3600.0))  # type: ignore[arg-type]
    answer = event.interrupt(
        "priority",
        reason="Which priority?",
        response_type=Literal["low", "high"],
        expires_in=within,
    )
    if answer != "high":
        event.cancel(f"priority {answer}: not now")


def make_app(key: bytes | None = None) -> App:
    """The test App; ``key`` signs the agents' pauses."""
    app = App()

    @app.agent("payer")
    def build_payer(session: AgentSession) -> Agent:
        agent = Agent(
            FunctionModel(_payer_reply),
            tools=[pay],
            name="payer",
            session=session.store,
            session_id=session.id,
            signing_key=key,
        )
        return agent

    @app.agent("asker")
    def build_asker(session: AgentSession) -> Agent:
        agent = Agent(
            FunctionModel(_asker_reply),
            tools=[restart],
            name="asker",
            session=session.store,
            session_id=session.id,
            signing_key=key,
        )
        agent.hooks.add_callback(BeforeToolCallEvent, _ask_priority)
        return agent

    return app


app = make_app(os.environ.get("AGUI_KEY", "").encode() or None)
