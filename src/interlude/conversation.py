"""Conversation managers: what an agent sends its model when the conversation grows long.

``Agent(conversation=SlidingWindow(max_messages=40))`` sends the model only the latest
messages; ``Agent(conversation=Summarizing(keep_last=10))`` replaces older turns with a summary
written by a model call. Either way, when the provider says the conversation no longer fits
(``ContextWindowOverflowError``), the manager reduces it and the call is made again.

A manager never rewrites ``agent.messages``: the conversation stays whole (a session's is
append-only, and pauses, the journal and interrupt ids refer to its message positions). It
decides which part of it is *sent*. What it decided (where the sent part starts, and the
summary of what came before) is a :class:`ConversationState`, kept with the agent and saved
with its session and its ``export_state()``, so a resume in a fresh process sends the same
thing and a summary is never asked for twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._messages import Image, Json, Message, Reasoning, Text, ToolResult, ToolUse
from .errors import (
    ConfigurationError,
    ContextWindowOverflowError,
    ModelProviderError,
    StateFormatError,
)

if TYPE_CHECKING:
    from .models import Model

__all__ = [
    "ConversationManager",
    "ConversationState",
    "DEFAULT_SUMMARY_PROMPT",
    "Reduction",
    "SlidingWindow",
    "Summarizing",
]

STATE_KEY = "interlude.conversation"
"""The key under which the state is saved inside the stored / exported ``state`` object."""


@dataclass(frozen=True, slots=True)
class ConversationState:
    """What a manager decided so far: ``start`` is the first message (of the conversation as
    sent, see ``Agent.messages``) that may still be sent; ``summary`` is what the model is told
    about the messages before it (None: they are simply left out)."""

    start: int = 0
    summary: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "summary": self.summary}

    @classmethod
    def from_dict(cls, data: Any) -> ConversationState:
        """The state saved by :meth:`to_dict`; StateFormatError if it is not one."""
        where = f"state[{STATE_KEY!r}]"
        if not isinstance(data, dict):
            raise StateFormatError(f"{where}: expected an object, got {data!r:.80}")
        start, summary = data.get("start", 0), data.get("summary")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise StateFormatError(f"{where}.start: expected a count, got {start!r:.80}")
        if summary is not None and not isinstance(summary, str):
            raise StateFormatError(f"{where}.summary: expected text, got {summary!r:.80}")
        return cls(start, summary)


class Reduction(Protocol):
    """What a manager's :meth:`ConversationManager.reduce` is given besides the messages."""

    @property
    def overflow(self) -> bool:
        """True: the provider refused the conversation as too long (reduce it, or return None
        to let the error through). False: the check made before every model call."""
        ...

    async def ask(self, text: str, *, system: str | None = None, model: Model | None = None) -> str:
        """One model call outside the conversation (the agent's model unless ``model``): the
        reply's text. Its usage counts in the run's usage. ConfigurationError where model calls
        do not run in this process (a durable engine's activities)."""
        ...


@runtime_checkable
class ConversationManager(Protocol):
    """Decides what part of the conversation the model is sent.

    ``view`` must be a pure function of its arguments (it runs for every model call, also when
    a durable engine runs that call elsewhere); ``reduce`` may do I/O (a summary call).
    """

    def view(self, messages: Sequence[Message], state: ConversationState) -> list[Message]:
        """The messages to send, given the whole conversation and the state."""
        ...

    async def reduce(
        self, messages: Sequence[Message], state: ConversationState, reduction: Reduction
    ) -> ConversationState | None:
        """A new state that sends less, or None when it will not (or cannot) reduce."""
        ...


# --- shared rules -------------------------------------------------------------------------------


def _is_results(message: Message) -> bool:
    """A user message carrying tool results: it must follow the tool uses it answers."""
    if message.role == "user":
        for block in message.content:
            if isinstance(block, ToolResult):
                return True
    return False


def _effective(state: ConversationState, messages: Sequence[Message]) -> ConversationState:
    """The state, unless the sent part cannot start where it says: the conversation is now
    shorter (it was replaced by a shorter one), or nothing from there on may start a request
    (only tool results, in a state edited or stored by someone else): then none of it applies.
    A state this module made always starts on such a message."""
    if state.start == 0:
        return state
    if state.start > len(messages) or _last_start(messages, state.start) is None:
        return ConversationState()
    return state


def _prompt_before(messages: Sequence[Message], index: int) -> int | None:
    """The latest user message before ``index`` that is not tool results: the prompt a tool
    loop starting before ``index`` works on."""
    for i in range(index - 1, -1, -1):
        m = messages[i]
        if m.role == "user" and not _is_results(m):
            return i
    return None


