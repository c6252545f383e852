"""Slack: a question posted to a channel as a Block Kit message with its choices as buttons,
and the message updated once the question is settled (the official ``slack_sdk``, in a thread).

A button carries what answers the question (:class:`SlackAnswer`: the session, the question, the
answer, the digest of what the message showed), and Slack sends it back with the channel and
``ts`` of the message it is on, so the process that takes the click (``POST
/channels/slack/actions`` on ``interlude serve``) needs nothing kept by the process that asked.
Each message also carries metadata naming its question, by which a later notification
(``answered``, ``expired``) finds the messages to update.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._messages import JsonValue
from ..errors import ConfigurationError, NotificationError
from ._events import EVENTS

if TYPE_CHECKING:
    from slack_sdk import WebClient

__all__ = ["TOKEN_ENV", "Slack", "SlackAnswer", "button_answers"]

TOKEN_ENV = "INTERLUDE_SLACK_TOKEN"
"""Where :class:`Slack` reads its bot token (``xoxb-...``) when none is given."""

_MAX_VALUE = 2000  # a button's value (Slack's limit)
_MAX_SECTION = 2900  # a section's text (Slack: 3000)
_MAX_CHOICES = 5  # an enum with more values is answered in the inbox
_PERMANENT = frozenset(
    {
        "account_inactive",
        "channel_not_found",
        "invalid_arguments",
        "invalid_auth",
        "invalid_blocks",
        "invalid_metadata_format",
        "is_archived",
        "missing_scope",
        "msg_too_long",
        "no_permission",
        "not_authed",
        "not_in_channel",
        "restricted_action",
        "token_revoked",
    }
)
"""Slack's errors that trying again cannot mend (any other is tried again later)."""
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_TITLES = {
    "asked": "A question waits for an answer",
    "deadline_near": "A question's deadline is near",
    "escalated": "A question was escalated",
    "expired": "A question's deadline passed",
    "answered": "A question was answered",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SlackAnswer:
    """What a button of a question's Slack message answers: the session, the question, the
    answer, and the digest of the question as the message showed it (an answer is taken only
    while the question is still that one). Its :meth:`value` is the button's value (JSON, at
    most 2000 characters), read back by :meth:`parse`."""

    session_id: str
    interrupt_id: str
    answer: JsonValue
    shown: str | None = None

    ACTIONS = "interlude-answer"
    """The ``block_id`` of the message's buttons."""
    STATUS = "interlude-status"
    """The ``block_id`` of the line that says who answered (or why not)."""
    ACTION = "interlude-answer-"
    """The start of each answer button's ``action_id`` (then its index)."""
    METADATA = "interlude_question"
    """The ``event_type`` of the messages' metadata (``event_payload``: session and question)."""

    def value(self) -> str:
        """The button's value: compact JSON."""
        data = {"s": self.session_id, "q": self.interrupt_id, "a": self.answer, "d": self.shown}
        return json.dumps(data, separators=(",", ":"), ensure_ascii=True)

    @classmethod
    def parse(cls, value: object) -> SlackAnswer:
        """The answer a button's value names (ValueError if it is not one of ours)."""
        data = json.loads(value) if isinstance(value, str) else None
        if not isinstance(data, dict) or set(data) != {"s", "q", "a", "d"}:
            raise ValueError("not an Interlude answer button")
        session, question, shown = data["s"], data["q"], data["d"]
        if not (isinstance(session, str) and isinstance(question, str)):
            raise ValueError("an answer button names its session and question")
        if shown is not None and not isinstance(shown, str):
            raise ValueError("an answer button's digest is text")
        return cls(session_id=session, interrupt_id=question, answer=data["a"], shown=shown)

    @staticmethod
    def words(answer: object) -> str:
        """An answer in a word or two: "approved", "declined", or "answered <value>"."""
        return said(answer)

    @staticmethod
    def declines(answer: object) -> bool:
        """Whether ``answer`` declines (``False``, ``{"approve": false, ...}``), which settles a
        question at once whatever its quorum."""
        return answer is False or (isinstance(answer, dict) and answer.get("approve") is False)

    def metadata(self) -> dict[str, Any]:
        """The message metadata naming this answer's question."""
        return metadata(self.session_id, self.interrupt_id)


def said(answer: object) -> str:
    """An answer in a word or two: "approved", "declined", "no answer" (a deadline's, without
    a default), or "answered <value>"."""
    if answer is None:
        return "no answer"
    if isinstance(answer, dict) and isinstance(answer.get("approve"), bool):
        edited = " (edited)" if "input" in answer else ""
        return ("approved" if answer["approve"] else "declined") + edited
    if isinstance(answer, bool):
        return "approved" if answer else "declined"
    return f"answered {_label(answer)}"


def metadata(session_id: str, interrupt_id: str) -> dict[str, Any]:
    """The metadata of a question's messages (how a later update finds them)."""
    payload = {"session_id": session_id, "interrupt_id": interrupt_id}
    return {"event_type": SlackAnswer.METADATA, "event_payload": payload}


def escape(text: str) -> str:
    """``text`` safe in Slack's mrkdwn: ``&``, ``<`` and ``>`` escaped, invisible and
    direction-changing characters shown as ``\\uXXXX`` (what a person reads is what runs)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _label(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:59] + "…"


def button_answers(question: Mapping[str, Any]) -> list[JsonValue]:
    """The answers the buttons of ``question`` (its ``to_dict()``) give: what a click may
    answer (the door checks a click's value against them)."""
    return [answer for _, answer, _ in _choices(question)]


def _choices(question: Mapping[str, Any]) -> list[tuple[str, JsonValue, str | None]]:
    """The buttons of a question: (label, answer, style). Approve / Decline for a tool
    approval, a question without an answer schema, or a boolean one; a button per value of a
    small enum; none for anything else (answered in the inbox)."""
    from .._agent import is_approval
    from .._interrupt import Interrupt

    schema = question.get("response_schema")
    yes_no: list[tuple[str, JsonValue, str | None]] = [
        ("Approve", True, "primary"),
        ("Decline", False, "danger"),
    ]
    try:
        approval = is_approval(Interrupt.from_dict(question))
    except Exception:  # not a question this version reads: answered in the inbox
        return []
    if approval or schema is None:
        return yes_no
    if not isinstance(schema, Mapping):
        return []
    if schema.get("type") == "boolean" and "enum" not in schema:
        return yes_no
    values = schema.get("enum")
    if not isinstance(values, list):
        options = schema.get("anyOf", schema.get("oneOf"))
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            values = [o["const"] for o in options]
    if isinstance(values, list) and 0 < len(values) <= _MAX_CHOICES:
        return [(_label(v), v, None) for v in values]
    return []


def _digest(question: Mapping[str, Any]) -> str | None:
    from .._interrupt import Interrupt

    try:
        return Interrupt.from_dict(question).digest
    except Exception:
        return None


def _when(t: object) -> str:
    """A time as Slack shows it in each reader's own time zone (with a fallback)."""
    if not isinstance(t, int | float) or isinstance(t, bool):
        return "-"
    try:
        fallback = datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return "-"
    return f"<!date^{int(t)}^{{date_short_pretty}} {{time}}|{fallback}>"


def _facts(message: Mapping[str, Any]) -> str:
    """The question's section: what it asks about (tool, input, reason), in mrkdwn."""
    q = message.get("question") or {}
    title = _TITLES.get(str(message.get("event")), "A question")
    where = f"session `{escape(str(message.get('session_id')))}`"
    if message.get("agent"):
        where += f" (agent {escape(str(message['agent']))})"
    lines = [f"*{title}:* `{escape(str(q.get('name')))}` in {where}"]
    tool = q.get("tool_use")
    if isinstance(tool, dict):
        shown = json.dumps(tool.get("input"), indent=1, ensure_ascii=True)[:1500]
        shown = escape(shown).replace("```", "``\u200b`")  # it cannot close the block early
        lines.append(f"*Tool:* `{escape(str(tool.get('name')))}`\n```{shown}```")
    reason = q.get("reason")
    if isinstance(reason, dict):  # its question or message in words, the rest as JSON
        said = reason.get("question", reason.get("message"))
        if isinstance(said, str):
            lines.append(escape(said[:1000]))
        rest = {k: v for k, v in reason.items() if k not in ("tool", "question", "message")}
        if rest:
            lines.append(f"*Details:* `{escape(json.dumps(rest, ensure_ascii=True)[:1000])}`")
    elif reason is not None:
        text = reason if isinstance(reason, str) else json.dumps(reason, ensure_ascii=True)
        lines.append(escape(text[:1000]))
    return "\n".join(lines)[:_MAX_SECTION]


def _context(message: Mapping[str, Any]) -> str:
    """Deadline, who may answer and how many must agree."""
    q = message.get("question") or {}
    parts = [f"asked {_when(q.get('raised_at'))}"]
    if q.get("expires_at") is not None:
        parts.append(f"deadline {_when(q.get('expires_at'))}")
    if q.get("approvers"):
        parts.append("may answer: " + ", ".join(escape(str(g)) for g in q["approvers"]))
    if isinstance(q.get("quorum"), int) and q["quorum"] > 1:
        parts.append(f"needs {q['quorum']} approvals")
    if message.get("event") == "escalated" and q.get("escalate_to"):
        parts.append("escalated to " + ", ".join(escape(str(g)) for g in q["escalate_to"]))
    return " · ".join(parts)


def _buttons(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answer buttons (each value a :class:`SlackAnswer`) and the link to the inbox."""
    q = message.get("question") or {}
    elements: list[dict[str, Any]] = []
    digest = _digest(q)
    for i, (label, answer, style) in enumerate(_choices(q)):
        value = SlackAnswer(
            session_id=str(message.get("session_id")),
            interrupt_id=str(q.get("id")),
            answer=answer,
            shown=digest,
        ).value()
        if len(value) > _MAX_VALUE:
            elements = []  # too long for a button: answered in the inbox
            break
        button = {
            "type": "button",
            "action_id": f"{SlackAnswer.ACTION}{i}",
            "text": {"type": "plain_text", "text": label},
            "value": value,
        }
        elements.append({**button, "style": style} if style else button)
    if message.get("url"):
        link = "Answer in the inbox" if not elements else "Open in the inbox"
        elements.append(
            {
                "type": "button",
                "action_id": "interlude-open",
                "text": {"type": "plain_text", "text": link},
                "url": str(message["url"]),
            }
        )
    return elements


def status_block(text: str) -> dict[str, Any]:
    """The line under a question that says who answered, or why an answer was refused."""
    element = {"type": "mrkdwn", "text": text[:_MAX_SECTION]}
    return {"type": "context", "block_id": SlackAnswer.STATUS, "elements": [element]}


def question_blocks(
    message: Mapping[str, Any], *, buttons: bool = True, status: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, Block Kit blocks) of a notification: what the question asks, its
    deadline and who may answer, its buttons (when ``buttons``), and a status line."""
    q = message.get("question") or {}
    blocks: list[dict[str, Any]] = [
        # verbatim: what the agent (or text it read) wrote is not auto-linked or parsed
        {"type": "section", "text": {"type": "mrkdwn", "text": _facts(message), "verbatim": True}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _context(message)}]},
    ]
    elements = _buttons(message) if buttons else []
    if elements:
        blocks.append({"type": "actions", "block_id": SlackAnswer.ACTIONS, "elements": elements})
    if status:
        blocks.append(status_block(status))
    title = _TITLES.get(str(message.get("event")), "A question")
    text = f"{title}: {q.get('name')} in session {message.get('session_id')}"
    return (f"{text}. {_plain(status)}" if status else text), blocks


def _plain(mrkdwn: str) -> str:
    return mrkdwn.replace("*", "")


def closing_status(message: Mapping[str, Any]) -> str:
    """The status line of a settled question: who answered what, or the deadline's answer."""
    answer = message.get("answer") or {}
    what = said(answer.get("answer")) if isinstance(answer, dict) else "settled"
    if message.get("event") == "expired":
        return f"The deadline passed: {escape(what)}"
    by = answer.get("by") if isinstance(answer, dict) else None
    return f"*{escape(what.capitalize())}* by *{escape(str(by))}*"


class Slack:
    """Post each question to ``channel`` as a Block Kit message, its choices as buttons.

    ``asked``, ``deadline_near`` and ``escalated`` post the question: Approve / Decline for a
    tool approval or a yes/no question, a button per value for a small enum (up to five), and
    a link to the inbox (``App(inbox_url=...)``) for anything typed. ``answered`` and
    ``expired`` update the question's messages that still have their buttons (found by their
    metadata in the channel's recent history: ``channels:history``) to say who answered and
    drop the buttons (a message Slack's door already closed is left as it says); when none is
    found, a new message says so. ``events`` picks what is sent.

    ``token`` is the bot token (default ``$INTERLUDE_SLACK_TOKEN``; scopes ``chat:write`` and
    ``channels:history``); ``channel`` a channel id (``C0123...``: a name posts but cannot be
    read back to update). ``base_url`` is Slack's Web API (``https://slack.com/api/``), or
    give your own ``client`` (a ``slack_sdk.WebClient``). An error Slack returns that trying
    again cannot mend (``invalid_auth``, ``channel_not_found``, ``missing_scope``, ...) fails
    the notification for good; others (rate limits, 5xx, no connection) are tried again.
    Clicks come back to ``POST /channels/slack/actions`` (``interlude.server`` ``slack_door``).
    """

    def __init__(
        self,
        channel: str,
        *,
        token: str | None = None,
        base_url: str | None = None,
        client: WebClient | None = None,
        timeout: float = 10.0,
        events: Collection[str] = EVENTS,
        history_pages: int = 5,
    ) -> None:
        if not isinstance(channel, str) or not channel.strip():
            raise ConfigurationError(f"Slack needs a channel (an id, C0123...), got {channel!r}")
        unknown = set(events) - set(EVENTS)
        if unknown:
            raise ConfigurationError(f"Slack: unknown events {sorted(unknown)!r}: {EVENTS!r}")
        self.channel = channel.strip()
        self.events = frozenset(events)
        self.history_pages = max(0, history_pages)
        self.client = client if client is not None else _client(token, base_url, timeout)
        self.name = f"slack {self.channel}"

    def __repr__(self) -> str:
        return f"Slack({self.channel!r})"

    async def send(self, message: Mapping[str, Any]) -> None:
        """Deliver ``message``; NotificationError if it was not (``permanent`` when trying
        again cannot help)."""
        if str(message.get("event")) in self.events:
            await asyncio.to_thread(self._send, message)

    def _send(self, message: Mapping[str, Any]) -> None:
        event = str(message.get("event"))
        q = message.get("question") or {}
        meta = metadata(str(message.get("session_id")), str(q.get("id")))
        if event in ("answered", "expired"):
            status = closing_status(message)
            text, blocks = question_blocks(message, buttons=False, status=status)
            found = self._find(meta["event_payload"], q.get("raised_at"))
            for ts in (ts for ts, still_open in found if still_open):
                self._call(
                    self.client.chat_update,
                    channel=self.channel,
                    ts=ts,
                    text=text,
                    blocks=blocks,
                    metadata=meta,
                )
            if found:
                return
        else:
            text, blocks = question_blocks(message)
        self._call(
            self.client.chat_postMessage,
            channel=self.channel,
            text=text,
            blocks=blocks,
            metadata=meta,
            unfurl_links=False,
        )

    def _find(self, names: Mapping[str, Any], since: object) -> list[tuple[str, bool]]:
        """The ``ts`` of this question's messages in the channel, each with whether it still
        has its buttons (one the door closed already says who answered, and is left as it
        is), read from its history since the question was raised (up to ``history_pages``
        pages); none when it cannot be read."""
        from slack_sdk.errors import SlackApiError

        oldest = f"{float(since) - 300:.6f}" if isinstance(since, int | float) else "0"
        found: list[tuple[str, bool]] = []
        cursor: str | None = None
        for _ in range(self.history_pages):
            try:
                page = self.client.conversations_history(
                    channel=self.channel,
                    oldest=oldest,
                    include_all_metadata=True,
                    limit=200,
                    cursor=cursor,
                )
            except (SlackApiError, OSError):  # no scope, a name for a channel, no connection
                return found
            for m in page.get("messages") or []:
                meta = m.get("metadata") or {}
                ours = meta.get("event_type") == SlackAnswer.METADATA
                if ours and meta.get("event_payload") == dict(names):
                    blocks = m.get("blocks") or []
                    still_open = any(b.get("block_id") == SlackAnswer.ACTIONS for b in blocks)
                    found.append((str(m.get("ts")), still_open))
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not page.get("has_more") or not cursor:
                break
        return found

    def _call(self, method: Callable[..., Any], **arguments: Any) -> None:
        """Call a Web API method; NotificationError if Slack refused it or could not be
        reached (``permanent`` for the errors that trying again cannot mend)."""
        from slack_sdk.errors import SlackApiError, SlackClientError

        try:
            method(**arguments)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or f"HTTP {exc.response.status_code}")
            raise NotificationError(
                f"{self.name}: Slack refused it: {error}", permanent=error in _PERMANENT
            ) from exc
        except (SlackClientError, OSError) as exc:  # no connection, a timeout, bad TLS
            raise NotificationError(f"{self.name}: {type(exc).__name__}: {exc}") from exc


def _client(token: str | None, base_url: str | None, timeout: float) -> WebClient:
    """A ``slack_sdk.WebClient`` for ``token`` (default ``$INTERLUDE_SLACK_TOKEN``)."""
    token = token or os.environ.get(TOKEN_ENV, "").strip() or None
    if not token:
        raise ConfigurationError(f"Slack needs a bot token: token=..., or set ${TOKEN_ENV}")
    try:
        from slack_sdk import WebClient
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "Slack needs slack_sdk: pip install 'interlude-agents[slack]'"
        ) from None
    return WebClient(
        token=token, base_url=base_url or WebClient.BASE_URL, timeout=max(1, round(timeout))
    )
