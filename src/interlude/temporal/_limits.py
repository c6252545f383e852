"""How large one workflow run and its payloads may grow: :class:`Limits`, and the error for a
payload above them (checked before Temporal would refuse it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._messages import JsonValue
from ..errors import LimitError

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_RESULT_BYTES",
    "TEMPORAL_LIMIT",
    "Limits",
    "PayloadLimitError",
    "json_size",
    "too_large",
]

MAX_REQUEST_BYTES = 3 * 512 * 1024
"""The default limit on an activity's request or a tool's result (1.5 MiB): below Temporal's
2 MiB payload limit."""

MAX_ANSWER_BYTES = 256 * 1024
"""The default limit on one Update's answers (256 KiB of JSON)."""

MAX_RESULT_BYTES = 3 * 512 * 1024
"""The default limit on the workflow's result (1.5 MiB): above it the result omits the state."""

TEMPORAL_LIMIT = "Temporal refuses payloads above 2 MiB"


class PayloadLimitError(LimitError):
    """A payload the workflow would hand to Temporal (a model call's, tool's or hook's activity
    request, a tool's result, the input of a continue-as-new) is larger than its limit (see
    :class:`Limits`): raised instead of Temporal's PayloadsTooLarge, naming both sizes."""


def json_size(value: Any) -> int:
    """The size of ``value`` as Temporal's JSON payload converter writes it."""
    return len(json.dumps(value, separators=(",", ":"), sort_keys=True).encode())


def too_large(what: str, size: int, limit: int, setting: str, advice: str) -> PayloadLimitError:
    """The error for ``what`` being ``size`` bytes of JSON, above ``limit``."""
    return PayloadLimitError(
        f"{what} is {size} bytes of JSON, above the limit of {limit} bytes "
        f"({setting}; {TEMPORAL_LIMIT}): {advice}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How large one workflow run may grow (passed in the workflow's input, under ``"limits"``,
    so a replay sees the same values).

    While the run is paused (waiting for answers) and this run has called the model at least
    once, it continues as new, carrying ``agent.export_state()`` (the conversation, the pause
    with its interrupt ids, the audit trail) when Temporal suggests it, or when this run has
    made ``continue_after_model_calls`` model calls, or when the exported state is larger than
    ``continue_above_state_bytes``, or the history larger than ``continue_above_history_bytes``
    (None: no such limit); not when that input would be larger than ``max_request_bytes``
    (then it stays in this run, and logs a warning naming both sizes).

    ``max_request_bytes`` bounds every activity request and what a model or tool activity
    returns: a model call whose request or response (as JSON) is larger fails the run with
    :class:`PayloadLimitError`; so does a hook run as an activity whose request is; a tool
    call whose request or result is larger gets an error result naming both sizes (the model
    sees it). ``max_answer_bytes``: an Update whose answers
    (as JSON) are larger is refused (a ResumeInputError naming size and limit; nothing
    changes). ``max_result_bytes``: a finished run whose result (with ``export_state()``) is
    larger returns ``"state": None`` and says why under ``"state_omitted"`` (the conversation
    and audit trail stay in the workflow's history, in its Updates and activities).
    """

    continue_after_model_calls: int | None = None
    continue_above_state_bytes: int | None = None
    continue_above_history_bytes: int | None = None
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_answer_bytes: int = MAX_ANSWER_BYTES
    max_result_bytes: int = MAX_RESULT_BYTES

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "continue_after_model_calls": self.continue_after_model_calls,
            "continue_above_state_bytes": self.continue_above_state_bytes,
            "continue_above_history_bytes": self.continue_above_history_bytes,
            "max_request_bytes": self.max_request_bytes,
            "max_answer_bytes": self.max_answer_bytes,
            "max_result_bytes": self.max_result_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Limits:
        data = data or {}
        return cls(
            continue_after_model_calls=data.get("continue_after_model_calls"),
            continue_above_state_bytes=data.get("continue_above_state_bytes"),
            continue_above_history_bytes=data.get("continue_above_history_bytes"),
            max_request_bytes=int(data.get("max_request_bytes") or MAX_REQUEST_BYTES),
            max_answer_bytes=int(data.get("max_answer_bytes") or MAX_ANSWER_BYTES),
            max_result_bytes=int(data.get("max_result_bytes") or MAX_RESULT_BYTES),
        )
