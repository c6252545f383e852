"""Who may answer, through the JSON API: tokens with groups, questions a person may not answer
(hidden from their list, 403 when answered), escalation after ``escalate_after``, two people
toward a quorum (the worker applies each vote; the tool runs once, after the second), the same
person twice refused, and remembered decisions in the session's JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from interlude import Worker
from interlude.server import create_app, load_tokens

from . import approvals_app as A
from .conftest import bearer

ANA, BO, CY, DEE = (f"{n}-token-0123456789abcdef" for n in ("ana", "bo", "cy", "dee"))
TOKENS_FILE = {
    ANA: {"name": "ana", "groups": ["ops"]},
    BO: {"name": "bo", "groups": ["ops", "leads"]},
    CY: "cy",  # the older form: a name, no groups
    DEE: {"name": "dee", "groups": ["leads"]},
}


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    A.RUNS.clear()
    A.LATE[0] = 0.0
    yield
    A.RUNS.clear()
    A.LATE[0] = 0.0


@pytest.fixture
def http(store_url: str, tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS_FILE))
    with TestClient(create_app(store_url, A.app, tokens=load_tokens(path))) as client:
        yield client


def _work(store_url: str) -> int:
    return asyncio.run(Worker(A.app, store_url).run_once())


def _answer(http: TestClient, token: str, session: str, iid: str, answer: object) -> object:
    return http.post(
        f"/api/sessions/{session}/answers", json={"answers": {iid: answer}}, headers=bearer(token)
    )


def _listed(http: TestClient, token: str) -> list[str]:
    rows = http.get("/api/pending", headers=bearer(token)).json()["pending"]
    return sorted(r["session"] for r in rows)


def test_a_person_sees_and_answers_only_what_their_groups_may(
    http: TestClient, store_url: str
) -> None:
    iid = A.pause("deploys", "deploy-1", store_url)
    A.pause("payments", "pay-1", store_url)  # no approvers: anyone may answer
    assert _listed(http, ANA) == ["deploy-1", "pay-1"]
    assert _listed(http, CY) == ["pay-1"]  # no groups: not the ops question
    assert _listed(http, DEE) == ["pay-1"]  # leads: only once it has escalated

    r = _answer(http, CY, "deploy-1", iid, True)
    assert r.status_code == 403
    assert r.json()["interrupt_id"] == iid
    assert "only members of ops" in r.json()["error"]
    assert _answer(http, DEE, "deploy-1", iid, True).status_code == 403
    session = http.get("/api/sessions/deploy-1", headers=bearer(CY)).json()
    (question,) = session["interrupts"]
    assert question["may_answer"] is False
    assert (question["approvers"], question["quorum"], question["escalated"]) == (
        ["ops"],
        2,
        False,
    )
    assert session["recorded"] == []  # refused: nothing recorded


def test_escalation_lets_the_leads_answer(http: TestClient, store_url: str) -> None:
    A.LATE[0] = 2 * 3600  # the agent's clock: the question was raised two hours ago
    iid = A.pause("deploys", "deploy-2", store_url)
    assert _listed(http, DEE) == ["deploy-2"]
    (question,) = http.get("/api/sessions/deploy-2", headers=bearer(DEE)).json()["interrupts"]
    assert question["escalated"] is True and question["may_answer"] is True
    assert _answer(http, DEE, "deploy-2", iid, True).status_code == 202
    assert _answer(http, CY, "deploy-2", iid, True).status_code == 403  # still not cy


def test_two_approvers_through_the_api_then_the_tool_runs_once(
    http: TestClient, store_url: str
) -> None:
    iid = A.pause("deploys", "deploy-3", store_url)
    assert _answer(http, ANA, "deploy-3", iid, True).status_code == 202
    # bo votes while ana's vote waits for the worker: the queue holds one answer per question
    busy = _answer(http, BO, "deploy-3", iid, True)
    assert busy.status_code == 409
    assert "ana's vote" in busy.json()["error"] and "try again" in busy.json()["error"]

    assert _work(store_url) == 1
    assert A.RUNS == []  # one vote of two: still paused
    (question,) = http.get("/api/sessions/deploy-3", headers=bearer(BO)).json()["interrupts"]
    assert question["votes"] == {"answer": True, "by": ["ana"]}

    again = _answer(http, ANA, "deploy-3", iid, True)  # the same person twice
    assert again.status_code == 409
    assert "ana already approved" in again.json()["error"]
    assert "1 so far: ana" in again.json()["error"]

    assert _answer(http, BO, "deploy-3", iid, True).status_code == 202
    assert _work(store_url) == 1
    assert A.RUNS == ["deploy prod"]  # once, after the second vote
    session = http.get("/api/sessions/deploy-3", headers=bearer(ANA)).json()
    assert session["interrupts"] == []
    assert [(e["by"], e["vote"]) for e in session["audit"]] == [("ana", [1, 2]), ("bo", [2, 2])]


def test_one_decline_settles_a_quorum_question(http: TestClient, store_url: str) -> None:
    iid = A.pause("deploys", "deploy-4", store_url)
    assert _answer(http, ANA, "deploy-4", iid, True).status_code == 202
    assert _work(store_url) == 1
    assert _answer(http, BO, "deploy-4", iid, False).status_code == 202
    assert _work(store_url) == 1
    assert A.RUNS == []
    session = http.get("/api/sessions/deploy-4", headers=bearer(ANA)).json()
    assert session["interrupts"] == [] and session["audit"][-1]["answer"] is False


def test_remembered_decisions_are_in_the_session(http: TestClient, store_url: str) -> None:
    iid = A.pause("payments", "pay-2", store_url)
    answer = {"approve": True, "remember": "session", "note": "acme is fine"}
    assert _answer(http, CY, "pay-2", iid, answer).status_code == 202
    assert _work(store_url) == 1
    assert A.RUNS == ["pay 120 to acme"]
    session = http.get("/api/sessions/pay-2", headers=bearer(CY)).json()
    assert session["decisions"] == {
        "pay": {"approve": True, "scope": "session", "note": "acme is fine"}
    }


def test_tokens_with_groups_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLUDE_TOKENS", f"{ANA}=ana:ops+leads,{CY}=cy")
    assert load_tokens(None) == {ANA: {"name": "ana", "groups": ["ops", "leads"]}, CY: "cy"}
