"""PostgresStore's hot statements (a save, a load, the recorded answers a resume reads) sent on
libpq directly: a prepared statement per connection, parameters and results in PostgreSQL's
binary format, encoded and decoded here.

Every pause and resume makes these calls, and through a cursor each costs more client CPU than
the round trip itself: a cursor, a transformer and its adapters per call, the parameters
matched to dumpers one by one (a Python array dumper per list), a loader per column, a wait
that goes through several generator layers. Here a statement is its text with ``$n``
placeholders and one encoder per parameter, decided once; a call encodes its values, sends
Bind/Execute (Parse too on a connection's first use), waits on the socket and reads the
result's cells. The connection stays psycopg's: the pool, the other statements, transactions
and errors work as before (a failed statement raises the psycopg error class of its SQLSTATE).

Connections are opened with ``client_encoding=UTF8``, the encoding texts are sent and read in.
"""

from __future__ import annotations

import asyncio
import re
import struct
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.pq.abc import PGconn, PGresult

__all__ = [
    "BOOL",
    "ENCODERS",
    "LOAD_COLUMNS",
    "FLOAT8",
    "FLOAT8S",
    "INT4",
    "INT8",
    "INT8S",
    "TEXT",
    "TEXTS",
    "Statement",
    "hot",
    "int_of",
    "ints_of",
    "run",
    "statement",
    "text_of",
    "texts_of",
]

Encode = Callable[[Any], bytes]

_I4 = struct.Struct("!i")
_I8 = struct.Struct("!q")
_F8 = struct.Struct("!d")
_HEAD = struct.Struct("!iiIii")  # one dimension: ndim, has nulls, element oid, size, lbound
_EMPTY = struct.Struct("!iiI")  # no dimension: an empty array
_TEXT_OID, _INT8_OID, _FLOAT8_OID = 25, 20, 701


def TEXT(value: str) -> bytes:  # the encoders are named after the SQL types
    return value.encode()


def INT4(value: int) -> bytes:
    return _I4.pack(value)


def INT8(value: int) -> bytes:
    return _I8.pack(value)


def FLOAT8(value: float) -> bytes:
    return _F8.pack(value)


