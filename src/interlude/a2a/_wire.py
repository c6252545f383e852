"""What an Interlude session looks like as an A2A task, and what an A2A message answers.

A session is one task: the task id and its context id are both the session id, so any process
that reads the store can rebuild the task. A paused session is a task in ``input-required``
whose status message carries the questions in a data part (``{"questions": [...]}``, each
``Interrupt.to_dict()`` plus its ``digest``); answers come back as a data part
``{"answers": {id: value}}`` (optionally ``"shown": {id: digest}``), or as plain text when
exactly one question is pending. A session whose run ended without a reply is ``canceled`` when
the A2A door canceled it (its mark under ``agent.state["interlude.a2a"]``), else ``failed``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import json_format, struct_pb2

from .._interrupt import Interrupt
from ..errors import ResumeInputError

if TYPE_CHECKING:
    from .._agent import Agent
    from .._messages import JsonValue

__all__ = [
    "DOOR_KEY",
    "QUESTIONS_KEY",
    "answers_of",
    "answers_part",
    "data_part",
    "interrupts_of",
    "part_data",
    "task_of",
]

QUESTIONS_KEY = "questions"
ANSWERS_KEY = "answers"
DOOR_KEY = "interlude.a2a"
"""The key of ``agent.state`` under which the A2A door marks a task it canceled
(``{"canceled": {"by": name, "at": time}}``), saved with the save that ends the run."""
_YES = frozenset({"yes", "y", "true", "approve", "approved", "ok"})
_NO = frozenset({"no", "n", "false", "deny", "denied", "reject"})


def data_part(value: JsonValue) -> Part:
    """A part holding JSON ``value`` (an A2A data part)."""
    return Part(
        data=json_format.ParseDict(value, struct_pb2.Value()), media_type="application/json"
    )


def part_data(part: Part) -> JsonValue:
    """The JSON of a data part (numbers that are whole come back as ints: protobuf keeps every
    number as a double)."""
    value: Any = json_format.MessageToDict(part.data)
    return _ints(value)


def _ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def question_dict(question: Interrupt, session_id: str | None = None) -> dict[str, JsonValue]:
    """A question as the task's status message carries it: with the task's ``session_id``,
    its ``id`` is the answer key that names the task (``question_id``: its id there)."""
    out = question.to_dict()
    out["digest"] = question.digest
    if session_id is not None:
        from .._interrupt import answer_key

        out["id"], out["question_id"] = answer_key(session_id, question.id), question.id
    return out


def interrupts_of(status_message: Message) -> list[Interrupt]:
    """The questions a task in ``input-required`` carries (empty when it carries none), each
    under its id in the remote task."""
    for part in status_message.parts:
        if part.HasField("data"):
            data = part_data(part)
            if isinstance(data, dict) and isinstance(data.get(QUESTIONS_KEY), list):
                return [_question(q) for q in data[QUESTIONS_KEY]]
    return []


def _question(data: Any) -> Interrupt:
    if isinstance(data, dict) and isinstance(data.get("question_id"), str):
        data = {k: v for k, v in data.items() if k != "question_id"} | {"id": data["question_id"]}
    return Interrupt.from_dict(data)


def final_text(agent: Agent) -> str:
    """The text of the agent's last reply ("" when it has none)."""
    from .._messages import Text

    for message in reversed(agent.messages):
        if message.role == "assistant":
            return "".join(c.text for c in message.content if isinstance(c, Text))
    return ""


def task_of(agent: Agent, session_id: str) -> Task:
    """The task a session is now: ``input-required`` (paused, with its questions),
    ``working`` (a run under way, or stopped mid-run and waiting to be carried on),
    ``completed`` (its last message is the agent's reply, also the task's artifact),
    ``canceled`` (canceled over A2A), ``failed`` (its run ended without a reply) or
    ``submitted`` (nothing run yet)."""
    status = _status(agent, session_id)
    task = Task(id=session_id, context_id=session_id, status=status)
    if status.state == TaskState.TASK_STATE_COMPLETED:
        text = final_text(agent)
        task.artifacts.append(
            Artifact(artifact_id="result", name="result", parts=[Part(text=text)])
        )
    return task


