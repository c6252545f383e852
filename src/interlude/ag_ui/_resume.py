"""What a run's input asks, read as the wire says it: the prompt (its newest user message),
the thread's stored session, and the ``resume[]`` entries as the answers the operator floor
takes: the wire's part only.

What only the wire knows is translated here: the answer keys AG-UI shows (each names its
thread; one of another thread is refused, ``unknown_interrupt``), an entry given twice, the
digest a client echoes (``metadata.interlude.digest``, checked by the floor as ``shown``), and
a ``cancelled`` entry (the question's decline; settled by its deadline once that passed). Who
may answer, whether someone answered first and whether the answer fits are the floor's rules,
the same at every door.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._messages import JsonValue
from ..errors import ResumeError, SessionError
from ._translate import METADATA_KEY

if TYPE_CHECKING:
    from ag_ui.core import ResumeEntry, RunAgentInput

    from .._interrupt import Interrupt
    from ..operate import Operator, SessionView

__all__ = ["Refused", "Resume", "prompt_of", "resume_of", "stored_view"]


class Refused(ResumeError):
    """A run's input refused before anything ran; ``code`` is the RUN_ERROR code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Resume:
    """What a run's ``resume[]`` asks of the agent: the answers (``cancelled`` entries as
    their question's decline), the digests the client echoed, and the ids cancelled after
    their deadline (settled by expiry, with their default or as declined)."""

    answers: dict[str, JsonValue] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)
    expired: list[str] = field(default_factory=list)


def resume_of(
    thread: str, entries: Sequence[ResumeEntry], pending: Iterable[Interrupt], now: float
) -> Resume:
    """The answers ``entries`` give for thread ``thread``, or a refusal (:class:`Refused`, or
    UnknownInterruptError for a key of another thread's question)."""
    from ..operate import question_id_of

    asked = {q.id: q for q in pending}
    seen: set[str] = set()
    out = Resume()
    for entry in entries:
        key = question_id_of(thread, entry.interrupt_id)
        if key in seen:
            raise Refused("duplicate", f"interrupt {key!r} is answered twice in resume[]")
        seen.add(key)
        question = asked.get(key)
        digest = _digest(entry.metadata)
        if digest is not None:
            out.shown[key] = digest
        if entry.status != "cancelled":
            out.answers[key] = entry.payload
        elif question is None:
            out.answers[key] = False  # the floor says why it cannot be answered
        elif question.expires_at is not None and question.expires_at <= now:
            out.expired.append(key)  # settled by its deadline in the same resume
            out.shown.pop(key, None)
        else:
            out.answers[key] = _decline(question, now)
    return out


def _digest(metadata: Mapping[str, Any] | None) -> str | None:
    """The digest a client echoed in an entry's ``metadata.interlude.digest``, if any."""
    ours = (metadata or {}).get(METADATA_KEY)
    if not isinstance(ours, Mapping):
        return None
    digest = ours.get("digest")
    if digest is not None and not isinstance(digest, str):
        raise Refused("invalid_resume", f"metadata.{METADATA_KEY}.digest is text, got {digest!r}")
    return digest


def _decline(question: Interrupt, now: float) -> JsonValue:
    """The answer that declines ``question`` (``"fail"`` for an in-doubt call, else ``False``
    or ``{"approve": false}``, whichever its response type takes)."""
    from .._agent import check_answers
    from ..errors import AnswerValidationError, ResumeInputError

    candidates: list[JsonValue] = ["fail"] if question.source == "in_doubt" else []
    candidates += [False, {"approve": False}]
    for value in candidates:
        try:
            check_answers({question.id: question}, {question.id: value}, now)
        except (AnswerValidationError, ResumeInputError):
            continue
        return value
    raise Refused(
        "invalid_answer",
        f"question {question.name!r} ({question.id}) cannot be cancelled: its response type "
        'takes no decline (false or {"approve": false}); answer it instead',
    )


async def stored_view(operator: Operator, name: str, run: RunAgentInput) -> SessionView | None:
    """The thread's stored session as the inbox reads it (None: there is none, and the run
    is not a resume), refused when it belongs to another name than ``name``."""
    thread = run.thread_id
    try:
        view: SessionView | None = await operator.inbox.session_async(thread)
    except SessionError as exc:
        if type(exc) is not SessionError:  # corrupt, unavailable, a bad id: not "none"
            raise
        view = None
    if view is None:
        if run.resume:
            raise Refused("not_paused", f"thread {thread!r} has no run to resume")
    elif view.agent != name:
        raise Refused(
            "unknown_agent", f"thread {thread!r} is agent {view.agent!r}'s, not {name!r}'s"
        )
    return view


def prompt_of(run: RunAgentInput) -> str:
    """The text of the input's newest message, which must be a user message."""
    if not run.messages or run.messages[-1].role != "user":
        raise Refused(
            "no_prompt",
            "a new run needs a user message last in messages (the thread's session holds "
            "the conversation: only the newest message is read)",
        )
    content: Any = run.messages[-1].content
    if isinstance(content, str):
        text = content
    else:
        text = "".join(getattr(part, "text", "") or "" for part in content or [])
    if not text.strip():
        raise Refused("no_prompt", "the newest user message has no text")
    return text