def BOOL(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def _array(oid: int, items: list[bytes | None]) -> bytes:
    if not items:
        return _EMPTY.pack(0, 0, oid)
    parts = [b""]
    nulls = 0
    for item in items:
        if item is None:
            parts.append(b"\xff\xff\xff\xff")
            nulls = 1
        else:
            parts.append(_I4.pack(len(item)))
            parts.append(item)
    parts[0] = _HEAD.pack(1, nulls, oid, len(items), 1)
    return b"".join(parts)


def TEXTS(values: Sequence[str | None]) -> bytes:
    return _array(_TEXT_OID, [None if v is None else v.encode() for v in values])


def INT8S(values: Sequence[int]) -> bytes:
    return _array(_INT8_OID, [_I8.pack(v) for v in values])


def FLOAT8S(values: Sequence[float | None]) -> bytes:
    return _array(_FLOAT8_OID, [None if v is None else _F8.pack(v) for v in values])


def int_of(cell: bytes | None) -> int | None:
    """An int2/int4/int8 cell."""
    return None if cell is None else int.from_bytes(cell, "big", signed=True)


def text_of(cell: bytes | None) -> str | None:
    return None if cell is None else cell.decode()


def _items(cell: bytes) -> list[memoryview | None]:
    """The elements of a one-dimensional binary array (None for NULL)."""
    ndim = _I4.unpack_from(cell, 0)[0]
    if ndim == 0:
        return []
    if ndim != 1:
        raise ValueError(f"expected a one-dimensional array, got {ndim} dimensions")
    view, size, at = memoryview(cell), _I4.unpack_from(cell, 12)[0], 20
    out: list[memoryview | None] = []
    unpack = _I4.unpack_from
    for _ in range(size):
        length = unpack(cell, at)[0]
        at += 4
        if length < 0:
            out.append(None)
        else:
            out.append(view[at : at + length])
            at += length
    return out


def texts_of(cell: bytes | None) -> list[str | None] | None:
    """A text[] cell."""
    if cell is None:
        return None
    return [None if v is None else str(v, "utf-8") for v in _items(cell)]


def ints_of(cell: bytes | None) -> list[int | None] | None:
    """An int4[] or int8[] cell."""
    if cell is None:
        return None
    return [None if v is None else int.from_bytes(v, "big", signed=True) for v in _items(cell)]


@dataclass(frozen=True)
class Statement:
    """A statement's text (``$n`` placeholders) and, in order, the key and encoder of each
    parameter; ``name`` is the prepared statement's name on each connection."""

    name: bytes
    query: bytes
    params: tuple[tuple[str, Encode], ...]

    def encode(self, values: dict[str, Any]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for key, encode in self.params:
            value = values[key]
            out.append(None if value is None else encode(value))
        return out


_PLACEHOLDER = re.compile(r"%\((\w+)\)[bs]")


def statement(name: str, query: bytes, encoders: dict[str, Encode]) -> Statement:
    """The statement of a query written with psycopg's ``%(key)s``/``%(key)b`` placeholders
    (a key used twice is one parameter), each key's value encoded by ``encoders[key]``."""
    keys: list[str] = []

    def number(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in keys:
            keys.append(key)
        return f"${keys.index(key) + 1}"

    text = _PLACEHOLDER.sub(number, query.decode())
    params = tuple((key, encoders[key]) for key in keys)
    return Statement(f"interlude_{name}".encode(), text.encode(), params)


# --- PostgresStore's hot statements --------------------------------------------------------

# The parameters of the statements sent on libpq directly (saves, load, answers), by key.
ENCODERS: dict[str, Encode] = {
    "id": TEXT,
    "expected": INT8,
    "first": INT4,
    "fv": INT4,
    "state": TEXT,
    "pause": TEXT,
    "claim": TEXT,
    "lease": FLOAT8,
    "tools": TEXT,
    "agent": TEXT,
    "keep_pending": BOOL,
    "messages": TEXTS,
    "ids": TEXTS,
    "names": TEXTS,
    "tool_names": TEXTS,
    "raised": FLOAT8S,
    "expires": FLOAT8S,
    "data": TEXTS,
    "audit": TEXTS,
    "applied": INT8S,
    "answered": TEXTS,
    "starts": TEXTS,
}
# The ``load`` query's columns, decoded (as psycopg's binary loaders would read them).
LOAD_COLUMNS: tuple[Callable[[bytes | None], Any], ...] = (
    *(int_of, int_of, text_of, text_of, text_of, int_of),
    *(text_of, text_of, texts_of, int_of, int_of, int_of),
    *(texts_of, ints_of),
    *(ints_of, texts_of, texts_of),  # the recorded answers: seqs, interrupt ids, data
)


def hot(statement: str) -> bool:
    """Whether a statement is sent on libpq directly (see ``_postgres_wire``)."""
    return statement in ("load", "answers") or statement.startswith(("save:", "checked:"))


# The statements each connection has prepared (forgotten with the connection).
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


async def run(conn: AsyncConnection[Any], statement: Statement, values: dict[str, Any]) -> PGresult:
    """Run ``statement`` with ``values`` on ``conn`` (idle, not shared meanwhile): the
    result, all in binary; the psycopg error of its SQLSTATE if it failed."""
    params = statement.encode(values)
    pgconn = conn.pgconn
    prepared = _PREPARED.get(conn)
    if prepared is None:
        prepared = _PREPARED[conn] = set()
    formats = [1] * len(params)
    for _ in range(2):
        if statement.name not in prepared:
            pgconn.send_prepare(statement.name, statement.query)
            _check(pgconn, await _result(pgconn))
            prepared.add(statement.name)
        pgconn.send_query_prepared(statement.name, params, param_formats=formats, result_format=1)
        result = await _result(pgconn)
        # Gone (psycopg sends DEALLOCATE ALL after a rolled-back transaction): refused at Bind,
        # before anything ran, so prepared again and sent again.
        if result is None or result.error_field(_SQLSTATE) != _NO_STATEMENT:
            break
        if pgconn.transaction_status != 0:  # in a transaction (never here): now aborted
            break
        prepared.clear()
    return _check(pgconn, result)


async def _result(pgconn: PGconn) -> PGresult | None:
    """Send what is buffered, wait for the command's results: the last one."""
    loop = asyncio.get_running_loop()
    fd = pgconn.socket
    while pgconn.flush():  # more to send: wait until the socket takes it (or has input)
        await _ready(loop, fd, write=True)
        pgconn.consume_input()
    last = None
    while True:
        pgconn.consume_input()
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                return last
            last = result if last is None or last.status != _FATAL else last
        await _ready(loop, fd, write=False)


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, write: bool) -> None:
    """Wait until ``fd`` is readable (or writable, with ``write``)."""
    ready = loop.create_future()

    def done() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, done)
    if write:
        loop.add_writer(fd, done)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        if write:
            loop.remove_writer(fd)


_FATAL = 7  # pq.ExecStatus.FATAL_ERROR
_SQLSTATE = ord("C")  # pq.DiagnosticField.SQLSTATE
_NO_STATEMENT = b"26000"  # invalid_sql_statement_name
_OK = (1, 2)  # COMMAND_OK, TUPLES_OK


def _check(pgconn: PGconn, result: PGresult | None) -> PGresult:
    if result is not None and result.status in _OK:
        return result
    import psycopg
    from psycopg import errors, pq

    if result is None or pgconn.status != pq.ConnStatus.OK:  # the connection broke
        why = (pgconn.error_message or b"").decode("utf-8", "replace").strip()
        raise psycopg.OperationalError(why or "the connection to the server was lost")
    state = result.error_field(pq.DiagnosticField.SQLSTATE)
    message = (result.error_message or b"").decode("utf-8", "replace").strip()
    try:
        kind = errors.lookup(state.decode()) if state else psycopg.DatabaseError
    except KeyError:
        kind = psycopg.DatabaseError
    raise kind(message or f"the statement failed ({result.status})")
