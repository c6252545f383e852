"""The A2A server driven by the a2a-sdk's own client: pauses as input-required tasks, answers
as messages on the same task, tasks read from the sessions by any app instance, refusals."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, ListTasksRequest, Part
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from interlude.a2a import create_a2a_app
from interlude.sessions import open_store
from tests.support import wait_for

from .apps import build_app, effects
from .wire import (
    BASE,
    COMPLETED,
    INPUT_REQUIRED,
    TOKENS,
    data,
    questions,
    result,
    sdk_client,
    send,
)


def serve(db: str, *, signed: bool = False, tokens: dict[str, str] | None = TOKENS) -> object:
    return create_a2a_app(build_app(signed=signed), db, tokens=tokens)


async def test_card_and_bearer_token(db: str) -> None:
    asgi = serve(db)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(asgi), base_url=BASE) as http:  # type: ignore[arg-type]
        card = (await http.get("/a2a/ops/.well-known/agent-card.json")).json()
        assert card["name"] == "ops"
        assert card["supportedInterfaces"][0]["url"] == f"{BASE}/a2a/ops/"
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        refused = await http.post(
            "/a2a/ops/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        )
        assert refused.status_code == 401
        wrong = await http.post(
            "/a2a/ops/", json={}, headers={"Authorization": "Bearer nope-nope-nope-nope"}
        )
        assert wrong.status_code == 401
        assert (await http.get("/a2a/nobody/.well-known/agent-card.json")).status_code == 404


async def test_a_pause_and_an_answer(db: str, effects_file: Path, closing: list[Client]) -> None:
    client = await sdk_client(serve(db), "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    assert task.status.state == INPUT_REQUIRED and task.id == task.context_id
    [question] = questions(task)
    assert question["name"] == "approve" and question["reason"] == "delete /var/log/old.log?"
    assert question["tool_use"]["input"] == {"path": "/var/log/old.log"}
    assert question["digest"].startswith("sha256:") and question["response_schema"] == {
        "type": "boolean"
    }
    assert effects() == []

    done = await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
    assert done.status.state == COMPLETED and result(done) == "Deleted."
    assert effects() == ["delete /var/log/old.log"]
    store = open_store(db)
    [entry] = await store.audit_trail(task.id)
    assert (entry["interrupt_id"], entry["by"], entry["answer"]) == (
        question["question_id"],
        "ana",
        True,
    )
    assert question["id"] == f"{task.id}/{question['question_id']}"  # names its task


async def test_a_yes_in_text_answers_the_one_question(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await sdk_client(serve(db), "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    done = await send(client, Part(text="yes"), task_id=task.id)
    assert done.status.state == COMPLETED and effects() == ["delete /var/log/old.log"]


async def test_several_questions_in_one_message(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await sdk_client(serve(db), "forms")
    closing.append(client)
    task = await send(client, Part(text="Clean up"))
    asked = {q["name"]: q for q in questions(task)}
    assert set(asked) == {"ticket", "note"}
    assert asked["ticket"]["response_schema"] == {"type": "integer"}
    assert asked["note"]["expires_at"] > time.time()
    with pytest.raises(InvalidParamsError, match="AnswerValidationError"):  # typed: refused
        await send(
            client,
            data({"answers": {asked["ticket"]["id"]: "CHG-1", asked["note"]["id"]: "ok"}}),
            task_id=task.id,
        )
    partial = await send(client, data({"answers": {asked["ticket"]["id"]: 42}}), task_id=task.id)
    assert [q["name"] for q in questions(partial)] == ["note"]  # still waits for the other
    done = await send(client, data({"answers": {asked["note"]["id"]: "rotated"}}), task_id=task.id)
    assert done.status.state == COMPLETED and effects() == ["delete /tmp/x"]


async def test_get_and_list_from_another_app_instance(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    first = await sdk_client(serve(db), "ops")
    task_a = await send(first, Part(text="one"))
    task_b = await send(first, Part(text="two"), context_id="ticket-42")
    assert task_b.id == "ticket-42"
    await send(first, Part(text="yes"), task_id=task_a.id)
    other = await sdk_client(serve(db), "ops")  # another application on the same SQLite file
    forms = await sdk_client(serve(db), "forms")
    closing.extend([first, other, forms])

    got = await other.get_task(GetTaskRequest(id="ticket-42"))
    assert got.status.state == INPUT_REQUIRED and questions(got) == questions(task_b)
    listed = await other.list_tasks(ListTasksRequest())
    assert {t.id: t.status.state for t in listed.tasks} == {
        task_a.id: COMPLETED,
        "ticket-42": INPUT_REQUIRED,
    }
    waiting = await other.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))
    assert [t.id for t in waiting.tasks] == ["ticket-42"]
    assert (await forms.list_tasks(ListTasksRequest())).tasks == []  # another agent's tasks
    with pytest.raises(TaskNotFoundError):
        await forms.get_task(GetTaskRequest(id="ticket-42"))

    done = await send(other, Part(text="yes"), task_id="ticket-42")  # answered by the other
    assert done.status.state == COMPLETED and len(effects()) == 2
    with pytest.raises(InvalidParamsError, match="already holds"):  # one task per context
        await send(first, Part(text="again"), context_id="ticket-42")


async def stored(db: str, session_id: str) -> tuple[int, object, list[object]]:
    store = open_store(db)
    session = await store.load(session_id)
    assert session is not None
    return session.version, session.pause, await store.audit_trail(session_id)


async def test_refusals_change_nothing(db: str, effects_file: Path, closing: list[Client]) -> None:
    client = await sdk_client(serve(db), "ops")
    forms = await sdk_client(serve(db), "forms")
    closing.extend([client, forms])
    task = await send(client, Part(text="Free some disk space"))
    [question] = questions(task)
    before = await stored(db, task.id)

    with pytest.raises(InvalidParamsError, match="UnknownInterruptError"):
        await send(client, data({"answers": {"v1:nope": True}}), task_id=task.id)
    with pytest.raises(InvalidParamsError, match="AnswerValidationError"):
        await send(client, data({"answers": {question["id"]: "maybe"}}), task_id=task.id)
    with pytest.raises(InvalidParamsError, match="answers nothing"):
        await send(client, data({"nothing": 1}), task_id=task.id)
    with pytest.raises(InvalidParamsError):  # shown a question that is not the pending one
        await send(
            client,
            data({"answers": {question["id"]: True}, "shown": {question["id"]: "sha256:00"}}),
            task_id=task.id,
        )
    with pytest.raises(TaskNotFoundError):
        await send(client, data({"answers": {question["id"]: True}}), task_id="no-such-task")
    assert await stored(db, task.id) == before and effects() == []

    await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
    after = await stored(db, task.id)
    with pytest.raises(InvalidParamsError, match="AlreadyAnsweredError"):  # a duplicate answer
        await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
    assert await stored(db, task.id) == after and effects() == ["delete /var/log/old.log"]


async def test_an_expired_question_refuses_its_answer(
    db: str, effects_file: Path, monkeypatch: pytest.MonkeyPatch, closing: list[Client]
) -> None:
    monkeypatch.setenv("A2A_NOTE_SECONDS", "0.2")
    client = await sdk_client(serve(db), "forms")
    closing.append(client)
    task = await send(client, Part(text="Clean up"))
    shown = {q["name"]: q for q in questions(task)}
    asked = {name: q["id"] for name, q in shown.items()}
    deadline = shown["note"]["expires_at"]
    wait_for(lambda: time.time() > deadline, what="the note's deadline to pass")
    before = await stored(db, task.id)
    with pytest.raises(InvalidParamsError, match="InterruptExpiredError"):
        await send(
            client, data({"answers": {asked["note"]: "late", asked["ticket"]: 1}}), task_id=task.id
        )
    assert await stored(db, task.id) == before
    settled = await send(client, data({"answers": {}}), task_id=task.id)  # settle the expiry
    assert [q["name"] for q in questions(settled)] == ["ticket"]


async def test_a_forged_pause_is_refused(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await sdk_client(serve(db, signed=True), "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    [question] = questions(task)
    store = open_store(db)
    session = await store.load(task.id)
    assert session is not None and session.pause is not None
    import sqlite3

    path = db.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:  # someone with write access to the store edits the path
        rows = conn.execute("select name from sqlite_master where type='table'").fetchall()
        changed = 0
        for (table,) in rows:
            cols = [c[1] for c in conn.execute(f"pragma table_info({table})")]
            for col in cols:
                changed += conn.execute(
                    f"update {table} set {col} = replace({col}, '/var/log/old.log', '/etc/passwd') "
                    f"where typeof({col}) = 'text' and {col} like '%/var/log/old.log%'"
                ).rowcount
    assert changed
    before = await stored(db, task.id)
    with pytest.raises(InvalidParamsError, match="StateIntegrityError"):
        await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
    assert await stored(db, task.id) == before and effects() == []


async def test_the_inbox_serves_the_app_over_a2a(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """``create_app`` (``interlude serve``) mounts the A2A routes with the inbox's tokens."""
    from interlude.server import create_app

    inbox = create_app(db, build_app(), tokens=TOKENS)
    client = await sdk_client(inbox, "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    done = await send(client, Part(text="yes"), task_id=task.id)
    assert done.status.state == COMPLETED and effects() == ["delete /var/log/old.log"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(inbox), base_url=BASE) as http:  # type: ignore[arg-type]
        assert (await http.post("/a2a/ops/", json={})).status_code == 401


async def test_an_unsigned_pause_is_refused_by_a_signing_server(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """A pause saved without a signature (by an agent without the key, or written by hand) is
    not answered by agents built with a signing key: refused, nothing changed."""
    unsigned = await sdk_client(serve(db, signed=False), "ops")
    signing = await sdk_client(serve(db, signed=True), "ops")
    closing.extend([unsigned, signing])
    task = await send(unsigned, Part(text="Free some disk space"))
    [question] = questions(task)
    before = await stored(db, task.id)
    with pytest.raises(InvalidParamsError, match="StateIntegrityError"):
        await send(signing, data({"answers": {question["id"]: True}}), task_id=task.id)
    with pytest.raises(InvalidParamsError, match="StateIntegrityError"):
        await signing.get_task(GetTaskRequest(id=task.id))
    assert await stored(db, task.id) == before and effects() == []
