"""Where a run starts: a new prompt, or answers to the pending questions.

Every answer is checked before a resume changes anything: it must name a pending question, be
plain JSON, fit the question's response type (its stored JSON Schema, so the process that
resumes need not know the type) and come before the question's deadline. The first problem is
raised as a ResumeError subclass naming the question (and the field); then nothing has changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._interrupt import EXPIRY, Interrupt
from .._messages import Image, JsonValue, Message, Reasoning, Text, ToolResult, ToolUse
from ..errors import (
    AgentPausedError,
    AnswerValidationError,
    InterruptExpiredError,
    NotPausedError,
    ResumeInputError,
    StaleAnswerError,
    UnknownInterruptError,
)
from ._state import BeforeInvocation, Progress, Step

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from ._agent import Agent, Prompt

__all__ = [
    "Plan",
    "bind_output",
    "check_answers",
    "check_by",
    "declines",
    "person_key",
    "same_person",
    "prompt_plan",
    "resume_plan",
    "vote_problem",
]

Plan = tuple[Step, Progress, bool, list["AuditEntry"]]
"""Where a run starts: the step, the progress, whether it replays a pause, and the audit
entries of the answers it applies (recorded once the run starts)."""


def prompt_plan(agent: Agent, prompt: Prompt) -> Plan:
    """Where a run of ``prompt`` starts (the list form of answers resumes the pause)."""
    if _is_answer_list(prompt):
        return resume_plan(agent, _answers_from_list(prompt), None)  # type: ignore[arg-type]
    position = agent._state.position
    if position is not None and not position.interrupts:
        if agent._session is not None:
            agent._session.check_not_running()
        raise AgentPausedError(
            "the agent holds a run that stopped before it finished (its process ended); "
            "carry it on with recover(), or call discard_pause() first"
        )
    if position is not None:
        asked = position.interrupts
        raise AgentPausedError(
            f"the agent is paused with {len(asked)} pending interrupt(s) "
            f"({', '.join(repr(i.name) for i in asked)}); answer them with "
            "resume({interrupt_id: answer}) or call discard_pause() first"
        )
    link = agent._session
    if link is not None and link.claim is not None:  # closed by a move: say where it went
        _check_not_moved(agent)
    return BeforeInvocation(_prompt_message(prompt)), Progress(), False, []


def resume_plan(
    agent: Agent,
    answers: Mapping[str, JsonValue],
    by: str | None,
    shown: Mapping[str, str] | None = None,
    *,
    expiry_only: bool = False,
    message: str | None = None,
    relayed: bool = False,
) -> Plan:
    """Where a resume of the paused ``agent`` starts, every answer checked first (see
    :meth:`Agent.resume_async`); ``expiry_only`` settles only the expired questions."""
    pause = agent._state.position
    if pause is not None and not pause.interrupts and agent._session is not None:
        agent._session.check_not_running()  # loaded mid-run: say who runs it
    if isinstance(answers, Mapping) and agent.session_id is not None:
        answers = _by_question_id(agent.session_id, answers)  # the keys doors show
    if isinstance(answers, Mapping):
        _check_answered_before(agent, answers, pause)
    if pause is None or not pause.interrupts:
        _check_not_moved(agent)  # closed by a move: say where it went
        raise NotPausedError(
            "the agent is not paused; there is nothing to resume"
            + (" (it holds a stopped run: carry it on with recover())" if pause else "")
        )
    if not isinstance(answers, Mapping):
        raise ResumeInputError(
            f"resume() takes a map of interrupt id to answer, got {type(answers).__name__}"
        )
    if by is not None and not expiry_only:
        by = check_by(by)
    if not answers and not expiry_only:
        raise ResumeInputError("resume() got no answers; answer at least one interrupt")
    if message is not None and (not isinstance(message, str) or not message.strip()):
        raise ResumeInputError(
            f"message= is text the model is sent with the answers, got {message!r:.80}"
        )
    now = agent.clock()
    asked = {i.id: i for i in pause.interrupts}
    check_answers(asked, answers, now, shown)
    _check_edits(agent, asked, answers)
    expired = [
        i
        for i in pause.interrupts
        if i.id not in answers and i.expires_at is not None and i.expires_at <= now
    ]
    if expiry_only and not expired:
        deadlines = [i.expires_at for i in pause.interrupts if i.expires_at is not None]
        raise ResumeInputError(
            "no pending interrupt has expired"
            + (f" (the next deadline is in {min(deadlines) - now:.0f} s)" if deadlines else "")
        )
    from .._audit import AuditEntry, chained  # (with the first answer: a light import)

    p = pause.progress
    if relayed:  # a sub-agent's copy: its caller counted the votes, the answers are settled
        answers = dict(answers)
        votes = p.votes
        who = "unknown" if by is None else by
        audit = [
            AuditEntry.of(asked[k], v, who, now, tool=approved_tool(asked[k]))
            for k, v in answers.items()
        ]
    else:
        answers, votes, audit = _count_votes(asked, answers, by, p.votes, now)
    merged = p.answers.with_answers(answers, asked)
    for i in expired:
        audit.append(AuditEntry.of_expiry(i, now))
        merged = merged.with_expired(i)
    # Questions with a deadline or an escalation keep their first raising when asked again.
    merged = merged.with_asked(
        q for q in asked.values() if q.expires_at is not None or q.escalate_after is not None
    )
    audit = chained(agent._state.audit, audit, agent._key, agent.session_id)  # linked in order
    if message is not None:
        p = p.but(message=message if p.message is None else f"{p.message}\n\n{message}")
    from ._approval import run_decisions

    decisions = run_decisions(p.decisions, asked, answers)
    return pause.step, p.but(answers=merged, votes=votes, decisions=decisions), True, audit


def _by_question_id(session_id: str, answers: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    """``answers`` with the answer keys doors show (``<session>/<id>``) as question ids."""
    if not any(isinstance(k, str) and "/" in k for k in answers):
        return answers
    from .._interrupt import question_id_of

    return {question_id_of(session_id, k): v for k, v in answers.items()}


def _check_answered_before(agent: Agent, answers: Mapping[str, JsonValue], pause: Any) -> None:
    """AlreadyAnsweredError for an answer to a question that is not pending and that someone
    answered (and settled) before: the first answer wins, whatever the door."""
    pending = set() if pause is None else {q.id for q in pause.interrupts}
    late = [k for k in answers if k not in pending]
    if not late:
        return
    first = {
        e.interrupt_id: e.by
        for e in agent._state.audit
        if e.interrupt_id in late and not e.expired and e.settles
    }
    if first:
        from ..errors import AlreadyAnsweredError

        iid, by = next(iter(first.items()))
        raise AlreadyAnsweredError(
            f"question {iid!r} was answered already, by {by}: the first answer wins; "
            "nothing was changed",
            interrupt_id=iid,
            by=by,
        )


async def check_queued(
    agent: Agent, answers: Mapping[str, JsonValue], *, just_loaded: bool = False
) -> None:
    """AlreadyAnsweredError, before the run starts (so nothing is saved), when an answer to
    one of these questions waits in the store's answer queue (recorded first, through another
    door); the store checks it again, atomically, with the resume's first save. When the
    session was ``just_loaded`` by this resume and the store read its queue with it, that is
    the queue checked (no second call to the store)."""
    store, session_id, link = agent.session_store, agent.session_id, agent._session
    if store is None or session_id is None or link is None:
        return
    from ..sessions import AnswerQueue

    if not isinstance(store, AnswerQueue):
        return  # (a worker's applying view of the store: it applies the queue itself)
    answers = _by_question_id(session_id, answers)  # (a map: resume_plan checked it)
    queued = link.queued if just_loaded else None
    link.queued = None  # (read once: a later resume asks the store)
    if queued is None:
        queued = await store.recorded_answers(session_id)
    for waiting in queued:
        if waiting.interrupt_id in answers:
            from ..sessions import queued_first

            raise queued_first(session_id, waiting)


def approved_tool(question: Interrupt) -> str | None:
    """The tool a built-in approval question is about (its audit entries name it), or None."""
    from ._approval import is_approval

    tool_use = question.tool_use
    return tool_use.name if tool_use is not None and is_approval(question) else None


def declines(answer: object) -> bool:
    """Whether ``answer`` declines (``False``, or ``{"approve": false, ...}``)."""
    return answer is False or (isinstance(answer, Mapping) and answer.get("approve") is False)


def _count_votes(
    asked: Mapping[str, Interrupt],
    answers: Mapping[str, JsonValue],
    by: str | None,
    votes: Mapping[str, tuple[JsonValue, tuple[str, ...]]],
    now: float,
) -> tuple[dict[str, JsonValue], Mapping[str, tuple[JsonValue, tuple[str, ...]]], list[AuditEntry]]:
    """Split ``answers`` into those that settle their question and approvals counted toward
    a quorum: (the settling answers, the votes now, the audit entries of all of them).
    ResumeInputError, nothing changed, for a vote without ``by``, a second vote of one person
    or a vote for another answer than the one voted for so far."""
    from types import MappingProxyType

    from .._audit import AuditEntry

    who = "unknown" if by is None else by
    settled: dict[str, JsonValue] = {}
    now_votes = dict(votes)
    audit: list[AuditEntry] = []
    for key, value in answers.items():
        question = asked[key]
        need = question.quorum
        tool = approved_tool(question)
        if need == 1 or declines(value):
            settled[key] = value
            audit.append(AuditEntry.of(question, value, who, now, tool=tool))
            now_votes.pop(key, None)
            continue
        problem = vote_problem(question, value, by, votes)
        if problem is not None or by is None:
            raise ResumeInputError(problem or "by= is required")
        voters = (*votes.get(key, (None, ()))[1], by)
        audit.append(AuditEntry.of(question, value, who, now, tool=tool, vote=(len(voters), need)))
        if len(voters) >= need:
            settled[key] = value
            now_votes.pop(key, None)
        else:
            now_votes[key] = (value, voters)
    return settled, MappingProxyType(now_votes), audit


def vote_problem(
    question: Interrupt,
    value: JsonValue,
    by: str | None,
    votes: Mapping[str, tuple[JsonValue, tuple[str, ...]]],
) -> str | None:
    """Why ``by``'s ``value`` cannot count toward ``question``'s quorum given the ``votes``
    so far (no name, a second vote of one person, another answer than the one voted for), or
    None: it counts (or the question has no quorum, or ``value`` declines: that settles)."""
    need = question.quorum
    if need == 1 or declines(value):
        return None
    what = f"question {question.name!r} ({question.id})"
    if by is None:
        return f"{what} needs {need} different people to agree: say who answers with by="
    voted, voters = votes.get(question.id, (None, ()))
    if same_person(by, voters):
        return (
            f"{by} already approved {what}; it needs {need} different people "
            f"({len(voters)} so far: {', '.join(voters)})"
        )
    if voters and voted != value:
        return (
            f"the answer to {what} differs from the one {', '.join(voters)} gave "
            f"({voted!r:.80}): {need} people must give the same answer (or one declines)"
        )
    return None


def _check_not_moved(agent: Agent) -> None:
    """SessionMovedError when the agent's session was moved away, or is being moved (its
    module loads on first use: ``import interlude`` stays light)."""
    from ._moved import check_not_moved

    check_not_moved(agent)


def check_consumed(event: Any, answers: Any) -> None:
    """UnconsumedAnswerError for an answer to a question of this replayed ``event`` (its
    source and scope) that none of its callbacks asked again: a person's answer is never
    dropped. (Approval questions are the loop's own, consumed by the call's approval; an
    expired question's default is no one's answer.)"""
    prefix = f"v1:{event._source}:{event._scope}:"  # the ids of its questions (interrupt_id)
    given = [i for i in answers.values if i.startswith(prefix) and i not in answers.expired]
    if not given:
        return
    from ._approval import approval_id

    used = set(event._used_ids())
    approval = approval_id(event._scope)
    for iid in given:
        if iid not in used and iid != approval:
            from ..errors import UnconsumedAnswerError

            raise UnconsumedAnswerError(
                f"the answer to {iid} was given, but no callback of the replayed "
                f"{type(event).__name__} asked that question again: a hook that asks must "
                "ask again on replay (event.is_replay) to read its answer; nothing ran and "
                "the pause is as it was",
                interrupt_id=iid,
            )


def _asking_tool(agent: Agent, question: Interrupt) -> Any:
    """The tool a question is about, found through the sub-agents it came up from (``via``),
    or None."""
    tools: Any = agent._tools
    for call in question.via:
        sub = getattr(tools.get(call.name), "agent", None)
        tools = getattr(sub, "_tools", {})
    tool_use = question.tool_use
    return None if tool_use is None else tools.get(tool_use.name)


def _check_edits(
    agent: Agent, asked: Mapping[str, Interrupt], answers: Mapping[str, JsonValue]
) -> None:
    """AnswerValidationError if an approval edits a call's input into one its tool refuses
    (its schema let it through: the tool's own validation is stricter)."""
    from ._approval import is_approval

    for key, value in answers.items():
        question = asked[key]
        relayed_approval = bool(question.via) and question.name == "approval"  # a sub-agent's
        if not ((is_approval(question) or relayed_approval) and isinstance(value, Mapping)):
            continue
        edited = value.get("input")
        tool_use = question.tool_use
        if edited is None or tool_use is None:
            continue
        validate = getattr(_asking_tool(agent, question), "validate", None)
        if validate is None:
            continue
        from ..errors import ToolInputError

        try:
            validate(edited)
        except ToolInputError as exc:
            raise AnswerValidationError(
                f"the answer to {question.name!r} ({key}) edits the input into one the tool "
                f"refuses: {exc}",
                interrupt_id=key,
                path=("input",),
            ) from None


def check_answers(
    asked: Mapping[str, Interrupt],
    answers: Mapping[str, JsonValue],
    now: float,
    shown: Mapping[str, str] | None = None,
) -> None:
    """Raise the first problem of ``answers`` to the pending questions ``asked``; ``shown``
    gives the digests of the questions as the person saw them (see ``shown_digest``)."""
    import json

    for key, value in answers.items():
        if not isinstance(key, str):
            raise ResumeInputError(f"interrupt ids are strings, got {key!r}")
        if key not in asked:
            raise UnknownInterruptError(
                f"no pending interrupt has id {key!r}; pending: {', '.join(sorted(asked))}"
            )
        if value is True or value is False or value is None:  # (the common answers)
            continue
        try:
            # NaN is not JSON, and a lone surrogate is not text: PostgreSQL refuses both.
            json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise ResumeInputError(
                f"the answer to {key!r} is nested too deeply to be saved"
            ) from None
        except UnicodeEncodeError:
            raise ResumeInputError(
                f"the answer to {key!r} holds text that is not valid Unicode (a lone surrogate)"
            ) from None
        except (TypeError, ValueError) as exc:
            raise ResumeInputError(f"the answer to {key!r} is not JSON-compatible: {exc}") from None
    if shown is not None:
        _check_shown(asked, answers, shown)
    for key, value in answers.items():
        question = asked[key]
        if question.expires_at is not None and question.expires_at <= now:
            raise InterruptExpiredError(
                f"question {question.name!r} ({key}) expired {now - question.expires_at:.0f} s "
                "ago; its answer is refused (it is settled by its deadline)",
                question,
            )
        shared = question.name in ("ran_in_parent", "ran_in_fork")  # (answered by a schema)
        if question.source == "in_doubt" and not shared:
            from ._batch import in_doubt_problem

            problem = in_doubt_problem(value)
            if problem is not None:
                raise ResumeInputError(f"the answer to {key!r}: {problem}")
        if question.response_schema is not None:
            from .._typed import answer_problem

            found = answer_problem(question.response_schema, value)
            if found is not None:
                path, what = found
                where = ".".join(str(p) for p in path) if path else "the answer"
                raise AnswerValidationError(
                    f"the answer to {question.name!r} ({key}) does not fit its response type: "
                    f"at {where}: {what}",
                    interrupt_id=key,
                    path=path,
                )


def _check_shown(
    asked: Mapping[str, Interrupt], answers: Mapping[str, JsonValue], shown: Mapping[str, str]
) -> None:
    from .._audit import shown_digest

    if not isinstance(shown, Mapping):
        raise ResumeInputError(f"shown= maps interrupt ids to digests, got {type(shown).__name__}")
    for key, digest in shown.items():
        if key not in answers:
            raise ResumeInputError(f"shown= names {key!r}, which is not answered here")
        actual = shown_digest(asked[key])
        if digest != actual:
            raise StaleAnswerError(
                f"question {asked[key].name!r} ({key}) is not the one that was shown (shown "
                f"{str(digest)[:19]}..., pending {actual[:19]}...): its data changed since; "
                "nothing was answered, look at it again"
            )


def _is_answer_list(prompt: object) -> bool:
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(p, Mapping) and "interruptResponse" in p for p in prompt)
    )


