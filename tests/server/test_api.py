"""The JSON API through Starlette's test client: auth, listing, one session, recording."""

from __future__ import annotations

import asyncio

from starlette.testclient import TestClient

from interlude import Inbox, Worker

from . import inbox_app
from .conftest import ANA, BO, bearer


def test_no_token_or_a_wrong_one_gets_401_and_no_data(client: TestClient, store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    wrong = "x" * len(ANA)
    for headers in ({}, {"Authorization": f"Bearer {wrong}"}, {"Authorization": ANA}):
        for r in (
            client.get("/api/pending", headers=headers),
            client.get("/api/sessions/s1", headers=headers),
            client.post("/api/sessions/s1/answers", json={"answers": {}}, headers=headers),
            client.get("/events", headers=headers),
        ):
            assert r.status_code == 401, (r.request.url, headers)
            assert "s1" not in r.text and "deploy" not in r.text
    assert Inbox(store_url).session("s1").recorded == []


def test_pending_lists_what_was_shown_with_filters(client: TestClient, store_url: str) -> None:
    ops = inbox_app.pause("ops", "s1", store_url)
    refund = inbox_app.pause("refunds", "s2", store_url)
    r = client.get("/api/pending", headers=bearer())
    assert r.status_code == 200
    rows = {row["question_id"]: row for row in r.json()["pending"]}
    assert set(rows) == {ops, refund}
    assert rows[ops]["id"] == f"s1/{ops}"  # the key names its session
    assert rows[ops]["session"] == "s1" and rows[ops]["agent"] == "ops"
    assert rows[ops]["tool"] == "deploy" and rows[ops]["input"] == inbox_app.CALLS["deploy"]
    assert rows[ops]["reason"] == {"question": "May the agent run deploy?"}
    assert rows[ops]["response_schema"] is None
    assert rows[refund]["response_schema"]["properties"]["cap"]["minimum"] == 0
    assert rows[ops]["shown"].startswith("sha256:")

    def ids(**query: str) -> set[str]:
        got = client.get("/api/pending", params=query, headers=bearer())
        assert got.status_code == 200, got.text
        return {row["question_id"] for row in got.json()["pending"]}

    assert ids(agent="refunds") == {refund}
    assert ids(tool="deploy") == {ops}
    assert ids(name="refund") == {refund}
    assert ids(older_than="3600") == set()
    assert ids(expiring_within="3601") == {refund}  # the refund's deadline is in an hour
    assert ids(expiring_within="60") == set()
    assert rows[refund]["expires_at"] == rows[refund]["raised_at"] + 3600
    assert rows[refund]["expired"] is False and rows[ops]["expires_at"] is None
    assert len(ids(limit="1")) == 1
    for bad in ({"limit": "0"}, {"older_than": "soon"}, {"expiring_within": "-1"}):
        assert client.get("/api/pending", params=bad, headers=bearer()).status_code == 400


def test_session_shows_conversation_questions_and_audit(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    r = client.get("/api/sessions/s1", headers=bearer())
    assert r.status_code == 200
    body = r.json()
    assert body["session"] == "s1" and body["agent"] == "ops"
    assert [(q["id"], q["question_id"]) for q in body["interrupts"]] == [(f"s1/{iid}", iid)]
    assert body["messages"][0]["role"] == "user"
    assert body["recorded"] == [] and body["audit"] == []
    assert body["running"] is False and body["stopped"] is False
    assert client.get("/api/sessions/nope", headers=bearer()).status_code == 404
    assert client.get("/api/sessions/..%2Fetc", headers=bearer()).status_code == 404


def test_record_then_a_worker_runs_the_tool_once_as_the_approver(
    client: TestClient, store_url: str
) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    shown = client.get("/api/pending", headers=bearer(BO)).json()["pending"][0]["shown"]
    r = client.post(
        "/api/sessions/s1/answers",
        json={"answers": {iid: True}, "shown": {iid: shown}},
        headers=bearer(BO),
    )
    assert r.status_code == 202, r.text
    (recorded,) = r.json()["recorded"]
    assert (recorded["interrupt_id"], recorded["answer"], recorded["by"]) == (iid, True, "bo")
    assert inbox_app.RUNS == []  # recorded only: the worker runs it

    again = client.post(
        "/api/sessions/s1/answers", json={"answers": {iid: False}}, headers=bearer()
    )
    assert again.status_code == 409

    assert asyncio.run(Worker(inbox_app.app, store_url).run_once()) == 1
    assert inbox_app.RUNS == ["deploy web 1.2.3"]
    session = client.get("/api/sessions/s1", headers=bearer()).json()
    assert session["interrupts"] == [] and session["recorded"] == []
    (entry,) = session["audit"]
    assert (entry["by"], entry["answer"], entry["shown"]) == ("bo", True, shown)
    late = client.post("/api/sessions/s1/answers", json={"answers": {iid: True}}, headers=bearer())
    assert late.status_code == 409  # not paused any more
    assert inbox_app.RUNS == ["deploy web 1.2.3"]


def test_a_typed_answer_that_does_not_fit_is_422_naming_the_field(
    client: TestClient, store_url: str
) -> None:
    iid = inbox_app.pause("refunds", "s2", store_url)
    r = client.post(
        "/api/sessions/s2/answers",
        json={"answers": {iid: {"approve": True, "cap": -5}}},
        headers=bearer(),
    )
    assert r.status_code == 422
    assert r.json()["interrupt_id"] == iid and r.json()["path"] == ["cap"]
    stale = client.post(
        "/api/sessions/s2/answers",
        json={"answers": {iid: {"approve": True, "cap": 9}}, "shown": {iid: "sha256:00"}},
        headers=bearer(),
    )
    assert stale.status_code == 422 and "not the one that was shown" in stale.json()["error"]
    ok = client.post(
        "/api/sessions/s2/answers",
        json={"answers": {iid: {"approve": True, "cap": 1000}}},
        headers=bearer(),
    )
    assert ok.status_code == 202
    assert Inbox(store_url).session("s2").recorded[0].answer == {"approve": True, "cap": 1000}


def test_bad_bodies_and_unknown_targets(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    post = client.post
    h = {**bearer(), "Content-Type": "application/json"}
    assert post("/api/sessions/s1/answers", content=b"{nope", headers=h).status_code == 400
    assert post("/api/sessions/s1/answers", json=[1], headers=h).status_code == 400
    assert post("/api/sessions/s1/answers", json={"answers": 1}, headers=h).status_code == 400
    assert post("/api/sessions/s1/answers", json={"answers": {}}, headers=h).status_code == 400
    extra = {"answers": {iid: True}, "by": "mallory"}
    assert post("/api/sessions/s1/answers", json=extra, headers=h).status_code == 400
    unknown = post("/api/sessions/s1/answers", json={"answers": {"v1:x": True}}, headers=h)
    assert unknown.status_code == 409
    missing = post("/api/sessions/none/answers", json={"answers": {iid: True}}, headers=h)
    assert missing.status_code == 404
    assert Inbox(store_url).session("s1").recorded == []


def test_openapi_describes_every_route_and_the_bearer_scheme(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert set(doc["paths"]) == {
        "/api/pending",
        "/api/sessions/{session_id}",
        "/api/sessions/{session_id}/answers",
    }
    post = doc["paths"]["/api/sessions/{session_id}/answers"]["post"]
    assert {"202", "400", "401", "404", "409", "422"} <= set(post["responses"])