def _candidates(
    messages: Sequence[Message], begin: int, summary: str | None
) -> Iterator[tuple[int, int, int | None]]:
    """``(start, size, pinned)`` for every place from ``begin`` on where a sent conversation
    may start (not on tool results, which would be separated from their tool uses): how many
    messages :func:`_assemble` then sends, and the prompt kept in front, if any.

    A part starting with an assistant message gets the prompt its tool loop works on in front
    (Anthropic and Bedrock want a user message first); a summary stands in front instead,
    joined to a first user message or as a message of its own. The prompt is looked up once
    and then followed, so a long tool loop costs one pass."""
    count = len(messages)
    prompt: int | None = None
    looked = False
    for s in range(begin, count):
        m = messages[s]
        if _is_results(m):
            continue
        pinned = None
        if summary is not None:
            size = count - s + (0 if m.role == "user" else 1)
        elif m.role == "assistant":
            if not looked:
                prompt, looked = _prompt_before(messages, s), True
            pinned = prompt
            size = count - s + (0 if pinned is None else 1)
        else:
            size = count - s
        yield s, size, pinned
        if m.role == "user":
            prompt, looked = s, True


def _assemble(
    messages: Sequence[Message], start: int, summary: str | None, pinned: int | None
) -> list[Message]:
    """``messages[start:]``, led by the summary (joined to the first message if that is a user
    message, so roles still alternate) or by the pinned prompt."""
    rest = list(messages[start:])
    if summary is not None:
        note = Text(f"Summary of the earlier part of this conversation:\n{summary}")
        if rest and rest[0].role == "user":
            return [Message("user", [note, *rest[0].content]), *rest[1:]]
        return [Message("user", [note]), *rest]
    return rest if pinned is None else [messages[pinned], *rest]


def _last_start(messages: Sequence[Message], floor: int) -> int | None:
    """The last place (from ``floor`` on) where a sent conversation may start."""
    for i in range(len(messages) - 1, floor - 1, -1):
        if not _is_results(messages[i]):
            return i
    return None


# --- the managers -------------------------------------------------------------------------------


