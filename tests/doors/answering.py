"""One answer through any door, read back the same way: was it taken, and with what refusal
code (the inbox's ``code`` body field, AG-UI's RUN_ERROR ``code``, A2A's ``error.data.code``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .served import a2a_code, a2a_send, agui_entry, agui_run, inbox_answer

DOORS = ["inbox", "ag-ui", "a2a"]


@dataclass(frozen=True)
class Outcome:
    door: str
    taken: bool
    """The door accepted the answer (inbox: 202 recorded; AG-UI: the run went on to
    RUN_FINISHED; A2A: a task, not an error)."""
    code: str | None
    """The refusal code the door gave (None: it gave none)."""
    raw: Any

    def __str__(self) -> str:
        return f"{self.door}: taken={self.taken} code={self.code} ({str(self.raw)[:300]})"


def answer_via(
    door: str, url: str, token: str, agent: str, session: str, answers: dict[str, Any]
) -> Outcome:
    """``answers`` to ``session`` (of ``agent``) through ``door`` as the bearer of ``token``."""
    if door == "inbox":
        response = inbox_answer(url, token, session, answers)
        body = response.json() if response.content else {}
        code = body.get("code") if isinstance(body, dict) else None
        return Outcome(door, response.status_code == 202, code, (response.status_code, body))
    if door == "ag-ui":
        entries = [agui_entry(iid, value) for iid, value in answers.items()]
        events = agui_run(url, token, agent, session, resume=entries)
        last = events[-1]
        taken = last["type"] == "RUN_FINISHED"
        return Outcome(door, taken, None if taken else last.get("code"), last)
    if door == "a2a":
        reply = a2a_send(url, token, agent, data={"answers": answers}, task_id=session)
        return Outcome(door, "result" in reply, a2a_code(reply), reply)
    raise AssertionError(f"no door {door!r}")


def pause(store_url: str, agent: str, session: str) -> str:
    """Start ``session`` of ``agent`` in this process (its prompt is the session id, its tag)
    and run it to its one question: that question's id."""
    from .doors_app import app

    opened = app.start(agent, session, store_url)
    try:
        result = opened(session)  # type: ignore[operator]
        assert result.stop_reason == "interrupt", result.stop_reason
        (question,) = result.interrupts
        return str(question.id)
    finally:
        opened.close()  # type: ignore[union-attr]
