"""The web inbox on DBOS runs (``create_app(DBOSInbox(url))``), a worker in another process,
through Starlette's test client: the pending page lists the question, an answer through the
form goes to the run (the tool runs once), refusals map to the statuses the store's give."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the inbox tests need the [server] extra")

from starlette.testclient import TestClient

from tests.server.test_pages import login
from tests.support import Started

from .agents import runs
from .support import paused, prompt, session

TOKENS = {"ana-token-0123456789abcdef": "ana"}
AUTH = {"Authorization": "Bearer ana-token-0123456789abcdef"}


@pytest.fixture
def inbox(dbos_url: str) -> Iterator[TestClient]:
    from interlude.dbos import DBOSInbox
    from interlude.server import create_app

    with TestClient(create_app(DBOSInbox(dbos_url), tokens=TOKENS, poll=0.05)) as client:
        yield client


def _form(html: str, iid: str) -> dict[str, str]:
    at = html.index(f'name="interrupt_id" value="{iid}"')
    form_at = html.rindex("<form", 0, at)
    csrf = re.search(r'name="csrf" value="([^"]+)"', html[form_at:])
    shown = re.search(r'name="shown" value="([^"]+)"', html[at:])
    assert csrf and shown, html
    return {"csrf": csrf.group(1), "interrupt_id": iid, "shown": shown.group(1)}


def test_the_pending_page_lists_the_question_and_the_form_runs_the_tool_once(
    dbos_url: str, worker: Started, inbox: TestClient, tmp_path: Path
) -> None:
    from interlude.dbos import result, start

    path, sid = str(tmp_path / "touch"), session()
    asyncio.run(start(dbos_url, "approve", sid, prompt(("touch", {"path": path}))))
    [question] = asyncio.run(paused(dbos_url, sid))
    login(inbox, next(iter(TOKENS)))
    listing = inbox.get("/")
    assert listing.status_code == 200 and sid in listing.text and "touch" in listing.text

    page = inbox.get(f"/sessions/{sid}")
    assert page.status_code == 200 and "Approve" in page.text
    form = {**_form(page.text, question.interrupt.id), "answer": "true"}
    r = inbox.post(f"/sessions/{sid}/answer", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    out = asyncio.run(result(dbos_url, sid))
    assert out["answered"] == {question.interrupt.id: "ana"} and runs(path) == 1
    [entry] = out["state"]["audit"]
    assert (entry["by"], entry["answer"], entry["shown"]) == (
        "ana",
        True,
        question.interrupt.digest,
    )

    again = inbox.post(f"/sessions/{sid}/answer", data=form)
    assert again.status_code == 409 and runs(path) == 1
    done = inbox.get(f"/api/sessions/{sid}", headers=AUTH).json()
    assert done["workflow"]["status"] == "SUCCESS" and done["interrupts"] == []
    assert [a["by"] for a in done["audit"]] == ["ana"] and done["messages"]


def test_the_api_refuses_as_the_store_does_and_changes_nothing(
    dbos_url: str, worker: Started, inbox: TestClient, tmp_path: Path
) -> None:
    from interlude.dbos import start

    path, sid = str(tmp_path / "touch"), session()
    asyncio.run(start(dbos_url, "typed", sid, prompt(("touch", {"path": path}))))
    [question] = asyncio.run(paused(dbos_url, sid))
    qid = question.interrupt.id
    rows = inbox.get("/api/pending", headers=AUTH).json()["pending"]
    [row] = [r for r in rows if r["session"] == sid]
    assert (row["question_id"], row["agent"], row["tool"]) == (qid, "typed", "touch")

    url = f"/api/sessions/{sid}/answers"
    bad = inbox.post(url, json={"answers": {qid: {"approved": "maybe"}}}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["interrupt_id"] == qid, bad.text
    missing = inbox.post(
        "/api/sessions/no-such-run/answers", json={"answers": {qid: True}}, headers=AUTH
    )
    assert missing.status_code == 404, missing.text
    [still] = asyncio.run(paused(dbos_url, sid))
    assert still.interrupt.id == qid and runs(path) == 0

    ok = inbox.post(url, json={"answers": {qid: {"approved": True}}}, headers=AUTH)
    assert ok.status_code == 202, ok.text
    from interlude.dbos import result

    asyncio.run(result(dbos_url, sid))
    assert runs(path) == 1