class SlidingWindow:
    """Send only the latest ``max_messages`` messages.

    The sent part never starts with tool results (they stay with their tool uses) nor, when a
    tool loop is cut, with an assistant turn: the prompt the loop works on is then kept in
    front. When even the smallest such part (the prompt, the last tool uses, their results) is
    longer than ``max_messages``, that part is sent. On a context overflow, the oldest half of
    what was sent is dropped for good (``state.start`` moves on), and the call is made again.
    """

    def __init__(self, max_messages: int = 40) -> None:
        if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages < 1:
            raise ConfigurationError(f"max_messages must be at least 1, got {max_messages!r}")
        self.max_messages = max_messages

    def __repr__(self) -> str:
        return f"SlidingWindow(max_messages={self.max_messages})"

    def _start(
        self, messages: Sequence[Message], state: ConversationState
    ) -> tuple[int, int, int | None] | None:
        """(start, size, pinned) of the part sent: the largest valid part of at most
        ``max_messages``, else the smallest valid part."""
        begin = max(state.start, len(messages) - self.max_messages)
        for found in _candidates(messages, begin, state.summary):
            if found[1] <= self.max_messages:
                return found
        last = _last_start(messages, state.start)
        return None if last is None else next(_candidates(messages, last, state.summary))

    def view(self, messages: Sequence[Message], state: ConversationState) -> list[Message]:
        state = _effective(state, messages)
        found = self._start(messages, state)
        if found is None:
            return list(messages[state.start :])
        start, _, pinned = found
        return _assemble(messages, start, state.summary, pinned)

    async def reduce(
        self, messages: Sequence[Message], state: ConversationState, reduction: Reduction
    ) -> ConversationState | None:
        if not reduction.overflow:
            return None  # the window is applied by view()
        state = _effective(state, messages)
        found = self._start(messages, state)
        if found is None:
            return None
        current, size, _ = found
        target = max(size // 2, 1)
        smaller: int | None = None
        for start, part, _ in _candidates(messages, current + 1, state.summary):
            if part <= target:
                return ConversationState(start, state.summary)
            if part < size:
                smaller = start  # the last one: the smallest part
        if smaller is None:
            return None
        return ConversationState(smaller, state.summary)


DEFAULT_SUMMARY_PROMPT = (
    "You summarize the earlier part of a conversation between a user and an AI assistant that "
    "uses tools, so that the assistant can carry on without it. Keep every fact, decision, "
    "open question, name, number, file and identifier that may matter later, what the tools "
    "were asked and what they returned (briefly), and what the user wants. Write the summary "
    "in plain prose or bullet points, in the third person, without preamble."
)


class Summarizing:
    """Replace older turns with a summary written by a model call.

    When the provider reports a context overflow, or before a call when more than
    ``max_messages`` messages would be sent (if given), everything but about the last
    ``keep_last`` messages (on an overflow, at most half of what was sent) is summarized by
    ``model`` (the agent's own by default, a ``Model`` or a ``"provider:model"`` string) with
    ``prompt`` as its system prompt; an earlier summary is folded into the new one. The
    summary is sent in front of the kept messages, as a user message. It is saved with the
    agent's state before the next model call, so a resume or a recovery never asks for it
    again.
    """

    def __init__(
        self,
        model: Model | str | None = None,
        keep_last: int = 10,
        *,
        max_messages: int | None = None,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
    ) -> None:
        if isinstance(model, str):
            from .models import model_from_string

            model = model_from_string(model)
        if model is not None and not callable(getattr(model, "stream", None)):
            raise ConfigurationError(f"model has no stream() method: {model!r}")
        if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 1:
            raise ConfigurationError(f"keep_last must be at least 1, got {keep_last!r}")
        if max_messages is not None and (
            not isinstance(max_messages, int) or max_messages <= keep_last
        ):
            raise ConfigurationError(
                f"max_messages must be more than keep_last={keep_last}, got {max_messages!r}"
            )
        self.model = model
        self.keep_last = keep_last
        self.max_messages = max_messages
        self.prompt = prompt

    def __repr__(self) -> str:
        return f"Summarizing(keep_last={self.keep_last}, max_messages={self.max_messages})"

    def view(self, messages: Sequence[Message], state: ConversationState) -> list[Message]:
        state = _effective(state, messages)
        found = next(_candidates(messages, state.start, state.summary), None)
        if found is None:
            return list(messages[state.start :])
        start, _, pinned = found
        return _assemble(messages, start, state.summary, pinned)

    async def reduce(
        self, messages: Sequence[Message], state: ConversationState, reduction: Reduction
    ) -> ConversationState | None:
        state = _effective(state, messages)
        found = next(_candidates(messages, state.start, state.summary), None)
        if found is None:
            return None
        current, sent, _ = found
        if not reduction.overflow and (self.max_messages is None or sent <= self.max_messages):
            return None
        keep = self.keep_last if not reduction.overflow else min(self.keep_last, sent // 2)
        later = [s for s, _, _ in _candidates(messages, current + 1, state.summary)]
        if not later:
            return None
        lowest = len(messages) - keep
        cut = next((s for s in later if s >= lowest), later[-1])
        while True:
            text = transcript(messages[current:cut], state.summary)
            try:
                summary = await reduction.ask(text, system=self.prompt, model=self.model)
                break
            except ContextWindowOverflowError as exc:
                # The summary request is too long itself: summarize the older half first (a
                # later reduction folds the rest in).
                half = (current + cut) // 2
                shorter = [s for s in later if half <= s < cut]
                if not shorter:
                    raise ContextWindowOverflowError(
                        f"the summary call does not fit the summarizing model's context window "
                        f"({cut - current} message(s) to summarize): {exc}",
                        provider=exc.provider,
                        status=exc.status,
                    ) from exc
                cut = shorter[0]
            except Exception as exc:
                # Not the conversation's model call: say so (the type is kept, for retry hooks).
                exc.add_note(f"raised by the summary call of {self!r}")
                raise
        if not summary.strip():
            raise ModelProviderError("the summary call returned no text")
        return ConversationState(cut, summary.strip())


def transcript(messages: Sequence[Message], summary: str | None = None) -> str:
    """The messages as plain text for a summary call (any provider reads it; tool uses and
    results are written out, images named, reasoning left out)."""
    lines: list[str] = []
    if summary is not None:
        lines += ["Summary of what came before:", summary, ""]
    lines.append("Conversation to summarize:")
    for m in messages:
        for block in m.content:
            match block:
                case Text(text) if text.strip():
                    lines.append(f"[{m.role}] {text}")
                case Image(media_type):
                    lines.append(f"[{m.role}] (an image, {media_type})")
                case ToolUse(id, name, input):
                    lines.append(f"[assistant called tool {name} ({id})] {_json(input)}")
                case ToolResult(tool_use_id, status, content):
                    body = " ".join(_result_text(b) for b in content)
                    lines.append(f"[tool result for {tool_use_id}, {status}] {body}")
                case Reasoning() | Text():
                    pass
    lines.append("")
    lines.append("Write the summary now.")
    return "\n".join(lines)


def _result_text(block: Text | Json | Image) -> str:
    match block:
        case Text(text):
            return text
        case Json(value):
            return _json(value)
        case Image(media_type):
            return f"(an image, {media_type})"


def _json(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)
