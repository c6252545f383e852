"""POST /ag-ui/{agent}: a run's events, its pause as the interrupt outcome, and resume[]
checked as resume checks answers, with every refusal a RUN_ERROR that changes nothing."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from interlude.ag_ui import create_endpoint
from interlude.sessions import SQLiteStore

from .agui_app import app
from .conftest import ANA, BO, TOKENS, events_of, post, ran


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "agui.db"


@pytest.fixture
def client(store_path: Path, runs: Path) -> Iterator[TestClient]:
    with TestClient(create_endpoint(app, f"sqlite:///{store_path}", tokens=TOKENS)) as c:
        yield c


def stored(store_path: Path, thread: str) -> Any:
    async def load() -> Any:
        store = SQLiteStore(store_path)
        try:
            return await store.load(thread), await store.audit_trail(thread)
        finally:
            store.close()

    return asyncio.run(load())


def run(thread: str, prompt: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [] if prompt is None else [{"id": "u1", "role": "user", "content": prompt}]
    return {
        "threadId": thread,
        "runId": f"run-{time.monotonic_ns()}",
        "messages": messages,
        **extra,
    }


def outcome(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", events
    return events[-1]["outcome"]


def resume(*entries: tuple[str, Any], status: str = "resolved") -> list[dict[str, Any]]:
    return [{"interruptId": i, "status": status, "payload": p} for i, p in entries]


def test_a_pause_ends_with_every_question_and_resume_runs_each_tool_once(
    client: TestClient, runs: Path, store_path: Path
) -> None:
    events = post(client, run("t1", "both"))
    types = [e["type"] for e in events]
    assert types.count("TOOL_CALL_START") == 2 and types.count("TOOL_CALL_END") == 2
    paused = outcome(events)
    assert paused["type"] == "interrupt"
    deploy, refund = paused["interrupts"]
    assert (deploy["reason"], deploy["toolCallId"], deploy["message"]) == (
        "approve",
        "c1",
        "may I run deploy?",
    )
    assert deploy["responseSchema"] == {"type": "boolean"}
    assert refund["responseSchema"]["required"] == ["approve", "cap"]
    assert ran(runs) == []

    events = post(
        client,
        run(
            "t1", resume=resume((deploy["id"], True), (refund["id"], {"approve": True, "cap": 900}))
        ),
    )
    done = outcome(events)
    assert done == {"type": "success"}
    assert events[-1]["result"] == "Done: success: deployed web; success: refunded 500"
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert sorted((r["toolCallId"], r["content"]) for r in results) == [
        ("c1", "deployed web"),
        ("c2", "refunded 500"),
    ]
    assert sorted(ran(runs)) == ["deploy web", "refund A-1 500"]
    _, audit = stored(store_path, "t1")
    assert [(a["interrupt_id"], a["by"]) for a in audit] == [
        (deploy["id"], "ana"),
        (refund["id"], "ana"),
    ]


def test_a_partial_resume_sends_the_open_question_again(client: TestClient, runs: Path) -> None:
    deploy, refund = outcome(post(client, run("t1", "both")))["interrupts"]
    again = outcome(post(client, run("t1", resume=resume((deploy["id"], True)))))
    assert again["type"] == "interrupt" and [q["id"] for q in again["interrupts"]] == [refund["id"]]
    # A run with neither resume nor a new message lists them too; a new prompt is refused.
    assert outcome(post(client, run("t1")))["interrupts"] == again["interrupts"]
    refused = post(client, run("t1", "deploy"))
    assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "AgentPausedError"
    done = post(client, run("t1", resume=resume((refund["id"], {"approve": False, "cap": 0}))))
    assert outcome(done) == {"type": "success"}
    assert ran(runs) == ["deploy web"]
    assert "refund not approved" in done[-1]["result"]


def test_cancelled_declines(client: TestClient, runs: Path) -> None:
    (question,) = outcome(post(client, run("t1", "deploy")))["interrupts"]
    done = post(client, run("t1", resume=resume((question["id"], None), status="cancelled")))
    assert outcome(done) == {"type": "success"} and "declined" in done[-1]["result"]
    assert ran(runs) == []


def _refusals(deploy: dict[str, Any], refund: dict[str, Any]) -> dict[str, Any]:
    return {
        "UnknownInterruptError": resume(("v1:before_tool_call:c9:nope", True)),
        "ResumeInputError": resume((deploy["id"], True), (deploy["id"], False)),  # twice
        "AnswerValidationError": resume((refund["id"], {"approve": "yes", "cap": -1})),
        "StaleAnswerError": [
            {
                "interruptId": deploy["id"],
                "status": "resolved",
                "payload": True,
                "metadata": {"digest": "sha256:" + "0" * 64},
            }
        ],
    }


@pytest.mark.parametrize(
    "kind",
    ["UnknownInterruptError", "ResumeInputError", "AnswerValidationError", "StaleAnswerError"],
)
def test_each_bad_resume_is_a_run_error_that_changes_nothing(
    kind: str, client: TestClient, runs: Path, store_path: Path
) -> None:
    deploy, refund = outcome(post(client, run("t1", "both")))["interrupts"]
    before = stored(store_path, "t1")
    events = post(client, run("t1", resume=_refusals(deploy, refund)[kind]))
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    error = events[-1]
    if kind == "StaleAnswerError":  # a shown digest that no longer matches
        assert "changed" in error["message"] or "digest" in error["message"], error
    else:
        assert error["code"] == kind, error
    assert stored(store_path, "t1") == before and ran(runs) == []


def test_an_already_answered_question_is_refused_naming_who_answered(
    client: TestClient, runs: Path, store_path: Path
) -> None:
    deploy, _ = outcome(post(client, run("t1", "both")))["interrupts"]
    post(client, run("t1", resume=resume((deploy["id"], True))))
    before = stored(store_path, "t1")
    events = post(client, run("t1", resume=resume((deploy["id"], True))), token=BO)
    assert (
        events[-1]["type"] == "RUN_ERROR" and "already answered (by ana)" in events[-1]["message"]
    )
    assert stored(store_path, "t1") == before and ran(runs) == ["deploy web"]


def test_an_expired_question_is_refused(client: TestClient, runs: Path, store_path: Path) -> None:
    (question,) = outcome(post(client, run("t1", "hurry")))["interrupts"]
    assert question["expiresAt"].endswith("Z")
    time.sleep(1.1)
    before = stored(store_path, "t1")
    events = post(client, run("t1", resume=resume((question["id"], True))))
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "InterruptExpiredError"
    assert stored(store_path, "t1") == before and ran(runs) == []


def test_a_forged_pause_is_refused_when_pauses_are_signed(
    client: TestClient, runs: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    monkeypatch.setenv("INTERLUDE_TEST_SIGNING_KEY", "k" * 32)
    (question,) = outcome(post(client, run("t1", "deploy")))["interrupts"]
    with sqlite3.connect(store_path) as db:  # someone with the database edits the tool input
        (text,) = db.execute("select pause from sessions where id = 't1'").fetchone()
        pause = json.loads(text)
        pause["step"]["calls"][0]["tool_use"]["input"]["service"] = "prod"
        db.execute("update sessions set pause = ? where id = 't1'", (json.dumps(pause),))
    events = post(client, run("t1", resume=resume((question["id"], True))))
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "StateIntegrityError"
    assert ran(runs) == []


def test_http_refusals_come_before_the_stream(client: TestClient) -> None:
    body = run("t1", "deploy")
    assert client.post("/ag-ui/ops", json=body).status_code == 401
    wrong = {"Authorization": "Bearer not-a-token-0123456789"}
    assert client.post("/ag-ui/ops", json=body, headers=wrong).status_code == 401
    ok = {"Authorization": f"Bearer {ANA}"}
    missing = client.post("/ag-ui/nobody", json=body, headers=ok)
    assert missing.status_code == 404 and "ops" in missing.json()["error"]
    bad = client.post("/ag-ui/ops", json={"threadId": "t1"}, headers=ok)
    assert bad.status_code == 422 and "runId" in bad.json()["error"]


def test_the_stream_is_server_sent_events(client: TestClient) -> None:
    response = client.post(
        "/ag-ui/ops", json=run("t1", "deploy"), headers={"Authorization": f"Bearer {ANA}"}
    )
    assert response.headers["content-type"].startswith("text/event-stream")
    assert [e["type"] for e in events_of(response.text)][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
