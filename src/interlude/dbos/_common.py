"""What the DBOS worker and its clients agree on: names, the configuration, refusals as JSON.

Everything written to the DBOS system database is JSON (``DBOSPortableJSONSerializer``): a
worker and a client configured here never write pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbos import DBOSConfig, DBOSPortableJSONSerializer

from .. import errors
from .._interrupt import Interrupt
from .._messages import JsonValue

__all__ = [
    "APP_NAME",
    "MOVED",
    "MOVE_OUT",
    "QUEUE",
    "SERIALIZER",
    "TOPIC",
    "VERSION",
    "WORKFLOW",
    "config",
    "outcome_key",
    "refusal_from_dict",
    "refusal_to_dict",
]

WORKFLOW = "interlude.agent"
"""The workflow that runs an agent of the worker's App (its id is the session id)."""
QUEUE = "interlude"
"""The queue clients start runs on (every worker listens to it)."""
TOPIC = "interlude.answers"
"""The message topic answers are sent on (and moves out: one topic, taken in order, so no
answer applies on both sides of a move)."""
MOVE_OUT = "move_out"
"""The key of a message that asks the run to leave (``interlude move``): ``{"to", "from",
"by"}``; the message also holds ``ticket``, ``pause``, ``at`` and ``until``."""
MOVED = "moved"
"""The stop reason of a run that left by a move (its result also holds ``moved_to``)."""
OUTCOME = "interlude.outcome:"
"""The prefix of the event keys the workflow publishes an answer's outcome under."""
VERSION = "interlude-dbos-1"
"""The pinned application version: DBOS would otherwise hash the source, and an upgrade of
Interlude or DBOS would orphan paused runs. The state format carries compatibility."""
APP_NAME = "interlude"
CLOCK_STEP = "interlude.clock"
"""The step that reads the time (recorded: a replay reads the same)."""

# The workflow's attributes (a paused run's, read by ``pending`` without a worker).
PENDING = "interlude_pending"
AGENT = "interlude_agent"
QUESTIONS = "interlude_questions"
DEADLINE = "interlude_deadline"
PAUSE = "interlude_pause"
PAUSED_AT = "interlude_paused_at"

SERIALIZER = DBOSPortableJSONSerializer()


def outcome_key(ticket: str) -> str:
    return OUTCOME + ticket


def config(url: str, executor_id: str, **extra: Any) -> DBOSConfig:
    """The DBOS configuration of a worker on the system database at ``url``."""
    cfg: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "serializer": SERIALIZER,
        "executor_id": executor_id,
        "application_version": VERSION,
        "log_level": "WARNING",
    }
    cfg.update(extra)  # type: ignore[typeddict-item]
    return cfg


def refusal_to_dict(exc: errors.InterludeError) -> dict[str, JsonValue]:
    """A refused answer's error as the outcome event: its class name, message and details."""
    details: dict[str, JsonValue] = {}
    for key in ("interrupt_id", "by", "target"):
        value = getattr(exc, key, None)
        if isinstance(value, str):
            details[key] = value
    path = getattr(exc, "path", None)
    if isinstance(path, tuple):
        details["path"] = list(path)
    interrupt = getattr(exc, "interrupt", None)
    if isinstance(interrupt, Interrupt):
        details["interrupt"] = interrupt.to_dict()
    return {"error": {"type": type(exc).__name__, "message": str(exc), "details": details}}


def refusal_from_dict(data: Mapping[str, Any]) -> Exception:
    """The error a refused answer raises here: the embedded class (``interlude.errors``)."""
    name, message = str(data.get("type")), str(data.get("message"))
    details = data.get("details") or {}
    cls = getattr(errors, name, None)
    if cls is errors.AnswerValidationError:
        path = tuple(details.get("path") or ())
        return cls(message, interrupt_id=str(details.get("interrupt_id")), path=path)
    if cls is errors.AlreadyAnsweredError:
        return cls(message, interrupt_id=details.get("interrupt_id"), by=details.get("by"))
    if cls is errors.NotAllowedToAnswerError:
        return errors.NotAllowedToAnswerError(
            message, interrupt_id=str(details.get("interrupt_id"))
        )
    if cls is errors.UnconsumedAnswerError:
        return errors.UnconsumedAnswerError(message, interrupt_id=str(details.get("interrupt_id")))
    if cls is errors.SessionMovedError:
        return cls(message, target=str(details.get("target") or ""))
    if cls is errors.InterruptExpiredError:
        found = details.get("interrupt")
        return cls(message, None if found is None else Interrupt.from_dict(found))
    if isinstance(cls, type) and issubclass(cls, errors.InterludeError):
        try:
            rebuilt: Exception = cls(message)
        except TypeError:
            pass
        else:
            return rebuilt
    return errors.ReplayedException(name, message)