def _answers_from_list(items: list[Mapping[str, Any]]) -> dict[str, JsonValue]:
    answers: dict[str, JsonValue] = {}
    for i, item in enumerate(items):
        body = item["interruptResponse"]
        if not isinstance(body, Mapping) or "interruptId" not in body or "response" not in body:
            raise ResumeInputError(
                f"item {i}: expected {{'interruptResponse': {{'interruptId': ..., "
                f"'response': ...}}}}, got {item!r}"
            )
        iid = body["interruptId"]
        if not isinstance(iid, str):
            raise ResumeInputError(f"item {i}: interruptId must be a string, got {iid!r}")
        answers[iid] = body["response"]
    return answers


def check_by(by: object) -> str:
    """``by`` as the name it is recorded under (Unicode NFKC, spaces trimmed and collapsed), or
    ResumeInputError: not printable text, a name mixing look-alike scripts ("ana" with a
    Cyrillic first letter), or the one kept for deadlines. Compare names with
    :func:`same_person`."""
    if not isinstance(by, str) or not by.strip():
        raise ResumeInputError(f"by= names who answers: a non-empty string, got {by!r}")
    if not by.isprintable() or len(by) > 200:
        raise ResumeInputError(
            f"by= must be printable text of at most 200 characters (no control characters), "
            f"got {by[:40]!r}"
        )
    import unicodedata  # (loaded when a name is first given: ``import interlude`` stays light)

    name = " ".join(unicodedata.normalize("NFKC", by).split())
    # (each letter's script: the first word of its Unicode name)
    scripts = {unicodedata.name(c, "UNKNOWN").split(" ", 1)[0] for c in name if c.isalpha()}
    scripts &= _LOOKALIKE
    if len(scripts) > 1:
        raise ResumeInputError(
            f"by={by[:40]!r} mixes the {' and '.join(sorted(scripts)).lower()} scripts, whose "
            "letters look alike: a name is written in one of them"
        )
    if name == EXPIRY:
        raise ResumeInputError(f"by={EXPIRY!r} is kept for answers given by a deadline")
    return name


