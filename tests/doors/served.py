"""The door tests' harness: ``interlude serve --app tests.doors.doors_app:app`` in a
subprocess (the inbox page and JSON API, AG-UI and A2A on one port), and a plain HTTP client
for each door.

Each door answers with its own wire shape; the helpers return it as the door gave it (the
inbox's status and JSON body, AG-UI's events, A2A's JSON-RPC reply) so a test reads the
refusal ``code`` where that door puts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support import Started, free_port, started
from tests.support.processes import ROOT

APP = "tests.doors.doors_app:app"
"""The ``--app`` of the serving processes and of the command (run from the repository)."""

ANA = "doors-token-ana-0123456789abcdef"
BO = "doors-token-bo-0123456789abcdef"
CY = "doors-token-cy-0123456789abcdef"
TOKENS: dict[str, Any] = {
    ANA: {"name": "ana", "groups": ["ops"]},
    BO: {"name": "bo", "groups": ["ops"]},
    CY: {"name": "cy", "groups": []},  # a token holder in no group
}


@dataclass
class Served:
    """``interlude serve --app tests.doors.doors_app:app`` on the SQLite file ``db`` (no worker
    unless ``args`` asks for one: a test applies recorded answers itself, when it chooses)."""

    db: Path
    env: dict[str, str]
    args: tuple[str, ...] = ()
    """More options of ``serve`` (``--worker``, ``--poll``)."""
    port: int = field(default_factory=free_port)
    running: Started | None = None
    _stack: ExitStack = field(default_factory=ExitStack)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Served:
        """Start it, and return once it accepts connections (its output in the failure)."""
        tokens = self.db.with_name("tokens.json")
        tokens.write_text(json.dumps(TOKENS))
        args = ["--store", f"sqlite:///{self.db}", "--app", APP, "serve"]
        args += ["--port", str(self.port), "--tokens", str(tokens), *self.args]
        argv = [sys.executable, "-m", "interlude", *args]
        self.running = self._stack.enter_context(
            started(argv, port=self.port, env=_env(self.env), what="interlude serve")
        )
        return self

    def stop(self) -> None:
        self._stack.close()


def _env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment (``$DOORS_EFFECTS`` among it), and ``extra``."""
    env = {**os.environ, **extra, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("INTERLUDE_STORE", None)
    return env


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- the inbox's JSON API ----------------------------------------------------------------


def inbox_answer(
    url: str, token: str, session: str, answers: dict[str, Any], **extra: Any
) -> httpx.Response:
    """``POST /api/sessions/{session}/answers``: 202 when recorded for a worker."""
    return httpx.post(
        f"{url}/api/sessions/{session}/answers",
        json={"answers": answers, **extra},
        headers=bearer(token),
        timeout=30,
    )


def inbox_session(url: str, token: str, session: str) -> dict[str, Any]:
    got = httpx.get(f"{url}/api/sessions/{session}", headers=bearer(token), timeout=30)
    assert got.status_code == 200, got.text
    return dict(got.json())


# --- AG-UI ---------------------------------------------------------------------------------


def agui_run(
    url: str,
    token: str,
    agent: str,
    thread: str,
    *,
    prompt: str | None = None,
    resume: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One AG-UI run (``POST /ag-ui/{agent}``): its events, RUN_STARTED to RUN_FINISHED or
    RUN_ERROR."""
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": uuid.uuid4().hex,
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if prompt is not None:
        body["messages"] = [{"id": uuid.uuid4().hex, "role": "user", "content": prompt}]
    if resume is not None:
        body["resume"] = resume
    response = httpx.post(
        f"{url}/ag-ui/{agent}",
        json=body,
        headers={**bearer(token), "Accept": "text/event-stream"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    lines = response.text.splitlines()
    return [json.loads(x[len("data: ") :]) for x in lines if x.startswith("data: ")]


def agui_interrupts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The interrupts a run's RUN_FINISHED lists (it must have paused)."""
    last = events[-1]
    assert last["type"] == "RUN_FINISHED", last
    assert last["outcome"]["type"] == "interrupt", last
    return list(last["outcome"]["interrupts"])


def agui_entry(interrupt_id: str, payload: Any, **extra: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload, **extra}


# --- A2A (JSON-RPC, by hand: the wire as any client sends it) -------------------------------


def a2a_send(
    url: str,
    token: str,
    agent: str,
    *,
    text: str | None = None,
    data: Any = None,
    task_id: str = "",
    context_id: str = "",
) -> dict[str, Any]:
    """A ``SendMessage`` to ``/a2a/{agent}/``: the JSON-RPC reply (``result`` or ``error``)."""
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"text": text})
    if data is not None:
        parts.append({"data": data})
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    request = {
        "jsonrpc": "2.0",
        "id": uuid.uuid4().hex,
        "method": "SendMessage",
        "params": {"message": message},
    }
    headers = {**bearer(token), "A2A-Version": "1.0"}
    response = httpx.post(f"{url}/a2a/{agent}/", json=request, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def a2a_task(reply: dict[str, Any]) -> dict[str, Any]:
    """The task of a successful reply (AssertionError naming the error otherwise)."""
    assert "error" not in reply, reply
    task = reply["result"]["task"]
    return dict(task)


def a2a_state(reply: dict[str, Any]) -> str:
    return str(a2a_task(reply)["status"]["state"])


def a2a_questions(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions of a task in input-required."""
    for part in a2a_task(reply)["status"]["message"]["parts"]:
        if "data" in part:
            return list(part["data"]["questions"])
    raise AssertionError(f"no questions in {reply}")


def a2a_code(reply: dict[str, Any]) -> str | None:
    """The refusal code of a JSON-RPC error reply: ``error.data.code`` (the a2a-sdk sends an
    error's data as a list of ``google.rpc.ErrorInfo``, whose ``metadata`` holds it: read there
    too). None when the reply is not an error or its error carries no code."""
    error = reply.get("error")
    if error is None:
        return None
    data = error.get("data")
    if isinstance(data, dict):
        return data.get("code") or (data.get("metadata") or {}).get("code")
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict):
                code = item.get("code") or (item.get("metadata") or {}).get("code")
                if code:
                    return str(code)
    return None


# --- the command line (an operator's door: no token, no groups) ----------------------------


def interlude(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``interlude --store STORE --app tests.doors.doors_app:app ARGS... --json`` in a
    subprocess, as an operator runs it on the served store."""
    argv = [sys.executable, "-m", "interlude", "--store", store_url, "--app", APP]
    return subprocess.run(
        [*argv, *args, "--json"],
        cwd=ROOT,
        env=_env({}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- the store -------------------------------------------------------------------------------


def dump(db: Path) -> str:
    """Everything in the SQLite store, as SQL text (compared before and after a refusal)."""
    with sqlite3.connect(db) as conn:
        return "\n".join(conn.iterdump())


def changes(db: Path, before: str) -> list[str]:
    """What changed in the store since :func:`dump` gave ``before``: one line per changed
    column of a row (``table[key].column: old -> new``), per row added or removed; ``[]``
    when nothing did."""
    return _diff(_rows_of(before), _rows(db))


def assert_unchanged(db: Path, before: str, what: object) -> None:
    """Nothing in the store changed since :func:`dump` gave ``before`` (``what`` refused)."""
    changed = changes(db, before)
    assert not changed, f"the store changed refusing {what}:\n" + "\n".join(changed)


Rows = dict[str, dict[tuple[Any, ...], dict[str, Any]]]


def _rows(db: Path) -> Rows:
    """Every table's rows by primary key (the whole row for a table without one)."""
    conn = sqlite3.connect(db)
    try:
        return _rows_in(conn)
    finally:
        conn.close()


def _rows_of(text: str) -> Rows:
    """:func:`_rows` of the store a :func:`dump` text holds (loaded into memory)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(text)
        return _rows_in(conn)
    finally:
        conn.close()


def _rows_in(conn: sqlite3.Connection) -> Rows:
    out: Rows = {}
    tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        columns = [c[1] for c in info]
        key = [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]] or columns
        rows = out[table] = {}
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            values = dict(zip(columns, row, strict=True))
            rows[tuple(values[k] for k in key)] = values
    return out


def _diff(before: Rows, after: Rows) -> list[str]:
    def short(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= 160 else text[:160] + "..."

    out: list[str] = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        for key in sorted(set(old) | set(new), key=repr):
            where = f"{table}[{', '.join(map(str, key))}]"
            if key not in new:
                out.append(f"{where}: removed")
            elif key not in old:
                out.append(f"{where}: added {short(new[key])}")
            else:
                out += [
                    f"{where}.{column}: {short(old[key][column])} -> {short(value)}"
                    for column, value in new[key].items()
                    if old[key].get(column) != value
                ]
    return out


def snapshot(store_url: str, session: str) -> tuple[Any, ...]:
    """The session as stored (version, messages, pause), its recorded answers and its audit
    trail."""
    from interlude.sessions import open_store

    async def read() -> tuple[Any, ...]:
        store = open_store(store_url)
        try:
            stored = await store.load(session)
            assert stored is not None, session
            recorded = [r.to_dict() for r in await store.recorded_answers(session)]
            audit = await store.audit_trail(session)
            return (stored.version, stored.messages, stored.pause), recorded, audit
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()

    return asyncio.run(read())


def audit(store_url: str, session: str) -> list[dict[str, Any]]:
    return list(snapshot(store_url, session)[2])


def recorded(store_url: str, session: str) -> list[dict[str, Any]]:
    return list(snapshot(store_url, session)[1])


def work(store_url: str) -> int:
    """One worker pass over the store (in this process, with the same App): the sessions it
    carried on."""
    from interlude import Worker

    from .doors_app import app

    return asyncio.run(Worker(app, store_url).run_once())
