"""The first answer wins with the worker running: one serving process started with
``interlude serve --app tests.doors.doors_app:app --worker`` (its worker applies an inbox answer
as soon as it is recorded, and polls for answers recorded elsewhere) takes Ana's answer in the
inbox, while a second serving process (no worker) takes Bo's, the opposite one, over AG-UI or
A2A at the same instant. Try after try, on a fresh session each:

- exactly one of the two answers is taken;
- the other is refused with ``already_answered`` (the inbox API: 409 with that code);
- the answer taken is the one in the audit trail, and nothing is left recorded: an answer the
  inbox accepted (202) is never silently dropped;
- the tool runs once if the approval was taken, never otherwise.

(Issue 34: A2A overrode a decline recorded in the inbox in 3 of 4 races with the worker.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .answering import Outcome, answer_via, at_once, pause
from .conftest import Doors, serve_doors
from .doors_app import effects
from .served import ANA, BO, inbox_answer, snapshot

TRIES = 40
"""Races per door (each a fresh session); half with the decline in the inbox, half with the
approval there."""
LEADS = [-0.03, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12]
"""How much later (in seconds; negative: sooner) the inbox's answer leaves than the other
door's, try after try: before the other door reads the session, while it builds the agent (50
ms), after it has recorded its answer and while it runs."""
SETTLE_SECONDS = 10.0
"""How long a try waits for the session to finish its run (the worker's or the door's)."""


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    """``serve --worker`` (the inbox answers go there) and a serving process without a
    worker whose agents take 50 ms to build (the protocol answers go there), on one store."""
    slow = {"DOORS_BUILD_SECONDS": "0.05"}
    worker = ["--worker", "--poll", "0.1"]
    yield from serve_doors(tmp_path_factory.mktemp("race-worker"), {}, slow, args=[worker])


def _settled(store_url: str, session: str, timeout: float) -> tuple[Any, ...] | None:
    """The session's snapshot once its run is over (the model's last reply saved, no answer
    left recorded); None if it is not over after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = snapshot(store_url, session)
        (_, messages, pause_), recorded, _ = got
        last = messages[-1] if messages else {}
        texts = [b.get("text", "") for b in last.get("content", []) if isinstance(b, dict)]
        done = last.get("role") == "assistant" and any(t.startswith("finished") for t in texts)
        if done and pause_ is None and not recorded:
            return got
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def _inbox(response: httpx.Response) -> tuple[int, str | None]:
    body = response.json() if response.content else {}
    return response.status_code, body.get("code") if isinstance(body, dict) else None


def _problems(
    store_url: str,
    session: str,
    iid: str,
    answers: dict[str, Any],
    inbox: tuple[int, str | None],
    other: Outcome,
) -> list[str]:
    """What broke the first answer in one race (``[]``: nothing)."""
    status, inbox_code = inbox
    said = f"inbox {status} {inbox_code}; {other}"
    if (status == 202) == other.taken:
        return [f"{session}: {'both' if other.taken else 'neither'} taken: {said}"]
    problems: list[str] = []
    if other.taken and (status, inbox_code) != (409, "already_answered"):
        problems.append(f"{session}: the inbox lost without 409 already_answered: {said}")
    if status == 202 and other.code != "already_answered":
        problems.append(f"{session}: {other.door} lost without already_answered: {said}")
    winner = ("bo", answers["bo"]) if other.taken else ("ana", answers["ana"])
    settled = _settled(store_url, session, SETTLE_SECONDS)
    if settled is None:
        now = snapshot(store_url, session)
        return [*problems, f"{session}: never settled ({said}); now {now[1]}, audit {now[2]}"]
    trail = [(e["by"], e["answer"]) for e in settled[2] if e["interrupt_id"] == iid]
    if trail != [winner]:
        problems.append(f"{session}: {winner} was taken, the audit says {trail}: {said}")
    ran = effects(session)
    if ran != ([f"pay {session} 100"] if winner[1] is True else []):
        problems.append(f"{session}: {winner} was taken, the tool ran {ran}: {said}")
    return problems


def _race(
    doors: Doors, door: str, session: str, ana: dict[str, Any], bo: dict[str, Any], i: int
) -> tuple[tuple[int, str | None], Outcome]:
    """Ana's answers to the inbox of ``serve --worker``, Bo's through ``door`` of the other
    process, released together (try ``i``'s lead)."""
    worker, protocol = doors.servers
    return at_once(
        lambda: _inbox(inbox_answer(worker.url, ANA, session, ana)),
        lambda: answer_via(door, protocol.url, BO, "payer", session, bo),
        LEADS[i % len(LEADS)],
    )


@pytest.mark.parametrize("door", ["ag-ui", "a2a"])
def test_an_inbox_answer_the_worker_applies_at_once_races_a_protocol_answer(
    doors: Doors, door: str
) -> None:
    problems: list[str] = []
    wins = {"inbox": 0, door: 0}
    for i in range(TRIES):
        session = f"worker-race-{door}-{i}"
        inbox_approves = i % 2 == 1
        answers = {"ana": inbox_approves, "bo": not inbox_approves}
        iid = pause(doors.store_url, "payer", session)
        inbox, other = _race(doors, door, session, {iid: answers["ana"]}, {iid: answers["bo"]}, i)
        wins[door if other.taken else "inbox"] += 1
        problems += _problems(doors.store_url, session, iid, answers, inbox, other)
    assert problems == [], f"{len(problems)} problems in {TRIES} races (wins {wins}):\n" + (
        "\n".join(problems)
    )
