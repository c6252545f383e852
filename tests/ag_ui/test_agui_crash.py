"""The serving process is killed (SIGKILL) while an AG-UI resume runs the approved tool: the
client's retry of the same answers is refused, a new run carries the stopped run on from its
journal, and the tool has run exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from agui_harness import HERE, TOKEN, drive, stored


def test_a_kill_while_the_answer_runs_the_tool_still_runs_it_once(
    serve: Any, node_modules: str, tmp_path: Path
) -> None:
    hold = tmp_path / "in-the-body"
    served = serve(AGUI_HOLD=str(hold))
    [asked] = drive(node_modules, served.url, "th", [{"prompt": "pay ana"}])
    [question] = asked["interrupts"]
    approve = {"interruptId": question["id"], "status": "resolved", "payload": True}
    approve["metadata"] = question["metadata"]
    spec = {"url": f"{served.url}/ag-ui/payer", "token": TOKEN, "threadId": "th"}
    in_flight = subprocess.Popen(
        ["node", str(HERE / "client.cjs"), json.dumps({**spec, "runs": [{"resume": [approve]}]})],
        stdout=subprocess.PIPE,
        env={**os.environ, "AGUI_NODE_MODULES": node_modules},
    )
    deadline = time.monotonic() + 30
    while not hold.exists():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    [busy] = drive(node_modules, served.url, "th", [{"prompt": "pay ana again"}])
    assert busy["error"]["code"] == "conflict"  # one run of a session at a time
    served.kill(signal.SIGKILL)  # inside the tool's body, its result not yet kept
    out, _ = in_flight.communicate(timeout=30)
    [cut] = json.loads(out)
    assert cut["outcome"] is None  # the client never heard the run end
    assert (tmp_path / "paid.log").read_text() == "ana 100\n"

    again = serve()  # a new process on the same store
    db = tmp_path / "s.db"
    before = stored(db)
    [retry] = drive(node_modules, again.url, "th", [{"resume": [approve]}])
    assert retry["error"]["code"] == "already_answered"  # the answer was taken once
    assert stored(db) == before

    [recovered] = drive(node_modules, again.url, "th", [{"prompt": "carry on"}])
    assert recovered["outcome"] == "interrupt", recovered
    [doubt] = recovered["interrupts"]
    assert doubt["metadata"]["interlude"]["name"] == "in_doubt"
    assert doubt["toolCallId"] == "t1"
    settle = {"interruptId": doubt["id"], "status": "resolved"}
    settle["payload"] = {"result": "paid 100 to ana"}
    [done] = drive(node_modules, again.url, "th", [{"resume": [settle]}])
    assert done["outcome"] == "success", done
    assert done["text"] == ["done: paid 100 to ana"]
    assert (tmp_path / "paid.log").read_text() == "ana 100\n"  # exactly once
