"""The agent the tracing tests pause here and resume here or in a fresh process (child.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from interlude import Agent, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.models import Model
from interlude.sessions import SQLiteStore

deployed: list[str] = []


@tool
def deploy(service: str) -> str:
    """Deploy a service.

    Args:
        service: The service.
    """
    deployed.append(service)
    return f"{service} deployed"


def approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", reason="deploy?") is not True:
        event.cancel("not approved")


def build(model: Model, db: str | None = None, key: str | None = None) -> Agent:
    """The agent "ops", on a SQLite session "s-1" when ``db`` is given."""
    store = None if db is None else SQLiteStore(db)
    agent = Agent(
        model,
        tools=[deploy],
        name="ops",
        session=store,
        session_id=None if db is None else "s-1",
        signing_key=key,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON data (ids as hex)."""
    assert span.context is not None
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent": None if span.parent is None else f"{span.parent.span_id:016x}",
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [[e.name, dict(e.attributes or {})] for e in span.events],
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
    }
