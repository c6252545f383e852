"""Retrying a model call that failed for a passing reason (throttling, a server error)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..errors import ModelError

if TYPE_CHECKING:  # asyncio is imported when first needed: `import interlude` stays light
    pass

__all__ = ["RetryPolicy", "with_retries"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently to retry a call that failed with a retryable ModelError.

    Delays grow from ``initial_delay`` by ``multiplier`` up to ``max_delay``, with up to
    ``jitter`` (a fraction) added at random. A provider's ``Retry-After`` wins when it is
    longer, even beyond ``max_delay``, but never beyond ``max_retry_after`` (a server asking
    for an hour gets ``max_retry_after`` seconds, then the retry).
    Only the opening of a stream is retried: once a reply has started, a failure is raised.
    """

    max_attempts: int = 4
    initial_delay: float = 1.0
    max_delay: float = 20.0
    multiplier: float = 2.0
    jitter: float = 0.1
    max_retry_after: float = 60.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        import random

        base = min(self.max_delay, self.initial_delay * self.multiplier ** (retry - 1))
        base *= 1 + random.uniform(0, self.jitter)
        return max(base, min(retry_after or 0.0, self.max_retry_after))


async def with_retries(
    policy: RetryPolicy,
    attempt: Callable[[], Awaitable[T]],
    translate: Callable[[Exception], ModelError | None],
) -> T:
    """Run ``attempt`` until it succeeds, retrying the errors ``translate`` marks retryable.

    ``translate`` turns a provider's exception into a typed ModelError (None: not a provider
    error, raise it as it is). After the last attempt the typed error is raised.
    """
    import asyncio

    tries = 0
    while True:
        try:
            return await attempt()
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            tries += 1
            if not error.retryable or tries >= policy.max_attempts:
                if error.retryable:
                    error.args = (f"{error.args[0]} (gave up after {tries} attempts)",)
                raise error from exc
            await asyncio.sleep(policy.delay(tries, error.retry_after))
