"""FileStore's files: parsing ``head.json``, the ``.jsonl`` files and ``answers.json``, and
opening files in a session folder without following a symbolic link."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from .._json import loads as strict_json
from .._json import loads_all
from .._messages import JsonValue
from ..errors import SessionCorruptError, SessionError, StoreUnavailableError
from ._answers import read_answer
from ._protocol import RecordedAnswer

__all__ = [
    "NOFOLLOW",
    "Head",
    "audit_entries",
    "corrupt",
    "lines",
    "line_start",
    "link_error",
    "open_in",
    "parse_answers",
    "parse_calls",
    "parse_head",
    "read_in",
    "store_errors",
    "write_all",
]

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # O_NOFOLLOW on a link: ELOOP (EMLINK on BSDs)


P = ParamSpec("P")
R = TypeVar("R")

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_UNWELL = _FULL | {errno.EIO, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.ENOMEM}


def os_failure(exc: OSError) -> SessionError:
    """An OSError the file system gave, as the store reports it: StoreUnavailableError when
    the disk is full (or read-only, failing, out of file handles), SessionError otherwise."""
    where = f" ({exc.filename})" if exc.filename else ""
    what = exc.strerror or str(exc)
    if exc.errno in _FULL:
        return StoreUnavailableError(
            f"the file store cannot write: {what}{where}; nothing of this call was kept, free "
            "space and try again"
        )
    if exc.errno in _UNWELL:
        return StoreUnavailableError(f"the file store is unavailable: {what}{where}")
    return SessionError(f"the file store failed: {what}{where}")


def store_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """A FileStore method whose OSErrors are reported as the other stores report theirs."""

    @functools.wraps(fn)
    async def method(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except OSError as exc:
            raise os_failure(exc) from exc

    return method


@dataclass(frozen=True, slots=True)
class Head:
    """A parsed ``head.json``: everything but the messages, and where the messages end."""

    version: int
    format_version: int
    message_count: int
    message_bytes: int
    state: dict[str, JsonValue]
    pause: dict[str, JsonValue] | None
    tools: list[str]
    pending: list[dict[str, JsonValue]]
    claim: dict[str, JsonValue] | None
    agent: str | None
    audit_count: int
    audit_bytes: int
    message_start: int = 0
    """Where the messages begin in ``messages.jsonl``: 0, or past the bytes a rewind left
    behind (it appends a copy of the messages it keeps, so the file stays append-only)."""


def corrupt(session_id: str, path: Path, detail: str) -> SessionCorruptError:
    return SessionCorruptError(f"session {session_id!r} is corrupt: {str(path)!r} {detail}")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_head(session_id: str, path: Path, raw: bytes) -> Head:
    try:
        d: Any = strict_json(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise corrupt(session_id, path, f"is not valid JSON ({exc})") from None
    if not isinstance(d, dict):
        raise corrupt(session_id, path, f"holds a {type(d).__name__}, not an object")
    for key in ("version", "format_version", "message_count", "message_bytes"):
        if not _count(d.get(key)):
            raise corrupt(session_id, path, f"has {key} {d.get(key)!r}, not a count")
    state, pause, tools, pending = d.get("state"), d.get("pause"), d.get("tools"), d.get("pending")
    if not isinstance(state, dict):
        raise corrupt(session_id, path, f"has state {state!r}, not an object")
    if pause is not None and not isinstance(pause, dict):
        raise corrupt(session_id, path, f"has pause {pause!r}, not an object or null")
    claim = d.get("claim")  # absent in heads written before claims were stored
    if claim is not None and not isinstance(claim, dict):
        raise corrupt(session_id, path, f"has claim {claim!r}, not an object or null")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise corrupt(session_id, path, f"has tools {tools!r}, not a list of names")
    agent = d.get("agent")  # absent, like the audit counts, in heads written before them
    if agent is not None and not isinstance(agent, str):
        raise corrupt(session_id, path, f"has agent {agent!r}, not a name or null")
    for key in ("audit_count", "audit_bytes", "message_start"):
        if not _count(d.get(key, 0)):
            raise corrupt(session_id, path, f"has {key} {d.get(key)!r}, not a count")
    if d.get("message_start", 0) > d["message_bytes"]:
        raise corrupt(session_id, path, "has message_start past message_bytes")
    if not isinstance(pending, list) or not all(isinstance(p, dict) for p in pending):
        raise corrupt(session_id, path, "has pending that is not a list of objects")
    return Head(
        d["version"],
        d["format_version"],
        d["message_count"],
        d["message_bytes"],
        state,
        pause,
        tools,
        pending,
        claim,
        agent,
        d.get("audit_count", 0),
        d.get("audit_bytes", 0),
        d.get("message_start", 0),
    )


def lines(session_id: str, path: Path, raw: bytes, size: int, count: int) -> list[Any]:
    """The JSON values of the ``count`` lines in ``size`` bytes that head.json says ``raw``
    (the start of a ``.jsonl`` file) holds; SessionCorruptError if it does not hold them."""
    if len(raw) != size:
        raise corrupt(session_id, path, f"holds {len(raw)} bytes, head.json says {size}")
    lines = raw.split(b"\n")
    if lines.pop() != b"" or len(lines) != count:
        raise corrupt(session_id, path, f"does not hold the {count} lines head.json says")
    together = loads_all(lines)
    if together is not None:
        return together
    values = []  # one of them is not JSON (or not plain JSON): which one
    for number, line in enumerate(lines, 1):
        try:
            values.append(strict_json(line))
        except (ValueError, RecursionError) as exc:
            raise corrupt(session_id, path, f"line {number} is not valid JSON ({exc})") from None
    return values


def line_start(session_id: str, path: Path, raw: bytes, size: int, index: int) -> int:
    """Where line ``index`` begins in ``raw``, the ``size`` bytes of a ``.jsonl`` file that
    head.json counts (``index`` at most the lines it says they hold; 0 is the start);
    SessionCorruptError if they do not hold that many lines."""
    if len(raw) != size:
        raise corrupt(session_id, path, f"holds {len(raw)} bytes, head.json says {size}")
    at = 0
    for _ in range(index):
        end = raw.find(b"\n", at)
        if end < 0:
            raise corrupt(session_id, path, f"holds fewer than the {index} lines head.json says")
        at = end + 1
    return at


def audit_entries(session_id: str, path: Path, raw: bytes, head: Head) -> list[Any]:
    entries = lines(session_id, path, raw, head.audit_bytes, head.audit_count)
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            kind = type(entry).__name__
            raise corrupt(session_id, path, f"line {number} is a {kind}, not an object")
    return entries


def parse_answers(session_id: str, path: Path, raw: bytes) -> tuple[int, list[RecordedAnswer]]:
    """The highest seq given and the recorded answers of an ``answers.json``."""
    try:
        d: Any = strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise corrupt(session_id, path, f"is not valid JSON ({exc})") from None
    if not isinstance(d, dict) or not _count(d.get("last_seq")):
        raise corrupt(session_id, path, "is not an object with a last_seq count")
    items = d.get("answers")
    if not isinstance(items, list):
        raise corrupt(session_id, path, "has answers that are not a list")
    found: list[RecordedAnswer] = []
    for item in items:
        seq = item.get("seq") if isinstance(item, dict) else None
        answer = read_answer(session_id, seq, item, repr(str(path)))
        if answer.seq > d["last_seq"] or (found and answer.seq <= found[-1].seq):
            raise corrupt(session_id, path, f"has answer seq {answer.seq} out of order")
        found.append(answer)
    return d["last_seq"], found


def parse_calls(session_id: str, path: Path, raw: bytes) -> dict[str, str]:
    """The claims of a ``calls.json``: each call key with the session that holds it."""
    try:
        d: Any = strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise corrupt(session_id, path, f"is not valid JSON ({exc})") from None
    if not isinstance(d, dict) or not all(isinstance(v, str) for v in d.values()):
        raise corrupt(session_id, path, "is not an object of call keys and session ids")
    return d


def link_error(session_id: str, path: Path) -> SessionCorruptError:
    return corrupt(
        session_id, path, "is a symbolic link (a session folder holds no links; refused)"
    )


def open_in(session_id: str, folder: Path, dir_fd: int, name: str, flags: int) -> int:
    """Open ``name`` in the session folder (``dir_fd``) without following a link."""
    try:
        return os.open(name, flags | NOFOLLOW, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise link_error(session_id, folder / name) from None
        raise


def read_in(
    session_id: str, folder: Path, dir_fd: int, name: str, size: int = -1, start: int = 0
) -> bytes:
    """Up to ``size`` bytes (all with -1) of ``name`` from byte ``start``; FileNotFoundError if
    there is none."""
    fd = open_in(session_id, folder, dir_fd, name, os.O_RDONLY)
    with open(fd, "rb") as f:
        if start:
            f.seek(start)
        return f.read(size)


def write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
