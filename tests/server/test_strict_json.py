"""An answer body that names a key twice is refused, not read as its last value."""

from __future__ import annotations

from starlette.testclient import TestClient

from interlude import Inbox

from . import inbox_app
from .conftest import bearer


def test_a_body_with_a_duplicate_key_is_refused(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    h = {**bearer(), "Content-Type": "application/json"}
    twice = b'{"answers": {"%s": false, "%s": true}}' % (iid.encode(), iid.encode())
    refused = client.post("/api/sessions/s1/answers", content=twice, headers=h)
    assert refused.status_code == 400 and "twice" in refused.json()["error"]
    nested = b'{"answers": {"%s": {"approve": false, "approve": true}}}' % iid.encode()
    assert client.post("/api/sessions/s1/answers", content=nested, headers=h).status_code == 400
    assert Inbox(store_url).session("s1").recorded == []


def test_with_a_signing_key_a_forged_pause_is_never_shown_nor_answered(store_url: str) -> None:
    """The inbox verifies a pause before it uses its questions (their schemas included): a
    pause written without the key (a store writer's) is refused, a signed one is answered."""
    from starlette.testclient import TestClient as Client

    from interlude import Agent
    from interlude.hooks import BeforeInvocationEvent
    from interlude.server import create_app
    from interlude.testing import ScriptedModel

    from .conftest import TOKENS

    key = b"k" * 32
    ids = {}
    for session_id, signing_key in (("signed", key), ("forged", None)):
        agent = Agent(
            ScriptedModel(["ok"]), session=store_url, session_id=session_id, signing_key=signing_key
        )
        agent.hooks.add_callback(
            BeforeInvocationEvent, lambda e: e.interrupt("go", {"q": 1}, response_type=bool)
        )
        [question] = agent("go").interrupts
        ids[session_id] = question.id
    h = {**bearer(), "Content-Type": "application/json"}
    with Client(create_app(store_url, tokens=TOKENS, signing_key=key)) as client:
        assert client.get("/api/sessions/forged", headers=h).status_code == 409
        refused = client.post(
            "/api/sessions/forged/answers", json={"answers": {ids["forged"]: True}}, headers=h
        )
        assert refused.status_code == 409 and "signed" in refused.json()["error"]
        taken = client.post(
            "/api/sessions/signed/answers", json={"answers": {ids["signed"]: True}}, headers=h
        )
        assert taken.status_code == 202
    assert Inbox(store_url).session("forged").recorded == []
