"""The orchestration's own record: one frozen value, and its JSON form.

A graph or swarm keeps where it stands in a :class:`Record`: the task, how often each node ran
in this invocation, each finished node's last result, the nodes ready to run, and the nodes
started and not yet finished (:class:`NodeRun`), with the questions each waits on. The
orchestration replaces the value (never changes it) and saves it, as JSON, in its session.
The node agents' own conversations and pauses are not in it: they live in the agents' own
sessions (or, without a session, in ``export_state()`` beside the record).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, TypeVar

from .._frozen import freeze, thaw
from .._interrupt import Interrupt
from .._messages import (
    ContentBlock,
    JsonValue,
    Text,
    Usage,
    block_from_dict,
    block_to_dict,
    message_from_dict,
)
from .._result import AgentResult, StopReason
from ..errors import StateFormatError

__all__ = ["FORMAT", "VERSION", "NodeRun", "Phase", "Record", "record_from_json", "record_to_json"]

FORMAT = "interlude.orchestration"
VERSION = 1

Phase = Literal["before", "running", "after"]
"""Where a started node is: in its before-node hooks, running (its agent), in its after-node
hooks (its result kept)."""

Status = Literal["idle", "running", "paused"]

_T = TypeVar("_T")

_STOP_REASONS = frozenset(("end_turn", "max_tokens", "content_filtered", "interrupt", "cancelled"))


def _frozen_map(values: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(values or {}))


Task: TypeAlias = "str | tuple[ContentBlock, ...]"
"""What an orchestration is asked: text, or content blocks (text and images, as an agent's
prompt takes them)."""


def task_text(task: Task | None) -> str:
    """The task's text (of a multimodal task, its text blocks joined), for conditions."""
    if task is None or isinstance(task, str):
        return task or ""
    return "\n".join(b.text for b in task if isinstance(b, Text))


def with_text(task: Task, more: str) -> Task:
    """The task with ``more`` after it (a multimodal task: as a text block of its own)."""
    if isinstance(task, str):
        return task + "\n\n" + more
    return (*task, Text(more))


def task_to_json(task: Task) -> JsonValue:
    return task if isinstance(task, str) else [block_to_dict(b) for b in task]


def task_from_json(data: object, where: str) -> Task | None:
    if data is None or isinstance(data, str):
        return data
    if isinstance(data, list) and data:
        return tuple(block_from_dict(b, f"{where}[{i}]") for i, b in enumerate(data))
    raise StateFormatError(f"{where}: expected text or a list of content blocks")


@dataclass(frozen=True, kw_only=True)  # no slots: see ``but``
class NodeRun:
    """A node started in this invocation and not finished: paused, or running."""

    prompt: Task
    phase: Phase = "before"
    base: int = 0
    """The node agent's message count when the run began: after a crash, more messages ending
    with the agent's reply mean the node had finished."""
    questions: tuple[Interrupt, ...] = ()
    """What it waits on, under the orchestration's ids (empty while it runs)."""
    inner: Mapping[str, str] = field(default_factory=_frozen_map)
    """Orchestration id -> the node agent's own id, for the node's own questions."""
    answers: Mapping[str, JsonValue] = field(default_factory=_frozen_map)
    """Answers given to this run's node-hook questions so far."""
    result: AgentResult | None = None
    """The node's result, kept while its after-node hooks wait on a question."""
    given: Mapping[str, JsonValue] | None = None
    """The answers a resume is delivering to this run (the orchestration's ids), saved with
    the resume's claim before the node is resumed: a recovery delivers them again if the node
    never got them. None while the run waits or runs on its own."""
    by: str | None = None
    """Who gave ``given``."""
    expired: tuple[str, ...] = ()
    """This run's node-hook questions settled by their deadline (``resume_expired``): with a
    default, ``answers`` (or ``given``) holds it; without one, asking it again declines."""
    settle: bool = False
    """The resume on its way settles the node's own expired questions (``resume_expired``)."""
    scope: str | None = None
    """The scope of this run's node-hook question ids, ``<node>.<run number>`` (distinct per
    run of the node, so an answer to one run's question never answers the next run's); None in
    records saved before it existed: the node's name."""

    def but(self, **changes: Any) -> NodeRun:
        """This run with ``changes`` (as ``Record.but``)."""
        return _but(self, changes)

    @property
    def waiting(self) -> bool:
        """Whether it waits on a person (it has questions and no answers on their way)."""
        return bool(self.questions) and self.given is None


