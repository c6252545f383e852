"""A graph's or swarm's state without a session: its record and every node's exported state,
as versioned JSON data (``export_state`` / ``import_state``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._messages import JsonValue
from ..errors import AgentBusyError, ConfigurationError, StateFormatError, StateMismatchError
from ._record import VERSION, record_from_json, record_to_json

if TYPE_CHECKING:
    from ._base import Orchestration

__all__ = ["export_state", "import_state"]

_EXPORT = "interlude.orchestration-state"


def export_state(self: Orchestration) -> dict[str, JsonValue]:
    """The record and every node's state (see ``Orchestration.export_state``)."""
    if self._running:
        raise AgentBusyError(f"cannot export state while the {self.kind} runs")
    self._load_sync()
    return {
        "format": _EXPORT,
        "version": VERSION,
        "name": self.name,
        "record": record_to_json(self.record, self.kind),
        "nodes": {n: node.export_state() for n, node in self.nodes.items()},
    }


def import_state(self: Orchestration, data: Mapping[str, JsonValue]) -> None:
    """Load ``data`` into ``self`` (see ``Orchestration.import_state``); nothing changes when
    it does not fit."""
    if self._running:
        raise AgentBusyError(f"cannot import state while the {self.kind} runs")
    if self._store is not None:
        raise ConfigurationError(
            f"this {self.kind}'s state comes from its session; import into one without"
        )
    if not isinstance(data, Mapping) or data.get("format") != _EXPORT:
        raise StateFormatError(f"not an exported {self.kind} state")
    if data.get("version") != VERSION:
        raise StateFormatError(f"unknown version {data.get('version')!r}")
    if data.get("name") != self.name:
        raise StateMismatchError(
            f"the state was saved by {data.get('name')!r}; this {self.kind} is {self.name!r}"
        )
    record = record_from_json(data.get("record"), self.kind, self.nodes)
    states = data.get("nodes")
    if not isinstance(states, Mapping) or set(states) != set(self.nodes):
        raise StateMismatchError(f"the state's nodes are not this {self.kind}'s nodes")
    copies = {name: node.import_state(states[name]) for name, node in self.nodes.items()}
    for name, copy in copies.items():
        self.nodes[name].adopt(copy)  # type: ignore[arg-type]
    self.record = record
