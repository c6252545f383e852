"""Namespace set-up: the search attributes the agent workflow sets, registered once."""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from ._workflow import SEARCH_ATTRIBUTES

__all__ = ["register_search_attributes"]

_TYPES = {
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}


async def register_search_attributes(client: Client, namespace: str | None = None) -> list[str]:
    """Register on ``namespace`` (the client's by default) the search attributes Interlude's
    workflows set (``SEARCH_ATTRIBUTES``); the names it added (empty when all were there).

    Safe to repeat and to race: a name registered meanwhile by another process counts as
    there. A name registered with another type raises ``ValueError`` naming it. Needs the
    operator API (a dev server allows it; a managed cluster may want them created by an
    administrator: ``temporal operator search-attribute create``)."""
    namespace = namespace or client.namespace
    service = client.operator_service
    listed = await service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    have = dict(listed.custom_attributes)
    missing: dict[str, IndexedValueType.ValueType] = {}
    for name, kind in SEARCH_ATTRIBUTES.items():
        wanted = _TYPES[kind]
        if name not in have:
            missing[name] = wanted
        elif have[name] != wanted:
            found = IndexedValueType.Name(have[name]).removeprefix("INDEXED_VALUE_TYPE_")
            raise ValueError(
                f"search attribute {name} is registered on namespace {namespace!r} as {found}, "
                f"but Interlude needs {kind}"
            )
    if not missing:
        return []
    try:
        await service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    except RPCError as exc:
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise
    return sorted(missing)