_LOOKALIKE = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
"""Scripts whose letters pass for one another: a name may not mix them."""


def person_key(name: str) -> str:
    """Who ``name`` is, for counting people: the recorded name (``check_by``) case-folded, so
    "Ana", "ana " and its full-width form are one person toward a quorum."""
    import unicodedata

    return " ".join(unicodedata.normalize("NFKC", name).split()).casefold()


def same_person(name: str, names: Sequence[str]) -> bool:
    """Whether ``name`` is one of ``names`` (compared as :func:`person_key`)."""
    key = person_key(name)
    return any(person_key(n) == key for n in names)


_BLOCKS = (Text, Image, Reasoning, ToolUse, ToolResult)


def _prompt_message(prompt: Prompt) -> Message:
    if isinstance(prompt, str):
        return Message("user", [Text(prompt)])
    if isinstance(prompt, Sequence) and prompt and all(isinstance(b, _BLOCKS) for b in prompt):
        return Message("user", list(prompt))  # type: ignore[arg-type]
    raise ResumeInputError(
        f"a prompt is a string or a list of content blocks, got {type(prompt).__name__}: "
        f"{prompt!r:.80}"
    )


def bind_output(plan: Plan, output_type: Any) -> Plan:
    """The plan with the output its run must end with: ``output_type`` for a new prompt; for
    a resume, the stored schema, checked against ``output_type`` when it is given."""
    progress, replay = plan[1], plan[2]
    if output_type is not None or progress.output is not None:
        from ._output import for_prompt, for_resume

        output = for_resume(progress.output, output_type) if replay else for_prompt(output_type)
        return plan[0], progress.but(output=output), replay, plan[3]
    return plan