@dataclass(frozen=True, kw_only=True)  # no slots: see ``but``
class Record:
    """Where an orchestration stands (see the module docstring)."""

    task: Task | None = None
    status: Status = "idle"
    runs: Mapping[str, int] = field(default_factory=_frozen_map)
    results: Mapping[str, AgentResult] = field(default_factory=_frozen_map)
    order: tuple[str, ...] = ()
    """The nodes in the order they finished (a node in a cycle appears once per run)."""
    ready: tuple[str, ...] = ()
    active: Mapping[str, NodeRun] = field(default_factory=_frozen_map)
    handoffs: int = 0
    handed: tuple[str, str, str] | None = None
    """A swarm's last handoff: (from, to, message)."""
    audit: tuple[Mapping[str, JsonValue], ...] = ()
    """The orchestration's audit trail: one entry per answer given to its ``resume`` (an
    ``AuditEntry``'s fields, with ``node``: the path of nodes the answer went down), and one
    per node undo (named ``"undo"``, see ``_undo``)."""
    began: Mapping[str, int] = field(default_factory=_frozen_map)
    """Each finished node's ``NodeRun.base`` for its last run: where that run begins in the
    node agent's conversation (what a node undo may take back). Empty in records saved before
    it existed."""

    @property
    def questions(self) -> list[Interrupt]:
        """Every question waiting, node by node (not those whose answers are on their way)."""
        return [q for run in self.active.values() if run.waiting for q in run.questions]

    def but(self, **changes: Any) -> Record:
        """This record with ``changes`` (``dataclasses.replace``, without its per-field cost:
        the engine makes one per outcome and per node started)."""
        for name in ("runs", "results", "active", "began"):
            if name in changes:
                changes[name] = _frozen_map(changes[name])
        return _but(self, changes)


def _but(value: _T, changes: dict[str, Any]) -> _T:
    """A copy of the frozen dataclass ``value`` (one without slots) with ``changes``; the
    fields need no checks of their own (no ``__post_init__``)."""
    fields = value.__dataclass_fields__  # type: ignore[attr-defined]
    if not fields.keys() >= changes.keys():
        unknown = sorted(changes.keys() - fields.keys())
        raise TypeError(f"{type(value).__name__} has no field(s) {unknown}")
    new = object.__new__(type(value))
    new.__dict__.update(value.__dict__)
    new.__dict__.update(changes)
    return new


def result_to_json(result: AgentResult) -> dict[str, JsonValue]:
    return {
        "stop_reason": result.stop_reason,
        "message": None if result.message is None else result.message.to_dict(),
        "usage": dict(result.usage.to_dict()),
    }


def result_from_json(data: Any, where: str) -> AgentResult:
    d = _obj(data, where)
    stop = d.get("stop_reason")
    if stop not in _STOP_REASONS:
        raise StateFormatError(f"{where}.stop_reason: unknown stop reason {stop!r}")
    message = d.get("message")
    reason: StopReason = stop
    return AgentResult(
        stop_reason=reason,
        message=None if message is None else message_from_dict(message, f"{where}.message"),
        usage=Usage.from_dict(d.get("usage", {}), f"{where}.usage"),
    )


def _run_to_json(run: NodeRun) -> dict[str, JsonValue]:
    return {
        "prompt": task_to_json(run.prompt),
        "phase": run.phase,
        "base": run.base,
        "questions": [q.to_dict() for q in run.questions],
        "inner": dict(run.inner),
        "answers": {k: thaw(v) for k, v in run.answers.items()},
        "result": None if run.result is None else result_to_json(run.result),
        "given": None if run.given is None else {k: thaw(v) for k, v in run.given.items()},
        "by": run.by,
        "expired": list(run.expired),
        "settle": run.settle,
        "scope": run.scope,
    }


