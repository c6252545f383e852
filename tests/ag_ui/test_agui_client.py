"""An AG-UI client (``@ag-ui/client`` under Node) drives Interlude agents served by
``interlude serve --app``: a pause and its answer, several questions at once, partial answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agui_harness import drive

from interlude.sessions import Inbox


def test_an_ag_ui_client_drives_an_agent_through_a_pause_and_an_answer(
    serve: Any, node_modules: str, tmp_path: Path
) -> None:
    served = serve()
    asked, answered = drive(
        node_modules, served.url, "th-1", [{"prompt": "pay ana"}, {"answer": {"approve": True}}]
    )
    assert asked["error"] is None and asked["thrown"] is None
    assert asked["outcome"] == "interrupt"
    [question] = asked["interrupts"]
    assert question["toolCallId"] == "t1" and question["reason"] == "approval"
    assert question["message"] == "May the agent run pay with this input?"
    assert question["responseSchema"]["anyOf"][0] == {"type": "boolean"}
    assert question["metadata"]["interlude"]["toolUse"] == {
        "name": "pay",
        "input": {"to": "ana", "cents": 100},
    }
    assert asked["types"][0] == "RUN_STARTED" and asked["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in asked["types"] and asked["pending"] == [question["id"]]

    assert answered["error"] is None and answered["outcome"] == "success"
    assert answered["results"] == ["paid 100 to ana"]
    assert answered["text"][-1] == "done: paid 100 to ana"
    assert answered["pending"] == []
    assert (tmp_path / "paid.log").read_text() == "ana 100\n"
    [entry] = Inbox(f"sqlite:///{tmp_path / 's.db'}").audit("th-1")
    assert (entry["interrupt_id"], entry["by"]) == (question["id"], "ana")
