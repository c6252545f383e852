"""A user's own application, for ``interlude answer --app user_agent:app``.

``app`` registers one agent, ``"user"``: it emails Ana, then Bob; a before-tool hook asks a
person before every email. Its sessions record the name ``"user"``, which the CLI's built-in
demo app does not have, so resuming one needs ``--app user_agent:app``.

A test copies this file into the folder a command runs in, as a user's own module lies in
theirs, and starts a session of it with ``running.start_user_session`` (it pauses on the
first email). With $USER_AGENT_OUTBOX set, each sent email is appended to that file as a
line of JSON (proof that the tool ran, and how often); with $USER_AGENT_DIE_AFTER_SENDING set,
the process kills itself right after sending; with $USER_AGENT_SIGNING_KEY set, the agent
signs its pauses with that key (and checks them).
"""

from __future__ import annotations

import json
import os

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

PROMPT = "Tell Ana and Bob that the report is ready."
RECIPIENTS = ["ana@example.com", "bob@example.com"]


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email (simulated).

    Args:
        to: The recipient.
        subject: The subject line.
    """
    outbox = os.environ.get("USER_AGENT_OUTBOX")
    if outbox:
        with open(outbox, "a", encoding="utf-8") as f:
            f.write(json.dumps({"to": to, "subject": subject, "pid": os.getpid()}) + "\n")
    if os.environ.get("USER_AGENT_DIE_AFTER_SENDING"):  # the process dies mid-call
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    return f"sent to {to}"


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    """Email each recipient in turn, then report."""
    sent = 0
    declined: list[str] = []
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolResult):
                if block.status == "success":
                    sent += 1
                else:
                    declined.append(block.text)
    done = sent + len(declined)
    if done < len(RECIPIENTS):
        return [
            ToolUse(
                f"call_email_{done}",
                "send_email",
                {"to": RECIPIENTS[done], "subject": "The report is ready"},
            )
        ]
    if declined:
        return f"Sent {sent} email(s); not sent: {'; '.join(declined)}"
    return f"Sent {sent} emails: Ana and Bob know the report is ready."


def _confirm_emails(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name != "send_email":
        return
    answer = event.interrupt("confirm_send", reason={"to": event.tool_use.input["to"]})
    if answer is not True:
        event.cancel(f"declined by a person: {answer!r}")


app = App()


@app.agent("user")
def build(session: AgentSession) -> Agent:
    """The factory ``interlude answer --app user_agent:app`` calls for agent ``"user"``."""
    agent = Agent(
        FunctionModel(_reply),
        tools=[send_email],
        system_prompt="You send emails for the team.",
        session=session.store,
        session_id=session.id,
        signing_key=os.environ.get("USER_AGENT_SIGNING_KEY", "").encode() or None,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _confirm_emails)
    return agent
