"""The context handed to a tool that asks for it (a parameter annotated ``ToolContext``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, NoReturn

from .._interrupt import Answers, Interrupt, Interrupter, InterruptSource, interrupt_id
from .._messages import JsonValue, ToolUse
from ..errors import InterruptError, InterruptSignal

if TYPE_CHECKING:
    from .._stream import StreamEvent
    from .._view import AgentView

__all__ = ["RelaySignal", "ToolContext", "idempotency_key"]


class RelaySignal(InterruptSignal):
    """Raised by ``ToolContext.relay``: the tool stops with several questions at once."""

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(interrupts[0])
        self.interrupts = interrupts


def idempotency_key(session_id: str | None, agent_name: str | None, tool_use_id: str) -> str:
    """The key of tool call ``tool_use_id`` of that agent's session (see
    ``ToolContext.idempotency_key``)."""
    import hashlib

    text = f"interlude-call\0{session_id or ''}\0{agent_name or ''}\0{tool_use_id}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class ToolContext(Interrupter):
    """What a running tool can see and do: its tool use, the agent, and ``interrupt(...)``.

    A tool that interrupts from its own body is run again from the top on resume, and then
    ``interrupt(name)`` returns the answer. What it sets as :attr:`checkpoint` before stopping
    is kept with the call (in the pause, and so in ``export_state()`` and the session, covered
    by the pause's signature) and given back to it on that re-run.
    """

    __slots__ = (
        "_answers",
        "_callback_index",
        "_checkpoint",
        "_emit",
        "_names",
        "_scope",
        "_taken",
        "agent",
        "tool_use",
    )
    _source: InterruptSource = "tool_call"

    def __init__(
        self,
        tool_use: ToolUse,
        agent: AgentView,
        answers: Answers,
        checkpoint: str | None = None,
        emit: Callable[[StreamEvent], None] | None = None,
    ) -> None:
        self._emit = emit
        self.tool_use = tool_use
        self.agent = agent
        self._answers = answers
        self._scope = tool_use.id
        self._names = None
        self._callback_index = 0
        self._checkpoint = checkpoint
        self._taken: list[str] = []
        """The ids of the relayed answers handed out (each once): the run forgets them."""

    def _interrupt_tool_use(self) -> ToolUse | None:
        return self.tool_use

    @property
    def checkpoint(self) -> JsonValue:
        """JSON data this call kept when it last stopped with a question (None the first
        time). Set it before ``interrupt`` or ``relay`` to keep it for the re-run; it must be
        JSON (InterruptError otherwise). It is dropped once the call finishes."""
        if self._checkpoint is None:
            return None
        import json

        loaded: JsonValue = json.loads(self._checkpoint)
        return loaded

    @checkpoint.setter
    def checkpoint(self, value: JsonValue) -> None:
        import json

        try:
            text = None if value is None else json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InterruptError(
                f"the checkpoint of tool use {self.tool_use.id!r} is not JSON-compatible ({exc})"
            ) from None
        self._checkpoint = text

    @property
    def idempotency_key(self) -> str:
        """A key naming this tool call for good: the same each time its body runs (re-run after
        a question, after a crash and ``recover``, in another process, after "rerun" settles an
        in-doubt call), and different for every other call. Give it to the system the tool acts
        on (a payment API's idempotency key, a unique column) so an effect that already
        happened is not made twice, even when a whole session is put back as it was earlier
        (which no signature can tell). Made from the session id, the agent's name and the
        tool use's id (unique in its conversation)."""
        agent = self.agent
        return idempotency_key(agent.run_session_id, agent.name, self.tool_use.id)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell whoever reads the run's stream how far this call has got (a
        ``ToolCallProgress`` event); nothing happens when no one streams the run."""
        if self._emit is not None:
            from .._stream import ToolCallProgress

            self._emit(ToolCallProgress(self.tool_use, progress, total, message))

    def relayed_id(self, question: Interrupt) -> str:
        """The id ``question`` (asked elsewhere, e.g. by a sub-agent) has once relayed by this
        call: ``interrupt_id("tool_call", <tool use id>, question.id)``."""
        return interrupt_id(self._source, self._scope, question.id)

    def relay(self, questions: Iterable[Interrupt]) -> NoReturn:
        """Stop the tool with questions asked elsewhere (a sub-agent's), all at once.

        Each is asked of the person as it is, under the id :meth:`relayed_id` gives it and with
        this call added in front of its ``via`` (two with one id: InterruptError);
        :meth:`relayed_answers` hands their answers back on the re-run. Keep what the re-run
        needs in :attr:`checkpoint` first."""
        questions = list(questions)
        relayed = [
            replace(q, id=self.relayed_id(q), via=(self.tool_use, *q.via)) for q in questions
        ]
        if not relayed:
            raise InterruptError(f"tool use {self.tool_use.id!r} relayed no questions")
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):  # one answer would settle questions shown apart
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise InterruptError(
                f"tool use {self.tool_use.id!r} relayed several questions with one id "
                f"({', '.join(twice)}); give each question its own id"
            )
        raise RelaySignal(relayed)

    def relayed_answers(self, questions: Iterable[Interrupt]) -> dict[str, JsonValue]:
        """The answers given to these relayed ``questions`` since they were relayed, keyed by
        each question's own id. Each answer is handed out once (a question asked again waits
        for a new answer). A question settled by its deadline is left out: its asker settles
        it by its own deadline (with the default, or as declined)."""
        answers = self._answers
        out: dict[str, JsonValue] = {}
        used: list[str] = []
        for q in questions:
            iid = self.relayed_id(q)
            if iid in self._taken:
                continue
            found, value = answers.lookup(iid, None)
            if iid in answers.expired:
                used.append(iid)
            elif found:
                out[q.id] = value
                used.append(iid)
        self._taken.extend(used)
        return out
