"""One tool call: an agent's session run on a prompt, its questions asked of the caller
through an :class:`Asker` (an MCP form), each answer given to the operator floor, until the
session ends or waits on something this caller cannot answer here.

The door translates and nothing more: the floor (``Operator``) records each answer under its
rules (who may answer, the first answer wins, the answer fits its question, quorum) and makes
the session's next move; a refusal comes back typed and is put on the wire as it is. What
only this door decides is what a form's reply means: ``accept`` is the answer the form gives,
``decline`` declines (``false``, ``{"approve": false}``, ``"fail"`` or ``"decline"``, whichever
the question takes; a question that takes none stays open), ``cancel`` leaves the question
open. A question left open waits in the store for any other door. And only this door's
caller who started a session may prompt it (see ``_owners``): anyone else's prompt is refused,
though they answer its questions as the floor allows.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mcp.types import CallToolResult, ElicitResult, Tool

from .._agent import Agent
from ..errors import (
    AlreadyAnsweredError,
    AnswerValidationError,
    InterludeError,
    NotAllowedToAnswerError,
    NotPausedError,
    ResumeError,
    ResumeInputError,
    SessionError,
    StaleAnswerError,
    UnknownInterruptError,
    refusal_code,
)
from . import _results
from ._forms import Form, decline_of, form_of, message_of
from ._owners import OWNER_KEY, mark, owner_of, starting

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from ..operate import Operator

__all__ = ["AgentCalls", "Asker", "Caller", "InputNeeded", "Memory", "tool_names"]

_log = logging.getLogger("interlude.mcp_serve")
T = TypeVar("T")

MAX_TRIES = 3
"""Replies a question may get refused (not fitting its schema) in one call before it is left
open: the person is asked again each time, with what was wrong."""
MAX_NOTES = 20


@dataclass(frozen=True, slots=True)
class Caller:
    """Who calls the tool: the person answering (``name``, as the audit records it), their
    ``groups`` (None: the operator, whose groups are not checked) and the inbox's URL, for the
    links a result gives (None: not known)."""

    name: str
    groups: tuple[str, ...] | None = ()
    inbox: str | None = None


@dataclass(slots=True)
class Memory:
    """What one tool call keeps between its questions (on the current protocol, between its
    rounds too, in the request state): its session, the questions answered or left in this
    call, the replies refused so far, the question asked in the last round (its digest: a
    reply counts for the question as asked) and the notes for its result."""

    session: str
    asked: dict[str, str] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    tries: dict[str, int] = field(default_factory=dict)
    problem: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "asked": self.asked,
            "done": self.done,
            "tries": self.tries,
            "problem": self.problem,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, data: object) -> Memory:
        """A memory from its JSON (a client's echo of it: checked, as untrusted input)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("session"), str):
            raise ResumeInputError("the request state does not name a session")
        done, tries = data.get("done", []), data.get("tries", {})
        problem, notes = data.get("problem", {}), data.get("notes", [])
        asked = data.get("asked", {})
        if not (
            _texts(asked)
            and isinstance(done, list)
            and all(isinstance(d, str) for d in done)
            and isinstance(tries, dict)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in tries.items())
            and _texts(problem)
            and isinstance(notes, list)
            and all(isinstance(n, str) for n in notes)
        ):
            raise ResumeInputError("the request state is malformed")
        return cls(data["session"], asked, done, tries, problem, notes[:MAX_NOTES])


def _texts(value: object) -> bool:
    """Whether ``value`` maps texts to texts."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


class Refused(ResumeError):
    """A call refused by this door before anything ran (its arguments, a session of another
    agent); ``code`` is the refusal's code on the wire."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InputNeeded(Exception):
    """Raised by an asker that asks by ending the round (the current protocol's input
    required): ``result`` is what the round returns."""

    def __init__(self, result: Any) -> None:
        super().__init__("input required")
        self.result = result


_LEAVE = object()
_AGAIN = object()


