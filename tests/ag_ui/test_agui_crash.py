"""The serving process is killed (SIGKILL) while an AG-UI resume runs the approved tool: the
client's retry of the same answers is refused, a new run carries the stopped run on from its
journal, and the tool has run exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.support import wait_for

from .harness import Client, stored


def test_a_kill_while_the_answer_runs_the_tool_still_runs_it_once(
    serve: Any, client: Client, tmp_path: Path
) -> None:
    hold = tmp_path / "in-the-body"
    served = serve(AGUI_HOLD=str(hold))
    [asked] = client.drive(served.url, "th", [{"prompt": "pay ana"}])
    [question] = asked["interrupts"]
    approve = {"interruptId": question["id"], "status": "resolved", "payload": True}
    approve["metadata"] = question["metadata"]
    in_flight = subprocess.Popen(  # a client of its own, cut off when the server dies
        client.command(served.url, "th", [{"resume": [approve]}]),
        stdout=subprocess.PIPE,
        env=client.env,
        text=True,
    )
    # Its text, not only the file: the body makes the file, then writes it (two steps).
    wait_for(
        lambda: hold.exists() and hold.read_text(), what="the tool to start", process=in_flight
    )
    assert hold.read_text() == "in the body"
    [busy] = client.drive(served.url, "th", [{"prompt": "pay ana again"}])
    assert busy["error"]["code"] == "conflict"  # one run of a session at a time
    served.kill(signal.SIGKILL)  # inside the tool's body, its result not yet kept
    out, _ = in_flight.communicate(timeout=60)
    [cut] = json.loads(out)
    assert cut["outcome"] is None  # the client never heard the run end
    assert served.paid.read_text() == "ana 100\n"

    again = serve()  # a new process on the same store
    before = stored(again.db)
    [retry] = client.drive(again.url, "th", [{"resume": [approve]}])
    assert retry["error"]["code"] == "already_answered"  # the answer was taken once
    assert stored(again.db) == before

    [recovered] = client.drive(again.url, "th", [{"prompt": "carry on"}])
    assert recovered["outcome"] == "interrupt", recovered
    [doubt] = recovered["interrupts"]
    assert doubt["metadata"]["interlude"]["name"] == "in_doubt"
    assert doubt["toolCallId"] == "t1"
    settle = {"interruptId": doubt["id"], "status": "resolved"}
    settle["payload"] = {"result": "paid 100 to ana"}
    [done] = client.drive(again.url, "th", [{"resume": [settle]}])
    assert done["outcome"] == "success", done
    assert done["text"] == ["done: paid 100 to ana"]
    assert again.paid.read_text() == "ana 100\n"  # exactly once
