"""One answer through any door, read back the same way: was it taken, and with what refusal
code (the inbox's ``code`` body field, AG-UI's RUN_ERROR ``code``, A2A's ``error.data.code``,
the code of the error the library raises, ``errors.refusal_code``; the command's ``--json``
error document, ``code`` if it gives one)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .served import TOKENS, a2a_code, a2a_send, agui_entry, agui_run, inbox_answer, interlude

DOORS = ["inbox", "ag-ui", "a2a"]
"""The doors ``interlude serve`` opens (a token, its person's groups)."""
OPERATOR_DOORS = ["cli", "resume"]
"""The operator's doors on the same store, which know no groups: ``interlude answer SESSION
ID JSON --by NAME`` in a subprocess, and ``App.open(session, store).resume(...)`` in the test
process."""
ALL_DOORS = DOORS + OPERATOR_DOORS

CLI_SAYS = {
    "already_answered": "the first answer wins",
    "invalid_answer": "the tool refuses",
    "unknown_interrupt": "is a question of session",
}
"""What the command's error says for a refusal code, while its ``--json`` error document
gives no code (``{"error", "session"}`` only): the gap :func:`check_refused` falls back on."""


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
        return f"{self.door}: taken={self.taken} code={self.code} ({str(self.raw)[:600]})"


def answer_via(
    door: str,
    url: str,
    token: str,
    agent: str,
    session: str,
    answers: dict[str, Any],
    *,
    store_url: str = "",
) -> Outcome:
    """``answers`` to ``session`` (of ``agent``) through ``door`` as the bearer of ``token``
    (the operator doors answer as its person's name, on ``store_url``)."""
    if door in OPERATOR_DOORS:
        assert store_url, f"the {door} door answers on a store: give store_url"
        return _operator_answer(door, store_url, str(TOKENS[token]["name"]), session, answers)
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


def _operator_answer(
    door: str, store_url: str, by: str, session: str, answers: dict[str, Any]
) -> Outcome:
    if door == "cli":
        ((iid, value),) = answers.items()  # the command answers one question
        ran = interlude(store_url, "answer", session, iid, json.dumps(value), "--by", by)
        try:
            doc = json.loads(ran.stdout)
        except ValueError:
            doc = None
        code = doc.get("code") if isinstance(doc, dict) and ran.returncode != 0 else None
        return Outcome(door, ran.returncode == 0, code, (ran.returncode, doc, ran.stderr))
    if door == "resume":
        from interlude.errors import refusal_code

        from .doors_app import app

        opened = app.open(session, store_url)
        try:
            result = opened.resume(answers, by=by)
        except Exception as exc:  # a refusal: its code, as every door gives it
            return Outcome(door, False, refusal_code(exc), repr(exc))
        finally:
            opened.close()  # type: ignore[union-attr]
        return Outcome(door, True, None, result.stop_reason)
    raise AssertionError(f"no door {door!r}")


def check_refused(refused: Outcome, code: str) -> None:
    """``refused`` was not taken, with refusal ``code``. The command's ``--json`` error gives
    no code (a gap, reported): for it, a failed exit and the message that code goes with."""
    if refused.door == "cli" and refused.code is None:
        returncode, doc, stderr = refused.raw
        assert returncode == 1 and isinstance(doc, dict), str(refused)
        assert CLI_SAYS[code] in doc["error"], f"not a {code} refusal: {refused}"
        assert "Traceback" not in stderr, str(refused)
        return
    assert (refused.taken, refused.code) == (False, code), str(refused)


A = TypeVar("A")
B = TypeVar("B")


def at_once(first: Callable[[], A], second: Callable[[], B], lead: float) -> tuple[A, B]:
    """``first()`` and ``second()`` in two threads released together, ``first`` ``lead``
    seconds later (negative: sooner) than ``second``; their results (an exception in either
    is raised here)."""
    start = threading.Barrier(2)
    got: dict[str, Any] = {}

    def run(key: str, send: Callable[[], Any], delay: float) -> Callable[[], None]:
        def go() -> None:
            try:
                start.wait()
                time.sleep(delay)
                got[key] = send()
            except BaseException as exc:  # re-raised below, in the caller's thread
                got[f"{key} failed"] = exc

        return go

    threads = [
        threading.Thread(target=run("first", first, max(lead, 0.0))),
        threading.Thread(target=run("second", second, max(-lead, 0.0))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for key in ("first failed", "second failed"):
        if key in got:
            raise got[key]
    return got["first"], got["second"]


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