class Asker(Protocol):
    """How a call asks its caller a question: the form's reply, or None when it cannot ask
    here (``unable`` says why). An asker that asks by ending the round (the current protocol)
    raises instead, with what the round returns."""

    unable: str

    async def ask(
        self, question: Interrupt, form: Form, message: str, memory: Memory
    ) -> ElicitResult | None: ...


def tool_names(operator: Operator) -> list[str]:
    """The agents served as tools: every agent of the App (graphs and swarms are not)."""
    graphs = set(operator.app.graph_names)
    return [n for n in operator.app.names if n not in graphs]


def _tool(name: str, description: str | None) -> Tool:
    text = description or (
        f"Runs the Interlude agent {name!r} on a prompt. Without session_id a new session is "
        "made (its id is in the result); with one, that session is carried on (only its "
        "starter may prompt it; anyone may answer its questions they may). When the agent "
        "stops to ask a person, the question is asked here as a form when this client can "
        "show one; otherwise the result names the question and where to answer it."
    )
    schema = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "What to ask the agent."},
            "session_id": {
                "type": "string",
                "description": "The session to carry on (from an earlier result: one you "
                "started, or one waiting on questions you may answer); leave it out to start "
                "a new one.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    return Tool(name=name, description=text, input_schema=schema)


class AgentCalls:
    """The tool calls of an App's agents on the floor ``operator``."""

    def __init__(self, operator: Operator, descriptions: Mapping[str, str] | None = None) -> None:
        self.operator = operator
        self.names = tool_names(operator)
        self.descriptions = dict(descriptions or {})
        self._running: set[asyncio.Task[Any]] = set()

    def tools(self) -> list[Tool]:
        return [_tool(n, self.descriptions.get(n)) for n in self.names]

    async def settle(self) -> None:
        """Wait for the runs still under way (their callers went away)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _detached(self, work: Awaitable[T]) -> T:
        """``work``, run by a task of its own: a caller that goes away (its request cancelled)
        stops waiting, not the run, which carries on to its end or its next pause and is
        saved. (A run cut short would be a stopped run, waiting for recovery.)"""
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(_forget(self._running))
        return await asyncio.shield(task)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        caller: Caller,
        asker: Asker,
        memory: Memory | None = None,
    ) -> CallToolResult:
        """Run the call (``memory``: a later round of it, on the current protocol)."""
        session = memory.session if memory is not None else None
        try:
            prompt, given = _arguments(arguments)
            if memory is None:
                memory = Memory(given or uuid.uuid4().hex)
                session = memory.session
                agent = await self._begin(name, prompt, memory, caller)
            else:
                if given is not None and given != memory.session:
                    raise Refused(
                        "invalid_arguments",
                        f"session_id {given!r} is not the session this call carries on "
                        f"({memory.session!r})",
                    )
                agent = await self._open(name, memory.session)
                _settled_meanwhile(agent, memory)
            return await self._loop(name, agent, memory, caller, asker)
        except InputNeeded:
            raise
        except InterludeError as exc:
            return _results.refused(session, exc, refusal_code(exc))
        except Exception:  # a bug, or a model's or tool's own error: logged here
            _log.exception("MCP tool call %r of session %r failed", name, session)
            failed = RuntimeError("the run failed (see the server's log)")
            return _results.refused(session, failed, "internal")

    async def _open(self, name: str, session: str) -> Agent:
        """The agent of ``session``, which must be ``name``'s."""
        from ..sessions import check_session_id

        check_session_id(session)
        if ":node:" in session:
            raise Refused(
                "not_an_agent", f"session {session!r} is a graph node's: its graph carries it on"
            )
        stored = await self.operator.store.load(session)
        if stored is None:
            raise SessionError(f"no session {session!r} in the store")
        if stored.agent != name:
            raise Refused(
                "unknown_agent", f"session {session!r} is agent {stored.agent!r}'s, not {name!r}'s"
            )
        opened = await self.operator.open(session)
        if not isinstance(opened, Agent):
            raise Refused("not_an_agent", f"session {session!r} is not an agent's session")
        return opened

    async def _begin(self, name: str, prompt: str, memory: Memory, caller: Caller) -> Agent:
        """The session after its first move: a new session run on ``prompt``, recorded as
        ``caller``'s; an existing one carried on first when it has something to do (a stopped
        run, answers recorded through another door, questions past their deadline), else run
        on ``prompt`` when it is not paused. The prompt is not sent to a session that was
        carried on or waits, nor to one ``caller`` did not start through this door: such a
        session is refused (``not_yours``, nothing run) unless it is paused, when its
        questions are the caller's to answer as the floor's rules allow."""
        from ..sessions import check_session_id

        session = check_session_id(memory.session)
        if await self.operator.store.load(session) is None:
            view = starting(self.operator.store, session, caller.name)
            opened = await self.operator.app.start_async(name, session, view)
            assert isinstance(opened, Agent)  # tools are agents only
            opened.state[OWNER_KEY] = mark(caller.name)
            await self._detached(opened.invoke_async(prompt))
            return opened
        agent = await self._open(name, session)
        mine = owner_of(agent.state) == caller.name
        if not mine and not agent.is_paused:
            raise _not_yours(session, caller)
        moved = await self._detached(self.operator.carry_on(session))
        if moved is not None:
            memory.note(
                "The session had work waiting (answers given elsewhere, a stopped run or "
                "questions past their deadline), which was carried on first: the prompt was "
                + ("not sent; send it again to go on." if mine else "not sent.")
            )
            return await self._open(name, session)
        if agent.is_paused:
            memory.note("The session waits on its questions: the prompt was not sent.")
            return agent
        if agent.needs_recovery:  # another process runs it now
            return agent
        if not mine:  # (refused above: the prompt goes to the caller's own sessions only)
            raise _not_yours(session, caller)
        await self._detached(agent.invoke_async(prompt))
        return agent

    async def _loop(
        self, name: str, agent: Agent, memory: Memory, caller: Caller, asker: Asker
    ) -> CallToolResult:
        """Ask the caller each question they may answer, one at a time, until the session
        ends or waits on questions left to others."""
        while agent.is_paused:
            question = self._next(agent, memory, caller)
            if question is None:
                return self._paused(agent, memory, caller)
            form = form_of(question)
            problem = memory.problem.get(question.id)
            message = message_of(question, name, memory.session, problem)
            reply = await asker.ask(question, form, message, memory)
            if reply is None:
                memory.note(asker.unable)
                return self._paused(agent, memory, caller)
            answer = self._answer_of(question, form, reply, memory)
            if answer is _LEAVE:
                return self._paused(agent, memory, caller)
            if answer is not _AGAIN:
                agent = await self._give(name, agent, question, answer, memory, caller)
        if agent.needs_recovery:
            return _results.working(memory.session, memory.notes)
        return _results.finished(memory.session, agent.messages, memory.notes)

    def _next(self, agent: Agent, memory: Memory, caller: Caller) -> Interrupt | None:
        """The first question this call has not answered that the caller may answer (the
        floor's rule), or None."""
        from ..operate import check_allowed

        now = self.operator.inbox.clock()
        for question in agent.interrupts:
            if question.id in memory.done:
                continue
            if caller.groups is not None:
                try:
                    check_allowed(
                        {question.id: question},
                        {question.id: None},
                        caller.groups,
                        now,
                        caller.name,
                    )
                except NotAllowedToAnswerError as exc:
                    memory.note(str(exc).replace("; nothing was recorded", ""))
                    memory.done.append(question.id)
                    continue
            return question
        return None

    def _answer_of(
        self, question: Interrupt, form: Form, reply: ElicitResult, memory: Memory
    ) -> JsonValue | object:
        """What the reply answers, or ``_LEAVE`` (nothing: the question stays open) or
        ``_AGAIN`` (a reply that gives no answer: asked again, as a refused one is)."""
        if reply.action == "cancel":
            memory.note(f"The form for {question.name!r} was dismissed: the question stays open.")
            return _LEAVE
        if reply.action == "decline":
            answer = decline_of(question, self.operator.inbox.clock())
            if answer is None:
                memory.note(
                    f"{question.name!r} was declined, but it takes no decline (it must be "
                    "answered): the question stays open."
                )
                return _LEAVE
            return answer
        try:
            return form.answer(reply.content)
        except ValueError as exc:
            return _LEAVE if self._refused(question, str(exc), memory) else _AGAIN

    def _refused(self, question: Interrupt, problem: str, memory: Memory) -> bool:
        """Count a refused reply; True when the question is left open (``MAX_TRIES``)."""
        qid = question.id
        memory.tries[qid] = memory.tries.get(qid, 0) + 1
        memory.problem[qid] = problem
        if memory.tries[qid] < MAX_TRIES:
            return False
        memory.done.append(qid)
        memory.note(f"{question.name!r}: {problem} (asked {MAX_TRIES} times; it stays open)")
        return True

    async def _give(
        self,
        name: str,
        agent: Agent,
        question: Interrupt,
        answer: JsonValue,
        memory: Memory,
        caller: Caller,
    ) -> Agent:
        """Give ``answer`` to the floor, which records it under its rules and carries the
        session on: the session as it stands after. A reply that does not fit is asked again
        (up to ``MAX_TRIES``); a question someone else answered (or that changed) meanwhile is
        passed over; any other refusal ends the call."""
        qid = question.id
        try:
            opened, _ = await self._detached(
                self.operator.answer(
                    memory.session,
                    {qid: answer},
                    by=caller.name,
                    groups=caller.groups,
                    shown={qid: question.digest},
                )
            )
        except AnswerValidationError as exc:
            self._refused(question, str(exc), memory)
            return agent
        except (
            AlreadyAnsweredError,
            StaleAnswerError,
            UnknownInterruptError,
            NotPausedError,
        ) as exc:
            memory.done.append(qid)
            memory.note(f"{question.name!r}: {exc}")
            return await self._open(name, memory.session)
        memory.done.append(qid)
        memory.problem.pop(qid, None)
        assert isinstance(opened, Agent)
        return opened

    def _paused(self, agent: Agent, memory: Memory, caller: Caller) -> CallToolResult:
        from ..operate import who_may_answer

        now = self.operator.inbox.clock()
        questions = [
            _results.question_entry(q, memory.session, may_answer=who_may_answer(q, now), now=now)
            for q in agent.interrupts
        ]
        return _results.paused(memory.session, questions, inbox=caller.inbox, notes=memory.notes)


def _not_yours(session: str, caller: Caller) -> Refused:
    """The refusal of a prompt to a session ``caller`` did not start through this door."""
    return Refused(
        "not_yours",
        f"session {session!r} was not started by {caller.name} through this server: only who "
        "started it may prompt it (its questions may still be answered here while it waits); "
        "leave session_id out to start a session of your own",
    )


def _settled_meanwhile(agent: Agent, memory: Memory) -> None:
    """Note a question asked in the last round that was settled elsewhere before the reply
    came back (the reply is not used: the first answer won)."""
    pending = {q.id for q in agent.interrupts}
    for qid in [q for q in memory.asked if q not in pending]:
        del memory.asked[qid]
        if qid not in memory.done:
            memory.done.append(qid)
            memory.note(f"Question {qid} was settled elsewhere before the reply came: not used.")


def _arguments(arguments: Mapping[str, Any]) -> tuple[str, str | None]:
    """The call's prompt and session id (None: a new session)."""
    extra = set(arguments) - {"prompt", "session_id"}
    if extra:
        raise Refused(
            "invalid_arguments", f"unknown arguments {sorted(extra)!r}: give prompt and session_id"
        )
    prompt, session = arguments.get("prompt"), arguments.get("session_id")
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refused(
            "invalid_arguments", "prompt is the text to send the agent: give a non-empty string"
        )
    if session is not None and (not isinstance(session, str) or not session):
        raise Refused(
            "invalid_arguments", f"session_id is a session's id (a string), got {session!r}"
        )
    return prompt, session


def _forget(running: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """A done-callback that drops a task from ``running`` and logs what it raised when no one
    was left waiting for it."""

    def done(task: asyncio.Task[Any]) -> None:
        running.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not isinstance(exc, InterludeError):
            _log.error("an MCP tool call's run failed", exc_info=exc)

    return done
