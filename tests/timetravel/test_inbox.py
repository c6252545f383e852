"""The inbox shows a session's history; a signed-in person forks it at a past question, and
the new session's page asks that question again."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from interlude.server import create_app
from interlude.sessions import SQLiteStore

from .test_fork import recorded
from .tt_agent import RUNS
from .tt_app import app

ANA = "ana-token-0123456789abcdef"


def login(client: TestClient) -> None:
    page = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    r = client.post("/login", data={"token": ANA, "csrf": token.group(1)}, follow_redirects=False)
    assert r.status_code == 303


def fork_form(html: str, at: str) -> dict[str, str]:
    where = html.index(f'name="at" value="{at}"')
    csrf = re.findall(r'name="csrf" value="([^"]+)"', html[:where])
    return {"csrf": csrf[-1], "at": at}


def test_history_and_fork_here(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    _, question = recorded(store, "s")
    store.close()
    url = f"sqlite:///{tmp_path / 's.db'}"
    with TestClient(create_app(url, app, tokens={ANA: "ana"})) as client:
        login(client)
        page = client.get("/sessions/s").text
        assert "<h3>History</h3>" in page and page.count('class="checkpoint"') == 8
        assert "ana answered approve: true" in page and "Fork here" in page
        forged = client.post("/sessions/s/fork", data={"csrf": "nope", "at": question})
        assert forged.status_code == 403
        done = client.post("/sessions/s/fork", data=fork_form(page, question))
        assert done.status_code == 200 and "/sessions/s.fork-" in str(done.url)
        assert question in done.text and "forked from" in done.text
        assert RUNS == []  # nothing ran again
        unknown = client.post("/sessions/s/fork", data={**fork_form(page, question), "at": "m9"})
        assert unknown.status_code == 404 and "no checkpoint" in unknown.text
    # Without the App there is nothing to build the agent with: no button.
    with TestClient(create_app(url, tokens={ANA: "ana"})) as client:
        login(client)
        assert "Fork here" not in client.get("/sessions/s").text
