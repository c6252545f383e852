"""What the provider adapters share when they type an error: one reading of error kinds, codes
and context-overflow phrasings, so that every adapter calls the same failure the same thing."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

from ..errors import (
    ContextWindowOverflowError,
    ModelAuthError,
    ModelError,
    ModelProviderError,
    ModelThrottledError,
)

__all__ = [
    "classify",
    "error_status",
    "is_context_overflow",
    "malformed_chunk",
    "retry_after",
]

# Codes and types that mean "the conversation does not fit" (OpenAI, llama.cpp, LiteLLM...).
_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "contextwindowexceedederror",
        "model_context_window_exceeded",
    }
)
# ...and how providers and gateways say it in words.
_OVERFLOW_TEXT = re.compile(
    r"context[ _]?(length|window)[ _]?exceeded"
    r"|maximum context|context[ _](length|window|size|limit)|exceed_context_size"
    r"|prompt is too long|input is too long|too many (input )?tokens|too many total text bytes"
    r"|exceeds? (the )?(available |model'?s? )?context",
    re.IGNORECASE,
)

# The HTTP status an error kind stands for (Anthropic's and OpenAI's error types).
_KIND_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "service_unavailable": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_AUTH_KINDS = frozenset({"authentication_error", "permission_error", "invalid_api_key"})
_THROTTLE_KINDS = frozenset({"rate_limit_error", "rate_limit_exceeded", "insufficient_quota"})
_RETRYABLE_KINDS = frozenset(
    {"api_error", "server_error", "internal_error", "overloaded_error", "timeout_error"}
)


def _names(*values: object) -> set[str]:
    return {str(v).lower() for v in values if isinstance(v, str) and v}


def is_context_overflow(text: str, *codes: object) -> bool:
    """Whether an error's message, or any of its codes/types, says the context overflowed."""
    if _names(*codes) & _OVERFLOW_CODES:
        return True
    return _OVERFLOW_TEXT.search(text or "") is not None


def error_status(*codes: object) -> int | None:
    """The HTTP status named by an error's numeric code, or stood for by its type / code."""
    for code in codes:
        if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
            return code
        if isinstance(code, str) and code.isdigit() and 100 <= int(code) <= 599:
            return int(code)
    for code in codes:
        if isinstance(code, str) and code.lower() in _KIND_STATUS:
            return _KIND_STATUS[code.lower()]
    return None


def classify(
    status: int | None, text: str, *codes: object
) -> tuple[type[ModelError], int | None, bool]:
    """The error class, status and retryability for a provider error.

    ``status`` is the HTTP status (None for an error reported inside a stream: then it is read
    from the error's numeric code or its type). ``codes`` are the error's type and code.
    Server errors, overload and rate limits are retryable; bad requests, auth failures, an
    exhausted quota and a context overflow are not.
    """
    given = status if status is not None and status >= 400 else None
    status = given or error_status(*codes)
    names = _names(*codes)
    if status == 429 or names & _THROTTLE_KINDS:
        return ModelThrottledError, given or 429, "insufficient_quota" not in names
    if status in (401, 403) or names & _AUTH_KINDS:
        denied = 403 if "permission_error" in names else 401
        return ModelAuthError, given or (status if status in (401, 403) else denied), False
    if (status is None or 400 <= status < 500) and is_context_overflow(text, *codes):
        return ContextWindowOverflowError, status, False
    retryable = bool(names & _RETRYABLE_KINDS) or (
        status is not None and (status >= 500 or status in (408, 409))
    )
    return ModelProviderError, status, retryable


def malformed_chunk(where: str, exc: Exception, *, provider: str, started: bool) -> ModelError:
    """The error for a stream chunk that is not valid JSON: retryable only if no event of the
    reply was passed on yet (the call can be made again as if it never happened)."""
    when = "mid-reply" if started else "at the start of the reply"
    return ModelProviderError(
        f"{where}: the server sent a malformed stream chunk {when} ({type(exc).__name__}: {exc})",
        provider=provider,
        retryable=not started,
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms``, or ``retry-after`` as seconds or an HTTP date."""
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(float(ms) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