def _run_from_json(data: Any, where: str) -> NodeRun:
    d = _obj(data, where)
    phase = d.get("phase")
    if phase not in ("before", "running", "after"):
        raise StateFormatError(f"{where}.phase: unknown phase {phase!r}")
    prompt, base = task_from_json(d.get("prompt"), f"{where}.prompt"), d.get("base", 0)
    if prompt is None or not isinstance(base, int) or isinstance(base, bool):
        raise StateFormatError(f"{where}: expected a prompt and a whole-number base")
    questions = _list(d.get("questions", []), f"{where}.questions")
    inner, answers = _obj(d.get("inner", {}), where), _obj(d.get("answers", {}), where)
    if not all(isinstance(v, str) for v in inner.values()):
        raise StateFormatError(f"{where}.inner: expected ids")
    result, given, by = d.get("result"), d.get("given"), d.get("by")
    if given is not None:
        given = _frozen_map({k: freeze(v) for k, v in _obj(given, f"{where}.given").items()})
    if by is not None and not isinstance(by, str):
        raise StateFormatError(f"{where}.by: expected a name")
    expired, settle, scope = d.get("expired", []), d.get("settle", False), d.get("scope")
    if not isinstance(settle, bool) or not (scope is None or isinstance(scope, str)):
        raise StateFormatError(f"{where}: expected settle true or false, scope text or null")
    if not all(isinstance(e, str) for e in _list(expired, f"{where}.expired")):
        raise StateFormatError(f"{where}.expired: expected ids")
    return NodeRun(
        prompt=prompt,
        phase=phase,
        base=base,
        questions=tuple(
            Interrupt.from_dict(q, f"{where}.questions[{i}]") for i, q in enumerate(questions)
        ),
        inner=_frozen_map(inner),
        answers=_frozen_map({k: freeze(v) for k, v in answers.items()}),
        result=None if result is None else result_from_json(result, f"{where}.result"),
        given=given,
        by=by,
        expired=tuple(expired),
        settle=settle,
        scope=scope,
    )


def record_to_json(record: Record, kind: str) -> dict[str, JsonValue]:
    """The record as versioned JSON data."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": kind,
        "task": None if record.task is None else task_to_json(record.task),
        "status": record.status,
        "runs": dict(record.runs),
        "results": {n: result_to_json(r) for n, r in record.results.items()},
        "order": list(record.order),
        "ready": list(record.ready),
        "active": {n: _run_to_json(r) for n, r in record.active.items()},
        "handoffs": record.handoffs,
        "handed": None if record.handed is None else list(record.handed),
        "audit": [thaw(e) for e in record.audit],
        "began": dict(record.began),
    }


def record_from_json(data: Any, kind: str, nodes: Mapping[str, object]) -> Record:
    """The record from :func:`record_to_json`; StateFormatError if it is not one of ``kind``
    or names a node this orchestration lacks."""
    d = _obj(data, "record")
    if d.get("format") != FORMAT or d.get("version") != VERSION or d.get("kind") != kind:
        raise StateFormatError(
            f"not a {kind} record of format {FORMAT} version {VERSION}: got format "
            f"{d.get('format')!r}, version {d.get('version')!r}, kind {d.get('kind')!r}"
        )
    status, task = d.get("status"), task_from_json(d.get("task"), "record.task")
    if status not in ("idle", "running", "paused"):
        raise StateFormatError(f"record: bad status {status!r}")
    runs = _obj(d.get("runs", {}), "record.runs")
    results = _obj(d.get("results", {}), "record.results")
    active = _obj(d.get("active", {}), "record.active")
    order = _list(d.get("order", []), "record.order")
    ready = _list(d.get("ready", []), "record.ready")
    handoffs = d.get("handoffs", 0)
    began = _obj(d.get("began", {}), "record.began")
    named = [*runs, *results, *active, *order, *ready, *began]
    unknown = sorted({str(n) for n in named if n not in nodes})
    if unknown:
        raise StateFormatError(f"the record names nodes this {kind} lacks: {unknown}")
    for where, counts in (("runs", runs), ("began", began)):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()):
            raise StateFormatError(f"record.{where}: expected whole numbers")
    if not isinstance(handoffs, int) or isinstance(handoffs, bool):
        raise StateFormatError("record.handoffs: expected a whole number")
    handed = d.get("handed")
    if handed is not None and (
        not isinstance(handed, list)
        or len(handed) != 3
        or not all(isinstance(h, str) for h in handed)
    ):
        raise StateFormatError("record.handed: expected [from, to, message]")
    return Record(
        task=task,
        status=status,
        runs=_frozen_map(runs),
        results=_frozen_map(
            {n: result_from_json(r, f"record.results.{n}") for n, r in results.items()}
        ),
        order=tuple(order),
        ready=tuple(ready),
        active=_frozen_map({n: _run_from_json(r, f"record.active.{n}") for n, r in active.items()}),
        handoffs=handoffs,
        handed=None if handed is None else (handed[0], handed[1], handed[2]),
        audit=tuple(freeze(_obj(e, "record.audit")) for e in _list(d.get("audit", []), "audit")),
        began=_frozen_map(began),
    )


def _obj(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise StateFormatError(f"{where}: expected an object, got {type(data).__name__}")
    return data


def _list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise StateFormatError(f"{where}: expected a list, got {type(data).__name__}")
    return data
