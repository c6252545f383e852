"""The inbox's "Undo to here": the plan first (nothing changes), then, on a CSRF-checked POST,
the undo as the signed-in person; the session page then says where the session stands and
lists the undo's audit entries."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the inbox tests need the [server] extra")

from starlette.testclient import TestClient

from interlude.server import create_app
from interlude.sessions import SQLiteStore

from .test_cli_undo import UNDONE, app, booked, plain
from .undo_agent import EFFECTS

ANA = "ana-token-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_effects() -> Iterator[None]:
    EFFECTS.clear()
    yield
    EFFECTS.clear()


def login(client: TestClient) -> None:
    page = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    r = client.post("/login", data={"token": ANA, "csrf": token.group(1)}, follow_redirects=False)
    assert r.status_code == 303


def form_of(html: str) -> dict[str, str]:
    """The confirmation form's hidden fields."""
    form = html[html.index('id="undo-form"') :]
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    to = re.search(r'name="to" value="([^"]+)"', form)
    shown = re.search(r'name="shown" value="([^"]+)"', form)
    assert csrf and to and shown
    return {"csrf": csrf.group(1), "to": to.group(1), "shown": shown.group(1)}


def stored(tmp_path: Path) -> Any:
    with SQLiteStore(tmp_path / "s.db") as store:
        return asyncio.run(store.load("trip-1"))


def test_the_plan_first_then_the_undo_once_with_a_valid_form(tmp_path: Path) -> None:
    url = booked(tmp_path)
    before = stored(tmp_path)
    with TestClient(create_app(url, app, tokens={ANA: "ana"})) as client:
        login(client)
        page = client.get("/sessions/trip-1").text
        assert "/sessions/trip-1/undo?to=m4" in page and "Undo to here" in page
        assert "/sessions/trip-1/undo?to=m11" not in page  # nothing ran after the last reply
        shown = client.get("/sessions/trip-1/undo?to=m4")
        assert shown.status_code == 200
        plan = shown.text
        for comp in ("mail.undo", "car.undo", "cancel_hotel"):
            assert f"<code>{comp}</code>" in plan
        assert plan.count('class="step"') == 3 and "first 5 of 12 messages" in plan
        assert "stopped before its next step" in plan and "interlude recover" in plan
        assert EFFECTS == [] and stored(tmp_path) == before  # a look changes nothing

        form = form_of(plan)
        refused = client.post("/sessions/trip-1/undo", data={"to": "m4"})
        assert refused.status_code == 403 and "forged or stale" in refused.text
        forged = client.post("/sessions/trip-1/undo", data={**form, "csrf": "nope"})
        assert forged.status_code == 403
        logout = re.search(r'name="csrf" value="([^"]+)"', page)  # another form's token
        assert logout and logout[1] != form["csrf"]
        other = client.post("/sessions/trip-1/undo", data={**form, "csrf": logout[1]})
        assert other.status_code == 403
        assert EFFECTS == [] and stored(tmp_path) == before

        done = client.post("/sessions/trip-1/undo", data=form, follow_redirects=False)
        assert done.status_code == 303
        assert done.headers["location"] == "/sessions/trip-1?undone=m4"
        assert EFFECTS == UNDONE
        after = client.get(done.headers["location"]).text
        assert "Undone to m4: the session stands there, stopped before its next step" in after
        assert "ana undid c5 (mail) by mail.undo: success" in after
        assert "ana undid c3 (hotel) by cancel_hotel" in after
        assert "it stands at m4, where it was undone to" in after
        assert "Undo to here" not in after  # a stopped run: no undo starts there

        again = client.post("/sessions/trip-1/undo", data=form)
        assert again.status_code == 409 and "holds a stopped run" in again.text
    assert EFFECTS == UNDONE  # once
    undo = [a for a in stored(tmp_path).audit if a["name"] == "undo"]
    assert [(a["answer"]["call"], a["by"]) for a in undo] == [
        ("c5", "ana"),
        ("c4", "ana"),
        ("c3", "ana"),
    ]
    assert len(stored(tmp_path).messages) == 5


def test_a_call_without_a_compensation_is_left_only_when_ticked(tmp_path: Path) -> None:
    url = booked(tmp_path, with_plain=True)
    before = stored(tmp_path)
    with TestClient(create_app(url, plain, tokens={ANA: "ana"})) as client:
        login(client)
        plan = client.get("/sessions/trip-1/undo?to=m4").text
        assert "The undo cannot run as asked" in plan and "c5 (mail) has no compensation" in plan
        assert 'name="skip" value="c5">' in plan  # unticked
        unknown = client.get("/sessions/trip-1/undo?to=m99")
        assert unknown.status_code == 404 and "no checkpoint" in unknown.text
        assert plan.count('class="step"') == 2
        form = form_of(plan)
        refused = client.post("/sessions/trip-1/undo", data=form)
        assert refused.status_code == 409 and "has no compensation" in refused.text
        assert EFFECTS == [] and stored(tmp_path) == before
        ticked = client.get("/sessions/trip-1/undo?to=m4&skip=c5").text
        assert "cannot run as asked" not in ticked and 'value="c5" checked' in ticked
        done = client.post(
            "/sessions/trip-1/undo", data={**form, "skip": "c5"}, follow_redirects=False
        )
        assert done.status_code == 303
        assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights"]
        after = client.get(done.headers["location"]).text
        assert "ana left c5 (mail) as it is (undo to m4)" in after


def test_without_the_app_no_undo_is_offered(tmp_path: Path) -> None:
    url = booked(tmp_path)
    with TestClient(create_app(url, tokens={ANA: "ana"})) as client:
        login(client)
        assert "Undo to here" not in client.get("/sessions/trip-1").text
        assert client.get("/sessions/trip-1/undo?to=m4").status_code == 409
    assert EFFECTS == []
