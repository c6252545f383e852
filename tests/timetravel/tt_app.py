"""An App with the time-travel tests' agent, for the CLI (``--app tests.timetravel.tt_app:app``)."""

from __future__ import annotations

from interlude import Agent, AgentSession, App

from .tt_agent import build, reply

app = App()


@app.agent("janitor")
def janitor(session: AgentSession) -> Agent:
    from interlude.testing import FunctionModel

    return build(FunctionModel(reply), session.store, session.id)
