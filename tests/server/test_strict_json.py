"""An answer body that names a key twice is refused, not read as its last value."""

from __future__ import annotations

from starlette.testclient import TestClient

from interlude.sessions import Inbox

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
