"""``interlude undo SESSION --to CHECKPOINT``: the plan with ``--dry-run`` (nothing changes), the
compensations run newest first and once each, a call without one refused (nothing runs) unless
``--skip``-ped, and the same in ``--json``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, AgentSession, App, tool
from interlude.sessions import SQLiteStore
from tests.support.cli import Ran, cli_env, run

from . import undo_agent
from .undo_agent import EFFECTS, build, effect

app = App()
"""The trip agent, each call with its compensation (``--app tests.undo.test_cli_undo:app``)."""

plain = App()
"""The trip agent whose ``mail`` has no compensation (``--app tests.undo.test_cli_undo:plain``)."""


@app.agent("trip")
def trip(session: AgentSession) -> Agent:
    return build(None, session.store, session.id)


@plain.agent("trip")
def plain_trip(session: AgentSession) -> Agent:
    return build(None, session.store, session.id, plain=True)


@tool(needs_approval=True)
def unbook_hotel(input: dict[str, Any], result: Any) -> str:
    """Cancel the hotel (costs a fee)."""
    effect(f"unbook hotel {result}")
    return "unbooked"


gated = App()
"""The trip agent whose hotel is cancelled by a compensation that asks first."""


@gated.agent("trip")
def gated_trip(session: AgentSession) -> Agent:
    hotel = tool(compensate=unbook_hotel, name="hotel")(undo_agent.hotel.fn)
    tools = [undo_agent.pay, undo_agent.flight, hotel, undo_agent.car, undo_agent.mail]
    return Agent(
        undo_agent.Calls().model, tools=tools, name="trip", session=session.store,
        session_id=session.id,
    )  # fmt: skip


@app.graph("tripgraph")
def trip_graph(session: AgentSession) -> Any:
    from interlude.multiagent import Graph

    return Graph(
        {"booker": build()}, [], entry="booker", session=session.store, session_id=session.id
    )


APP = "tests.undo.test_cli_undo:app"
PLAIN = "tests.undo.test_cli_undo:plain"
UNDONE = ["retract mail to ana@example.com", "return car 2 days", "cancel hotel 3 nights"]


@pytest.fixture(autouse=True)
def _no_effects() -> Iterator[None]:
    EFFECTS.clear()
    yield
    EFFECTS.clear()


def booked(tmp_path: Path, session_id: str = "trip-1", *, with_plain: bool = False) -> str:
    """A store where ``session_id`` booked the trip (five calls); its URL."""
    with SQLiteStore(tmp_path / "s.db") as store:
        build(None, store, session_id, plain=with_plain)("Book me a trip")
    EFFECTS.clear()
    return f"sqlite:///{tmp_path / 's.db'}"


def cli(tmp_path: Path, *args: str) -> Ran:
    """``interlude ARGS...`` as user "dee", in this process (the app found from the
    repository)."""
    return run(tmp_path, *args, env=cli_env(USER="dee"))


def stored(tmp_path: Path, session_id: str = "trip-1") -> Any:
    with SQLiteStore(tmp_path / "s.db") as store:
        return asyncio.run(store.load(session_id))


def test_a_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    url = booked(tmp_path)
    before = stored(tmp_path)
    ran = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1", "--to", "m4", "--dry-run")
    ran.ok()
    assert "undoing to m4 runs 3 compensations, newest first" in ran.stdout
    assert "c5  mail  -> mail.undo" in ran.stdout
    assert "c4  car  -> car.undo" in ran.stdout and "c3  hotel  -> cancel_hotel" in ran.stdout
    assert "Nothing was changed (--dry-run)" in ran.stdout
    assert "interlude undo --store" in ran.stdout and "trip-1 --to m4" in ran.stdout
    assert EFFECTS == [] and stored(tmp_path) == before


def test_an_undo_runs_the_compensations_newest_first_once_and_says_what_is_next(
    tmp_path: Path,
) -> None:
    url = booked(tmp_path)
    ran = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1", "--to", "m4", "--by", "ana")
    ran.ok()
    assert EFFECTS == UNDONE
    out = ran.stdout
    assert "session trip-1: undone to m4 by ana" in out
    assert 'c5 (mail) undone by mail.undo: success, "retracted"' in out
    assert out.index("c5 (mail)") < out.index("c4 (car)") < out.index("c3 (hotel)")
    assert "before its next step; carry the run on with" in out
    assert f"interlude recover --store '{url}' --app {APP} trip-1" in out
    after = stored(tmp_path)
    assert len(after.messages) == 5
    undo = [a for a in after.audit if a["name"] == "undo"]
    assert [(a["answer"]["call"], a["by"]) for a in undo] == [
        ("c5", "ana"),
        ("c4", "ana"),
        ("c3", "ana"),
    ]
    shown = cli(tmp_path, "--store", url, "show", "trip-1").ok().stdout
    assert "ana undid c5 (mail) by mail.undo" in shown and "(undo to m4)" in shown
    # once: run again, it is refused (the session holds the stopped run) and nothing runs
    again = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1", "--to", "m4")
    assert again.returncode == 1 and "holds a stopped run" in again.stderr
    assert "recover" in again.stderr and EFFECTS == UNDONE
    # carried on from the checkpoint, the calls after it run again
    cli(tmp_path, "--store", url, "--app", APP, "recover", "trip-1").ok()
    assert EFFECTS[3:] == ["hotel 3", "car 2", "mail ana@example.com"]


def test_a_call_without_a_compensation_is_refused_unless_skipped(tmp_path: Path) -> None:
    url = booked(tmp_path, with_plain=True)
    before = stored(tmp_path)
    refused = cli(tmp_path, "--store", url, "--app", PLAIN, "undo", "trip-1", "--to", "m4")
    assert refused.returncode == 1 and refused.stdout == ""
    err = refused.stderr
    assert "c5 (mail) has no compensation" in err and "nothing was changed" in err
    assert "--skip c5" in err and "Traceback" not in err
    assert EFFECTS == [] and stored(tmp_path) == before
    dry = cli(tmp_path, "--store", url, "--app", PLAIN, "undo", "trip-1", "--to", "m4",
              "--skip", "c5", "--dry-run").ok().stdout  # fmt: skip
    assert "c5  mail  (skipped: left as it is)" in dry and "runs 2 compensations" in dry
    assert "trip-1 --to m4 --skip c5" in dry and EFFECTS == []
    done = cli(tmp_path, "--store", url, "--app", PLAIN, "undo", "trip-1", "--to", "m4",
               "--skip", "c5").ok().stdout  # fmt: skip
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights"]
    assert "c5 (mail) left as it is (--skip)" in done
    stray = cli(tmp_path, "--store", url, "--app", PLAIN, "undo", "trip-1", "--to", "m2",
                "--skip", "c9", "--dry-run")  # fmt: skip
    assert stray.returncode == 1


def test_bad_requests_say_what_is_wrong_with_a_non_zero_exit(tmp_path: Path) -> None:
    url = booked(tmp_path)
    before = stored(tmp_path)
    unknown = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1", "--to", "m42")
    assert unknown.returncode == 1 and "no checkpoint 'm42'" in unknown.stderr
    assert "interlude history" in unknown.stderr
    node = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1", "--to", "m4",
               "--node", "writer")  # fmt: skip
    assert node.returncode == 1 and "--node names a node of a graph's" in node.stderr
    missing = cli(tmp_path, "--store", url, "--app", APP, "undo", "trip-1")
    assert missing.returncode == 2 and "--to" in missing.stderr
    assert EFFECTS == [] and stored(tmp_path) == before


def test_json_gives_the_plan_and_what_was_undone(tmp_path: Path) -> None:
    url = booked(tmp_path, with_plain=True)
    plan = cli(tmp_path, "--store", url, "--app", PLAIN, "--json", "undo", "trip-1", "--to",
               "m4", "--skip", "c5", "--dry-run").json()  # fmt: skip
    assert plan["dry_run"] is True and plan["to"] == "m4" and plan["stands"] == "stopped"
    assert [s["call_id"] for s in plan["steps"]] == ["c4", "c3"]
    assert [s["call_id"] for s in plan["skipped"]] == ["c5"]
    assert plan["steps"][0]["compensation"] == "car.undo" and EFFECTS == []
    refused = cli(tmp_path, "--store", url, "--app", PLAIN, "--json", "undo", "trip-1",
                  "--to", "m4")  # fmt: skip
    assert refused.returncode == 1
    error = json.loads(refused.stdout)
    assert error["session"] == "trip-1" and "c5 (mail) has no compensation" in error["error"]
    done = cli(tmp_path, "--store", url, "--app", PLAIN, "--json", "undo", "trip-1", "--to",
               "m4", "--skip", "c5").json()  # fmt: skip
    assert done["stop_reason"] == "undone" and done["stands"] == "stopped"
    assert done["by"] == "dee" and done["interrupts"] == []
    assert [(u["call"], u.get("skipped", False), u["by"]) for u in done["undone"]] == [
        ("c4", False, "dee"),
        ("c3", False, "dee"),
        ("c5", True, "dee"),
    ]
    assert done["undone"][0]["result"] == "car returned"
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights"]


def test_a_compensation_that_asks_first_waits_for_its_answer(tmp_path: Path) -> None:
    url = booked(tmp_path)
    gate = "tests.undo.test_cli_undo:gated"
    paused = cli(tmp_path, "--store", url, "--app", gate, "undo", "trip-1", "--to", "m4").ok()
    assert UNDONE[:2] == EFFECTS
    assert "The undo waits on a question before its next compensation" in paused.stdout
    assert "approval (unbook_hotel)" in paused.stdout
    hint = next(line.strip() for line in paused.stdout.splitlines() if " answer " in line)
    assert hint.endswith(" true") and "trip-1" in hint
    asked = cli(tmp_path, "--store", url, "--json", "pending").json()
    (question,) = [q for q in asked if q["session"] == "trip-1"]
    assert question["tool"] == "unbook_hotel"
    answered = cli(tmp_path, "--store", url, "--app", gate, "answer", "trip-1", question["id"],
                   "true", "--by", "bo").ok()  # fmt: skip
    assert "undone" in answered.stdout
    assert [*UNDONE[:2], "unbook hotel H-3"] == EFFECTS
    assert len(stored(tmp_path).messages) == 5


def test_a_graph_node_is_undone_with_node(tmp_path: Path) -> None:
    from interlude.multiagent import Graph

    if not hasattr(Graph, "undo_async"):
        pytest.skip("graphs have no undo_async yet")
    with SQLiteStore(tmp_path / "s.db") as store:
        graph = app.start("tripgraph", "g-1", store)
        assert str(graph("Book me a trip")).count("Your trip is booked.") >= 1
    EFFECTS.clear()
    url = f"sqlite:///{tmp_path / 's.db'}"
    bare = cli(tmp_path, "--store", url, "--app", APP, "undo", "g-1", "--to", "m4")
    assert bare.returncode == 1 and "--node NAME" in bare.stderr
    assert "g-1:node:NAME" in bare.stderr
    nobody = cli(tmp_path, "--store", url, "--app", APP, "undo", "g-1", "--to", "m4",
                 "--node", "nobody")  # fmt: skip
    assert nobody.returncode == 1 and "no node 'nobody'" in nobody.stderr
    dry = cli(tmp_path, "--store", url, "--app", APP, "undo", "g-1", "--node", "booker",
              "--to", "m4", "--dry-run").ok().stdout  # fmt: skip
    assert "session g-1 (node booker): undoing to m4 runs 3 compensations" in dry
    assert "--node booker g-1 --to m4" in dry and EFFECTS == []
    done = cli(tmp_path, "--store", url, "--app", APP, "--json", "undo", "g-1", "--node",
               "booker", "--to", "m4", "--by", "ana").json()  # fmt: skip
    assert EFFECTS == UNDONE
    assert done["node"] == "booker" and done["stop_reason"] == "undone"
    assert done["stands"] == "stopped"
    assert [u["call"] for u in done["undone"]] == ["c5", "c4", "c3"]
    text = cli(tmp_path, "--store", url, "--app", APP, "undo", "g-1", "--node", "booker",
               "--to", "m2", "--dry-run")  # fmt: skip
    assert text.returncode == 1  # the graph holds a stopped run: recover it first
    cli(tmp_path, "--store", url, "--app", APP, "recover", "g-1").ok()
    assert EFFECTS[3:] == ["hotel 3", "car 2", "mail ana@example.com"]
