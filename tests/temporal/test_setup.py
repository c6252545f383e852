"""Registering Interlude's search attributes on a namespace, and the demo's behaviour when no
worker runs it, against the real dev server."""

from __future__ import annotations

import uuid

import pytest


async def _new_namespace(address: str) -> str:
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
    from temporalio.client import Client

    name = f"ns-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(address)
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    return name


async def test_registers_what_is_missing_once(temporal_address: str) -> None:
    from temporalio.client import Client

    from interlude.temporal import SEARCH_ATTRIBUTES, register_search_attributes

    namespace = await _new_namespace(temporal_address)
    client = await Client.connect(temporal_address, namespace=namespace)
    assert await register_search_attributes(client) == sorted(SEARCH_ATTRIBUTES)
    assert await register_search_attributes(client) == []  # safe to repeat
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    assert set(SEARCH_ATTRIBUTES) <= set(listed.custom_attributes)


async def test_an_attribute_registered_with_another_type_is_named(temporal_address: str) -> None:
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.client import Client

    from interlude.temporal import register_search_attributes

    namespace = await _new_namespace(temporal_address)
    client = await Client.connect(temporal_address, namespace=namespace)
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={"InterludePending": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
        )
    )
    with pytest.raises(ValueError, match=r"InterludePending .* as KEYWORD, .* needs Bool"):
        await register_search_attributes(client)


def test_the_demo_says_how_to_start_a_worker_when_none_runs_it(
    temporal_address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No worker polls the queue: the demo waits (here 1 s), then names the command that starts
    one; the workflow stays, to run when a worker comes."""
    import asyncio

    from temporalio.client import Client, WorkflowExecutionStatus

    from interlude.cli import _temporal_demo, main

    monkeypatch.setattr(_temporal_demo, "WAIT_FOR_WORKER", 1.0)
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    session = f"demo-{uuid.uuid4().hex[:8]}"
    argv = ["--temporal", temporal_address, "demo", "--task-queue", queue, "--session", session]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"no worker ran workflow '{session}' within 1 s" in err, err
    assert f"temporal-worker --task-queue {queue}`" in err, err

    async def status() -> WorkflowExecutionStatus | None:
        client = await Client.connect(temporal_address)
        return (await client.get_workflow_handle(session).describe()).status

    assert asyncio.run(status()) == WorkflowExecutionStatus.RUNNING
    assert main(argv) == 1
    assert f"workflow '{session}' already exists" in capsys.readouterr().err
