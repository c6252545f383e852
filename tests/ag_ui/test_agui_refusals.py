"""Resumes an AG-UI client sends that Interlude refuses: each ends the run with RUN_ERROR (a
code naming the kind), runs nothing, and leaves the stored session exactly as it was."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agui_harness import Served, drive, stored

from interlude import Inbox

Entry = dict[str, Any]


def _entry(question: dict[str, Any], payload: Any = True, **extra: Any) -> Entry:
    return {"interruptId": question["id"], "status": "resolved", "payload": payload, **extra}


def _unknown(q: list[dict[str, Any]], served: Served, db: Path) -> list[Entry]:
    return [_entry({"id": "v1:before_tool_call:t9:not-asked"})]


def _duplicate(q: list[dict[str, Any]], served: Served, db: Path) -> list[Entry]:
    return [_entry(q[0]), _entry(q[0])]


def _mistyped(q: list[dict[str, Any]], served: Served, db: Path) -> list[Entry]:
    return [_entry(q[0], {"approve": "yes please"})]


def _stale(q: list[dict[str, Any]], served: Served, db: Path) -> list[Entry]:
    digest = "sha256:" + "0" * 64  # what a client was shown is not what is pending
    return [_entry(q[0], metadata={"interlude": {"digest": digest}})]


def _recorded_in_the_inbox(q: list[dict[str, Any]], served: Served, db: Path) -> list[Entry]:
    Inbox(f"sqlite:///{db}").record("th", {q[0]["id"]: True}, by="bo")  # a worker applies it
    return [_entry(q[0])]


REFUSALS: dict[str, tuple[str, Callable[..., list[Entry]]]] = {
    "unknown": ("unknown_interrupt", _unknown),
    "duplicate": ("duplicate", _duplicate),
    "mistyped": ("invalid_answer", _mistyped),
    "stale": ("stale", _stale),
    "already answered in the inbox": ("already_answered", _recorded_in_the_inbox),
}


@pytest.mark.parametrize("kind", list(REFUSALS))
def test_a_refused_resume_is_a_run_error_and_changes_nothing(
    kind: str, serve: Any, node_modules: str, tmp_path: Path
) -> None:
    code, entries = REFUSALS[kind]
    served = serve()
    db = tmp_path / "s.db"
    [asked] = drive(node_modules, served.url, "th", [{"prompt": "pay ana and bob"}])
    resume = entries(asked["interrupts"], served, db)
    before = stored(db)
    [refused] = drive(node_modules, served.url, "th", [{"resume": resume}])
    assert refused["error"]["code"] == code, refused
    assert refused["types"][-1] == "RUN_ERROR" and refused["outcome"] is None
    assert stored(db) == before  # byte for byte
    assert not (tmp_path / "paid.log").exists()


def test_an_answer_already_applied_is_refused(
    serve: Any, node_modules: str, tmp_path: Path
) -> None:
    served = serve()
    db = tmp_path / "s.db"
    asked, _ = drive(
        node_modules,
        served.url,
        "th",
        [{"prompt": "pay ana and bob"}, {"resumeLast": {"1": {"approve": True}}}],
    )
    before = stored(db)
    again = [_entry(asked["interrupts"][1]), _entry(asked["interrupts"][0])]
    [refused] = drive(node_modules, served.url, "th", [{"resume": again}])
    assert refused["error"]["code"] == "already_answered"
    assert "by ana" in refused["error"]["message"]
    assert stored(db) == before
    assert (tmp_path / "paid.log").read_text() == "bob 250\n"  # once


@pytest.mark.parametrize("payload", ["high", "medium"])
def test_a_late_or_mistyped_answer_to_a_typed_question_is_refused(
    payload: str, serve: Any, node_modules: str, tmp_path: Path
) -> None:
    served = serve()
    db = tmp_path / "s.db"
    prompt = "restart now" if payload == "high" else "restart later"
    [asked] = drive(node_modules, served.url, "th", [{"prompt": prompt}], agent="asker")
    time.sleep(0.3)
    before = stored(db)
    resume = [_entry(asked["interrupts"][0], payload)]
    [refused] = drive(node_modules, served.url, "th", [{"resume": resume}], agent="asker")
    assert refused["error"]["code"] == ("expired" if payload == "high" else "invalid_answer")
    assert stored(db) == before


def test_an_unsigned_pause_is_refused_when_the_agents_sign(
    serve: Any, node_modules: str, tmp_path: Path
) -> None:
    unsigned = serve()  # agents without a key pause unsigned
    [asked] = drive(node_modules, unsigned.url, "th", [{"prompt": "pay ana"}])
    unsigned.kill()
    signing = serve(AGUI_KEY="k" * 32)
    db = tmp_path / "s.db"
    before = stored(db)
    resume = [_entry(asked["interrupts"][0], metadata=asked["interrupts"][0]["metadata"])]
    [refused] = drive(node_modules, signing.url, "th", [{"resume": resume}])
    assert refused["error"]["code"] == "integrity", refused
    assert stored(db) == before
    assert not (tmp_path / "paid.log").exists()