def _status(agent: Agent, session_id: str) -> TaskStatus:
    def message(*parts: Part) -> Message:
        return Message(
            message_id=f"{session_id}:status:{len(agent.messages)}",
            task_id=session_id,
            context_id=session_id,
            role=Role.ROLE_AGENT,
            parts=list(parts),
        )

    if agent.is_paused:
        questions = agent.interrupts
        summary = "; ".join(_describe(q) for q in questions)
        return TaskStatus(
            state=TaskState.TASK_STATE_INPUT_REQUIRED,
            message=message(
                Part(text=f"Waiting for an answer: {summary}"),
                data_part({QUESTIONS_KEY: [question_dict(q, session_id) for q in questions]}),
            ),
        )
    if agent.needs_recovery or agent.is_running:
        return TaskStatus(
            state=TaskState.TASK_STATE_WORKING,
            message=message(
                Part(
                    text="The run is under way (or stopped mid-run: any message "
                    "on the task carries it on)."
                )
            ),
        )
    if agent.messages and agent.messages[-1].role == "assistant":
        return TaskStatus(
            state=TaskState.TASK_STATE_COMPLETED, message=message(Part(text=final_text(agent)))
        )
    canceled = canceled_by(agent)
    if canceled is not None:
        return TaskStatus(
            state=TaskState.TASK_STATE_CANCELED,
            message=message(Part(text=f"Canceled by {canceled}.")),
        )
    if agent.messages:
        return TaskStatus(
            state=TaskState.TASK_STATE_FAILED,
            message=message(
                Part(text="The run ended without a reply: it failed, or it was stopped.")
            ),
        )
    return TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)


def canceled_by(agent: Agent) -> str | None:
    """Who canceled the session's task over A2A (None: it was not canceled)."""
    mark = agent.state.get(DOOR_KEY)
    canceled = mark.get("canceled") if isinstance(mark, dict) else None
    if not isinstance(canceled, dict):
        return None
    by = canceled.get("by")
    return by if isinstance(by, str) else "someone"


def _describe(question: Interrupt) -> str:
    reason = question.reason if isinstance(question.reason, str) else None
    return f"{question.name} ({reason})" if reason else question.name


def answers_part(message: Message) -> dict[str, Any] | None:
    """The data part ``{"answers": {...}, "shown"?: {...}}`` a message carries, or None."""
    for part in message.parts:
        if part.HasField("data"):
            data = part_data(part)
            if isinstance(data, dict) and isinstance(data.get(ANSWERS_KEY), dict):
                return data
    return None


def answers_of(
    message: Message, pending: list[Interrupt]
) -> tuple[dict[str, JsonValue], dict[str, str] | None]:
    """The answers (and ``shown`` digests) a message gives: a data part ``{"answers": {...}}``,
    or the text of the message when exactly one question is pending (JSON if it parses, yes/no
    for a question that takes a boolean, else the text itself). ResumeInputError when it
    gives none."""
    data = answers_part(message)
    if data is not None:
        shown = data.get("shown")
        if shown is not None and not (
            isinstance(shown, dict) and all(isinstance(v, str) for v in shown.values())
        ):
            raise ResumeInputError(f"shown must map question ids to digests, got {shown!r}")
        return dict(data[ANSWERS_KEY]), shown
    text = "".join(p.text for p in message.parts if p.HasField("text")).strip()
    if text and len(pending) == 1:
        return {pending[0].id: _text_answer(text, pending[0])}, None
    raise ResumeInputError(
        'the message answers nothing: send a data part {"answers": {question id: answer}}'
        + (" (or text, when one question is pending)" if len(pending) != 1 else "")
    )


def _text_answer(text: str, question: Interrupt) -> JsonValue:
    lowered = text.lower()
    if _takes_boolean(question.response_schema):
        if lowered in _YES:
            return True
        if lowered in _NO:
            return False
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


def _takes_boolean(schema: Any) -> bool:
    if schema is None:
        return True
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "boolean":
        return True
    return any(_takes_boolean(s) for s in schema.get("anyOf", ()) if isinstance(s, dict))
