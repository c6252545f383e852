"""``Agent(approver=fn)``: a resolver in the process that answers some questions itself.

When a run pauses, the approver is called with each question (sync or async); an answer it
returns is applied as a resume ``by="approver:<name>"`` (checked, audited and saved like any
answer), ``None`` leaves the question to a person. The pause is saved before the approver is
asked, so a crash meanwhile loses nothing: the questions wait in the session as usual. A
question the approver left, or answered, is not put to it again in the same call: its answer
to a question that needs a quorum is one vote, and the run then returns the pause with the
question waiting for the other votes.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .._result import AgentResult

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ._agent import Agent
    from ._loop import Emit

__all__ = ["approver_name", "resolve"]


def approver_name(approver: Any) -> str:
    """How the audit trail names ``approver``: ``approver:<its name>``."""
    name = getattr(approver, "__name__", None) or type(approver).__name__
    return f"approver:{name}"


async def resolve(
    agent: Agent, result: AgentResult, emit: Emit | None, output_type: Any
) -> AgentResult:
    """Let the agent's approver answer what it can of ``result``'s questions, carrying on
    after each round, until the run ends or only questions it leaves to people are pending."""
    from ._answering import bind_output, resume_plan
    from ._running import start

    approver = agent._spec.approver
    left: set[str] = set()
    while approver is not None and result.stop_reason == "interrupt":
        answers: dict[str, JsonValue] = {}
        for question in result.interrupts:
            if question.id in left:
                continue
            answer = approver(question)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None:
                left.add(question.id)
            else:
                answers[question.id] = answer
        if not answers:
            break
        left.update(answers)  # the approver is one voter: a quorum's other votes are people's
        plan = resume_plan(agent, answers, approver_name(approver))
        result = await start(agent, bind_output(plan, output_type), emit)
    return result
