"""RetryPolicy: backoff, and how long a provider's Retry-After is honoured."""

from __future__ import annotations

import time

import pytest

from interlude import Message, Text
from interlude.errors import ModelThrottledError
from interlude.models import RetryPolicy
from interlude.models.anthropic import AnthropicModel

from .anthropic_server import AnthropicServer, error, text_turn


def test_backoff_grows_up_to_max_delay() -> None:
    policy = RetryPolicy(initial_delay=1.0, multiplier=2.0, max_delay=5.0, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_retry_after_wins_when_longer_even_beyond_max_delay() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=20.0, jitter=0.0)
    assert policy.delay(1, retry_after=0.5) == 1.0  # shorter: the backoff wins
    assert policy.delay(1, retry_after=45.0) == 45.0  # longer than max_delay: honoured
    assert policy.delay(1, retry_after=3600.0) == policy.max_retry_after == 60.0
    assert RetryPolicy(max_retry_after=5.0, jitter=0.0).delay(1, retry_after=30.0) == 5.0


@pytest.mark.parametrize("bad", [-1.0, None])
def test_no_usable_retry_after_means_plain_backoff(bad: float | None) -> None:
    assert RetryPolicy(initial_delay=0.5, jitter=0.0).delay(1, retry_after=bad) == 0.5


async def test_a_servers_retry_after_is_waited_for_beyond_max_delay() -> None:
    fast = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.001)
    with AnthropicServer() as server:
        server.queue(
            error(429, "rate_limit_error", "slow", {"retry-after": "0.3"}), text_turn("ok")
        )
        model = AnthropicModel(
            "m", client_args={"api_key": "k", "base_url": server.url}, retry=fast
        )
        started = time.monotonic()
        events = [e async for e in model.stream([Message("user", [Text("hi")])], [], None)]
        assert time.monotonic() - started >= 0.3
        assert len(server.requests) == 2 and events[-1].stop_reason == "end_turn"

        server.queue(*[error(429, "rate_limit_error", "slow", {"retry-after": "999"})] * 2)
        capped = RetryPolicy(
            max_attempts=2, initial_delay=0.01, max_delay=0.01, max_retry_after=0.05
        )
        model = AnthropicModel(
            "m", client_args={"api_key": "k", "base_url": server.url}, retry=capped
        )
        started = time.monotonic()
        with pytest.raises(ModelThrottledError):
            async for _ in model.stream([Message("user", [Text("hi")])], [], None):
                pass
        assert time.monotonic() - started < 60  # not the 999 s asked for: capped at 0.05 s
