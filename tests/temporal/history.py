"""What a workflow's history says about its calls: each model call, tool body and hook run,
as a regular activity (scheduled, then maybe completed) or a local one (a marker, recorded
once it finished)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    activity: str
    """The activity type: interlude.model, interlude.tool, interlude.hook."""
    local: bool
    tool: str = ""
    """The tool of a regular tool activity (its input is in the history; a local one's not)."""
    attempts: int = 0
    """A regular activity's maximum attempts (its retry policy); 0 for a local one."""
    attempt: int = 0
    """The attempt a local activity finished with; 0 for a regular one."""


async def events(client: Any, workflow_id: str) -> list[Any]:
    handle = client.get_workflow_handle(workflow_id)
    return [e async for e in handle.fetch_history_events()]


def calls_in(history: list[Any]) -> list[Call]:
    """The calls of a history, in the order they were scheduled (a local one: finished)."""
    out = []
    for e in history:
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            data = json.loads(a.input.payloads[0].data) if a.input.payloads else {}
            tool = data.get("tool", "") if isinstance(data, dict) else ""
            out.append(Call(a.activity_type.name, False, tool, a.retry_policy.maximum_attempts))
        elif e.HasField("marker_recorded_event_attributes"):
            m = e.marker_recorded_event_attributes
            if m.marker_name != "core_local_activity":
                continue
            data = json.loads(m.details["data"].payloads[0].data)
            out.append(Call(data["activity_type"], True, attempt=int(data["attempt"])))
    return out


async def calls_of(client: Any, workflow_id: str) -> list[Call]:
    return calls_in(await events(client, workflow_id))


def finished_calls(history: list[Any]) -> int:
    """Calls finished: regular activities completed, local ones recorded."""
    return sum(
        e.HasField("activity_task_completed_event_attributes")
        or (
            e.HasField("marker_recorded_event_attributes")
            and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
        )
        for e in history
    )


def shape(history: list[Any]) -> dict[str, int]:
    """Events, workflow tasks, regular activities and local ones of a history."""
    kinds = Counter(e.WhichOneof("attributes") for e in history)
    found = calls_in(history)
    return {
        "events": len(history),
        "workflow_tasks": kinds["workflow_task_completed_event_attributes"],
        "activities": sum(not c.local for c in found),
        "local_activities": sum(c.local for c in found),
    }
