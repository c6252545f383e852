"""A model call whose request is too large fails clearly, before Temporal would refuse it."""

from __future__ import annotations

import json

import pytest

from .conftest import Env
from .history import calls_of
from .test_continue_as_new import start


async def test_a_request_above_the_limit_fails_the_run_naming_size_and_limit(env: Env) -> None:
    from temporalio.client import WorkflowFailureError

    from interlude.temporal import Limits

    prompt = json.dumps([]) + " " * 500
    wid, _ = await start(env, "plain", prompt, Limits(max_request_bytes=200))
    with pytest.raises(WorkflowFailureError) as failed:
        await env.agents.result(wid)
    cause = failed.value.cause
    assert getattr(cause, "type", None) == "PayloadLimitError"
    message = str(cause)
    assert "above the limit of 200 bytes" in message and "Limits.max_request_bytes" in message
    size = int(message.split("request is ")[1].split(" bytes")[0])
    assert size > 500
    assert await calls_of(env.client, wid) == []  # no model call was made


async def test_a_request_below_the_limit_runs(env: Env) -> None:
    from interlude.temporal import Limits

    wid, _ = await start(env, "plain", json.dumps([]), Limits(max_request_bytes=2000))
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"


def test_the_default_limit_is_below_temporals_2_mib() -> None:
    from interlude.temporal import Limits

    assert Limits().max_request_bytes < 2 * 1024 * 1024
    assert Limits.from_dict(Limits(max_request_bytes=5).to_dict()) == Limits(max_request_bytes=5)
