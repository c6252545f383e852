"""Fuzz the JSON API from its own OpenAPI document (schemathesis), with a valid token: every
response is one the document describes, and none is a server error."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from interlude.server import create_app  # noqa: E402

from . import inbox_app  # noqa: E402
from .conftest import TOKENS, bearer  # noqa: E402


def test_the_api_never_fails_with_a_server_error(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    inbox_app.pause("refunds", "s2", store_url)
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", create_app(store_url, inbox_app.app, tokens=TOKENS)
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 3  # every route of the API is described
    statuses: set[int] = set()
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(headers=bearer())
            statuses.add(response.status_code)
            assert response.status_code < 500, (case.path, response.text)
            case.validate_response(response, headers=bearer())

        fuzz()
    assert inbox_app.RUNS == []  # recording never runs a tool
    assert {200, 404} <= statuses, statuses
